"""What the guarantee monitor expects and what it concludes: pure functions, no I/O.

Expectations come from the admission ledger through the admission model's own functions
(`level_delay_bound_us`, `level_backlog_bound`, `switches.entry_for_hop`), so a bound is
computed in exactly one place. Conclusions compare two successive samples of a switch
(`switches.MonitorSample`): counters only ever grow, so each check looks at what happened
*between* the two reads.

Findings are of two causes, and the difference matters to an operator:

- ``network``: a bound the controller promised was broken while the traffic it carried stayed
  within its envelope (the data plane policed it). Either the model is wrong for this network
  (a port slower than configured, a larger best-effort packet than assumed) or a switch
  misbehaves. These are alarms.
- ``source``: a sender went beyond its (ρ, σ) at the first hop and its meter marked the excess.
  The data plane demoted or dropped it, so nobody else's guarantee suffered; the operator
  should still know who is misbehaving.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from terrapin.admission.checks import level_backlog_bound, level_delay_bound_us
from terrapin.admission.ledger import AdmissionLedger
from terrapin.admission.model import ChannelKey, PortId, PortLoad, PortModel
from terrapin.constants import ADMITTED_PRIORITIES
from terrapin.p4program import DELAY_BAND_NAMES
from terrapin.paths import ChannelEntry, ChannelSelector
from terrapin.store import DOWN, Reservation
from terrapin.switches import MonitorSample

NETWORK = "network"
SOURCE = "source"

QUEUE_DELAY = "queue_delay"  # packets of an admitted queue waited longer than its bound
SOURCE_EXCESS = "source_excess"  # the first hop's meter marked a channel's traffic yellow/red
DOWNSTREAM_EXCESS = "downstream_excess"  # a later hop's meter did, the first hop's did not
POLICER = "policer"  # more green bytes left a meter than its envelope allows
PATH_DOWN = "path_down"  # a channel's path crosses a trunk that is down (it is being moved)
CHANNEL_DOWN = "channel_down"  # no path admits a channel: it is down until one does

KINDS = {
    QUEUE_DELAY: NETWORK,
    SOURCE_EXCESS: SOURCE,
    DOWNSTREAM_EXCESS: NETWORK,
    POLICER: NETWORK,
    PATH_DOWN: NETWORK,
    CHANNEL_DOWN: NETWORK,
}

OVER = DELAY_BAND_NAMES.index("over")
Cell = tuple[int, int]  # (port, priority)
# The largest Ethernet frame header the meters see beyond the IPv4 packet (one 802.1Q tag).
FRAME_OVERHEAD = 18


@dataclass(frozen=True)
class QueueExpectation:
    """An egress queue that carries admitted channels, as the admission model sees it."""

    port: PortId
    priority: int
    channels: int
    line_rate: int  # C, bytes/s
    allocated_rate: int  # Σρ at this level, bytes/s
    allocated_burst: int  # Σσ at this level (bursts as grown at this hop), bytes
    bound_us: int  # the static-priority bound the admission test computes for this load
    backlog_bound: int  # bytes a packet of this level can find ahead of it (the bound's numerator)


@dataclass(frozen=True)
class HopExpectation:
    """One hop of one admitted channel, with its meter in frame bytes as programmed."""

    reservation_id: int  # what the operator knows it by (REST id, never reused)
    channel_id: int  # the data plane's index of its colour counters (reused)
    key: ChannelKey
    selector: ChannelSelector
    port: PortId
    priority: int
    first_hop: bool
    rate: int  # ρ, IPv4 bytes/s
    burst: int  # σ at this hop, IPv4 bytes
    max_packet: int
    metered: bool  # a trTCM meter polices this hop (not a window policer, issue 12)
    cir: int  # frame bytes/s: the meter's, or the envelope a window is admitted with
    cburst: int  # frame bytes


@dataclass(frozen=True)
class Finding:
    kind: str
    cause: str
    switch: str
    port: int | None
    priority: int | None
    reservation_id: int | None
    channel: str | None  # initiator/context
    figure: int | None  # what was measured (None: beyond the bound, exact figure unknown)
    bound: int  # what was promised or allowed
    unit: str
    packets: int  # packets concerned in this window
    message: str

    @property
    def episode(self) -> tuple[str, str, int | None, int | None, int | None]:
        """Findings with the same episode key in consecutive polls are one event."""
        return (self.kind, self.switch, self.port, self.priority, self.reservation_id)


@dataclass(frozen=True)
class QueueReading:
    switch: str
    port: int
    priority: int
    channels: int
    line_rate: int
    allocated_rate: int
    allocated_burst: int
    backlog_bound: int
    bound_us: int  # the bound in force in the data plane during the window
    window_s: float
    packets: int
    bytes: int
    bands: tuple[int, ...]  # packets per delay band in the window
    max_delay_us: int | None  # register maximum of the window (None: the switch has none)
    max_depth_packets: int | None  # whole-port backlog a packet of this queue found (register)

    @property
    def over_bound(self) -> int:
        return self.bands[OVER] if self.bands else 0

    @property
    def worst_band(self) -> str | None:
        """The highest delay band any packet of the window fell in."""
        for index in range(len(self.bands) - 1, -1, -1):
            if self.bands[index]:
                return DELAY_BAND_NAMES[index]
        return None


@dataclass(frozen=True)
class ChannelReading:
    reservation_id: int
    channel_id: int
    channel: str
    switch: str
    port: int
    priority: int
    first_hop: bool
    window_s: float
    packets: int
    bytes: int  # frame bytes, every colour
    green_bytes: int
    yellow_packets: int
    red_packets: int
    delivered_rate: int  # frame bytes/s over the window, every colour
    reserved_rate: int  # the meter's CIR, frame bytes/s


@dataclass(frozen=True)
class RecoveryReading:
    """A protected channel's sequence recovery counters at its last switch, as last read."""

    reservation_id: int
    switch: str
    counts: dict[str, int]  # passed, discarded, out_of_order, rogue, resets [, lost]


