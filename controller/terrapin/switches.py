"""The only module that speaks P4Runtime. The names and numbers of p4src it uses are in p4program.

Built on finsy (asyncio P4Runtime client: one gRPC stream per switch, arbitration, P4Info-aware
entities, packet I/O, reconnection). Only standard P4Runtime is used, so the same code drives
terrapin-switch and p4lang's simple_switch_grpc. docs/controller.md explains the choice. The one
exception: simple_switch_grpc does not implement P4Runtime register reads and writes, so for a
`kind: bmv2` switch the telemetry registers go through BMv2's Thrift CLI (terrapin/bmv2.py).

Names and units come from docs/dataplane.md ("Controller-facing names"), by way of
terrapin/p4program.py, which is tested against the compiled P4Info and constants.p4.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

import finsy as fy
from finsy.proto import p4r

from terrapin.admission.model import JUMPING_WINDOW, MOVING_WINDOW, ChannelEnvelope, HopAllocation, ceil_div
from terrapin.admission.policers import moving_ring
from terrapin.arbitration import SwitchArbitration
from terrapin.bmv2 import Bmv2Cli
from terrapin.config import AggregateConfig, Config
from terrapin.constants import ETHERNET_HEADER
from terrapin.p4program import (
    A_ADMIT,
    A_ADMIT_JUMPING,
    A_ADMIT_MOVING,
    A_ANSWER_ARP,
    A_ROUTE,
    A_SET_AGGREGATE,
    A_SET_DELAY_BOUND,
    A_SET_SOURCE_MAC,
    C_CHANNEL_RED,
    C_CHANNEL_YELLOW,
    C_DROPS,
    C_QUEUE_DELAY_BANDS,
    C_QUEUE_TRAFFIC,
    CHANNEL_KEY,
    DELAY_BANDS,
    DROP_REASONS,
    EXCESS_DEMOTE,
    EXCESS_DROP,
    M_AGGREGATE_METERS,
    MAX_AGGREGATES,
    PACKET_OUT_DIRECT,
    PACKET_OUT_PIPELINE,
    QUEUES_PER_PORT,
    R_MAX_DELAY,
    R_MAX_DEPTH,
    T_AGGREGATES,
    T_ARP,
    T_CHANNELS,
    T_PORT_MACS,
    T_QUEUE_BOUNDS,
    T_ROUTES,
    queue_cell,
)
from terrapin.paths import (
    ChannelEntry,
    ChannelSelector,
    Forwarding,
    JumpingWindowEntry,
    MovingWindowEntry,
    Topology,
)

LOG = logging.getLogger("terrapin.switches")

PacketHandler = Callable[[str, int, bytes], Awaitable[None]]
DesiredChannels = Callable[[str], Sequence[ChannelEntry]]


class SwitchUnavailable(Exception):
    """The switch is not connected (or not yet reconciled); nothing was written."""


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _lost_stream_is_unavailable(
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


class WriteGate:
    """Channel writes to one switch run side by side; its reconciliation runs alone.

    Reconciliation reads what the store wants and what the switch has, then writes the
    difference: a channel removed from the store and the switch meanwhile would be written back
    from its stale reading. So a reconciliation waits for the writes in flight and holds new
    ones until it is done; a removal that waited then finds (and removes) what it wrote."""

    def __init__(self) -> None:
        self._writers = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()
        self._alone = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        while not self._open.is_set():
            await self._open.wait()
        self._writers += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._writers -= 1
            if self._writers == 0:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._alone:
            self._open.clear()
            try:
                await self._idle.wait()
                yield
            finally:
                self._open.set()


class SwitchBatcher:
    """What concurrent set-ups and tear-downs send one switch, sent together.

    Every P4Runtime call costs the controller a few hundred microseconds of Python whatever it
    carries, and a set-up makes two or three per hop. So writes queued for a switch while one
    of its writes is in flight go out together in the next WriteRequest (and reads likewise in
    one ReadRequest). P4Runtime applies a batch's updates one by one and reports each one's
    failure (spec §12.3: CONTINUE_ON_ERROR), so each caller is answered about its own updates
    only. Under light load a batch is one caller's, sent at once."""

    def __init__(self, switch: Callable[[], fy.Switch]) -> None:
        self._switch = switch
        self._writes: list[tuple[list[p4r.Update], bool, asyncio.Future[None]]] = []
        self._reads: list[tuple[list[p4r.Entity], asyncio.Future[list[p4r.Entity]]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._writing = self._reading = False
        self._in_flight: list[tuple[list[p4r.Update], bool, asyncio.Future[None]]] = []

    async def write(self, updates: list[p4r.Update], strict: bool = True) -> None:
        """Apply `updates`; with `strict` False, one that finds nothing to modify or delete is
        no error (an entry already gone)."""
        await self.submit(updates, strict)

    def submit(self, updates: list[p4r.Update], strict: bool = True) -> asyncio.Future[None]:
        """As write(), but queued before this returns: what a caller submits before its next
        await goes out in order with what it submits after, in one batch or the next."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writes.append((updates, strict, future))
        if not self._writing:
            self._writing = True
            self._start(self._send_writes())
        return future

    async def drained(self) -> None:
        """Returns once every write submitted so far has been answered (not those submitted
        meanwhile: under a stream of set-ups the batcher is never idle)."""
        pending = [future for _u, _s, future in self._in_flight + self._writes]
        if pending:
            await asyncio.wait(pending)

    async def read(self, entities: list[p4r.Entity]) -> list[p4r.Entity]:
        """Read `entities`; the answer may also hold what other callers of the batch asked for."""
        future: asyncio.Future[list[p4r.Entity]] = asyncio.get_running_loop().create_future()
        self._reads.append((entities, future))
        if not self._reading:
            self._reading = True
            self._start(self._send_reads())
        return await future

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_writes(self) -> None:
        try:
            # One turn of the loop first: the other hops and set-ups submitted in this turn
            # join the first WriteRequest.
            await asyncio.sleep(0)
            while self._writes:
                batch, self._writes = self._writes, []
                self._in_flight = batch
                updates = [u for mine, _strict, _future in batch for u in mine]
                try:
                    await _write_updates(self._switch(), updates)
                except fy.P4ClientError as exc:
                    _answer_writes(batch, exc)
                except Exception as exc:  # the switch went away: nothing of the batch is known
                    for _mine, _strict, future in batch:
                        _fail(future, exc)
                else:
                    for _mine, _strict, future in batch:
                        if not future.done():
                            future.set_result(None)
        finally:
            self._writing = False
            # Callers left unanswered here (only when this task itself was cancelled) would
            # wait for ever, and hold the switch's WriteGate.
            for _mine, _strict, future in self._in_flight + self._writes:
                _fail(future, SwitchUnavailable("the switch's writes were abandoned"))
            self._in_flight, self._writes = [], []

    async def _send_reads(self) -> None:
        batch: list[tuple[list[p4r.Entity], asyncio.Future[list[p4r.Entity]]]] = []
        try:
            while self._reads:
                batch, self._reads = self._reads, []
                try:
                    sw = self._switch()
                    request = p4r.ReadRequest(device_id=sw.device_id)
                    for entities, _future in batch:
                        request.entities.extend(entities)
                    found = [e for reply in await _collect(_read_raw(sw, request)) for e in reply.entities]
                except Exception as exc:
                    for _entities, future in batch:
                        _fail(future, exc)
                    continue
                for _entities, future in batch:
                    if not future.done():
                        future.set_result(found)
        finally:
            self._reading = False
            for _entities, future in batch + self._reads:  # as in _send_writes
                _fail(future, SwitchUnavailable("the switch's reads were abandoned"))
            self._reads = []


class SwitchWriteError(Exception):
    """Updates of a batch the switch refused (the others of the batch were applied)."""


def _answer_writes(
    batch: list[tuple[list[p4r.Update], bool, asyncio.Future[None]]], exc: fy.P4ClientError
) -> None:
    details = exc.details
    if exc.code != fy.GRPCStatusCode.UNKNOWN or not details:
        for _mine, _strict, future in batch:  # the whole WriteRequest was refused
            _fail(future, exc)
        return
    start = 0
    for mine, strict, future in batch:
        failed = [details[i] for i in range(start, start + len(mine)) if i in details]
        start += len(mine)
        if not strict:
            failed = [e for e in failed if e.canonical_code != fy.GRPCStatusCode.NOT_FOUND]
        if failed:
            _fail(
                future, SwitchWriteError("; ".join(f"{e.canonical_code.name}: {e.message}" for e in failed))
            )
        elif not future.done():
            future.set_result(None)


def _done() -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


@_lost_stream_is_unavailable
async def _write_updates(sw: fy.Switch, updates: list[p4r.Update]) -> None:
    await sw.write(updates, strict=True)


@_lost_stream_is_unavailable
async def _collect(replies: AsyncIterator[p4r.ReadResponse]) -> list[p4r.ReadResponse]:
    return [reply async for reply in replies]


def entry_for_hop(
    switch: str,
    selector: ChannelSelector,
    channel_id: int,
    hop: HopAllocation,
    demote_excess: bool,
    edge: ChannelEnvelope | None = None,
    tag: int = 0,
) -> ChannelEntry:
    """The hop's (ρ, σ) as a strict trTCM: CIR = PIR = ρ, CBS = PBS = σ (docs/dataplane.md), in
    frame bytes: each packet of up to max_packet IPv4 bytes carries 14 more on the wire.

    `edge` is the requested envelope when this is the channel's first hop: a window policer
    is applied there, to the traffic as the source sends it. Later hops see that traffic
    bunched by the queues upstream, which the window would cut; their meter's (ρ, σ_k) is the
    window's arrival envelope with the burst grown hop by hop, so it never does. `tag` names
    this installation of the channel (the window ignores state another tag left behind)."""
    rate = frame_bytes(hop.rate, hop.max_packet)
    burst = frame_bytes(hop.burst, hop.max_packet)
    return ChannelEntry(
        switch=switch,
        selector=selector,
        channel_id=channel_id,
        priority=hop.priority,
        cir=rate,
        cburst=burst,
        pir=rate,
        pburst=burst,
        demote_excess=demote_excess,
        window=None if edge is None else window_entry(edge, tag),
        port=hop.port.port,
    )


def frame_bytes(ipv4_bytes: int, max_packet: int) -> int:
    """A rate or burst in IPv4 bytes as the meters count it, in frame bytes: each packet of up
    to max_packet IPv4 bytes carries ETHERNET_HEADER more on the wire (rounded up, so the
    meter never passes less than the envelope)."""
    return ceil_div(ipv4_bytes * (max_packet + ETHERNET_HEADER), max_packet)


def window_entry(env: ChannelEnvelope, tag: int) -> JumpingWindowEntry | MovingWindowEntry | None:
    """A window policer's action parameters in the data plane's units (frame bytes)."""
    policer = env.policer
    smax = env.max_packet + ETHERNET_HEADER
    if policer.kind == JUMPING_WINDOW:
        if policer.count_packets:
            limit = env.burst // env.max_packet
        else:
            # The meter's scaling: k packets of at most max_packet IPv4 bytes within this many
            # frame bytes carry at most B IPv4 bytes.
            limit = ceil_div(env.burst * smax, env.max_packet)
        return JumpingWindowEntry(policer.window_us, limit, policer.count_packets, smax, tag)
    if policer.kind == MOVING_WINDOW:
        ring = moving_ring(policer)
        return MovingWindowEntry(
            policer.xmin_us, policer.interval_us, ring.slots - 1, ring.quantum, smax, tag
        )
    return None


class ChannelCodec:
    """`channels` entries straight to P4Runtime protobufs, for the two places where there are
    thousands of them: every set-up writes one per hop, and every reconciliation compares the
    whole table. finsy's generic encoder takes about 80 µs an entry (its decoder 70 µs) on the
    development VM, this one about a tenth; tests/test_switches_codec.py checks that both give
    the same bytes for every kind of channel entry."""

    def __init__(self, schema: Any) -> None:
        table = schema.tables[T_CHANNELS]
        self.table_id: int = table.id
        self._fields = [table.match_fields[name].id for name in CHANNEL_KEY]
        self._actions = {
            name: (schema.actions[name].id, {p.name: p.id for p in schema.actions[name].params})
            for name in (A_ADMIT, A_ADMIT_JUMPING, A_ADMIT_MOVING)
        }
        self._colours = [schema.counters[name].id for name in (C_CHANNEL_YELLOW, C_CHANNEL_RED)]
        bounds = schema.tables[T_QUEUE_BOUNDS]
        self._bounds_table: int = bounds.id
        self._bounds_fields = [bounds.match_fields[name].id for name in ("port", "priority")]
        bound_action = schema.actions[A_SET_DELAY_BOUND]
        self._bound_action: int = bound_action.id
        self._bound_params = [bound_action.params[name].id for name in ("quarter_us", "half_us", "limit_us")]
        # Every entry of one action has the same shape: each is a copy of its action's template
        # with the values filled in, which costs a quarter of building the nested messages.
        self._templates = {name: self._template(name) for name in self._actions}
        self._zero_templates = [
            p4r.Update(
                type=p4r.Update.MODIFY,
                entity=p4r.Entity(
                    counter_entry=p4r.CounterEntry(
                        counter_id=counter_id, index=p4r.Index(index=0), data=p4r.CounterData()
                    )
                ),
            )
            for counter_id in self._colours
        ]

    def _template(self, name: str) -> tuple[p4r.TableEntry, list[str]]:
        """An entry of action `name` with every field present and every value empty, and the
        action's parameter names in the order of its params (by id, P4Runtime's canonical
        order)."""
        action_id, params = self._actions[name]
        names = sorted(params, key=lambda k: params[k])
        pb = p4r.TableEntry(
            table_id=self.table_id,
            match=[p4r.FieldMatch(field_id=fid, exact=p4r.FieldMatch.Exact()) for fid in self._fields],
            action=p4r.TableAction(
                action=p4r.Action(
                    action_id=action_id, params=[p4r.Action.Param(param_id=params[k]) for k in names]
                )
            ),
        )
        return pb, names

    def bound_updates(
        self, have: Mapping[tuple[int, int], int], bounds: Sequence[QueueBound]
    ) -> list[p4r.Update]:
        """What turns the queue_bounds entries `have` into `bounds`: insert what is new, modify
        what changed, delete what is no longer wanted."""
        want = {(b.port, b.priority): b.bound_us for b in bounds}
        updates = [
            p4r.Update(
                type=p4r.Update.MODIFY if cell in have else p4r.Update.INSERT,
                entity=p4r.Entity(table_entry=self._bound_entry(cell, bound)),
            )
            for cell, bound in want.items()
            if have.get(cell) != bound
        ]
        updates += [
            p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=self._bound_entry(cell, None)))
            for cell in have
            if cell not in want
        ]
        return updates

    def _bound_entry(self, cell: tuple[int, int], bound_us: int | None) -> p4r.TableEntry:
        match = [
            p4r.FieldMatch(field_id=fid, exact=p4r.FieldMatch.Exact(value=_canonical(v)))
            for fid, v in zip(self._bounds_fields, cell, strict=True)
        ]
        if bound_us is None:
            return p4r.TableEntry(table_id=self._bounds_table, match=match)
        # Quarter and half of the bound, rounded down, so a band never claims more headroom than
        # there was (the data plane cannot divide; docs/dataplane.md, "Delay bands").
        values = (bound_us // 4, bound_us // 2, bound_us)
        action = p4r.Action(
            action_id=self._bound_action,
            params=[
                p4r.Action.Param(param_id=pid, value=_canonical(v))
                for pid, v in zip(self._bound_params, values, strict=True)
            ],
        )
        return p4r.TableEntry(table_id=self._bounds_table, match=match, action=p4r.TableAction(action=action))

    def zero_colours(self, channel_id: int) -> list[p4r.Update]:
        """Updates that set a channel id's yellow and red counters to zero."""
        updates = []
        for template in self._zero_templates:
            update = p4r.Update()
            update.CopyFrom(template)
            update.entity.counter_entry.index.index = channel_id
            updates.append(update)
        return updates

    def match(self, selector: ChannelSelector) -> list[p4r.FieldMatch]:
        return [
            p4r.FieldMatch(field_id=fid, exact=p4r.FieldMatch.Exact(value=value))
            for fid, value in zip(self._fields, _match_values(selector), strict=True)
        ]

    def entry(self, entry: ChannelEntry) -> p4r.TableEntry:
        excess = EXCESS_DEMOTE if entry.demote_excess else EXCESS_DROP
        args: dict[str, int] = {"channel_id": entry.channel_id, "priority": entry.priority}
        if entry.window is None:
            name = A_ADMIT
            args |= {"on_yellow": excess, "on_red": excess}
        else:
            name = A_ADMIT_JUMPING if isinstance(entry.window, JumpingWindowEntry) else A_ADMIT_MOVING
            args |= {"on_excess": excess} | {k: int(v) for k, v in asdict(entry.window).items()}
        template, names = self._templates[name]
        pb = p4r.TableEntry()
        pb.CopyFrom(template)
        for field_match, value in zip(pb.match, _match_values(entry.selector), strict=True):
            field_match.exact.value = value
        for param, key in zip(pb.action.action.params, names, strict=True):
            param.value = _canonical(args[key])
        if entry.window is None:
            meter = pb.meter_config
            meter.cir, meter.cburst, meter.pir, meter.pburst = (
                entry.cir,
                entry.cburst,
                entry.pir,
                entry.pburst,
            )
        return pb

    def selector_of(self, pb: p4r.TableEntry) -> ChannelSelector:
        """The selector of a channel entry read back (the inverse of match())."""
        values = {m.field_id: int.from_bytes(m.exact.value, "big") for m in pb.match}
        src, dst, protocol, flow_key = (values.get(fid, 0) for fid in self._fields)
        return ChannelSelector(src=_ipv4_str(src), dst=_ipv4_str(dst), protocol=protocol, flow_key=flow_key)

    def key_only(self, selector: ChannelSelector) -> p4r.TableEntry:
        return p4r.TableEntry(table_id=self.table_id, match=self.match(selector))


@functools.lru_cache(maxsize=65536)
def _canonical_ipv4(address: str) -> bytes:
    # A network's hosts are few and each is in thousands of set-ups: converted once each.
    return _canonical(int(ipaddress.IPv4Address(address)))


def _match_values(selector: ChannelSelector) -> tuple[bytes, bytes, bytes, bytes]:
    """A channel entry's match values, in CHANNEL_KEY's order."""
    return (
        _canonical_ipv4(selector.src),
        _canonical_ipv4(selector.dst),
        _canonical(selector.protocol),
        _canonical(selector.flow_key),
    )


@functools.lru_cache(maxsize=65536)
def _ipv4_str(address: int) -> str:
    return str(ipaddress.IPv4Address(address))


def _canonical(value: int) -> bytes:
    """A P4Runtime byte string in its canonical form (spec §8.4: no leading zero bytes)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


EntryKey = tuple[int, int, bytes]


@dataclass(frozen=True)
class EncodedEntry:
    """A channel entry ready for a reconciliation: its key and payload (entry_key,
    entry_payload), the protobuf to write, and the whole entry serialized (what a switch that
    holds it exactly returns)."""

    key: EntryKey
    payload: bytes
    pb: p4r.TableEntry
    whole: bytes


def entry_key(pb: p4r.TableEntry) -> EntryKey:
    """What identifies a table entry (table, priority, match), as bytes that compare equal for
    equal entries whatever order the switch lists the match fields in."""
    fields = sorted(pb.match, key=lambda m: m.field_id)
    return (pb.table_id, pb.priority, b"".join(m.SerializeToString(deterministic=True) for m in fields))


def entry_payload(pb: p4r.TableEntry) -> bytes:
    """What a MODIFY changes: the action and, where the entry has one, its meter's config."""
    payload: bytes = pb.action.SerializeToString(deterministic=True)
    if pb.HasField("meter_config"):
        m = pb.meter_config
        payload += b"|%d,%d,%d,%d" % (m.cir, m.cburst, m.pir, m.pburst)
    return payload


def _forwarding_entries(fwd: Forwarding) -> list[fy.P4TableEntry]:
    # (table, key, action, action arguments) of every routing, ARP and port MAC entry
    rows: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
        (T_ROUTES, {"dst_addr": r.prefix}, A_ROUTE, {"port": r.port, "next_hop_mac": r.next_hop_mac})
        for r in fwd.routes
    ]
    rows += [(T_ARP, {"target_ip": ip}, A_ANSWER_ARP, {"mac": mac}) for ip, mac in fwd.arp_answers]
    rows += [(T_PORT_MACS, {"port": port}, A_SET_SOURCE_MAC, {"mac": mac}) for port, mac in fwd.port_macs]
    return [
        fy.P4TableEntry(table, match=fy.P4TableMatch(key), action=fy.P4TableAction(action, **args))
        for table, key, action, args in rows
    ]


