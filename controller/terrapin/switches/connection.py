"""Every switch's P4Runtime connection: one finsy stream each, reconnected for ever; whether a
switch is ready (connected, and reconciled as this controller's primary); and, for replicas,
which stream is primary (the lease's term as the election id, terrapin/arbitration.py).

It owns the low-level calls every other module of terrapin/switches makes on a connection too:
raw reads that stay protobufs, and SwitchUnavailable for a switch that is not there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import finsy as fy
from finsy.ports import OperStatus
from finsy.proto import p4r

from terrapin import tls
from terrapin.arbitration import SwitchArbitration
from terrapin.config import Config

if TYPE_CHECKING:
    from terrapin.switches.entries import ReconcileReport

LOG = logging.getLogger("terrapin.switches")

# A switch not connected this long after start (or after losing it) is probed for a TLS problem,
# then again this often while it stays down.
DIAGNOSE_AFTER_S = 2.0
DIAGNOSE_EVERY_S = 10.0


class SwitchUnavailable(Exception):
    """The switch is not connected (or not yet reconciled); nothing was written."""


# Codes of a request that got no answer from the switch itself.
_NO_ANSWER = frozenset(
    {fy.GRPCStatusCode.UNAVAILABLE, fy.GRPCStatusCode.DEADLINE_EXCEEDED, fy.GRPCStatusCode.CANCELLED}
)


def unanswered(cause: BaseException | None) -> bool:
    """Whether a write failed for want of an answer from the switch (its connection lost, cut
    off or timed out: gRPC UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED) rather than refused by it:
    a switch that is away, not one that said no. While a partition between a replica and the
    switches is young the stream still looks ready, and such a write was answered 502 (`make
    chaos`, seed 7, 30 minutes: a POST 2.7 s into a partition of the primary from the switches)."""
    if isinstance(cause, SwitchUnavailable):
        return True
    return isinstance(cause, fy.P4ClientError) and cause.code in _NO_ANSWER


_P = ParamSpec("_P")
_T = TypeVar("_T")


def lost_stream_is_unavailable(
    call: Callable[_P, Coroutine[Any, Any, _T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """grpc.aio cancels the calls in flight on a channel it closes, and finsy closes a switch's
    channel when its stream ends: the caller sees CancelledError although nobody cancelled its
    task. Left as it is, that ends whatever awaited the call as if it had been cancelled: a
    batcher's callers were never answered (and held the switch's WriteGate, so the next
    reconciliation waited for ever), a monitor loop would stop. Raised as SwitchUnavailable it
    is handled as the lost switch it is; a real cancellation of the task still propagates."""

    @functools.wraps(call)
    async def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await call(*args, **kwargs)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise SwitchUnavailable("the switch's P4Runtime connection closed during the request") from None

    return guarded


class SwitchConnections:
    """All switches of the configuration, each on its own finsy stream.

    When a switch's stream becomes primary (at connection, or when this replica claims its
    lease), `reconcile(name)` makes its entries right and `serve_packets(sw)` starts reading its
    PacketIns; only then is the switch ready."""

    def __init__(
        self,
        config: Config,
        reconcile: Callable[[str], Awaitable[ReconcileReport]],
        serve_packets: Callable[[fy.Switch], Coroutine[Any, Any, None]],
        config_dir: Path | None = None,
        replica_index: int | None = None,
    ) -> None:
        """With `replica_index` this is one replica of several: every switch starts as a backup
        and becomes primary only when the replica claims its lease term (claim())."""
        self._reconcile = reconcile
        self._serve_packets = serve_packets
        base = config_dir or Path.cwd()
        p4info = _resolve(base, config.p4.p4info)
        p4blob = _resolve(base, config.p4.json_path)
        options = fy.SwitchOptions(
            p4info=p4info,
            p4blob=None if config.p4.push == "never" else p4blob,
            p4force=config.p4.push == "always",
            ready_handler=self._on_ready,
        )
        # Each switch's TLS files, checked now: a bad file is a ConfigError at start-up.
        self._tls = {
            s.name: None if s.tls is None else tls.check(s.tls, base, f"switches.{s.name}.tls")
            for s in config.switches
        }
        self._server_name = {s.name: s.tls.server_name if s.tls else None for s in config.switches}
        self.switches = {
            s.name: fy.Switch(
                s.name,
                s.address,
                options(
                    device_id=s.device_id,
                    channel_credentials=p4runtime_credentials(self._tls[s.name], self._server_name[s.name]),
                ),
            )
            for s in config.switches
        }
        self._ready = {name: asyncio.Event() for name in self.switches}
        # p4lang's PI reads an unset election id as 0 and refuses two streams with one id, so a
        # backup announces its own id to a BMv2 switch (terrapin/arbitration.py).
        self._arbitration = (
            None
            if replica_index is None
            else SwitchArbitration(
                self.switches.values(),
                replica_index,
                announce_backup_id={s.name for s in config.switches if s.kind == "bmv2"},
            )
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.reconciled: dict[str, ReconcileReport] = {}
        self.last_error: dict[str, str] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self.switches)

    def start(self) -> None:
        for sw in self.switches.values():
            self._tasks.append(asyncio.create_task(self._run(sw), name=f"switch-{sw.name}"))
            self._tasks.append(asyncio.create_task(self._diagnose(sw), name=f"diagnose-{sw.name}"))

    async def _diagnose(self, sw: fy.Switch) -> None:
        """While a switch stays unconnected, say why as far as TLS can tell (tls.diagnose): gRPC
        retries a failed handshake silently. Each new finding is logged once and kept for
        /health; a switch that connects clears it."""
        said: str | None = None
        while True:
            await asyncio.sleep(DIAGNOSE_AFTER_S if said is None else DIAGNOSE_EVERY_S)
            if sw.is_up:
                if said is not None and self.last_error.get(sw.name) == said:
                    del self.last_error[sw.name]
                said = None
                continue
            try:
                problem = await tls.diagnose(sw.address, self._tls[sw.name], self._server_name[sw.name])
            except Exception as exc:  # a probe's own fault must not end the diagnosis
                problem = f"the TLS probe of {sw.address} failed: {exc!r}"
            if problem is not None and problem != said:
                LOG.error("switch %s: %s", sw.name, problem)
                self.last_error[sw.name] = problem
            said = problem

    async def _run(self, sw: fy.Switch) -> None:
        # finsy's Switch.run reconnects forever (throttled after quick failures).
        while True:
            try:
                await sw.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a switch fault must never end the controller
                self.last_error[sw.name] = str(exc)
                LOG.warning("switch %s stopped: %s; reconnecting", sw.name, exc)
                self._ready[sw.name].clear()
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def is_ready(self, name: str) -> bool:
        sw = self.switches.get(name)
        return sw is not None and sw.is_up and self._ready[name].is_set()

    def is_connected(self, name: str) -> bool:
        """Whether the P4Runtime stream is up (as primary or backup)."""
        sw = self.switches.get(name)
        return sw is not None and sw.is_up

    def why_not_ready(self, name: str) -> str | None:
        """None when ready; otherwise what a person needs to know (for /health)."""
        if self.is_ready(name):
            return None
        sw = self.switches.get(name)
        if sw is None:
            return "not configured"
        if sw.is_up and self._arbitration is not None and self._arbitration.term is None:
            return "connected as a backup (another replica is primary)"
        if sw.is_up:
            return "connected; pipeline and entries are being restored"
        error = self.last_error.get(name)
        because = f" ({error})" if error else ""
        if name not in self.reconciled:
            return f"never connected to P4Runtime at {sw.address}{because}"
        return f"connection to P4Runtime at {sw.address} lost{because}; reconnecting"

    async def wait_ready(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._ready.values())), timeout)
        except TimeoutError:
            return False
        return True

    def port_carrier(self, name: str, port: int) -> bool | None:
        """Whether a connected switch says a port's link is up, as its gNMI subscription last
        said (finsy follows each port's oper-status there; terrapin-switch serves it, BMv2 does
        not): None when unknown. finsy 0.30 keeps the ports' state but emits no port events
        (its listener is started without the switch), so the state is read, not awaited. The
        port is the P4 port number (the interface's ifindex leaf)."""
        sw = self.switches.get(name)
        if sw is None or not sw.is_up:
            return None
        for p in sw.ports:
            if p.id == port:
                if p.oper_status == OperStatus.UNKNOWN:
                    return None
                return p.up
        return None

    async def round_trip(self, name: str) -> None:
        """Returns once the switch answered a request on its P4Runtime connection (the link
        watch's proof that what was written to it before has reached it): a CapabilitiesRequest,
        the cheapest there is. An error the switch itself answered is an answer too."""
        client = self.switch(name)._p4client
        if client is None:
            raise SwitchUnavailable(f"switch {name} is not connected")
        try:
            await client.request(p4r.CapabilitiesRequest())
        except fy.P4ClientError as exc:
            if exc.code in _NO_ANSWER:
                raise

    def switch(self, name: str) -> fy.Switch:
        sw = self.switches.get(name)
        if sw is None or not sw.is_up:
            raise SwitchUnavailable(f"switch {name} is not connected")
        return sw

    # ---- replication: the lease decides which replica is every switch's primary ------------

    async def claim(self, term: int) -> dict[str, bool]:
        """Bid lease term `term` on every switch (this replica took the lease); each switch
        that makes it primary is reconciled by the ready handler. Returns which did within the
        wait (a switch that is down is reconciled when it comes back)."""
        assert self._arbitration is not None, "claim() is for replicas"
        return await self._arbitration.claim(term, timeout=5.0)

    def fence_writes(self, may_write: Callable[[], bool]) -> None:
        """Writes go out as a backup's (refused) unless `may_write()` (replicas only)."""
        assert self._arbitration is not None, "fence_writes() is for replicas"
        self._arbitration.fence_writes(may_write)

    async def step_down(self) -> None:
        """Back to backup on every switch (this replica lost the lease): nothing more is written."""
        assert self._arbitration is not None, "step_down() is for replicas"
        for event in self._ready.values():
            event.clear()
        await self._arbitration.step_down()

    async def _on_ready(self, sw: fy.Switch) -> None:
        self._ready[sw.name].clear()
        if self._arbitration is not None and not self._arbitration.primary_for_lease(sw.name):
            # A backup (or made primary without the lease: PI promotes the highest live
            # stream): it reads nothing and writes nothing until this replica claims a term.
            LOG.info("switch %s: connected as a backup", sw.name)
            return
        try:
            report = await self._reconcile(sw.name)
        except Exception as exc:
            self.last_error[sw.name] = f"reconcile: {exc}"
            LOG.error("switch %s: reconcile failed: %s", sw.name, exc)
            raise
        self.reconciled[sw.name] = report
        LOG.info("switch %s ready: %s", sw.name, report)
        sw.create_task(self._serve_packets(sw), name=f"packets-{sw.name}")
        self._ready[sw.name].set()


def read_entities(sw: fy.Switch, entity: Any) -> AsyncIterator[Any]:
    # finsy's read() is an async generator whose overloads are typed as coroutines.
    return cast(AsyncIterator[Any], sw.read(entity))


def read_raw(sw: fy.Switch, request: p4r.ReadRequest) -> AsyncIterator[p4r.ReadResponse]:
    """A read whose replies stay protobufs (finsy's sw.read decodes every entity, which costs more
    than the comparison it is read for). finsy 0.30 has no public call for it: its P4Client's
    request_iter is what sw.read itself uses."""
    client = sw._p4client
    if client is None:
        raise SwitchUnavailable(f"switch {sw.name} is not connected")
    return client.request_iter(request)


def p4runtime_credentials(
    files: tls.CheckedTls | None, server_name: str | None
) -> fy.GRPCCredentialsTLS | None:
    """finsy's TLS credentials for a switch's checked `tls:` files (None: plaintext)."""
    if files is None:
        return None
    return fy.GRPCCredentialsTLS(
        cacert=files.ca,
        cert=files.cert,
        private_key=files.key,
        target_name_override=server_name or "",
    )


def _resolve(base: Path, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else (base / p)
