"""The guarantee monitor without a data plane: its expectations against the admission model,
its conclusions from scripted samples, episodes, the REST and /metrics views. The real
switches (terrapin-switch, and p4lang's simple_switch_grpc where built) are in
test_monitor_integration.py."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes import RESERVATION, FakeFabric, chain_config
from fastapi.testclient import TestClient

from terrapin.admission import AdmissionLedger, Denial
from terrapin.admission.model import JUMPING_WINDOW, ChannelEnvelope, ChannelKey, Policer, PortId
from terrapin.config import Config, MonitorConfig
from terrapin.main import Controller
from terrapin.monitor.checks import (
    DOWNSTREAM_EXCESS,
    NETWORK,
    POLICER,
    QUEUE_DELAY,
    SOURCE,
    SOURCE_EXCESS,
    evaluate,
    hop_expectations,
    queue_expectations,
)
from terrapin.monitor.events import EventLog
from terrapin.monitor.service import BoundsFirstProgrammer, GuaranteeMonitor, thresholds_to_install
from terrapin.p4program import DELAY_BAND_NAMES, DELAY_BANDS
from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.reservations import ReservationService
from terrapin.store import ReservationStore
from terrapin.switches import MonitorSample

REPO = Path(__file__).resolve().parents[2]
SELECTOR = ChannelSelector("10.0.1.2", "10.0.2.2", 17, 5000 << 16 | 6000)
ENVELOPE = ChannelEnvelope(priority=6, rate=100_000, burst=6000, max_packet=1500)


def ledger_with_channel(switches: int = 2) -> tuple[Config, AdmissionLedger, ReservationStore]:
    config = chain_config(switches, rate_bps=10_000_000)
    ledger = AdmissionLedger(config.port_models())
    store = ReservationStore(":memory:")
    path = [PortId(f"s{i}", 2) for i in range(1, switches + 1)]
    allocation = ledger.admit(ChannelKey("10.0.1.2", 7), path, ENVELOPE)
    store.add(allocation, SELECTOR, "rest", True)  # type: ignore[arg-type]
    return config, ledger, store


def entries(ledger: AdmissionLedger, store: ReservationStore) -> Any:
    """The reservation service's own entries of a reservation (the policer it programs), on the
    chain its reservations cross (a hop's entry names a pin where the path leaves the route)."""
    switches = max((int(h.port.switch[1:]) for r in store.all() for h in r.allocation.hops), default=1)
    return ReservationService(ledger, Topology(chain_config(switches)), store, FakeFabric([])).entries


def sample(
    switch: str,
    at: float,
    *,
    bands: tuple[int, int, int, int] = (0, 0, 0, 0),
    traffic: tuple[int, int] = (0, 0),
    channel: tuple[int, int] | None = (0, 0),
    excess: tuple[int, int, int, int] = (0, 0, 0, 0),
    max_delay: int | None = None,
) -> MonitorSample:
    cell = (2, 6)
    return MonitorSample(
        switch=switch,
        started=at,
        finished=at + 0.01,
        bands={cell: bands},
        queue_traffic={cell: traffic},
        max_delay_us=None if max_delay is None else {cell: max_delay},
        max_depth_packets=None if max_delay is None else {cell: 1},
        channels={} if channel is None else {SELECTOR: channel},
        excess={0: excess},
    )


# ---- expectations come from the admission model ---------------------------------------------


def test_queue_bounds_are_the_admission_models_own() -> None:
    _config, ledger, _store = ledger_with_channel()
    expected = queue_expectations(ledger)
    for pid in (PortId("s1", 2), PortId("s2", 2)):
        (level,) = expected[pid]
        status = ledger.port_status(pid)
        assert level.priority == 6 and level.channels == 1
        assert level.bound_us == status.levels[5].worst_case_delay_us
        # (σ_hop + protocol burst 720 + one 1500-byte lower packet), the bound's numerator
        assert level.backlog_bound == status.levels[5].burst + 720 + 1500
    assert PortId("s1", 1) not in expected  # no channel leaves by the host port


def test_hop_meters_are_the_ones_programmed() -> None:
    _config, ledger, store = ledger_with_channel()
    first, second = hop_expectations(store.all(), entries(ledger, store))
    assert first.first_hop and not second.first_hop
    assert first.cir == -(-100_000 * 1514 // 1500)  # frame bytes, as switches.entry_for_hop
    assert second.burst > first.burst  # grown by ρ × the upstream bound


def test_a_larger_bound_applies_at_once_a_smaller_one_a_poll_later() -> None:
    pending: dict[tuple[int, int], int] = {}
    cell = (2, 6)
    assert thresholds_to_install({cell: 500}, {}, pending, 1, False) == {cell: 500}
    assert thresholds_to_install({cell: 800}, {cell: 500}, pending, 1, False) == {cell: 800}
    # a channel left: the old bound stays through the poll that first sees the decrease
    assert thresholds_to_install({cell: 300}, {cell: 800}, pending, 2, True) == {cell: 800}
    assert thresholds_to_install({cell: 300}, {cell: 800}, pending, 2, True) == {cell: 800}
    assert thresholds_to_install({cell: 300}, {cell: 800}, pending, 3, True) == {cell: 300}
    # raising before a set-up never lowers anything
    assert thresholds_to_install({}, {cell: 300}, pending, 9, False) == {cell: 300}
    assert thresholds_to_install({}, {cell: 300}, pending, 10, True) == {}


# ---- conclusions ----------------------------------------------------------------------------


def test_the_first_sample_is_only_a_baseline() -> None:
    _config, ledger, store = ledger_with_channel()
    now = {"s1": sample("s1", 0.0, bands=(10, 0, 0, 99))}
    verdict = evaluate(
        {}, now, queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store)), {}
    )
    assert verdict.findings == [] and verdict.queues == []