@dataclass(frozen=True)
class PollVerdict:
    queues: list[QueueReading]
    channels: list[ChannelReading]
    findings: list[Finding]
    recoveries: list[RecoveryReading] = field(default_factory=list)


# ---- expectations -------------------------------------------------------------------------


def queue_expectations(ledger: AdmissionLedger) -> dict[PortId, list[QueueExpectation]]:
    """Every admitted level of every port with its bound, from one reading of the ledger (a
    set-up's hop needs only its port's bounds: delay_bounds)."""
    found: dict[PortId, list[QueueExpectation]] = {}
    for pid, load in ledger.loads().items():
        model = ledger.ports[pid]
        levels = []
        for priority in ADMITTED_PRIORITIES:
            level = load.levels[priority]
            if level.channels == 0:
                continue
            bound = queue_wait_bound_us(model, load, priority)
            if bound is None:  # admission never lets higher levels take the whole line
                continue
            levels.append(
                QueueExpectation(
                    port=pid,
                    priority=priority,
                    channels=level.channels,
                    line_rate=model.line_rate,
                    allocated_rate=level.rate,
                    allocated_burst=level.burst,
                    bound_us=bound,
                    backlog_bound=level_backlog_bound(model, load, priority),
                )
            )
        if levels:
            found[pid] = levels
    return found


def delay_bounds(
    ledger: AdmissionLedger, ports: list[PortId], memo: dict[PortId, tuple[PortLoad, dict[int, int]]]
) -> dict[tuple[int, int], int]:
    """(port number, priority) → bound in µs of every admitted level of `ports` (one switch's):
    what queue_expectations says of them, without the rest (a set-up's hop needs only this).
    `memo` keeps each port's bounds with the load they were computed from: the ledger hands out
    the same PortLoad until the port's load changes, so a burst of set-ups through a port
    computes them once per change, not once per hop."""
    found: dict[tuple[int, int], int] = {}
    for pid, load in ledger.loads(ports).items():
        known = memo.get(pid)
        if known is not None and known[0] is load:
            bounds = known[1]
        else:
            bounds = port_delay_bounds(ledger.ports[pid], load)
            memo[pid] = (load, bounds)
        for priority, bound in bounds.items():
            found[(pid.port, priority)] = bound
    return found


def port_delay_bounds(model: PortModel, load: PortLoad) -> dict[int, int]:
    """priority → bound in µs of every admitted level of one port."""
    found: dict[int, int] = {}
    for priority in ADMITTED_PRIORITIES:
        if load.levels[priority].channels == 0:
            continue
        bound = queue_wait_bound_us(model, load, priority)
        if bound is not None:
            found[priority] = bound
    return found


