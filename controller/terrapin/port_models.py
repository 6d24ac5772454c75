"""How each configured port becomes the admission test's PortModel (Config.port_models): its line
rate in bytes or packet slots, its admission settings, the aggregates it carries as standing
load, and on a trunk the link watch's probes (docs/controller.md: "Packet-rate ports",
"Aggregates", "Trunks")."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from terrapin.admission.model import ALL_TESTS, PortId, PortModel, ServiceClass, StandingLoad, ceil_div
from terrapin.config import AdmissionConfig, AggregateConfig, Config, LinksConfig
from terrapin.constants import CONTROL_FRAME_BYTES, PROTOCOL_PRIORITY


def configured_port_models(config: Config) -> list[PortModel]:
    models = []
    for s in config.switches:
        for p in s.ports:
            adm = AdmissionConfig.model_validate(config.admission.model_dump() | p.admission)
            model = port_model(PortId(s.name, p.number), p.rate_bps, adm, p.rate_pps, s.jitter_us)
            model = with_aggregates(model, config.aggregates)
            if config.links.enabled and ":" in p.peer:
                model = with_link_probes(model, config.links, config.link_probe_bytes())
            models.append(model)
    return models


def with_aggregates(model: PortModel, aggregates: list[AggregateConfig]) -> PortModel:
    """The port carrying every aggregate's envelope from the start: at levels 1..6 as standing
    loads of their level; at level 7 added to the protocol's envelope, which the tests already
    take as served above every admitted level."""
    standing = [
        StandingLoad(a.name, a.priority, a.rate, a.burst, a.max_packet)
        for a in aggregates
        if a.priority != PROTOCOL_PRIORITY
    ]
    top = [model.charge(a.rate, a.burst, a.max_packet) for a in aggregates if a.priority == PROTOCOL_PRIORITY]
    return replace(
        model,
        standing=model.standing + tuple(standing),
        control_rate=model.control_rate + sum(rate for rate, _ in top),
        control_burst=model.control_burst + sum(burst for _, burst in top),
    )


def with_link_probes(model: PortModel, links: LinksConfig, frame_bytes: int) -> PortModel:
    """A trunk port carrying the link watch's probes: one frame every probe_interval_ms at level 7
    (two back to back when the controller sends one late), added to the protocol's envelope and
    marked as the probes' share of it (PortModel.probe_rate)."""
    per_second = 1000 / links.probe_interval_ms
    rate, burst = model.charge(math.ceil(frame_bytes * per_second), 2 * frame_bytes, frame_bytes)
    return replace(
        model,
        control_rate=model.control_rate + rate,
        control_burst=model.control_burst + burst,
        probe_rate=rate,
    )


def port_model(
    port: PortId, rate_bps: int, adm: AdmissionConfig, rate_pps: int | None = None, jitter_us: int = 0
) -> PortModel:
    line = rate_bps // 8
    best_effort_packet = -1 if adm.best_effort_max_packet is None else adm.best_effort_max_packet
    control_rate, control_burst = adm.control_rate, adm.control_burst
    slot = 0
    if rate_pps is not None:
        # A packet-rate port carries rate_pps packets/s of any size: C is rate_pps largest-packet
        # slots, and every packet, a small protocol message or a lower level's packet on the wire
        # included, takes one whole slot.
        slot = adm.largest_packet
        line = rate_pps * slot
        best_effort_packet = slot
        control_rate = ceil_div(control_rate, CONTROL_FRAME_BYTES) * slot
        control_burst = ceil_div(control_burst, CONTROL_FRAME_BYTES) * slot
    return PortModel(
        port=port,
        line_rate=line,
        queue_capacity=adm.queue_capacity,
        largest_packet=adm.largest_packet,
        reservable_rate=max(1, int(Fraction(str(adm.reservable_fraction)) * line)),
        best_effort_max_packet=best_effort_packet,
        packet_slot=slot,
        packet_granularity=adm.packet_granularity,
        timer_tick_us=adm.timer_tick_us,
        tests=tuple(t for t in ALL_TESTS if t in adm.tests),
        level_delay_budget_us=tuple(sorted(adm.level_delay_budget_us.items())),
        classes=tuple(
            ServiceClass(c.name, frozenset(c.priorities), Fraction(str(c.share)), c.peak_policed)
            for c in adm.classes
        ),
        best_effort_floor=Fraction(str(adm.best_effort_floor)),
        allocation_interval_us=adm.allocation_interval_us,
        per_channel_overhead_us=adm.per_channel_overhead_us,
        control_rate=control_rate,
        control_burst=control_burst,
        jitter_us=jitter_us,
    )
