"""Configuration validation, routing and paths, and the SQLite store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fakes import chain_config

from terrapin.admission import AdmissionLedger, Allocation, ChannelEnvelope, ChannelKey, PortId
from terrapin.config import Config, ConfigError, load_config, parse_config
from terrapin.constants import CHANNEL_IN_HOST
from terrapin.paths import ChannelSelector, NoRoute, Topology
from terrapin.store import ACTIVE, INSTALLING, DuplicateReservation, ReservationStore, StoreFull


def test_chain_paths_and_routes() -> None:
    topo = Topology(chain_config(4))
    assert topo.path("10.0.1.2", "10.0.2.2") == [PortId(f"s{i}", 2) for i in range(1, 5)]
    assert topo.path("10.0.2.2", "10.0.1.2") == [
        PortId("s4", 1),
        PortId("s3", 1),
        PortId("s2", 1),
        PortId("s1", 1),
    ]
    assert topo.path("10.0.1.2", "10.0.3.2") == [PortId("s1", 3)]
    fwd = topo.forwarding("s2")
    routes = {r.prefix: (r.port, r.next_hop_mac) for r in fwd.routes}
    assert routes["10.0.2.2/32"] == (2, "02:00:00:00:03:01")  # towards s3's port 1
    assert routes["10.0.1.2/32"] == (1, "02:00:00:00:01:02")
    assert dict(topo.forwarding("s1").arp_answers) == {
        "10.0.1.1": "02:00:00:00:01:01",
        "10.0.3.1": "02:00:00:00:01:03",
    }
    assert topo.router_ip("s1") == "10.0.1.1"
    with pytest.raises(NoRoute):
        topo.path("10.0.1.2", "10.9.9.9")
    # a channel enters its first switch from the host side, each next one by the trunk from the
    # switch before (port 1 on the chain); only trunk ports are listed as such
    assert topo.in_ports(topo.path("10.0.1.2", "10.0.2.2")) == [CHANNEL_IN_HOST, 1, 1, 1]
    assert topo.in_ports(topo.path("10.0.2.2", "10.0.1.2")) == [CHANNEL_IN_HOST, 2, 2, 2]
    assert topo.forwarding("s2").trunk_ports == (1, 2) and topo.forwarding("s1").trunk_ports == (2,)
    with pytest.raises(NoRoute):
        topo.arrival_port(PortId("s1", 1))  # a host's port leads to no switch


def test_port_models_convert_bits_and_overrides() -> None:
    cfg = chain_config(2, rate_bps=40_000_000, reservable_fraction=0.75)
    models = {m.port: m for m in cfg.port_models()}
    m = models[PortId("s1", 2)]
    assert m.line_rate == 5_000_000 and m.reservable == 3_750_000
    assert m.jitter_us == 0  # a switch is taken to be exact unless told


def test_a_switchs_jitter_reaches_each_of_its_ports() -> None:
    data = chain_config(2).model_dump()
    data["switches"][0]["jitter_us"] = 1_500
    models = {m.port: m for m in parse_config(data).port_models()}
    jitters = {p.port: m.jitter_us for p, m in models.items() if p.switch == "s1"}
    assert jitters == {1: 1_500, 2: 1_500, 3: 1_500}
    assert all(m.jitter_us == 0 for p, m in models.items() if p.switch == "s2")


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["switches"][0]["ports"][0].update(mac="zz"), "switches.0.ports.0.mac"),
        (lambda d: d["hosts"][0].update(mac="02-00-00-00-00-01"), "hosts.0.mac"),
        (lambda d: d["switches"][0]["ports"][0].update(gateway_ip="10.0.1.256"), "ports.0.gateway_ip"),
        (lambda d: d["switches"][0].update(router_ip="10.0.1"), "switches.0.router_ip"),
        (lambda d: d["switches"][0]["ports"][1].update(peer="s9:1"), "peer s9:1 is not a port"),
        (lambda d: d["hosts"][0].update(port=7), "host h1"),
        (lambda d: d.update(admission={"tests": ["nonsense"]}), "admission.tests.0"),
        (lambda d: d.update(bogus=1), "bogus"),
        (lambda d: d["switches"][0]["ports"][0].update(admission={"queue_capacity": -1}), "s1:1 admission"),
        (lambda d: d["switches"][0].update(kind="bmv2"), "kind bmv2 needs thrift_port"),
        (lambda d: d["switches"][0].update(kind="p4lang"), "switches.0.kind"),
        (lambda d: d["switches"][0]["ports"][0].update(rate_pps=0), "switches.0.ports.0.rate_pps"),
        (lambda d: d["switches"][0].update(jitter_us=-1), "switches.0.jitter_us"),
    ],
)
def test_bad_configs_name_the_key(mutate: object, needle: str) -> None:
    good = chain_config(2).model_dump(by_alias=True)
    mutate(good)  # type: ignore[operator]
    with pytest.raises(ConfigError) as info:
        parse_config(good)
    assert needle in str(info.value)


def test_yaml_and_toml_files(tmp_path: Path) -> None:
    y = tmp_path / "c.yaml"
    y.write_text("switches: [}\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(y)
    with pytest.raises(ConfigError, match="No such file"):
        load_config(tmp_path / "missing.yaml")
    t = tmp_path / "c.toml"
    t.write_text('store = ":memory:"\n[[switches]]\nname = "s1"\naddress = "127.0.0.1:1"\nports = []\n')
    assert load_config(t).switches[0].name == "s1"


def _allocation(context: int) -> Allocation:
    ledger = AdmissionLedger(chain_config(2).port_models())
    d = ledger.admit(
        ChannelKey("10.0.1.2", context),
        [PortId("s1", 2), PortId("s2", 2)],
        ChannelEnvelope(5, 100_000, 3000, 1500, delay_bound_us=50_000, avg_idle_us=7),
    )
    assert isinstance(d, Allocation)
    return d


def test_store_round_trips_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "db" / "t.sqlite"
    store = ReservationStore(path)
    sel = ChannelSelector("10.0.1.2", "10.0.2.2", 17, 2**63 + 5)
    a = _allocation(1)
    r = store.add(a, sel, "rest", True)
    assert r.channel_id == 0 and r.state == INSTALLING
    store.add(_allocation(2), sel, "inband", False, state=ACTIVE)
    store.remove(ChannelKey("10.0.1.2", 1))
    r3 = store.add(_allocation(3), sel, "rest", True)
    assert r3.channel_id == 0  # lowest free id is reused
    store.close()
    again = ReservationStore(path)
    got = again.get(ChannelKey("10.0.1.2", 3))
    assert got is not None and got.allocation == _allocation(3) and got.selector == sel
    assert [x.channel_id for x in again.all()] == [0, 1]
    assert again.largest_context("10.0.1.2") == 3


def test_reservation_ids_are_never_reused_across_reopens(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    store = ReservationStore(path)
    sel = ChannelSelector("10.0.1.2", "10.0.2.2", 17, 1)
    first = store.add(_allocation(1), sel, "rest", True)
    second = store.add(_allocation(2), sel, "rest", True)
    assert first.reservation_id == 1 and second.reservation_id == 2
    store.remove(second.key)  # the highest id: no row remembers it any more
    store.close()
    again = ReservationStore(path)
    third = again.add(_allocation(3), sel, "rest", True)
    # the channel id (a counter index) is reused; the reservation id is not
    assert third.channel_id == second.channel_id and third.reservation_id == 3
    got = again.get_by_reservation_id(3)
    assert got is not None and got.key == ChannelKey("10.0.1.2", 3)
    assert again.get_by_reservation_id(2) is None


def test_a_store_from_before_reservation_ids_keeps_its_channel_ids_as_ids(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    store = ReservationStore(path)
    sel = ChannelSelector("10.0.1.2", "10.0.2.2", 17, 1)
    for context in (1, 2, 3):
        store.add(_allocation(context), sel, "rest", True)
    store.remove(ChannelKey("10.0.1.2", 1))
    store.close()
    # what an earlier controller left: no reservation_id column, no meta table
    db = sqlite3.connect(path)
    db.executescript(
        "DROP TABLE schema_migrations; DROP TABLE holds; DROP TABLE journal; DROP TABLE lease;"
        "DROP TABLE meta; DROP INDEX reservations_id;"
        "CREATE TABLE r AS SELECT channel_id, initiator, context, src, dst, protocol, flow_key, origin,"
        " state, demote, allocation, created_at FROM reservations;"
        "DROP TABLE reservations; ALTER TABLE r RENAME TO reservations;"
    )
    db.close()
    again = ReservationStore(path)
    assert [(r.channel_id, r.reservation_id) for r in again.all()] == [(1, 1), (2, 2)]
    assert again.add(_allocation(4), sel, "rest", True).reservation_id == 3


def test_store_refuses_duplicates_and_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import terrapin.store.transaction as transaction_module

    store = ReservationStore(":memory:")
    sel = ChannelSelector("10.0.1.2", "10.0.2.2", 17, 1)
    store.add(_allocation(1), sel, "rest", True)
    with pytest.raises(DuplicateReservation):
        store.add(_allocation(1), sel, "rest", True)
    assert store.count() == 1
    monkeypatch.setattr(transaction_module, "MAX_CHANNEL_ID", 2)
    store.add(_allocation(2), sel, "rest", True)
    with pytest.raises(StoreFull):
        store.add(_allocation(3), sel, "rest", True)


def test_packet_rate_ports_are_modelled_in_slots() -> None:
    """A port with rate_pps (BMv2): C = rate_pps largest-packet slots, the protocol's messages and
    a lower level's packet one slot each; a port without it keeps its byte rate."""
    data = chain_config(2, rate_bps=10_000_000).model_dump(by_alias=True)
    data["switches"][0].update(kind="bmv2", thrift_port=9091)
    data["links"] = {"enabled": False}  # no link probes (the next test charges them)
    port2 = next(p for p in data["switches"][0]["ports"] if p["number"] == 2)
    port2["rate_pps"] = 833  # 10 Mbit/s of 1,500-byte packets
    models = {m.port: m for m in parse_config(data).port_models()}
    bmv2, ours = models[PortId("s1", 2)], models[PortId("s2", 2)]
    assert (bmv2.line_rate, bmv2.packet_slot, bmv2.lower_packet) == (833 * 1500, 1500, 1500)
    # 12,000 B/s of 90-byte messages is 134 messages/s; a burst of eight is eight slots.
    assert (bmv2.control_rate, bmv2.control_burst) == (134 * 1500, 8 * 1500)
    assert (ours.line_rate, ours.packet_slot) == (1_250_000, 0)
    assert (ours.control_rate, ours.control_burst) == (12_000, 720)


