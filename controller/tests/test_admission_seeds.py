"""Admission tests against cases computed by hand from the seeds."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from terrapin.admission import (
    AdmissionLedger,
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    Denial,
    PortId,
    PortModel,
    ServiceClass,
)
from terrapin.constants import DenialReason

MBIT = 125_000  # bytes/s per Mbit/s
S1 = PortId("s1", 2)


def key(n: int) -> ChannelKey:
    return ChannelKey("10.0.0.1", n)


def seed000_port(**over: Any) -> PortModel:
    """Seed 000 §4.1.1: 32 buffers of 4,500 bytes, 3,750,000 B/s at high priority, 1 ms timer."""
    return replace(
        PortModel(
            port=S1,
            line_rate=50 * MBIT,
            queue_capacity=32 * 4500,
            largest_packet=4500,
            reservable_rate=3_750_000,
            packet_granularity=4500,
            timer_tick_us=1000,
            tests=("rate_buffer",),
        ),
        **over,
    )


def admitted(decision: object) -> Allocation:
    assert isinstance(decision, Allocation), decision
    return decision


def denied(decision: object) -> Denial:
    assert isinstance(decision, Denial), decision
    return decision


# ---- seed 000 §4.1.1.1: rounding to the leaky bucket's granularity ---------------------------


@pytest.mark.parametrize(
    ("mbit", "burst", "rate", "period_us", "packets"),
    [
        (10, 22_500, 1_500_000, 3000, 5),  # "a request for 10 Mbits/s had to be increased to 12"
        (6, 27_000, 750_000, 6000, 6),  # "for 6 Mbits/s the counter is updated every 6 ms"
        (9, 27_000, 1_125_000, 4000, 6),  # "with a rate of 9 Mbits/s ... every 4 ms"
        (18, 9_000, 2_250_000, 2000, 2),  # the file transfer: 18 Mbit/s, 2 packets
        (7.2, 27_000, 900_000, 5000, 6),  # 4,500 B / 900 B/ms = 5 ms exactly: no rounding
    ],
)
def test_rounding_follows_the_seed(mbit: float, burst: int, rate: int, period_us: int, packets: int) -> None:
    ledger = AdmissionLedger([seed000_port()])
    env = ChannelEnvelope(priority=6, rate=int(mbit * MBIT), burst=burst, max_packet=4500)
    alloc = admitted(ledger.admit(key(1), [S1], env))
    assert alloc.rate == rate
    assert alloc.burst == packets * 4500
    assert alloc.rounding.credit_period_us == period_us
    assert alloc.rounding.burst_packets == packets
    assert alloc.rounding.rate_rounded_up_by == rate - int(mbit * MBIT)


def test_rate_needing_a_period_below_one_tick_is_denied() -> None:
    # 40 Mbit/s = 5,000,000 B/s: one 4,500-byte packet every 900 µs < the 1 ms timer.
    ledger = AdmissionLedger([seed000_port()])
    d = denied(ledger.admit(key(1), [S1], ChannelEnvelope(6, 5_000_000, 4500, 4500)))
    assert d.primary.reason == DenialReason.RATE_GRANULARITY
    assert d.primary.would_be == 900 and d.primary.excess == 100


# ---- seed 000 §4.1.1.2: Σσ < 32 × 4,500 bytes and Σρ < 3,750,000 B/s -------------------------


def test_rate_limit_of_3_750_000_bytes_per_second() -> None:
    ledger = AdmissionLedger([seed000_port()])
    ten = ChannelEnvelope(priority=6, rate=10 * MBIT, burst=27_000, max_packet=4500)
    admitted(ledger.admit(key(1), [S1], ten))  # 1,500,000 after rounding
    admitted(ledger.admit(key(2), [S1], ten))  # 3,000,000
    d = denied(ledger.admit(key(3), [S1], ten))  # 4,500,000 ≥ 3,750,000
    v = d.primary
    assert v.reason == DenialReason.RATE
    assert (v.limit, v.would_be) == (3_750_000, 4_500_000)
    # strict "<": the smallest reduction that passes brings the sum to 3,749,999
    assert v.excess == 750_001


def test_seed_experiment_video_and_file_transfer_fit() -> None:
    """§4.3.2: video 9 Mbit/s + 6 packets, file transfer 18 Mbit/s + 2 packets = 27 Mbit/s,
    8 packets of burst: both admitted."""
    ledger = AdmissionLedger([seed000_port()])
    admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 9 * MBIT, 27_000, 4500)))
    admitted(ledger.admit(key(2), [S1], ChannelEnvelope(6, 18 * MBIT, 9_000, 4500)))
    status = ledger.port_status(S1)
    assert status.admitted_rate == 27 * MBIT == 3_375_000
    assert status.levels[5].burst == 8 * 4500


def test_buffer_of_32_packets_is_strict() -> None:
    # Rates kept tiny so only the buffer binds: 5 channels × 6 packets = 30 packets.
    ledger = AdmissionLedger([seed000_port(timer_tick_us=0)])
    for n in range(5):
        admitted(ledger.admit(key(n), [S1], ChannelEnvelope(6, 1000, 27_000, 4500)))
    admitted(ledger.admit(key(10), [S1], ChannelEnvelope(6, 1000, 4500, 4500)))  # 31 < 32
    d = denied(ledger.admit(key(11), [S1], ChannelEnvelope(6, 1000, 4500, 4500)))  # 32 !< 32
    v = d.primary
    assert v.reason == DenialReason.BUFFER
    assert (v.limit, v.would_be, v.excess) == (144_000, 144_000, 4500)  # one packet too many
    # Four connections of six packets (the seed's example) would be 24 packets: fine.
    assert ledger.port_status(S1).levels[5].burst == 31 * 4500


def test_buffers_are_per_priority_queue() -> None:
    ledger = AdmissionLedger([seed000_port(timer_tick_us=0)])
    for n in range(5):
        admitted(ledger.admit(key(n), [S1], ChannelEnvelope(6, 1000, 27_000, 4500)))
    # the level-5 queue is empty, so 30 more packets fit there
    for n in range(5):
        admitted(ledger.admit(key(20 + n), [S1], ChannelEnvelope(5, 1000, 27_000, 4500)))


# ---- static priority with non-preemption (seeds 000 §4.3.2, 001 §4.1, 001 §4.2) --------------


def delay_port(**over: Any) -> PortModel:
    # Seed 000 §4.3.2: "0.9 ms per packet" of 4,500 bytes → the router serves 5,000,000 B/s.
    return replace(
        PortModel(
            port=S1,
            line_rate=5_000_000,
            queue_capacity=32 * 4500,
            largest_packet=4500,
            best_effort_max_packet=0,
            tests=("static_priority",),
        ),
        **over,
    )


def test_seed000_worst_case_eight_packets_is_7_2_ms() -> None:
    """ "the router could have 8 packets (the sum of the high priority burst allocations) in its
    high priority queue ... a delay of up to 7.2 ms": (6 + 2) × 4,500 B / 5,000,000 B/s."""
    ledger = AdmissionLedger([delay_port()])
    a = admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 1_125_000, 27_000, 4500)))
    assert a.hops[0].worst_case_delay_us == 5400  # 6 packets alone
    b = admitted(ledger.admit(key(2), [S1], ChannelEnvelope(6, 2_250_000, 9_000, 4500)))
    assert b.hops[0].worst_case_delay_us == 7200
    assert ledger.port_status(S1).levels[5].worst_case_delay_us == 7200


