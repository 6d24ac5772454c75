"""The examples make run prints are sized for the run's own configuration: on every topology,
either switch and other link rates, the REST and the in-band example are both admitted by the
controller's admission tests, in either order, beside what the store already holds; and they are
as large as the rules allow, not shrunk for safety. (test_cli_session.py pastes them into real
networks.)"""

from __future__ import annotations

from typing import Any

import pytest

from terrapin.admission import AdmissionLedger
from terrapin.admission.model import Allocation, ChannelEnvelope, ChannelKey
from terrapin.config import Config
from terrapin.paths import Topology
from topo import TOPOLOGIES, chain, christie, sequoia
from topo.controller_config import protocol_rate
from topo.examples import (
    INBAND_PORT,
    REST_PORT,
    SIDE_BY_SIDE,
    Example,
    Planner,
    bit_rate_text,
    rate_ladder,
)
from topo.plan import NetworkPlan
from topo.run import load_plan
from topo.tests.configs import example_for, run_config

KINDS = ("terrapin", "bmv2")


def example_of(
    plan: NetworkPlan, kind: str, stored: list[dict[str, Any]] | None = None
) -> tuple[Example, Config]:
    return example_for(plan, kind, stored or []), run_config(plan, kind)


def admit(ledger: AdmissionLedger, config: Config, example: Example, context: int) -> Allocation | str:
    path = Topology(config).path(example.src.ip, example.dst.ip)
    env = ChannelEnvelope(example.priority, example.rate, example.burst, example.max_packet)
    decision = ledger.admit(ChannelKey(example.src.ip, context), path, env)
    return decision if isinstance(decision, Allocation) else decision.primary.describe()


def scaled_plans() -> list[tuple[str, NetworkPlan]]:
    """Every topology at its make run rate, and slower and faster ones."""
    plans = [(name, load_plan(name, None)) for name in TOPOLOGIES]
    plans += [
        ("christie 2 Mbit/s", christie.plan(rate_mbps=2)),
        ("christie 1 Gbit/s", christie.plan(rate_mbps=1000)),
    ]
    plans += [
        ("sequoia 64 kbit/s T1s", sequoia.plan(t1_bps=64_000)),
        ("chain 10 Mbit/s", chain.plan(rate_mbps=10)),
    ]
    return plans


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "plan"), scaled_plans(), ids=[n for n, _ in scaled_plans()])
def test_both_examples_are_admitted_in_either_order(name: str, plan: NetworkPlan, kind: str) -> None:
    example, config = example_of(plan, kind)
    assert example.rest_port != example.inband_port
    for order in ((1, 2), (2, 1)):
        ledger = AdmissionLedger(config.port_models())
        for context in order:
            outcome = admit(ledger, config, example, context)
            assert isinstance(outcome, Allocation), (name, kind, example, outcome)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "plan"), scaled_plans(), ids=[n for n, _ in scaled_plans()])
