"""`terrapin-controller --config FILE`: the controller process.

One asyncio loop runs everything: the REST server (uvicorn), one P4Runtime stream per switch
(finsy), the reservation protocol's PacketIn handler and the expiry of tentative holds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import uvicorn
from fastapi import FastAPI

from terrapin.admission import AdmissionLedger
from terrapin.admission.model import ChannelKey
from terrapin.api import JsonErrorsH11Protocol, Telemetry, create_app
from terrapin.config import Config, ConfigError, load_config
from terrapin.dashboard import operator_router, static_files
from terrapin.metrics import ControllerMetrics, InstrumentedReservationService
from terrapin.monitor import BoundsFirstProgrammer, EventLog, GuaranteeMonitor, MonitorFabric
from terrapin.paths import ChannelProgrammer, Topology
from terrapin.protocol.handler import ProtocolHandler
from terrapin.protocol.status import ChannelRecord, QueueRecord, StatusRecord, StatusReport
from terrapin.reservations import ReservationService
from terrapin.store import NotPrimary, ReservationStore, StoreUnavailable
from terrapin.switches import DesiredChannels, PacketHandler, ReconcileReport, SwitchFabric

LOG = logging.getLogger("terrapin")


class Fabric(Telemetry, ChannelProgrammer, MonitorFabric, Protocol):
    """What the controller needs from the switches: SwitchFabric, or tests' FakeFabric."""

    reconciled: dict[str, ReconcileReport]

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def packet_out(self, name: str, frame: bytes, egress_port: int | None = None) -> None: ...


FabricFactory = Callable[[Config, Topology, PacketHandler, DesiredChannels], Fabric]


def real_fabric(config_dir: Path | None) -> FabricFactory:
    def make(config: Config, topo: Topology, on_packet: PacketHandler, desired: DesiredChannels) -> Fabric:
        return SwitchFabric(config, topo, on_packet, desired, config_dir=config_dir)

    return make


