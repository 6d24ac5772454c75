"""Property tests: no sequence or interleaving of requests and releases over-admits.

The invariants are recomputed here from the ledger's channel list with independent code
(plain loops and Fractions), not with the functions the ledger itself uses.
"""

from __future__ import annotations

import random
import threading
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from terrapin.admission import (
    AdmissionLedger,
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    PortId,
    PortModel,
    ServiceClass,
)
from terrapin.admission.model import ALL_TESTS

PORTS = [PortId("a", 1), PortId("b", 1), PortId("c", 1)]


def make_ports(
    line: int, cap: int, budget: int | None, floor: int, tests: tuple[str, ...] = ALL_TESTS
) -> list[PortModel]:
    return [
        PortModel(
            port=pid,
            tests=tests,
            line_rate=line,
            queue_capacity=cap,
            largest_packet=1500,
            reservable_rate=line * 9 // 10,
            level_delay_budget_us=((6, budget), (5, budget * 2)) if budget else (),
            classes=(
                ServiceClass("urgent", frozenset({6}), Fraction(1, 10), peak_policed=False),
                ServiceClass("rt", frozenset({1, 2, 3, 4, 5}), Fraction(7, 10)),
            ),
            best_effort_floor=Fraction(floor, 100),
            allocation_interval_us=10_000,
            per_channel_overhead_us=10,
            control_rate=1000,
            control_burst=200,
        )
        for pid in PORTS
    ]


def check_invariants(ledger: AdmissionLedger) -> None:
    entries, loads = ledger.snapshot()
    channels = [alloc for alloc, _state in entries]
    for pid, model in ledger.ports.items():
        hops = [h for a in channels for h in a.hops if h.port == pid]
        line = model.line_rate
        total_rate = sum(h.rate for h in hops)
        tests = set(model.tests)
        # rate + buffer (seed 000)
        if "rate_buffer" in tests:
            assert total_rate < model.reservable
            for level in range(1, 7):
                assert sum(h.burst for h in hops if h.priority == level) < model.queue_capacity
        # link capacity and static-priority bounds (seeds 001/004)
        if "static_priority" in tests:
            assert total_rate + model.control_rate < line
        for level in range(1, 7) if "static_priority" in tests else ():
            at_level = [h for h in hops if h.priority == level]
            if not at_level:
                continue
            burst = sum(h.burst for h in hops if h.priority >= level) + model.control_burst
            higher = sum(h.rate for h in hops if h.priority > level) + model.control_rate
            lower = max([model.lower_packet] + [h.max_packet for h in hops if h.priority < level])
            bound = Fraction((burst + lower) * 1_000_000, line - higher)
            promises = [h.protected_delay_us for h in at_level if h.protected_delay_us]
            budget = model.budget_us(level)
            if budget is not None:
                promises.append(budget)
            for promise in promises:
                assert bound <= promise, (pid, level, bound, promise)
        # class shares (seed 003)
        for sc in model.classes if "class_shares" in tests else ():
            assert sum(h.rate for h in hops if h.priority in sc.priorities) <= sc.share * line
        # best-effort floor (seed 002), in time per allocation interval
        interval = model.allocation_interval_us
        used = Fraction((total_rate + model.control_rate) * interval, line) + len(hops) * (
            model.per_channel_overhead_us
        )
        if "best_effort_floor" in tests:
            assert used + model.best_effort_floor * interval <= interval
    # the ledger's running aggregates equal a recomputation
    for pid in ledger.ports:
        load = loads[pid]
        for level in range(1, 7):
            hops = [h for a in channels for h in a.hops if h.port == pid and h.priority == level]
            assert load.levels[level].rate == sum(h.rate for h in hops)
            assert load.levels[level].burst == sum(h.burst for h in hops)
            assert load.levels[level].channels == len(hops)


