"""The chaos run's measured traffic (`make chaos`, issue 37): a few admitted channels carrying
packets for the whole run, each judged at its receiver against the delay bound it was admitted
with, except while a fault breaks every path it has.

The channels are admitted before any fault and above the clients' priorities, so nothing the
clients are granted later changes their bounds. One is protected 1+1 (issue 35): a fault on one
of its paths (a trunk cut, a transit switch killed) must cost it nothing. A fault of the control
plane (a controller killed or paused, the database killed) breaks no path: traffic must meet its
bound through all of them.

A fault window of a channel starts when a fault leaves it no whole path (less the channel's
bound: a packet sent that much earlier may still be inside the network) and ends when its
packets get through again (the first of RESUMED_AFTER in a row that arrived: the outage,
reported per fault kind); packets sent inside are neither lost nor late by this check. Which
paths a channel had when is the store's journal's (every move a restoration wrote). Outside the
windows every packet must arrive, and within its bound save what the machine's own stalls
account for (topo/stalls.py): those while it was in flight, and those up to its bound before it
was sent, whose held packets it may wait behind.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.chaos.actuators import Applied
from topo.chaos.checker import JournalEntry
from topo.experiment import FlowRun, PacketTiming, Traffic, channel, evenly, flow, read_flow_logs, reserve
from topo.network import RunningNetwork
from topo.stalls import Stalls

PACKET = 200  # IPv4 bytes
RATE = 8_000  # B/s: 40 packets a second
PRIORITY = 6  # above the clients' channels (3-5)
FIRST_PORT = 5300


@dataclass(frozen=True)
class Measured:
    name: str
    source: str
    sink: str
    protected: bool


CHANNELS = (
    Measured("plain", "faith", "paola", protected=False),
    Measured("protected", "propaganda", "venezia", protected=True),
    Measured("transit", "blizzard", "grayling", protected=False),
)


# Which allocation a channel's packets follow at a moment is known from the store's journal
# only within this much: the store is written before the switches (a restoration's store
# transaction, then its writes), and the old path carries packets until they are rewritten.
PATH_SLACK_S = 2.0


@dataclass
class Channel:
    spec: Measured
    port: int
    reservation: dict[str, Any]
    # every allocation it had, from when (Unix s): its path, and a protected channel's second
    allocations: list[tuple[float, list[list[str]]]] = field(default_factory=list)
    # when (Unix s) the store marked it down (no path admits it: nothing promised) and when it
    # was active again (inf: never)
    down_spans: list[tuple[float, float]] = field(default_factory=list)

    @property
    def bound_ms(self) -> float:
        return float(self.reservation["allocation"]["worst_case_delay_us"]) / 1000

    def see(self, body: dict[str, Any], at: float) -> None:
        """An allocation written at `at` (a restoration moves the channel), and its state."""
        state = body.get("state")
        if state == "down" and not (self.down_spans and self.down_spans[-1][1] == float("inf")):
            self.down_spans.append((at, float("inf")))
        elif state == "active" and self.down_spans and self.down_spans[-1][1] == float("inf"):
            self.down_spans[-1] = (self.down_spans[-1][0], at)
        allocation = body["allocation"]
        paths = []
        for hops in (allocation["hops"], allocation.get("second_path") or []):
            path = [h["switch"] if "switch" in h else h["port"][0] for h in hops]
            if path:
                paths.append(path)
        if not self.allocations or self.allocations[-1][1] != paths:
            self.allocations.append((at, paths))

    def follow(self, journal: Iterable[JournalEntry]) -> None:
        """Every allocation the store's journal wrote for this channel, in commit order."""
        rid = int(self.reservation["id"])
        for entry in journal:
            if entry.kind not in ("reserve", "move") or not entry.body:
                continue
            body = json.loads(entry.body)
            if body.get("reservation_id") == rid and body.get("allocation"):
                self.see(body, entry.written_at)

    def paths_during(self, start: float, end: float) -> list[list[list[str]]]:
        """The allocations (each its paths) in force at some moment of [start, end]."""
        found = []
        for i, (since, paths) in enumerate(self.allocations):
            until = self.allocations[i + 1][0] if i + 1 < len(self.allocations) else float("inf")
            if since <= end and until >= start:
                found.append(paths)
        return found