def test_packets_over_the_bound_are_a_network_violation() -> None:
    _config, ledger, store = ledger_with_channel()
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    bound = queues[PortId("s1", 2)][0].bound_us
    before = {"s1": sample("s1", 0.0, bands=(5, 1, 0, 0), traffic=(6, 6000))}
    clean = {"s1": sample("s1", 1.0, bands=(25, 3, 1, 0), traffic=(29, 29000), max_delay=bound - 1)}
    verdict = evaluate(before, clean, queues, hops, {"s1": {(2, 6): bound}})
    assert verdict.findings == []
    (q,) = verdict.queues
    assert q.bands == (20, 2, 1, 0) and q.packets == 23 and q.worst_band == "within"
    late = {"s1": sample("s1", 2.0, bands=(25, 3, 1, 4), traffic=(33, 33000), max_delay=3 * bound)}
    (finding,) = evaluate(clean, late, queues, hops, {"s1": {(2, 6): bound}}).findings
    assert (finding.kind, finding.cause, finding.packets) == (QUEUE_DELAY, NETWORK, 4)
    assert finding.figure == 3 * bound and finding.bound == bound
    assert "4 of 4 packets waited longer than the admitted bound" in finding.message


def test_a_switch_without_registers_still_has_the_bands() -> None:
    _config, ledger, store = ledger_with_channel()
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    before = {"s1": sample("s1", 0.0)}
    after = {"s1": sample("s1", 1.0, bands=(0, 0, 0, 2))}
    (finding,) = evaluate(before, after, queues, hops, {}).findings
    assert finding.kind == QUEUE_DELAY and finding.figure is None and finding.packets == 2