def test_link_probes_are_charged_on_trunk_ports_from_best_efforts_floor() -> None:
    """A trunk port carries the link watch's probes at level 7: 60-byte frames every
    probe_interval_ms (a slot each on a packet-rate port), two back to back at most, in the
    protocol's envelope, so every delay bound counts them; a host's port carries none. Their
    rate comes out of best effort's floor, so a port admits as much as without them."""
    data = chain_config(2, rate_bps=10_000_000).model_dump(by_alias=True)
    data["links"] = {"probe_interval_ms": 10, "down_after_ms": 35}
    data["switches"][0].update(kind="bmv2", thrift_port=9091)
    trunk = next(p for p in data["switches"][0]["ports"] if ":" in p["peer"])
    trunk["rate_pps"] = 833
    config = parse_config(data)
    models = {m.port: m for m in config.port_models()}
    assert config.link_probe_bytes() == 60
    bmv2 = models[PortId("s1", trunk["number"])]
    assert (bmv2.probe_rate, bmv2.control_rate, bmv2.control_burst) == (
        100 * 1500, 134 * 1500 + 100 * 1500, 8 * 1500 + 2 * 1500)  # fmt: skip
    byte_trunk = next(m for p, m in models.items() if p.switch == "s2" and m.probe_rate)
    assert (byte_trunk.probe_rate, byte_trunk.control_rate, byte_trunk.control_burst) == (6_000, 18_000, 840)
    host_port = next(m for m in models.values() if m.port.switch == "s2" and not m.probe_rate)
    assert (host_port.control_rate, host_port.control_burst) == (12_000, 720)

    def admitted(model_for: Callable[[], Config]) -> int:
        """How much ρ one port of s2 admits at level 1, in 1,000 B/s channels."""
        ledger = AdmissionLedger([m for m in model_for().port_models() if m.port == byte_trunk.port])
        count = 0
        while isinstance(ledger.admit(ChannelKey("h", count), [byte_trunk.port],
                                      ChannelEnvelope(1, 1_000, 1_500, 1_500)), Allocation):  # fmt: skip
            count += 1
        return count

    without = data | {"links": {"enabled": False}}
    assert admitted(lambda: parse_config(data)) == admitted(lambda: parse_config(without)) > 0
