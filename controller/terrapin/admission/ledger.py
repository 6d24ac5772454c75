"""The admission ledger: what every port has promised, and atomic multi-hop decisions.

A decision over a whole path happens under one lock, so no interleaving of requests and
releases (threads or tasks) can over-admit any port. Holds are tentative reservations that
expire unless committed (seed 000 Figure 15; RCAP's round trip in seed 001 §4.4).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from terrapin.admission.books import LevelBook
from terrapin.admission.checks import (
    Candidate,
    level_delay_bound_us,
    merge_rounding,
    round_envelope,
    run_port_tests,
    with_candidate,
)
from terrapin.admission.model import (
    MICROS,
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    Decision,
    Denial,
    HopAllocation,
    LevelLoad,
    PortId,
    PortLoad,
    PortModel,
    Rounding,
    Violation,
    ceil_div,
)
from terrapin.admission.policers import arrival_envelope, envelope_problem, tolerance_burst
from terrapin.constants import ADMITTED_PRIORITIES, DenialReason

HELD = "held"
COMMITTED = "committed"


class LedgerError(Exception):
    """A misuse of the ledger (unknown channel, duplicate key): a programming error upstream."""


@dataclass
class _Entry:
    allocation: Allocation
    state: str
    expires_at: float | None


@dataclass(frozen=True)
class LevelStatus:
    priority: int
    channels: int
    rate: int
    burst: int
    worst_case_delay_us: int | None
    delay_limit_us: int | None


@dataclass(frozen=True)
class PortStatus:
    port: PortId
    line_rate: int
    reservable_rate: int
    queue_capacity: int
    admitted_rate: int
    channels: int
    levels: tuple[LevelStatus, ...]


class AdmissionLedger:
    """Thread-safe. `clock` returns seconds (monotonic) and is injectable for tests."""

    def __init__(
        self,
        ports: Iterable[PortModel],
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._ports: dict[PortId, PortModel] = {p.port: p for p in ports}
        self._books: dict[PortId, list[LevelBook]] = {}
        # Each port's aggregates as last taken, until the port's load changes: a burst of
        # set-ups reads the same few ports' loads for every hop it admits and stages. Shared,
        # so a PortLoad handed out is never changed (checks.with_candidate copies).
        self._snapshots: dict[PortId, PortLoad] = {}
        self._level_snapshots: dict[tuple[PortId, int], LevelLoad] = {}  # the same, per level
        self._entries: dict[ChannelKey, _Entry] = {}
        self._held: dict[ChannelKey, float] = {}  # tentative holds only, so expiry is cheap
        self._lock = threading.RLock()
        self._clock = clock or time.monotonic
        self.reset()

    @property
    def ports(self) -> Mapping[PortId, PortModel]:
        return self._ports

    # ---- decisions -------------------------------------------------------------------------

    def admit(
        self,
        key: ChannelKey,
        path: Sequence[PortId],
        envelope: ChannelEnvelope,
        *,
        hold_seconds: float | None = None,
        second: Sequence[PortId] | None = None,
    ) -> Decision:
        """Run every hop's tests; on success record the channel on every hop at once.

        With `hold_seconds` the reservation is tentative and expires unless committed. With
        `second` (a protected channel's other path, ending at the same port as `path`) both
        paths are tested and held (_decide_pair).
        """
        with self._lock:
            self._expire_locked()
            if key in self._entries:
                raise LedgerError(f"channel {key} already exists")
            decision = (
                self._decide_pair(key, path, second, envelope)
                if second
                else self._decide(key, path, envelope)
            )
            if isinstance(decision, Allocation):
                expires = None if hold_seconds is None else self._clock() + hold_seconds
                state = COMMITTED if hold_seconds is None else HELD
                self._apply(decision)
                self._entries[key] = _Entry(decision, state, expires)
                if expires is not None:
                    self._held[key] = expires
            return decision

    def evaluate(
        self,
        key: ChannelKey,
        path: Sequence[PortId],
        envelope: ChannelEnvelope,
        second: Sequence[PortId] | None = None,
    ) -> Decision:
        """The decision `admit` would take, without recording anything."""
        with self._lock:
            self._expire_locked()
            return (
                self._decide_pair(key, path, second, envelope)
                if second
                else self._decide(key, path, envelope)
            )

    def commit(self, key: ChannelKey) -> Allocation:
        with self._lock:
            self._expire_locked()
            entry = self._entries.get(key)
            if entry is None:
                raise LedgerError(f"no reservation for {key} (released or expired)")
            entry.state = COMMITTED
            entry.expires_at = None
            self._held.pop(key, None)
            return entry.allocation

    def refresh(self, key: ChannelKey, hold_seconds: float) -> bool:
        """Extend a tentative hold (a retransmitted REQUEST_ADMIT)."""
        with self._lock:
            self._expire_locked()
            entry = self._entries.get(key)
            if entry is None:
                return False
            if entry.state == HELD:
                entry.expires_at = self._clock() + hold_seconds
                self._held[key] = entry.expires_at
            return True

    def release(self, key: ChannelKey) -> Allocation | None:
        with self._lock:
            entry = self._entries.pop(key, None)
            self._held.pop(key, None)
            if entry is None:
                return None
            self._unapply(entry.allocation)
            return entry.allocation

    def restore(self, allocation: Allocation, held_until: float | None = None) -> None:
        """Re-enter an allocation taken from the store (after a restart, or another replica's
        decision), without testing it: an admitted channel is never dropped because the
        configuration changed. With `held_until` (this ledger's clock) it is a tentative hold."""
        with self._lock:
            if allocation.key in self._entries:
                raise LedgerError(f"channel {allocation.key} already exists")
            for hop in allocation.all_hops:
                if hop.port not in self._ports:
                    raise LedgerError(f"stored channel {allocation.key} uses unknown port {hop.port}")
            self._apply(allocation)
            state = COMMITTED if held_until is None else HELD
            self._entries[allocation.key] = _Entry(allocation, state, held_until)
            if held_until is not None:
                self._held[allocation.key] = held_until

    def hold_until(self, key: ChannelKey, deadline: float) -> bool:
        """Move a tentative hold's deadline (this ledger's clock); False if there is no such hold."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.state != HELD:
                return False
            entry.expires_at = deadline
            self._held[key] = deadline
            return True

    def deadline(self, key: ChannelKey) -> float | None:
        """When a tentative hold expires (this ledger's clock); None for a committed channel."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry.expires_at

    def reset(self) -> None:
        """Forget every channel and hold (the store rebuilds the ledger from its tables)."""
        with self._lock:
            self._entries.clear()
            self._held.clear()
            self._snapshots.clear()
            self._level_snapshots.clear()
            for pid, model in self._ports.items():
                self._books[pid] = [LevelBook() for _ in range(8)]
                for standing in model.standing:
                    self._books[pid][standing.priority].reserve(standing, model)

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    def expire(self) -> list[Allocation]:
        with self._lock:
            return self._expire_locked()

    # ---- reading ---------------------------------------------------------------------------

    def get(self, key: ChannelKey) -> tuple[Allocation, str] | None:
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else (entry.allocation, entry.state)

    def channels(self) -> list[tuple[Allocation, str]]:
        with self._lock:
            return [(e.allocation, e.state) for e in self._entries.values()]

    def snapshot(self) -> tuple[list[tuple[Allocation, str]], dict[PortId, PortLoad]]:
        """Every channel and every port's aggregates, taken together under the lock."""
        with self._lock:
            channels = [(e.allocation, e.state) for e in self._entries.values()]
            return channels, {pid: self._load_locked(pid) for pid in self._ports}

    def load(self, port: PortId) -> PortLoad:
        with self._lock:
            return self._load_locked(port)

    def loads(self, ports: Iterable[PortId] | None = None) -> dict[PortId, PortLoad]:
        """Ports' aggregates taken together (every port's by default), without the channel list
        snapshot() copies: what is read before every hop of a set-up."""
        with self._lock:
            return {pid: self._load_locked(pid) for pid in (self._ports if ports is None else ports)}

    def port_status(self, port: PortId) -> PortStatus:
        with self._lock:
            model = self._ports[port]
            load = self._load_locked(port)
            levels = []
            for priority in ADMITTED_PRIORITIES:
                level = load.levels[priority]
                limits = [x for x in (model.budget_us(priority), level.min_protected_us) if x]
                levels.append(
                    LevelStatus(
                        priority=priority,
                        channels=level.channels,
                        rate=level.rate,
                        burst=level.burst,
                        worst_case_delay_us=level_delay_bound_us(model, load, priority)
                        if level.channels
                        else None,
                        delay_limit_us=min(limits) if limits else None,
                    )
                )
            return PortStatus(
                port=port,
                line_rate=model.line_rate,
                reservable_rate=model.reservable,
                queue_capacity=model.queue_capacity,
                admitted_rate=load.admitted_rate,
                channels=load.admitted_channels,
                levels=tuple(levels),
            )

    # ---- internals -------------------------------------------------------------------------

    def _load_locked(self, port: PortId) -> PortLoad:
        load = self._snapshots.get(port)
        if load is None:
            load = self._snapshots[port] = PortLoad(levels=[self._level(port, p) for p in range(8)])
        return load

    def _level(self, port: PortId, priority: int) -> LevelLoad:
        level = self._level_snapshots.get((port, priority))
        if level is None:
            level = self._level_snapshots[(port, priority)] = self._books[port][priority].snapshot()
        return level

    def _apply(self, allocation: Allocation) -> None:
        for hop in allocation.all_hops:
            self._books[hop.port][hop.priority].add(hop, self._ports[hop.port])
            self._changed(hop.port, hop.priority)

    def _unapply(self, allocation: Allocation) -> None:
        for hop in allocation.all_hops:
            self._books[hop.port][hop.priority].remove(hop, self._ports[hop.port])
            self._changed(hop.port, hop.priority)

    def _changed(self, port: PortId, priority: int) -> None:
        self._snapshots.pop(port, None)
        self._level_snapshots.pop((port, priority), None)

    def _expire_locked(self) -> list[Allocation]:
        if not self._held:
            return []
        now = self._clock()
        gone = [k for k, expires in self._held.items() if expires <= now]
        released = []
        for key in gone:
            del self._held[key]
            entry = self._entries.pop(key)
            self._unapply(entry.allocation)
            released.append(entry.allocation)
        return released

    def _decide(self, key: ChannelKey, path: Sequence[PortId], env: ChannelEnvelope) -> Decision:
        invalid = self._validate(path, env)
        if invalid is not None:
            return Denial(key, (invalid,))
        policed = self._policed(key, [path], env)
        if isinstance(policed, Denial):
            return policed
        rate, burst, source_burst, rounding, tolerance = policed
        hops = self._path_hops(key, path, env, rate, burst, source_burst)
        if isinstance(hops, Denial):
            return hops
        return Allocation(key, env, rate, burst, rounding, tuple(hops), tolerance)

    def _decide_pair(
        self, key: ChannelKey, path: Sequence[PortId], second: Sequence[PortId], env: ChannelEnvelope
    ) -> Decision:
        """A protected channel: both paths pass the whole test with one policer (the first
        switch polices once, then replicates), each held on its own hops, the last (shared) hop
        once. Paths that share no trunk share no port but the destination's, so neither path's
        test can see the other's charge: each is tested against the ports' load alone, and the
        shared hop keeps the allocation of the path that brings the channel there later (the
        larger burst: it dominates the other copy's arrivals, and its bound the other's)."""
        for p in (path, second):
            invalid = self._validate(p, env)
            if invalid is not None:
                return Denial(key, (invalid,))
        if path[-1] != second[-1] or path[0].switch != second[0].switch:
            return Denial(key, (_invalid("path", 0, "a protected channel's paths must share their ends"),))
        if set(path[:-1]) & set(second[:-1]):
            return Denial(key, (_invalid("path", 0, "a protected channel's paths must share no port"),))
        policed = self._policed(key, [path, second], env)
        if isinstance(policed, Denial):
            return policed
        rate, burst, source_burst, rounding, tolerance = policed
        found = [self._path_hops(key, p, env, rate, burst, source_burst) for p in (path, second)]
        denials = [d for d in found if isinstance(d, Denial)]
        if denials:
            return Denial(key, tuple(v for d in denials for v in d.violations))
        a, b = (h for h in found if not isinstance(h, Denial))
        last = a[-1] if a[-1].burst >= b[-1].burst else b[-1]
        shared = {p.switch for p in path[1:-1]} & {p.switch for p in second[1:-1]}
        return Allocation(
            key,
            env,
            rate,
            burst,
            rounding,
            (*a[:-1], last),
            tolerance,
            protection=tuple(b[:-1]),
            disjoint="link" if shared else "node",
        )

    def _policed(
        self, key: ChannelKey, paths: Sequence[Sequence[PortId]], env: ChannelEnvelope
    ) -> tuple[int, int, int, Rounding, int] | Denial:
        """The leaky bucket the first switch's policer lets through, rounded for every port of
        `paths`: (rate, burst with the policer's tolerance, the source's burst, the rounding,
        the tolerance)."""
        roundings: list[Rounding] = []
        # The tests take the channel to be the leaky bucket its policer's worst case fits in.
        rate, burst = arrival_envelope(env)
        for model in (self._ports[pid] for p in paths for pid in p):
            rounded = round_envelope(model, env)
            if isinstance(rounded, Violation):
                return Denial(key, (rounded,))
            hop_rate, hop_burst, rounding = rounded
            roundings.append(rounding)
            rate, burst = max(rate, hop_rate), max(burst, hop_burst)
        rounding = merge_rounding(roundings, rate, burst, env)
        # The first switch's policer tolerates that switch's jitter, and lets through what the
        # tolerance allows: the burst the channel is admitted with grows by it.
        tolerance = self._ports[paths[0][0]].jitter_us
        source_burst = burst
        burst += tolerance_burst(env.policer, rate, tolerance)
        return rate, burst, source_burst, rounding, tolerance

    def _path_hops(
        self,
        key: ChannelKey,
        path: Sequence[PortId],
        env: ChannelEnvelope,
        rate: int,
        burst: int,
        source_burst: int,
    ) -> list[HopAllocation] | Denial:
        """Every hop's test and allocation along one path, the end-to-end bound checked."""
        models = [self._ports[pid] for pid in path]
        loads = [self._load_locked(pid) for pid in path]
        # Pass 1: each hop's bound with no slack; bursts grow by ρ·d over the upstream hops.
        first = self._walk(models, loads, env, rate, burst, source_burst, assigned=None)
        if isinstance(first, list):
            return Denial(key, tuple(first))
        if env.delay_bound_us <= 0:
            return first[0]
        bounds = first[1]
        jitter = sum(model.jitter_us for model in models)
        queues = sum(bounds)
        total = queues + jitter
        if total > env.delay_bound_us:
            return Denial(
                key,
                (
                    Violation(
                        DenialReason.END_TO_END_DELAY,
                        "end_to_end_delay",
                        None,
                        env.priority,
                        env.delay_bound_us,
                        total,
                        total - env.delay_bound_us,
                        "us",
                        "sum of the per-hop static-priority bounds and the switches' jitter along the path",
                    ),
                ),
            )
        # Pass 2 (Tenet-style local bounds): share the slack in proportion to each hop's bound so
        # later channels have room; fall back to no slack if the grown bursts do not fit.
        slack = env.delay_bound_us - total
        generous = [
            _capped(b + slack * b // max(queues, 1), model.budget_us(env.priority))
            for b, model in zip(bounds, models, strict=True)
        ]
        for assigned in (generous, bounds):
            result = self._walk(models, loads, env, rate, burst, source_burst, assigned=assigned)
            if not isinstance(result, list):
                return result[0]
        # Pass 2 with no slack repeats pass 1 exactly, so this is unreachable; say so loudly.
        raise LedgerError(f"slack assignment failed for {key}: {result}")

    def _walk(
        self,
        models: Sequence[PortModel],
        loads: Sequence[PortLoad],
        env: ChannelEnvelope,
        rate: int,
        burst: int,
        source_burst: int,
        assigned: Sequence[int] | None,
    ) -> tuple[list[HopAllocation], list[int]] | list[Violation]:
        """Each hop's test and bound; `burst` is what the first switch's policer lets through,
        `source_burst` what the source asked for (before the policer's tolerance: what a
        peak-policed class judges)."""
        hops: list[HopAllocation] = []
        bounds: list[int] = []
        violations: list[Violation] = []
        upstream_us = 0
        for index, (model, load) in enumerate(zip(models, loads, strict=True)):
            # What arrives at this queue: the policed envelope delayed by every hop upstream
            # (its queue's bound and its switch's jitter) and by this switch's own jitter before
            # the queue: σ + ρ·(d_upstream + J), network calculus's α(t + d).
            hop_burst = burst + ceil_div(rate * (upstream_us + model.jitter_us), MICROS)
            protected = assigned[index] if assigned is not None else model.budget_us(env.priority)
            # The tests see the channel in the port's units (packet slots on a packet-rate port).
            charged_rate, charged_burst = model.charge(rate, hop_burst, env.max_packet)
            cand = Candidate(
                env.priority, charged_rate, charged_burst, source_burst, env.max_packet, protected
            )
            after = with_candidate(load, cand)
            found = run_port_tests(model, after, cand)
            bound = level_delay_bound_us(model, after, env.priority)
            if bound is None:
                # Whatever the port's policy, a link cannot serve more than its line rate.
                found.append(_no_service(model, after, env.priority))
                bound = 0
            # Keep walking after a failure so the denial names every hop that fails.
            violations.extend(found)
            bounds.append(bound)
            hops.append(
                HopAllocation(
                    port=model.port,
                    priority=env.priority,
                    rate=rate,
                    burst=hop_burst,
                    max_packet=env.max_packet,
                    worst_case_delay_us=bound,
                    protected_delay_us=protected,
                    jitter_us=model.jitter_us,
                )
            )
            upstream_us += (protected if protected is not None else bound) + model.jitter_us
        if violations:
            return violations
        return hops, bounds

    def _validate(self, path: Sequence[PortId], env: ChannelEnvelope) -> Violation | None:
        problem = None
        if env.priority not in ADMITTED_PRIORITIES:
            problem = ("priority", env.priority, "admitted channels use priorities 1..6")
        elif (wrong := envelope_problem(env)) is not None:
            problem = wrong
        elif env.delay_bound_us < 0:
            problem = ("delay_bound_us", env.delay_bound_us, "delay bound must not be negative")
        elif not path:
            problem = ("path", 0, "empty path")
        elif len(set(path)) != len(path):
            problem = ("path", len(path), "path visits a port twice")
        else:
            unknown = [p for p in path if p not in self._ports]
            if unknown:
                problem = ("path", 0, f"unknown port {unknown[0]}")
        if problem is None:
            return None
        name, value, detail = problem
        return Violation(DenialReason.INVALID_REQUEST, f"invalid.{name}", None, None, 0, value, 0, "", detail)


def _invalid(name: str, value: int, detail: str) -> Violation:
    return Violation(DenialReason.INVALID_REQUEST, f"invalid.{name}", None, None, 0, value, 0, "", detail)


def _capped(value: int, cap: int | None) -> int:
    return value if cap is None else min(value, cap)


def _no_service(model: PortModel, load: PortLoad, priority: int) -> Violation:
    higher = sum(load.levels[p].rate for p in range(priority + 1, 7)) + model.control_rate
    return Violation(
        DenialReason.LINK_CAPACITY,
        "link_capacity",
        model.port,
        priority,
        model.line_rate,
        higher,
        higher - (model.line_rate - 1),
        "bytes/s",
        "higher levels would leave this level no service at all",
    )