def test_excess_at_the_first_hop_is_the_source_later_hops_are_the_network() -> None:
    _config, ledger, store = ledger_with_channel()
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    before = {"s1": sample("s1", 0.0), "s2": sample("s2", 0.0)}
    # the source sent beyond its envelope: s1 marks it; s2 meters the demoted excess too
    after = {
        "s1": sample("s1", 1.0, channel=(50, 75_000), excess=(0, 0, 20, 30_000)),
        "s2": sample("s2", 1.0, channel=(50, 75_000), excess=(0, 0, 5, 7_500)),
    }
    (finding,) = evaluate(before, after, queues, hops, {}).findings
    assert (finding.kind, finding.cause, finding.switch) == (SOURCE_EXCESS, SOURCE, "s1")
    # the next poll s1 is clean but s2 still marks what was queued: not blamed on the network
    later = {
        "s1": sample("s1", 2.0, channel=(60, 90_000), excess=(0, 0, 20, 30_000)),
        "s2": sample("s2", 2.0, channel=(60, 90_000), excess=(0, 0, 7, 10_500)),
    }
    assert (
        evaluate(
            after, later, queues, hops, {}, recent_source_excess=frozenset({hops[0].reservation_id})
        ).findings
        == []
    )
    # a conforming source whose packets a downstream meter marks: the network bunched them
    (finding,) = evaluate(after, later, queues, hops, {}).findings
    assert (finding.kind, finding.cause, finding.switch) == (DOWNSTREAM_EXCESS, NETWORK, "s2")


def test_green_traffic_beyond_the_meters_envelope_is_a_broken_policer() -> None:
    _config, ledger, store = ledger_with_channel()
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    first = hops[0]
    before = {"s1": sample("s1", 0.0)}
    # the window is 1.01 s: CBS + CIR × 1.01 s plus two frames is what a working meter allows
    allowed = first.cburst + round(first.cir * 1.01) + 2 * (1500 + 18)
    fits = {"s1": sample("s1", 1.0, channel=(100, allowed))}
    assert evaluate(before, fits, queues, hops, {}).findings == []
    beyond = {"s1": sample("s1", 1.0, channel=(200, allowed + 1))}
    (finding,) = evaluate(before, beyond, queues, hops, {}).findings
    assert (finding.kind, finding.cause, finding.figure, finding.bound) == (
        POLICER,
        NETWORK,
        allowed + 1,
        allowed,
    )


def test_a_counter_that_went_back_starts_a_new_baseline() -> None:
    _config, ledger, store = ledger_with_channel()
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    before = {"s1": sample("s1", 0.0, bands=(100, 0, 0, 50), channel=(500, 500_000))}
    restarted = {"s1": sample("s1", 1.0, bands=(3, 0, 0, 0), channel=(3, 3000))}
    verdict = evaluate(before, restarted, queues, hops, {})
    assert verdict.findings == [] and verdict.channels == []
    assert verdict.queues[0].bands == (3, 0, 0, 0)


# ---- episodes, REST, metrics ----------------------------------------------------------------


def monitor_for(
    fabric: FakeFabric, ledger: AdmissionLedger, store: ReservationStore, history: int = 50
) -> GuaranteeMonitor:
    return GuaranteeMonitor(
        ledger,
        store.all,
        entries(ledger, store),
        fabric,
        EventLog(":memory:", history),
        MonitorConfig(interval_s=0.1),
        clock=lambda: 1000.0,
    )


def test_a_violation_is_one_episode_logged_once_and_cleared(caplog: pytest.LogCaptureFixture) -> None:
    _config, ledger, store = ledger_with_channel(1)
    fabric = FakeFabric(["s1"])
    fabric.samples["s1"] = [
        sample("s1", 0.0),
        sample("s1", 1.0, bands=(0, 0, 0, 3), max_delay=90_000),
        sample("s1", 2.0, bands=(0, 0, 0, 5), max_delay=70_000),
        sample("s1", 3.0, bands=(4, 0, 0, 5)),
    ]
    monitor = monitor_for(fabric, ledger, store)

    async def polls() -> None:
        for _ in range(4):
            await monitor.poll()
            if monitor.alarm:
                assert monitor.snapshot()["verdict"] == "network"

    with caplog.at_level("INFO", logger="terrapin.monitor"):
        asyncio.run(polls())
    errors = [r for r in caplog.records if "NETWORK VIOLATION" in r.getMessage()]
    assert len(errors) == 1 and errors[0].levelname == "ERROR"
    (event,) = monitor.events()
    assert (event.polls, event.packets, event.figure, event.active) == (2, 5, 90_000, False)
    assert not monitor.alarm and monitor.snapshot()["violations"]["network"] == 1
    # the switch holds the admission model's bound for the queue
    (bound,) = fabric.bounds["s1"]
    assert bound.bound_us == queue_expectations(ledger)[PortId("s1", 2)][0].bound_us