def queue_wait_bound_us(model: PortModel, load: PortLoad, priority: int) -> int | None:
    """What a packet's wait in a level's queue (enqueue to dequeue) is held to: the level's
    static-priority bound and the switch's jitter, which a dequeue late for its CPU shows in the
    wait as much as a stamp late for it shows outside (docs/controller.md, "Jitter"): a wait
    within both keeps every promise through the port, and one past them breaks it."""
    bound = level_delay_bound_us(model, load, priority)
    return None if bound is None else bound + model.jitter_us


def hop_expectations(
    reservations: Iterable[Reservation], entries: Callable[[Reservation], Sequence[ChannelEntry]]
) -> list[HopExpectation]:
    """Every hop of every reservation with its policer as programmed: `entries` is the
    reservation service's own (ReservationService.entries), so the meter checked is the one
    written. A reservation that is down has none."""
    hops = []
    for record in reservations:
        if record.state == DOWN:
            continue
        made = entries(record)
        if record.allocation.protected:
            # A protected channel's `channels` entries are at its first switch and its last
            # (transit switches forward its copies by member stream; their queues are checked).
            last = len(record.allocation.hops) - 1
            pairs = [(0, record.allocation.hops[0], made[0]), (last, record.allocation.hops[-1], made[-1])]
        else:
            pairs = [(i, *pair) for i, pair in enumerate(zip(record.allocation.hops, made, strict=True))]
        for index, hop, entry in pairs:
            hops.append(
                HopExpectation(
                    reservation_id=record.reservation_id,
                    channel_id=record.channel_id,
                    key=record.key,
                    selector=record.selector,
                    port=hop.port,
                    priority=hop.priority,
                    first_hop=index == 0,
                    rate=hop.rate,
                    burst=hop.burst,
                    max_packet=hop.max_packet,
                    metered=entry.window is None,
                    cir=entry.cir,
                    cburst=entry.cburst,
                )
            )
    return hops


def with_fresh_channels(
    sample: MonitorSample,
    fresh: Mapping[int, tuple[int, int, int, int]],
    hops: Sequence[HopExpectation],
) -> MonitorSample:
    """`sample` as if it had seen the channels set up after it was taken (channel id → their
    colour counters as their entries were written: zero, since the entry's write zeroes them):
    their entries are new, so their direct counters held zero, and their colour counters what
    `fresh` says. Their first window is then checked like any other."""
    channels = dict(sample.channels)
    excess = dict(sample.excess)
    for hop in hops:
        if hop.channel_id in fresh and hop.port.switch == sample.switch:
            channels.setdefault(hop.selector, (0, 0))
            excess.setdefault(hop.channel_id, fresh[hop.channel_id])
    return replace(sample, channels=channels, excess=excess)


# ---- conclusions ----------------------------------------------------------------------------


def evaluate(
    previous: Mapping[str, MonitorSample],
    current: Mapping[str, MonitorSample],
    queues: Mapping[PortId, Sequence[QueueExpectation]],
    hops: Sequence[HopExpectation],
    thresholds: Mapping[str, Mapping[tuple[int, int], int]],
    recent_source_excess: frozenset[int] = frozenset(),
) -> PollVerdict:
    """Compare each switch's sample with the one before it.

    `thresholds` are the bounds that were installed in the data plane during the window (what
    the delay bands were counted against). `recent_source_excess` holds the reservations whose
    first hop saw excess in the previous poll: a downstream meter that marks their packets now
    may be metering that excess (demoted packets still match the channel downstream)."""
    queue_readings: list[QueueReading] = []
    channel_readings: list[ChannelReading] = []
    findings: list[Finding] = []
    for name, now in current.items():
        before = previous.get(name)
        if before is None:
            continue  # the first sample of a switch is the baseline
        window = max(now.finished - before.started, 1e-6)
        installed = thresholds.get(name, {})
        for pid, levels in queues.items():
            if pid.switch != name:
                continue
            for q in levels:
                reading, found = _queue(name, q, before, now, window, installed)
                if reading is not None:
                    queue_readings.append(reading)
                findings.extend(found)
    excess_now = first_hop_excess(previous, current, hops)
    upstream_excess = excess_now | recent_source_excess
    for hop in hops:
        earlier, later = previous.get(hop.port.switch), current.get(hop.port.switch)
        if earlier is None or later is None:
            continue
        channel_reading, found = _channel(hop, earlier, later, upstream_excess)
        if channel_reading is not None:
            channel_readings.append(channel_reading)
        findings.extend(found)
    return PollVerdict(queue_readings, channel_readings, findings)


