"""Every byte the controller sends to p4src, and how it reads p4src's answers back.

The names and numbers come from p4program.py (tested against the compiled P4Info and
constants.p4); this module turns the controller's objects into P4Runtime entities with them: a
channel's hop as a `channels` entry (entry_for_hop, window_entry, frame_bytes: the data plane's
units), ChannelCodec (those entries, their keys, colour counters and `queue_bounds` entries
straight to protobufs), the forwarding and aggregate entries and meters, the packet-out
metadata, and the telemetry registers' resets. Nothing here does I/O: the other modules of
terrapin/switches send what this one encodes.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import finsy as fy
from finsy.proto import p4r

from terrapin.admission.model import (
    JUMPING_WINDOW,
    MOVING_WINDOW,
    Allocation,
    ChannelEnvelope,
    HopAllocation,
    ceil_div,
)
from terrapin.admission.policers import moving_ring
from terrapin.config import AggregateConfig
from terrapin.constants import CHANNEL_IN_HOST, ETHERNET_HEADER, RTAG_BYTES
from terrapin.p4program import (
    A_ADMIT,
    A_ADMIT_JUMPING,
    A_ADMIT_MOVING,
    A_ANSWER_ARP,
    A_FROM_TRUNK,
    A_PIN,
    A_ROUTE,
    A_SET_AGGREGATE,
    A_SET_DELAY_BOUND,
    A_SET_SOURCE_MAC,
    C_CHANNEL_RED,
    C_CHANNEL_YELLOW,
    CHANNEL_KEY,
    EXCESS_DEMOTE,
    EXCESS_DROP,
    M_AGGREGATE_METERS,
    MAX_AGGREGATES,
    PACKET_OUT_DIRECT,
    PACKET_OUT_PIPELINE,
    QUEUES_PER_PORT,
    R_MAX_DELAY,
    R_MAX_DEPTH,
    SELECTOR_KEY,
    T_AGGREGATES,
    T_ARP,
    T_CHANNEL_PATHS,
    T_CHANNELS,
    T_COPIES,
    T_MEMBER_STREAMS,
    T_PORT_MACS,
    T_PROTECTIONS,
    T_QUEUE_BOUNDS,
    T_ROUTES,
    T_TRUNK_PORTS,
    queue_cell,
)
from terrapin.paths import (
    ChannelEntry,
    ChannelSelector,
    Forwarding,
    JumpingWindowEntry,
    MovingWindowEntry,
)


@dataclass(frozen=True)
class QueueBound:
    """One `queue_bounds` entry: the admitted delay bound of an egress queue, in µs."""

    port: int
    priority: int
    bound_us: int


def entry_for_hop(
    switch: str,
    selector: ChannelSelector,
    channel_id: int,
    hop: HopAllocation,
    demote_excess: bool,
    edge: Allocation | None = None,
    tag: int = 0,
    pin: tuple[int, str] | None = None,
    tagged: bool = False,
    in_port: int = CHANNEL_IN_HOST,
) -> ChannelEntry:
    """The hop's (ρ, σ) as a strict trTCM: CIR = PIR = ρ, CBS = PBS = σ (docs/dataplane.md), in
    frame bytes: each packet of up to max_packet IPv4 bytes carries 14 more on the wire.

    `edge` is the channel's allocation when this is its first hop, whose policer is applied to
    the traffic as the source sent it: the requested window policer, or the meter, each with the
    allocation's tolerance (a meter's is in the allocation's burst, σ + ρτ, as GCRA's burst
    tolerance). Later hops see that traffic bunched by the queues and switches upstream, which
    the window would cut; their meter's (ρ, σ_k) is the policed envelope with the burst grown
    hop by hop (HopAllocation.burst), so it never does. `tag` names this installation of the
    channel (the window ignores state another tag left behind); `pin` where the hop leaves the
    destination's route (Topology.pin). `tagged`: the hop meters a protected channel's copies,
    each RTAG_BYTES longer. `in_port`: where its packets enter the switch (ChannelEntry.in_port,
    Topology.in_ports)."""
    rate = frame_bytes(hop.rate, hop.max_packet, tagged)
    burst = frame_bytes(hop.burst if edge is None else edge.burst, hop.max_packet, tagged)
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
        window=None if edge is None else window_entry(edge.requested, tag, edge.tolerance_us),
        port=hop.port.port,
        in_port=in_port,
        pin=pin,
    )


def frame_bytes(ipv4_bytes: int, max_packet: int, tagged: bool = False) -> int:
    """A rate or burst in IPv4 bytes as the meters count it, in frame bytes: each packet of up
    to max_packet IPv4 bytes carries ETHERNET_HEADER more on the wire, and RTAG_BYTES more if
    `tagged` (rounded up, so the meter never passes less than the envelope)."""
    header = ETHERNET_HEADER + (RTAG_BYTES if tagged else 0)
    return ceil_div(ipv4_bytes * (max_packet + header), max_packet)


def window_entry(
    env: ChannelEnvelope, tag: int, tolerance_us: int = 0
) -> JumpingWindowEntry | MovingWindowEntry | None:
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
        return JumpingWindowEntry(policer.window_us, limit, policer.count_packets, smax, tolerance_us, tag)
    if policer.kind == MOVING_WINDOW:
        ring = moving_ring(policer)
        return MovingWindowEntry(
            policer.xmin_us, policer.interval_us, ring.slots - 1, ring.quantum, smax, tolerance_us, tag
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

    def match(self, selector: ChannelSelector, in_port: int) -> list[p4r.FieldMatch]:
        return [
            p4r.FieldMatch(field_id=fid, exact=p4r.FieldMatch.Exact(value=value))
            for fid, value in zip(self._fields, _match_values(selector, in_port), strict=True)
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
        for field_match, value in zip(pb.match, _match_values(entry.selector, entry.in_port), strict=True):
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
        src, dst, protocol, flow_key, _in_port = (values.get(fid, 0) for fid in self._fields)
        return ChannelSelector(src=_ipv4_str(src), dst=_ipv4_str(dst), protocol=protocol, flow_key=flow_key)

    def key_only(self, selector: ChannelSelector, in_port: int) -> p4r.TableEntry:
        return p4r.TableEntry(table_id=self.table_id, match=self.match(selector, in_port))


@functools.lru_cache(maxsize=65536)
def _canonical_ipv4(address: str) -> bytes:
    # A network's hosts are few and each is in thousands of set-ups: converted once each.
    return _canonical(int(ipaddress.IPv4Address(address)))


def _match_values(selector: ChannelSelector, in_port: int) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """A channel entry's match values, in CHANNEL_KEY's order."""
    return (
        _canonical_ipv4(selector.src),
        _canonical_ipv4(selector.dst),
        _canonical(selector.protocol),
        _canonical(selector.flow_key),
        _canonical(in_port),
    )


@functools.lru_cache(maxsize=65536)
def _ipv4_str(address: int) -> str:
    return str(ipaddress.IPv4Address(address))


def _canonical(value: int) -> bytes:
    """A P4Runtime byte string in its canonical form (spec §8.4: no leading zero bytes)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


