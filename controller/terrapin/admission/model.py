"""The port model, the traffic envelope of a channel, and what a decision returns.

Units everywhere in admission: rates in bytes per second, bursts and packets in bytes,
times in microseconds, all integers, so that a decision is exact and repeatable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from terrapin.constants import ADMITTED_PRIORITIES, DenialReason

MICROS = 1_000_000


@dataclass(frozen=True, order=True)
class PortId:
    """An egress port of one switch: the resource a hop of a channel consumes."""

    switch: str
    port: int

    def __str__(self) -> str:
        return f"{self.switch}:{self.port}"


@dataclass(frozen=True, order=True)
class ChannelKey:
    """Seed 000 §4.1.2: the initiating host's address and its context number name a channel."""

    initiator: str
    context: int

    def __str__(self) -> str:
        return f"{self.initiator}/{self.context}"


METER = "meter"
JUMPING_WINDOW = "jumping_window"
MOVING_WINDOW = "moving_window"
POLICER_KINDS = (METER, JUMPING_WINDOW, MOVING_WINDOW)


@dataclass(frozen=True)
class Policer:
    """How the data plane polices a channel (seed 000 §2.2.2; admission/policers.py).

    - `meter` (the default): the trTCM meter with the envelope's (ρ, σ), a leaky bucket.
    - `jumping_window`: at most B = the envelope's `burst` per window of `window_us`, counting
      bytes, or with `count_packets` ⌊B / max_packet⌋ packets.
    - `moving_window`: Tenet's (Xmin, Xave, I, Smax) with Smax = the envelope's `max_packet`.
    Fields that do not belong to the kind stay 0.
    """

    kind: str = METER
    window_us: int = 0  # jumping window: T
    count_packets: bool = False  # jumping window: count packets rather than bytes
    xmin_us: int = 0  # moving window: the smallest gap between two packets
    xave_us: int = 0  # moving window: the average gap over any interval I
    interval_us: int = 0  # moving window: I


@dataclass(frozen=True)
class ChannelEnvelope:
    """What a channel asks for: the seed's QOS_t (priority, rate, burst, average idle time)
    plus the largest packet, an optional end-to-end delay bound (Tenet, seed 001) and the
    policer that enforces it. A window policer's rate is derived, so `rate` is 0 for both
    windows and `burst` is 0 for the moving window (admission/policers.py)."""

    priority: int
    rate: int  # ρ, bytes/s
    burst: int  # σ, bytes (a jumping window's B)
    max_packet: int  # bytes (IPv4 total length; a moving window's Smax)
    delay_bound_us: int = 0  # 0 = no delay requirement
    avg_idle_us: int = 0  # carried and reported; no test uses it
    policer: Policer = field(default_factory=Policer)


@dataclass(frozen=True)
class ServiceClass:
    """Seed 003 §4: a service class owns some priority levels and at most `share` of the line.

    `peak_policed` classes (the seed's "urgent" traffic) are policed at their peak rate: their
    burst may not exceed one packet.
    """

    name: str
    priorities: frozenset[int]
    share: Fraction
    peak_policed: bool = False


@dataclass(frozen=True)
class StandingLoad:
    """Traffic the port carries at an admitted level without being a channel: a configured
    aggregate (docs/controller.md, "Aggregates"), lifted out of best effort and policed to
    (rate, burst) by its meter. The ledger charges it at `priority` from the start, so every
    test sees it as it sees admitted channels, and guarantees given hold with it present."""

    name: str
    priority: int
    rate: int  # bytes/s
    burst: int  # bytes
    max_packet: int  # bytes: the size its packets are counted at (as a channel's)


ALL_TESTS = ("rate_buffer", "static_priority", "class_shares", "best_effort_floor")


