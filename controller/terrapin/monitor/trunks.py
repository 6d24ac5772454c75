"""The promises a dead trunk breaks, as the guarantee monitor reports them (docs/controller.md,
"Trunks"): pure, from the store's reservations and the topology's down trunks."""

from __future__ import annotations

from collections.abc import Iterable

from terrapin.admission.model import HopAllocation, PortId
from terrapin.monitor.checks import CHANNEL_DOWN, NETWORK, PATH_DOWN, Finding
from terrapin.paths import Topology, Trunk
from terrapin.restoration import Report
from terrapin.store import DOWN, Reservation


def path_findings(reservations: Iterable[Reservation], topology: Topology) -> list[Finding]:
    """Every promise a dead trunk breaks (docs/controller.md, "Trunks"): a channel whose path
    crosses one, named with the trunk at its first hop on it, until it is moved or closed (a
    protected channel only when both its paths do: docs/controller.md "Protection"); and a
    channel no path admits, down, until one does."""
    found = []
    for record in reservations:
        channel = str(record.key)
        where: PortId | None = None
        if record.state == DOWN:
            where = record.allocation.hops[0].port
            kind = CHANNEL_DOWN
            message = f"reservation {record.reservation_id} ({channel}) is down: {record.note}"
        else:
            cuts = [_first_cut(path, topology) for path in record.allocation.paths]
            if all(cut is not None for cut in cuts) and cuts[0] is not None:
                where, trunk = cuts[0]
                kind = PATH_DOWN
                message = (
                    f"reservation {record.reservation_id} ({channel}) leaves {where} on trunk"
                    f" {trunk}, which is down"
                )
                if len(cuts) > 1:
                    message += "; its other path is cut too"
        if where is not None:
            priority = record.allocation.requested.priority
            finding = Finding(
                kind, NETWORK, where.switch, where.port, priority, record.reservation_id, channel,
                None, 0, "", 0, message,
            )  # fmt: skip
            found.append(finding)
    return found


def _first_cut(path: Iterable[HopAllocation], topology: Topology) -> tuple[PortId, Trunk] | None:
    """The first hop of `path` on a trunk that is down, and the trunk."""
    for hop in path:
        trunk = topology.trunk_at(hop.port)
        if trunk is not None and trunk in topology.down:
            return hop.port, trunk
    return None


def moved_findings(report: Report) -> list[Finding]:
    """The broken promise of each channel a restoration moved: a path_down episode from the
    restoration's start to its end, at the channel's first hop on a trunk that went down (none
    for a protected channel that ran on its whole path meanwhile)."""
    dead = {end for trunk in report.down for end in trunk.split("-")}
    found = []
    took_ms = round((report.store_s + report.switches_s) * 1000)
    for change in report.changes:
        if change.kind != "moved" or change.protected:
            continue
        where = next((port for port in change.before if port in dead), change.before[0])
        switch, _, port = where.rpartition(":")
        message = (
            f"reservation {change.reservation_id} ({change.channel}) lost its path at {where} when"
            f" {', '.join(report.down)} went down; moved to {' > '.join(change.after)} in {took_ms} ms"
        )
        finding = Finding(
            PATH_DOWN, NETWORK, switch, int(port), change.priority, change.reservation_id, change.channel,
            took_ms, 0, "ms", 0, message,
        )  # fmt: skip
        found.append(finding)
    return found