class ChannelCodecs:
    """One ChannelCodec per P4Info a switch runs (finsy's schema object): building one reads the
    schema's ids, so it is done once per pipeline, not per entry."""

    def __init__(self) -> None:
        self._codecs: dict[int, ChannelCodec] = {}

    def __call__(self, sw: fy.Switch) -> ChannelCodec:
        """The channels codec of the P4Info the switch runs."""
        codec = self._codecs.get(id(sw.p4info))
        if codec is None:
            codec = self._codecs[id(sw.p4info)] = ChannelCodec(sw.p4info)
        return codec


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


def key_only(pb: p4r.TableEntry) -> p4r.TableEntry:
    """A DELETE names the entry by its key alone."""
    return p4r.TableEntry(table_id=pb.table_id, match=pb.match, priority=pb.priority)


def forwarding_entries(fwd: Forwarding) -> list[fy.P4TableEntry]:
    # (table, key, action, action arguments) of every routing, ARP and port MAC entry
    rows: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
        (T_ROUTES, {"dst_addr": r.prefix}, A_ROUTE, {"port": r.port, "next_hop_mac": r.next_hop_mac})
        for r in fwd.routes
    ]
    rows += [(T_ARP, {"target_ip": ip}, A_ANSWER_ARP, {"mac": mac}) for ip, mac in fwd.arp_answers]
    rows += [(T_PORT_MACS, {"port": port}, A_SET_SOURCE_MAC, {"mac": mac}) for port, mac in fwd.port_macs]
    rows += [(T_TRUNK_PORTS, {"port": port}, A_FROM_TRUNK, {}) for port in fwd.trunk_ports]
    return [
        fy.P4TableEntry(table, match=fy.P4TableMatch(key), action=fy.P4TableAction(action, **args))
        for table, key, action, args in rows
    ]


def aggregate_entries(aggregates: Sequence[AggregateConfig]) -> list[fy.P4TableEntry]:
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


def channel_match(selector: ChannelSelector, in_port: int) -> fy.P4TableMatch:
    """T_CHANNELS's key for a selector entering by in_port: every write, delete and read of a
    channel's entry."""
    values = (selector.src, selector.dst, selector.protocol, selector.flow_key, in_port)
    return fy.P4TableMatch(dict(zip(CHANNEL_KEY, values, strict=True)))


