"""The real controller against a real switch running p4src, on veths in namespaces this test
creates (trptctl-*): every test runs on terrapin-switch and on p4lang's simple_switch_grpc (the
`[bmv2]` cases; `make bmv2` builds it). No mock switch: entries are read back over P4Runtime
independently of the controller, and reservation messages travel through the data plane as ICMP."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from fakes import RESERVATION
from finsy.proto import p4r as p4runtime_pb2
from netlab import Lab, missing_prerequisites
from topo.p4switch import SWITCH_KINDS

from terrapin.constants import CHANNEL_IN_HOST, MessageCode
from terrapin.protocol.messages import ReservationMessage
from terrapin_tools import p4read

pytestmark = pytest.mark.integration

BODY = RESERVATION
# An unadmitted aggregate every switch polices and lifts to level 6 (docs/controller.md,
# "Aggregates"); admission charges its envelope on every port, so the tests below see it.
AGGREGATE_RATE = 2000
AGGREGATE = {
    "name": "network-control",
    "match": [{"dscp": 48}, {"protocol": 6, "l4_dst_port": "179/0xffff"}],
    "priority": 6,
    "rate": AGGREGATE_RATE,
    "burst": 3000,
    "peak": {"rate": 4000, "burst": 3000},
}


@pytest.fixture(scope="module", params=SWITCH_KINDS)
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    kind = str(request.param)
    missing = missing_prerequisites(kind)
    if missing:
        pytest.skip(missing)
    network = Lab(Path(tmp_path_factory.mktemp(f"trptctl-{kind}")), kind=kind, aggregates=[AGGREGATE])
    try:
        network.up()
        network.start_controller()
        yield network
    finally:
        network.close()


def wait_for(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return True
        except grpc.RpcError:  # e.g. a restarted switch before its pipeline is pushed
            pass
        time.sleep(0.1)
    return False


def selector_bytes(entry: object) -> tuple[bytes, ...]:
    return tuple(m.exact.value for m in entry.match)  # type: ignore[attr-defined]


def test_rest_reservation_programs_every_hop_and_removal_clears_them(lab: Lab) -> None:
    status, res = lab.rest("POST", "/reservations", BODY)
    assert status == 201, res
    assert [h["switch"] for h in res["allocation"]["hops"]] == ["s1", "s2", "s3"]
    for i, hop in enumerate(res["allocation"]["hops"], start=1):
        entries = lab.read_channels(i)
        assert len(entries) == 1
        entry = entries[0]
        assert selector_bytes(entry) == (
            b"\n\x00\x01\x02",
            b"\n\x00\x02\x02",
            b"\x11",
            (5000 << 16 | 6000).to_bytes(4, "big"),
            # where the channel enters: the host side at s1, by port 1 (the trunk from the
            # switch before) at s2 and s3
            CHANNEL_IN_HOST.to_bytes(2, "big") if i == 1 else b"\x01",
        )
        params = {p.param_id: int.from_bytes(p.value, "big") for p in entry.action.action.params}
        assert params[2] == 6  # priority
        # meter in frame bytes: ρ and σ scaled by (1500 + 14) / 1500, burst grown per hop
        assert entry.meter_config.cir == -(-100_000 * 1514 // 1500)
        assert entry.meter_config.cburst == -(-hop["burst"] * 1514 // 1500)
        assert entry.meter_config.pir == entry.meter_config.cir
    assert res["allocation"]["hops"][2]["burst"] > res["allocation"]["hops"][0]["burst"]
    # traffic of the channel is counted on every hop and leaves by queue 6
    lab.send_udp("h1", "10.0.2.2", 5000, 6000, count=20)
    assert wait_for(
        lambda: all(
            h.get("packets", 0) >= 20 for h in lab.rest("GET", f"/reservations/{res['id']}/counters")[1]
        )
    ), lab.rest("GET", f"/reservations/{res['id']}/counters")
    status, s2 = lab.rest("GET", "/status/switches/s2")
    assert status == 200 and "telemetry_error" not in s2, s2
    queue6 = next(p for p in s2["ports"] if p["port"] == 2)["queues"][6]
    assert queue6["channels"] == 1 and queue6["packets"] >= 20
    assert queue6["max_depth_packets"] is not None and queue6["max_delay_us"] is not None
    status, _ = lab.rest("DELETE", f"/reservations/{res['id']}")
    assert status == 204
    for i in (1, 2, 3):
        assert lab.read_channels(i) == []


@contextlib.contextmanager
def destination_serving(lab: Lab) -> Iterator[None]:
    """h2 answers reservation requests (terrapin-host serve) while the block runs."""
    server = lab.host_background("h2", "serve", "--address", "10.0.2.2")
    try:
        time.sleep(0.3)
        yield
    finally:
        server.terminate()
        server.wait(5)


def close_inband(lab: Lab, context: int) -> None:
    """h1 closes its channel in band; every hop's entry goes."""
    code, out = lab.host("h1", "close", "--dst", "10.0.2.2", "--context", str(context))
    assert code == 0 and out["outcome"] == "CLOSED", out
    assert wait_for(lambda: all(lab.read_channels(i) == [] for i in (1, 2, 3)))