@dataclass(frozen=True)
class PortModel:
    """What an egress port can promise, and which admission tests guard it."""

    port: PortId
    line_rate: int  # C, bytes/s
    queue_capacity: int  # B, bytes per priority queue
    largest_packet: int  # bytes: the port's MTU as the channel sees it
    reservable_rate: int = 0  # R, bytes/s the port carries at admitted levels; 0 = line_rate
    best_effort_max_packet: int = -1  # largest best-effort packet (non-preemption); -1 = largest
    # Seed 000 §4.1.1.1: bursts in whole 4,500-byte packets, credit period in whole timer ticks.
    packet_granularity: int = 0
    timer_tick_us: int = 0
    tests: tuple[str, ...] = ALL_TESTS
    level_delay_budget_us: tuple[tuple[int, int], ...] = ()  # (priority, µs) promises per level
    classes: tuple[ServiceClass, ...] = ()
    # Seed 002 equation (1): Σ MTHT_i + MTHT_new + TB_NRT <= MTRT.
    best_effort_floor: Fraction = Fraction(0)
    allocation_interval_us: int = 0  # MTRT; 0 = compare rates only
    per_channel_overhead_us: int = 0  # the fixed software overhead in each MTHT_i
    # Protocol messages ride level 7 above every admitted level; their envelope counts too.
    control_rate: int = 0
    control_burst: int = 0
    # Of control_rate: the controller's link probes out of a trunk port (docs/controller.md,
    # "Trunks"), served at level 7 like the protocol but taken from best effort's floor.
    probe_rate: int = 0
    # Aggregates at levels 1..6 (level 7's are in control_rate/control_burst, above every level).
    standing: tuple[StandingLoad, ...] = ()
    # 0: the switch shapes the port in bytes/s. > 0: it shapes it in packets/s (BMv2), and every
    # packet takes one slot of this many bytes of line_rate whatever its size (see `charge`).
    packet_slot: int = 0
    # The switch's delay variation outside its egress queues, µs: from the wire to its ingress
    # timestamp and its queue, and from the queue back to the wire (make jitter measures it).
    # Its policers tolerate it where it is a channel's first switch, and a channel's burst at
    # the queue and its delay through the switch grow by it (docs/controller.md, "Jitter").
    jitter_us: int = 0

    @property
    def reservable(self) -> int:
        return self.reservable_rate or self.line_rate

    @property
    def lower_packet(self) -> int:
        return self.largest_packet if self.best_effort_max_packet < 0 else self.best_effort_max_packet

    def charge(self, rate: int, burst: int, max_packet: int) -> tuple[int, int]:
        """What a channel of (ρ, σ) sending packets of max_packet bytes takes of this port, as
        (rate, burst) in the port's units. A byte-rate port takes the bytes. A packet-rate port
        serves packets, not bytes: the channel's ρ / max_packet packets/s and ⌈σ / max_packet⌉
        packets each take one packet_slot bytes, so a channel of small packets costs more than
        its byte rate (max_packet is then the size its packets are counted at)."""
        if self.packet_slot <= 0:
            return rate, burst
        return (
            ceil_div(rate * self.packet_slot, max_packet),
            ceil_div(burst, max_packet) * self.packet_slot,
        )

    def budget_us(self, priority: int) -> int | None:
        for level, budget in self.level_delay_budget_us:
            if level == priority:
                return budget
        return None

    def class_of(self, priority: int) -> ServiceClass | None:
        for service_class in self.classes:
            if priority in service_class.priorities:
                return service_class
        return None


@dataclass(frozen=True)
class Violation:
    """One failed constraint: which, where, and by how much (in `unit`)."""

    reason: DenialReason
    constraint: str
    port: PortId | None
    priority: int | None
    limit: int
    would_be: int
    excess: int
    unit: str
    detail: str

    @property
    def has_figures(self) -> bool:
        """False for a denial that is not a quantity (no route, a conflict, an invalid field):
        such violations carry no unit, and their limit and excess mean nothing."""
        return bool(self.unit)

    def describe(self) -> str:
        where = f" at {self.port}" if self.port else ""
        level = f" level {self.priority}" if self.priority is not None else ""
        if not self.has_figures:
            return f"{self.constraint}{where}{level}: {self.detail}"
        return (
            f"{self.constraint}{where}{level}: {self.would_be} {self.unit} against a limit of "
            f"{self.limit} ({self.detail}); exceeds by {self.excess} {self.unit}"
        )


