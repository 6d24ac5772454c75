"""The chaos run's parts that judge and record (topo/chaos/run.py, workload.py), on histories and
a stand-in REST server whose answers are known: a request nobody answered is the client's only
while its replica was down; the switches must hold exactly the store's channels; the clients
record every answer, keep what was granted and what was closed, and close again what a 503
refused."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from terrapin.admission.model import ChannelKey
from terrapin.paths import ChannelSelector
from topo.chaos import traffic
from topo.chaos.actuators import Applied
from topo.chaos.checker import Answer, JournalEntry, state_problems, unanswered_problems, unavailability
from topo.chaos.nemesis import Fault
from topo.chaos.report import in_band_problems, in_band_timeouts, unknown_outcome_problems
from topo.chaos.run import Seen, Watchers
from topo.chaos.traffic import Channel, Judged, Measured, alarm_problems
from topo.chaos.workload import History, Replica, Workload, ask
from topo.experiment import FlowRun, PacketTiming


def answer(status: int, at: float, replica: str = "c0", method: str = "POST") -> Answer:
    return Answer("client0", method, f"/reservations ({replica})", at, at + 0.1, status)


@pytest.mark.parametrize(
    ("at", "replica", "allowed"),
    [
        (10.0, "c0", True),  # inside c0's down span
        (8.5, "c0", True),  # just before it: within the slack (sent as it was killed)
        (5.0, "c0", False),  # c0 was up
        (10.0, "c1", False),  # c1 was up then
    ],
)
def test_no_answer_is_allowed_only_while_the_replica_was_down(at: float, replica: str, allowed: bool) -> None:
    down = {"c0": [(9.0, 12.0)]}
    assert (unanswered_problems([answer(0, at, replica)], down) == []) == allowed


def test_down_spans_come_from_the_health_watch() -> None:
    watchers = Watchers.__new__(Watchers)
    watchers.health = [
        Seen(1.0, "c0", 200, "primary"),
        Seen(2.0, "c0", 0, None),
        Seen(2.5, "c0", 0, None),
        Seen(3.0, "c0", 503, None),
        Seen(1.0, "c1", 200, "backup"),
    ]
    assert watchers.down_spans() == {"c0": [(1.75, 3.0)]}


def test_unavailability_is_from_each_fault_to_the_next_accepted_write() -> None:
    kill = Applied(Fault("kill_primary", "primary", 5.0, 0.0), "c0", began=105.0)
    failed = Applied(Fault("kill_backup", "backup", 6.0, 0.0), "", began=106.0, error="not running")
    answers = [answer(201, 100.0), answer(503, 105.5), answer(201, 107.4), answer(201, 108.0)]
    assert unavailability([kill, failed], answers) == {"kill_primary": pytest.approx([2.5])}


def test_the_switches_must_hold_exactly_the_stores_channels() -> None:
    def reservation(port: int, state: str, *switches: str) -> dict[str, Any]:
        return {
            "src": "10.0.1.1",
            "dst": "10.0.2.1",
            "protocol": 17,
            "flow_key": port,
            "state": state,
            "allocation": {"hops": [{"switch": s} for s in switches]},
        }

    stored = [reservation(1, "active", "s1", "s2"), reservation(2, "down", "s1")]
    one = ChannelSelector("10.0.1.1", "10.0.2.1", 17, 1)
    two = ChannelSelector("10.0.1.1", "10.0.2.1", 17, 2)
    assert state_problems(stored, {"s1": {one}, "s2": {one}}) == []
    problems = state_problems(stored, {"s1": {one, two}, "s2": set()})
    assert len(problems) == 2
    assert problems[0].startswith("s1 holds 1 channels the store lacks")
    assert problems[1].startswith("s2 lacks 1 of the store's channels")


class StandIn(BaseHTTPRequestHandler):
    """Grants every POST; the first DELETE of each id is refused with 503 + Retry-After, the
    second closes it."""

    granted = 0
    refused: ClassVar[set[str]] = set()
    lock = threading.Lock()

    def _reply(self, status: int, body: object = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with StandIn.lock:
            StandIn.granted += 1
            rid = StandIn.granted
        self._reply(201, {"id": rid, "initiator": body["src"], "context": body["src_port"]})

    def do_DELETE(self) -> None:
        with StandIn.lock:
            first = self.path not in StandIn.refused
            StandIn.refused.add(self.path)
        if first:
            self._reply(503, {"error": "no primary"}, {"Retry-After": "1"})
        else:
            self._reply(204)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_clients_record_every_answer_and_close_again_what_503_refused(stand_in: str) -> None:
    hosts = {"a": ("10.0.1.1", "s1"), "b": ("10.0.2.1", "s2")}
    workload = Workload(
        [Replica("c0", stand_in)], "t", hosts, seed=7, clients=2, every_s=0.01, close_share=0.5
    )
    workload.start()
    time.sleep(0.8)
    history = workload.stop()
    posts = [a for a in history.answers if a.method == "POST"]
    deletes = [a for a in history.answers if a.method == "DELETE"]
    assert posts and all(a.status == 201 for a in posts)
    assert len(history.created) == len(posts)
    assert {a.status for a in deletes} <= {503, 204}
    # every close that succeeded was refused once before: the client tried again
    closed_paths = {f"/reservations/{rid} (c0)" for rid in history.closed}
    refused_paths = {a.path for a in deletes if a.status == 503}
    assert history.closed and closed_paths <= refused_paths
    assert not history.maybe_closed and not history.vanished
    # each request a flow of its own between hosts of different sites
    keys = list(history.created.values())
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    ("window", "episode", "problem"),
    [
        ((100.0, 105.0), (100.8, 106.0), ""),  # raised during the outage, cleared after it
        ((100.0, 105.0), None, "no monitor episode"),
        ((100.0, 105.0), (100.8, None), "never cleared"),
        ((100.0, 105.0), (120.0, 121.0), "no monitor episode"),  # another episode, later
        ((100.0, 101.0), None, ""),  # shorter than two polls: it may pass unseen
    ],
)
def test_an_outage_the_monitor_can_see_must_raise_and_clear_an_episode(
    window: tuple[float, float], episode: tuple[float, float | None] | None, problem: str
) -> None:
    judged = Judged("plain", 100, 90, 20.0, 0, 0, {}, [], [(*window, "kill_switch")])
    episodes = (
        [] if episode is None else [{"reservation_id": 7, "raised_at": episode[0], "cleared_at": episode[1]}]
    )
    found = alarm_problems(judged, 7, episodes)
    assert (found == []) if not problem else (len(found) == 1 and problem in found[0])


def test_an_in_band_timeout_is_allowed_only_near_a_fault_or_a_silent_replica() -> None:
    kill = Applied(Fault("kill_primary", "primary", 10.0, 0.0), "c0", began=1010.0)
    near = Answer("in-band", "REQUEST", "request 10.1.1.3/1000 (in band)", 1012.0, 1017.0, 0)
    far = Answer("in-band", "REQUEST", "request 10.1.1.3/1001 (in band)", 1100.0, 1105.0, 0)
    while_down = Answer("in-band", "CLOSE", "close 10.1.1.3/1000 (in band)", 1200.0, 1205.0, 0)
    problems = in_band_timeouts([near, far, while_down], [kill], {"c1": [(1199.0, 1201.0)]})
    assert len(problems) == 1 and "1001" in problems[0]


def test_the_in_band_initiators_view_must_match_the_store() -> None:
    history = History()
    kept, closed, unsure, lost = (ChannelKey("10.1.1.3", c) for c in (1000, 1001, 1002, 1003))
    history.accepted_in_band |= {kept, closed, unsure, lost}
    history.closed_in_band.add(closed)
    history.maybe_closed_in_band.add(unsure)
    stored = [{"initiator": "10.1.1.3", "context": c} for c in (1000, 1001)]
    assert in_band_problems(history, stored) == [
        "channel 10.1.1.3/1003 was accepted in band, never closed, and is not in the store",
        "channel 10.1.1.3/1001 was closed in band and is still in the store",
    ]


def flow_run(lost_between: list[tuple[float, float]], seconds: float = 4.0) -> FlowRun:
    """Packets every 25 ms from t = 1000 s, each 1 ms in flight, lost while sent in the spans."""
    run = FlowRun(5300, 200)
    for i in range(int(seconds / 0.025)):
        sent = 1000.0 + i * 0.025
        gone = any(s <= sent - 1000.0 < e for s, e in lost_between)
        ns = int(sent * 1e9)
        run.packets.append(PacketTiming(i, 0, ns, ns, None if gone else ns + 1_000_000))
    return run


def measured(protected: bool, *paths: list[str]) -> Channel:
    spec = Measured("m", "faith", "paola", protected)
    allocations = [(0.0, [list(p) for p in paths])] if protected else [(0.0, [list(p)]) for p in paths]
    return Channel(spec, 5300, {"id": 1, "allocation": {"worst_case_delay_us": 20_000}}, allocations)


def fault(kind: str, target: str, at: float, lasts: float) -> Applied:
    return Applied(Fault(kind, target, at, lasts), target, began=1000.0 + at, ended=1000.0 + at + lasts)


def test_losses_inside_a_fault_window_of_the_channels_own_path_are_its_outage() -> None:
    c = measured(False, ["ucb", "ucsd"])
    killed = fault("kill_switch", "ucsd", 1.0, 0.5)
    judged = traffic.judge(c, flow_run([(1.0, 1.6)]), [killed], None)
    assert judged.problems == [] and judged.outages_s == {"kill_switch": [pytest.approx(0.6, abs=0.03)]}
    # a fault elsewhere opens no window: the same losses are the system's
    elsewhere = fault("kill_switch", "ucla", 1.0, 0.5)
    judged = traffic.judge(c, flow_run([(1.0, 1.6)]), [elsewhere], None)
    assert judged.lost_outside == 24 and judged.problems


def test_a_protected_channel_has_a_window_only_when_both_paths_break() -> None:
    c = measured(True, ["ucb", "ucsd"], ["ucb", "ucsb", "ucla", "ucsd"])
    one_path = fault("cut_trunk", "ucb-ucsd", 1.0, 1.0)
    assert traffic.judge(c, flow_run([(1.0, 1.2)]), [one_path], None).lost_outside == 8
    other = fault("kill_switch", "ucla", 1.1, 2.0)  # together with the cut: both paths broken
    judged = traffic.judge(c, flow_run([(1.1, 1.3)]), [one_path, other], None)
    assert judged.lost_outside == 0 and "kill_switch" in judged.outages_s


def test_a_channel_that_never_came_back_is_named() -> None:
    c = measured(False, ["ucb", "ucsd"])
    judged = traffic.judge(c, flow_run([(1.0, 9.0)]), [fault("kill_switch", "ucsd", 1.0, 0.5)], None)
    assert any("no packet got through again" in p for p in judged.problems)


def test_an_unknown_outcome_is_allowed_only_where_a_primary_or_the_store_failed() -> None:
    def unknown(at: float) -> Answer:
        return Answer("client0", "POST", "/reservations (c1)", at, at + 0.2, 504, None, "outcome unknown")

    killed = Applied(Fault("kill_primary", "primary", 10.0, 0.0), "c0", began=1010.0)
    problems = unknown_outcome_problems([unknown(1010.1), unknown(1100.0)], [killed], {})
    assert len(problems) == 1 and "1100.000" in problems[0]
    # a forwarded write lost while its primary did not answer /health
    assert unknown_outcome_problems([unknown(1100.0)], [], {"c0": [(1099.5, 1101.0)]}) == []


def test_a_packet_still_in_the_network_when_its_switch_dies_is_lost_to_the_fault() -> None:
    """Found by `make chaos SWITCH=bmv2` (seed 4): a packet sent 0.2 s before its first switch
    was killed, inside BMv2's 178 ms bound of it, was still queued there; it is the fault's."""
    c = measured(False, ["ucb", "ucsd"])  # bound 20 ms
    killed = fault("kill_switch", "ucsd", 1.0, 0.5)
    judged = traffic.judge(c, flow_run([(0.99, 1.6)]), [killed], None)
    assert judged.lost_outside == 0 and judged.problems == []
    assert judged.outages_s["kill_switch"] == [pytest.approx(0.6, abs=0.03)]  # from the fault
    # one sent earlier than its bound before the fault was not in the network then
    judged = traffic.judge(c, flow_run([(0.95, 1.6)]), [killed], None)
    assert judged.lost_outside == 2


def moved(at: float, rid: int, *path: str, state: str = "active") -> JournalEntry:
    body = {"reservation_id": rid, "state": state, "allocation": {"hops": [{"port": [s, 1]} for s in path]}}
    return JournalEntry(int(at * 1000), "move", ChannelKey("10.1.1.1", 1), json.dumps(body), 1000.0 + at)


def test_a_channels_paths_are_the_journals_each_in_force_from_its_write() -> None:
    """Found by `make chaos` (seed 7, --duration 1800, at 559 s): the paths were read from the
    replicas' REST now and then, and a move to ucb > ucsb > ucla > ucsd read from a backup's
    stale copy was never seen, so the cut of ucb-ucsb under it opened no window and its outage
    counted as 45 packets lost. The store's journal has every move; a fault counts against the
    allocations in force around it (PATH_SLACK_S: the switches follow the store)."""
    c = measured(False, ["ucb", "ucsd"])
    c.follow([moved(0.5, 1, "ucb", "ucsb", "ucla", "ucsd"), moved(20.0, 1, "ucb", "ucsd"), moved(1, 2, "x")])
    assert [paths for _, paths in c.allocations] == [
        [["ucb", "ucsd"]],
        [["ucb", "ucsb", "ucla", "ucsd"]],
        [["ucb", "ucsd"]],
    ]
    cut = fault("cut_trunk", "ucb-ucsb", 1.0, 1.0)
    judged = traffic.judge(c, flow_run([(1.0, 1.5)]), [cut], None)
    assert judged.lost_outside == 0 and judged.outages_s["cut_trunk"] == [pytest.approx(0.5, abs=0.03)]
    # long after it left that path, the same cut is not its fault
    late = Applied(Fault("cut_trunk", "ucb-ucsb", 30.0, 1.0), "ucb-ucsb", began=1030.0, ended=1031.0)
    assert not traffic.leaves_no_path(c, [late], late.began)


def test_a_packet_through_in_the_moment_a_fault_takes_to_bite_does_not_end_its_window() -> None:
    c = measured(False, ["ucb", "ucsd"])
    killed = fault("kill_switch", "ucsd", 1.0, 0.5)
    run = flow_run([(1.03, 1.6)])  # the packet sent at 1.0 s got through; then 0.6 s of losses
    judged = traffic.judge(c, run, [killed], None)
    assert judged.lost_outside == 0 and judged.outages_s["kill_switch"] == [pytest.approx(0.6, abs=0.03)]


def test_a_channel_down_after_a_fault_of_its_path_is_promised_nothing_until_active_again() -> None:
    """Found by `make chaos SWITCH=bmv2` (seed 7, --duration 1800, at 1431 s): a cut of its
    trunk left transit down (the ring's other path full: nothing promised, its packets best effort
    along the routes, through ucsb); 16 s later the kill of ucsb, which its allocation did not
    cross, lost 19 of them, counted outside every window. The cut's window lasts until the
    channel is active again and its packets get through from then."""
    c = measured(False, ["ucla", "ucsd", "ucb"])
    c.follow([moved(1.2, 1, "ucla", "ucsd", "ucb", state="down"), moved(3.0, 1, "ucla", "ucsb", "ucb")])
    assert c.down_spans == [(1001.2, 1003.0)]
    cut = fault("cut_trunk", "ucsd-ucb", 1.0, 0.5)
    killed = fault("kill_switch", "ucsb", 2.0, 0.5)
    # lost at the cut until the restoration gave up (1.2 s), then best effort through ucsb until
    # its kill; through again before the channel is active on its new path
    run = flow_run([(1.0, 1.2), (2.0, 2.5)])
    judged = traffic.judge(c, run, [cut, killed], None)
    assert judged.lost_outside == 0 and judged.problems == []
    assert judged.outages_s["cut_trunk"] == [pytest.approx(2.0, abs=0.03)]  # until active again
    # a channel never marked down is promised all along: the same losses at ucsb are the system's
    c = measured(False, ["ucla", "ucsd", "ucb"])
    assert traffic.judge(c, run, [cut, killed], None).lost_outside == 20
    # one still down at the end never had its promise back
    c = measured(False, ["ucla", "ucsd", "ucb"])
    c.follow([moved(1.2, 1, "ucla", "ucsd", "ucb", state="down")])
    judged = traffic.judge(c, flow_run([(1.0, 1.2)]), [cut], None)
    assert any("no packet got through again" in p for p in judged.problems)


class CutShort(BaseHTTPRequestHandler):
    """A replica killed mid-answer: its headers promise more body than it sends."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b'{"sta')
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


def test_a_reply_cut_short_is_no_answer_and_the_health_watch_goes_on() -> None:
    """Found by `make chaos` (seed 7, --duration 1800, terrapin-switch, 2026-12-03 at 1778 s): a
    replica killed while answering /health left a body shorter than its Content-Length; the
    IncompleteRead (no OSError) ended the health watch's thread, so the 6 s the replica was down
    next were not known and 62 requests to it counted as unanswered by a replica that was up."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), CutShort)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        status, why, _ = ask(url, "t", "GET", "/health", timeout=2.0)
        assert status == 0 and "IncompleteRead" in str(why)

        class Controller:
            rest_url, replica = url, "c0"

        class Run:
            controllers, token = [Controller()], "t"

        watchers = Watchers(Run())  # type: ignore[arg-type]
        health = threading.Thread(target=watchers._watch_health, daemon=True)
        health.start()
        time.sleep(0.6)
        assert health.is_alive()
        watchers._stop.set()
        health.join(timeout=2.0)
        assert len(watchers.health) >= 2 and all(s.status == 0 for s in watchers.health)
        assert watchers.down_spans()["c0"]
    finally:
        server.shutdown()