def test_the_example_is_the_largest_rate_of_the_ladder_that_fits(
    name: str, plan: NetworkPlan, kind: str
) -> None:
    """One rung up, four channels no longer fit (unless the seed's own 9 Mbit/s already did)."""
    example, config = example_of(plan, kind)
    ladder = list(rate_ladder())
    rung = ladder.index(example.rate)
    if rung == 0:
        return
    planner = Planner(config)
    path = planner.path(example.src, example.dst)
    for packets in range(1, example.burst // example.max_packet + 1):
        bigger = ChannelEnvelope(
            example.priority, ladder[rung - 1], packets * example.max_packet, example.max_packet
        )
        assert isinstance(planner.side_by_side(path, bigger, SIDE_BY_SIDE), str), (name, kind, bigger)


def test_the_seeds_envelope_where_it_fits_and_less_where_it_does_not() -> None:
    assert example_of(christie.plan(), "terrapin")[0].rest_body() | {"src_port": 0} == {
        "src": "10.0.1.1",
        "dst": "10.0.2.1",
        "protocol": "udp",
        "src_port": 0,
        "dst_port": REST_PORT,
        "priority": 6,
        "rate": 1_125_000,
        "burst": 27_000,
        "max_packet": 4500,
    }
    # Sequoia's T1 (193,000 B/s, 90% reservable, 10% kept for best effort, the protocol's
    # 12,000 B/s): four channels of 300 kbit/s fit (150,000 B/s), four of 400 kbit/s do not.
    example = example_of(sequoia.plan(), "terrapin")[0]
    assert (example.rate, example.envelope_text()) == (
        37_500,
        "300 kbit/s = 37,500 B/s, 9,000-byte burst, priority 6",
    )


def test_stored_reservations_are_charged_and_their_flows_left_alone() -> None:
    plan = christie.plan()
    config = run_config(plan, "terrapin")
    first, _ = example_of(plan, "terrapin")
    # What GET /reservations lists after both examples were pasted in an earlier run, plus a
    # channel taking most of the port.
    stored = [
        stored_row(first, first.rest_port, context=1, rate=first.rate),
        stored_row(first, first.inband_port, context=2, rate=first.rate),
        stored_row(first, 7000, context=3, rate=7_000_000),
    ]
    again, _ = example_of(plan, "terrapin", stored)
    assert {again.rest_port, again.inband_port}.isdisjoint({first.rest_port, first.inband_port})
    assert again.rate < first.rate
    ledger = Planner(config, stored).ledger()
    for context in (10, 11):
        assert isinstance(admit(ledger, config, again, context), Allocation)


def stored_row(example: Example, port: int, *, context: int, rate: int) -> dict[str, Any]:
    return {
        "initiator": example.src.ip,
        "context": context,
        "src": example.src.ip,
        "dst": example.dst.ip,
        "protocol": 17,
        "src_port": port,
        "dst_port": port,
        "priority": example.priority,
        "requested_rate": rate,
        "requested_burst": example.burst,
        "max_packet": example.max_packet,
        "delay_bound_us": 0,
        "avg_idle_us": 0,
        "policer": "meter",
    }


def test_the_ports_start_at_the_documented_pair() -> None:
    example, _ = example_of(christie.plan(), "terrapin")
    assert (example.rest_port, example.inband_port) == (REST_PORT, INBAND_PORT)
    assert f"--sport {INBAND_PORT} --dport {INBAND_PORT}" in example.inband_request()


def test_a_slow_port_keeps_room_beside_the_protocol() -> None:
    """The protocol's default 12,000 B/s of 90-byte messages is more than a 64 kbit/s line
    carries, and on BMv2, where each message takes a whole packet slot, more messages than a T1
    of 1,500-byte slots (128 packets/s): either would admit nothing. Where the default takes half
    the port or more, it is capped to a tenth of the port; other ports keep the default."""
    assert protocol_rate(64_000) == 8 * 90
    assert protocol_rate(1_544_000) is None  # a T1 paced in bytes: 12,000 of 193,000 B/s
    assert protocol_rate(1_544_000, 128) == 12 * 90
    assert protocol_rate(10_000_000, 277) is None  # BMv2 christie at 10 Mbit/s: 134 of 277
    assert protocol_rate(100_000_000, 2777) is None
    ports = [p for s in run_config(sequoia.plan(), "bmv2").switches for p in s.ports]
    trunks = [p for p in ports if ":" in p.peer]
    assert trunks and all(p.admission == {"control_rate": 1080} for p in trunks)
    assert all(p.admission == {} for p in ports if ":" not in p.peer)
    assert all(p.admission == {} for s in run_config(sequoia.plan(), "terrapin").switches for p in s.ports)


def test_rates_read_as_people_write_them() -> None:
    assert [bit_rate_text(b) for b in (9_000_000, 300_000, 1_500, 999)] == [
        "9 Mbit/s",
        "300 kbit/s",
        "1.5 kbit/s",
        "999 bit/s",
    ]
    ladder = list(rate_ladder())
    assert ladder[0] == 1_125_000 and ladder[-1] == 125 and ladder == sorted(ladder, reverse=True)