@dataclass(frozen=True)
class Rounding:
    """How the allocation differs from the request (seed 000 §4.1.1.1)."""

    packet_granularity: int
    burst_packets: int  # ⌈σ / 4,500⌉ in the seed; 0 when there is no granularity
    credit_period_us: int  # ⌊4,500 / ρ⌋ in whole timer ticks; 0 when there is no timer
    rate_rounded_up_by: int
    burst_rounded_up_by: int


@dataclass(frozen=True)
class HopAllocation:
    """One hop of an admitted channel."""

    port: PortId
    priority: int
    rate: int  # bytes/s allocated at this hop
    burst: int  # bytes: the allocated burst grown by rate × upstream delay (work-conserving hops)
    max_packet: int
    worst_case_delay_us: int  # the static-priority bound with everything admitted so far
    protected_delay_us: int | None  # the bound admission keeps for the channel's lifetime
    # The switch's delay variation outside the queue (PortModel.jitter_us): the hop delays a
    # packet by at most the queue's bound plus this, beyond the switch's fixed latency.
    jitter_us: int = 0


@dataclass(frozen=True)
class Allocation:
    """An admitted channel: (`rate`, `burst`) is the leaky bucket its first switch's policer
    lets through, its tolerance of `tolerance_us` (that switch's jitter) included.

    A protected channel (1+1, docs/controller.md "Protection") has a second path: `protection`
    holds its hops but the last, which is `hops`' last (the destination's port, where one copy of
    each frame leaves after elimination: reserved once). `disjoint` says how the two paths are
    disjoint ("node" or "link"); empty for a channel with one path."""

    key: ChannelKey
    requested: ChannelEnvelope
    rate: int
    burst: int
    rounding: Rounding
    hops: tuple[HopAllocation, ...]
    tolerance_us: int = 0  # the first switch's policer tolerance (its PortModel.jitter_us)
    protection: tuple[HopAllocation, ...] = ()
    disjoint: str = ""

    @property
    def protected(self) -> bool:
        return bool(self.protection)

    @property
    def all_hops(self) -> tuple[HopAllocation, ...]:
        """Every hop it holds capacity on: both paths', the shared last one once."""
        return self.hops + self.protection

    @property
    def paths(self) -> tuple[tuple[HopAllocation, ...], ...]:
        """Its path, or its two paths (each whole, ending at the destination's port)."""
        if not self.protection:
            return (self.hops,)
        return (self.hops, (*self.protection, self.hops[-1]))

    @property
    def worst_case_delay_us(self) -> int:
        """End to end: each hop's queue bound and the switch's jitter (the slower path's)."""
        return max(sum(hop.worst_case_delay_us + hop.jitter_us for hop in path) for path in self.paths)

    @property
    def protected_delay_us(self) -> int | None:
        totals = []
        for path in self.paths:
            bounds = [hop.protected_delay_us for hop in path]
            if any(bound is None for bound in bounds):
                return None
            totals.append(sum(b for b in bounds if b is not None) + sum(hop.jitter_us for hop in path))
        return max(totals)


@dataclass(frozen=True)
class Denial:
    key: ChannelKey
    violations: tuple[Violation, ...]

    @property
    def primary(self) -> Violation:
        return self.violations[0]


Decision = Allocation | Denial


@dataclass
class LevelLoad:
    """The aggregate of what one priority level of one port carries."""

    rate: int = 0
    burst: int = 0
    max_packet: int = 0
    min_protected_us: int | None = None
    channels: int = 0


@dataclass
class PortLoad:
    """Per-level aggregates of one port, index = priority 0..7."""

    levels: list[LevelLoad] = field(default_factory=lambda: [LevelLoad() for _ in range(8)])

    @property
    def admitted_rate(self) -> int:
        return sum(self.levels[p].rate for p in ADMITTED_PRIORITIES)

    @property
    def admitted_channels(self) -> int:
        return sum(self.levels[p].channels for p in ADMITTED_PRIORITIES)


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def floor_share(share: Fraction, value: int) -> int:
    return math.floor(share * value)
