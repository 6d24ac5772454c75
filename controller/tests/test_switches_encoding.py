"""switches.ChannelCodec writes `channels` entries without finsy's generic encoder; here every
kind of channel entry it can be given is encoded both ways, against the compiled P4Info, and the
bytes must be equal. The reconciliation's comparison of entries (entry_key, entry_payload) is
checked on what a switch may answer: match fields in any order, no meter config on a window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import finsy as fy
from finsy.proto import p4r
from hypothesis import given, settings
from hypothesis import strategies as st

from terrapin.p4program import (
    A_ADMIT,
    A_ADMIT_JUMPING,
    A_ADMIT_MOVING,
    A_SET_DELAY_BOUND,
    C_CHANNEL_RED,
    C_CHANNEL_YELLOW,
    CHANNEL_KEY,
    EXCESS_DEMOTE,
    EXCESS_DROP,
    T_CHANNELS,
    T_QUEUE_BOUNDS,
)
from terrapin.paths import ChannelEntry, ChannelSelector, JumpingWindowEntry, MovingWindowEntry
from terrapin.switches.encoding import ChannelCodec, QueueBound, entry_key, entry_payload

P4_INFO = Path(__file__).resolve().parents[2] / "build" / "p4" / "terrapin.p4info.txtpb"
SCHEMA = fy.P4Schema(P4_INFO)
CODEC = ChannelCodec(SCHEMA)


def finsy_entry(entry: ChannelEntry) -> p4r.TableEntry:
    """The same entry through finsy's generic encoder: the reference."""
    excess = EXCESS_DEMOTE if entry.demote_excess else EXCESS_DROP
    s = entry.selector
    values = (s.src, s.dst, s.protocol, s.flow_key, entry.in_port)
    match = fy.P4TableMatch(dict(zip(CHANNEL_KEY, values, strict=True)))
    if entry.window is None:
        action = fy.P4TableAction(
            A_ADMIT, channel_id=entry.channel_id, priority=entry.priority, on_yellow=excess, on_red=excess
        )
        meter = fy.P4MeterConfig(cir=entry.cir, cburst=entry.cburst, pir=entry.pir, pburst=entry.pburst)
        table_entry = fy.P4TableEntry(T_CHANNELS, match=match, action=action, meter_config=meter)
    else:
        name = A_ADMIT_JUMPING if isinstance(entry.window, JumpingWindowEntry) else A_ADMIT_MOVING
        window = {k: int(v) for k, v in vars(entry.window).items()}
        action = fy.P4TableAction(
            name, channel_id=entry.channel_id, priority=entry.priority, on_excess=excess, **window
        )
        table_entry = fy.P4TableEntry(T_CHANNELS, match=match, action=action)
    return table_entry.encode(SCHEMA).table_entry


addresses = st.integers(0, 2**32 - 1).map(lambda n: ".".join(str(b) for b in n.to_bytes(4, "big")))
selectors = st.builds(ChannelSelector, addresses, addresses, st.integers(0, 255), st.integers(0, 2**64 - 1))
rates = st.integers(0, 2**40)
jumping = st.builds(
    JumpingWindowEntry,
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.booleans(),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
)
moving = st.builds(
    MovingWindowEntry,
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 31),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
)
entries = st.builds(
    ChannelEntry,
    st.just("s1"),
    selectors,
    st.integers(0, 2**16 - 1),
    st.integers(0, 7),
    rates,
    rates,
    rates,
    rates,
    st.booleans(),
    st.one_of(st.none(), jumping, moving),
    in_port=st.integers(0, 513),
)


@settings(max_examples=300)
@given(entries)
def test_the_codec_writes_what_finsy_writes(entry: ChannelEntry) -> None:
    mine, reference = CODEC.entry(entry), finsy_entry(entry)
    assert mine.SerializeToString(deterministic=True) == reference.SerializeToString(deterministic=True)
    assert entry_key(mine) == entry_key(reference) and entry_payload(mine) == entry_payload(reference)
    assert CODEC.key_only(entry.selector, entry.in_port).match == reference.match


@given(entries, st.randoms())
def test_an_entry_read_back_in_another_order_is_the_same_entry(entry: ChannelEntry, rng: object) -> None:
    written = CODEC.entry(entry)
    read = p4r.TableEntry()
    read.CopyFrom(written)
    fields = list(read.match)
    rng.shuffle(fields)  # type: ignore[attr-defined]
    del read.match[:]
    read.match.extend(fields)
    assert entry_key(read) == entry_key(written) and entry_payload(read) == entry_payload(written)
    changed = p4r.TableEntry()
    changed.CopyFrom(written)
    changed.action.action.params[1].value = bytes([(changed.action.action.params[1].value[0] + 1) % 8])
    assert entry_key(changed) == entry_key(written) and entry_payload(changed) != entry_payload(written)


def finsy_bound_entry(cell: tuple[int, int], bound_us: int | None) -> fy.P4TableEntry:
    match = fy.P4TableMatch(port=cell[0], priority=cell[1])
    if bound_us is None:
        return fy.P4TableEntry(T_QUEUE_BOUNDS, match=match)
    action = fy.P4TableAction(
        A_SET_DELAY_BOUND, quarter_us=bound_us // 4, half_us=bound_us // 2, limit_us=bound_us
    )
    return fy.P4TableEntry(T_QUEUE_BOUNDS, match=match, action=action)


def finsy_bound_updates(have: dict[tuple[int, int], int], want: dict[tuple[int, int], int]) -> list[Any]:
    """The reference: the same diff as finsy entities (+ insert, ~ modify, - delete)."""
    updates: list[Any] = [
        ~finsy_bound_entry(cell, bound) if cell in have else +finsy_bound_entry(cell, bound)
        for cell, bound in want.items()
        if have.get(cell) != bound
    ]
    return updates + [-finsy_bound_entry(cell, None) for cell in have if cell not in want]


