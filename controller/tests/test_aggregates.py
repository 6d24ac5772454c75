"""Aggregates (docs/controller.md, "Aggregates"): their configuration, the standing load
admission charges for them, and the entries and meter configs the switches are given."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import chain_config

from terrapin.admission import AdmissionLedger, Allocation, ChannelEnvelope, ChannelKey, Denial, PortId
from terrapin.config import Config, ConfigError, parse_config
from terrapin.constants import DenialReason
from terrapin.p4program import A_SET_AGGREGATE, MAX_AGGREGATES, T_AGGREGATES
from terrapin.switches.encoding import aggregate_entries, aggregate_meter

CS6 = 48
NETWORK_CONTROL: dict[str, Any] = {
    "name": "network-control",
    "match": [{"dscp": CS6}, {"protocol": 6, "l4_dst_port": "179/0xffff"}],
    "priority": 6,
    "rate": 2_000_000,
    "burst": 30_000,
}


def with_aggregates(*aggregates: dict[str, Any], **admission: Any) -> Config:
    data = chain_config(3, **admission).model_dump(by_alias=True)
    data["aggregates"] = list(aggregates)
    return parse_config(data)


def aggregate(**over: Any) -> dict[str, Any]:
    return NETWORK_CONTROL | over


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        (
            aggregate(match={"dscp": 64}),
            "aggregates.0.match: Value error, match 0, dscp: 64 does not fit in 6 bits",
        ),
        (aggregate(match={"dscp": "49/0x38"}), "dscp: '49/0x38' sets bits outside its mask"),
        (aggregate(match={"dscp": "48/0"}), "has mask 0, which matches anything"),
        (aggregate(match={"dscp": "cs6"}), "'cs6' is not a number or value/mask"),
        (aggregate(match={"tos": 1}), "aggregates.0.match.0.tos"),
        (aggregate(match=[{"dscp": 46}, {}]), "match 1 is empty, which lifts every IPv4 packet"),
        (aggregate(match=[]), "needs at least one match"),
        (aggregate(priority=0), "aggregates.0.priority: Value error, priority 0 is not a level"),
        (aggregate(priority=8), "priority 8 is not a level"),
        (aggregate(rate=0), "aggregates.0.rate"),
        (aggregate(burst=1000), "burst 1000 is below max_packet 1500"),
        (aggregate(peak={"rate": 1000, "burst": 30_000}), "peak needs rate >= rate"),
        (aggregate(peak={"rate": 3_000_000}), "aggregates.0.peak.burst"),
        (aggregate(bogus=1), "aggregates.0.bogus"),
    ],
)
def test_a_bad_aggregate_is_refused_at_load_naming_the_field(given: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        with_aggregates(given)
    assert needle in str(info.value)


def test_aggregates_are_unique_and_fit_the_table() -> None:
    with pytest.raises(ConfigError, match="aggregates: names must be unique"):
        with_aggregates(NETWORK_CONTROL, NETWORK_CONTROL)
    many = [aggregate(name=f"a{i}", match=[{"dscp": d} for d in range(33)]) for i in range(2)]
    with pytest.raises(ConfigError, match=f"66 matches, the data plane holds {MAX_AGGREGATES}"):
        with_aggregates(*many)


def test_matches_become_value_and_mask() -> None:
    config = with_aggregates(aggregate(match={"dscp": "0x20/0x38", "protocol": 17}))
    assert config.aggregates[0].matches() == [{"dscp": (0x20, 0x38), "protocol": (17, 0xFF)}]


S1 = PortId("s1", 2)  # h1 → s2: one hop of every path from h1 to h2
KEY = ChannelKey("10.0.1.2", 1)
PATH = [PortId("s1", 2), PortId("s2", 2), PortId("s3", 2)]


def test_a_channel_that_fits_without_the_aggregate_is_refused_with_it() -> None:
    """100 Mbit/s ports, 90% reservable: 12,500,000 B/s, 11,250,000 reservable. A channel of
    10,000,000 B/s fits alone; with 2,000,000 B/s standing at level 6 the sum does not."""
    channel = ChannelEnvelope(priority=3, rate=10_000_000, burst=15_000, max_packet=1500)
    without = AdmissionLedger(with_aggregates().port_models())
    assert isinstance(without.evaluate(KEY, PATH, channel), Allocation)
    ledger = AdmissionLedger(with_aggregates(NETWORK_CONTROL).port_models())
    decision = ledger.evaluate(KEY, PATH, channel)
    assert isinstance(decision, Denial)
    first = decision.primary
    assert (first.constraint, first.port, first.reason) == ("rate_buffer.rate", S1, DenialReason.RATE)
    assert first.would_be == 12_000_000 and first.limit == 11_250_000
    # the ledger shows the aggregate at its level, as load without a channel
    level6 = ledger.port_status(S1).levels[5]
    assert (level6.priority, level6.rate, level6.burst, level6.channels) == (6, 2_000_000, 30_000, 0)


def test_an_aggregates_burst_above_a_level_delays_it() -> None:
    """A channel at level 2 with a delay bound it just meets alone is refused once a higher
    aggregate's burst can queue ahead of it (the bound names the end-to-end constraint)."""
    alone = AdmissionLedger(with_aggregates().port_models())
    probe = ChannelEnvelope(priority=2, rate=100_000, burst=3000, max_packet=1500)
    allocated = alone.evaluate(KEY, PATH, probe)
    assert isinstance(allocated, Allocation)
    tight = ChannelEnvelope(
        priority=2, rate=100_000, burst=3000, max_packet=1500, delay_bound_us=allocated.worst_case_delay_us
    )
    assert isinstance(alone.evaluate(KEY, PATH, tight), Allocation)
    small = aggregate(rate=10_000, burst=3000)
    decision = AdmissionLedger(with_aggregates(small).port_models()).evaluate(KEY, PATH, tight)
    assert isinstance(decision, Denial)
    assert decision.primary.constraint == "end_to_end_delay"
    # at a level below the channel's, the same aggregate only adds one packet on the wire, which
    # the largest best-effort packet already accounts for: the channel still fits
    below = AdmissionLedger(with_aggregates(small | {"priority": 1}).port_models())
    assert isinstance(below.evaluate(KEY, PATH, tight), Allocation)


