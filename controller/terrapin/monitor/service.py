"""The guarantee monitor: every `interval_s` it reads each switch's telemetry over P4Runtime and
checks it against what admission promised (terrapin.monitor.checks), turning what it finds into
episodes (terrapin.monitor.events), metrics, and a stream for the dashboard.

It also keeps the data plane's own check current: each admitted queue's delay bound lives in
the switch's `queue_bounds` table, so the switch counts every packet against it (the delay
bands), which works on terrapin-switch and on p4lang's simple_switch_grpc alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol

from terrapin.admission.ledger import AdmissionLedger
from terrapin.admission.model import PortId, PortLoad
from terrapin.config import MonitorConfig
from terrapin.constants import ADMITTED_PRIORITIES
from terrapin.monitor.checks import (
    NETWORK,
    SOURCE,
    Finding,
    PollVerdict,
    QueueExpectation,
    RecoveryReading,
    delay_bounds,
    evaluate,
    first_hop_excess,
    hop_expectations,
    queue_expectations,
    with_fresh_channels,
)
from terrapin.monitor.events import Event, EventLog
from terrapin.monitor.trunks import path_findings
from terrapin.paths import ChannelEntry, ChannelProgrammer, Topology
from terrapin.store import DOWN, Reservation
from terrapin.switches import MonitorSample, QueueBound

# The share of the controller's time the monitor may take (see GuaranteeMonitor.interval).
MAX_DUTY = 0.1

LOG = logging.getLogger("terrapin.monitor")

Cell = tuple[int, int]


class MonitorFabric(Protocol):
    """What the monitor needs from the switches (switches.SwitchFabric, or a test fake)."""

    @property
    def names(self) -> list[str]: ...

    def is_ready(self, name: str) -> bool: ...

    async def sync_queue_bounds(self, name: str, bounds: Sequence[QueueBound]) -> int: ...

    def stage_bounds(
        self, name: str, bounds: Sequence[QueueBound], installed: Mapping[Cell, int]
    ) -> Awaitable[None]: ...

    async def monitor_sample(
        self, name: str, cells: Sequence[Cell], channel_ids: Sequence[int], recovering: Sequence[int] = ()
    ) -> MonitorSample: ...

    async def reset_queue_telemetry(self, name: str, ports: list[int]) -> None: ...

    def reads_registers(self, name: str) -> bool: ...


class MonitorObserver(Protocol):
    """Where the monitor's figures go besides its own state (metrics.ControllerMetrics)."""

    def observe_poll(self, seconds: float, verdict: PollVerdict, errors: dict[str, str]) -> None: ...

    def observe_event(self, event: Event, raised: bool) -> None: ...

    def observe_state(self, active: dict[str, int]) -> None: ...