def first_hop_excess(
    previous: Mapping[str, MonitorSample],
    current: Mapping[str, MonitorSample],
    hops: Sequence[HopExpectation],
) -> frozenset[int]:
    """Reservations whose first hop marked traffic yellow or red between the two samples."""
    found = set()
    for hop in hops:
        if not hop.first_hop:
            continue
        before, now = previous.get(hop.port.switch), current.get(hop.port.switch)
        if before is None or now is None:
            continue
        delta = _excess_delta(before, now, hop.channel_id)
        if delta is not None and (delta[0] or delta[2]):
            found.add(hop.reservation_id)
    return frozenset(found)


def _queue(
    name: str,
    q: QueueExpectation,
    before: MonitorSample,
    now: MonitorSample,
    window: float,
    installed: Mapping[tuple[int, int], int],
) -> tuple[QueueReading | None, list[Finding]]:
    cell = (q.port.port, q.priority)
    bands_now, bands_before = now.bands.get(cell), before.bands.get(cell)
    traffic_now, traffic_before = now.queue_traffic.get(cell), before.queue_traffic.get(cell)
    if bands_now is None or traffic_now is None:
        return None, []
    bands = _deltas(bands_now, bands_before)
    traffic = _deltas(traffic_now, traffic_before)
    max_delay = _window_max(now.max_delay_us, before.max_delay_us, cell)
    max_depth = _window_max(now.max_depth_packets, before.max_depth_packets, cell)
    bound = installed.get(cell, q.bound_us)
    reading = QueueReading(
        switch=name,
        port=q.port.port,
        priority=q.priority,
        channels=q.channels,
        line_rate=q.line_rate,
        allocated_rate=q.allocated_rate,
        allocated_burst=q.allocated_burst,
        backlog_bound=q.backlog_bound,
        bound_us=bound,
        window_s=window,
        packets=traffic[0],
        bytes=traffic[1],
        bands=bands,
        max_delay_us=max_delay,
        max_depth_packets=max_depth,
    )
    found = []
    if reading.over_bound:
        longest = (
            f"; the longest waited {max_delay:,} µs" if max_delay is not None and max_delay > bound else ""
        )
        found.append(
            Finding(
                kind=QUEUE_DELAY,
                cause=NETWORK,
                switch=name,
                port=q.port.port,
                priority=q.priority,
                reservation_id=None,
                channel=None,
                figure=max_delay if max_delay is not None and max_delay > bound else None,
                bound=bound,
                unit="us",
                packets=reading.over_bound,
                message=(
                    f"{name}:{q.port.port} level {q.priority}: {reading.over_bound} of "
                    f"{sum(bands)} packets waited longer than the admitted bound of {bound:,} µs"
                    f"{longest} ({q.channels} channel(s), Σσ {q.allocated_burst:,} B, "
                    f"Σρ {q.allocated_rate:,} B/s)"
                ),
            )
        )
    return reading, found