def _aggregate_entries(aggregates: Sequence[AggregateConfig]) -> list[fy.P4TableEntry]:
    """The aggregates table: aggregate i's matches name aggregate id i (its meter's index). The
    table is ternary, so each entry has a P4Runtime priority: the first match listed wins."""
    entries: list[fy.P4TableEntry] = []
    for aggregate_id, aggregate in enumerate(aggregates):
        action = fy.P4TableAction(A_SET_AGGREGATE, aggregate_id=aggregate_id, priority=aggregate.priority)
        for match in aggregate.matches():
            entries.append(
                fy.P4TableEntry(
                    T_AGGREGATES,
                    match=fy.P4TableMatch(match),
                    action=action,
                    priority=MAX_AGGREGATES - len(entries),
                )
            )
    return entries


def aggregate_meter(aggregate: AggregateConfig) -> fy.P4MeterConfig:
    """The aggregate's (rate, burst) as its meter's committed bucket, in frame bytes as a
    channel's; the peak bucket is `peak` when given, else the committed one (a strict trTCM)."""
    peak = aggregate.peak
    peak_rate, peak_burst = (aggregate.rate, aggregate.burst) if peak is None else (peak.rate, peak.burst)
    return fy.P4MeterConfig(
        cir=frame_bytes(aggregate.rate, aggregate.max_packet),
        cburst=frame_bytes(aggregate.burst, aggregate.max_packet),
        pir=frame_bytes(peak_rate, aggregate.max_packet),
        pburst=frame_bytes(peak_burst, aggregate.max_packet),
    )


