"""The chaos run's checker (`make chaos`, issue 37): what the history of a run must satisfy.

Pure: it reads what the run recorded (the clients' requests and answers, the store's journal,
the final state of the store and the switches) and says what is wrong, in words. The run itself
(workload, nemesis) lives beside it.

Capacity is checked from the store's journal, not only at the end: every admission the store
committed (a reservation, a tentative hold, a restoration's move) is replayed in commit order
against a fresh admission ledger built from the same configuration, and must pass the admission
tests against what was committed before it. A single primary passes by construction (it took the
same decision under the same lock); two controllers that both believed they were primary, and
both admitted, do not: the later commit finds the port already holding the other's channel.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from terrapin.admission import AdmissionLedger, Allocation, Denial
from terrapin.admission.ledger import LedgerError
from terrapin.admission.model import ChannelKey, PortModel
from terrapin.paths import ChannelSelector
from terrapin.store import DOWN
from terrapin.store.mirror import HOLD, MOVE, RELEASE, RESERVE
from terrapin.store.records import hold_from_json, reservation_from_json

if TYPE_CHECKING:
    from topo.chaos.actuators import Applied


@dataclass(frozen=True)
class JournalEntry:
    """One row of the store's journal (docs/deployment.md, "The store"), in commit order."""

    seq: int
    kind: str
    key: ChannelKey
    body: str
    written_at: float


@dataclass(frozen=True)
class Answer:
    """One client request of the workload and the answer it got."""

    client: str
    method: str
    path: str
    started_at: float
    ended_at: float
    status: int  # 0: no answer (the connection failed or timed out)
    retry_after: str | None = None
    error: str = ""  # the body's error or constraint, for the report


def replay_capacity(entries: Iterable[JournalEntry], ports: Iterable[PortModel]) -> list[str]:
    """Every committed admission that the admission tests refuse against what was committed
    before it (an over-admission), and every journal entry that cannot have happened (a channel
    admitted twice, released while absent), in words with its sequence number."""
    ledger = AdmissionLedger(ports, clock=lambda: 0.0)  # holds never expire here: the journal says
    held: set[ChannelKey] = set()
    down: set[ChannelKey] = set()  # moved down: holds nothing until moved up again
    problems: list[str] = []
    for entry in entries:
        key = entry.key
        if entry.kind == HOLD:
            allocation = hold_from_json(entry.body).allocation
            problems += _admit(ledger, entry, allocation)
            held.add(key)
        elif entry.kind == RESERVE:
            record = reservation_from_json(entry.body)
            if key in held:
                # The hold became the reservation: admitted when it was held.
                held.discard(key)
                ledger.release(key)
                _restore(ledger, entry, record.allocation, problems)
            else:
                problems += _admit(ledger, entry, record.allocation)
        elif entry.kind == MOVE:
            record = reservation_from_json(entry.body)
            if ledger.release(key) is None and record.state != DOWN and key not in down:
                problems.append(f"journal {entry.seq}: {key} moved, but it held nothing before")
            if record.state == DOWN:
                down.add(key)
            else:
                down.discard(key)
                problems += _admit(ledger, entry, record.allocation)
        elif entry.kind == RELEASE:
            held.discard(key)
            down.discard(key)
            ledger.release(key)
    return problems


def _admit(ledger: AdmissionLedger, entry: JournalEntry, allocation: Allocation) -> list[str]:
    """The admission test of `allocation`'s path(s) against the ledger, then the allocation as
    committed entered (whatever the test said: later entries are judged against what the store
    really held)."""
    paths = [[hop.port for hop in path] for path in allocation.paths]
    problems = []
    try:
        decision = ledger.evaluate(
            entry.key, paths[0], allocation.requested, second=paths[1] if len(paths) > 1 else None
        )
    except KeyError as exc:
        return [f"journal {entry.seq}: {entry.key} admitted on a port the configuration lacks ({exc})"]
    if isinstance(decision, Denial):
        problems.append(
            f"journal {entry.seq} ({entry.kind}): {entry.key} over-admitted: {decision.primary.describe()}"
        )
    _restore(ledger, entry, allocation, problems)
    return problems


def _restore(
    ledger: AdmissionLedger, entry: JournalEntry, allocation: Allocation, problems: list[str]
) -> None:
    try:
        ledger.restore(allocation)
    except LedgerError as exc:
        problems.append(f"journal {entry.seq} ({entry.kind}): {exc}")