def test_the_history_is_bounded_and_filtered() -> None:
    _config, ledger, store = ledger_with_channel(1)
    log = EventLog(":memory:", history=3)
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    for i in range(5):
        (finding,) = evaluate(
            {"s1": sample("s1", 0.0)}, {"s1": sample("s1", 1.0, bands=(0, 0, 0, i + 1))}, queues, hops, {}
        ).findings
        log.raise_event(finding, float(i))
    kept = log.query()
    assert [e.packets for e in kept] == [5, 4, 3]
    assert log.query(port=2, cause="network", limit=1)[0].packets == 5
    assert log.query(port=1) == [] and log.query(reservation_id=1) == []


def controller_with_fake(config: Config) -> tuple[Controller, FakeFabric]:
    fabrics: list[FakeFabric] = []

    def factory(cfg: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        fabrics.append(FakeFabric(topo.switch_names))
        return fabrics[-1]

    controller = Controller(config, fabric_factory=factory)
    return controller, fabrics[0]


def test_rest_views_and_metrics_after_a_violation() -> None:
    config = chain_config(2, rate_bps=10_000_000).model_copy(update={"monitor": MonitorConfig(enabled=False)})
    controller, fabric = controller_with_fake(config)
    with TestClient(controller.app) as client:
        body = RESERVATION
        created = client.post("/reservations", json=body, headers={"Authorization": "Bearer secret-token"})
        assert created.status_code == 201
        denied = client.post(
            "/reservations",
            json=body | {"src_port": 5001, "rate": 2_000_000},
            headers={"Authorization": "Bearer secret-token"},
        )
        assert denied.status_code == 409
        fabric.samples["s1"] = [sample("s1", 0.0), sample("s1", 1.0, bands=(1, 0, 0, 2), max_delay=50_000)]
        asyncio.run(controller.monitor.poll())
        asyncio.run(controller.monitor.poll())
        state = client.get("/monitor").json()
        assert state["alarm"] and state["verdict"] == "network"
        assert state["queues"][0]["over_bound"] == 2 and state["active"][0]["kind"] == QUEUE_DELAY
        assert client.get("/events", params={"cause": "network"}).json()[0]["packets"] == 2
        assert client.get("/events", params={"cause": "source"}).json() == []
        assert client.get("/events", params={"cause": "bogus"}).status_code == 422
        text = client.get("/metrics").text
        topology = client.get("/topology").json()
        page = client.get("/")
        script = client.get("/static/dashboard.js")
    assert [s["name"] for s in topology["switches"]] == ["s1", "s2"]
    assert page.status_code == 200 and "dashboard.js" in page.text
    assert script.status_code == 200 and "EventSource" in script.text
    assert 'terrapin_admission_decisions_total{outcome="admitted"} 1.0' in text
    assert 'terrapin_admission_denials_total{constraint="rate_buffer.rate"} 1.0' in text
    assert "terrapin_admission_decision_seconds_count 2.0" in text
    assert 'terrapin_channel_setup_seconds_count{origin="rest",outcome="installed"} 1.0' in text
    assert 'terrapin_channels{state="committed"} 1.0' in text
    assert 'terrapin_port_allocated_bytes_per_second{port="2",switch="s1"} 100000.0' in text
    assert 'terrapin_queue_channels{port="2",queue="6",switch="s1"} 1.0' in text
    assert 'terrapin_monitor_violations_total{cause="network",kind="queue_delay"} 1.0' in text
    assert 'terrapin_monitor_queue_packets_over_bound_total{port="2",queue="6",switch="s1"} 2.0' in text
    assert 'terrapin_monitor_queue_delay_max_seconds{port="2",queue="6",switch="s1"} 0.05' in text
    assert "terrapin_monitor_network_alarm 1.0" in text


def test_clearing_a_switchs_maxima_restarts_the_reading_of_them() -> None:
    config = chain_config(2, rate_bps=10_000_000).model_copy(update={"monitor": MonitorConfig(enabled=False)})
    controller, fabric = controller_with_fake(config)
    auth = {"Authorization": "Bearer secret-token"}
    with TestClient(controller.app) as client:
        assert client.delete("/status/switches/s1/maxima").status_code == 401
        assert client.delete("/status/switches/s9/maxima", headers=auth).status_code == 404
        assert client.post("/reservations", json=RESERVATION, headers=auth).status_code == 201
        fabric.samples["s1"] = [sample("s1", 0.0, max_delay=50_000)]
        asyncio.run(controller.monitor.poll())  # the baseline: 50 ms since the switch started
        assert client.delete("/status/switches/s1/maxima", headers=auth).status_code == 204
        # A window whose maximum is below the old one is reported: the baseline starts over.
        fabric.samples["s1"] = [sample("s1", 1.0, max_delay=20_000)]
        asyncio.run(controller.monitor.poll())
        (queue,) = [q for q in client.get("/monitor").json()["queues"] if q["switch"] == "s1"]
        fabric.down.add("s2")
        refused = client.delete("/status/switches/s2/maxima", headers=auth)
    assert fabric.maxima_cleared == [("s1", [1, 2, 3])]  # every port of s1
    assert queue["max_delay_us"] == 20_000
    assert refused.status_code == 503 and refused.json()["switch"] == "s2"
    assert refused.headers["Retry-After"] == "10"


def test_metric_names_follow_the_switchs_style() -> None:
    config = chain_config(2)
    controller, _fabric = controller_with_fake(config)
    names = set(re.findall(r"^# TYPE (\w+) ", controller.metrics.render().decode(), re.M))
    assert names and all(n.startswith("terrapin_") for n in names)
    # units in the name, as terrapin_queue_delay_seconds and terrapin_port_rx_bytes_total
    for name in names:
        assert not re.search(r"_(ms|us|micros|bits|mbps)(_|$)", name), name


def test_band_numbers_match_p4src() -> None:
    text = (REPO / "p4src" / "include" / "constants.p4").read_text()
    values = {n: int(v, 0) for n, v in re.findall(r"^const bit<\d+> (\w+) = (\w+);", text, re.M)}
    assert values["DELAY_BANDS"] == DELAY_BANDS == len(DELAY_BAND_NAMES)
    for index, name in enumerate(DELAY_BAND_NAMES):
        assert values[f"DELAY_BAND_{name.upper()}"] == index
    assert values["DELAY_BAND_CELLS"] == values["QUEUE_CELLS"] * DELAY_BANDS


def test_a_switch_away_for_a_poll_keeps_the_baseline() -> None:
    _config, ledger, store = ledger_with_channel(1)
    fabric = FakeFabric(["s1"])
    fabric.samples["s1"] = [sample("s1", 0.0)]
    monitor = monitor_for(fabric, ledger, store)

    async def polls() -> None:
        await monitor.poll()  # the baseline
        fabric.down.add("s1")  # the switch is away for a poll
        await monitor.poll()
        assert monitor.snapshot()["switches"]["s1"]["error"] == "not connected"
        fabric.down.clear()
        # the late packets happened while it was away: the next good read still sees them
        fabric.samples["s1"] = [sample("s1", 2.0, bands=(0, 0, 0, 3))]
        await monitor.poll()

    asyncio.run(polls())
    (event,) = monitor.events()
    assert event.kind == QUEUE_DELAY and event.packets == 3


def test_a_window_policed_first_hop_is_not_held_to_a_meters_envelope() -> None:
    config = chain_config(2, rate_bps=10_000_000)
    ledger = AdmissionLedger(config.port_models())
    store = ReservationStore(":memory:")
    window = ChannelEnvelope(
        priority=6, rate=0, burst=6000, max_packet=1500, policer=Policer(JUMPING_WINDOW, window_us=100_000)
    )
    allocation = ledger.admit(ChannelKey("10.0.1.2", 8), [PortId("s1", 2), PortId("s2", 2)], window)
    assert not isinstance(allocation, Denial), allocation
    store.add(allocation, SELECTOR, "rest", True)
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    assert [h.metered for h in hops] == [False, True]  # the window at s1, a meter at s2
    # twice the window's burst across an edge, which a jumping window lets through
    before = {"s1": sample("s1", 0.0), "s2": sample("s2", 0.0)}
    edge = {"s1": sample("s1", 0.05, channel=(16, 24_000)), "s2": sample("s2", 0.05)}
    assert evaluate(before, edge, queues, hops, {}).findings == []
    # what the window refuses is red at the first hop, as a meter's excess: the source's
    over = {"s1": sample("s1", 0.05, channel=(20, 30_000), excess=(0, 0, 4, 6000)), "s2": sample("s2", 0.05)}
    (finding,) = evaluate(before, over, queues, hops, {}).findings
    assert (finding.kind, finding.cause) == (SOURCE_EXCESS, SOURCE)


def test_a_history_of_an_older_layout_starts_over(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "store.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE monitor_events (id INTEGER PRIMARY KEY, channel_id INTEGER, message TEXT)")
    old.execute("INSERT INTO monitor_events VALUES (1, 3, 'from before')")
    old.commit()
    old.close()
    _config, ledger, store = ledger_with_channel(1)
    queues, hops = queue_expectations(ledger), hop_expectations(store.all(), entries(ledger, store))
    (finding,) = evaluate(
        {"s1": sample("s1", 0.0)}, {"s1": sample("s1", 1.0, bands=(0, 0, 0, 1))}, queues, hops, {}
    ).findings
    log = EventLog(path, history=10)
    log.raise_event(finding, 1.0)
    assert [e.packets for e in log.query()] == [1]


# ---- a set-up's bounds go out ahead of its entry ----------------------------------------------


class StagingFabric(FakeFabric):
    """Records when a hop's bounds are queued and holds the switch's answer until told."""

    def __init__(self, config: Config, log: list[str]) -> None:
        super().__init__([s.name for s in config.switches])
        self.log = log
        self.answers: list[asyncio.Future[None]] = []
        self.synced: list[str] = []

    def stage_bounds(self, name: str, bounds: Any, installed: Any) -> asyncio.Future[None]:
        self.log.append(f"bounds {name} {sorted((b.port, b.priority, b.bound_us) for b in bounds)}")
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return answer

    async def sync_queue_bounds(self, name: str, bounds: Any) -> int:
        self.synced.append(name)
        return await super().sync_queue_bounds(name, bounds)


class EntryLog:
    """The switches' channel writes: each is logged when it is queued."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def is_ready(self, name: str) -> bool:
        return True

    async def install_channel(self, entry: Any) -> None:
        self.log.append(f"entry {entry.switch}")

    async def remove_channel(self, entry: Any) -> None:
        self.log.append(f"removed {entry.switch}")


def staged_set_up() -> tuple[
    AdmissionLedger, ReservationStore, list[str], StagingFabric, BoundsFirstProgrammer, ChannelEntry
]:
    """One switch with one channel, whose set-up stages its bounds before its entry; `log` says
    in which order the two were queued."""
    config, ledger, store = ledger_with_channel(switches=1)
    log: list[str] = []
    fabric = StagingFabric(config, log)
    monitor = monitor_for(fabric, ledger, store)
    programmer = BoundsFirstProgrammer(EntryLog(log), monitor)  # type: ignore[arg-type]
    (record,) = store.all()
    (entry,) = entries(ledger, store)(record)
    return ledger, store, log, fabric, programmer, entry


@pytest.mark.parametrize("switch_answers", ["ok", "refused"])
def test_a_hops_bounds_are_queued_before_its_entry_which_does_not_wait_for_them(
    switch_answers: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The raised bound is queued first, the entry right behind it before the switch has
    answered either (so both can share one WriteRequest); a refused bound write does not stop
    the channel, and the switch's bounds are read and set right."""
    ledger, _store, log, fabric, programmer, entry = staged_set_up()

    async def set_up() -> None:
        installing = asyncio.ensure_future(programmer.install_channel(entry))
        for _ in range(5):
            await asyncio.sleep(0)
        assert [line.split(" ")[0] for line in log] == ["bounds", "entry"], log
        assert not installing.done()  # waiting for the switch's answer to the bounds
        answer = fabric.answers[0]
        if switch_answers == "ok":
            answer.set_result(None)
        else:
            answer.set_exception(RuntimeError("ALREADY_EXISTS"))
        await installing

    asyncio.run(set_up())
    (bound,) = queue_expectations(ledger)[PortId("s1", 2)]
    assert log[0] == f"bounds s1 {[(2, 6, bound.bound_us)]}"
    assert fabric.synced == ([] if switch_answers == "ok" else ["s1"])
    # the same channel again: the bounds already hold it, so only its entry goes out
    log.clear()
    asyncio.run(programmer.install_channel(entry))
    assert log == ["entry s1"]


def test_only_so_many_channels_have_series_of_their_own() -> None:
    """monitor.channel_series caps the per-channel series (a reservation id is a label); a
    channel keeps its series while it lives, and its series go with it."""
    from terrapin.metrics import ControllerMetrics
    from terrapin.monitor.checks import ChannelReading, PollVerdict

    ledger = AdmissionLedger(chain_config(2).port_models())
    metrics = ControllerMetrics(ledger, channel_series=2)

    def reading(rid: int, switch: str) -> ChannelReading:
        return ChannelReading(
            rid, rid, f"ch{rid}", switch, 2, 6, switch == "s1", 1.0, 1, 100, 100, 1, 0, 100, 90
        )

    def poll(*ids: int) -> tuple[set[str], float]:
        verdict = PollVerdict([], [reading(rid, sw) for rid in ids for sw in ("s1", "s2")], [])
        metrics.observe_poll(0.01, verdict, {})
        text = metrics.render().decode()
        series = {
            m.group(1)
            for m in re.finditer(r'^terrapin_monitor_channel_\w+\{channel="(\d+)"', text, re.MULTILINE)
        }
        omitted = re.search(r"^terrapin_monitor_channels_without_series (\S+)$", text, re.MULTILINE)
        assert omitted is not None
        return series, float(omitted.group(1))

    assert poll(7, 3, 5) == ({"3", "5"}, 1.0)  # the oldest first
    assert poll(1, 3, 5, 7) == ({"3", "5"}, 2.0)  # kept, not taken by an older newcomer
    assert poll(1, 5, 7) == ({"1", "5"}, 1.0)  # 3 went: its series too, and a place is free
    assert poll() == (set(), 0.0)


def test_a_hops_bounds_follow_every_change_of_its_ports_load() -> None:
    """The bounds a set-up stages are computed once per change of the port's load (the ledger
    hands out one load until then): a second channel through the port raises them again."""
    ledger, store, log, fabric, programmer, entry = staged_set_up()

    async def install(e: Any) -> None:
        installing = asyncio.ensure_future(programmer.install_channel(e))
        for _ in range(5):
            await asyncio.sleep(0)
        for answer in fabric.answers:
            if not answer.done():
                answer.set_result(None)
        await installing

    asyncio.run(install(entry))
    (first,) = queue_expectations(ledger)[PortId("s1", 2)]
    assert log == [f"bounds s1 {[(2, 6, first.bound_us)]}", "entry s1"]
    log.clear()
    bigger = replace(ENVELOPE, burst=20_000)
    allocation = ledger.admit(ChannelKey("10.0.1.2", 8), [PortId("s1", 2)], bigger)
    store.add(allocation, replace(SELECTOR, flow_key=1), "rest", True)  # type: ignore[arg-type]
    (second,) = queue_expectations(ledger)[PortId("s1", 2)]
    assert second.bound_us > first.bound_us
    asyncio.run(install(entry))
    assert log == [f"bounds s1 {[(2, 6, second.bound_us)]}", "entry s1"]