def admit(run: RunningNetwork, plan_hosts: Sequence[str]) -> list[Channel]:
    """The measured channels of CHANNELS whose hosts the testbed has, admitted through REST."""
    made = []
    for i, spec in enumerate(CHANNELS):
        if spec.source not in plan_hosts or spec.sink not in plan_hosts:
            continue
        port = FIRST_PORT + i
        body = channel(run, spec.source, spec.sink, port, PRIORITY, PACKET, rate=RATE, burst=4 * PACKET)
        if spec.protected:
            body["protection"] = "1+1"
        granted = reserve(run, body)
        c = Channel(spec, port, granted)
        c.see(granted, time.time())
        made.append(c)
    return made


def start(traffic: Traffic, channels: Sequence[Channel], seconds: float) -> dict[str, tuple[Path, Path]]:
    """Receivers and senders for `seconds`; each channel's (sender log, receiver log)."""
    logs = {}
    for c in channels:
        received = traffic.receiver(c.spec.sink, [c.port], name=f"{c.spec.name}-receiver")
        sent = traffic.flows(
            c.spec.source,
            c.spec.sink,
            [flow(c.port, PACKET, evenly(RATE, PACKET, seconds))],
            name=c.spec.name,
        )
        logs[c.spec.name] = (sent, received)
    return logs


def broken(path: Sequence[str], fault: Applied) -> bool:
    kind, target = fault.fault.kind, fault.target
    if kind == "kill_switch":
        return target in path
    if kind == "cut_trunk":
        a, b = target.split("-")
        return any({x, y} == {a, b} for x, y in itertools.pairwise(path))
    return False  # the control plane and the store carry no packet


@dataclass
class Judged:
    name: str
    sent: int
    received: int
    bound_ms: float
    lost_outside: int
    late_outside: int
    outages_s: dict[str, list[float]]  # by fault kind: from the fault to the first packet through again
    problems: list[str]
    windows: list[tuple[float, float, str]] = field(default_factory=list)  # Unix s: start, end, kind


# A killed switch is started again by the supervisor and refilled by the controller; until then
# (at most this long, for deciding which faults overlap) the paths through it are broken.
KILLED_SWITCH_BACK_S = 20.0


def active_until(fault: Applied) -> float:
    if fault.ended is not None:
        return fault.ended
    return fault.began + (KILLED_SWITCH_BACK_S if fault.fault.kind == "kill_switch" else 0.0)


def leaves_no_path(c: Channel, faults: Sequence[Applied], at: float) -> bool:
    """Whether `faults` together break every path of an allocation the channel may have had at
    `at`: both of a protected channel's, or the one of another."""
    for paths in c.paths_during(at - PATH_SLACK_S, at):
        if c.spec.protected and len(paths) > 1:
            if all(any(broken(p, f) for f in faults) for p in paths):
                return True
        elif any(broken(p, f) for p in paths for f in faults):
            return True
    return False


# A window ends with the first packet sent after the fault that arrived and the next ones too:
# a packet or two sent in the moment the fault took to bite (an interface going down, a
# process dying) get through and say nothing of the service being back.
RESUMED_AFTER = 4


def resumed(packets: Sequence[PacketTiming], began_ns: int) -> int:
    """When (ns) the channel's packets got through again after `began_ns`: the send time of the
    first of RESUMED_AFTER consecutive packets that all arrived (or of the last ones sent)."""
    after = [p for p in packets if (p.sent_ns or p.start_ns) >= began_ns]
    for i, p in enumerate(after):
        if all(q.arrival_ns is not None for q in after[i : i + RESUMED_AFTER]):
            return p.sent_ns or p.start_ns
    return 1 << 62


def promised_again(c: Channel, packets: Sequence[PacketTiming], began_ns: int) -> int:
    """When (ns) the fault that began at `began_ns` stopped costing the channel its promise: its
    packets got through again, and, if the store marked it down meanwhile (no path admitted it:
    nothing is promised, and its packets go as best effort wherever the routes take them), once
    it was active again and its packets got through from then. Found by `make chaos
    SWITCH=bmv2` (seed 7, --duration 1800, at 1431 s): transit was down from a trunk cut 16 s
    earlier (the ring's other path full), its packets went best effort through ucsb, and the kill
    of ucsb took 19 of them, counted as lost outside any window because its allocation did not
    cross ucsb."""
    end = resumed(packets, began_ns)
    extended = True
    while extended:
        extended = False
        for down, active in c.down_spans:
            if down * 1e9 <= end and active * 1e9 > began_ns:
                again = resumed(packets, int(active * 1e9)) if active != float("inf") else 1 << 62
                if again > end:
                    end, extended = again, True
    return end