def request_600k_at_level_5(lab: Lab, sport: int, context: int) -> tuple[int, dict[str, Any]]:
    """h1 asks h2 in band for 600,000 B/s at level 5, UDP from `sport` to `sport` + 1."""
    return lab.host(
        "h1", "request", "--dst", "10.0.2.2", "--sport", str(sport), "--dport", str(sport + 1),
        "--priority", "5", "--rate", "600000", "--burst", "9000", "--context", str(context),
    )  # fmt: skip


def test_inband_request_is_accepted_then_denied_when_full(lab: Lab) -> None:
    with destination_serving(lab):
        code, out = request_600k_at_level_5(lab, sport=7000, context=41)
        assert code == 0 and out["outcome"] == "ACCEPTED", out
        assert out["hops"] == 3 and out["delay_us"] > 0
        _, listed = lab.rest("GET", "/reservations")
        mine = [r for r in listed if r["context"] == 41]
        assert len(mine) == 1 and mine[0]["origin"] == "inband" and mine[0]["state"] == "active"
        for i in (1, 2, 3):
            assert len(lab.read_channels(i)) == 1
        # 10 Mbit/s ports, 90% reservable (terrapin-switch: 1,125,000 B/s; BMv2: 833 packets/s
        # of 1,500-byte slots, 1,124,550 B/s): 600,000 + 600,000 (+ the aggregate) does not fit
        reservable = lab.rest("GET", "/status/switches/s1")[1]["ports"][1]["reservable_rate"]
        assert reservable == (1_125_000 if lab.kind == "terrapin" else 1_124_550)
        code, out = request_600k_at_level_5(lab, sport=7002, context=42)
        assert code == 1 and out["outcome"] == "DENIED", out
        # the aggregate's 2,000 B/s (1,500-byte packets: also 2,000 B/s of BMv2 slots) is charged too
        assert out["reason_name"] == "RATE"
        assert out["shortfall"] == 1_200_000 + AGGREGATE_RATE - (reservable - 1)
        # status from the first router
        code, report = lab.host("h1", "status")
        assert code == 0 and report["device_id"] == 1
        assert any(r["kind"] == "channel" and r["context"] == 41 for r in report["records"])
        # and the initiator closes it
        close_inband(lab, 41)


def test_controller_restart_reconciles_and_loses_nothing(lab: Lab) -> None:
    status, res = lab.rest("POST", "/reservations", BODY | {"src_port": 5100})
    assert status == 201
    before = [lab.read_channels(i) for i in (1, 2, 3)]
    lab.stop_controller()
    # the data plane keeps the channel while the controller is away
    assert [lab.read_channels(i) for i in (1, 2, 3)] == before
    started = time.monotonic()
    lab.start_controller()
    health = lab.wait_healthy(10)
    assert time.monotonic() - started < 10
    for name in ("s1", "s2", "s3"):
        report = health["reconciled"][name]
        assert report["deleted"] == 0 and report["inserted"] == 0, report
    assert [lab.read_channels(i) for i in (1, 2, 3)] == before
    status, again = lab.rest("GET", f"/reservations/{res['id']}")
    assert status == 200 and again["allocation"] == res["allocation"]
    # the restored ledger still counts it: a request that no longer fits is refused
    status, denied = lab.rest("POST", "/reservations", BODY | {"src_port": 5101, "rate": 1_100_000})
    assert status == 409 and denied["constraint"] == "rate_buffer.rate"
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204


