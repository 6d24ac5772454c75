"""`terrapin-controller --config FILE`: the controller process.

One asyncio loop runs everything: the REST server (uvicorn), one P4Runtime stream per switch
(finsy), the reservation protocol's PacketIn handler and the expiry of tentative holds. With
`--replica NAME --replica-index N` (and a PostgreSQL store) it is one replica of several, and
also runs the lease loop (terrapin/replication.py; docs/deployment.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import uvicorn
from fastapi import FastAPI

from terrapin import tls
from terrapin.admission import AdmissionLedger
from terrapin.admission.model import ChannelKey
from terrapin.api import (
    JsonErrorsH11Protocol,
    OperatorContext,
    ReplicaOut,
    Telemetry,
    Tokens,
    create_app,
)
from terrapin.config import Config, ConfigError, load_config
from terrapin.forwarding import forward_writes
from terrapin.metrics import ControllerMetrics, InstrumentedReservationService
from terrapin.monitor import BoundsFirstProgrammer, EventLog, GuaranteeMonitor, MonitorFabric
from terrapin.paths import ChannelEntry, ChannelProgrammer, Topology
from terrapin.process import pid_file, tune_garbage_collector, with_flags
from terrapin.protocol.handler import ProtocolHandler
from terrapin.protocol.status import ChannelRecord, QueueRecord, StatusRecord, StatusReport
from terrapin.replication import ReplicaIdentity, Replication
from terrapin.reservations import ReservationService
from terrapin.store import NotPrimary, ReservationStore, SchemaTooNew, StoreUnavailable, is_postgres
from terrapin.switches import DesiredChannels, PacketHandler, ReconcileReport, SwitchFabric
from terrapin.trunks import TrunkKeeper

LOG = logging.getLogger("terrapin")

# The journal is kept this long (a replica further behind rebuilds its copy from the tables).
JOURNAL_KEEP_S = 600.0
JOURNAL_PRUNE_EVERY_S = 60.0
# How often the switches' entries are encoded ahead of a reconciliation: often on a backup (a
# takeover then only reads and compares), rarely on the primary (to forget removed channels).
PRECOMPUTE_BACKUP_EVERY_S = 2.0
PRECOMPUTE_PRIMARY_EVERY_S = 60.0


class Fabric(Telemetry, ChannelProgrammer, MonitorFabric, Protocol):
    """What the controller needs from the switches: SwitchFabric, or tests' FakeFabric."""

    reconciled: dict[str, ReconcileReport]

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def packet_out(self, name: str, frame: bytes, egress_port: int | None = None) -> None: ...

    def port_carrier(self, name: str, port: int) -> bool | None: ...

    async def round_trip(self, name: str) -> None: ...

    def is_connected(self, name: str) -> bool: ...

    def precompute(self, desired: Mapping[str, Sequence[ChannelEntry]], encode: bool = True) -> int: ...

    async def reconcile(self, name: str) -> ReconcileReport: ...


class ReplicaFabric(Fabric, Protocol):
    """What a replica needs besides: to become every switch's primary, and to stop being it."""

    async def claim(self, term: int) -> dict[str, bool]: ...

    async def step_down(self) -> None: ...

    def fence_writes(self, may_write: Callable[[], bool]) -> None: ...


class StoreProbe:
    """Looks at the store for /health, in a thread and one look at a time: a store that does not
    answer (a connect timeout) must neither hold the event loop nor tie up a thread per request
    while a probe polls. Callers that come while a look is under way share its answer."""

    def __init__(self, look: Callable[[], str | None]) -> None:
        self._look = look
        self._looking: asyncio.Future[str | None] | None = None

    async def problems(self) -> list[str]:
        if self._looking is None or self._looking.done():
            self._looking = asyncio.ensure_future(asyncio.to_thread(self._look))
        problem = await asyncio.shield(self._looking)
        return [] if problem is None else [problem]