@dataclass(frozen=True)
class QueueTelemetry:
    port: int
    priority: int
    max_depth_packets: int
    max_delay_us: int
    packets: int
    bytes: int


@dataclass(frozen=True)
class ChannelCounters:
    packets: int
    bytes: int
    yellow_packets: int
    red_packets: int


@dataclass(frozen=True)
class QueueBound:
    """One `queue_bounds` entry: the admitted delay bound of an egress queue, in µs."""

    port: int
    priority: int
    bound_us: int


@dataclass(frozen=True)
class MonitorSample:
    """What one poll of the guarantee monitor read from one switch.

    `started`/`finished` are monotonic seconds around the reads, so a rate can be computed over
    a window that certainly contains every packet counted in it. The register maxima are None
    when the switch cannot read registers over P4Runtime (p4lang's PI server cannot).
    """

    switch: str
    started: float
    finished: float
    bands: dict[tuple[int, int], tuple[int, ...]]  # (port, priority) → packets per band
    queue_traffic: dict[tuple[int, int], tuple[int, int]]  # (port, priority) → packets, bytes
    max_delay_us: dict[tuple[int, int], int] | None
    max_depth_packets: dict[tuple[int, int], int] | None
    channels: dict[ChannelSelector, tuple[int, int]]  # direct counter: packets, bytes
    excess: dict[int, tuple[int, int, int, int]]  # channel id → yellow pkts, bytes, red pkts, bytes


