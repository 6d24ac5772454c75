"""The bodies of the reservation routes (reservations.py): what a client sends (ReservationIn,
ReservationBatchIn, validated field by field so a 422 names each problem) and what it gets back
(ReservationOut with its AllocationOut, DenialOut, ConflictOut, the batch's results, a hop's
counters), and the functions that turn the admission model's objects into them.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from terrapin.admission import Allocation, Denial
from terrapin.admission.model import (
    JUMPING_WINDOW,
    METER,
    MOVING_WINDOW,
    ChannelEnvelope,
    Policer,
)
from terrapin.admission.policers import envelope_problem, moving_ring
from terrapin.api.bodies import body_from
from terrapin.constants import IP_PROTO_TCP, IP_PROTO_UDP, IP_PROTO_XTP
from terrapin.protocol.messages import ports_from_flow_key
from terrapin.store import Reservation

U32 = 0xFFFF_FFFF
PROTOCOLS = {"udp": IP_PROTO_UDP, "tcp": IP_PROTO_TCP, "xtp": IP_PROTO_XTP}
MAX_BATCH = 1000  # reservations in one POST /reservations/batch


# Per policer-dependent field: the policers that need it, and those that may give it.
_POLICER_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rate": ((METER,), ()),
    "burst": ((METER, JUMPING_WINDOW), ()),
    "window_us": ((JUMPING_WINDOW,), ()),
    "window_counts": ((), (JUMPING_WINDOW,)),
    "xmin_us": ((), (MOVING_WINDOW,)),
    "xave_us": ((MOVING_WINDOW,), ()),
    "interval_us": ((MOVING_WINDOW,), ()),
}


def _policer_field(
    description: str, *, gt: int | None = None, ge: int | None = None, le: int | None = None
) -> Any:
    """A field of _POLICER_FIELDS: absent by default, and validated even when absent, so that
    _given_for_its_policer can say a policer needs it."""
    return Field(default=None, validate_default=True, description=description, gt=gt, ge=ge, le=le)


class ReservationIn(BaseModel):
    """A simplex channel from `src` to `dst` with the seed's QOS_t envelope."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "src": "10.0.1.2",
                "dst": "10.0.2.2",
                "protocol": "udp",
                "src_port": 5000,
                "dst_port": 6000,
                "priority": 6,
                "rate": 1_125_000,
                "burst": 27_000,
                "max_packet": 1500,
            }
        },
    )

    src: ipaddress.IPv4Address = Field(description="the sending host (the channel's initiator)")
    dst: ipaddress.IPv4Address = Field(description="the receiving host; not the source itself")
    protocol: Literal["udp", "tcp", "xtp"]
    src_port: int = Field(default=0, ge=0, le=65535, description="UDP/TCP source port")
    dst_port: int = Field(default=0, ge=0, le=65535, description="UDP/TCP destination port")
    xtp_key: int = Field(default=0, ge=0, le=2**64 - 1, description="XTP connection key")
    priority: int = Field(ge=1, le=6, description="admitted levels are 1..6 (6 most urgent)")
    # Before the fields it governs: their validators read it.
    policer: Literal["meter", "jumping_window", "moving_window"] = Field(
        default="meter",
        description="meter: trTCM (leaky bucket) with rate and burst; jumping_window: burst B per "
        "window_us; moving_window: Tenet's (xmin_us, xave_us, interval_us, max_packet = Smax)",
    )
    rate: int | None = _policer_field("ρ, bytes per second (meter only)", gt=0, le=U32)
    burst: int | None = _policer_field(
        "σ, bytes (meter), or B, bytes per window (jumping_window)", gt=0, le=U32
    )
    max_packet: int = Field(gt=0, le=65535, description="largest IPv4 packet, bytes (moving_window: Smax)")
    delay_bound_us: int = Field(default=0, ge=0, le=U32, description="end-to-end; 0 = none")
    avg_idle_us: int = Field(default=0, ge=0, le=U32, description="the seed's average idle time")
    context: int | None = Field(default=None, ge=0, le=U32, description="default: allocated")
    excess: Literal["demote", "drop"] | None = Field(
        default=None, description="what traffic beyond the envelope gets; default from config"
    )
    on_path_down: Literal["wait", "close"] = Field(
        default="wait",
        description="when a trunk or switch on its path goes down and no other path admits it:"
        " wait (down, set up again when a path does) or close (docs/controller.md, Trunks)",
    )
    protection: Literal["none", "1+1"] = Field(
        default="none",
        description="1+1: admitted on two paths that share no trunk, every frame sent down both and"
        " the first copy of each delivered (IEEE 802.1CB; docs/controller.md, Protection)",
    )
    unprotected_ok: bool = Field(
        default=False,
        description="with protection 1+1: when no two such paths exist, admit it on one path (and say"
        " why in protection_note) instead of refusing it (no_disjoint_paths)",
    )
    window_us: int | None = _policer_field("jumping_window: the window T, µs", gt=0, le=U32)
    window_counts: Literal["bytes", "packets"] | None = _policer_field(
        "jumping_window: B counts bytes (default), or whole max_packet packets"
    )
    xmin_us: int | None = _policer_field(
        "moving_window: Xmin, the smallest gap between packets, µs (default 0)", ge=0, le=U32
    )
    xave_us: int | None = _policer_field(
        "moving_window: Xave, the average gap over any interval I, µs", gt=0, le=U32
    )
    interval_us: int | None = _policer_field("moving_window: the interval I, µs", gt=0, le=U32)

    @field_validator(*_POLICER_FIELDS, mode="after")
    @classmethod
    def _given_for_its_policer(cls, value: object, info: ValidationInfo) -> object:
        """Each policer's own fields are required, the others' refused, field by field (so a
        422 names each one, alongside any other field's problem)."""
        policer = info.data.get("policer")
        name = info.field_name
        if policer is None or name is None:
            return value  # the policer itself was invalid: that error says enough
        needed, optional = _POLICER_FIELDS[name]
        if value is None and policer in needed:
            raise PydanticCustomError("missing", "Field required for policer {policer}", {"policer": policer})
        if value is not None and policer not in needed + optional:
            raise PydanticCustomError(
                "policer_field",
                "{field} is not a parameter of policer {policer}",
                {"field": name, "policer": policer},
            )
        return value

    @model_validator(mode="after")
    def _envelope_holds(self) -> ReservationIn:
        problem = envelope_problem(self.envelope())
        if problem is not None:
            name, value, why = problem
            raise ValidationError.from_exception_data(
                "ReservationIn",
                [InitErrorDetails(type=PydanticCustomError("envelope", why), loc=(name,), input=value)],
            )
        return self

    @field_validator("dst")
    @classmethod
    def _leaves_the_host(cls, dst: ipaddress.IPv4Address, info: ValidationInfo) -> ipaddress.IPv4Address:
        if info.data.get("src") == dst:
            # The path would be the host's own port: capacity reserved for no traffic.
            raise ValueError("dst must differ from src (a channel leaves its host)")
        return dst

    def envelope(self) -> ChannelEnvelope:
        return ChannelEnvelope(
            priority=self.priority,
            rate=self.rate or 0,
            burst=self.burst or 0,
            max_packet=self.max_packet,
            delay_bound_us=self.delay_bound_us,
            avg_idle_us=self.avg_idle_us,
            policer=Policer(
                self.policer,
                window_us=self.window_us or 0,
                count_packets=self.window_counts == "packets",
                xmin_us=self.xmin_us or 0,
                xave_us=self.xave_us or 0,
                interval_us=self.interval_us or 0,
            ),
        )