def test_controller_restart_corrects_what_changed_on_the_switches_meanwhile(lab: Lab) -> None:
    """While the controller is away, s2's entry gets another meter and s3 a channel the store does
    not hold: the restarted controller's reconciliation modifies the one and deletes the other
    (entries read back exactly as written are kept without being taken apart; these are not)."""
    status, res = lab.rest("POST", "/reservations", BODY | {"src_port": 5150})
    assert status == 201
    before = [lab.read_channels(i) for i in (1, 2, 3)]
    lab.stop_controller()
    changed = p4runtime_pb2.TableEntry()
    changed.CopyFrom(before[1][0])
    changed.ClearField("counter_data")
    changed.meter_config.cburst += 1000
    stranger = p4runtime_pb2.TableEntry()
    stranger.CopyFrom(before[2][0])
    stranger.ClearField("counter_data")
    flow_key = next(m for m in stranger.match if m.field_id == max(f.field_id for f in stranger.match))
    flow_key.exact.value = (int.from_bytes(flow_key.exact.value, "big") ^ 1).to_bytes(
        len(flow_key.exact.value), "big"
    )
    for i, kind, entry in (
        (2, p4runtime_pb2.Update.MODIFY, changed),
        (3, p4runtime_pb2.Update.INSERT, stranger),
    ):
        update = p4runtime_pb2.Update(type=kind, entity=p4runtime_pb2.Entity(table_entry=entry))
        p4read.write_as_primary(lab.address(i), i, [update])
    assert len(lab.read_channels(3)) == 2
    assert lab.read_channels(2)[0].meter_config.cburst == before[1][0].meter_config.cburst + 1000
    lab.start_controller()
    reconciled = lab.wait_healthy(10)["reconciled"]
    assert (reconciled["s2"]["modified"], reconciled["s2"]["deleted"]) == (1, 0), reconciled["s2"]
    assert (reconciled["s3"]["modified"], reconciled["s3"]["deleted"]) == (0, 1), reconciled["s3"]
    assert (reconciled["s1"]["modified"], reconciled["s1"]["deleted"]) == (0, 0), reconciled["s1"]
    assert [lab.read_channels(i) for i in (1, 2, 3)] == before
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204


def test_switch_restart_gets_pipeline_and_entries_back(lab: Lab) -> None:
    status, res = lab.rest("POST", "/reservations", BODY | {"src_port": 5200})
    assert status == 201
    lab.stop_switch(2)
    # while it is gone: /health says so with a 503, and a request is a 503 at once, not a denial
    assert wait_for(lambda: lab.rest("GET", "/health")[0] == 503), lab.rest("GET", "/health")
    health = lab.rest("GET", "/health")[1]
    assert health["status"] == "degraded" and health["degraded"] == ["s2"], health
    assert "lost" in health["switches"]["s2"]["problem"], health
    asked = time.monotonic()
    status, body = lab.rest("POST", "/reservations", BODY | {"src_port": 5201})
    assert status == 503 and body["switch"] == "s2" and body["retry_after"] > 0, body
    assert time.monotonic() - asked < 1
    lab.start_switch(2)  # empty: no pipeline, no entries
    restarted = time.monotonic()
    assert wait_for(lambda: len(lab.read_channels(2)) == 1, timeout=20)
    took = time.monotonic() - restarted
    assert took < 15, took
    assert lab.wait_healthy(5)["switches"]["s2"]["ready"]
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204
    assert wait_for(lambda: lab.read_channels(2) == [])


def expected_aggregates() -> list[tuple[dict[str, tuple[int, int]], int, dict[str, int]]]:
    """What every switch's aggregates table holds for AGGREGATE: its two matches, first listed
    first (P4Runtime priority 64, then 63), both naming aggregate id 0 at level 6."""
    args = {"aggregate_id": 0, "priority": 6}
    return [
        ({"dscp": (48, 0x3F)}, 64, args),
        ({"protocol": (6, 0xFF), "l4_dst_port": (179, 0xFFFF)}, 63, args),
    ]