def test_non_preemption_adds_the_largest_lower_packet() -> None:
    # The third test's 4,377-byte background: (36,000 + 4,377) / 5,000,000 s = 8,075.4 µs.
    ledger = AdmissionLedger([delay_port(best_effort_max_packet=4377)])
    admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 1_125_000, 27_000, 4500)))
    b = admitted(ledger.admit(key(2), [S1], ChannelEnvelope(6, 2_250_000, 9_000, 4500)))
    assert b.hops[0].worst_case_delay_us == 8076


def test_seed001_t1_five_packets_plus_one_best_effort_is_30_ms() -> None:
    """Seed 001 §4.1: 1,000-byte packets take ~5 ms on the T1; 5 queued = 25 ms, and the
    best-effort packet already on the wire adds one more: 30 ms."""
    port = delay_port(line_rate=200_000, largest_packet=1500, best_effort_max_packet=1000)
    ledger = AdmissionLedger([port])
    a = admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 78_750, 5000, 1000)))
    assert a.hops[0].worst_case_delay_us == 30_000


def test_seed001_third_video_is_blocked_by_t1_capacity() -> None:
    """Seed 001 §5: three 630 kbit/s vic sessions exceed a 1.544 Mbit/s T1."""
    port = delay_port(line_rate=193_000, largest_packet=1500, best_effort_max_packet=1000)
    ledger = AdmissionLedger([port])
    vic = ChannelEnvelope(6, 78_750, 7200, 1000)
    admitted(ledger.admit(key(1), [S1], vic))
    admitted(ledger.admit(key(2), [S1], vic))
    d = denied(ledger.admit(key(3), [S1], vic))
    assert d.primary.reason == DenialReason.LINK_CAPACITY
    assert d.primary.would_be == 236_250 and d.primary.excess == 236_250 - 192_999


