"""A switch that dies mid-path, on `TOPO=sequoia-ring` as `make run` starts it (supervised), on
terrapin-switch and on p4lang's simple_switch_grpc (docs/controller.md, "Trunks").

ucsb is killed under two channels from faith (ucb): one to blizzard (ucla), whose path crosses
ucsb and which the other way round (ucb > ucsd > ucla) admits, and one in band to ucsbhost, on
ucsb itself, which no path can carry while ucsb is dead. The first is moved, its bound proved for
the new path, and a video over it afterwards arrives whole and within that bound; the second is
down, its initiator told (NOTIFY_CLOSE, PATH_DOWN). When the supervisor has started ucsb again
and its trunks carry probes, the second is set up again and its initiator told (REQUEST_ACCEPT);
the first stays where it was moved."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from topo import sequoia, sequoia_ring
from topo.experiment import PYTHON, Traffic, read_video_logs
from topo.faults import kill_switch
from topo.network import RunningNetwork, call, running
from topo.p4switch import REPO, SWITCH_KINDS, switch_binary
from topo.rtwire import wire_first
from topo.stalls import witnessed
from topo.video import VideoShape

INTF_PREFIX = "trptrg"
# Its largest frame (2,800 B and the headers) fits the reservation's burst whole, and 20 of them
# a second its rate: the shaped sender never holds a frame back.
VIDEO = VideoShape(fps=20, smallest=1_500, peak=2_800, max_packet=1_000)
RATE, BURST = 60_000, 4_000

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build/p4/terrapin.json").exists(),
    reason="needs root and build/p4 (make setup)",
)


@pytest.fixture(scope="module", params=SWITCH_KINDS)
def ring(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningNetwork]:
    kind = str(request.param)
    try:
        switch_binary(kind)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    state = tmp_path_factory.mktemp(f"ring-{kind}")
    # BMv2's ports are shaped in packets/s, each 1,000 B packet a whole MTU's slot: its T1s run
    # at twice the rate, as in E5 and E11, so that the two channels fit as on terrapin-switch.
    t1_bps = 2 * sequoia.T1_RATE_BPS if kind == "bmv2" else sequoia.T1_RATE_BPS
    with running(
        sequoia_ring.plan(t1_bps=t1_bps, queue_capacity=128 if kind == "bmv2" else 64),
        switch_kind=kind,
        rest_port=18182,
        token="ring-token",
        state_dir=state,
        intf_prefix=INTF_PREFIX,
        supervise=True,
        pid_dir=state / "pids",
    ) as run:
        assert wait_until(lambda: all_ready(run), 60), "the controller never reported every switch ready"
        yield run
    leftovers = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f": {INTF_PREFIX}" not in leftovers, "veths left behind"


def all_ready(run: RunningNetwork) -> bool:
    try:
        _, health = call(run, "GET", "/health")
    except OSError:
        return False
    return bool(health.get("switches")) and all(s["ready"] for s in health["switches"].values())


def wait_until(predicate: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    return None


def reservation(run: RunningNetwork, reservation_id: int) -> dict[str, Any]:
    status, found = call(run, "GET", f"/reservations/{reservation_id}")
    assert status == 200, found
    return dict(found)


def switches(record: dict[str, Any]) -> list[str]:
    return [hop["switch"] for hop in record["allocation"]["hops"]]


def test_a_switch_that_dies_moves_what_it_can_and_downs_what_it_cannot(
    ring: RunningNetwork, tmp_path: Path
) -> None:
    hosts = ring.plan.hosts
    status, moving = call(ring, "POST", "/reservations", {
        "src": hosts["faith"].address, "dst": hosts["blizzard"].address, "protocol": "udp",
        "src_port": 5004, "dst_port": 5004, "priority": 5, "rate": RATE, "burst": BURST,
        "max_packet": VIDEO.max_packet,
    })  # fmt: skip
    assert status == 201, moving
    assert switches(moving) == ["ucb", "ucsb", "ucla"]
    server = ring.host("ucsbhost").popen([PYTHON, "-m", "terrapin.host_agent", "serve"], cwd=str(REPO))
    told_log = tmp_path / "initiator.jsonl"
    request = [PYTHON, "-m", "terrapin.host_agent", "request", "--dst", hosts["ucsbhost"].address]
    request += [
        "--sport",
        "5010",
        "--dport",
        "5010",
        "--priority",
        "4",
        "--rate",
        str(RATE),
        "--burst",
        str(BURST),
    ]
    request += ["--max-packet", str(VIDEO.max_packet), "--watch", "120"]
    with told_log.open("w") as out:
        initiator = ring.host("faith").popen(request, cwd=str(REPO), stdout=out, stderr=subprocess.STDOUT)

    def told() -> list[dict[str, Any]]:
        return [json.loads(line) for line in told_log.read_text().splitlines() if line.startswith("{")]

    try:
        assert wait_until(lambda: told() and told()[0].get("outcome") == "ACCEPTED", 20), told()
        _, listed = call(ring, "GET", "/reservations")
        stranded = next(r for r in listed if r["origin"] == "inband")
        assert switches(stranded) == ["ucb", "ucsb"]

        killed_at = kill_switch(ring, "ucsb")
        moved = wait_until(lambda: switches(reservation(ring, moving["id"])) != switches(moving), 20)
        assert moved, "the channel through the dead switch was not moved"
        now = reservation(ring, moving["id"])
        assert now["state"] == "active" and switches(now) == ["ucb", "ucsd", "ucla"]
        assert now["allocation"]["worst_case_delay_us"] > 0
        down = reservation(ring, stranded["id"])
        assert down["state"] == "down" and "no path" in (down["note"] or ""), down
        assert wait_until(lambda: any(n.get("reason_name") == "PATH_DOWN" for n in told()), 10), told()
        _, health = call(ring, "GET", "/health")
        assert health["status"] == "degraded" and health["channels_down"] == 1
        dead = {t["trunk"] for t in health["trunks"] if not t["up"]}
        assert dead and dead == {t["trunk"] for t in health["trunks"] if "ucsb:" in t["trunk"]}

        # A video over the moved channel arrives whole and within its new bound.
        bound_ms = now["allocation"]["worst_case_delay_us"] / 1000
        with (
            wire_first(),
            witnessed(tmp_path / "stalls") as found,
            Traffic(ring, tmp_path / "video") as traffic,
        ):
            received = traffic.receiver("blizzard", [5004])
            sent = traffic.video("faith", "blizzard", seconds=3, port=5004, video=VIDEO, shape=(RATE, BURST))
            traffic.wait(60)
        video = read_video_logs(sent, received)
        assert video.frames_whole == video.frames_sent, (
            f"{video.frames_sent - video.frames_whole} frames lost"
        )
        stalls = found[0] if found else None
        late = [t for t in video.timings if t.late_outside_stalls(bound_ms, stalls)]
        assert not late, f"{len(late)} frames over the {bound_ms:.1f} ms bound: {late[:2]}"

        # The supervisor starts ucsb again; once its trunks carry probes the stranded channel is back.
        back = wait_until(lambda: reservation(ring, stranded["id"])["state"] == "active", 120)
        assert back, f"not set up again after ucsb came back: {reservation(ring, stranded['id'])}"
        assert switches(reservation(ring, stranded["id"])) == ["ucb", "ucsb"]
        assert wait_until(lambda: any(n.get("notice") == "REQUEST_ACCEPT" for n in told()), 10), told()
        assert switches(reservation(ring, moving["id"])) == ["ucb", "ucsd", "ucla"], "moved back: flapping"
        assert all(n["at"] > killed_at for n in told() if "notice" in n)
    finally:
        for process in (initiator, server):
            process.terminate()
            process.wait(10)
        call(ring, "DELETE", f"/reservations/{moving['id']}")