class GuaranteeMonitor:
    def __init__(
        self,
        ledger: AdmissionLedger,
        reservations: Callable[[], Sequence[Reservation]],
        entries: Callable[[Reservation], Sequence[ChannelEntry]],
        fabric: MonitorFabric,
        events: EventLog,
        config: MonitorConfig,
        observer: MonitorObserver | None = None,
        clock: Callable[[], float] = time.time,
        topology: Topology | None = None,
    ) -> None:
        self._ledger = ledger
        self._topology = topology  # its down trunks break the promises of the channels on them
        self._reservations = reservations
        self._entries = entries
        self._fabric = fabric
        self._events = events
        self._config = config
        self._observer = observer
        self._clock = clock
        self._samples: dict[str, MonitorSample] = {}
        self._installed: dict[str, dict[Cell, int]] = {}
        self._pending: dict[str, dict[Cell, int]] = {}
        self._port_bounds: dict[PortId, tuple[PortLoad, dict[int, int]]] = {}  # checks.delay_bounds
        # channel id → its colour counters as its entry was written (zeroed with it), per
        # switch, for the channels set up since the switch's last sample
        self._fresh: dict[str, dict[int, tuple[int, int, int, int]]] = {}
        # Per switch: its bounds are read, compared and written by one task at a time (set-ups
        # and polls of different switches go on side by side).
        self._bounds_locks: dict[str, asyncio.Lock] = {}
        self._last_poll_s = 0.0  # how long the last poll took
        self._cleared_maxima: set[str] = set()
        self._polling = False
        self._polls = 0
        self._last_poll_at: float | None = None
        self._verdict = PollVerdict([], [], [])
        self._recent_excess: frozenset[int] = frozenset()
        self._active: dict[tuple[Any, ...], Event] = {}
        self._raised: Counter[str] = Counter()
        self._over_bound_packets = 0
        self._switch_state: dict[str, dict[str, Any]] = {}
        self._subscribers: set[asyncio.Queue[tuple[str, dict[str, Any]]]] = set()
        closed = events.clear_all_active(clock())
        if closed:
            LOG.info("closed %d violation episodes a previous run left open", closed)

    @property
    def interval(self) -> float:
        """Seconds between the starts of two polls: the configured interval, stretched while a
        poll takes long enough that the monitor would otherwise use more than MAX_DUTY of the
        controller's time (each poll reads every channel's counters: with thousands of channels
        on a switch that is seconds of work, and set-ups must not wait behind it)."""
        return max(self._config.interval_s, self._last_poll_s / MAX_DUTY)

    # ---- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            started = asyncio.get_running_loop().time()
            try:
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception:  # the monitor must outlive any one bad poll
                LOG.exception("monitor poll failed")
            elapsed = asyncio.get_running_loop().time() - started
            self._last_poll_s = elapsed
            await asyncio.sleep(max(0.0, self.interval - elapsed))

    async def poll(self) -> PollVerdict:
        self._polling = True
        try:
            return await self._poll()
        finally:
            self._polling = False

    async def clear_maxima(self, name: str) -> None:
        """Clears a switch's max-depth and max-delay registers (`DELETE
        /status/switches/{name}/maxima`: an experiment reads each phase's maxima on their own).
        The monitor's baseline for them starts at 0 as after its own clearing; a poll in flight
        may have read them before the clearing, so its sample is zeroed once it lands."""
        ports = sorted(pid.port for pid in self._ledger.ports if pid.switch == name)
        await self._fabric.reset_queue_telemetry(name, ports)
        if self._polling:
            self._cleared_maxima.add(name)
        elif name in self._samples:
            self._samples[name] = _without_maxima(self._samples[name])

    async def _poll(self) -> PollVerdict:
        self._polls += 1
        started = time.perf_counter()
        if not any(self._fabric.is_ready(name) for name in self._fabric.names):
            # Nothing to read (a backup replica, or every switch away): the expectations of
            # every hop are not worth building.
            queues, hops = {}, []
        else:
            queues = queue_expectations(self._ledger)
            hops = hop_expectations(self._reservations(), self._entries)
        samples: dict[str, MonitorSample] = {}
        errors: dict[str, str] = {}
        for name in self._fabric.names:
            state = self._switch_state.setdefault(name, {})
            state["ready"] = self._fabric.is_ready(name)
            if not state["ready"]:
                # The last good sample stays the baseline: counters only grow, so the next read
                # covers the outage too, and one that went back (the switch restarted empty)
                # is taken as counting from zero (checks._deltas).
                state["error"] = "not connected"
                continue
            fresh = self._fresh.pop(name, {})
            try:
                samples[name] = await self._sample(name, queues, hops)
                if state.get("error"):
                    LOG.info("monitor: switch %s readable again", name)
                state["error"] = None
            except Exception as exc:  # one switch's fault must not stop the others' checks
                errors[name] = str(exc) or type(exc).__name__
                if state.get("error") != errors[name]:  # once per fault, not once per poll
                    LOG.warning("monitor: switch %s: %s", name, errors[name])
                state["error"] = errors[name]
                self._fresh.setdefault(name, {}).update(fresh)
            else:
                if fresh and name in self._samples:
                    self._samples[name] = with_fresh_channels(self._samples[name], fresh, hops)
            state["registers"] = self._fabric.reads_registers(name)
        verdict = evaluate(
            self._samples, samples, queues, hops, self._installed, recent_source_excess=self._recent_excess
        )
        if self._topology is not None:
            broken = path_findings(self._reservations(), self._topology)
            verdict = replace(verdict, findings=verdict.findings + broken)
        verdict = replace(verdict, recoveries=self._recoveries(samples))
        self._recent_excess = first_hop_excess(self._samples, samples, hops)
        self._samples.update(samples)
        for name in self._cleared_maxima & set(self._samples):
            # The registers were cleared after this read: the next window's maxima start at 0.
            self._samples[name] = _without_maxima(self._samples[name])
        self._cleared_maxima.clear()
        now = self._clock()
        self._last_poll_at = now
        self._verdict = verdict
        self._over_bound_packets += sum(q.over_bound for q in verdict.queues)
        self._episodes(verdict.findings, now)
        if self._observer is not None:
            self._observer.observe_poll(time.perf_counter() - started, verdict, errors)
            self._observer.observe_state(self._active_counts())
        if self._subscribers:  # a snapshot has every channel hop: thousands of them
            self._broadcast("monitor", self.snapshot())
        return verdict

    async def _sample(
        self,
        name: str,
        queues: dict[Any, list[QueueExpectation]],
        hops: Sequence[Any],
    ) -> MonitorSample:
        async with self._bounds_lock(name):
            await self._sync_bounds(name, self._wanted(queues, name), allow_decrease=True)
        # Every admitted level of every port, whether it carries channels now or not, so that
        # a queue's counters have a baseline before its first channel arrives.
        ports = sorted(pid.port for pid in self._ledger.ports if pid.switch == name)
        cells = [(port, priority) for port in ports for priority in ADMITTED_PRIORITIES]
        channel_ids = sorted({h.channel_id for h in hops if h.port.switch == name})
        recovering = sorted(
            r.channel_id for r in self._protected() if r.allocation.hops[-1].port.switch == name
        )
        if recovering:
            sample = await self._fabric.monitor_sample(name, cells, channel_ids, recovering)
        else:
            sample = await self._fabric.monitor_sample(name, cells, channel_ids)
        if self._config.reset_maxima and ports and sample.max_delay_us is not None:
            # The registers hold maxima since they were last cleared; clearing them after
            # each read makes the next figure the next window's.
            await self._fabric.reset_queue_telemetry(name, ports)
            self._cleared_maxima.add(name)
        return sample

    def _protected(self) -> list[Reservation]:
        return [r for r in self._reservations() if r.allocation.protected and r.state != DOWN]

    def _recoveries(self, samples: dict[str, MonitorSample]) -> list[RecoveryReading]:
        """The protected channels' recovery counters read this poll (docs/controller.md
        "Protection"), for /metrics."""
        found = []
        for record in self._protected():
            switch = record.allocation.hops[-1].port.switch
            sample = samples.get(switch)
            counts = (
                None if sample is None or sample.recovery is None else sample.recovery.get(record.channel_id)
            )
            if counts is None:
                continue
            read = {k: v for k, v in asdict(counts).items() if v is not None}
            found.append(RecoveryReading(record.reservation_id, switch, read))
        return found

    @staticmethod
    def _wanted(queues: dict[Any, list[QueueExpectation]], switch: str) -> dict[Cell, int]:
        return {
            (q.port.port, q.priority): q.bound_us
            for pid, levels in queues.items()
            if pid.switch == switch
            for q in levels
        }

    async def stage_channel(
        self, switch: str, channel_id: int, port: int | None = None
    ) -> Coroutine[Any, Any, None]:
        """Called before a channel's entry is written to `switch` (the ledger already holds it):
        the switch must judge the new load by its new, larger bounds from the first packet on
        (the entry's own write zeroes the channel id's colour counters, so its first window
        counts from zero). Lower bounds wait for a poll (thresholds_to_install). Only the
        bounds of `port`, the hop's egress port, can have changed (a level's bound depends on
        its own port's load alone); None recomputes the whole switch's.

        The writes are queued (under the switch's bounds lock) by the time this returns; what
        it returns waits for the switch's answer. So a channel's entry queued after it goes out
        behind its bounds, in the same WriteRequest or the next, and the set-ups of one switch
        share its WriteRequests instead of waiting for each other."""
        if not self._config.enabled:
            return _nothing()
        if port is None:
            ports = [pid for pid in self._ledger.ports if pid.switch == switch]
        else:
            ports = [PortId(switch, port)]
        wanted = delay_bounds(self._ledger, ports, self._port_bounds)
        async with self._bounds_lock(switch):
            installed = self._installed.get(switch, {})
            pending = self._pending.setdefault(switch, {})
            # The cells that may change (the port's, or all), as they are and as they become.
            before = installed if port is None else {c: b for c, b in installed.items() if c[0] == port}
            after = thresholds_to_install(wanted, before, pending, self._polls, allow_decrease=False)
            if after != before:
                bounds = [QueueBound(p, prio, bound) for (p, prio), bound in sorted(after.items())]
                staged = self._fabric.stage_bounds(switch, bounds, before)
                self._installed[switch] = (
                    after if port is None else {c: b for c, b in installed.items() if c[0] != port} | after
                )
            else:
                staged = _nothing()
        return self._staged(switch, channel_id, staged)

    async def _staged(self, switch: str, channel_id: int, staged: Awaitable[None]) -> None:
        try:
            await staged
        except Exception:
            # The switch's table is not what we last wrote (it restarted, or a write was
            # lost): read it and set it right.
            async with self._bounds_lock(switch):
                target = self._installed.get(switch, {})
                bounds = [QueueBound(port, prio, bound) for (port, prio), bound in sorted(target.items())]
                await self._fabric.sync_queue_bounds(switch, bounds)
        self._fresh.setdefault(switch, {})[channel_id] = (0, 0, 0, 0)

    def _bounds_lock(self, switch: str) -> asyncio.Lock:
        return self._bounds_locks.setdefault(switch, asyncio.Lock())

    async def _sync_bounds(self, name: str, wanted: dict[Cell, int], allow_decrease: bool) -> None:
        installed = self._installed.get(name, {})
        pending = self._pending.setdefault(name, {})
        target = thresholds_to_install(wanted, installed, pending, self._polls, allow_decrease)
        await self._fabric.sync_queue_bounds(
            name, [QueueBound(port, prio, bound) for (port, prio), bound in sorted(target.items())]
        )
        self._installed[name] = target

    # ---- episodes -----------------------------------------------------------------------------

    def _episodes(self, findings: list[Finding], now: float) -> None:
        seen = set()
        for finding in findings:
            key = finding.episode
            seen.add(key)
            event = self._active.get(key)
            if event is not None:
                updated = self._events.extend(event.id, finding, now)
                if updated is not None:
                    self._active[key] = updated
                    continue
            event = self._events.raise_event(finding, now)
            self._active[key] = event
            self._raised[finding.cause] += 1
            if finding.cause == NETWORK:
                LOG.error("NETWORK VIOLATION (%s): %s", finding.kind, finding.message)
            else:
                LOG.warning("source violation (%s): %s", finding.kind, finding.message)
            if self._observer is not None:
                self._observer.observe_event(event, raised=True)
            self._broadcast("event", event.as_dict())
        for key in [k for k in self._active if k not in seen]:
            cleared = self._events.clear(self._active.pop(key).id, now)
            if cleared is not None:
                LOG.info("cleared after %d poll(s): %s", cleared.polls, cleared.message)
                if self._observer is not None:
                    self._observer.observe_event(cleared, raised=False)
                self._broadcast("event", cleared.as_dict())

    def record_episode(self, finding: Finding, raised_at: float, cleared_at: float) -> Event | None:
        """An episode that began and ended between two polls, known from elsewhere (a channel
        the restoration moved off a dead trunk before a poll saw it there): recorded raised and
        cleared. None if a poll already has it open (that poll's successor clears it)."""
        if finding.episode in self._active:
            return None
        raised = self._events.raise_event(finding, raised_at)
        self._raised[finding.cause] += 1
        cleared = self._events.clear(raised.id, cleared_at) or raised
        LOG.warning("%s (cleared after %.0f ms)", finding.message, (cleared_at - raised_at) * 1000)
        if self._observer is not None:
            self._observer.observe_event(raised, raised=True)
            self._observer.observe_event(cleared, raised=False)
        self._broadcast("event", cleared.as_dict())
        return cleared

    def _active_counts(self) -> dict[str, int]:
        counts = {NETWORK: 0, SOURCE: 0}
        for event in self._active.values():
            counts[event.cause] = counts.get(event.cause, 0) + 1
        return counts

    # ---- reading --------------------------------------------------------------------------------

    @property
    def alarm(self) -> bool:
        """A network violation is going on now."""
        return any(e.cause == NETWORK for e in self._active.values())

    def snapshot(self) -> dict[str, Any]:
        active = self._active_counts()
        verdict = "network" if active[NETWORK] else "source" if active[SOURCE] else "ok"
        return {
            "enabled": self._config.enabled,
            "interval_s": self.interval,
            "configured_interval_s": self._config.interval_s,
            "polls": self._polls,
            "last_poll_at": self._last_poll_at,
            "verdict": verdict,
            "alarm": self.alarm,
            "violations": {
                "total": sum(self._raised.values()),
                "network": self._raised[NETWORK],
                "source": self._raised[SOURCE],
                "active_network": active[NETWORK],
                "active_source": active[SOURCE],
            },
            "packets_over_bound": self._over_bound_packets,
            # the trunks that carry no traffic now (the link watch's, docs/controller.md "Trunks")
            "trunks_down": sorted(str(t) for t in self._topology.down) if self._topology else [],
            "switches": {name: dict(state) for name, state in sorted(self._switch_state.items())},
            "queues": [
                asdict(q) | {"over_bound": q.over_bound, "worst_band": q.worst_band}
                for q in self._verdict.queues
            ],
            "channels": [asdict(c) for c in self._verdict.channels],
            "active": [e.as_dict() for e in sorted(self._active.values(), key=lambda e: e.id)],
        }

    def events(self, **filters: Any) -> list[Event]:
        return self._events.query(**filters)

    # ---- the live stream --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[tuple[str, dict[str, Any]]]]:
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(maxsize=64)
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def _broadcast(self, kind: str, body: dict[str, Any]) -> None:
        for queue in list(self._subscribers):
            if queue.full():  # a slow reader loses the oldest update, never blocks the monitor
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
            queue.put_nowait((kind, body))