# (config, topology, PacketIn handler, desired channels, replica index or None) → the switches
FabricFactory = Callable[[Config, Topology, PacketHandler, DesiredChannels, int | None], Fabric]


def real_fabric(config_dir: Path | None) -> FabricFactory:
    def make(
        config: Config,
        topo: Topology,
        on_packet: PacketHandler,
        desired: DesiredChannels,
        replica: int | None,
    ) -> Fabric:
        return SwitchFabric(config, topo, on_packet, desired, config_dir=config_dir, replica_index=replica)

    return make


def replica_identity(config: Config) -> ReplicaIdentity | None:
    """This process's replica identity, when the configuration (and flags) make it one."""
    r = config.replication
    if r is None:
        return None
    if r.replica is None or r.index is None:
        raise ConfigError("replication: name this replica and its index (--replica NAME --replica-index N)")
    scheme = "https" if config.rest.tls else "http"
    url = r.url or f"{scheme}://{config.rest.host}:{config.rest.port}"
    return ReplicaIdentity(r.replica, r.index, url, r.lease_seconds, r.renew_seconds)


class Controller:
    """Everything wired together; `app` is the FastAPI application."""

    def __init__(
        self,
        config: Config,
        config_dir: Path | None = None,
        fabric_factory: FabricFactory | None = None,
    ) -> None:
        self.config = config
        # HTTPS for the REST API and a backup's forwarding: the files are checked now.
        self.rest_tls = (
            None if config.rest.tls is None else tls.check(config.rest.tls, config_dir, "rest.tls")
        )
        self.topology = Topology(config)
        # Hold deadlines are wall-clock, the one clock every replica reads the same way.
        self.ledger = AdmissionLedger(config.port_models(), clock=time.time)
        self.identity = replica_identity(config)
        name = self.identity.name if self.identity else "terrapin-controller"
        store = _store_location(config_dir, config.store)
        if config.store_tls is not None:
            store = tls.postgres_url(store, tls.check(config.store_tls, config_dir, "store_tls"))
        self.store = ReservationStore(store, self.ledger, name)
        factory = fabric_factory or real_fabric(config_dir)
        self.fabric = factory(
            config,
            self.topology,
            self._on_packet,
            lambda name: self.service.desired_entries(name),
            None if self.identity is None else self.identity.index,
        )
        self.replication = (
            None
            if self.identity is None
            else Replication(self.identity, self.store, self._promote, self._demote)
        )
        if self.replication is not None:
            cast(ReplicaFabric, self.fabric).fence_writes(self.replication.holds_lease)
        self.metrics = ControllerMetrics(self.ledger, config.monitor.channel_series)
        self.events = EventLog(
            _resolve(config_dir, _events_location(config, self.identity)), config.monitor.history
        )
        self.monitor = GuaranteeMonitor(
            self.ledger,
            lambda: self.service.list(),
            lambda record: self.service.entries(record),
            self.fabric,
            self.events,
            config.monitor,
            self.metrics,
            topology=self.topology,
        )
        service = InstrumentedReservationService(
            self.ledger,
            self.topology,
            self.store,
            BoundsFirstProgrammer(self.fabric, self.monitor),
            config.excess == "demote",
            fence=(lambda: None) if self.replication is None else self.replication.fence,
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
        # Which trunks carry traffic, and moving channels off those that do not (the primary's).
        self.trunks = TrunkKeeper(
            config, self.topology, self.fabric, self.service, self.handler.tell_initiator, self.metrics,
            self.monitor, self._acting,
        )  # fmt: skip
        # Only the tokens' digests are kept (api/auth.py); a generated one is logged at start.
        operator_token = config.rest_token()
        self.generated_token = None if config.rest_token_configured() else operator_token
        try:
            tokens = Tokens.of(operator_token, config.rest_viewer_token())
        except ValueError as exc:
            raise ConfigError(f"rest: {exc}") from None
        # A replica rolls back what is unfinished when it becomes primary (_promote), not now:
        # a backup changes nothing.
        unfinished = self.service.rollback_unfinished() if self.replication is None else 0
        LOG.info(
            "restored %d reservations and %d holds from the store (%d unfinished rolled back)",
            self.store.count(),
            len(self.store.holds()),
            unfinished,
        )
        self.store_probe = StoreProbe(self._store_problem)
        self.app = create_app(
            self.service,
            self.fabric,
            tokens,
            self._health_extra,
            self._serving,
            self.store_probe.problems,
            OperatorContext(self.monitor, self.metrics, config, self.stopping),
        )
        self._close_forwarding: Callable[[], Awaitable[None]] | None = None
        if self.replication is not None:
            replication = self.replication
            self._close_forwarding = forward_writes(
                self.app,
                replication.identity.name,
                lambda: replication.is_primary,
                lambda: replication.primary_url,
                self.store.sync,
                None if self.rest_tls is None else tls.client_context(self.rest_tls),
            )
        self.app.router.lifespan_context = self._lifespan

    async def _on_packet(self, switch: str, port: int, frame: bytes) -> None:
        if not self.trunks.on_packet(switch, port, frame):
            await self.handler.handle_packet_in(switch, port, frame)

    def _acting(self) -> bool:
        """Whether this controller detects and restores (the primary; the only controller)."""
        return self.replication is None or self.replication.is_primary

    async def _health_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "protocol": dict(self.handler.counters),
            "reconciled": {k: v.__dict__ for k, v in self.fabric.reconciled.items()},
        }
        trunks = self.trunks.health()
        if trunks is not None:
            extra["trunks"] = trunks
            extra["restoration"] = self.trunks.last()
        r = self.replication
        if r is not None:
            extra["replication"] = ReplicaOut(
                replica=r.identity.name,
                role="primary" if r.is_primary else "backup",
                term=r.term,
                primary=r.primary_name,
                primary_url=r.primary_url,
                store_error=r.last_error,
            )
        return extra

    def _store_problem(self) -> str | None:
        """What keeps this controller from doing its part besides its switches (blocking: a
        round trip to the store). A replica asks the lease; a single controller, any read."""
        if self.replication is not None:
            return self.replication.lease_problem()
        try:
            self.store.lease()  # the smallest read there is: it fails as any statement would
        except StoreUnavailable as exc:
            return f"the store cannot be reached: {exc}"
        return None

    def _serving(self, name: str) -> bool:
        if self.replication is not None and not self.replication.is_primary:
            return self.fabric.is_connected(name)
        return self.fabric.is_ready(name)

    # ---- replication ---------------------------------------------------------------------------

    async def _promote(self, term: int) -> None:
        """This replica took the lease: finish the old primary's business, then every switch."""
        self.service.rollback_unfinished()
        self.trunks.take_over()
        fabric = cast(ReplicaFabric, self.fabric)
        became = await fabric.claim(term)
        late = sorted(name for name, ok in became.items() if not ok)
        LOG.info(
            "term %d: primary of %d switches%s",
            term,
            len(became) - len(late),
            f"; not yet {late}" if late else "",
        )

    async def _demote(self) -> None:
        await cast(ReplicaFabric, self.fabric).step_down()

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: FastAPI) -> AsyncIterator[None]:
        self.stopping.clear()
        self.fabric.start()
        tasks = [asyncio.create_task(self._upkeep(), name="upkeep")]
        tasks.append(asyncio.create_task(self.trunks.run(), name="trunks"))
        if self.replication is not None:
            tasks.append(asyncio.create_task(self.replication.run(), name="lease"))
        if self.config.monitor.enabled:
            tasks.append(asyncio.create_task(self.monitor.run(), name="monitor"))
        try:
            yield
        finally:
            self.stopping.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.trunks.stop()
            if self.replication is not None:
                await self.replication.resign()
            if self._close_forwarding is not None:
                await self._close_forwarding()
            await self.fabric.stop()

    async def _upkeep(self) -> None:
        """The primary's housekeeping: expired holds, unfinished rollbacks, the journal's length;
        a backup's: the switches' entries encoded ahead of a takeover."""
        pruned_at = precomputed_at = time.monotonic()
        precomputed_cursor = -1
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            backup = self.replication is not None and not self.replication.is_primary
            every = PRECOMPUTE_BACKUP_EVERY_S if backup else PRECOMPUTE_PRIMARY_EVERY_S
            if now - precomputed_at > every and self.store.cursor != precomputed_cursor:
                precomputed_at, precomputed_cursor = now, self.store.cursor
                self._precompute(encode=backup)
            if backup:
                continue
            try:
                self.service.expire_holds()
                await self.service.retry_unfinished()
                if time.monotonic() - pruned_at > JOURNAL_PRUNE_EVERY_S:
                    pruned_at = time.monotonic()
                    self.store.prune_journal(JOURNAL_KEEP_S)
            except (StoreUnavailable, NotPrimary) as exc:
                LOG.warning("store upkeep postponed: %s", exc)

    def _precompute(self, encode: bool) -> None:
        """Encode every switch's channel entries (those not encoded yet, if `encode`), forget
        what is gone."""
        self.service.forget_entries()
        started = time.perf_counter()
        fresh = self.fabric.precompute(self.service.desired_by_switch(), encode)
        if fresh:
            LOG.debug("encoded %d channel entries in %.3f s", fresh, time.perf_counter() - started)

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