def test_an_aggregate_shares_its_levels_queue() -> None:
    """Same level: its burst is in the queue the candidate's bursts must fit (rate_buffer.buffer)."""
    queue = 64 * 1500
    channel = ChannelEnvelope(priority=6, rate=100_000, burst=queue - 20_000, max_packet=1500)
    assert isinstance(
        AdmissionLedger(with_aggregates().port_models()).evaluate(KEY, PATH, channel), Allocation
    )
    ledger = AdmissionLedger(with_aggregates(NETWORK_CONTROL).port_models())
    decision = ledger.evaluate(KEY, PATH, channel)
    assert isinstance(decision, Denial) and decision.primary.constraint == "rate_buffer.buffer"


def test_a_level_7_aggregate_joins_the_protocols_envelope() -> None:
    top = aggregate(priority=7, rate=50_000, burst=3000)
    models = {m.port: m for m in with_aggregates(top).port_models()}
    plain = {m.port: m for m in with_aggregates().port_models()}
    assert models[S1].control_rate == plain[S1].control_rate + 50_000
    assert models[S1].control_burst == plain[S1].control_burst + 3000
    assert models[S1].standing == ()


def test_packet_rate_ports_charge_an_aggregate_in_slots() -> None:
    """On a packet-rate port (BMv2) the aggregate's packets are counted at max_packet, each a slot."""
    data = chain_config(2, rate_bps=10_000_000).model_dump(by_alias=True)
    data["switches"][0].update(kind="bmv2", thrift_port=9091)
    next(p for p in data["switches"][0]["ports"] if p["number"] == 2)["rate_pps"] = 833
    data["aggregates"] = [aggregate(rate=3000, burst=1000, max_packet=500)]
    ledger = AdmissionLedger(parse_config(data).port_models())
    level6 = ledger.port_status(S1).levels[5]
    # 3,000 B/s of 500-byte packets: 6 packets/s; a 1,000-byte burst: 2 packets; 1,500-byte slots
    assert (level6.rate, level6.burst) == (6 * 1500, 2 * 1500)
    assert ledger.port_status(PortId("s2", 2)).levels[5].rate == 3000


def test_entries_and_meters_for_the_switches() -> None:
    """Aggregate i's matches name aggregate id i, in listed order of precedence; its meter is
    the envelope in frame bytes (× (max_packet + 14) / max_packet, rounded up)."""
    second = aggregate(
        name="dns", match={"protocol": 17, "l4_dst_port": 53}, priority=2, rate=1000, burst=1500
    )
    config = with_aggregates(NETWORK_CONTROL, second)
    entries = aggregate_entries(config.aggregates)
    assert [(e.table_id, e.priority, dict(e.match or {})) for e in entries] == [
        (T_AGGREGATES, MAX_AGGREGATES, {"dscp": (CS6, 0x3F)}),
        (T_AGGREGATES, MAX_AGGREGATES - 1, {"protocol": (6, 0xFF), "l4_dst_port": (179, 0xFFFF)}),
        (T_AGGREGATES, MAX_AGGREGATES - 2, {"protocol": (17, 0xFF), "l4_dst_port": (53, 0xFFFF)}),
    ]
    actions = [e.action for e in entries]
    assert [(a.name, dict(a.args)) for a in actions] == [  # type: ignore[union-attr]
        (A_SET_AGGREGATE, {"aggregate_id": 0, "priority": 6}),
        (A_SET_AGGREGATE, {"aggregate_id": 0, "priority": 6}),
        (A_SET_AGGREGATE, {"aggregate_id": 1, "priority": 2}),
    ]
    meter = aggregate_meter(config.aggregates[0])
    scaled_rate, scaled_burst = -(-2_000_000 * 1514 // 1500), -(-30_000 * 1514 // 1500)
    assert (meter.cir, meter.cburst, meter.pir, meter.pburst) == (scaled_rate, scaled_burst) * 2
    peaked = aggregate_meter(
        with_aggregates(aggregate(peak={"rate": 3_000_000, "burst": 45_000})).aggregates[0]
    )
    assert (peaked.pir, peaked.pburst) == (-(-3_000_000 * 1514 // 1500), -(-45_000 * 1514 // 1500))