class Controller:
    """Everything wired together; `app` is the FastAPI application."""

    def __init__(
        self,
        config: Config,
        config_dir: Path | None = None,
        fabric_factory: FabricFactory | None = None,
    ) -> None:
        self.config = config
        self.topology = Topology(config)
        # Hold deadlines are wall-clock, the one clock every replica reads the same way.
        self.ledger = AdmissionLedger(config.port_models(), clock=time.time)
        self.store = ReservationStore(_resolve(config_dir, config.store), self.ledger)
        factory = fabric_factory or real_fabric(config_dir)
        self.fabric = factory(
            config, self.topology, self._on_packet, lambda name: self.service.desired_entries(name)
        )
        self.metrics = ControllerMetrics(self.ledger)
        self.events = EventLog(_resolve(config_dir, config.store), config.monitor.history)
        self.monitor = GuaranteeMonitor(
            self.ledger,
            lambda: self.service.list(),
            lambda record: self.service.entries(record),
            self.fabric,
            self.events,
            config.monitor,
            self.metrics,
        )
        service = InstrumentedReservationService(
            self.ledger,
            self.topology,
            self.store,
            BoundsFirstProgrammer(self.fabric, self.monitor),
            config.excess == "demote",
        )
        service.metrics = self.metrics
        self.service: ReservationService = service
        # Set when the process is asked to stop, before the HTTP server drains its connections:
        # the dashboard's event streams end on it (they would otherwise hold the shutdown).
        self.stopping = asyncio.Event()
        self.handler = ProtocolHandler(
            self.service,
            send=self.fabric.packet_out,
            status=self.status_report,
            hold_seconds=config.protocol.hold_seconds,
            max_holds_per_initiator=config.protocol.max_holds_per_initiator,
        )
        self.token = config.rest_token()
        unfinished = self.service.rollback_unfinished()
        LOG.info(
            "restored %d reservations and %d holds from the store (%d unfinished rolled back)",
            self.store.count(),
            len(self.store.holds()),
            unfinished,
        )
        self.app = create_app(self.service, self.fabric, self.token, self._health_extra)
        self.app.include_router(
            operator_router(self.monitor, self.metrics, config, self.stopping, self.token)
        )
        self.app.mount("/static", static_files(), name="static")
        self.app.router.lifespan_context = self._lifespan

    async def _on_packet(self, switch: str, port: int, frame: bytes) -> None:
        await self.handler.handle_packet_in(switch, port, frame)

    async def _health_extra(self) -> dict[str, Any]:
        return {
            "protocol": dict(self.handler.counters),
            "reconciled": {k: v.__dict__ for k, v in self.fabric.reconciled.items()},
        }

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: FastAPI) -> AsyncIterator[None]:
        self.stopping.clear()
        self.fabric.start()
        tasks = [asyncio.create_task(self._expire_holds())]
        if self.config.monitor.enabled:
            tasks.append(asyncio.create_task(self.monitor.run(), name="monitor"))
        try:
            yield
        finally:
            self.stopping.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.fabric.stop()

    async def _expire_holds(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            try:
                self.service.expire_holds()
                await self.service.retry_unfinished()
            except (StoreUnavailable, NotPrimary) as exc:
                LOG.warning("store upkeep postponed: %s", exc)

    async def status_report(self, switch: str, key: ChannelKey | None) -> StatusReport:
        """REPORT_STATUS: this router's queues (allocation and telemetry) and channels."""
        device_id = next(s.device_id for s in self.config.switches if s.name == switch)
        ports = sorted(p for p in self.ledger.ports if p.switch == switch)
        records: list[StatusRecord] = []
        channels = [
            (alloc, hop)
            for alloc, _state in self.ledger.channels()
            for hop in alloc.hops
            if hop.port.switch == switch and (key is None or alloc.key == key)
        ]
        wanted_ports = {hop.port for _a, hop in channels} if key is not None else set(ports)
        telemetry = {}
        try:
            for item in await self.fabric.queue_telemetry(switch, [p.port for p in ports]):
                telemetry[(item.port, item.priority)] = item
        except Exception as exc:
            LOG.warning("switch %s telemetry unavailable: %s", switch, exc)
        for pid in ports:
            if pid not in wanted_ports:
                continue
            status = self.ledger.port_status(pid)
            for level in status.levels:
                if level.channels == 0:
                    continue
                q = telemetry.get((pid.port, level.priority))
                records.append(
                    QueueRecord(
                        port=pid.port,
                        priority=level.priority,
                        channels=level.channels,
                        allocated_rate=level.rate,
                        reservable_rate=status.reservable_rate,
                        allocated_burst=level.burst,
                        queue_capacity=status.queue_capacity,
                        max_depth_packets=q.max_depth_packets if q else 0,
                        max_delay_us=q.max_delay_us if q else 0,
                        worst_case_delay_us=level.worst_case_delay_us or 0,
                    )
                )
        for alloc, hop in channels:
            records.append(
                ChannelRecord(
                    port=hop.port.port,
                    priority=hop.priority,
                    context=alloc.key.context,
                    initiator=alloc.key.initiator,
                    destination=self._destination(alloc.key),
                    rate=hop.rate,
                    burst=hop.burst,
                    protected_delay_us=hop.protected_delay_us or 0,
                    worst_case_delay_us=hop.worst_case_delay_us,
                    max_packet=hop.max_packet,
                )
            )
        return StatusReport(device_id=device_id, records=tuple(records))

    def _destination(self, key: ChannelKey) -> str:
        record = self.store.get(key)
        return record.selector.dst if record else "0.0.0.0"


def _resolve(base: Path | None, path: str) -> str:
    if path == ":memory:":
        return path
    p = Path(path)
    return str(p if p.is_absolute() or base is None else base / p)


def rest_server(app: FastAPI, host: str, port: int, log_level: str = "info") -> uvicorn.Server:
    """The REST server: uvicorn with JSON answers also for requests it cannot parse."""
    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            lifespan="on",
            http=JsonErrorsH11Protocol,
        )
    )


@contextlib.contextmanager
def pid_file(path: str | None) -> Iterator[None]:
    """Record this process's PID while it runs (`make stop` stops what build/run/pids lists)."""
    if path is None:
        yield
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        # Only our own record: a newer controller may have taken the file over meanwhile.
        with contextlib.suppress(OSError):
            if target.read_text().strip() == str(os.getpid()):
                target.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="terrapin-controller",
        description="Terrapin controller: admission control, reservation protocol, REST API.",
    )
    parser.add_argument("--config", required=True, help="YAML or TOML configuration file")
    parser.add_argument("--host", help="REST address (default from config: 127.0.0.1)")
    parser.add_argument("--port", type=int, help="REST port (default from config: 8080)")
    parser.add_argument(
        "--base-dir",
        help="directory relative paths in the config are resolved against (default: cwd)",
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--pid-file", help="write the PID here while running (make run records its own)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"terrapin-controller: {exc}", file=sys.stderr)
        return 2
    base = Path(args.base_dir) if args.base_dir else Path.cwd()
    controller = Controller(config, base)
    if not config.rest.token and not config.rest.token_file:
        LOG.warning("no REST token configured; this run's token is %s", controller.token)
    server = rest_server(
        controller.app,
        host=args.host or config.rest.host,
        port=args.port if args.port is not None else config.rest.port,
        log_level=args.log_level.lower(),
    )
    loop = asyncio.new_event_loop()

    def stop() -> None:
        controller.stopping.set()
        server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    try:
        with pid_file(args.pid_file):
            loop.run_until_complete(server.serve())
    finally:
        controller.store.close()
        controller.events.close()
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
