"""The three policers of seed 000 §2.2.2 as the admission tests see them: each one's worst-case
arrival curve A*(t), the smallest (ρ, σ) envelope above it, and what makes a request for it
invalid. docs/controller.md "Policers" derives every formula here.

- meter (leaky bucket, Figure 3):     A*(t) = σ + ρt
- jumping window (T, B), Figure 4:    A*(t) = 2B + ⌊t/T⌋·B                     (seed 000 [41])
- moving window (Xmin, Xave, I, Smax), Figure 5:
      A*(t) = Smax · (⌊t/I⌋·n + min(n, ⌊(t − ⌊t/I⌋·I) / Xmin⌋ + 1)),  n = ⌊I / Xave⌋

A policer with a tolerance τ (its switch's timestamp jitter, docs/controller.md "Jitter")
passes what keeps the envelope over t + τ, or t + 2τ for the jumping window, which may count a
packet in the window on either side of a boundary: A*_τ(t) = A*(t + kτ), and the leaky bucket
above it is (ρ, σ + kρτ).

The moving window's n is the count the data plane actually enforces: its ring holds at most
MOVING_SLOTS groups, so above MOVING_SLOTS packets per interval it groups packets and lets
quantum − 1 more through (docs/dataplane.md "Window policers"); the admission tests use that
count, never a smaller ideal one. Units as everywhere in admission: bytes (IPv4), µs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from terrapin.admission.model import (
    JUMPING_WINDOW,
    METER,
    MICROS,
    MOVING_WINDOW,
    POLICER_KINDS,
    ChannelEnvelope,
    Policer,
    ceil_div,
)
from terrapin.constants import ETHERNET_HEADER, MOVING_SLOTS

U32 = 0xFFFF_FFFF
# The data plane's fields: quantum is 16 bits, smax 16 bits of frame bytes.
MAX_QUANTUM = 0xFFFF
MAX_SMAX = 0xFFFF - ETHERNET_HEADER


@dataclass(frozen=True)
class MovingRing:
    """How the data plane's ring of MOVING_SLOTS timestamps holds n = ⌊I / Xave⌋ packets:
    `slots` groups of `quantum` packets each (slots × quantum ≥ n, quantum as small as it can
    be). With quantum 1 it is the ideal moving window."""

    packets: int  # n, the envelope's packets per interval
    slots: int
    quantum: int

    @property
    def enforced(self) -> int:
        """Packets per interval the data plane lets through at worst: a group may open just
        before the interval closes and fill up after it (docs/dataplane.md)."""
        return self.slots * self.quantum + self.quantum - 1


def moving_ring(policer: Policer) -> MovingRing:
    packets = policer.interval_us // policer.xave_us
    quantum = ceil_div(packets, MOVING_SLOTS)
    return MovingRing(packets, ceil_div(packets, quantum), quantum)


def jumping_window_bytes(env: ChannelEnvelope) -> int:
    """B as the window enforces it: the burst in bytes, or whole packets of max_packet."""
    if env.policer.count_packets:
        return env.burst // env.max_packet * env.max_packet
    return env.burst


def tolerance_spans(policer: Policer) -> int:
    """k: how many tolerances earlier than the envelope allows a tolerant policer's output may
    come. The moving window and the meter judge a packet by a virtual time at most τ after its
    stamp (GCRA); the jumping window may count a packet stamped up to τ on either side of a
    boundary in the window across it."""
    return 2 if policer.kind == JUMPING_WINDOW else 1


def tolerance_burst(policer: Policer, rate: int, tolerance_us: int) -> int:
    """What a tolerance of tolerance_us adds to the leaky bucket (ρ, σ) above the policer's
    output: ρ·kτ."""
    return ceil_div(rate * tolerance_spans(policer) * tolerance_us, MICROS)


def arrival_bytes(env: ChannelEnvelope, t_us: int, tolerance_us: int = 0) -> int:
    """A*(t): the most IPv4 bytes the policer lets through in any closed interval of t µs;
    with a tolerance, A*(t + kτ)."""
    policer = env.policer
    t_us += tolerance_spans(policer) * tolerance_us
    if policer.kind == JUMPING_WINDOW:
        b = jumping_window_bytes(env)
        return 2 * b + t_us // policer.window_us * b
    if policer.kind == MOVING_WINDOW:
        n = moving_ring(policer).enforced
        whole, rest = divmod(t_us, policer.interval_us)
        spaced = n if policer.xmin_us == 0 else min(n, rest // policer.xmin_us + 1)
        return env.max_packet * (whole * n + spaced)
    return env.burst + ceil_div(env.rate * t_us, MICROS)


def arrival_envelope(env: ChannelEnvelope) -> tuple[int, int]:
    """(ρ, σ) in bytes/s and bytes: the smallest leaky bucket with σ + ρt ≥ A*(t) for all t,
    which is what the rate-and-buffer and static-priority tests take a channel to be.

    Jumping window: ρ = B/T, σ = 2B (A* touches 2B + ρt at every t = kT).
    Moving window: ρ = n·Smax/I; A*(t) − ρt repeats every I and peaks where a packet
    arrives, at t = j·Xmin for j = 0 … J (J = n − 1, or fewer when J·Xmin would reach I),
    where it is Smax·(j + 1) − ρ·j·Xmin: linear in j, so σ is its value at j = 0 or j = J."""
    policer = env.policer
    if policer.kind == JUMPING_WINDOW:
        b = jumping_window_bytes(env)
        return ceil_div(b * MICROS, policer.window_us), 2 * b
    if policer.kind == MOVING_WINDOW:
        n = moving_ring(policer).enforced
        smax, interval = env.max_packet, policer.interval_us
        rate = Fraction(n * smax * MICROS, interval)
        last = n - 1
        if policer.xmin_us > 0:
            last = min(last, ceil_div(interval, policer.xmin_us) - 1)
        peak = Fraction(smax * (last + 1)) - rate * last * policer.xmin_us / MICROS
        return ceil_div(rate.numerator, rate.denominator), max(smax, _ceil(peak))
    return env.rate, env.burst


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


def envelope_problem(env: ChannelEnvelope) -> tuple[str, int, str] | None:
    """What is wrong with the envelope's rate, burst, largest packet and policer, as
    (field, value, why), or None. The field names are the REST API's."""
    policer = env.policer
    if env.max_packet <= 0:
        return "max_packet", env.max_packet, "max_packet must be positive"
    if policer.kind not in POLICER_KINDS:
        return "policer", 0, f"unknown policer {policer.kind!r}: one of {', '.join(POLICER_KINDS)}"
    stray = _stray_field(policer)
    if stray is not None:
        return stray
    if policer.kind == METER:
        if env.rate <= 0:
            return "rate", env.rate, "rate must be positive"
        if env.burst < env.max_packet:
            return "burst", env.burst, "burst must hold at least one largest packet"
        return None
    if env.rate != 0:
        return "rate", env.rate, f"a {policer.kind}'s rate is derived from its window; leave rate out"
    if env.max_packet > MAX_SMAX:
        return (
            "max_packet",
            env.max_packet,
            f"a window policer's largest packet may be {MAX_SMAX} bytes at most",
        )
    if policer.kind == JUMPING_WINDOW:
        return _jumping_window_problem(env)
    return _moving_window_problem(env)


