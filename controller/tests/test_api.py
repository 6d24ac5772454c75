"""REST API with the real FastAPI app, the real ledger and SQLite, and the switches faked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import FakeFabric, chain_config
from fastapi.testclient import TestClient

from terrapin.admission.model import ChannelKey
from terrapin.config import Config
from terrapin.main import Controller

TOKEN = {"Authorization": "Bearer secret-token"}
BODY = {
    "src": "10.0.1.2",
    "dst": "10.0.2.2",
    "protocol": "udp",
    "src_port": 5000,
    "dst_port": 6000,
    "priority": 6,
    "rate": 100_000,
    "burst": 6000,
    "max_packet": 1500,
}


def make(store: str = ":memory:", **admission: Any) -> tuple[Controller, FakeFabric]:
    cfg = chain_config(4, rate_bps=8_000_000, **admission).model_copy(update={"store": store})
    made: list[FakeFabric] = []

    def factory(config: Config, topo: Any, on_packet: Any, desired: Any) -> FakeFabric:
        made.append(FakeFabric(topo.switch_names))
        return made[0]

    ctl = Controller(cfg, fabric_factory=factory)
    return ctl, made[0]


@pytest.fixture
def api() -> tuple[TestClient, FakeFabric, Controller]:
    ctl, fab = make()
    with TestClient(ctl.app) as client:
        yield client, fab, ctl  # type: ignore[misc]


def test_health(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, _fab, _ctl = api
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["switches"]["s1"]["ready"] is True


def test_create_list_get_delete(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, fab, _ctl = api
    r = client.post("/reservations", json=BODY, headers=TOKEN)
    assert r.status_code == 201, r.text
    res = r.json()
    alloc = res["allocation"]
    assert [h["switch"] for h in alloc["hops"]] == ["s1", "s2", "s3", "s4"]
    # hop 1: (6,000 + 720 protocol burst + 1,500 best-effort packet) / (1,000,000 − 12,000) s
    assert alloc["hops"][0]["worst_case_delay_us"] == -(-(6000 + 720 + 1500) * 10**6 // 988_000)
    assert alloc["worst_case_delay_us"] == sum(h["worst_case_delay_us"] for h in alloc["hops"])
    assert res["src_port"] == 5000 and res["context"] >= 2**31 and res["state"] == "active"
    assert all(len(t) == 1 for t in fab.entries.values())
    assert client.get("/reservations").json()[0]["id"] == res["id"]
    assert client.get(f"/reservations/{res['id']}").json()["flow_key"] == 5000 << 16 | 6000
    counters = client.get(f"/reservations/{res['id']}/counters").json()
    assert counters[0]["packets"] == 5
    assert client.delete(f"/reservations/{res['id']}", headers=TOKEN).status_code == 204
    assert all(len(t) == 0 for t in fab.entries.values())
    assert client.get(f"/reservations/{res['id']}").status_code == 404
    assert client.delete(f"/reservations/{res['id']}", headers=TOKEN).status_code == 404


def test_mutations_need_the_token(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, _fab, _ctl = api
    assert client.post("/reservations", json=BODY).status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert client.post("/reservations", json=BODY, headers=bad).status_code == 401
    assert client.delete("/reservations/0", headers=bad).status_code == 401


def test_denial_is_409_naming_the_constraint(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, _fab, _ctl = api
    assert client.post("/reservations", json=BODY | {"rate": 800_000}, headers=TOKEN).status_code == 201
    r = client.post("/reservations", json=BODY | {"rate": 200_000, "src_port": 1}, headers=TOKEN)
    assert r.status_code == 409
    body = r.json()
    assert body["constraint"] == "rate_buffer.rate" and body["excess"] == 100_001
    assert body["unit"] == "bytes/s" and body["violations"][0]["switch"] == "s1"
    small = BODY | {"rate": 50_000, "src_port": 2}
    assert client.post("/reservations", json=small | {"context": 5}, headers=TOKEN).status_code == 201
    again = client.post("/reservations", json=small | {"context": 5, "src_port": 3}, headers=TOKEN)
    assert again.status_code == 409 and again.json()["constraint"] == "context_conflict"
    # the same selector (the switch's match) under another context is refused too
    twin = client.post("/reservations", json=small | {"context": 6, "rate": 1000}, headers=TOKEN)
    assert twin.status_code == 409 and twin.json()["constraint"] == "context_conflict"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"priority": 9}, "priority"),
        ({"priority": 7}, "priority"),
        ({"rate": -1}, "rate"),
        ({"rate": 2**40}, "rate"),
        ({"src": "nope"}, "src"),
        ({"protocol": "icmp"}, "protocol"),
        ({"dst_port": 70000}, "dst_port"),
        ({"unknown": 1}, "unknown"),
        ({"burst": 100}, "body"),
    ],
)
def test_invalid_bodies_name_the_field(
    api: tuple[TestClient, FakeFabric, Controller], change: dict[str, Any], field: str
) -> None:
    client, _fab, _ctl = api
    r = client.post("/reservations", json=BODY | change, headers=TOKEN)
    assert r.status_code == 422
    assert any(p["field"] == field for p in r.json()["detail"]), r.json()


def test_broken_json_and_missing_fields(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, _fab, _ctl = api
    r = client.post(
        "/reservations", content=b"{not json", headers=TOKEN | {"content-type": "application/json"}
    )
    assert r.status_code == 422
    r = client.post("/reservations", json={"src": "10.0.1.2"}, headers=TOKEN)
    fields = {p["field"] for p in r.json()["detail"]}
    assert {"dst", "protocol", "priority", "rate", "burst", "max_packet"} <= fields


def test_unknown_destination_is_no_route(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, _fab, _ctl = api
    r = client.post("/reservations", json=BODY | {"dst": "10.9.9.9"}, headers=TOKEN)
    assert r.status_code == 409 and r.json()["constraint"] == "no_route"


def test_switch_fault_rolls_back_and_says_which(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, fab, ctl = api
    fab.fail_install_on.add("s3")
    r = client.post("/reservations", json=BODY, headers=TOKEN)
    assert r.status_code == 409 and r.json()["constraint"] == "switch.s3"
    assert all(len(t) == 0 for t in fab.entries.values())
    assert ctl.ledger.channels() == [] and ctl.store.all() == []
    fab.fail_install_on.clear()
    assert client.post("/reservations", json=BODY, headers=TOKEN).status_code == 201


def test_status_shows_allocation_and_telemetry(api: tuple[TestClient, FakeFabric, Controller]) -> None:
    client, fab, _ctl = api
    client.post("/reservations", json=BODY, headers=TOKEN)
    body = client.get("/status/switches/s2").json()
    port = next(p for p in body["ports"] if p["port"] == 2)
    q6 = port["queues"][6]
    assert port["allocated_rate"] == 100_000 and port["line_rate"] == 1_000_000
    assert q6["channels"] == 1 and q6["max_depth_packets"] == 3 and q6["max_delay_us"] == 1000
    fab.down.add("s2")
    body = client.get("/status/switches/s2").json()
    assert "telemetry_error" in body and body["ports"][0]["queues"][6]["max_depth_packets"] is None
    assert client.get("/status/switches/nope").status_code == 404
    assert len(client.get("/status/switches").json()) == 4


def test_restart_restores_every_reservation(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    ctl, _fab = make(db)
    with TestClient(ctl.app) as client:
        first = client.post("/reservations", json=BODY | {"rate": 800_000}, headers=TOKEN).json()
    again, _fab2 = make(db)
    with TestClient(again.app) as client:
        assert client.get(f"/reservations/{first['id']}").json()["allocation"] == first["allocation"]
        # the ledger was restored too: the port is still nearly full
        r = client.post("/reservations", json=BODY | {"rate": 200_000, "src_port": 9}, headers=TOKEN)
        assert r.status_code == 409
        assert [e.channel_id for e in again.service.desired_entries("s3")] == [first["id"]]
    assert again.ledger.get(ChannelKey("10.0.1.2", first["context"])) is not None