def test_local_bound_of_100_ms_is_protected() -> None:
    """Seed 001 §4.2: each channel's local bound (100 ms) holds whatever is admitted later."""
    port = delay_port(
        line_rate=200_000,
        largest_packet=1500,
        best_effort_max_packet=1000,
        level_delay_budget_us=((6, 100_000),),
    )
    ledger = AdmissionLedger([port])
    env = ChannelEnvelope(6, 10_000, 5000, 1000)
    for n in range(3):  # (3 × 5,000 + 1,000) / 200,000 = 80 ms
        a = admitted(ledger.admit(key(n), [S1], env))
        assert a.hops[0].protected_delay_us == 100_000
    d = denied(ledger.admit(key(3), [S1], env))  # (20,000 + 1,000) / 200,000 = 105 ms
    assert d.primary.reason == DenialReason.LEVEL_DELAY
    assert (d.primary.would_be, d.primary.excess) == (105_000, 5000)


def test_higher_level_rate_slows_lower_levels() -> None:
    ledger = AdmissionLedger([delay_port()])
    admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 1_000_000, 9000, 4500)))
    low = admitted(ledger.admit(key(2), [S1], ChannelEnvelope(5, 1_000_000, 9000, 4500)))
    # D_5 = (9,000 + 9,000) / (5,000,000 − 1,000,000) s = 4,500 µs
    assert low.hops[0].worst_case_delay_us == 4500


def test_low_priority_large_packets_can_break_a_high_priority_promise() -> None:
    """Non-preemption works upwards: a new level-1 channel's packet delays level 6."""
    port = delay_port(level_delay_budget_us=((6, 2000),))
    ledger = AdmissionLedger([port])
    admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 100_000, 9000, 4500)))  # 1,800 µs
    d = denied(ledger.admit(key(2), [S1], ChannelEnvelope(1, 100_000, 4500, 4500)))
    v = d.primary
    assert v.reason == DenialReason.LEVEL_DELAY and v.priority == 6
    assert (v.would_be, v.excess) == (2700, 700)  # (9,000 + 4,500) / 5,000,000


def test_end_to_end_bound_adds_up_and_bursts_grow_per_hop() -> None:
    hops = [PortId(f"s{i}", 1) for i in range(1, 4)]
    ports = [delay_port(port=h, best_effort_max_packet=1500) for h in hops]
    ledger = AdmissionLedger(ports)
    env = ChannelEnvelope(6, 500_000, 9000, 1500, delay_bound_us=20_000)
    a = admitted(ledger.admit(key(1), hops, env))
    # hop 1: (9,000 + 1,500) / 5e6 = 2,100 µs.
    assert a.hops[0].worst_case_delay_us == 2100
    # The slack (20,000 − Σ) is shared in proportion; hop 2's burst grows by ρ × d1(assigned).
    d1 = a.hops[0].protected_delay_us
    assert d1 is not None and d1 >= 2100
    assert a.hops[1].burst == 9000 + -(-500_000 * d1 // 1_000_000)
    assert a.protected_delay_us is not None and a.protected_delay_us <= 20_000
    assert a.worst_case_delay_us <= a.protected_delay_us
    too_tight = ChannelEnvelope(6, 500_000, 9000, 1500, delay_bound_us=5000)
    d = denied(ledger.admit(key(2), hops, too_tight))
    assert d.primary.reason == DenialReason.END_TO_END_DELAY
    assert d.primary.excess == d.primary.would_be - 5000 > 0


# ---- seed 003: service classes -----------------------------------------------------------------


def rate_only_port(test: str, line_rate: int, **rest: Any) -> PortModel:
    """A port guarded by `test` alone. Seeds 002 and 003 speak of rates only: their ports get
    1,500-byte packets and queues (1 MB) that none of their tests fills."""
    return PortModel(
        port=S1, line_rate=line_rate, queue_capacity=1_000_000, largest_packet=1500, tests=(test,), **rest
    )


def xunet_port() -> PortModel:
    """Seed 003 §5: a 45 Mbit/s trunk; urgent ≤ 2%, FRR ≤ 60/90 slots, WRR the 28 left."""
    return rate_only_port(
        "class_shares",
        45 * MBIT,
        classes=(
            ServiceClass("urgent", frozenset({6}), Fraction(2, 100), peak_policed=True),
            ServiceClass("frr", frozenset({5}), Fraction(60, 90)),
            ServiceClass("wrr", frozenset({4}), Fraction(28, 90)),
        ),
    )


def test_urgent_class_is_held_to_two_percent() -> None:
    ledger = AdmissionLedger([xunet_port()])
    admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 100_000, 100, 100)))
    d = denied(ledger.admit(key(2), [S1], ChannelEnvelope(6, 20_000, 100, 100)))
    assert d.primary.reason == DenialReason.CLASS_SHARE
    assert (d.primary.limit, d.primary.excess) == (112_500, 7_500)