def judge(c: Channel, run: FlowRun, applied: Sequence[Applied], stalls: Stalls | None) -> Judged:
    windows: list[tuple[int, int, str]] = []  # (start ns, end ns, fault kind)
    for fault in applied:
        if fault.error:
            continue
        # the faults in force when this one began, itself included (a combination)
        together = [
            f
            for f in applied
            if not f.error and f.began <= fault.began < max(active_until(f), f.began + 1e-9)
        ]
        if not leaves_no_path(c, together, fault.began):
            continue
        # a packet sent up to its bound before the fault may still be in the network then (in
        # the switch that dies, on the trunk that goes): it is lost to the fault
        began = int(fault.began * 1e9)
        start = began - int(c.bound_ms * 1e6)
        windows.append((start, promised_again(c, run.packets, began), fault.fault.kind))

    def inside(p: PacketTiming) -> bool:
        t = p.sent_ns or p.start_ns
        return any(s <= t < e for s, e, _ in windows)

    outside = [p for p in run.packets if not inside(p)]
    lost = sum(1 for p in outside if p.arrival_ns is None)
    # A stall up to a bound before a packet was sent held packets it may queue behind: in two
    # minutes of chaos (seed 4) on a VM stalled 13-38% of the time, late packets had 1-12 ms
    # more delay than the stalls in their flight, and as much stall just before it.
    backlog = int(c.bound_ms * 1e6)
    late = FlowRun(run.port, run.packet_bytes, outside).late_outside_stalls(c.bound_ms, stalls, backlog)
    outages: dict[str, list[float]] = {}
    for s, e, kind in windows:
        began = s + int(c.bound_ms * 1e6)  # the outage counts from the fault itself
        outages.setdefault(kind, []).append(round((e - began) / 1e9, 3) if e < 1 << 62 else float("inf"))
    problems = [
        f"{c.spec.name}: no packet got through again after {kind} (it stayed down, or lost its entries)"
        for _, e, kind in windows
        if e >= 1 << 62
    ]
    if lost:
        problems.append(f"{c.spec.name}: {lost} packets lost outside its fault windows")
    if late:
        problems.append(
            f"{c.spec.name}: {late} packets over its {c.bound_ms:.2f} ms bound outside its fault windows"
        )
    spans = [(s / 1e9, e / 1e9 if e < 1 << 62 else float("inf"), kind) for s, e, kind in windows]
    return Judged(c.spec.name, run.sent, run.received, c.bound_ms, lost, late, outages, problems, spans)


# The guarantee monitor polls every second (monitor.interval_s) and raises an episode after the
# poll that shows it: an outage shorter than two polls may pass between them unseen.
ALARM_AFTER_S = 2.0
ALARM_SLACK_S = 1.5


def alarm_problems(judged: Judged, reservation_id: int, episodes: Sequence[dict[str, Any]]) -> list[str]:
    """Every fault window of the channel long enough for the monitor to see must have had an
    episode of that channel raised during it (give or take a poll), cleared by the end."""
    problems = []
    mine = [e for e in episodes if e.get("reservation_id") == reservation_id]
    for start, end, kind in judged.windows:
        if end - start < ALARM_AFTER_S:
            continue
        seen = [
            e
            for e in mine
            if e["raised_at"] <= end + ALARM_SLACK_S
            and (e["cleared_at"] or float("inf")) >= start - ALARM_SLACK_S
        ]
        if not seen:
            problems.append(
                f"{judged.name}: no monitor episode for its {end - start:.1f} s outage after {kind}"
            )
        elif any(e["cleared_at"] is None for e in seen):
            problems.append(f"{judged.name}: the episode of its outage after {kind} was never cleared")
    return problems


def read(channels: Sequence[Channel], logs: dict[str, tuple[Path, Path]]) -> dict[str, FlowRun]:
    return {c.spec.name: read_flow_logs(*logs[c.spec.name])[c.port] for c in channels}
