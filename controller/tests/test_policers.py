"""The policers' arrival curves and envelopes (admission/policers.py, docs/controller.md
"Policers"): seed 000's numbers by hand, the (ρ, σ) envelope above A*(t) and touching it, the
data plane's moving-window ring against its bound, and each misconfiguration named."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terrapin.admission import AdmissionLedger, ChannelKey, Denial, PortId, PortModel
from terrapin.admission.model import (
    ALL_TESTS,
    JUMPING_WINDOW,
    MOVING_WINDOW,
    ChannelEnvelope,
    Policer,
    ServiceClass,
)
from terrapin.admission.policers import (
    MovingRing,
    arrival_bytes,
    arrival_envelope,
    envelope_problem,
    moving_ring,
    tolerance_burst,
)
from terrapin.constants import MOVING_SLOTS
from terrapin_tools.policers import JumpingWindow, Meter, MovingWindow

# Seed 000 §4.1.1.1: 10 Mbit/s with a 22,500-byte burst; XTP's jumping window then resets its
# credit every Burst / Rate = 18 ms.
SEED_RATE = 1_250_000
SEED_BURST = 22_500
SEED_WINDOW_US = 18_000


def jumping(
    burst: int = SEED_BURST, window_us: int = SEED_WINDOW_US, packets: bool = False
) -> ChannelEnvelope:
    return ChannelEnvelope(
        6, 0, burst, 4500, policer=Policer(JUMPING_WINDOW, window_us=window_us, count_packets=packets)
    )


def moving(xmin: int, xave: int, interval: int, smax: int = 4500) -> ChannelEnvelope:
    return ChannelEnvelope(
        6, 0, 0, smax, policer=Policer(MOVING_WINDOW, xmin_us=xmin, xave_us=xave, interval_us=interval)
    )


def test_seed000_jumping_window_is_10_mbits_with_twice_the_burst() -> None:
    """Figure 10: B at the end of one window and B at the start of the next, so the router
    must hold 2B; the long-run rate is B / T = the 10 Mbit/s of Figure 12."""
    env = jumping()
    assert arrival_envelope(env) == (SEED_RATE, 2 * SEED_BURST)
    # A*(t) = 2B + ⌊t/T⌋·B
    assert arrival_bytes(env, 0) == 45_000
    assert arrival_bytes(env, SEED_WINDOW_US - 1) == 45_000
    assert arrival_bytes(env, SEED_WINDOW_US) == 67_500
    assert arrival_bytes(env, 10 * SEED_WINDOW_US + 5) == 12 * SEED_BURST


def test_jumping_window_counting_packets_counts_whole_largest_packets() -> None:
    """22,999 bytes at 4,500 per packet is 5 packets a window: B = 22,500."""
    env = jumping(burst=22_999, packets=True)
    assert arrival_envelope(env) == (SEED_RATE, 45_000)


def test_seed000_moving_window_same_rate_tighter_burst() -> None:
    """The same 10 Mbit/s as five 4,500-byte packets per 18 ms (Xave = 3.6 ms): with no spacing
    the burst is the whole window, n·Smax = 22,500 (half the jumping window's 2B); with Xmin =
    0.9 ms (40 Mbit/s peak) the fifth packet comes 3.6 ms after the first, and
    σ = 5·4,500 − 1,250,000 B/s · 3.6 ms = 18,000."""
    assert arrival_envelope(moving(0, 3600, 18_000)) == (SEED_RATE, 22_500)
    assert arrival_envelope(moving(900, 3600, 18_000)) == (SEED_RATE, 18_000)
    # A*(t) = Smax·(⌊t/I⌋·n + min(n, ⌊(t mod I)/Xmin⌋ + 1))
    env = moving(900, 3600, 18_000)
    assert [arrival_bytes(env, t) // 4500 for t in (0, 899, 900, 3600, 17_999, 18_000, 18_900)] == [
        1, 1, 2, 5, 5, 6, 7,
    ]  # fmt: skip
    # spacing at the average: one packet per Xave, no burst beyond one packet
    assert arrival_envelope(moving(3600, 3600, 18_000)) == (SEED_RATE, 4500)


def test_seed004_rate_control_numbers() -> None:
    """Seed 004 §4.2 runs I = 1 s with Xmin and Xave in milliseconds: Xave = 10 ms is 100
    packets per second, more than the ring's 32 slots, so the data plane groups 4 packets a
    slot and lets 3 more through per interval; the envelope uses the 103."""
    ring = moving_ring(Policer(MOVING_WINDOW, xmin_us=2000, xave_us=10_000, interval_us=1_000_000))
    assert ring == MovingRing(packets=100, slots=25, quantum=4)
    assert ring.enforced == 103
    rate, _ = arrival_envelope(moving(2000, 10_000, 1_000_000, smax=1000))
    assert rate == 103_000


@pytest.mark.parametrize(
    ("packets", "slots", "quantum", "enforced"),
    [(1, 1, 1, 1), (32, 32, 1, 32), (33, 17, 2, 35), (64, 32, 2, 65), (1000, 32, 32, 1055)],
)
def test_ring_layout(packets: int, slots: int, quantum: int, enforced: int) -> None:
    ring = moving_ring(Policer(MOVING_WINDOW, xave_us=1, interval_us=packets))
    assert (ring.packets, ring.slots, ring.quantum, ring.enforced) == (packets, slots, quantum, enforced)
    assert ring.slots <= MOVING_SLOTS and ring.slots * ring.quantum >= ring.packets


# ---- the envelope lies above A*(t) and touches it ------------------------------------------

windows = st.builds(
    jumping,
    burst=st.integers(4500, 200_000),
    window_us=st.integers(1000, 2_000_000),
    packets=st.booleans(),
)


@st.composite
def moving_windows(draw: st.DrawFn) -> ChannelEnvelope:
    xave = draw(st.integers(100, 50_000))
    interval = draw(st.integers(xave, 2_000_000))
    xmin = draw(st.integers(0, xave))
    return moving(xmin, xave, interval, smax=draw(st.integers(64, 9000)))


def _breakpoints(env: ChannelEnvelope) -> list[int]:
    """Where A*(t) − ρt may peak: just at each jump, over two periods."""
    policer = env.policer
    if policer.kind == JUMPING_WINDOW:
        return [k * policer.window_us for k in range(3)]
    period = policer.interval_us
    step = policer.xmin_us or period
    inside = [j * step for j in range(min(moving_ring(policer).enforced, period // step + 1))]
    return [base + t for base in (0, period) for t in inside if t < period]


@given(st.one_of(windows, moving_windows()))
@settings(max_examples=300, deadline=None)
def test_envelope_is_the_smallest_leaky_bucket_above_the_arrival_curve(env: ChannelEnvelope) -> None:
    assert envelope_problem(env) is None
    rate, burst = arrival_envelope(env)
    points = _breakpoints(env)
    for t in points + [p - 1 for p in points if p > 0] + [p + 1 for p in points]:
        assert arrival_bytes(env, t) <= burst + Fraction(rate * t, 10**6), t
    # σ is reached: with the exact long-run rate, some breakpoint comes within a byte of σ.
    exact = _exact_rate(env)
    assert max(arrival_bytes(env, t) - exact * t / 10**6 for t in points) > burst - 1


def _exact_rate(env: ChannelEnvelope) -> Fraction:
    policer = env.policer
    if policer.kind == JUMPING_WINDOW:
        per_window = arrival_bytes(env, policer.window_us) - arrival_bytes(env, 0)
        return Fraction(per_window * 10**6, policer.window_us)
    return Fraction(moving_ring(policer).enforced * env.max_packet * 10**6, policer.interval_us)


# ---- the data plane's ring keeps the bound and passes conforming traffic --------------------


def stamped(times: list[int], lags: list[int]) -> list[int]:
    """What a switch that stamps each packet up to its jitter late sees: each time plus its lag,
    in arrival order (a port's packets are stamped in the order they came)."""
    out: list[int] = []
    for t, lag in zip(times, lags, strict=False):
        out.append(max(t + lag, out[-1] if out else 0))
    return out


@given(
    xave=st.integers(1, 40),
    per_interval=st.integers(1, 120),
    xmin=st.integers(0, 40),
    gaps=st.lists(st.integers(0, 60), min_size=1, max_size=400),
)
@settings(max_examples=300, deadline=None)
def test_ring_never_passes_more_than_its_bound(
    xave: int, per_interval: int, xmin: int, gaps: list[int]
) -> None:
    """Whatever a source sends, no closed interval of t µs holds more than A*(t)/Smax of the
    packets the ring lets through (the bound the admission tests use)."""
    xmin = min(xmin, xave)
    env = moving(xmin, xave, xave * per_interval, smax=1)
    model = MovingWindow(env.policer)
    times, now = [], 0
    for gap in gaps:
        now += gap
        if model.offer(now):
            times.append(now)
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= arrival_bytes(env, times[j] - start)


def test_grouped_ring_reaches_its_bound_of_slots_times_quantum_plus_quantum_minus_one() -> None:
    """n = 33 per I = 33 µs: 17 slots of 2. A group's first packet at 0 and its second at 32,
    sixteen whole groups at 32, then at 33 the group reusing the first slot: 35 packets within
    (0, 33], n + quantum − 1 (docs/dataplane.md); the envelope counts them all."""
    env = moving(0, 1, 33, smax=1)
    model = MovingWindow(env.policer)
    assert (model.slots, model.quantum) == (17, 2)
    times = [0, 32, *[32] * 32, 33, 33]
    assert all(model.offer(now) for now in times)
    assert not model.offer(33)
    assert len(times) - 1 == moving_ring(env.policer).enforced == 35
    assert arrival_bytes(env, 33 - 32) == 35


@given(
    xave=st.integers(1, 40),
    per_interval=st.integers(1, 120),
    extra=st.lists(st.integers(0, 30), min_size=1, max_size=300),
)
@settings(max_examples=300, deadline=None)
def test_ring_passes_every_packet_of_a_conforming_source(
    xave: int, per_interval: int, extra: list[int]
) -> None:
    """A source the ideal moving window passes whole (every packet at least I after the n-th
    before it, at least Xmin after the last) loses nothing to the ring, grouped or not."""
    interval = xave * per_interval
    n = per_interval
    xmin = xave // 2
    model = MovingWindow(Policer(MOVING_WINDOW, xmin_us=xmin, xave_us=xave, interval_us=interval))
    sent: list[int] = []
    for gap in extra:
        now = (sent[-1] + xmin + gap) if sent else gap
        if len(sent) >= n:
            now = max(now, sent[-n] + interval)
        assert model.offer(now), (now, sent[-n:])
        sent.append(now)


# ---- with a tolerance: late stamps forgiven, the envelope kept over t + kτ --------------------


@given(
    xave=st.integers(1, 40),
    per_interval=st.integers(1, 120),
    extra=st.lists(st.integers(0, 30), min_size=1, max_size=300),
    tolerance=st.integers(0, 200),
    lags=st.lists(st.integers(0, 10**6), min_size=300, max_size=300),
)
@settings(max_examples=300, deadline=None)
def test_tolerant_ring_passes_a_conforming_source_stamped_up_to_its_tolerance_late(
    xave: int, per_interval: int, extra: list[int], tolerance: int, lags: list[int]
) -> None:
    """A source that keeps the envelope on the wire, each packet stamped up to τ late (in
    arrival order), loses nothing to a ring with tolerance τ."""
    interval = xave * per_interval
    n = per_interval
    xmin = xave // 2
    sent: list[int] = []
    for gap in extra:
        now = (sent[-1] + xmin + gap) if sent else gap
        if len(sent) >= n:
            now = max(now, sent[-n] + interval)
        sent.append(now)
    model = MovingWindow(Policer(MOVING_WINDOW, xmin_us=xmin, xave_us=xave, interval_us=interval), tolerance)
    seen = stamped(sent, [lag % (tolerance + 1) for lag in lags])
    assert all(model.offer(t) for t in seen)


@given(
    xave=st.integers(1, 40),
    per_interval=st.integers(1, 120),
    xmin=st.integers(0, 40),
    tolerance=st.integers(0, 100),
    gaps=st.lists(st.integers(0, 60), min_size=1, max_size=400),
)
@settings(max_examples=300, deadline=None)
def test_tolerant_ring_keeps_the_envelope_over_t_plus_its_tolerance(
    xave: int, per_interval: int, xmin: int, tolerance: int, gaps: list[int]
) -> None:
    """Whatever a source sends, what a ring with tolerance τ passes keeps A*(t + τ): the
    tolerance forgives early packets, it never raises the rate (the state advances from each
    packet's virtual time, as GCRA's does)."""
    xmin = min(xmin, xave)
    env = moving(xmin, xave, xave * per_interval, smax=1)
    model = MovingWindow(env.policer, tolerance)
    times, now = [], 0
    for gap in gaps:
        now += gap
        if model.offer(now):
            times.append(now)
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= arrival_bytes(env, times[j] - start, tolerance_us=tolerance)


@given(
    window=st.integers(10, 400),
    limit=st.integers(1, 6),
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=40),
    offsets=st.lists(st.integers(0, 10**6), min_size=240, max_size=240),
    lags=st.lists(st.integers(0, 10**6), min_size=240, max_size=240),
    share=st.integers(0, 49),
)
@settings(max_examples=300, deadline=None)
def test_tolerant_jumping_window_passes_a_conforming_source_stamped_up_to_its_tolerance_late(
    window: int, limit: int, counts: list[int], offsets: list[int], lags: list[int], share: int
) -> None:
    """A busy source that keeps B per window of its own (anchored at its first packet, as the
    policer's are, and never idle for two windows), each packet stamped up to τ < T/2 late,
    loses nothing to a jumping window with tolerance τ: each packet is within τ of its own
    window, and counting the earliest window with room never starves a later packet."""
    tolerance = window * share // 100
    times: list[int] = []
    for m, count in enumerate(counts):
        inside = sorted(offsets[len(times) + i] % window for i in range(min(count, limit)))
        if m == 0:
            inside[0] = 0  # the policer's windows open with the first packet
        times += [m * window + x for x in inside]
    assert _passes(JumpingWindow(window, limit), times)
    seen = stamped(times, [lag % (tolerance + 1) for lag in lags])
    assert _passes(JumpingWindow(window, limit, tolerance), seen)


def _passes(model: JumpingWindow, times: list[int]) -> bool:
    return all([model.offer(t) for t in times])


@given(
    window=st.integers(10, 400),
    limit=st.integers(1, 6),
    share=st.integers(0, 49),
    gaps=st.lists(st.integers(0, 300), min_size=1, max_size=300),
)
@settings(max_examples=300, deadline=None)
def test_tolerant_jumping_window_keeps_the_envelope_over_t_plus_twice_its_tolerance(
    window: int, limit: int, share: int, gaps: list[int]
) -> None:
    """Whatever a source sends, a jumping window with tolerance τ passes at most
    A*(t + 2τ) = 2B + ⌊(t + 2τ)/T⌋·B within any t: each window's count was stamped within τ
    of the window."""
    tolerance = window * share // 100
    env = ChannelEnvelope(6, 0, limit, 1, policer=Policer(JUMPING_WINDOW, window_us=window))
    model = JumpingWindow(window, limit, tolerance)
    times, now = [], 0
    for gap in gaps:
        now += gap
        if model.offer(now):
            times.append(now)
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= arrival_bytes(env, times[j] - start, tolerance_us=tolerance)


def test_tolerance_grows_the_envelope_by_what_it_lets_through() -> None:
    """The leaky bucket above a tolerant policer's output: σ + ρτ for the meter and the moving
    window (GCRA), σ + 2ρτ for the jumping window (a packet on either side of a boundary)."""
    meter = ChannelEnvelope(6, 1_000_000, 9_000, 4500)
    assert tolerance_burst(meter.policer, 1_000_000, 3_000) == 3_000
    assert arrival_bytes(meter, 10_000, tolerance_us=3_000) == arrival_bytes(meter, 13_000) == 22_000
    window = jumping()
    assert tolerance_burst(window.policer, SEED_RATE, 2_000) == 5_000
    assert arrival_bytes(window, SEED_WINDOW_US - 4_000, tolerance_us=2_000) == 67_500
    ring = moving(900, 3600, 18_000)
    assert tolerance_burst(ring.policer, SEED_RATE, 1_000) == 1_250
    assert arrival_bytes(ring, 0, tolerance_us=900) == 9_000  # a second packet Xmin later


# ---- admission uses the policer's bound ----------------------------------------------------


def test_admission_holds_twice_the_jumping_windows_burst_in_the_buffer() -> None:
    """Seed 000 §4.1.1.1: with XTP's jumping window the router 'must allocate buffer space
    ... based on a burst of twice the amount specified'. B = 40,000 bytes passes a 96,000-byte
    queue as 2B = 80,000; B = 50,000 (2B = 100,000) is denied by the buffer test although a
    meter with σ = 50,000 fits."""
    port = PortModel(PortId("s1", 2), line_rate=12_500_000, queue_capacity=96_000, largest_packet=4500)
    ledger = AdmissionLedger([port])
    path = [port.port]
    ok = ledger.evaluate(ChannelKey("10.0.1.2", 1), path, jumping(burst=40_000, window_us=40_000))
    assert not isinstance(ok, Denial) and (ok.rate, ok.burst) == (1_000_000, 80_000)
    denied = ledger.evaluate(ChannelKey("10.0.1.2", 2), path, jumping(burst=50_000, window_us=50_000))
    assert isinstance(denied, Denial) and denied.primary.constraint == "rate_buffer.buffer"
    assert denied.primary.would_be == 100_000
    meter = ChannelEnvelope(6, 1_000_000, 50_000, 4500)
    assert not isinstance(ledger.evaluate(ChannelKey("10.0.1.2", 3), path, meter), Denial)


def test_admission_of_a_moving_window_uses_its_envelope_at_every_hop() -> None:
    ports = [PortModel(PortId(f"s{i}", 2), line_rate=12_500_000, queue_capacity=96_000, largest_packet=4500)
             for i in (1, 2)]  # fmt: skip
    ledger = AdmissionLedger(ports)
    alloc = ledger.admit(ChannelKey("10.0.1.2", 1), [p.port for p in ports], moving(900, 3600, 18_000))
    assert not isinstance(alloc, Denial)
    assert (alloc.rate, alloc.burst) == (SEED_RATE, 18_000)
    assert alloc.hops[0].burst == 18_000 and alloc.hops[1].burst > 18_000  # grown by ρ·d upstream
    assert alloc.rounding.rate_rounded_up_by == alloc.rounding.burst_rounded_up_by == 0


def jittery_ports(*jitters: int) -> list[PortModel]:
    return [
        PortModel(
            PortId(f"s{i}", 2), line_rate=12_500_000, queue_capacity=96_000, largest_packet=4500, jitter_us=j
        )
        for i, j in enumerate(jitters, start=1)
    ]


def test_the_first_switchs_jitter_is_the_policers_tolerance_and_each_hop_counts_its_own() -> None:
    """docs/controller.md "Jitter": a meter of (ρ, σ) entering at a switch of jitter J₁ is
    policed with tolerance J₁ (its burst σ + ρJ₁), its first queue sees that delayed by up to
    J₁ more, each later queue the bound and jitter of every switch before it and its own, and
    the end-to-end bound adds every switch's jitter to the queues' bounds."""
    ports = jittery_ports(2_000, 500)
    ledger = AdmissionLedger(ports)
    alloc = ledger.admit(
        ChannelKey("10.0.1.2", 1), [p.port for p in ports], ChannelEnvelope(5, 1_000_000, 9_000, 1500)
    )
    assert not isinstance(alloc, Denial)
    assert (alloc.tolerance_us, alloc.burst) == (2_000, 9_000 + 2_000)
    first, second = alloc.hops
    assert (first.jitter_us, second.jitter_us) == (2_000, 500)
    assert first.burst == 11_000 + 2_000  # ρ·J₁ before the first queue
    assert second.burst == 11_000 + (first.worst_case_delay_us + 2_000 + 500) * 1_000_000 // 10**6
    assert alloc.worst_case_delay_us == first.worst_case_delay_us + second.worst_case_delay_us + 2_500
    exact = AdmissionLedger(jittery_ports(0, 0))
    plain = exact.admit(
        ChannelKey("10.0.1.2", 1), [p.port for p in ports], ChannelEnvelope(5, 1_000_000, 9_000, 1500)
    )
    assert not isinstance(plain, Denial) and (plain.tolerance_us, plain.burst) == (0, 9_000)


def test_a_jumping_windows_tolerance_counts_twice() -> None:
    """The jumping window may count a packet on either side of a boundary: B per T with
    tolerance τ is held as 2B + 2ρτ."""
    ledger = AdmissionLedger(jittery_ports(1_000))
    alloc = ledger.admit(ChannelKey("10.0.1.2", 1), [PortId("s1", 2)], jumping(burst=9_000, window_us=9_000))
    assert not isinstance(alloc, Denial)
    assert (alloc.rate, alloc.burst, alloc.tolerance_us) == (1_000_000, 18_000 + 2_000, 1_000)


def test_a_requested_delay_bound_counts_the_switches_jitter() -> None:
    """A bound that the queues alone would keep is refused when the switches' jitter takes it
    over, naming the end-to-end constraint."""
    env = ChannelEnvelope(5, 1_000_000, 9_000, 1500)
    queues = AdmissionLedger(jittery_ports(0, 0)).evaluate(
        ChannelKey("h", 1), [PortId("s1", 2), PortId("s2", 2)], env
    )
    assert not isinstance(queues, Denial)
    asked = replace(env, delay_bound_us=queues.worst_case_delay_us + 1_000)
    assert not isinstance(
        AdmissionLedger(jittery_ports(0, 0)).evaluate(
            ChannelKey("h", 1), [PortId("s1", 2), PortId("s2", 2)], asked
        ),
        Denial,
    )
    denied = AdmissionLedger(jittery_ports(800, 800)).evaluate(
        ChannelKey("h", 1), [PortId("s1", 2), PortId("s2", 2)], asked
    )
    assert isinstance(denied, Denial) and denied.primary.constraint == "end_to_end_delay"


def test_a_peak_policed_class_judges_the_sources_burst_not_the_tolerance() -> None:
    """Seed 003's urgent class may burst one packet: the tolerance the network adds for its own
    jitter is not the source's burst."""
    urgent = ServiceClass("urgent", frozenset({6}), Fraction(1, 10), peak_policed=True)
    port = replace(jittery_ports(3_000)[0], classes=(urgent,), tests=ALL_TESTS)
    ledger = AdmissionLedger([port])
    alloc = ledger.admit(ChannelKey("h", 1), [port.port], ChannelEnvelope(6, 50_000, 200, 200))
    assert not isinstance(alloc, Denial) and alloc.burst == 200 + 150
    bursty = ledger.evaluate(ChannelKey("h", 2), [port.port], ChannelEnvelope(6, 50_000, 400, 200))
    assert isinstance(bursty, Denial) and bursty.primary.constraint == "class_shares.urgent.peak"


def test_window_rate_is_not_refactored_by_the_leaky_buckets_timer() -> None:
    """The seed's credit-period rounding is the leaky bucket's: a jumping window keeps its rate
    and only its burst is rounded to whole packets."""
    port = PortModel(
        PortId("s1", 2),
        line_rate=12_500_000,
        queue_capacity=200_000,
        largest_packet=4500,
        packet_granularity=4500,
        timer_tick_us=1000,
    )
    alloc = AdmissionLedger([port]).evaluate(ChannelKey("a", 1), [port.port], jumping(burst=20_000))
    assert not isinstance(alloc, Denial)
    assert alloc.rate == -(-20_000 * 10**6 // SEED_WINDOW_US)
    assert alloc.burst == 40_500 and alloc.rounding.burst_rounded_up_by == 500  # 2B in 9 packets


# ---- misconfigured windows are refused, naming the field -----------------------------------


def envelope(rate: int, burst: int, **policer: object) -> ChannelEnvelope:
    return ChannelEnvelope(6, rate, burst, 4500, policer=Policer(**policer))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "field"),
    [
        (jumping(window_us=0), "window_us"),
        (jumping(burst=4000), "burst"),
        (jumping(burst=2**31, window_us=1), "window_us"),
        (jumping(burst=2**32 - 1, window_us=10**9), "burst"),
        (envelope(1000, 22_500, kind=JUMPING_WINDOW, window_us=10), "rate"),
        (moving(0, 0, 1000), "xave_us"),
        (moving(0, 5000, 4000), "interval_us"),
        (moving(6000, 5000, 40_000), "xmin_us"),
        (moving(0, 1, 2**31), "interval_us"),
        (moving(0, 1, 1000, smax=65_530), "max_packet"),
        (envelope(0, 9000, kind=MOVING_WINDOW, xave_us=10, interval_us=100), "burst"),
        (envelope(1000, 9000, xmin_us=5), "xmin_us"),
        (envelope(1000, 9000, window_us=5), "window_us"),
        (envelope(0, 0, kind=MOVING_WINDOW, window_us=5, xave_us=1, interval_us=9), "window_us"),
        (envelope(1000, 9000, kind="token_bucket"), "policer"),
    ],
)
def test_misconfigured_policers_name_the_field(env: ChannelEnvelope, field: str) -> None:
    problem = envelope_problem(env)
    assert problem is not None and problem[0] == field, problem