@dataclass(frozen=True)
class ReconcileReport:
    switch: str
    inserted: int
    modified: int
    deleted: int
    kept: int
    meters: int = 0  # aggregate meters written (all of them, at every reconciliation)
    # Wall-clock end of this reconciliation: tells a restored switch's report from its predecessor's.
    finished_at: float = field(default_factory=time.time)


class SwitchFabric:
    """All switches of the configuration, each on its own finsy stream."""

    def __init__(
        self,
        config: Config,
        topology: Topology,
        on_packet: PacketHandler,
        desired_channels: DesiredChannels,
        config_dir: Path | None = None,
        replica_index: int | None = None,
    ) -> None:
        """With `replica_index` this is one replica of several: every switch starts as a backup
        and becomes primary only when the replica claims its lease term (claim())."""
        self._topology = topology
        self._on_packet = on_packet
        self._desired = desired_channels
        self._aggregates = tuple(config.aggregates)
        base = config_dir or Path.cwd()
        p4info = _resolve(base, config.p4.p4info)
        p4blob = _resolve(base, config.p4.json_path)
        options = fy.SwitchOptions(
            p4info=p4info,
            p4blob=None if config.p4.push == "never" else p4blob,
            p4force=config.p4.push == "always",
            ready_handler=self._on_ready,
        )
        self._switches = {
            s.name: fy.Switch(s.name, s.address, options(device_id=s.device_id)) for s in config.switches
        }
        self._ready = {name: asyncio.Event() for name in self._switches}
        self._gates = {name: WriteGate() for name in self._switches}
        self._batchers = {
            name: SwitchBatcher(functools.partial(self._switch, name)) for name in self._switches
        }
        self._codecs: dict[int, ChannelCodec] = {}
        # Channel entries as protobufs, with their key and payload: what a reconciliation
        # compares (precompute()).
        self._encoded: dict[ChannelEntry, EncodedEntry] = {}
        # p4lang's PI reads an unset election id as 0 and refuses two streams with one id, so a
        # backup announces its own id to a BMv2 switch (terrapin/arbitration.py).
        self._arbitration = (
            None
            if replica_index is None
            else SwitchArbitration(
                self._switches.values(),
                replica_index,
                announce_backup_id={s.name for s in config.switches if s.kind == "bmv2"},
            )
        )
        self._bmv2_cli = {
            s.name: Bmv2Cli(s.bmv2_cli, s.thrift_port)
            for s in config.switches
            if s.kind == "bmv2" and s.thrift_port is not None
        }
        self._tasks: list[asyncio.Task[None]] = []
        self.reconciled: dict[str, ReconcileReport] = {}
        self.last_error: dict[str, str] = {}
        self._no_registers: set[str] = set()  # switches whose P4Runtime server refuses registers

    @property
    def names(self) -> list[str]:
        return sorted(self._switches)

    def start(self) -> None:
        for sw in self._switches.values():
            self._tasks.append(asyncio.create_task(self._run(sw), name=f"switch-{sw.name}"))

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
        sw = self._switches.get(name)
        return sw is not None and sw.is_up and self._ready[name].is_set()

    def is_connected(self, name: str) -> bool:
        """Whether the P4Runtime stream is up (as primary or backup)."""
        sw = self._switches.get(name)
        return sw is not None and sw.is_up

    def why_not_ready(self, name: str) -> str | None:
        """None when ready; otherwise what a person needs to know (for /health)."""
        if self.is_ready(name):
            return None
        sw = self._switches.get(name)
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

    def _switch(self, name: str) -> fy.Switch:
        sw = self._switches.get(name)
        if sw is None or not sw.is_up:
            raise SwitchUnavailable(f"switch {name} is not connected")
        return sw

    # ---- lifecycle: the pipeline is pushed by finsy (cookie compare), then we reconcile ------

    # ---- replication: the lease decides which replica is every switch's primary ------------

    async def claim(self, term: int) -> dict[str, bool]:
        """Bid lease term `term` on every switch (this replica took the lease); each switch
        that makes it primary is reconciled by the ready handler. Returns which did within the
        wait (a switch that is down is reconciled when it comes back)."""
        assert self._arbitration is not None, "claim() is for replicas"
        return await self._arbitration.claim(term, timeout=5.0)

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
            report = await self.reconcile(sw.name)
        except Exception as exc:
            self.last_error[sw.name] = f"reconcile: {exc}"
            LOG.error("switch %s: reconcile failed: %s", sw.name, exc)
            raise
        self.reconciled[sw.name] = report
        LOG.info("switch %s ready: %s", sw.name, report)
        sw.create_task(self._packet_loop(sw), name=f"packets-{sw.name}")
        self._ready[sw.name].set()

    async def _packet_loop(self, sw: fy.Switch) -> None:
        async for packet in sw.read_packets():
            try:
                port = int(packet.metadata.get("ingress_port", 0))
                await self._on_packet(sw.name, port, bytes(packet.payload))
            except Exception:  # one bad packet must not stop the loop
                LOG.exception("switch %s: packet handler failed", sw.name)

    @_lost_stream_is_unavailable
    async def reconcile(self, name: str) -> ReconcileReport:
        """Make the switch's entries equal the desired state: insert what is missing, modify
        what differs (in place, so an admitted channel never disappears), delete the rest.
        No channel is written to the switch meanwhile (WriteGate)."""
        async with self._gate(name).exclusive():
            return await self._reconcile(name)

    async def _reconcile(self, name: str) -> ReconcileReport:
        sw = self._switch(name)
        schema = sw.p4info
        codec = self._codec(sw)
        others = _forwarding_entries(self._topology.forwarding(name)) + _aggregate_entries(self._aggregates)
        want = {entry_key(pb): pb for pb in (e.encode(schema).table_entry for e in others)}
        payloads = {k: entry_payload(pb) for k, pb in want.items()}
        # A channel entry read back exactly as written (the same bytes) is as it should be;
        # only the others are taken apart by key and payload. Comparing whole serialized
        # entries is one call each, and a takeover compares tens of thousands.
        exact: dict[bytes, EntryKey] = {}
        for entry in self._desired(name):
            encoded = self._encoded_entry(codec, entry)
            want[encoded.key], payloads[encoded.key] = encoded.pb, encoded.payload
            exact[encoded.whole] = encoded.key
        same: set[EntryKey] = set()
        have: dict[tuple[int, int, bytes], p4r.TableEntry] = {}
        request = p4r.ReadRequest(device_id=sw.device_id)
        for table in (T_ROUTES, T_ARP, T_PORT_MACS, T_AGGREGATES):
            request.entities.add().table_entry.table_id = schema.tables[table].id
        # P4Runtime returns a direct meter's config only when the read request asks for it.
        channels = request.entities.add().table_entry
        channels.table_id = codec.table_id
        channels.meter_config.SetInParent()
        async for reply in _read_raw(sw, request):
            for entity in reply.entities:
                found = exact.get(entity.table_entry.SerializeToString(deterministic=True))
                if found is not None and found not in same:
                    same.add(found)
                else:
                    have[entry_key(entity.table_entry)] = entity.table_entry
        inserts = [pb for k, pb in want.items() if k not in have and k not in same]
        modifies = [pb for k, pb in want.items() if k in have and payloads[k] != entry_payload(have[k])]
        deletes = [_key_only(pb) for k, pb in have.items() if k not in want]
        await _write_raw(sw, p4r.Update.DELETE, deletes)
        await _write_raw(sw, p4r.Update.MODIFY, modifies)
        # Meters before entries, so no aggregate packet meets an unconfigured meter (which
        # colours everything green). A meter config cannot be inserted or deleted, only set;
        # setting an unchanged one is harmless, so all are written.
        meters = [
            ~fy.P4MeterEntry(M_AGGREGATE_METERS, index=i, config=aggregate_meter(a))
            for i, a in enumerate(self._aggregates)
        ]
        if meters:
            await sw.write(meters)
        await _write_raw(sw, p4r.Update.INSERT, inserts)
        return ReconcileReport(
            name, len(inserts), len(modifies), len(deletes), len(want) - len(inserts), len(meters)
        )

    def _encoded_entry(self, codec: ChannelCodec, entry: ChannelEntry) -> EncodedEntry:
        hit = self._encoded.get(entry)
        if hit is None:
            pb = codec.entry(entry)
            hit = self._encoded[entry] = EncodedEntry(
                entry_key(pb), entry_payload(pb), pb, pb.SerializeToString(deterministic=True)
            )
        return hit

    def precompute(self, desired: Mapping[str, Sequence[ChannelEntry]], encode: bool = True) -> int:
        """Encode the channel entries each switch should hold, ahead of a reconciliation (a
        backup does this as it follows the primary, so that taking over only reads and
        compares); entries no longer desired are forgotten. Returns how many were new.
        encode=False only forgets (the primary: encoding every new channel a second time, after
        its set-up wrote it, cost it a fourteenth of its time during a burst of set-ups, and a
        reconciliation encodes what it misses anyway)."""
        fresh = 0
        keep: dict[ChannelEntry, EncodedEntry] = {}
        for name, entries in desired.items():
            sw = self._switches.get(name)
            if sw is None or not sw.p4info.exists:
                continue
            codec = self._codec(sw)
            for entry in entries:
                hit = self._encoded.get(entry)
                if hit is not None:
                    keep[entry] = hit
                elif encode:
                    fresh += 1
                    keep[entry] = self._encoded_entry(codec, entry)
        self._encoded = keep
        return fresh

    def _codec(self, sw: fy.Switch) -> ChannelCodec:
        """The channels codec of the P4Info the switch runs (finsy's schema object)."""
        codec = self._codecs.get(id(sw.p4info))
        if codec is None:
            codec = self._codecs[id(sw.p4info)] = ChannelCodec(sw.p4info)
        return codec

    # ---- channels (paths.ChannelProgrammer) -----------------------------------------------

    async def install_channel(self, entry: ChannelEntry) -> None:
        async with self._gate(entry.switch).write():
            if not self.is_ready(entry.switch):
                raise SwitchUnavailable(f"switch {entry.switch} is not ready")
            codec = self._codec(self._switch(entry.switch))
            # The channel id's yellow and red counters start from zero with the entry: an id is
            # reused, and its first window (the monitor's, the REST counters') is its own.
            updates = codec.zero_colours(entry.channel_id)
            insert = p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=codec.entry(entry)))
            updates.append(insert)
            await self._batchers[entry.switch].write(updates)

    async def remove_channel(self, entry: ChannelEntry) -> None:
        async with self._gate(entry.switch).write():
            key = self._codec(self._switch(entry.switch)).key_only(entry.selector)
            update = p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=key))
            # Not strict: an entry already gone (a switch restarted empty) is not an error.
            await self._batchers[entry.switch].write([update], strict=False)

    def _gate(self, name: str) -> WriteGate:
        gate = self._gates.get(name)
        if gate is None:
            raise SwitchUnavailable(f"switch {name} is not configured")
        return gate

    @_lost_stream_is_unavailable
    async def read_channels(self, name: str) -> list[tuple[ChannelSelector, dict[str, Any]]]:
        """Channel entries as the switch has them, with action parameters and meter."""
        sw = self._switch(name)
        found = []
        async for entry in _read(sw, _read_request(T_CHANNELS)):
            selector = _selector(entry.match)
            info: dict[str, Any] = {}
            if isinstance(entry.action, fy.P4TableAction):
                info.update({k: int(v) for k, v in (entry.action.args or {}).items()})
            if entry.meter_config is not None:
                m = entry.meter_config
                info.update(cir=m.cir, cburst=m.cburst, pir=m.pir, pburst=m.pburst)
            found.append((selector, info))
        return found

    # ---- packet I/O ---------------------------------------------------------------------------

    @_lost_stream_is_unavailable
    async def packet_out(self, name: str, frame: bytes, egress_port: int | None = None) -> None:
        """Through the pipeline (routed like a host's packet) unless a port is named."""
        sw = self._switch(name)
        mode = PACKET_OUT_PIPELINE if egress_port is None else PACKET_OUT_DIRECT
        await sw.write([fy.P4PacketOut(frame, egress_port=egress_port or 0, through_pipeline=mode, _pad=0)])

    # ---- telemetry ----------------------------------------------------------------------------

    @_lost_stream_is_unavailable
    async def queue_telemetry(self, name: str, ports: Iterable[int]) -> list[QueueTelemetry]:
        sw = self._switch(name)
        cells = [(port, prio) for port in ports for prio in range(QUEUES_PER_PORT)]
        indices = [queue_cell(port, prio) for port, prio in cells]
        cli = self._bmv2_cli.get(name)
        if cli is None:
            depth = await _read_registers(sw, R_MAX_DEPTH, indices)
            delay = await _read_registers(sw, R_MAX_DELAY, indices)
        else:
            arrays = await asyncio.to_thread(cli.read_registers, [R_MAX_DEPTH, R_MAX_DELAY])
            depth = {i: arrays[R_MAX_DEPTH][i] for i in indices if i < len(arrays[R_MAX_DEPTH])}
            delay = {i: arrays[R_MAX_DELAY][i] for i in indices if i < len(arrays[R_MAX_DELAY])}
        traffic = await _read_counters(sw, C_QUEUE_TRAFFIC, indices)
        return [
            QueueTelemetry(
                port=port,
                priority=prio,
                max_depth_packets=depth.get(i, 0),
                max_delay_us=delay.get(i, 0),
                packets=traffic.get(i, (0, 0))[0],
                bytes=traffic.get(i, (0, 0))[1],
            )
            for (port, prio), i in zip(cells, indices, strict=True)
        ]

    @_lost_stream_is_unavailable
    async def reset_queue_telemetry(self, name: str, ports: Iterable[int]) -> None:
        sw = self._switch(name)
        cli = self._bmv2_cli.get(name)
        if cli is not None:
            # BMv2's CLI resets a whole register array, every port's cells.
            await asyncio.to_thread(cli.reset_registers, [R_MAX_DEPTH, R_MAX_DELAY])
            return
        updates = []
        for port in ports:
            for prio in range(QUEUES_PER_PORT):
                i = queue_cell(port, prio)
                updates.append(~fy.P4RegisterEntry(R_MAX_DEPTH, index=i, data=0))
                updates.append(~fy.P4RegisterEntry(R_MAX_DELAY, index=i, data=0))
        await sw.write(updates)

    @_lost_stream_is_unavailable
    async def channel_counters(
        self, name: str, selector: ChannelSelector, channel_id: int
    ) -> ChannelCounters:
        sw = self._switch(name)
        match = _channel_match(selector)
        packets = byte_count = 0
        async for entry in _read(
            sw, fy.P4DirectCounterEntry(table_entry=fy.P4TableEntry(T_CHANNELS, match=match))
        ):
            if entry.data is not None:
                packets, byte_count = entry.data.packet_count, entry.data.byte_count
        yellow = await _read_counters(sw, C_CHANNEL_YELLOW, [channel_id])
        red = await _read_counters(sw, C_CHANNEL_RED, [channel_id])
        return ChannelCounters(
            packets=packets,
            bytes=byte_count,
            yellow_packets=yellow.get(channel_id, (0, 0))[0],
            red_packets=red.get(channel_id, (0, 0))[0],
        )

    @_lost_stream_is_unavailable
    async def drop_counters(self, name: str) -> dict[str, int]:
        sw = self._switch(name)
        counts = await _read_counters(sw, C_DROPS, list(range(len(DROP_REASONS))))
        return {reason: counts.get(i, (0, 0))[0] for i, reason in enumerate(DROP_REASONS)}

    # ---- the guarantee monitor (terrapin.monitor) -----------------------------------------------

    @_lost_stream_is_unavailable
    async def sync_queue_bounds(self, name: str, bounds: Sequence[QueueBound]) -> int:
        """Make `queue_bounds` hold exactly `bounds`; returns how many entries were written.
        Read first, so a switch that restarted empty (or a controller that restarted) is
        corrected by the same call."""
        # Bounds staged for set-ups may still be on their way: the table is read after them.
        await self._batchers[name].drained()
        sw = self._switch(name)
        have: dict[tuple[int, int], int] = {}
        async for entry in _read(sw, fy.P4TableEntry(T_QUEUE_BOUNDS)):
            match = entry.match or fy.P4TableMatch()
            args = entry.action.args if isinstance(entry.action, fy.P4TableAction) else {}
            have[(int(match["port"]), int(match["priority"]))] = int((args or {}).get("limit_us", -1))
        updates = self._codec(sw).bound_updates(have, bounds)
        if updates:
            await sw.write(updates)
        return len(updates)

    def stage_bounds(
        self,
        name: str,
        bounds: Sequence[QueueBound],
        installed: Mapping[tuple[int, int], int],
    ) -> asyncio.Future[None]:
        """The queue bounds that change ahead of a channel's entry (from `installed`, what the
        monitor last wrote; a bound entry that is not as it says makes the write fail), queued
        now: before the entry's own write, so in the same WriteRequest under load, or the one
        before. Nothing is read: concurrent set-ups share the switch's writes."""
        updates = self._codec(self._switch(name)).bound_updates(installed, bounds)
        return self._batchers[name].submit(updates) if updates else _done()

    @_lost_stream_is_unavailable
    async def monitor_sample(
        self, name: str, cells: Sequence[tuple[int, int]], channel_ids: Sequence[int]
    ) -> MonitorSample:
        """One consistent-as-possible read of everything the monitor checks on a switch.

        Order matters: a channel's direct counter (every colour) is read before its yellow and
        red counters, so a packet arriving between the two reads can only make the green count
        look smaller, never larger."""
        sw = self._switch(name)
        started = asyncio.get_running_loop().time()
        codec = self._codec(sw)
        channels: dict[ChannelSelector, tuple[int, int]] = {}
        # Protobufs straight, not finsy's entities: thousands of channels a switch, every poll.
        read_all = p4r.ReadRequest(device_id=sw.device_id)
        read_all.entities.add().direct_counter_entry.table_entry.table_id = codec.table_id
        async for reply in _read_raw(sw, read_all):
            for entity in reply.entities:
                direct = entity.direct_counter_entry
                channels[codec.selector_of(direct.table_entry)] = (
                    direct.data.packet_count,
                    direct.data.byte_count,
                )
        yellow = await _read_counters(sw, C_CHANNEL_YELLOW, list(channel_ids))
        red = await _read_counters(sw, C_CHANNEL_RED, list(channel_ids))
        excess = {cid: (*yellow.get(cid, (0, 0)), *red.get(cid, (0, 0))) for cid in channel_ids}
        queue_index = [queue_cell(port, prio) for port, prio in cells]
        traffic = await _read_counters(sw, C_QUEUE_TRAFFIC, queue_index)
        band_index = [i * DELAY_BANDS + band for i in queue_index for band in range(DELAY_BANDS)]
        band_counts = await _read_counters(sw, C_QUEUE_DELAY_BANDS, band_index)
        bands = {
            cell: tuple(band_counts.get(i * DELAY_BANDS + b, (0, 0))[0] for b in range(DELAY_BANDS))
            for cell, i in zip(cells, queue_index, strict=True)
        }
        depth = delay = None
        if name not in self._no_registers:
            try:
                raw_delay = await _read_registers(sw, R_MAX_DELAY, queue_index)
                raw_depth = await _read_registers(sw, R_MAX_DEPTH, queue_index)
            except fy.P4ClientError as exc:
                if exc.code != fy.GRPCStatusCode.UNIMPLEMENTED:
                    raise
                # p4lang's PI: "Register reads are not supported yet". The delay bands remain.
                self._no_registers.add(name)
                LOG.info("switch %s reads no registers over P4Runtime; delay from bands only", name)
            else:
                delay = {cell: raw_delay.get(i, 0) for cell, i in zip(cells, queue_index, strict=True)}
                depth = {cell: raw_depth.get(i, 0) for cell, i in zip(cells, queue_index, strict=True)}
        return MonitorSample(
            switch=name,
            started=started,
            finished=asyncio.get_running_loop().time(),
            bands=bands,
            queue_traffic={cell: traffic.get(i, (0, 0)) for cell, i in zip(cells, queue_index, strict=True)},
            max_delay_us=delay,
            max_depth_packets=depth,
            channels=channels,
            excess=excess,
        )

    def reads_registers(self, name: str) -> bool:
        return name not in self._no_registers