cells = st.tuples(st.integers(0, 511), st.integers(0, 7))
bound_tables = st.dictionaries(cells, st.integers(0, 2**32 - 1), max_size=8)


@settings(max_examples=200, deadline=None)
@given(have=bound_tables, want=bound_tables)
def test_queue_bound_updates_are_the_bytes_finsy_writes(
    have: dict[tuple[int, int], int], want: dict[tuple[int, int], int]
) -> None:
    """ChannelCodec.bound_updates against the same updates through finsy's generic encoder:
    insert what is new, modify what changed, delete what is no longer wanted, nothing for
    what is as it should be."""
    bounds = [QueueBound(port, priority, bound) for (port, priority), bound in want.items()]
    ours = [u.SerializeToString(deterministic=True) for u in CODEC.bound_updates(have, bounds)]
    reference = fy.p4entity.encode_updates(finsy_bound_updates(have, want), SCHEMA)
    assert ours == [u.SerializeToString(deterministic=True) for u in reference]
    assert len(ours) == sum(have.get(c) != b for c, b in want.items()) + len(have.keys() - want.keys())


def test_zeroing_a_channels_colours_names_both_counters_at_its_id() -> None:
    updates = CODEC.zero_colours(77)
    ids = {SCHEMA.counters[name].id for name in (C_CHANNEL_YELLOW, C_CHANNEL_RED)}
    assert {u.entity.counter_entry.counter_id for u in updates} == ids
    for u in updates:
        assert u.type == p4r.Update.MODIFY
        assert u.entity.counter_entry.index.index == 77
        assert (u.entity.counter_entry.data.packet_count, u.entity.counter_entry.data.byte_count) == (0, 0)


@settings(max_examples=200, deadline=None)
@given(selector=selectors)
def test_a_channel_entry_read_back_gives_its_selector(selector: ChannelSelector) -> None:
    """The monitor reads every channel's direct counter as protobufs and names each by
    selector_of: the inverse of the key the entry was written with."""
    assert CODEC.selector_of(CODEC.key_only(selector, 3)) == selector


def test_precompute_encodes_ahead_on_a_backup_and_only_forgets_on_the_primary() -> None:
    """A backup encodes every desired entry ahead of a takeover; the primary (encode=False),
    whose set-ups wrote its entries already, only drops what is no longer desired."""
    from fakes import chain_config

    from terrapin.paths import Topology
    from terrapin.switches import SwitchFabric

    config = chain_config(2)
    config = config.model_copy(update={"p4": config.p4.model_copy(update={"p4info": str(P4_INFO)})})
    fabric = SwitchFabric(config, Topology(config), lambda *_: None, lambda _name: [])

    def entry(flow_key: int) -> ChannelEntry:
        selector = ChannelSelector("10.0.1.2", "10.0.2.2", 17, flow_key)
        return ChannelEntry("s1", selector, flow_key, 6, 1000, 1500, 2000, 3000, True)

    a, b, c = entry(1), entry(2), entry(3)
    assert fabric.precompute({"s1": [a, b]}) == 2  # encoded ahead
    assert fabric.precompute({"s1": [a, b, c]}, encode=False) == 0  # c is not encoded ...
    assert fabric.precompute({"s1": [b]}, encode=False) == 0  # ... a is forgotten, b kept
    assert fabric.precompute({"s1": [a, b, c]}) == 2  # so a and c are new to a backup's pass


def test_the_first_hop_polices_with_the_allocations_tolerance_and_later_hops_with_their_grown_burst() -> None:
    """docs/controller.md "Jitter": the first switch's meter has the allocation's burst (σ plus
    what its tolerance lets through) and a window its tolerance; a later hop's meter has the
    burst grown over the hops and switches before it, which only a jittery switch upstream
    makes larger than the first's."""
    from terrapin.admission import AdmissionLedger, ChannelEnvelope, ChannelKey, Denial, PortId, PortModel
    from terrapin.admission.model import MOVING_WINDOW, Policer
    from terrapin.switches.encoding import entry_for_hop, frame_bytes

    ports = [
        PortModel(
            PortId(f"s{i}", 2), line_rate=12_500_000, queue_capacity=96_000, largest_packet=1500, jitter_us=j
        )
        for i, j in ((1, 2_000), (2, 500))
    ]
    selector = ChannelSelector("10.0.1.2", "10.0.2.2", 17, 1)
    ledger = AdmissionLedger(ports)
    meter = ledger.admit(
        ChannelKey("h", 1), [p.port for p in ports], ChannelEnvelope(5, 1_000_000, 9_000, 1500)
    )
    assert not isinstance(meter, Denial)
    first = entry_for_hop("s1", selector, 1, meter.hops[0], False, edge=meter)
    later = entry_for_hop("s2", selector, 1, meter.hops[1], False)
    assert first.cburst == frame_bytes(9_000 + 2_000, 1500) and first.window is None
    assert later.cburst == frame_bytes(meter.hops[1].burst, 1500) > first.cburst
    window = Policer(MOVING_WINDOW, xmin_us=1_000, xave_us=2_000, interval_us=20_000)
    moving = ledger.admit(
        ChannelKey("h", 2), [p.port for p in ports], ChannelEnvelope(5, 0, 0, 1000, policer=window)
    )
    assert not isinstance(moving, Denial)
    edge = entry_for_hop("s1", selector, 2, moving.hops[0], False, edge=moving, tag=7)
    assert isinstance(edge.window, MovingWindowEntry) and edge.window.tolerance_us == 2_000