class HopOut(BaseModel):
    switch: str
    port: int
    priority: int
    rate: int
    burst: int
    worst_case_delay_us: int
    protected_delay_us: int | None
    jitter_us: int = Field(
        description="the switch's delay variation outside its queues (its configured jitter_us),"
        " counted in the burst at this hop and in the end-to-end bound"
    )


class AllocationOut(BaseModel):
    rate: int
    burst: int = Field(
        description="what the first switch's policer lets through at once: the requested burst"
        " (or the window's) and what its tolerance adds"
    )
    tolerance_us: int = Field(
        description="the first switch's policer tolerance, its jitter: traffic that kept the"
        " envelope on the wire passes even if the switch stamped it this much late"
    )
    rate_rounded_up_by: int
    burst_rounded_up_by: int
    packet_granularity: int
    burst_packets: int
    credit_period_us: int
    hops: list[HopOut]
    worst_case_delay_us: int = Field(
        description="end to end: each hop's queue bound and jitter (protected: the slower path's)"
    )
    protected_delay_us: int | None
    second_path: list[HopOut] | None = Field(
        default=None,
        description="protection 1+1: the other path's hops, its last (the destination's port) shared"
        " with `hops`",
    )
    disjoint: Literal["node", "link"] | None = Field(
        default=None,
        description="protection 1+1: the paths share no switch but their ends (node), or only no"
        " trunk (link: no node-disjoint pair existed)",
    )