class BoundsFirstProgrammer:
    """The ChannelProgrammer the reservation service writes through: before a channel's entry
    goes to a switch, that switch's delay bounds are raised for the load that includes it."""

    def __init__(self, inner: ChannelProgrammer, monitor: GuaranteeMonitor) -> None:
        self._inner = inner
        self._monitor = monitor

    def is_ready(self, name: str) -> bool:
        return self._inner.is_ready(name)

    async def install_channel(self, entry: ChannelEntry) -> None:
        try:
            staged = await self._monitor.stage_channel(entry.switch, entry.channel_id, entry.port)
        except Exception as exc:  # the channel matters more; the next poll writes the bounds
            LOG.warning("switch %s: delay bounds not raised before set-up: %s", entry.switch, exc)
            staged = _nothing()
        # The entry is queued behind the bounds before either is answered.
        installing = asyncio.ensure_future(self._inner.install_channel(entry))
        try:
            await staged
        except asyncio.CancelledError:
            installing.cancel()  # the set-up was abandoned: its entry's write is too
            raise
        except Exception as exc:
            LOG.warning("switch %s: delay bounds not raised before set-up: %s", entry.switch, exc)
        await installing

    async def remove_channel(self, entry: ChannelEntry) -> None:
        await self._inner.remove_channel(entry)


