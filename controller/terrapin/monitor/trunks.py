"""The promises a dead trunk breaks, as the guarantee monitor reports them (docs/controller.md,
"Trunks"): pure, from the store's reservations and the topology's down trunks."""

from __future__ import annotations

from collections.abc import Iterable

from terrapin.admission.model import PortId
from terrapin.monitor.checks import CHANNEL_DOWN, NETWORK, PATH_DOWN, Finding
from terrapin.paths import Topology
from terrapin.restoration import Report
from terrapin.store import DOWN, Reservation


def path_findings(reservations: Iterable[Reservation], topology: Topology) -> list[Finding]:
    """Every promise a dead trunk breaks (docs/controller.md, "Trunks"): a channel whose path
    crosses one, named with the trunk at its first hop on it, until it is moved or closed; and a
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
            for hop in record.allocation.hops:
                trunk = topology.trunk_at(hop.port)
                if trunk is not None and trunk in topology.down:
                    where = hop.port
                    kind = PATH_DOWN
                    message = (
                        f"reservation {record.reservation_id} ({channel}) leaves {hop.port} on trunk"
                        f" {trunk}, which is down"
                    )
                    break
        if where is not None:
            priority = record.allocation.requested.priority
            finding = Finding(
                kind, NETWORK, where.switch, where.port, priority, record.reservation_id, channel,
                None, 0, "", 0, message,
            )  # fmt: skip
            found.append(finding)
    return found


def moved_findings(report: Report) -> list[Finding]:
    """The broken promise of each channel a restoration moved: a path_down episode from the
    restoration's start to its end, at the channel's first hop on a trunk that went down."""
    dead = {end for trunk in report.down for end in trunk.split("-")}
    found = []
    took_ms = round((report.store_s + report.switches_s) * 1000)
    for change in report.changes:
        if change.kind != "moved":
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
