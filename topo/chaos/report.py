"""The chaos run's verdict and report (`make chaos`, issue 37): every check of checker.py and
traffic.py over what the run recorded, chaos.json (with the command that reproduces it),
history.json (every request and answer) and the timeline plot, written beside the experiments'
results (build/results/chaos/<switch>/)."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from terrapin.paths import ChannelSelector
from topo.chaos import nemesis
from topo.chaos.actuators import Applied
from topo.chaos.checker import (
    Answer,
    JournalEntry,
    acknowledged_problems,
    answer_problems,
    during,
    replay_capacity,
    state_problems,
    unanswered_problems,
    unavailability,
)
from topo.chaos.traffic import Judged
from topo.chaos.workload import History


@dataclass
class Outcome:
    """What a run recorded, for the checks."""

    schedule: list[nemesis.Fault]
    applied: list[Applied]
    history: History
    journal: dict[int, JournalEntry]
    down: dict[str, list[tuple[float, float]]]  # replica → spans its /health got no answer
    stored: list[dict[str, Any]]  # GET /reservations at the end
    switches: dict[str, set[ChannelSelector]]  # each switch's channels at the end
    traffic: list[Judged]
    settled_s: float
    deposed: list[str]  # writes under an earlier term that a switch or the store did not refuse
    # each terrapin-switch's longest waits since it last started (topo/p4switch.py waits_summary):
    # where a late packet with no stall of the machine waited
    switch_waits: dict[str, str] = field(default_factory=dict)


def write(
    args: argparse.Namespace, out: Path, started: float, t0: float, outcome: Outcome, ports: Any
) -> int:
    """Judges the run (checker.py, traffic.py), writes chaos.json, history.json and the timeline
    plot into `out`, prints the summary; the exit code (1 if anything is wrong)."""
    schedule, applied, history = outcome.schedule, outcome.applied, outcome.history
    stored, switches, settled_s = outcome.stored, outcome.switches, outcome.settled_s
    journal = outcome.journal
    answers: list[Answer] = history.answers
    down = outcome.down
    stored_state = {int(r["id"]): str(r["state"]) for r in stored}
    by_id = {int(r["id"]): r for r in stored}
    expected = {rid: [h["switch"] for h in r["allocation"]["hops"]] for rid, r in by_id.items()}
    on_switches = {
        rid: [
            name
            for name, have in switches.items()
            if ChannelSelector(r["src"], r["dst"], int(r["protocol"]), int(r["flow_key"])) in have
        ]
        for rid, r in by_id.items()
    }
    checks = {
        "answers": answer_problems([a for a in answers if not outcome_unknown(a)], unanswered_ok=True)
        + unanswered_problems([a for a in answers if a.client != "in-band"], down)
        + unknown_outcome_problems([a for a in answers if outcome_unknown(a)], applied, down)
        + in_band_timeouts([a for a in answers if a.client == "in-band"], applied, down),
        "acknowledged": acknowledged_problems(
            history.created, history.closed | history.maybe_closed, stored_state, on_switches, expected
        )
        + [
            f"reservation {rid} was answered closed and is still in the store"
            for rid in sorted(history.closed & set(stored_state))
        ]
        + [
            f"reservation {rid} was answered 201, never closed, and a DELETE found it gone"
            for rid in sorted(history.vanished)
        ]
        + in_band_problems(history, stored),
        "capacity": replay_capacity([journal[s] for s in sorted(journal)], ports),
        "switches_equal_store": state_problems(stored, switches),
        "deposed_writes_refused": outcome.deposed,
        "traffic": [p for j in outcome.traffic for p in j.problems],
    }
    problems = [p for found in checks.values() for p in found]
    requests = Counter(f"{a.method} {a.status}" for a in answers)
    record = {
        "command": "make chaos "
        + " ".join(
            f"{k.upper()}={v}"
            for k, v in (
                ("duration", int(args.duration)),
                ("seed", args.seed),
                ("switch", args.switch),
                ("topo", args.topo),
            )
        ),
        "seed": args.seed,
        "duration_s": args.duration,
        "elapsed_s": round(time.time() - started, 1),
        "faults_planned": len(schedule),
        "faults_by_kind": dict(Counter(a.fault.kind for a in applied if not a.error)),
        "faults_not_applied": [f"{a.fault.describe().strip()}: {a.error}" for a in applied if a.error],
        "requests": dict(sorted(requests.items())),
        "granted": len(history.created),
        "closed": len(history.closed),
        "unavailability_s": unavailability(applied, answers),
        "settled_after_s": round(settled_s, 2),
        "journal_entries": len(journal),
        "stored_at_end": len(stored),
        # channels that lost their path and found none that admits them (others took the capacity)
        "down_at_end": sum(1 for r in stored if r["state"] == "down"),
        "traffic": [asdict(j) for j in outcome.traffic],
        "switch_waits": outcome.switch_waits,
        "checks": checks,
        "verdict": "pass" if not problems else "FAIL",
        "faults": [
            {
                **asdict(a.fault),
                "target": a.target,
                "began": a.began - t0,
                "ended": None if a.ended is None else a.ended - t0,
                "error": a.error,
            }
            for a in applied
        ],
    }
    (out / "chaos.json").write_text(json.dumps(record, indent=1, default=str))
    (out / "history.json").write_text(json.dumps([asdict(a) for a in answers]))
    (out / "journal.json").write_text(json.dumps([asdict(journal[s]) for s in sorted(journal)], default=str))
    plot(out / "chaos-timeline.png", t0, applied, answers, down)
    print(f"faults by kind: {record['faults_by_kind']}")
    print(
        f"requests: {record['requests']} ({record['granted']} granted, {record['closed']} closed;"
        f" {record['stored_at_end']} stored at the end, {record['down_at_end']} of them down)"
    )
    for kind, waits in sorted(record["unavailability_s"].items()):
        print(
            f"unavailability after {kind}: max {max(waits):.2f} s,"
            f" median {sorted(waits)[len(waits) // 2]:.2f} s ({len(waits)}x)"
        )
    for name, found in checks.items():
        print(f"check {name}: {'ok' if not found else f'{len(found)} problem(s)'}")
        for p in found[:10]:
            print(f"  {p}")
    for j in outcome.traffic:
        outages = ", ".join(f"{k} {max(v):.2f} s" for k, v in sorted(j.outages_s.items())) or "none"
        print(
            f"traffic {j.name}: {j.received}/{j.sent} received, bound {j.bound_ms:.2f} ms; outside its fault"
            f" windows {j.lost_outside} lost, {j.late_outside} late; longest outage by fault: {outages}"
        )
    for name, waits in sorted(outcome.switch_waits.items()):
        print(f"switch waits {name}: {waits}")
    print(f"report: {out / 'chaos.json'}, plot: {out / 'chaos-timeline.png'}")
    print(f"chaos: {record['verdict']}")
    return 0 if not problems else 1


# How long after a fault (or after it healed) the system may still not answer in band: the new
# primary's takeover and reconciliation, or the switch's return and refill.
IN_BAND_RECOVERY_S = 10.0


def in_band_timeouts(
    answers: list[Answer], applied: list[Applied], down: dict[str, list[tuple[float, float]]]
) -> list[str]:
    """The protocol has no "not now": an initiator retransmits and gives up (TIMEOUT). That is
    allowed while a fault, or a replica that does not answer, may explain it (give or take
    IN_BAND_RECOVERY_S), and a problem when nothing was wrong."""
    spans = fault_spans(applied) + [(s, e + IN_BAND_RECOVERY_S) for found in down.values() for s, e in found]
    return [
        f"{a.method} {a.path} at {a.started_at:.3f}: no answer in band while nothing was wrong"
        for a in answers
        if a.status == 0 and not during(a, spans)
    ]


def fault_spans(applied: list[Applied], kinds: tuple[str, ...] | None = None) -> list[tuple[float, float]]:
    """When each applied fault (of `kinds`, or any) was under way, and IN_BAND_RECOVERY_S after."""
    return [
        (a.began, (a.ended or a.began) + IN_BAND_RECOVERY_S)
        for a in applied
        if not a.error and (kinds is None or a.fault.kind in kinds)
    ]


def outcome_unknown(answer: Answer) -> bool:
    return answer.status == 504 and answer.error == "outcome unknown"


def unknown_outcome_problems(
    answers: list[Answer], applied: list[Applied], down: dict[str, list[tuple[float, float]]]
) -> list[str]:
    """504 `outcome unknown` is the one answer outside the issue's list the deployment gives, and
    only where nobody can know (docs/deployment.md): a backup whose forwarded write reached a
    primary that died (or stopped) before answering, or a primary whose store went away at the
    commit. It is allowed where such a fault was under way (a replica not answering, the store
    killed or cut off), and judged like no answer: the checks of what was acknowledged leave it
    out. Anywhere else it is a problem."""
    spans = [(s, e) for found in down.values() for s, e in found]
    spans += fault_spans(applied, ("kill_store", "partition_store", "kill_primary", "pause_primary"))
    return [
        f"{a.client} {a.method} {a.path} at {a.started_at:.3f}: 504 outcome unknown while nothing was wrong"
        for a in answers
        if not during(a, spans, 1.0)
    ]


def in_band_problems(history: History, stored: list[dict[str, Any]]) -> list[str]:
    """The in-band initiator's view: a channel it heard accepted and did not close is in the
    store (so, with switch = store, on its switches); one it heard closed is not."""
    keys = {(str(r["initiator"]), int(r["context"])) for r in stored}
    kept = history.accepted_in_band - history.closed_in_band - history.maybe_closed_in_band
    return [
        f"channel {k} was accepted in band, never closed, and is not in the store"
        for k in sorted(kept, key=str)
        if (k.initiator, k.context) not in keys
    ] + [
        f"channel {k} was closed in band and is still in the store"
        for k in sorted(history.closed_in_band, key=str)
        if (k.initiator, k.context) in keys
    ]


def plot(
    path: Path,
    t0: float,
    applied: list[Applied],
    answers: list[Answer],
    down: dict[str, list[tuple[float, float]]],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({a.fault.kind for a in applied})
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(13, 6), sharex=True, gridspec_kw={"height_ratios": [1, 1.4]}
    )
    for row, kind in enumerate(kinds):
        for a in applied:
            if a.fault.kind == kind and not a.error:
                end = (a.ended or a.began + 0.5) - t0
                top.barh(row, max(0.3, end - (a.began - t0)), left=a.began - t0, color="tab:red", alpha=0.7)
    for replica, spans in sorted(down.items()):
        row = len(kinds) + sorted(down).index(replica)
        for s, e in spans:
            top.barh(row, e - s, left=s - t0, color="0.4")
    top.set_yticks(
        range(len(kinds) + len(down)), [*kinds, *(f"{r} unanswered" for r in sorted(down))], fontsize=8
    )
    top.set_title("faults (red) and replicas not answering /health (grey)")
    colours = {2: "tab:green", 4: "tab:orange", 5: "tab:purple", 0: "black"}
    for status_class, colour in colours.items():
        xs = [a.started_at - t0 for a in answers if a.status // 100 == status_class]
        ys = [a.ended_at - a.started_at for a in answers if a.status // 100 == status_class]
        label = {2: "2xx", 4: "4xx", 5: "5xx (503 + Retry-After)", 0: "no answer"}[status_class]
        bottom.scatter(xs, ys, s=6, color=colour, label=f"{label} ({len(xs)})")
    bottom.set_yscale("log")
    bottom.set_ylabel("answer time (s)")
    bottom.set_xlabel("seconds from the start of the load")
    bottom.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