async def _nothing() -> None:
    return None


def _without_maxima(sample: MonitorSample) -> MonitorSample:
    """The sample as if read just after its switch's maxima registers were cleared."""
    return replace(
        sample,
        max_delay_us=dict.fromkeys(sample.max_delay_us or {}, 0),
        max_depth_packets=dict.fromkeys(sample.max_depth_packets or {}, 0),
    )


def thresholds_to_install(
    wanted: Mapping[tuple[int, int], int],
    installed: Mapping[tuple[int, int], int],
    pending_since: dict[tuple[int, int], int],
    poll: int,
    allow_decrease: bool,
) -> dict[tuple[int, int], int]:
    """The delay bounds to program on a switch: (port, priority) → µs.

    A larger bound (a channel joined the port) takes effect at once, before the channel's entry
    is written, so no packet of the new load is judged by the old, tighter bound. A smaller one
    (a channel left) waits one poll: packets queued under the old load may still be on their
    way out, and they were promised the old bound. `pending_since` remembers when each
    decrease was first wanted; it is updated in place."""
    result: dict[tuple[int, int], int] = {}
    for cell in set(wanted) | set(installed):
        want = wanted.get(cell)
        have = installed.get(cell)
        if have is None or (want is not None and want >= have):
            pending_since.pop(cell, None)
            if want is not None:
                result[cell] = want
            continue
        first = pending_since.setdefault(cell, poll)
        if allow_decrease and poll > first:
            pending_since.pop(cell, None)
            if want is not None:
                result[cell] = want
        else:
            result[cell] = have
    return result
