"""Where a channel request may be admitted: its path (and a protected channel's second,
disjoint path) through the topology as it stands, or the denial that says why there is none.
Checked before the store is touched, so a request that cannot be routed holds nothing."""

from __future__ import annotations

from terrapin.admission import Denial
from terrapin.admission.model import PortId
from terrapin.channel_requests import SWITCH_UNAVAILABLE, ChannelRequest, simple_denial
from terrapin.constants import DenialReason
from terrapin.paths import ChannelProgrammer, NoRoute, PathPair, Topology
from terrapin.protection import disjoint_pair


def request_route(
    topology: Topology, programmer: ChannelProgrammer, request: ChannelRequest, first_switch: str | None
) -> tuple[list[PortId], list[PortId] | None] | Denial:
    """The path (and a protected channel's second path), or why there is none to admit on
    (checked before the store is touched)."""
    if request.selector.src == request.selector.dst:
        # The path would be the host's own port: capacity reserved for nothing.
        return simple_denial(
            request.key, DenialReason.INVALID_REQUEST, "invalid.dst", "destination is the source itself"
        )
    second: list[PortId] | None = None
    try:
        if request.protected:
            pair = disjoint_pair(topology, request.selector, first_switch)
            if isinstance(pair, PathPair):
                path, second = list(pair.first), list(pair.second)
            elif request.protection_optional:
                path = topology.path(request.selector.src, request.selector.dst, first_switch)
            else:
                return simple_denial(
                    request.key, DenialReason.NO_DISJOINT_PATHS, "no_disjoint_paths", str(pair)
                )
        else:
            path = topology.path(request.selector.src, request.selector.dst, first_switch)
    except NoRoute as exc:
        return _no_route(topology, programmer, request, str(exc))
    down = [hop for hop in path + (second or []) if not programmer.is_ready(hop.switch)]
    if down:
        # Checked before admission, so an outage answers at once and holds nothing.
        return simple_denial(
            request.key,
            DenialReason.SWITCH_ERROR,
            SWITCH_UNAVAILABLE,
            f"switch {down[0].switch} is not connected; nothing was reserved",
            port=down[0],
        )
    return path, second


def _no_route(topology: Topology, programmer: ChannelProgrammer, request: ChannelRequest, why: str) -> Denial:
    """No path: if trunks are down because a switch is not connected, the switch is
    unavailable (503, as on a path that still crosses it: try again later); otherwise no
    route, naming the trunks found down."""
    ends = sorted({end for trunk in topology.down for end in trunk.ends})
    gone = [end for end in ends if not programmer.is_ready(end.switch)]
    if gone:
        return simple_denial(
            request.key,
            DenialReason.SWITCH_ERROR,
            SWITCH_UNAVAILABLE,
            f"switch {gone[0].switch} is not connected and no other path exists; nothing was reserved",
            port=gone[0],
        )
    if topology.down:
        names = ", ".join(str(t) for t in sorted(topology.down))
        many = len(topology.down) > 1
        why += f" while trunks {names} are down" if many else f" while trunk {names} is down"
    return simple_denial(request.key, DenialReason.NO_ROUTE, "no_route", why)