class ReservationOut(BaseModel):
    id: int = Field(description="never reused, also across controller restarts")
    initiator: ipaddress.IPv4Address
    context: int
    src: ipaddress.IPv4Address
    dst: ipaddress.IPv4Address
    protocol: int = Field(description="IPv4 protocol number: 17 udp, 6 tcp, 36 xtp")
    src_port: int
    dst_port: int
    flow_key: int
    priority: int
    requested_rate: int
    requested_burst: int
    max_packet: int
    delay_bound_us: int
    avg_idle_us: int
    origin: str
    state: str = Field(
        description="installing (being written), active (promised), or down (a trunk or switch on its"
        " path went down and no other path admits it: it holds nothing and is admitted again when a"
        " path does; docs/controller.md, Trunks)"
    )
    note: str | None = Field(default=None, description="why it is down")
    on_path_down: Literal["wait", "close"] = "wait"
    protection: Literal["none", "1+1"] = "none"
    protection_note: str | None = Field(
        default=None, description="why a request for protection was admitted without it (unprotected_ok)"
    )
    excess: str
    policer: str
    window_us: int | None = None
    window_counts: str | None = None
    xmin_us: int | None = None
    xave_us: int | None = None
    interval_us: int | None = None
    # moving_window: n = ⌊I / Xave⌋, and what the data plane's ring lets through at worst
    # (n + quantum − 1 above MOVING_SLOTS packets; docs/dataplane.md)
    interval_packets: int | None = None
    interval_packets_enforced: int | None = None
    allocation: AllocationOut


class ViolationOut(BaseModel):
    constraint: str
    reason: str
    reason_code: int
    switch: str | None
    port: int | None
    priority: int | None
    limit: int
    would_be: int
    excess: int
    unit: str
    detail: str


class DenialOut(BaseModel):
    error: str = "admission denied"
    constraint: str
    message: str
    excess: int
    unit: str
    violations: list[ViolationOut]


class ConflictOut(BaseModel):
    error: Literal["already reserved", "context in use"]
    constraint: Literal["flow_reserved", "context_conflict"]
    message: str
    reservation: int | None = Field(
        description="the id of the reservation in the way; null for an in-band request in progress"
    )


class ReservationBatchIn(BaseModel):
    reservations: list[ReservationIn] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description=f"1 to {MAX_BATCH} reservations, each as POST /reservations",
    )


class BatchItemOut(BaseModel):
    status: int = Field(
        description="what POST /reservations would have answered for this one: 201, 409, 502, 503 or 504"
    )
    reservation: ReservationOut | None = Field(default=None, description="201: the reservation made")
    error: dict[str, Any] | None = Field(
        default=None, description="otherwise: the body POST /reservations would have answered with"
    )


class ReservationBatchOut(BaseModel):
    created: int = Field(description="how many of them were made (status 201)")
    results: list[BatchItemOut] = Field(description="one per reservation asked for, in the same order")


