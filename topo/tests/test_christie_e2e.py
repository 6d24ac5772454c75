"""End to end on the christie topology: real Mininet hosts, terrapin-switch running p4src/, the
controller with its REST API, and the host agent speaking the in-band protocol.

Needs root, build/bin/terrapin-switch, build/p4/terrapin.json and the controller installed in
build/venv (`make setup` does all of it). The links run at 20 Mbit/s so that two best-effort
floods congest the router's port towards b1 without loading a 2-core machine.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topo import christie
from topo.network import RunningNetwork, running
from topo.p4switch import REPO, TERRAPIN_SWITCH

RATE_MBPS = 20
VIDEO_PORT = 5004
PYTHON = str(REPO / "build" / "venv" / "bin" / "python")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not TERRAPIN_SWITCH.exists() or not (REPO / "build/p4/terrapin.json").exists(),
    reason="needs root, build/bin/terrapin-switch and build/p4 (make setup)",
)


def rest(
    run: RunningNetwork, method: str, path: str, body: object = None, token: bool = True
) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"{run.rest_url}{path}", data=None if body is None else json.dumps(body).encode(), method=method
    )
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {run.token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read()
            return reply.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNetwork]:
    os.environ["PATH"] = f"{REPO / 'build' / 'venv' / 'bin'}:{os.environ['PATH']}"
    plan = christie.plan(rate_mbps=RATE_MBPS)
    state = tmp_path_factory.mktemp("christie")
    with running(plan, rest_port=18181, token="e2e-token", state_dir=state) as run:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, health = rest(run, "GET", "/health")
            if all(s["ready"] for s in health["switches"].values()):
                break
            time.sleep(0.5)
        else:
            pytest.fail("controller never reported the switch ready")
        yield run
    leftovers = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "terrapin-eth" not in leftovers, "veths left behind"


def ping(run: RunningNetwork, src: str, dst: str) -> bool:
    address = run.plan.hosts[dst].address
    output = run.host(src).cmd(f"ping -c 2 -W 1 -i 0.2 {address}")
    return " 0% packet loss" in output


def reservation_body(run: RunningNetwork, src: str, dst: str) -> dict[str, object]:
    return {
        "src": run.plan.hosts[src].address,
        "dst": run.plan.hosts[dst].address,
        "protocol": "udp",
        "src_port": VIDEO_PORT,
        "dst_port": VIDEO_PORT,
        "priority": 6,
        "rate": 9_000_000 // 8,
        "burst": 27_000,
        "max_packet": run.plan.mtu,
    }


def video_under_flood(run: RunningNetwork, seconds: float, work: Path) -> tuple[int, int, list[float]]:
    """Sends the video a1 → b1 while a2 and a3 each flood b1 at the line rate.
    Returns (frames sent, frames received whole, latencies of whole frames in ms)."""
    b1 = run.plan.hosts["b1"]
    sink = run.host("b1")
    sender_log, receiver_log = work / "sender.json", work / "receiver.json"
    receiver = sink.popen(
        [
            PYTHON,
            "-m",
            "topo.video",
            "receive",
            "--port",
            str(VIDEO_PORT),
            "--seconds",
            str(seconds + 3),
            "--log",
            str(receiver_log),
        ],
        cwd=str(REPO),
    )
    servers = [sink.popen(["iperf3", "-s", "-1", "-p", str(5301 + i)]) for i in range(2)]
    time.sleep(0.8)
    floods = [
        run.host(name).popen(
            [
                "iperf3",
                "-c",
                b1.address,
                "-u",
                "-b",
                f"{RATE_MBPS}M",
                "-l",
                "4000",
                "-t",
                str(int(seconds + 2)),
                "-p",
                str(5301 + i),
            ]
        )
        for i, name in enumerate(("a2", "a3"))
    ]
    time.sleep(0.8)
    sender = run.host("a1").popen(
        [
            PYTHON,
            "-m",
            "topo.video",
            "send",
            "--dst",
            b1.address,
            "--port",
            str(VIDEO_PORT),
            "--seconds",
            str(seconds),
            "--log",
            str(sender_log),
        ],
        cwd=str(REPO),
    )
    assert sender.wait(timeout=seconds + 30) == 0
    assert receiver.wait(timeout=30) == 0
    for process in floods + servers:
        process.terminate()
        process.wait()
    sent = json.loads(sender_log.read_text())["frames"]
    got = {f["frame"]: f for f in json.loads(receiver_log.read_text())["frames"]}
    whole = [
        (got[f["frame"]]["last_arrival_ns"] - f["start_ns"]) / 1e6
        for f in sent
        if f["frame"] in got and got[f["frame"]]["received"] == f["packets"]
    ]
    return len(sent), len(whole), whole


def test_routing_between_and_within_subnets(net: RunningNetwork) -> None:
    assert ping(net, "a1", "b1")
    assert ping(net, "b2", "a3")
    assert ping(net, "a1", "a2")  # same subnet, still through the router


def test_rest_reservation_lifecycle(net: RunningNetwork) -> None:
    status, body = rest(net, "POST", "/reservations", reservation_body(net, "a2", "b2"))
    assert status == 201, body
    hops = body["allocation"]["hops"]
    assert [(h["switch"], h["port"]) for h in hops] == [("terrapin", net.plan.hosts["b2"].port)]
    assert body["allocation"]["worst_case_delay_us"] > 0
    status, listed = rest(net, "GET", "/reservations")
    assert status == 200 and [r["id"] for r in listed] == [body["id"]]
    # Mutating calls need the token; bad bodies name the field.
    assert rest(net, "DELETE", f"/reservations/{body['id']}", token=False)[0] == 401
    status, error = rest(net, "POST", "/reservations", {**reservation_body(net, "a2", "b2"), "rate": -1})
    assert status in (400, 422) and "rate" in json.dumps(error)
    assert rest(net, "DELETE", f"/reservations/{body['id']}")[0] == 204
    assert rest(net, "GET", "/reservations")[1] == []


def test_in_band_reservation_with_host_agent(net: RunningNetwork) -> None:
    b2 = net.plan.hosts["b2"]
    # The destination answers REQUEST_ADMIT and, later, NOTIFY_CLOSE with RECVD_CLOSE.
    server = net.host("b2").popen(["terrapin-host", "serve", "--idle-timeout", "30"])
    time.sleep(0.5)
    try:
        _request_and_close(net, b2.address)
    finally:
        server.terminate()
        server.wait()


def _request_and_close(net: RunningNetwork, destination: str) -> None:
    output = net.host("a3").cmd(
        f"terrapin-host request --dst {destination} --protocol udp --sport 6000 --dport 6000 "
        f"--priority 5 --rate 500000 --burst 9000 --max-packet {net.plan.mtu}"
    )
    outcome = json.loads(output.strip().splitlines()[-1])
    assert outcome["outcome"] == "ACCEPTED", output
    status, listed = rest(net, "GET", "/reservations")
    assert status == 200
    mine = [r for r in listed if r["src"] == net.plan.hosts["a3"].address]
    assert len(mine) == 1 and mine[0]["origin"] != "rest"
    closed = net.host("a3").cmd(f"terrapin-host close --dst {destination} --context {outcome['context']}")
    assert json.loads(closed.strip().splitlines()[-1])["outcome"] == "CLOSED", closed
    assert rest(net, "GET", "/reservations")[1] == []


def test_reserved_video_is_protected_from_a_flood(net: RunningNetwork, tmp_path: Path) -> None:
    # Without a reservation the video's EF claim is demoted and it drowns with the flood.
    sent, whole, _ = video_under_flood(net, 4, tmp_path)
    assert whole < sent * 0.9, f"the flood did not congest the port ({whole}/{sent} frames whole)"

    status, body = rest(net, "POST", "/reservations", reservation_body(net, "a1", "b1"))
    assert status == 201, body
    bound_ms = body["allocation"]["worst_case_delay_us"] / 1000
    try:
        sent, whole, latencies = video_under_flood(net, 6, tmp_path)
    finally:
        rest(net, "DELETE", f"/reservations/{body['id']}")
    assert whole == sent, f"reserved video lost frames: {whole}/{sent}"
    late = [lat for lat in latencies if lat > bound_ms]
    assert not late, f"{len(late)} frames over the {bound_ms:.2f} ms bound, worst {max(late):.2f} ms"
    assert not math.isnan(bound_ms)
