"""End to end on the christie topology: real Mininet hosts, a switch running p4src/, the
controller with its REST API, and the host agent speaking the in-band protocol. Every test runs
on terrapin-switch and on p4lang's simple_switch_grpc (the `[bmv2]` cases).

Needs root, build/p4/terrapin.json, the controller installed in build/venv (`make setup` does all
of it), build/bin/terrapin-switch, and for the `[bmv2]` cases BMv2 (`make bmv2`). The links run at
20 Mbit/s so that two best-effort floods congest the router's port towards b1 without loading a
2-core machine, and well within what BMv2 forwards on it (about 570 frames/s of 4,500 bytes).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topo import christie
from topo.experiment import VIDEO_PORT, VideoRun, video_under_flood
from topo.network import RunningNetwork, call, running
from topo.p4switch import REPO, SWITCH_KINDS, metrics_port, switch_binary
from topo.rtwire import wire_first
from topo.stalls import witnessed

RATE_MBPS = 20
# Everything the tests create carries the test prefix (scripts/leftovers.py), so make test can
# judge its own leftovers: here the switch's veth ends in the root namespace.
INTF_PREFIX = "trptmn"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build/p4/terrapin.json").exists(),
    reason="needs root and build/p4 (make setup)",
)


@pytest.fixture(scope="module", params=SWITCH_KINDS)
def net(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNetwork]:
    kind = str(request.param)
    try:
        switch_binary(kind)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    os.environ["PATH"] = f"{REPO / 'build' / 'venv' / 'bin'}:{os.environ['PATH']}"
    plan = christie.plan(rate_mbps=RATE_MBPS)
    state = tmp_path_factory.mktemp(f"christie-{kind}")
    with running(
        plan,
        switch_kind=kind,
        rest_port=18181,
        token="e2e-token",
        state_dir=state,
        intf_prefix=INTF_PREFIX,
        supervise=True,  # as make run does
        pid_dir=state / "pids",
    ) as run:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, health = call(run, "GET", "/health")
            if all(s["ready"] for s in health["switches"].values()):
                break
            time.sleep(0.5)
        else:
            pytest.fail("controller never reported the switch ready")
        yield run
    leftovers = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f": {INTF_PREFIX}" not in leftovers, "veths left behind"


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


def test_routing_between_and_within_subnets(net: RunningNetwork) -> None:
    assert ping(net, "a1", "b1")
    assert ping(net, "b2", "a3")
    assert ping(net, "a1", "a2")  # same subnet, still through the router


def test_terrapin_switch_ports_run_on_af_xdp(net: RunningNetwork) -> None:
    """terrapin-switch's default --io auto gives every port on christie's veths AF_XDP with native
    XDP, so this suite runs on AF_XDP (make test's other I/O, AF_PACKET, is covered elsewhere);
    the switch's io metric says what each port got."""
    if net.switch_kind != "terrapin":
        pytest.skip("terrapin-switch's I/O")
    if "--io" in os.environ.get("TERRAPIN_SWITCH_ARGS", ""):
        pytest.skip("TERRAPIN_SWITCH_ARGS chooses the I/O")
    for switch in net.plan.switches.values():
        url = f"http://127.0.0.1:{metrics_port(switch.device_id)}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        ios = re.findall(r'^terrapin_port_io_info\{[^}]*io="([^"]+)"\} 1$', text, re.MULTILINE)
        assert ios, f"{switch.name}: no terrapin_port_io_info in {url}"
        assert set(ios) == {"afxdp/native"}, f"{switch.name}: ports' I/O {ios}"


def test_rest_reservation_lifecycle(net: RunningNetwork) -> None:
    status, body = call(net, "POST", "/reservations", reservation_body(net, "a2", "b2"))
    assert status == 201, body
    hops = body["allocation"]["hops"]
    assert [(h["switch"], h["port"]) for h in hops] == [("terrapin", net.plan.hosts["b2"].port)]
    assert body["allocation"]["worst_case_delay_us"] > 0
    status, listed = call(net, "GET", "/reservations")
    assert status == 200 and [r["id"] for r in listed] == [body["id"]]
    # Mutating calls need the token; bad bodies name the field.
    assert call(net, "DELETE", f"/reservations/{body['id']}", token=False)[0] == 401
    status, error = call(net, "POST", "/reservations", {**reservation_body(net, "a2", "b2"), "rate": -1})
    assert status in (400, 422) and "rate" in json.dumps(error)
    assert call(net, "DELETE", f"/reservations/{body['id']}")[0] == 204
    assert call(net, "GET", "/reservations")[1] == []


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
    status, listed = call(net, "GET", "/reservations")
    assert status == 200
    mine = [r for r in listed if r["src"] == net.plan.hosts["a3"].address]
    assert len(mine) == 1 and mine[0]["origin"] != "rest"
    closed = net.host("a3").cmd(f"terrapin-host close --dst {destination} --context {outcome['context']}")
    assert json.loads(closed.strip().splitlines()[-1])["outcome"] == "CLOSED", closed
    assert call(net, "GET", "/reservations")[1] == []


def test_reserved_video_is_protected_from_a_flood(net: RunningNetwork, tmp_path: Path) -> None:
    def video(seconds: float, shape: tuple[int, int] | None, work: Path) -> VideoRun:
        work.mkdir()
        return video_under_flood(
            net, source="a1", sink="b1", flooders=("a2", "a3"), seconds=seconds, work=work, shape=shape
        )

    # Without a reservation the video's EF claim is demoted and it drowns with the flood.
    unreserved = video(4, None, tmp_path / "unreserved")
    assert unreserved.frames_whole < unreserved.frames_sent * 0.9, "the flood did not congest the port"

    body = reservation_body(net, "a1", "b1")
    status, granted = call(net, "POST", "/reservations", body)
    assert status == 201, granted
    bound_ms = granted["allocation"]["worst_case_delay_us"] / 1000
    # As the experiments judge it (docs/experiments.md): the wire ahead of the hosts and the
    # switch, and what the machine's own stalls account for left out.
    try:
        with wire_first(), witnessed(tmp_path / "stalls") as found:
            reserved = video(6, (int(str(body["rate"])), int(str(body["burst"]))), tmp_path / "reserved")
    finally:
        call(net, "DELETE", f"/reservations/{granted['id']}")
    stalls = found[0] if found else None
    assert reserved.packet_loss == 0, f"reserved video lost {reserved.packet_loss:.2%} of its packets"
    assert reserved.frames_whole == reserved.frames_sent
    # The bound covers the network: each frame's delay from the sender's socket (FrameTiming).
    late = [t for t in reserved.timings if t.late_outside_stalls(bound_ms, stalls)]
    assert not late, (
        f"{len(late)} frames over the {bound_ms:.2f} ms bound outside the machine's stalls: {late[:3]}"
    )


def wait_until(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_a_switch_or_controller_that_dies_is_restarted_and_says_why(net: RunningNetwork) -> None:
    # Last in this module: it kills the network's processes (make run's supervisor brings them back).
    supervisor = net.supervisor
    assert supervisor is not None and supervisor.log_path is not None
    status, channel = call(net, "POST", "/reservations", reservation_body(net, "a2", "b1"))
    assert status == 201, channel
    for name in ("switch terrapin", "controller"):
        process = supervisor.process(name)
        assert process is not None
        killed_at = time.time()
        os.kill(process.pid, signal.SIGKILL)

        def back(old: int = process.pid, name: str = name, killed_at: float = killed_at) -> bool:
            # A 200 alone can be the controller's word from before it noticed the dead switch;
            # every switch must have been reconciled again since the kill.
            now = supervisor.process(name)
            try:
                status, health = call(net, "GET", "/health")
            except OSError:  # the controller is not listening yet
                return False
            restored = [report["finished_at"] > killed_at for report in health.get("reconciled", {}).values()]
            return now is not None and now.pid != old and status == 200 and bool(restored) and all(restored)

        assert wait_until(back, timeout=90), supervisor.log_path.read_text()
        log = supervisor.log_path.read_text()
        assert f"{name} (pid {process.pid}) exited killed by signal 9 (SIGKILL)" in log, log
        assert f"{name} restarted (pid {supervisor.process(name).pid}" in log, log  # type: ignore[union-attr]
        # the channel is back on the new switch (reconciled from the controller's store)
        hops = call(net, "GET", f"/reservations/{channel['id']}/counters")[1]
        assert hops and all("telemetry_error" not in hop for hop in hops), hops
    assert call(net, "DELETE", f"/reservations/{channel['id']}")[0] == 204