def test_urgent_class_is_peak_policed() -> None:
    ledger = AdmissionLedger([xunet_port()])
    d = denied(ledger.admit(key(1), [S1], ChannelEnvelope(6, 1_250, 200, 100)))
    assert d.primary.reason == DenialReason.PEAK_POLICING
    assert d.primary.excess == 100


def test_frr_level_takes_twenty_1_5_mbit_sources() -> None:
    """ "the FRR level can accommodate as many as 20 1.5 Megabits/sec CBR video sources"."""
    ledger = AdmissionLedger([xunet_port()])
    video = ChannelEnvelope(5, 187_500, 3000, 1500)
    for n in range(20):
        admitted(ledger.admit(key(n), [S1], video))
    d = denied(ledger.admit(key(20), [S1], video))
    assert d.primary.reason == DenialReason.CLASS_SHARE
    assert (d.primary.limit, d.primary.excess) == (3_750_000, 187_500)


# ---- seed 002: best-effort reserve -------------------------------------------------------------


def rether_port(overhead_us: int = 0) -> PortModel:
    """Seed 002 §5: 10 Mbit/s Ethernet, 60% reservable, MTRT 33.3 ms."""
    return rate_only_port(
        "best_effort_floor",
        10 * MBIT,
        best_effort_floor=Fraction(4, 10),
        allocation_interval_us=33_333,
        per_channel_overhead_us=overhead_us,
    )


def test_best_effort_keeps_forty_percent() -> None:
    ledger = AdmissionLedger([rether_port()])
    session = ChannelEnvelope(6, 37_500, 3000, 1500)  # 0.3 Mbit/s
    for n in range(20):  # 20 × 0.3 = 6 Mbit/s = 60%
        admitted(ledger.admit(key(n), [S1], session))
    d = denied(ledger.admit(key(20), [S1], session))
    assert d.primary.reason == DenialReason.BEST_EFFORT_FLOOR
    assert (d.primary.limit, d.primary.excess) == (750_000, 37_500)


