"""The primary's watch over the trunks (docs/controller.md, "Trunks"): the link watch (links.py)
judging which trunks carry traffic, feeding the restoration (restoration.py) that moves channels
off those that do not, and what the two report to the log, the metrics and /health."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from terrapin.api import RestorationChangeOut, RestorationOut, TrunkOut
from terrapin.config import Config
from terrapin.links import LinkWatch, port_macs
from terrapin.metrics import ControllerMetrics
from terrapin.monitor import GuaranteeMonitor
from terrapin.monitor.trunks import moved_findings
from terrapin.paths import Topology, Trunk
from terrapin.reservations import ReservationService
from terrapin.restoration import Notify, Report, Restoration, Switches
from terrapin.store import DOWN

LOG = logging.getLogger("terrapin")


class TrunkFabric(Switches, Protocol):
    async def packet_out(self, name: str, frame: bytes, egress_port: int | None = None) -> None: ...

    def port_carrier(self, name: str, port: int) -> bool | None: ...

    async def round_trip(self, name: str) -> None: ...

    def is_connected(self, name: str) -> bool: ...


class TrunkKeeper:
    """Probes and restores while `acting()` (the primary, or the only controller). Without
    trunks, or with `links.enabled` false, only restores (the down channels a store may hold
    are retried when asked)."""

    def __init__(
        self,
        config: Config,
        topology: Topology,
        fabric: TrunkFabric,
        service: ReservationService,
        notify: Notify,
        metrics: ControllerMetrics,
        monitor: GuaranteeMonitor,
        acting: Callable[[], bool],
    ) -> None:
        self._service = service
        self._topology = topology
        self._metrics = metrics
        self._monitor = monitor
        self._acting = acting
        self.links = (
            LinkWatch(
                topology,
                port_macs(config),
                fabric.packet_out,
                fabric.is_ready,
                config.links,
                carrier=fabric.port_carrier,
                reach=fabric.round_trip,
                connected=fabric.is_connected,
            )
            if config.links.enabled and topology.trunks
            else None
        )
        self.restoration = Restoration(service, topology, fabric, notify=notify, on_report=self._restored)
        service.capacity_freed = self._capacity_freed

    def _capacity_freed(self) -> None:
        if self._acting():
            self.restoration.capacity_freed()

    def take_over(self) -> None:
        """This replica takes the lease: it routes as if every trunk were up, as its link watch
        starts (LinkWatch.reset), until the watch says otherwise. The routes its own earlier term
        left are not this term's: found by `make chaos` (seed 7, 30 min), a replica that took
        over reconciled the switches with the routes of a term that had ended with every trunk
        judged down, removed every route across a trunk, and the best-effort traffic (and the
        down channels', demoted) was dropped until its watch first announced, 0.3 s later."""
        self._topology.set_down(frozenset())

    def on_packet(self, switch: str, port: int, frame: bytes) -> bool:
        """A PacketIn: True if it was the link watch's (a probe)."""
        return self.links is not None and self.links.on_probe(switch, port, frame)

    def health(self) -> list[TrunkOut] | None:
        if self.links is None:
            return None
        return [
            TrunkOut(trunk=str(s.trunk), up=s.up, changed_at=s.changed_at or None, why=s.why or None)
            for s in self.links.statuses()
        ]

    async def run(self) -> None:
        """The link watch's loop, until cancelled (at once without one)."""
        if self.links is None:
            return
        restoration = self.restoration

        async def changed(down: frozenset[Trunk]) -> None:
            restoration.trunks_changed(down)

        await self.links.run(changed, acting=self._acting)

    async def stop(self) -> None:
        await self.restoration.stop()

    def last(self) -> RestorationOut | None:
        """The last restoration, for /health."""
        report = self.restoration.last
        if report is None:
            return None
        return RestorationOut(
            down=report.down,
            started_at=report.started_at,
            finished_at=report.finished_at,
            store_ms=round(report.store_s * 1000, 1),
            switches_ms=round(report.switches_s * 1000, 1),
            changes=[
                RestorationChangeOut(
                    reservation=c.reservation_id, channel=c.channel, kind=c.kind, what=c.describe()
                )
                for c in report.changes
            ],
            errors=report.errors,
        )

    def _restored(self, report: Report) -> None:
        down = sum(1 for r in self._service.list() if r.state == DOWN)
        self._metrics.observe_restoration(report, down)
        for finding in moved_findings(report):
            self._monitor.record_episode(finding, report.started_at, report.finished_at)
        LOG.warning(
            "restoration around %s: %d moved, %d down, %d restored in %.0f ms (store %.0f, switches %.0f)%s",
            ", ".join(report.down) or "no trunk down",
            report.count("moved"),
            report.count("down"),
            report.count("restored"),
            (report.store_s + report.switches_s) * 1000,
            report.store_s * 1000,
            report.switches_s * 1000,
            f"; not written: {report.errors}" if report.errors else "",
        )