class RecoveryCountersOut(BaseModel):
    """IEEE 802.1CB's sequence recovery counters at a protected channel's last switch."""

    passed: int = Field(description="copies delivered: the first of each number")
    discarded: int = Field(description="duplicates eliminated")
    out_of_order: int = Field(description="copies delivered out of order")
    rogue: int = Field(description="copies dropped for a number outside the history window")
    resets: int = Field(description="times the recovery started over (first copy, or after silence)")
    lost: int | None = Field(
        default=None, description="numbers no copy of which arrived in time (both paths lost them)"
    )
    arrived_by_path: list[int] = Field(
        default_factory=list, description="copies that reached the last switch by path 1 and by path 2"
    )


class HopCountersOut(BaseModel):
    switch: str
    port: int
    path: int | None = Field(
        default=None,
        description="protection 1+1: which path (1 or 2) the hop is on; absent on hops both share",
    )
    packets: int | None = None
    bytes: int | None = None
    yellow_packets: int | None = None
    red_packets: int | None = None
    telemetry_error: str | None = Field(default=None, description="present when the switch is unreachable")
    recovery: RecoveryCountersOut | None = Field(
        default=None, description="protection 1+1, at the last switch: the sequence recovery's counters"
    )


def allocation_out(a: Allocation) -> AllocationOut:
    hops = [body_from(HopOut, h, switch=h.port.switch, port=h.port.port) for h in a.hops]
    second = None
    if a.protected:
        second = [body_from(HopOut, h, switch=h.port.switch, port=h.port.port) for h in a.paths[1]]
    disjoint = a.disjoint or None
    return body_from(AllocationOut, a, hops=hops, second_path=second, disjoint=disjoint, **asdict(a.rounding))


@functools.lru_cache(maxsize=65536)
def _address(text: str) -> ipaddress.IPv4Address:
    # A network's hosts are few and each is in thousands of reservations: parsed once each.
    return ipaddress.IPv4Address(text)


def reservation_out(r: Reservation) -> ReservationOut:
    env = r.allocation.requested
    sport, dport = (0, 0)
    if r.selector.protocol in (IP_PROTO_UDP, IP_PROTO_TCP):
        sport, dport = ports_from_flow_key(r.selector.flow_key)
    return ReservationOut(
        id=r.reservation_id,
        initiator=_address(r.key.initiator),
        context=r.key.context,
        src=_address(r.selector.src),
        dst=_address(r.selector.dst),
        protocol=r.selector.protocol,
        src_port=sport,
        dst_port=dport,
        flow_key=r.selector.flow_key,
        priority=env.priority,
        requested_rate=env.rate,
        requested_burst=env.burst,
        max_packet=env.max_packet,
        delay_bound_us=env.delay_bound_us,
        avg_idle_us=env.avg_idle_us,
        origin=r.origin,
        state=r.state,
        note=r.note or None,
        on_path_down="close" if r.close_when_down else "wait",
        protection="1+1" if r.allocation.protected else "none",
        excess="demote" if r.demote_excess else "drop",
        **_policer_out(env),
        allocation=allocation_out(r.allocation),
    )


def _policer_out(env: ChannelEnvelope) -> dict[str, Any]:
    policer = env.policer
    if policer.kind == JUMPING_WINDOW:
        counts = "packets" if policer.count_packets else "bytes"
        return {"policer": policer.kind, "window_us": policer.window_us, "window_counts": counts}
    if policer.kind == MOVING_WINDOW:
        ring = moving_ring(policer)
        return {
            "policer": policer.kind,
            "xmin_us": policer.xmin_us,
            "xave_us": policer.xave_us,
            "interval_us": policer.interval_us,
            "interval_packets": ring.packets,
            "interval_packets_enforced": ring.enforced,
        }
    return {"policer": policer.kind}


def denial_out(d: Denial) -> DenialOut:
    v = d.primary
    return DenialOut(
        constraint=v.constraint,
        message=v.describe(),
        excess=v.excess,
        unit=v.unit,
        violations=[
            body_from(
                ViolationOut,
                x,
                reason=x.reason.name,
                reason_code=int(x.reason),
                switch=x.port.switch if x.port else None,
                port=x.port.port if x.port else None,
            )
            for x in d.violations
        ],
    )