# A REST answer the system may give under faults: success, a refusal of the request itself, or
# "not now" with when to come back. 409 is an admission decision or a conflict (4xx: the
# request's); 502/504 and a 503 without Retry-After are not allowed.
def answer_problems(answers: Iterable[Answer], unanswered_ok: bool = False) -> list[str]:
    """Every answer outside 2xx, 4xx, and 503 with Retry-After (and, unless `unanswered_ok`, every
    request that got none)."""
    problems = []
    for a in answers:
        allowed = 200 <= a.status < 300 or 400 <= a.status < 500
        allowed = allowed or (a.status == 503 and a.retry_after is not None)
        allowed = allowed or (a.status == 0 and unanswered_ok)
        if not allowed:
            what = f"{a.status}" + (" without Retry-After" if a.status == 503 else "")
            detail = f": {a.error}" if a.error else ""
            problems.append(f"{a.client} {a.method} {a.path} at {a.started_at:.3f}: {what}{detail}")
    return problems


def acknowledged_problems(
    created: Mapping[int, ChannelKey],
    closed: Iterable[int],
    stored: Mapping[int, str],
    on_switches: Mapping[int, Sequence[str]],
    expected_switches: Mapping[int, Sequence[str]],
) -> list[str]:
    """Every reservation answered 201 (`created`: REST id → key) and not answered closed must be
    in the store at the end (`stored`: id → state) and, unless down, on every switch of its
    path(s) (`on_switches`: id → the switches that hold it; `expected_switches`: id → the
    switches its stored allocation names)."""
    problems = []
    gone = set(closed)
    for rid, key in sorted(created.items()):
        if rid in gone:
            continue
        state = stored.get(rid)
        if state is None:
            problems.append(f"reservation {rid} ({key}) was answered 201 and is not in the store")
            continue
        if state == DOWN:
            continue
        missing = sorted(set(expected_switches.get(rid, ())) - set(on_switches.get(rid, ())))
        if missing:
            problems.append(
                f"reservation {rid} ({key}) is {state} in the store but missing on {', '.join(missing)}"
            )
    return problems


# A request nobody answered is allowed while its replica was down, give or take this much
# (the watcher looks every WATCH_EVERY_S, and a request may have been sent just before a kill).
DOWN_SLACK_S = 1.0


def during(answer: Answer, spans: Iterable[tuple[float, float]], slack_s: float = 0.0) -> bool:
    """Whether the request was under way during one of `spans` (Unix s), give or take `slack_s`."""
    return any(s - slack_s <= answer.ended_at and answer.started_at <= e + slack_s for s, e in spans)


def unanswered_problems(answers: list[Answer], down: dict[str, list[tuple[float, float]]]) -> list[str]:
    """A request with no answer is the client's to retry when its replica was down then; any
    other is a problem."""
    problems = []
    for a in answers:
        if a.status != 0:
            continue
        replica = a.path.rsplit("(", 1)[-1].rstrip(")")
        if not during(a, down.get(replica, []), DOWN_SLACK_S):
            problems.append(
                f"{a.client} {a.method} {a.path} at {a.started_at:.3f}: no answer from a replica"
                f" that was up ({a.error})"
            )
    return problems


def unavailability(applied: list[Applied], answers: list[Answer]) -> dict[str, list[float]]:
    """Per fault kind, the seconds from each fault to the first write accepted after it."""
    accepted = sorted(a.ended_at for a in answers if a.method == "POST" and a.status == 201)
    out: dict[str, list[float]] = defaultdict(list)
    for fault in applied:
        if fault.error:
            continue
        after = next((t for t in accepted if t >= fault.began), None)
        if after is not None:
            out[fault.fault.kind].append(round(after - fault.began, 3))
    return dict(out)


def state_problems(stored: list[dict[str, Any]], switches: dict[str, set[ChannelSelector]]) -> list[str]:
    """The switches must hold exactly the store's channels (a down one holds nothing)."""
    want: dict[str, set[ChannelSelector]] = {name: set() for name in switches}
    for r in stored:
        if r["state"] == "down":
            continue
        selector = ChannelSelector(r["src"], r["dst"], int(r["protocol"]), int(r["flow_key"]))
        for hop in r["allocation"]["hops"]:
            want.setdefault(hop["switch"], set()).add(selector)
    problems = []
    for name, have in sorted(switches.items()):
        missing, extra = want[name] - have, have - want[name]
        if missing:
            problems.append(
                f"{name} lacks {len(missing)} of the store's channels: {min(missing, key=str)}, ..."
            )
        if extra:
            problems.append(f"{name} holds {len(extra)} channels the store lacks: {min(extra, key=str)}, ...")
    return problems
