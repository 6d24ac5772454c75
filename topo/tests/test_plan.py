"""The topology plans: addressing, paths and routes, and the controller configuration they yield."""

from __future__ import annotations

from pathlib import Path

import pytest

from terrapin.config import parse_config
from topo import chain, christie, sequoia
from topo import controller_config as controller_config_module
from topo.controller_config import controller_config
from topo.p4switch import JITTER_ENV, SWITCH_JITTER_US
from topo.plan import NetworkPlan
from topo.video import HEADER, MAX_PACKET_BYTES, PEAK_FRAME_BYTES, UDP_IP_OVERHEAD, frame_sizes, segment


def test_christie_is_seed_000_testbed() -> None:
    plan = christie.plan()
    assert list(plan.switches) == ["terrapin"]
    subnet_a = sorted(h.name for h in plan.hosts.values() if h.ip.startswith("10.0.1."))
    subnet_b = sorted(h.name for h in plan.hosts.values() if h.ip.startswith("10.0.2."))
    assert (subnet_a, subnet_b) == (["a1", "a2", "a3"], ["b1", "b2"])
    assert plan.mtu == 4500
    assert {p.rate_bps for p in plan.switches["terrapin"].ports.values()} == {100_000_000}
    assert christie.plan(rate_mbps=10).switches["terrapin"].ports[1].rate_bps == 10_000_000


@pytest.mark.parametrize(
    ("plan", "src", "dst", "hops"),
    [
        (christie.plan(), "a1", "b1", [("terrapin", 1, 4)]),
        (sequoia.plan(), "faith", "paola", [("ucb", 1, 4), ("ucsb", 2, 3), ("ucla", 2, 3), ("ucsd", 3, 1)]),
        (chain.plan(), "src1", "sink", [("s1", 1, 2), ("s2", 2, 3), ("s3", 2, 3), ("s4", 3, 2)]),
        (chain.plan(), "src4", "sink", [("s4", 1, 2)]),
    ],
)
def test_paths(plan: NetworkPlan, src: str, dst: str, hops: list[tuple[str, int, int]]) -> None:
    assert plan.path(src, dst) == hops


def test_trunks_are_t1_in_sequoia() -> None:
    plan = sequoia.plan()
    trunks = plan.trunks()
    assert len(trunks) == 3
    assert {rate for *_, rate in trunks} == {sequoia.T1_RATE_BPS}
    # Each trunk's two ends point at each other.
    for a, pa, b, pb, _ in trunks:
        assert plan.switches[a].ports[pa].peer_port == pb
        assert plan.switches[b].ports[pb].peer_port == pa


def test_routes_rewrite_to_next_hop_mac() -> None:
    plan = sequoia.plan()
    routes = {r.prefix: r for r in plan.routes("ucsb")}
    paola = plan.hosts["paola"]
    towards = routes[f"{paola.address}/32"]
    peer = plan.switches["ucsb"].ports[towards.port]
    assert peer.peer == "ucla"
    assert towards.next_hop_mac == plan.switches["ucla"].ports[peer.peer_port or 0].mac
    local = {r.prefix: r for r in plan.routes("ucsd")}[f"{paola.address}/32"]
    assert (local.port, local.next_hop_mac) == (paola.port, paola.mac)


def test_addresses_and_macs_unique() -> None:
    for plan in (christie.plan(), sequoia.plan(), chain.plan()):
        hosts = list(plan.hosts.values())
        assert len({h.address for h in hosts}) == len(hosts)
        macs = [h.mac for h in hosts] + [p.mac for s in plan.switches.values() for p in s.ports.values()]
        assert len(set(macs)) == len(macs)
        assert len({s.grpc_port for s in plan.switches.values()}) == len(plan.switches)


@pytest.mark.parametrize("make_plan", [christie.plan, sequoia.plan, chain.plan])
def test_controller_accepts_generated_config(make_plan: object, tmp_path: Path) -> None:
    plan = make_plan()  # type: ignore[operator]
    config = parse_config(controller_config(plan, tmp_path, rest_port=18080, token="t"))
    assert {s.name for s in config.switches} == set(plan.switches)
    ports = sum(len(s.ports) for s in plan.switches.values())
    assert len(config.port_models()) == ports
    # Each queue's buffer is the switch's queue capacity in packets of the MTU.
    assert config.admission.queue_capacity == plan.queue_capacity * plan.mtu


