"""`GET /metrics`: the controller's figures in the Prometheus text format (prometheus_client).

Names follow terrapin-switch's own metrics (docs/switch.md): the `terrapin_` prefix, `port` and
`queue` labels for an egress queue (plus `switch`, since one controller serves several), base
units in the name (`_seconds`, `_bytes`, `_bytes_per_second`) and `_total` on counters. A
Prometheus scraping both the controller and a terrapin-switch sees one vocabulary.

What the admission ledger holds (allocations, capacities, bounds) is read at scrape time by a
collector, so the figures are never stale; what happens (decisions, set-ups, polls, violations)
is counted as it happens. Each controller has its own registry: tests start several in one
process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from terrapin.admission import AdmissionLedger, Allocation, Denial
from terrapin.admission.ledger import COMMITTED, HELD
from terrapin.channel_requests import Conflict
from terrapin.monitor.checks import NETWORK, SOURCE, PollVerdict
from terrapin.monitor.events import Event
from terrapin.p4program import DELAY_BAND_NAMES
from terrapin.reservations import ReservationService
from terrapin.restoration import Report
from terrapin.store import Reservation

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# No `_created` sample beside every counter and histogram: terrapin-switch has none either, and
# they double the exposition for a figure (the process start) that /health already implies.
disable_created_metrics()  # type: ignore[no-untyped-call]
# Admission decisions take well under a millisecond; set-ups are P4Runtime round trips.
DECISION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
SETUP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
POLL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ControllerMetrics:
    def __init__(self, ledger: AdmissionLedger, channel_series: int = 1000) -> None:
        """`channel_series`: at most this many channels have series of their own (one per hop
        and figure): a channel label is a reservation id, and at 10,000 channels of 3-4 hops a
        series each would be over 100,000 series, more than a Prometheus server should take
        from one target and a fifth of the controller's memory. GET /monitor has them all."""
        self._channel_series = channel_series
        self._exported: set[int] = set()  # the reservation ids with series
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter(
            "terrapin_admission_decisions",
            "admission decisions by outcome (admitted, denied, conflict)",
            ["outcome"],
            registry=r,
        )
        self.denials = Counter(
            "terrapin_admission_denials",
            "denied requests by the constraint that failed first",
            ["constraint"],
            registry=r,
        )
        self.decision_seconds = Histogram(
            "terrapin_admission_decision_seconds",
            "time to decide one request over its whole path",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.setup_seconds = Histogram(
            "terrapin_channel_setup_seconds",
            "time to write an admitted channel to every switch of its path",
            ["origin", "outcome"],
            buckets=SETUP_BUCKETS,
            registry=r,
        )
        self.polls = Counter("terrapin_monitor_polls", "monitor polls", registry=r)
        self.poll_errors = Counter(
            "terrapin_monitor_poll_errors", "switch reads that failed", ["switch"], registry=r
        )
        self.poll_seconds = Histogram(
            "terrapin_monitor_poll_seconds",
            "time to read and check every switch once",
            buckets=POLL_BUCKETS,
            registry=r,
        )
        self.last_poll = Gauge(
            "terrapin_monitor_last_poll_timestamp_seconds", "when the monitor last polled", registry=r
        )
        queue = ["switch", "port", "queue"]
        self.queue_delay_max = _Series(
            Gauge,
            "terrapin_monitor_queue_delay_max_seconds",
            "longest wait in an admitted queue over the last poll's window (register; "
            "absent where the switch reads no registers)",
            queue,
            registry=r,
        )
        self.queue_delay_bound = _Series(
            Gauge,
            "terrapin_monitor_queue_delay_bound_seconds",
            "the delay bound the switch counts an admitted queue's packets against",
            queue,
            registry=r,
        )
        self.queue_band_packets = _Series(
            Counter,
            "terrapin_monitor_queue_delay_band_packets",
            "packets of an admitted queue by their wait against its bound (quarter, half, within, over)",
            [*queue, "band"],
            registry=r,
        )
        self.queue_over_bound = _Series(
            Counter,
            "terrapin_monitor_queue_packets_over_bound",
            "packets of an admitted queue that waited longer than its bound",
            queue,
            registry=r,
        )
        channel = ["channel", "switch", "port"]
        self.channel_delivered = _Series(
            Gauge,
            "terrapin_monitor_channel_delivered_bytes_per_second",
            "frame bytes a channel sent through a hop over the last window, every colour",
            channel,
            registry=r,
        )
        self.channel_reserved = _Series(
            Gauge,
            "terrapin_monitor_channel_reserved_bytes_per_second",
            "the channel's metered rate at a hop (CIR, frame bytes)",
            channel,
            registry=r,
        )
        self.channel_excess = _Series(
            Counter,
            "terrapin_monitor_channel_excess_packets",
            "a channel's packets its meter marked beyond the envelope",
            [*channel, "colour"],
            registry=r,
        )
        self.recovery_packets = _Series(
            Gauge,
            "terrapin_protection_recovery_packets",
            "a protected channel's sequence recovery counters at its last switch, as the switch last"
            " counted them: passed, discarded (duplicates), out_of_order, rogue, resets, lost",
            ["channel", "switch", "counter"],
            registry=r,
        )
        self.channels_without_series = Gauge(
            "terrapin_monitor_channels_without_series",
            "channels the monitor checks whose per-hop series are not exported (beyond "
            "monitor.channel_series; GET /monitor has them)",
            registry=r,
        )
        self.violations = Counter(
            "terrapin_monitor_violations",
            "violation episodes raised, by kind and cause (network: a bound broken while the "
            "traffic conformed; source: a sender beyond its envelope)",
            ["kind", "cause"],
            registry=r,
        )
        self.active = Gauge(
            "terrapin_monitor_active_violations", "violation episodes going on now", ["cause"], registry=r
        )
        self.alarm = Gauge(
            "terrapin_monitor_network_alarm",
            "1 while a network violation is going on: a promise is being broken",
            registry=r,
        )
        self.trunks_down = Gauge(
            "terrapin_trunks_down", "switch-to-switch links that carry no traffic now (links.py)", registry=r
        )
        self.reservations_down = Gauge(
            "terrapin_reservations_down", "reservations no path admits now (state down)", registry=r
        )
        self.restorations = Counter(
            "terrapin_restoration_changes",
            "reservations a restoration moved, put down, restored or closed",
            ["kind"],
            registry=r,
        )
        self.restoration_seconds = Histogram(
            "terrapin_restoration_seconds",
            "from a change of the down trunks to every switch written",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        r.register(LedgerCollector(ledger))

    def observe_restoration(self, report: Report, down_reservations: int) -> None:
        self.trunks_down.set(len(report.down))
        self.reservations_down.set(down_reservations)
        for change in report.changes:
            self.restorations.labels(change.kind).inc()
        self.restoration_seconds.observe(report.store_s + report.switches_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # ---- the monitor's observer ---------------------------------------------------------------

    def observe_poll(self, seconds: float, verdict: PollVerdict, errors: dict[str, str]) -> None:
        self.polls.inc()
        self.poll_seconds.observe(seconds)
        self.last_poll.set(time.time())
        for name in errors:
            self.poll_errors.labels(name).inc()
        # A queue's gauges go when it does, its counters stay (they only grow, and a queue
        # comes back); a channel's series go with it (its reservation id is never used again).
        queues: set[tuple[str, ...]] = set()
        for q in verdict.queues:
            labels = (q.switch, str(q.port), str(q.priority))
            queues.add(labels)
            self.queue_delay_bound.child(labels).set(q.bound_us / 1e6)
            if q.max_delay_us is not None:
                self.queue_delay_max.child(labels).set(q.max_delay_us / 1e6)
            for name, count in zip(DELAY_BAND_NAMES, q.bands, strict=True):
                self.queue_band_packets.child((*labels, name)).inc(count)
            self.queue_over_bound.child(labels).inc(q.over_bound)
        self._choose_exported({c.reservation_id for c in verdict.channels})
        channels: set[tuple[str, ...]] = set()
        for c in verdict.channels:
            if c.reservation_id not in self._exported:
                continue
            labels = (str(c.reservation_id), c.switch, str(c.port))
            channels.add(labels)
            self.channel_delivered.child(labels).set(c.delivered_rate)
            self.channel_reserved.child(labels).set(c.reserved_rate)
            self.channel_excess.child((*labels, "yellow")).inc(c.yellow_packets)
            self.channel_excess.child((*labels, "red")).inc(c.red_packets)
        self.queue_delay_bound.keep(queues)
        self.queue_delay_max.keep(
            {(q.switch, str(q.port), str(q.priority)) for q in verdict.queues if q.max_delay_us is not None}
        )
        recovered: set[tuple[str, ...]] = set()
        for rec in verdict.recoveries:
            for counter, value in rec.counts.items():
                labels = (str(rec.reservation_id), rec.switch, counter)
                recovered.add(labels)
                self.recovery_packets.child(labels).set(value)
        self.recovery_packets.keep(recovered)
        self.channel_delivered.keep(channels)
        self.channel_reserved.keep(channels)
        self.channel_excess.keep({(*c, colour) for c in channels for colour in ("yellow", "red")})

    def _choose_exported(self, checked: set[int]) -> None:
        """The channels with series: those that had them and are still checked, then the
        oldest others up to the limit (a channel keeps its series while it lives)."""
        self._exported &= checked
        room = self._channel_series - len(self._exported)
        if room > 0:
            self._exported |= set(sorted(checked - self._exported)[:room])
        self.channels_without_series.set(len(checked) - len(self._exported))

    def observe_event(self, event: Event, raised: bool) -> None:
        if raised:
            self.violations.labels(event.kind, event.cause).inc()

    def observe_state(self, active: dict[str, int]) -> None:
        for cause in (NETWORK, SOURCE):
            self.active.labels(cause).set(active.get(cause, 0))
        self.alarm.set(1 if active.get(NETWORK, 0) else 0)


class _Series:
    """One labelled metric's children, by their label values. Each poll updates a few series per
    queue and per hop of every channel: tens of thousands at 10,000 channels, too many to look
    up by label (labels()) every time."""

    def __init__(
        self,
        kind: type[Gauge] | type[Counter],
        name: str,
        documentation: str,
        labels: list[str],
        registry: CollectorRegistry,
    ) -> None:
        self._metric = kind(name, documentation, labels, registry=registry)
        self._children: dict[tuple[str, ...], Any] = {}

    def child(self, labels: tuple[str, ...]) -> Any:
        found = self._children.get(labels)
        if found is None:
            found = self._children[labels] = self._metric.labels(*labels)
        return found

    def keep(self, labels: set[tuple[str, ...]]) -> None:
        """Remove every child but those of `labels`."""
        for gone in self._children.keys() - labels:
            self._metric.remove(*gone)
            del self._children[gone]


# (name, help) of what the ledger says per port, and per admitted level of a port, in the order
# LedgerCollector fills them.
PORT_GAUGES = (
    ("terrapin_port_line_rate_bytes_per_second", "C, the port's line rate"),
    ("terrapin_port_reservable_bytes_per_second", "R, what admitted levels may take"),
    ("terrapin_port_allocated_bytes_per_second", "Σρ admitted on the port"),
    ("terrapin_port_queue_capacity_bytes", "B, each priority queue's buffer"),
)
QUEUE_GAUGES = (
    ("terrapin_queue_allocated_bytes_per_second", "Σρ admitted at the level"),
    ("terrapin_queue_allocated_burst_bytes", "Σσ admitted at the level"),
    ("terrapin_queue_channels", "channels admitted at the level"),
    (
        "terrapin_queue_delay_bound_seconds",
        "the static-priority bound admission computes for the level's load",
    ),
)


class LedgerCollector(Collector):
    """What is admitted where, read from the ledger at each scrape."""

    def __init__(self, ledger: AdmissionLedger) -> None:
        self._ledger = ledger

    def collect(self) -> Iterator[GaugeMetricFamily]:
        channels = GaugeMetricFamily(
            "terrapin_channels",
            "admitted channels (held: tentative, awaiting the destination)",
            labels=["state"],
        )
        states = [state for _a, state in self._ledger.channels()]
        for state in (COMMITTED, HELD):
            channels.add_metric([state], states.count(state))
        yield channels
        ports = {name: GaugeMetricFamily(name, text, labels=["switch", "port"]) for name, text in PORT_GAUGES}
        queues = {
            name: GaugeMetricFamily(name, text, labels=["switch", "port", "queue"])
            for name, text in QUEUE_GAUGES
        }
        for pid in sorted(self._ledger.ports):
            st = self._ledger.port_status(pid)
            labels = [pid.switch, str(pid.port)]
            for family, value in zip(
                ports.values(),
                (st.line_rate, st.reservable_rate, st.admitted_rate, st.queue_capacity),
                strict=True,
            ):
                family.add_metric(labels, value)
            for level in st.levels:
                if level.channels == 0 or level.worst_case_delay_us is None:
                    continue
                figures = (
                    level.rate,
                    level.burst,
                    level.channels,
                    level.worst_case_delay_us / 1e6,
                )
                for family, figure in zip(queues.values(), figures, strict=True):
                    family.add_metric([*labels, str(level.priority)], figure)
        yield from ports.values()
        yield from queues.values()


class InstrumentedReservationService(ReservationService):
    """ReservationService that times and counts its decisions and set-ups for /metrics."""

    metrics: ControllerMetrics | None = None

    def decided(self, outcome: Allocation | Denial | Conflict | None, seconds: float) -> None:
        if self.metrics is None:
            return
        if isinstance(outcome, Conflict):
            self.metrics.decisions.labels("conflict").inc()
            return
        self.metrics.decision_seconds.observe(seconds)
        if isinstance(outcome, Denial):
            self.metrics.decisions.labels("denied").inc()
            self.metrics.denials.labels(outcome.primary.constraint).inc()
        else:
            self.metrics.decisions.labels("admitted").inc()

    def set_up(self, origin: str, result: Reservation | Denial, seconds: float) -> None:
        if self.metrics is None:
            return
        outcome = "rolled_back" if isinstance(result, Denial) else "installed"
        self.metrics.setup_seconds.labels(origin, outcome).observe(seconds)
