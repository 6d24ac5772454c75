"""The chaos run's nemesis plan (topo/chaos/nemesis.py): seeded and replayable, one fault at a
time (or a pair), every fault healed before the end, every kind drawn over a long run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.chaos.nemesis import KINDS, Targets, kinds_of, schedule

TARGETS = Targets(
    replicas=("c0", "c1"), switches=("ucb", "ucsb", "ucla", "ucsd"), trunks=("ucb-ucsd", "ucb-ucsb")
)


def test_the_same_seed_gives_the_same_faults() -> None:
    assert schedule(7, 300, TARGETS) == schedule(7, 300, TARGETS)
    assert schedule(7, 300, TARGETS) != schedule(8, 300, TARGETS)


def test_thirty_minutes_draw_every_kind_and_enough_faults() -> None:
    """The issue's bar for a 30-minute run: at least 40 faults of at least 6 kinds."""
    faults = schedule(1, 1800, TARGETS)
    counts = kinds_of(faults)
    assert len(faults) >= 40 and set(counts) == set(KINDS)


@given(seed=st.integers(0, 2**32), duration=st.floats(20, 900), gap=st.floats(1, 20))
@settings(max_examples=200, deadline=None)
def test_faults_fire_in_order_one_at_a_time_or_in_pairs_and_heal_before_the_end(
    seed: int, duration: float, gap: float
) -> None:
    faults = schedule(seed, duration, TARGETS, mean_gap_s=gap, settle_s=3.0)
    assert [f.at for f in faults] == sorted(f.at for f in faults)
    for f in faults:
        assert f.at >= 3.0 and f.healed_at <= duration - 3.0
        assert f.heal_after == 0 or KINDS[f.kind][1] <= f.heal_after <= KINDS[f.kind][2]
    # never three at once: at any fault's start at most one other is still on
    for f in faults:
        on = [g for g in faults if g is not f and g.at <= f.at < max(g.healed_at, g.at + 1.0)]
        assert len(on) <= 1


def test_a_subset_of_kinds_and_unknown_kinds() -> None:
    faults = schedule(3, 600, TARGETS, kinds=("cut_trunk", "kill_store"))
    assert set(kinds_of(faults)) == {"cut_trunk", "kill_store"}
    assert all(f.target in TARGETS.trunks for f in faults if f.kind == "cut_trunk")
    with pytest.raises(ValueError, match="unknown fault kinds nap"):
        schedule(3, 600, TARGETS, kinds=("nap",))
    with pytest.raises(ValueError, match="no"):
        schedule(3, 600, Targets(("c0",), (), ()), kinds=("kill_backup",))
