"""The admission tests: pure functions of (port model, port load, candidate) → violations.

Each test looks at the load *with the candidate added* and says which constraint fails and by
how much. They never mutate anything; the ledger owns state and calls them under its lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from terrapin.admission.model import (
    METER,
    MICROS,
    ChannelEnvelope,
    LevelLoad,
    PortLoad,
    PortModel,
    Rounding,
    Violation,
    ceil_div,
    floor_share,
)
from terrapin.admission.policers import arrival_envelope
from terrapin.constants import ADMITTED_PRIORITIES, DenialReason


@dataclass(frozen=True)
class Candidate:
    """A channel as one port sees it."""

    priority: int
    rate: int
    burst: int  # effective burst at this hop
    base_burst: int  # the burst the source asked for (rounded), before the policer's tolerance
    max_packet: int
    protected_us: int | None  # the bound this channel will be promised here, if any


def with_candidate(load: PortLoad, cand: Candidate) -> PortLoad:
    levels = list(load.levels)
    old = levels[cand.priority]
    protected = old.min_protected_us
    if cand.protected_us is not None:
        protected = cand.protected_us if protected is None else min(protected, cand.protected_us)
    levels[cand.priority] = LevelLoad(
        rate=old.rate + cand.rate,
        burst=old.burst + cand.burst,
        max_packet=max(old.max_packet, cand.max_packet),
        min_protected_us=protected,
        channels=old.channels + 1,
    )
    return PortLoad(levels=levels)


def level_delay_bounds_us(port: PortModel, load: PortLoad) -> list[int | None]:
    """level_delay_bound_us for every priority at once (index = priority), with running sums."""
    bounds: list[int | None] = [None] * 8
    lowers = [port.lower_packet] * 8
    for p in range(2, 7):
        lowers[p] = max(lowers[p - 1], load.levels[p - 1].max_packet)
    burst = port.control_burst
    rate_above = port.control_rate
    for p in range(6, 0, -1):
        burst += load.levels[p].burst
        service = port.line_rate - rate_above
        if service > 0:
            bounds[p] = ceil_div((burst + lowers[p]) * MICROS, service)
        rate_above += load.levels[p].rate
    return bounds


def level_delay_bound_us(port: PortModel, load: PortLoad, priority: int) -> int | None:
    """Worst queueing delay at `priority` under static priority with non-preemption.

    D_p = (Σσ of levels ≥ p + the protocol's burst + the largest packet of lower levels)
          / (C − Σρ of levels > p − the protocol's rate)

    Lower levels enter only through one packet already on the wire (seed 001 §4.1: a real-time
    packet waits for the best-effort packet in transmission). None when higher levels take C.
    """
    service = port.line_rate - sum(load.levels[p].rate for p in range(priority + 1, 7)) - port.control_rate
    if service <= 0:
        return None
    return ceil_div(level_backlog_bound(port, load, priority) * MICROS, service)


def level_backlog_bound(port: PortModel, load: PortLoad, priority: int) -> int:
    """The numerator of level_delay_bound_us, in bytes: what a packet at `priority` can find
    ahead of it (the bursts of its own and higher levels, the protocol's burst) plus the one
    lower-level packet already on the wire. The guarantee monitor shows it as the queue
    depth the admission allows."""
    above_burst = sum(load.levels[p].burst for p in range(priority, 7)) + port.control_burst
    lower_packet = port.lower_packet
    for p in range(1, priority):
        lower_packet = max(lower_packet, load.levels[p].max_packet)
    return above_burst + lower_packet


def check_rate_buffer(port: PortModel, after: PortLoad, cand: Candidate) -> list[Violation]:
    """Seed 000 §4.1.1.2: σ_request + Σσ_i < B and ρ_request + Σρ_i < R (both strict). The rate
    is named first where both fail: a channel's burst at a hop grows with its rate (by ρ times
    the tolerance and the delays upstream), so an impossible rate is the cause."""
    found: list[Violation] = []
    rate_total = after.admitted_rate
    if rate_total >= port.reservable:
        found.append(
            Violation(
                DenialReason.RATE,
                "rate_buffer.rate",
                port.port,
                cand.priority,
                port.reservable,
                rate_total,
                rate_total - (port.reservable - 1),
                "bytes/s",
                "sum of admitted rates must stay below the port's reservable rate",
            )
        )
    burst_total = after.levels[cand.priority].burst
    # Strict "<": with the seed's whole packets the most a queue may hold is B − one packet.
    unit = port.packet_granularity or 1
    if burst_total >= port.queue_capacity:
        allowed = port.queue_capacity - unit
        found.append(
            Violation(
                DenialReason.BUFFER,
                "rate_buffer.buffer",
                port.port,
                cand.priority,
                port.queue_capacity,
                burst_total,
                burst_total - allowed,
                "bytes",
                "sum of bursts at this level must stay below the queue capacity",
            )
        )
    return found


def check_static_priority(port: PortModel, after: PortLoad, cand: Candidate) -> list[Violation]:
    """Seeds 001/004: every promised per-level bound still holds with the candidate added."""
    found: list[Violation] = []
    total = after.admitted_rate + port.control_rate
    if total >= port.line_rate:
        found.append(
            Violation(
                DenialReason.LINK_CAPACITY,
                "static_priority.capacity",
                port.port,
                cand.priority,
                port.line_rate,
                total,
                total - (port.line_rate - 1),
                "bytes/s",
                "admitted rates (aggregates included) plus protocol traffic must stay below the line rate",
            )
        )
        return found
    bounds = level_delay_bounds_us(port, after)
    for priority in ADMITTED_PRIORITIES:
        level = after.levels[priority]
        if level.channels == 0:
            continue
        bound = bounds[priority]
        assert bound is not None  # total < line rate guarantees service > 0 at every level
        limit = _level_limit(port, level, priority)
        if limit is not None and bound > limit:
            found.append(
                Violation(
                    DenialReason.LEVEL_DELAY,
                    "static_priority.delay",
                    port.port,
                    priority,
                    limit,
                    bound,
                    bound - limit,
                    "us",
                    "worst-case queueing delay of a level must stay within what it was promised",
                )
            )
    return found


def _level_limit(port: PortModel, level: LevelLoad, priority: int) -> int | None:
    budget = port.budget_us(priority)
    limits = [x for x in (budget, level.min_protected_us) if x is not None]
    return min(limits) if limits else None


def check_class_shares(port: PortModel, after: PortLoad, cand: Candidate) -> list[Violation]:
    """Seed 003 §4: a class's admitted rates stay within its share of the line; a
    peak-policed (urgent) class may not burst above one packet. Levels outside every class
    are not constrained by this test."""
    service_class = port.class_of(cand.priority)
    if service_class is None:
        return []
    found: list[Violation] = []
    class_rate = sum(after.levels[p].rate for p in service_class.priorities if 0 <= p < 8)
    limit = floor_share(service_class.share, port.line_rate)
    if class_rate > limit:
        found.append(
            Violation(
                DenialReason.CLASS_SHARE,
                f"class_shares.{service_class.name}",
                port.port,
                cand.priority,
                limit,
                class_rate,
                class_rate - limit,
                "bytes/s",
                f"class {service_class.name} may use {service_class.share} of the line rate",
            )
        )
    if service_class.peak_policed and cand.base_burst > cand.max_packet:
        found.append(
            Violation(
                DenialReason.PEAK_POLICING,
                f"class_shares.{service_class.name}.peak",
                port.port,
                cand.priority,
                cand.max_packet,
                cand.base_burst,
                cand.base_burst - cand.max_packet,
                "bytes",
                f"class {service_class.name} is peak-rate policed: burst at most one packet",
            )
        )
    return found


def check_best_effort_floor(port: PortModel, after: PortLoad, cand: Candidate) -> list[Violation]:
    """Seed 002 equation (1), per allocation interval T (MTRT) of a port of rate C:

        Σ (ρ_i·T/C + o) + (ρ_new·T/C + o) + floor·T <= T

    i.e. in rates: Σρ + n·o·C/T <= (1 − floor)·C. With T = 0 the overhead term vanishes.
    The protocol's traffic counts with Σρ; the link probes come out of the floor itself, as far
    as it reaches (they are the network's own best-effort-sized upkeep).
    """
    line = port.line_rate
    limit = _floor_limit(port)
    rate = after.admitted_rate + port.control_rate - min(port.probe_rate, line - limit)
    overhead = 0
    if port.allocation_interval_us > 0 and port.per_channel_overhead_us > 0:
        overhead = ceil_div(
            after.admitted_channels * port.per_channel_overhead_us * line,
            port.allocation_interval_us,
        )
    used = rate + overhead
    if used <= limit:
        return []
    return [
        Violation(
            DenialReason.BEST_EFFORT_FLOOR,
            "best_effort_floor",
            port.port,
            cand.priority,
            limit,
            used,
            used - limit,
            "bytes/s",
            f"best effort keeps {port.best_effort_floor} of the line"
            + (" (rates include per-channel overhead)" if overhead else ""),
        )
    ]


def _floor_limit(port: PortModel) -> int:
    # The reserve is rounded up: best effort never gets less than its share.
    reserve = -floor_share(-port.best_effort_floor, port.line_rate)
    return port.line_rate - reserve


PortTest = Callable[[PortModel, PortLoad, Candidate], list[Violation]]

PORT_TESTS: dict[str, PortTest] = {
    "rate_buffer": check_rate_buffer,
    "static_priority": check_static_priority,
    "class_shares": check_class_shares,
    "best_effort_floor": check_best_effort_floor,
}


def run_port_tests(port: PortModel, after: PortLoad, cand: Candidate) -> list[Violation]:
    """Every enabled test on the load *with* the candidate (see with_candidate)."""
    found: list[Violation] = []
    if cand.max_packet > port.largest_packet:
        found.append(
            Violation(
                DenialReason.PACKET_SIZE,
                "packet_size",
                port.port,
                cand.priority,
                port.largest_packet,
                cand.max_packet,
                cand.max_packet - port.largest_packet,
                "bytes",
                "the channel's largest packet exceeds what the port carries",
            )
        )
    for name in port.tests:
        found.extend(PORT_TESTS[name](port, after, cand))
    return found


def round_envelope(port: PortModel, env: ChannelEnvelope) -> tuple[int, int, Rounding] | Violation:
    """Seed 000 §4.1.1.1: bursts in whole packets of the granularity, ⌈σ / 4,500⌉, and a credit
    period ⌊4,500 / ρ⌋ in whole timer ticks, which re-factors the rate upwards (10 Mbit/s
    became 12 Mbit/s in the seed). A period below one tick is denied, as the seed's end
    station did. (ρ, σ) is the policer's arrival envelope (admission/policers.py); the credit
    period is the leaky bucket's, so a window policer's rate is never re-factored."""
    base_rate, base_burst = arrival_envelope(env)
    granularity = port.packet_granularity
    burst = base_burst
    packets = 0
    if granularity > 0:
        packets = ceil_div(base_burst, granularity)
        burst = packets * granularity
    rate = base_rate
    period = 0
    if granularity > 0 and port.timer_tick_us > 0 and env.policer.kind == METER:
        exact_period = granularity * MICROS // base_rate
        period = exact_period // port.timer_tick_us * port.timer_tick_us
        if period == 0:
            return Violation(
                DenialReason.RATE_GRANULARITY,
                "rate_granularity",
                port.port,
                env.priority,
                port.timer_tick_us,
                exact_period,
                port.timer_tick_us - exact_period,
                "us",
                f"one {granularity}-byte packet per credit period needs a period of at least one timer tick",
            )
        rate = ceil_div(granularity * MICROS, period)
    return (
        rate,
        burst,
        Rounding(
            packet_granularity=granularity,
            burst_packets=packets,
            credit_period_us=period,
            rate_rounded_up_by=rate - base_rate,
            burst_rounded_up_by=burst - base_burst,
        ),
    )


def merge_rounding(roundings: Sequence[Rounding], rate: int, burst: int, env: ChannelEnvelope) -> Rounding:
    """The channel's allocation is the largest rounding over its hops."""
    coarsest = max(roundings, key=lambda r: (r.packet_granularity, r.credit_period_us))
    base_rate, base_burst = arrival_envelope(env)
    return replace(coarsest, rate_rounded_up_by=rate - base_rate, burst_rounded_up_by=burst - base_burst)