def selector_match(selector: ChannelSelector) -> fy.P4TableMatch:
    """T_CHANNEL_PATHS's key: the selector alone (a channel's packets reach it only once
    `channels` admitted them)."""
    values = (selector.src, selector.dst, selector.protocol, selector.flow_key)
    return fy.P4TableMatch(dict(zip(SELECTOR_KEY, values, strict=True)))


def selector_of_match(match: Any) -> ChannelSelector:
    """The selector of a channel entry read back (the inverse of channel_match)."""
    match = match or fy.P4TableMatch()
    src, dst, protocol, flow_key = (match[name] for name in SELECTOR_KEY)
    return ChannelSelector(
        src=str(_as_ip(src)), dst=str(_as_ip(dst)), protocol=int(protocol), flow_key=int(flow_key)
    )


def pin_entry(entry: ChannelEntry) -> fy.P4TableEntry:
    """T_CHANNEL_PATHS's entry for a pinned channel hop (entry.pin), or its key alone."""
    match = selector_match(entry.selector)
    if entry.pin is None:
        return fy.P4TableEntry(T_CHANNEL_PATHS, match=match)
    port, mac = entry.pin
    action = fy.P4TableAction(A_PIN, port=port, next_hop_mac=mac)
    return fy.P4TableEntry(T_CHANNEL_PATHS, match=match, action=action)


def channel_read_request() -> fy.P4TableEntry:
    """Every `channels` entry, with its direct meter's config."""
    # P4Runtime returns a direct meter's config only when the read request asks for it.
    return fy.P4TableEntry(T_CHANNELS, meter_config=fy.P4MeterConfig(cir=0, cburst=0, pir=0, pburst=0))


def reconcile_read_request(schema: Any, device_id: int, codec: ChannelCodec) -> p4r.ReadRequest:
    """What a reconciliation reads: the forwarding, aggregate, pin and protection tables, every
    channel entry with its meter (as protobufs: a takeover compares tens of thousands), and the
    multicast groups."""
    request = p4r.ReadRequest(device_id=device_id)
    for table in (
        T_ROUTES,
        T_ARP,
        T_PORT_MACS,
        T_TRUNK_PORTS,
        T_AGGREGATES,
        T_CHANNEL_PATHS,
        T_PROTECTIONS,
        T_COPIES,
    ):
        request.entities.add().table_entry.table_id = schema.tables[table].id
    members = request.entities.add().table_entry
    members.table_id = schema.tables[T_MEMBER_STREAMS].id
    members.meter_config.SetInParent()
    # Every multicast group (the protected channels' replication), in the same read.
    request.entities.add().packet_replication_engine_entry.multicast_group_entry.SetInParent()
    # P4Runtime returns a direct meter's config only when the read request asks for it.
    channels = request.entities.add().table_entry
    channels.table_id = codec.table_id
    channels.meter_config.SetInParent()
    return request


def aggregate_meter_writes(aggregates: Sequence[AggregateConfig]) -> list[fy.P4MeterEntry]:
    """Every aggregate's meter config at its index (a meter config cannot be inserted or
    deleted, only set)."""
    return [
        ~fy.P4MeterEntry(M_AGGREGATE_METERS, index=i, config=aggregate_meter(a))
        for i, a in enumerate(aggregates)
    ]


def queue_bounds_read_request() -> fy.P4TableEntry:
    return fy.P4TableEntry(T_QUEUE_BOUNDS)


def queue_bound_of(entry: Any) -> tuple[tuple[int, int], int]:
    """A `queue_bounds` entry read back: its (port, priority) and its limit in µs (-1 without
    an action)."""
    match = entry.match or fy.P4TableMatch()
    args = entry.action.args if isinstance(entry.action, fy.P4TableAction) else {}
    return (int(match["port"]), int(match["priority"])), int((args or {}).get("limit_us", -1))


def packet_out(frame: bytes, egress_port: int | None) -> fy.P4PacketOut:
    """A frame for the CPU port's packet-out header: through the pipeline (routed like a host's
    packet) unless a port is named."""
    mode = PACKET_OUT_PIPELINE if egress_port is None else PACKET_OUT_DIRECT
    return fy.P4PacketOut(frame, egress_port=egress_port or 0, through_pipeline=mode, _pad=0)


def queue_maxima_resets(ports: Iterable[int]) -> list[fy.P4RegisterEntry]:
    """Writes that zero the largest depth and delay registers of every queue of `ports`."""
    updates = []
    for port in ports:
        for prio in range(QUEUES_PER_PORT):
            i = queue_cell(port, prio)
            updates.append(~fy.P4RegisterEntry(R_MAX_DEPTH, index=i, data=0))
            updates.append(~fy.P4RegisterEntry(R_MAX_DELAY, index=i, data=0))
    return updates


def _as_ip(value: Any) -> str:
    if isinstance(value, int):
        return str(ipaddress.IPv4Address(value))
    return str(ipaddress.IPv4Address(str(value)))