envelopes = st.builds(
    ChannelEnvelope,
    priority=st.integers(1, 6),
    rate=st.integers(1_000, 400_000),
    burst=st.integers(1500, 40_000),
    max_packet=st.integers(64, 1500),
    delay_bound_us=st.one_of(st.just(0), st.integers(1_000, 200_000)),
)
# Small channels admitted until the first denial drive every constraint to its boundary.
# Round multiples make sums land exactly on the limits, where strict and non-strict differ.
small_envelopes = st.builds(
    ChannelEnvelope,
    priority=st.integers(1, 6),
    rate=st.integers(1, 20).map(lambda n: n * 5_000),
    burst=st.integers(1, 3).map(lambda n: n * 1500),
    max_packet=st.sampled_from([500, 1000, 1500]),
    delay_bound_us=st.one_of(st.just(0), st.integers(5_000, 200_000)),
)
paths = st.lists(st.sampled_from(PORTS), min_size=1, max_size=3, unique=True)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), envelopes, paths, st.booleans()),
        st.tuples(st.just("fill"), small_envelopes, paths, st.booleans()),
        st.tuples(st.just("release"), st.integers(0, 50)),
        st.tuples(st.just("commit"), st.integers(0, 50)),
        st.tuples(st.just("tick"), st.floats(0.1, 3.0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    ops=ops,
    line=st.integers(10, 60).map(lambda n: n * 50_000),
    cap=st.integers(10, 200).map(lambda n: n * 1500),
    budget=st.one_of(st.none(), st.integers(5_000, 100_000)),
    floor=st.integers(0, 50),
    # One test alone is drawn often, so that its own limit is the one that binds.
    tests=st.one_of(
        st.sampled_from([(t,) for t in ALL_TESTS]),
        st.lists(st.sampled_from(ALL_TESTS), unique=True).map(tuple),
    ),
)
def test_no_sequence_over_admits(
    ops: list[tuple[object, ...]],
    line: int,
    cap: int,
    budget: int | None,
    floor: int,
    tests: tuple[str, ...],
) -> None:
    now = [0.0]
    ports = make_ports(line, cap, budget, floor, tests)
    ledger = AdmissionLedger(ports, clock=lambda: now[0])
    keys: list[ChannelKey] = []
    for n, op in enumerate(ops):
        if op[0] in ("admit", "fill"):
            _, env, path, tentative = op
            assert isinstance(env, ChannelEnvelope)
            for m in range(300 if op[0] == "fill" else 1):
                k = ChannelKey("10.0.0.1", n * 1000 + m)
                decision = ledger.admit(
                    k,
                    path,
                    env,
                    hold_seconds=2.0 if tentative else None,  # type: ignore[arg-type]
                )
                if not isinstance(decision, Allocation):
                    break
                keys.append(k)
                assert decision.rate >= env.rate and decision.burst >= env.burst
                if env.delay_bound_us:
                    assert decision.protected_delay_us is not None
                    assert decision.protected_delay_us <= env.delay_bound_us
        elif op[0] in ("release", "commit") and keys:
            k = keys[int(op[1]) % len(keys)]  # type: ignore[call-overload]
            if op[0] == "release":
                ledger.release(k)
            elif ledger.get(k) is not None:
                ledger.commit(k)
        elif op[0] == "tick":
            now[0] += float(op[1])  # type: ignore[arg-type]
            ledger.expire()
        check_invariants(ledger)


def test_no_interleaving_of_threads_over_admits() -> None:
    """Eight threads race to admit and release on shared ports while a ninth checks."""
    ledger = AdmissionLedger(make_ports(1_000_000, 60_000, 30_000, 10))
    stop = threading.Event()
    errors: list[BaseException] = []
    admitted_count = [0]
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        mine: list[ChannelKey] = []
        try:
            for n in range(400):
                if mine and rng.random() < 0.4:
                    ledger.release(mine.pop(rng.randrange(len(mine))))
                    continue
                env = ChannelEnvelope(
                    priority=rng.randint(1, 6),
                    rate=rng.randint(5_000, 120_000),
                    burst=rng.randint(1500, 12_000),
                    max_packet=rng.randint(64, 1500),
                    delay_bound_us=rng.choice([0, 0, rng.randint(5_000, 80_000)]),
                )
                path = rng.sample(PORTS, rng.randint(1, 3))
                k = ChannelKey(f"10.0.{seed}.1", n)
                if isinstance(ledger.admit(k, path, env), Allocation):
                    mine.append(k)
                    with lock:
                        admitted_count[0] += 1
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    def checker() -> None:
        try:
            while not stop.is_set():
                check_invariants(ledger)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    watch = threading.Thread(target=checker)
    watch.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watch.join()
    assert not errors, errors[0]
    check_invariants(ledger)
    assert admitted_count[0] > 50  # the race really exercised admissions


@settings(max_examples=200, deadline=None)
@given(
    test=st.sampled_from(ALL_TESTS),
    env=small_envelopes,
    path=paths,
    line=st.integers(10, 60).map(lambda n: n * 50_000),
    cap=st.integers(10, 200).map(lambda n: n * 1500),
    floor=st.integers(0, 50),
)
def test_filling_one_test_to_its_limit_never_crosses_it(
    test: str, env: ChannelEnvelope, path: list[PortId], line: int, cap: int, floor: int
) -> None:
    ledger = AdmissionLedger(make_ports(line, cap, 20_000, floor, (test,)))
    for m in range(2000):
        if not isinstance(ledger.admit(ChannelKey("10.0.0.9", m), path, env), Allocation):
            break
        check_invariants(ledger)
    else:
        raise AssertionError("never denied")