def test_replicas_share_a_config_with_the_postgresql_store(tmp_path: Path) -> None:
    """make run STORE=postgres: one file for every replica, each naming itself with flags."""
    dsn = "postgresql://terrapin@127.0.0.1:15432/christie"
    data = controller_config(christie.plan(), tmp_path, rest_port=18080, token="t", postgres_dsn=dsn)
    config = parse_config(data)
    assert config.store == dsn
    assert config.replication is not None and config.replication.replica is None
    assert "replication" not in controller_config(christie.plan(), tmp_path, rest_port=18080, token="t")


@pytest.mark.parametrize("make_plan", [christie.plan, sequoia.plan, chain.plan])
def test_bmv2_config_declares_packet_rate_ports(
    make_plan: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On BMv2 every port is shaped in packets/s of the MTU, and the controller is told so."""
    monkeypatch.setattr(controller_config_module, "bmv2_command", lambda name: f"/opt/bmv2/{name}")
    plan = make_plan()  # type: ignore[operator]
    data = controller_config(plan, tmp_path, rest_port=18080, token="t", switch_kind="bmv2")
    config = parse_config(data)
    for sw in config.switches:
        assert (sw.kind, sw.thrift_port) == ("bmv2", plan.switches[sw.name].thrift_port)
        assert sw.bmv2_cli == "/opt/bmv2/simple_switch_CLI"
        for port in sw.ports:
            assert port.rate_pps == port.rate_bps // (8 * plan.mtu)
    for model in config.port_models():
        rate_pps = plan.switches[model.port.switch].ports[model.port.port].rate_bps // (8 * plan.mtu)
        assert (model.line_rate, model.packet_slot) == (rate_pps * plan.mtu, plan.mtu)
    assert len({s.thrift_port for s in plan.switches.values()}) == len(plan.switches)


def test_video_frames_follow_seed_000() -> None:
    sizes = frame_sizes(18_000)
    assert max(sizes) <= PEAK_FRAME_BYTES
    assert frame_sizes(100) == frame_sizes(100)  # seeded: both demo runs send the same video
    peak_bps = max(sizes) * 8 * 30
    assert 5.0e6 < peak_bps <= 5.25e6
    for size in (1, 4000, PEAK_FRAME_BYTES):
        payloads = segment(size)
        assert sum(payloads) == size
        assert all(p + HEADER.size + UDP_IP_OVERHEAD <= MAX_PACKET_BYTES for p in payloads)


@pytest.mark.parametrize("kind", ["terrapin", "bmv2"])
def test_every_switch_is_declared_with_its_kinds_jitter(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller is told each switch's jitter (docs/controller.md "Jitter"): its kind's
    measured figure, or TERRAPIN_JITTER_US for every switch; the ports' models carry it."""
    monkeypatch.setattr(controller_config_module, "bmv2_command", lambda name: f"/opt/bmv2/{name}")
    monkeypatch.delenv(JITTER_ENV, raising=False)
    config = parse_config(
        controller_config(sequoia.plan(), tmp_path, rest_port=18080, token="t", switch_kind=kind)
    )
    assert {s.jitter_us for s in config.switches} == {SWITCH_JITTER_US[kind]} and SWITCH_JITTER_US[kind] > 0
    assert {m.jitter_us for m in config.port_models()} == {SWITCH_JITTER_US[kind]}
    monkeypatch.setenv(JITTER_ENV, "750")
    config = parse_config(
        controller_config(sequoia.plan(), tmp_path, rest_port=18080, token="t", switch_kind=kind)
    )
    assert {s.jitter_us for s in config.switches} == {750}
    monkeypatch.setenv(JITTER_ENV, "1.5ms")
    with pytest.raises(ValueError, match="whole microseconds"):
        controller_config(sequoia.plan(), tmp_path, rest_port=18080, token="t", switch_kind=kind)
