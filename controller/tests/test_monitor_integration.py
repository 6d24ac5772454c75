"""The guarantee monitor against real switches running p4src: terrapin-switch, and p4lang's
simple_switch_grpc where `make setup` linked it (build/oracle). Real packets cross veths
between namespaces; the monitor reads the switches over P4Runtime.

One port is modelled wrong on purpose: the controller is told that s3's port towards s2 runs
at 1 Gbit/s while the switch paces it at 10 Mbit/s, so every bound computed for it is far too
small. Channels from h1 to h2 never cross it (they must see no violation); a channel from h2
to h1 does, as its first hop, where a burst queues (the hops after it get the burst already
spaced out at the line rate), and its first burst must raise the network alarm."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import RESERVATION
from netlab import REST_PORT, Lab, missing_prerequisites
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

INTERVAL = 0.5
BODY = RESERVATION


@pytest.fixture(scope="module", params=["terrapin", "bmv2"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    kind = str(request.param)
    reason = missing_prerequisites(kind)
    if reason:
        pytest.skip(reason)
    network = Lab(
        Path(tmp_path_factory.mktemp(f"tmon-{kind}")),
        kind=kind,
        believed_rate_bps={(3, 1): 1_000_000_000},
        monitor={"interval_s": INTERVAL},
    )
    try:
        network.up()
        network.start_controller()
        wait_monitored(network)
        yield network
    finally:
        network.close()


def wait_monitored(lab: Lab) -> None:
    """Until the monitor has read every switch twice: its first read of a switch is only the
    baseline that later reads are compared with."""

    def ready() -> bool:
        state = lab.rest("GET", "/monitor")[1]
        switches = state["switches"].values()
        return state["polls"] >= 3 and all(s["ready"] and not s["error"] for s in switches)

    assert wait_for(ready, timeout=15), lab.rest("GET", "/monitor")[1]


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return None


def metric(lab: Lab, name: str, **labels: str) -> float:
    """The sum of a metric's samples with these labels, from the controller's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{REST_PORT}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def network_events(lab: Lab) -> list[dict[str, Any]]:
    return list(lab.rest("GET", "/events?cause=network")[1])


def test_conforming_traffic_is_checked_at_every_hop_and_breaks_nothing(lab: Lab) -> None:
    # A 30,000-byte burst admitted, 20 packets of 228 bytes sent: well inside the envelope, so
    # the bound (~26 ms per hop) has room for the switch's own lateness on a loaded machine (on
    # the development VM terrapin-switch took up to 2x the wire time to drain such a burst at
    # 10 Mbit/s, which a 6,000-byte burst's 6.6 ms bound does not always absorb).
    status, res = lab.rest("POST", "/reservations", BODY | {"burst": 30_000})
    assert status == 201, res
    # Every switch of the path counts the channel's queue against the bound admission computed.
    for i, hop in enumerate(res["allocation"]["hops"], start=1):
        assert lab.read_queue_bounds(i) == {(2, 6): hop["worst_case_delay_us"]}
    lab.send_udp("h1", "10.0.2.2", 5000, 6000, count=20)
    for switch in ("s1", "s2", "s3"):
        counted = wait_for(
            lambda s=switch: (
                metric(lab, "terrapin_monitor_queue_delay_band_packets_total", switch=s, port="2", queue="6")
                >= 20
            )
        )
        assert counted, f"{switch}: the monitor did not count the channel's 20 packets"
    state = lab.rest("GET", "/monitor")[1]
    assert state["switches"]["s1"]["registers"] is (lab.kind == "terrapin")
    assert all(not s["error"] for s in state["switches"].values()), state["switches"]
    assert metric(lab, "terrapin_monitor_queue_packets_over_bound_total", port="2") == 0
    assert network_events(lab) == [] and not state["alarm"]
    # the channel's rate at its first hop is what it sent, against the meter's rate
    assert metric(lab, "terrapin_monitor_channel_excess_packets_total", channel=str(res["id"])) == 0
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204
    # the bound leaves the data plane one poll after the channel did
    assert wait_for(lambda: all(lab.read_queue_bounds(i) == {} for i in (1, 2, 3)), timeout=5)