def _store_location(base: Path | None, store: str) -> str:
    return store if is_postgres(store) else _resolve(base, store)


def _events_location(config: Config, identity: ReplicaIdentity | None) -> str:
    if config.monitor.events:
        return config.monitor.events
    if not is_postgres(config.store):
        return config.store
    return f"build/run/events-{identity.name if identity else 'controller'}.sqlite"


def _resolve(base: Path | None, path: str) -> str:
    if path == ":memory:":
        return path
    p = Path(path)
    return str(p if p.is_absolute() or base is None else base / p)


def rest_server(
    app: FastAPI, host: str, port: int, log_level: str = "info", tls_options: Mapping[str, Any] | None = None
) -> uvicorn.Server:
    """The REST server: uvicorn with JSON answers also for requests it cannot parse; HTTPS with
    `tls_options` (tls.uvicorn_options)."""
    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            lifespan="on",
            http=JsonErrorsH11Protocol,
            **(tls_options or {}),
        )
    )


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
    replica = parser.add_argument_group("replicated controllers (a PostgreSQL store; docs/deployment.md)")
    replica.add_argument("--replica", metavar="NAME", help="this replica's name, unique among the replicas")
    replica.add_argument(
        "--replica-index",
        type=int,
        metavar="N",
        help="distinct per replica (0..4095): its P4Runtime backup id",
    )
    replica.add_argument(
        "--advertise", metavar="URL", help="where the others forward writes (default http://HOST:PORT)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = with_flags(load_config(args.config), args)
        base = Path(args.base_dir) if args.base_dir else Path.cwd()
        controller = Controller(config, base)
    except (ConfigError, StoreUnavailable, SchemaTooNew) as exc:
        print(f"terrapin-controller: {exc}", file=sys.stderr)
        return 2
    if controller.generated_token is not None:
        LOG.warning("no REST token configured; this run's operator token is %s", controller.generated_token)
    tls_options = None
    if controller.rest_tls is not None and config.rest.tls is not None:
        tls_options = tls.uvicorn_options(controller.rest_tls, config.rest.tls.client_auth)
    server = rest_server(
        controller.app,
        host=config.rest.host,
        port=config.rest.port,
        log_level=args.log_level.lower(),
        tls_options=tls_options,
    )
    loop = asyncio.new_event_loop()
    tune_garbage_collector()

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