def test_aggregates_are_on_every_switch_after_start_and_after_a_switch_restart(lab: Lab) -> None:
    # the meter in frame bytes, as a channel's: × (1500 + 14) / 1500, rounded up
    meter = tuple(-(-v * 1514 // 1500) for v in (AGGREGATE_RATE, 3000, 4000, 3000))
    for i in (1, 2, 3):
        assert sorted(lab.read_aggregates(i), key=lambda e: -e[1]) == expected_aggregates()
        assert lab.read_meter(i, "TerrapinIngress.aggregate_meters", 0) == meter
    # admission holds the aggregate's envelope at level 6 of every port, with no channel
    status, s2 = lab.rest("GET", "/status/switches/s2")
    assert status == 200
    level6 = next(p for p in s2["ports"] if p["port"] == 2)["queues"][6]
    assert (level6["channels"], level6["allocated_rate"], level6["allocated_burst"]) == (
        0,
        AGGREGATE_RATE,
        3000,
    )
    lab.stop_switch(3)
    assert wait_for(lambda: lab.rest("GET", "/health")[0] == 503), lab.rest("GET", "/health")
    lab.start_switch(3)  # empty: no pipeline, no entries, no meter config
    assert wait_for(lambda: len(lab.read_aggregates(3)) == 2, timeout=20)
    assert lab.wait_healthy(10)["switches"]["s3"]["ready"]
    assert sorted(lab.read_aggregates(3), key=lambda e: -e[1]) == expected_aggregates()
    assert lab.read_meter(3, "TerrapinIngress.aggregate_meters", 0) == meter


def test_malformed_inputs_get_clear_errors_and_the_controller_carries_on(lab: Lab) -> None:
    good = ReservationMessage(
        MessageCode.REQUEST_ADMIT,
        99,
        "10.0.1.2",
        "10.0.2.2",
        protocol=17,
        priority=6,
        rate=1000,
        burst=1500,
        max_packet=1500,
    ).encode()
    bad_checksum = good[:2] + bytes([good[2] ^ 0xFF]) + good[3:]
    before = lab.rest("GET", "/health")[1]["protocol"].get("malformed", 0)
    lab.raw_icmp("h1", "10.0.2.2", bad_checksum)
    assert wait_for(lambda: lab.rest("GET", "/health")[1]["protocol"].get("malformed", 0) > before)
    status, body = lab.rest("POST", "/reservations", raw=b'{"src": "10.0.1.2", "rate": ')
    assert status == 400 and body["error"] == "malformed JSON", body
    status, body = lab.rest("POST", "/reservations", BODY | {"priority": 0})
    assert status == 422 and body["detail"][0]["field"] == "priority"
    assert lab.rest("POST", "/reservations", BODY, token=False)[0] == 401
    # still serving, and still admitting
    status, res = lab.rest("POST", "/reservations", BODY | {"src_port": 5300})
    assert status == 201
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204


def test_rest_moving_window_is_enforced_by_the_first_switch(lab: Lab) -> None:
    """At most 4 packets per 10 s (Xave = 2.5 s): of 10 sent at once, s1's window passes 4 and
    marks 6 red (dropped, as the request asks); s2 and s3 police with a meter of the window's
    envelope and pass the 4. Closed and reserved again at once, the channel gets the same
    channel id and a fresh window (a new tag), although the old one has 10 s to run."""
    body = {k: v for k, v in BODY.items() if k not in ("rate", "burst")} | {
        "src_port": 5400,
        "policer": "moving_window",
        "xave_us": 2_500_000,
        "interval_us": 10_000_000,
        "excess": "drop",
    }

    def reserve_and_send() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        status, res = lab.rest("POST", "/reservations", body)
        assert status == 201, res
        channel_ids.append(lab.read_channels(1)[0].action.action.params[0].value)
        lab.send_udp("h1", "10.0.2.2", 5400, 6000, count=10)

        def counted() -> list[dict[str, Any]]:
            return lab.rest("GET", f"/reservations/{res['id']}/counters")[1]  # type: ignore[no-any-return]

        assert wait_for(lambda: counted()[2].get("packets", 0) >= 4), counted()
        time.sleep(0.3)  # nothing more should arrive
        return res, counted()

    channel_ids: list[bytes] = []
    res, hops = reserve_and_send()
    assert (res["allocation"]["rate"], res["allocation"]["burst"]) == (600, 6000)
    actions = [lab.action_name(lab.read_channels(i)[0]) for i in (1, 2, 3)]
    assert actions == [
        "TerrapinIngress.admit_moving_window",
        "TerrapinIngress.admit",
        "TerrapinIngress.admit",
    ]
    assert (hops[0]["packets"], hops[0]["red_packets"]) == (10, 6), hops
    assert [(h["packets"], h["red_packets"]) for h in hops[1:]] == [(4, 0), (4, 0)], hops
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204

    again, hops = reserve_and_send()
    assert channel_ids[0] == channel_ids[1]  # the data plane's channel id (not the REST id) is reused
    # 4 of 10 through s1 again; the id's red counter started from zero with the new entry
    assert [(h["packets"], h["red_packets"]) for h in hops] == [(10, 6), (4, 0), (4, 0)], hops
    assert lab.rest("DELETE", f"/reservations/{again['id']}")[0] == 204


def test_inband_jumping_window_is_installed_at_the_first_switch(lab: Lab) -> None:
    """The policer travels in the request's trailer: the ACCEPT carries the window's (ρ, σ)
    = (9,000 B / 90 ms, 2 × 9,000 B) and echoes the policer; s1 gets the window."""
    with destination_serving(lab):
        code, out = lab.host(
            "h1", "request", "--dst", "10.0.2.2", "--sport", "7100", "--dport", "7101", "--priority", "4",
            "--policer", "jumping_window", "--window-us", "90000", "--burst", "9000", "--context", "51",
        )  # fmt: skip
        assert code == 0 and out["outcome"] == "ACCEPTED", out
        assert (out["rate"], out["burst"]) == (100_000, 18_000)
        assert out["policer"]["kind"] == "jumping_window" and out["policer"]["window_us"] == 90_000
        assert lab.action_name(lab.read_channels(1)[0]) == "TerrapinIngress.admit_jumping_window"
        close_inband(lab, 51)