async def _read_registers(sw: fy.Switch, name: str, indices: list[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    if not indices:
        return found
    async for entry in _read(sw, [fy.P4RegisterEntry(name, index=i) for i in indices]):
        if entry.index is not None and entry.data is not None:
            found[entry.index] = int(entry.data)
    return found


async def _read_counters(sw: fy.Switch, name: str, indices: list[int]) -> dict[int, tuple[int, int]]:
    """Cells of an indirect counter, index → (packets, bytes); read as protobufs (a poll reads
    two cells for every channel of the switch)."""
    found: dict[int, tuple[int, int]] = {}
    if not indices:
        return found
    counter_id = sw.p4info.counters[name].id
    request = p4r.ReadRequest(device_id=sw.device_id)
    for index in indices:
        cell = request.entities.add().counter_entry
        cell.counter_id = counter_id
        cell.index.index = index
    async for reply in _read_raw(sw, request):
        for entity in reply.entities:
            counter = entity.counter_entry
            if counter.HasField("index"):
                found[counter.index.index] = (counter.data.packet_count, counter.data.byte_count)
    return found


def _channel_match(selector: ChannelSelector) -> fy.P4TableMatch:
    """T_CHANNELS's key for a selector: every write, delete and read of a channel's entry."""
    values = (selector.src, selector.dst, selector.protocol, selector.flow_key)
    return fy.P4TableMatch(dict(zip(CHANNEL_KEY, values, strict=True)))


def _selector(match: Any) -> ChannelSelector:
    """The selector of a channel entry read back (the inverse of _channel_match)."""
    match = match or fy.P4TableMatch()
    src, dst, protocol, flow_key = (match[name] for name in CHANNEL_KEY)
    return ChannelSelector(
        src=str(_as_ip(src)), dst=str(_as_ip(dst)), protocol=int(protocol), flow_key=int(flow_key)
    )


def _read_request(table: str) -> fy.P4TableEntry:
    if table != T_CHANNELS:
        return fy.P4TableEntry(table)
    # P4Runtime returns a direct meter's config only when the read request asks for it.
    return fy.P4TableEntry(table, meter_config=fy.P4MeterConfig(cir=0, cburst=0, pir=0, pburst=0))


def _read(sw: fy.Switch, entity: Any) -> AsyncIterator[Any]:
    # finsy's read() is an async generator whose overloads are typed as coroutines.
    return cast(AsyncIterator[Any], sw.read(entity))


def _read_raw(sw: fy.Switch, request: p4r.ReadRequest) -> AsyncIterator[p4r.ReadResponse]:
    """A read whose replies stay protobufs (finsy's sw.read decodes every entity, which costs more
    than the comparison it is read for). finsy 0.30 has no public call for it: its P4Client's
    request_iter is what sw.read itself uses."""
    client = sw._p4client
    if client is None:
        raise SwitchUnavailable(f"switch {sw.name} is not connected")
    return client.request_iter(request)


WRITE_BATCH = 2000  # updates per WriteRequest: a few hundred kB, well below gRPC's 4 MB


async def _write_raw(
    sw: fy.Switch, kind: Any, entries: Sequence[p4r.TableEntry], strict: bool = True
) -> None:
    for start in range(0, len(entries), WRITE_BATCH):
        chunk = entries[start : start + WRITE_BATCH]
        await sw.write(
            [p4r.Update(type=kind, entity=p4r.Entity(table_entry=pb)) for pb in chunk], strict=strict
        )


def _key_only(pb: p4r.TableEntry) -> p4r.TableEntry:
    """A DELETE names the entry by its key alone."""
    return p4r.TableEntry(table_id=pb.table_id, match=pb.match, priority=pb.priority)


def _as_ip(value: Any) -> str:
    import ipaddress

    if isinstance(value, int):
        return str(ipaddress.IPv4Address(value))
    return str(ipaddress.IPv4Address(str(value)))


def _resolve(base: Path, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else (base / p)