def test_a_sender_beyond_its_envelope_is_blamed_on_itself_not_the_network(lab: Lab) -> None:
    status, res = lab.rest("POST", "/reservations", BODY | {"src_port": 5100})
    assert status == 201, res
    # 60 packets of 1,000 bytes at once: ten times the 6,000-byte burst admitted
    lab.send_udp("h1", "10.0.2.2", 5100, 6000, count=60, size=1000)
    found = wait_for(
        lambda: [
            e for e in lab.rest("GET", f"/events?channel={res['id']}")[1] if e["kind"] == "source_excess"
        ]
    )
    assert found, lab.rest("GET", "/monitor")[1]
    (event,) = found
    assert (event["cause"], event["switch"], event["port"]) == ("source", "s1", 2)
    assert event["packets"] > 0
    time.sleep(3 * INTERVAL)  # what was demoted at s1 is metered again downstream
    assert network_events(lab) == [], network_events(lab)
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204


def test_an_understated_bound_raises_the_network_alarm_within_two_polls(lab: Lab) -> None:
    # h2 → h1 leaves s3 by port 1 first, which the controller believes runs at 1 Gbit/s
    # (The same roomy burst as the conforming test, so that only the wrong port is wrong.)
    status, res = lab.rest(
        "POST",
        "/reservations",
        BODY | {"src": "10.0.2.2", "dst": "10.0.1.2", "src_port": 5200, "burst": 30_000},
    )
    assert status == 201, res
    first = res["allocation"]["hops"][0]
    assert (first["switch"], first["port"]) == ("s3", 1)
    bound = first["worst_case_delay_us"]
    # What 1 Gbit/s promises, far below what the real 10 Mbit/s port takes for a burst: on a
    # byte-rate port (30,000 + 720 + 1,500) B at 125 MB/s, 258 µs; BMv2's ports are packet-rate
    # limited, and the model's packet slots make it 349 µs there.
    assert bound < (300 if lab.kind == "terrapin" else 400), bound
    assert wait_for(lambda: lab.read_queue_bounds(3).get((1, 6)) == bound, timeout=5)
    # 20 packets of 200 bytes, within the envelope, take ~4 ms on the 10 Mbit/s port
    lab.send_udp("h2", "10.0.1.2", 5200, 6000, count=20)
    sent = time.time()  # the sender has exited: its burst is on the wire
    alarm = wait_for(lambda: lab.rest("GET", "/monitor")[1]["alarm"], timeout=10)
    state = lab.rest("GET", "/monitor")[1]
    counted = {
        band: metric(lab, "terrapin_monitor_queue_delay_band_packets_total", switch="s3", port="1", band=band)
        for band in ("quarter", "half", "within", "over")
    }
    assert alarm, (counted, [q for q in state["queues"] if q["switch"] == "s3"], lab.workdir)
    events = network_events(lab)
    assert len(events) == 1, events  # s2 and s3 were modelled right: nothing there
    (event,) = events
    assert (event["kind"], event["switch"], event["port"], event["priority"]) == ("queue_delay", "s3", 1, 6)
    assert event["bound"] == bound and event["packets"] > 0
    if lab.kind == "terrapin":
        assert event["figure"] is not None and event["figure"] > bound
    raised_after = event["raised_at"] - sent
    print(f"{lab.kind}: alarm raised {raised_after:.3f} s after the burst (poll interval {INTERVAL} s)")
    print(f"{lab.kind}: {json.dumps(event)}")
    assert raised_after <= 2 * INTERVAL, raised_after
    assert metric(lab, "terrapin_monitor_network_alarm") == 1
    assert metric(lab, "terrapin_monitor_violations_total", cause="network", kind="queue_delay") == 1
    # the burst is over: the next poll sees no late packet and the episode ends
    assert wait_for(lambda: not lab.rest("GET", "/monitor")[1]["alarm"], timeout=5)
    (event,) = network_events(lab)
    assert not event["active"] and event["cleared_at"] is not None
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204


def test_the_live_stream_sends_polls_and_does_not_hold_the_shutdown(lab: Lab) -> None:
    stream = urllib.request.urlopen(f"http://127.0.0.1:{REST_PORT}/events/stream", timeout=10)
    assert stream.headers["content-type"].startswith("text/event-stream")
    kinds = []
    while len(kinds) < 3:  # the current state, then one message per poll
        line = stream.readline().decode()
        if line.startswith("event: "):
            kinds.append(line.split()[1])
    assert kinds == ["monitor"] * 3
    controller = lab.procs["controller"]
    started = time.monotonic()
    lab.stop_controller()  # SIGTERM, with the stream still open
    took = time.monotonic() - started
    stream.close()
    assert controller.returncode == 0 and took < 5, (controller.returncode, took)
    lab.start_controller()