def test_token_overhead_per_session_lowers_the_count() -> None:
    """Seed 002: each session costs its share of MTRT plus a fixed overhead; with 400 µs per
    session 14 sessions of 0.3 Mbit/s fit and the 15th does not."""
    ledger = AdmissionLedger([rether_port(overhead_us=400)])
    session = ChannelEnvelope(6, 37_500, 3000, 1500)
    for n in range(14):
        admitted(ledger.admit(key(n), [S1], session))
    d = denied(ledger.admit(key(14), [S1], session))
    used = 15 * 37_500 + -(-15 * 400 * 1_250_000 // 33_333)
    assert d.primary.would_be == used and d.primary.excess == used - 750_000


# ---- the ledger: atomic paths, holds, releases ------------------------------------------------


def test_path_is_all_or_nothing() -> None:
    hops = [PortId(f"s{i}", 1) for i in range(1, 4)]
    ports = [seed000_port(port=h, timer_tick_us=0) for h in hops]
    ports[2] = seed000_port(port=hops[2], timer_tick_us=0, reservable_rate=1_000_000)
    ledger = AdmissionLedger(ports)
    d = denied(ledger.admit(key(1), hops, ChannelEnvelope(6, 1_000_000, 4500, 4500)))
    assert d.primary.port == hops[2] and d.primary.reason == DenialReason.RATE
    for h in hops:
        assert ledger.port_status(h).admitted_rate == 0


def test_holds_expire_and_release_restores() -> None:
    now = [0.0]
    ledger = AdmissionLedger([seed000_port(timer_tick_us=0)], clock=lambda: now[0])
    env = ChannelEnvelope(6, 3_000_000, 4500, 4500)
    admitted(ledger.admit(key(1), [S1], env, hold_seconds=2.0))
    denied(ledger.admit(key(2), [S1], env))  # the hold counts
    now[0] = 2.5
    admitted(ledger.admit(key(2), [S1], env))  # expired hold gave way
    assert ledger.get(key(1)) is None
    assert ledger.release(key(2)) is not None
    assert ledger.port_status(S1).admitted_rate == 0
    assert ledger.load(S1).levels[6].burst == 0


def test_invalid_requests_name_the_field() -> None:
    ledger = AdmissionLedger([seed000_port()])
    for env, field in [
        (ChannelEnvelope(7, 1000, 4500, 4500), "priority"),
        (ChannelEnvelope(6, 0, 4500, 4500), "rate"),
        (ChannelEnvelope(6, 1000, 100, 4500), "burst"),
    ]:
        d = denied(ledger.admit(key(1), [S1], env))
        assert d.primary.reason == DenialReason.INVALID_REQUEST
        assert d.primary.constraint == f"invalid.{field}"
    d = denied(ledger.admit(key(1), [S1], ChannelEnvelope(6, 1000, 9000, 9000)))
    assert d.primary.reason == DenialReason.PACKET_SIZE and d.primary.excess == 4500


# ---- packet-rate ports (BMv2's per-queue packets/s limiter; docs/controller.md) -----------------

BMV2_PPS = 100_000_000 // (8 * 4500)  # 2,777 packets/s: a 100 Mbit/s port of 4,500-byte slots


def packet_rate_port(**over: Any) -> PortModel:
    return replace(
        PortModel(
            port=S1,
            line_rate=BMV2_PPS * 4500,
            queue_capacity=64 * 4500,
            largest_packet=4500,
            reservable_rate=BMV2_PPS * 4500 * 9 // 10,
            packet_slot=4500,
            best_effort_max_packet=4500,
            tests=("rate_buffer", "static_priority"),
        ),
        **over,
    )


@pytest.mark.parametrize(
    ("rate", "burst", "max_packet", "charged_rate", "charged_burst"),
    [
        (1_125_000, 27_000, 4500, 1_125_000, 27_000),  # the demo's video: full-size packets
        (112_500, 4_500, 450, 1_125_000, 45_000),  # tenfold the packets: tenfold the slots
        (100_000, 6_000, 1500, 300_000, 18_000),  # 66.7 packets/s, a 4-packet burst → 4 slots
        (1_000, 4_600, 4500, 1_000, 9_000),  # 4,600 bytes are two packets: two slots
    ],
)
def test_packet_rate_port_charges_a_slot_per_packet(
    rate: int, burst: int, max_packet: int, charged_rate: int, charged_burst: int
) -> None:
    port = packet_rate_port()
    assert port.charge(rate, burst, max_packet) == (charged_rate, charged_burst)
    # A byte-rate port takes the bytes as they are.
    assert seed000_port().charge(rate, burst, max_packet) == (rate, burst)
    ledger = AdmissionLedger([port])
    alloc = admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, rate, burst, max_packet)))
    level = ledger.load(S1).levels[6]
    assert (level.rate, level.burst) == (charged_rate, charged_burst)
    # The allocation (and so the meter) stays in the channel's bytes.
    assert (alloc.hops[0].rate, alloc.hops[0].burst) == (rate, burst)
    ledger.release(key(1))
    assert (ledger.load(S1).levels[6].rate, ledger.load(S1).levels[6].burst) == (0, 0)


def test_small_packets_are_denied_where_bytes_alone_would_fit() -> None:
    """1.2 Mbyte/s in 4,500-byte packets is 267 packets/s on a 2,777-packet/s port; in 450-byte
    packets it is 2,667 packets/s, over the 90% of the slots a port may reserve."""
    port = packet_rate_port()
    assert port.reservable == 11_246_850  # 0.9 × 2,777 × 4,500
    ledger = AdmissionLedger([port])
    admitted(ledger.evaluate(key(1), [S1], ChannelEnvelope(6, 1_200_000, 4500, 4500)))
    d = denied(ledger.evaluate(key(1), [S1], ChannelEnvelope(6, 1_200_000, 4500, 450)))
    assert d.primary.reason == DenialReason.RATE
    assert (d.primary.limit, d.primary.would_be, d.primary.excess) == (11_246_850, 12_000_000, 753_151)


def test_packet_rate_port_delay_bound_counts_slots() -> None:
    """D_6 = (6 slots of the video + 8 protocol slots + one lower slot) / (C − protocol rate),
    every packet a 4,500-byte slot: (27,000 + 36,000 + 4,500) / (12,496,500 − 603,000) s."""
    port = packet_rate_port(control_rate=134 * 4500, control_burst=8 * 4500)
    ledger = AdmissionLedger([port])
    alloc = admitted(ledger.admit(key(1), [S1], ChannelEnvelope(6, 1_125_000, 27_000, 4500)))
    assert alloc.hops[0].worst_case_delay_us == 5676  # ⌈67,500 B / 11,893,500 B/s⌉ in µs
