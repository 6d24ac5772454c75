"""The chaos run's nemesis plan (`make chaos`, issue 37): which fault, when, for how long.

Pure: a seeded schedule, so a run that finds a failure can be replayed fault for fault (its
seed, printed in the report, and `FAULTS=` reproduce it). One fault at a time, at random
intervals, each healed after a random duration; sometimes a second fault of another kind joins
the first while it lasts (the combinations nobody scripts: a switch restarting during a
restoration, the database restarting during a failover).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

# Every kind of fault, with what it hits and how long it lasts (seconds, drawn uniformly).
# A pause outlasts the replicas' lease (1.5 s by default) so that the paused one wakes up deposed.
KINDS: dict[str, tuple[str, float, float]] = {
    "kill_primary": ("the primary controller, kill -9 (its supervisor restarts it)", 0.0, 0.0),
    "kill_backup": ("the backup controller, kill -9", 0.0, 0.0),
    "pause_primary": ("the primary controller, SIGSTOP then SIGCONT", 2.0, 6.0),
    "pause_backup": ("the backup controller, SIGSTOP then SIGCONT", 2.0, 6.0),
    "kill_switch": ("a switch, kill -9, restarted with its interfaces", 1.0, 4.0),
    "kill_store": ("PostgreSQL, kill -9, restarted", 1.0, 4.0),
    "partition_store": ("a replica cut off from PostgreSQL", 2.0, 6.0),
    "partition_switches": ("a replica cut off from the switches", 2.0, 6.0),
    "cut_trunk": ("a trunk of the testbed, both ends down", 1.0, 5.0),
}


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # which replica, switch or trunk ("" for the store)
    at: float  # seconds from the start of the run
    heal_after: float  # seconds; 0: healed by itself (a kill is restarted by its supervisor)

    @property
    def healed_at(self) -> float:
        return self.at + self.heal_after

    def describe(self) -> str:
        target = f" {self.target}" if self.target else ""
        lasting = f" for {self.heal_after:.1f} s" if self.heal_after else ""
        return f"{self.at:7.1f} s  {self.kind}{target}{lasting}"


@dataclass(frozen=True)
class Targets:
    """What the faults can hit in this run's testbed."""

    replicas: Sequence[str]  # e.g. ("c0", "c1"); which is primary is decided when the fault fires
    switches: Sequence[str]
    trunks: Sequence[str]  # "a-b"


def schedule(
    seed: int,
    duration_s: float,
    targets: Targets,
    kinds: Sequence[str] = tuple(KINDS),
    mean_gap_s: float = 8.0,
    settle_s: float = 3.0,
    combine: float = 0.2,
    recover_s: float = 2.0,
) -> list[Fault]:
    """The faults of a run of `duration_s`, in firing order: after `settle_s` of calm, one every
    `recover_s` plus an exponentially distributed gap (mean `mean_gap_s`) after the previous one
    healed (a killed process takes its supervisor's restart to come back: a fault right after it
    would be a combination), each healed before the run's last `settle_s` (the checker's final
    state is taken after the last heal); with probability `combine` a second fault of another
    kind fires while the first lasts."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown fault kinds {', '.join(unknown)}; known: {', '.join(KINDS)}")
    usable = [k for k in kinds if _target_choices(k, targets)]
    if not usable:
        raise ValueError("none of the chosen fault kinds has a target in this testbed")
    rng = random.Random(seed)
    faults: list[Fault] = []
    now = settle_s
    end = duration_s - settle_s
    while True:
        now += recover_s + rng.expovariate(1 / mean_gap_s)
        first = _draw(rng, rng.choice(usable), targets, now)
        if first.healed_at > end:
            break
        faults.append(first)
        healed = first.healed_at
        others = [k for k in usable if k != first.kind]
        if others and rng.random() < combine:
            # joins within the first's duration (or a second after it, for an instant fault)
            at = now + rng.uniform(0.0, max(first.heal_after, 1.0))
            second = _draw(rng, rng.choice(others), targets, at)
            if second.healed_at <= end:
                faults.append(second)
                healed = max(healed, second.healed_at)
        now = healed
    return faults


def _draw(rng: random.Random, kind: str, targets: Targets, at: float) -> Fault:
    _, shortest, longest = KINDS[kind]
    return Fault(
        kind, rng.choice(_target_choices(kind, targets)), at, round(rng.uniform(shortest, longest), 2)
    )


def _target_choices(kind: str, targets: Targets) -> list[str]:
    if kind in ("kill_primary", "pause_primary", "kill_backup", "pause_backup"):
        return ["primary" if "primary" in kind else "backup"] if len(targets.replicas) > 1 else []
    if kind in ("partition_store", "partition_switches"):
        return list(targets.replicas)
    if kind == "kill_switch":
        return list(targets.switches)
    if kind == "cut_trunk":
        return list(targets.trunks)
    return [""]  # the store


def kinds_of(faults: Sequence[Fault]) -> dict[str, int]:
    """How many faults of each kind, for the report."""
    counts: dict[str, int] = {}
    for fault in faults:
        counts[fault.kind] = counts.get(fault.kind, 0) + 1
    return counts