def _stray_field(policer: Policer) -> tuple[str, int, str] | None:
    """A parameter of one policer given with another."""
    owners = {
        "window_us": (policer.window_us, JUMPING_WINDOW),
        "window_counts": (int(policer.count_packets), JUMPING_WINDOW),
        "xmin_us": (policer.xmin_us, MOVING_WINDOW),
        "xave_us": (policer.xave_us, MOVING_WINDOW),
        "interval_us": (policer.interval_us, MOVING_WINDOW),
    }
    for name, (value, owner) in owners.items():
        if value and policer.kind != owner:
            return name, value, f"{name} belongs to policer {owner}, not {policer.kind}"
    return None


def _jumping_window_problem(env: ChannelEnvelope) -> tuple[str, int, str] | None:
    window = env.policer.window_us
    if not 0 < window <= U32:
        return "window_us", window, "a jumping window needs a window T of 1 µs to 2^32 − 1 µs"
    if env.burst < env.max_packet:
        return "burst", env.burst, "the window's burst B must hold at least one max_packet packet"
    frame_limit = ceil_div(env.burst * (env.max_packet + ETHERNET_HEADER), env.max_packet)
    if frame_limit > U32:
        return "burst", env.burst, "B in frame bytes must fit in 32 bits"
    rate, _ = arrival_envelope(env)
    if rate > U32:
        return "window_us", window, f"B / T = {rate} bytes/s does not fit in 32 bits; widen the window"
    return None


def _moving_window_problem(env: ChannelEnvelope) -> tuple[str, int, str] | None:
    policer = env.policer
    if env.burst != 0:
        return (
            "burst",
            env.burst,
            "a moving window's burst is derived from Xmin, Xave, I and Smax; leave it out",
        )
    if not 0 < policer.xave_us <= U32:
        return "xave_us", policer.xave_us, "the average gap Xave must be 1 µs to 2^32 − 1 µs"
    if not policer.xave_us <= policer.interval_us <= U32:
        return (
            "interval_us",
            policer.interval_us,
            f"the interval I must be at least Xave ({policer.xave_us} µs), so that it holds a packet, "
            "and below 2^32 µs",
        )
    if not 0 <= policer.xmin_us <= policer.xave_us:
        return (
            "xmin_us",
            policer.xmin_us,
            f"the smallest gap Xmin must be between 0 and Xave ({policer.xave_us} µs)",
        )
    ring = moving_ring(policer)
    if ring.quantum > MAX_QUANTUM:
        return (
            "interval_us",
            policer.interval_us,
            f"I / Xave = {ring.packets} packets per interval is more than the data plane counts "
            f"({MOVING_SLOTS * MAX_QUANTUM})",
        )
    rate, _ = arrival_envelope(env)
    if rate > U32:
        return "xave_us", policer.xave_us, f"Smax / Xave = {rate} bytes/s does not fit in 32 bits"
    return None