@given(
    rate=st.integers(1, 10_000_000),
    burst=st.integers(1, 100_000),
    sizes=st.lists(st.integers(1, 9000), min_size=1, max_size=200),
    gaps=st.lists(st.integers(0, 5000), min_size=200, max_size=200),
)
@settings(max_examples=200, deadline=None)
def test_the_meter_model_passes_the_burst_at_once_and_the_rate_after(
    rate: int, burst: int, sizes: list[int], gaps: list[int]
) -> None:
    """terrapin_tools.policers.Meter, which the experiments replay runs through: full at the
    start, what it passes within any t is at most σ + ρt, and a packet it refuses finds the
    bucket short of it."""
    meter = Meter(rate, burst)
    passed: list[tuple[int, int]] = []
    now = 0
    for size, gap in zip(sizes, gaps, strict=False):
        now += gap
        tokens_before = min(
            burst, meter.tokens + ((now - meter.stamp) * rate / 10**6 if meter.stamp is not None else 0)
        )
        if meter.offer(now, size):
            passed.append((now, size))
        else:
            assert size > tokens_before - 1e-6
    for i, (start, _) in enumerate(passed):
        total = 0
        for t, size in passed[i:]:
            total += size
            assert total <= burst + rate * (t - start) / 10**6 + 1e-6