def _channel(
    hop: HopExpectation, before: MonitorSample, now: MonitorSample, upstream_excess: frozenset[int]
) -> tuple[ChannelReading | None, list[Finding]]:
    name = hop.port.switch
    count_now, count_before = now.channels.get(hop.selector), before.channels.get(hop.selector)
    excess = _excess_delta(before, now, hop.channel_id)
    if count_now is None or count_before is None or excess is None:
        return None, []
    packets, byte_count = count_now[0] - count_before[0], count_now[1] - count_before[1]
    if packets < 0 or byte_count < 0:
        return None, []  # the entry was written anew (same selector): a new baseline
    # Every colour left the meter at the direct counter; yellow and red are subtracted.
    window = max(now.finished - before.started, 1e-6)
    yellow_packets, yellow_bytes, red_packets, red_bytes = excess
    green_bytes = max(0, byte_count - yellow_bytes - red_bytes)
    channel = str(hop.key)
    reading = ChannelReading(
        reservation_id=hop.reservation_id,
        channel_id=hop.channel_id,
        channel=channel,
        switch=name,
        port=hop.port.port,
        priority=hop.priority,
        first_hop=hop.first_hop,
        window_s=window,
        packets=packets,
        bytes=byte_count,
        green_bytes=green_bytes,
        yellow_packets=yellow_packets,
        red_packets=red_packets,
        delivered_rate=round(byte_count / window),
        reserved_rate=hop.cir,
    )
    found = []
    marked = yellow_packets + red_packets
    where = f"{name}:{hop.port.port}"
    if marked and hop.first_hop:
        found.append(
            _hop_finding(
                hop,
                SOURCE_EXCESS,
                marked,
                0,
                "packets",
                marked,
                f"reservation {hop.reservation_id} ({channel}) went beyond its envelope "
                f"(ρ {hop.rate:,} B/s, σ {hop.burst:,} B) at its first hop {where}: "
                f"{yellow_packets} packets yellow, {red_packets} red, demoted or dropped there",
            )
        )
    elif marked and hop.reservation_id not in upstream_excess:
        found.append(
            _hop_finding(
                hop,
                DOWNSTREAM_EXCESS,
                marked,
                0,
                "packets",
                marked,
                f"reservation {hop.reservation_id} ({channel}) conformed at its first hop but its "
                f"meter at {where} marked {marked} packets: upstream delay bunched it beyond "
                f"the burst admitted there (σ {hop.burst:,} B)",
            )
        )
    # With no packet marked, the meter's colour counts cannot hide anything, so the green bytes
    # are exact: more than CBS + CIR·t (plus the frame in flight at each end of the window)
    # means the meter is not policing as programmed (never configured, or configured wrong).
    # A window policer's envelope is not (CBS + CIR·t) (a jumping window passes twice its burst
    # across an edge): only meters are held to it.
    allowed = hop.cburst + round(hop.cir * window) + 2 * (hop.max_packet + FRAME_OVERHEAD)
    if hop.metered and not marked and green_bytes > allowed:
        found.append(
            _hop_finding(
                hop,
                POLICER,
                green_bytes,
                allowed,
                "bytes",
                packets,
                f"reservation {hop.reservation_id} ({channel}) at {where}: {green_bytes:,} green bytes "
                f"in {window:.3f} s, beyond its meter's envelope of {allowed:,} "
                f"(CBS {hop.cburst:,} B + CIR {hop.cir:,} B/s × t): the policer is not working",
            )
        )
    return reading, found


def _hop_finding(
    hop: HopExpectation, kind: str, figure: int, bound: int, unit: str, packets: int, message: str
) -> Finding:
    return Finding(
        kind=kind,
        cause=KINDS[kind],
        switch=hop.port.switch,
        port=hop.port.port,
        priority=hop.priority,
        reservation_id=hop.reservation_id,
        channel=str(hop.key),
        figure=figure,
        bound=bound,
        unit=unit,
        packets=packets,
        message=message,
    )


def _window_max(now: Mapping[Cell, int] | None, before: Mapping[Cell, int] | None, cell: Cell) -> int | None:
    """A register's maximum is the window's only if it grew during the window (the registers
    hold maxima since they were last cleared; the service zeroes its baseline when it clears
    them). None: the switch has no register figure, or the window did not reach the maximum."""
    if now is None or cell not in now:
        return None
    previous = None if before is None else before.get(cell)
    return now[cell] if previous is None or now[cell] > previous else None


def _excess_delta(before: MonitorSample, now: MonitorSample, channel_id: int) -> tuple[int, ...] | None:
    a, b = before.excess.get(channel_id), now.excess.get(channel_id)
    if a is None or b is None:
        return None
    delta = tuple(y - x for x, y in zip(a, b, strict=True))
    return None if any(d < 0 for d in delta) else delta


def _deltas(now: tuple[int, ...], before: tuple[int, ...] | None) -> tuple[int, ...]:
    if before is None:
        return tuple(0 for _ in now)
    delta = tuple(b - a for a, b in zip(before, now, strict=True))
    # A counter that went backwards was cleared (the switch restarted): count from zero.
    return now if any(d < 0 for d in delta) else delta
