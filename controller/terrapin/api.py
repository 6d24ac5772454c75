"""The REST API (FastAPI; OpenAPI at /docs and /openapi.json).

Reads are open; every call that changes state needs `Authorization: Bearer <token>` (the token
from the configuration). Invalid bodies get 422 naming the field; a denied admission gets 409
naming the constraint that failed and by how much.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, Protocol

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, model_validator

from terrapin.admission import Allocation, Denial
from terrapin.admission.model import ChannelEnvelope, ChannelKey
from terrapin.constants import IP_PROTO_TCP, IP_PROTO_UDP, IP_PROTO_XTP
from terrapin.paths import ChannelSelector
from terrapin.protocol.messages import flow_key_from_ports, ports_from_flow_key
from terrapin.reservations import ChannelRequest, Conflict, ReservationService
from terrapin.store import Reservation
from terrapin.switches import ChannelCounters, QueueTelemetry

U32 = 0xFFFF_FFFF
# Module level: FastAPI resolves these annotations by name (this module uses postponed ones).
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))]
PROTOCOLS = {"udp": IP_PROTO_UDP, "tcp": IP_PROTO_TCP, "xtp": IP_PROTO_XTP}


class Telemetry(Protocol):
    """What the API reads from the switches (switches.SwitchFabric, or a test fake)."""

    @property
    def names(self) -> list[str]: ...

    def is_ready(self, name: str) -> bool: ...

    async def queue_telemetry(self, name: str, ports: list[int]) -> list[QueueTelemetry]: ...

    async def channel_counters(
        self, name: str, selector: ChannelSelector, channel_id: int
    ) -> ChannelCounters: ...

    async def drop_counters(self, name: str) -> dict[str, int]: ...


# ---- request and response bodies -----------------------------------------------------------


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

    src: ipaddress.IPv4Address
    dst: ipaddress.IPv4Address
    protocol: Literal["udp", "tcp", "xtp"]
    src_port: int = Field(default=0, ge=0, le=65535, description="UDP/TCP source port")
    dst_port: int = Field(default=0, ge=0, le=65535, description="UDP/TCP destination port")
    xtp_key: int = Field(default=0, ge=0, le=2**64 - 1, description="XTP connection key")
    priority: int = Field(ge=1, le=6, description="admitted levels are 1..6 (6 most urgent)")
    rate: int = Field(gt=0, le=U32, description="ρ, bytes per second")
    burst: int = Field(gt=0, le=U32, description="σ, bytes")
    max_packet: int = Field(gt=0, le=65535, description="largest IPv4 packet, bytes")
    delay_bound_us: int = Field(default=0, ge=0, le=U32, description="end-to-end; 0 = none")
    avg_idle_us: int = Field(default=0, ge=0, le=U32, description="the seed's average idle time")
    context: int | None = Field(default=None, ge=0, le=U32, description="default: allocated")
    excess: Literal["demote", "drop"] | None = Field(
        default=None, description="what traffic beyond the envelope gets; default from config"
    )

    @model_validator(mode="after")
    def _burst_holds_a_packet(self) -> ReservationIn:
        if self.burst < self.max_packet:
            raise ValueError("burst must be at least max_packet (a burst holds one packet)")
        return self


class HopOut(BaseModel):
    switch: str
    port: int
    priority: int
    rate: int
    burst: int
    worst_case_delay_us: int
    protected_delay_us: int | None


class AllocationOut(BaseModel):
    rate: int
    burst: int
    rate_rounded_up_by: int
    burst_rounded_up_by: int
    packet_granularity: int
    burst_packets: int
    credit_period_us: int
    hops: list[HopOut]
    worst_case_delay_us: int
    protected_delay_us: int | None


class ReservationOut(BaseModel):
    id: int
    initiator: str
    context: int
    src: str
    dst: str
    protocol: int
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
    state: str
    excess: str
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


class ErrorOut(BaseModel):
    error: str
    detail: Any = None


def allocation_out(a: Allocation) -> AllocationOut:
    return AllocationOut(
        rate=a.rate,
        burst=a.burst,
        rate_rounded_up_by=a.rounding.rate_rounded_up_by,
        burst_rounded_up_by=a.rounding.burst_rounded_up_by,
        packet_granularity=a.rounding.packet_granularity,
        burst_packets=a.rounding.burst_packets,
        credit_period_us=a.rounding.credit_period_us,
        hops=[
            HopOut(
                switch=h.port.switch,
                port=h.port.port,
                priority=h.priority,
                rate=h.rate,
                burst=h.burst,
                worst_case_delay_us=h.worst_case_delay_us,
                protected_delay_us=h.protected_delay_us,
            )
            for h in a.hops
        ],
        worst_case_delay_us=a.worst_case_delay_us,
        protected_delay_us=a.protected_delay_us,
    )


def reservation_out(r: Reservation) -> ReservationOut:
    env = r.allocation.requested
    sport, dport = (0, 0)
    if r.selector.protocol in (IP_PROTO_UDP, IP_PROTO_TCP):
        sport, dport = ports_from_flow_key(r.selector.flow_key)
    return ReservationOut(
        id=r.channel_id,
        initiator=r.key.initiator,
        context=r.key.context,
        src=r.selector.src,
        dst=r.selector.dst,
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
        excess="demote" if r.demote_excess else "drop",
        allocation=allocation_out(r.allocation),
    )


def denial_out(d: Denial) -> DenialOut:
    v = d.primary
    return DenialOut(
        constraint=v.constraint,
        message=v.describe(),
        excess=v.excess,
        unit=v.unit,
        violations=[
            ViolationOut(
                constraint=x.constraint,
                reason=x.reason.name,
                reason_code=int(x.reason),
                switch=x.port.switch if x.port else None,
                port=x.port.port if x.port else None,
                priority=x.priority,
                limit=x.limit,
                would_be=x.would_be,
                excess=x.excess,
                unit=x.unit,
                detail=x.detail,
            )
            for x in d.violations
        ],
    )


# ---- the application -----------------------------------------------------------------------


def create_app(
    service: ReservationService,
    telemetry: Telemetry,
    token: str,
    health_extra: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> FastAPI:
    app = FastAPI(
        title="Terrapin controller",
        version="0.1.0",
        description="Admission control and reservations for guaranteed-service channels "
        "(seed 000 §4.1). Mutating calls need `Authorization: Bearer <token>`.",
    )

    def require_token(credentials: BearerCredentials) -> None:
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
            raise HTTPException(
                status_code=401,
                detail="a valid bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )

    @app.exception_handler(HTTPException)
    async def _http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        # Bodies are flat JSON objects ({"error": ...}), as the response models say.
        body = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
        return JSONResponse(status_code=exc.status_code, content=body, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {
                "field": ".".join(str(x) for x in err["loc"] if x != "body") or "body",
                "message": err["msg"],
            }
            for err in exc.errors()
        ]
        return JSONResponse(
            status_code=422,
            content=jsonable_encoder({"error": "invalid request", "detail": problems}),
        )

    @app.get("/health", tags=["status"])
    async def health() -> dict[str, Any]:
        switches = {name: {"ready": telemetry.is_ready(name)} for name in telemetry.names}
        body: dict[str, Any] = {
            "status": "ok",
            "switches": switches,
            "reservations": len(service.list()),
        }
        if health_extra is not None:
            body.update(await health_extra())
        return body

    @app.post(
        "/reservations",
        status_code=201,
        tags=["reservations"],
        responses={
            409: {"model": DenialOut, "description": "admission denied or context in use"},
            401: {"model": ErrorOut},
            422: {"model": ErrorOut},
        },
        dependencies=[Depends(require_token)],
    )
    async def create_reservation(body: ReservationIn) -> ReservationOut:
        protocol = PROTOCOLS[body.protocol]
        if protocol == IP_PROTO_XTP:
            flow_key = body.xtp_key
        else:
            flow_key = flow_key_from_ports(body.src_port, body.dst_port)
        initiator = str(body.src)
        context = body.context if body.context is not None else service.next_context(initiator)
        if context > U32:
            raise HTTPException(409, detail={"error": "no free context for this initiator"})
        request = ChannelRequest(
            key=ChannelKey(initiator, context),
            selector=ChannelSelector(initiator, str(body.dst), protocol, flow_key),
            envelope=ChannelEnvelope(
                priority=body.priority,
                rate=body.rate,
                burst=body.burst,
                max_packet=body.max_packet,
                delay_bound_us=body.delay_bound_us,
                avg_idle_us=body.avg_idle_us,
            ),
            origin="rest",
            demote_excess=None if body.excess is None else body.excess == "demote",
        )
        try:
            result = await service.create(request)
        except Conflict as exc:
            raise HTTPException(
                409,
                detail={
                    "error": "context in use",
                    "constraint": "context_conflict",
                    "message": str(exc),
                },
            ) from None
        if isinstance(result, Denial):
            raise HTTPException(409, detail=denial_out(result).model_dump())
        return reservation_out(result)

    @app.get("/reservations", tags=["reservations"])
    async def list_reservations() -> list[ReservationOut]:
        return [reservation_out(r) for r in service.list()]

    def _find(reservation_id: int) -> Reservation:
        for r in service.list():
            if r.channel_id == reservation_id:
                return r
        raise HTTPException(404, detail={"error": f"no reservation {reservation_id}"})

    @app.get(
        "/reservations/{reservation_id}",
        tags=["reservations"],
        responses={404: {"model": ErrorOut}},
    )
    async def get_reservation(reservation_id: int) -> ReservationOut:
        return reservation_out(_find(reservation_id))

    @app.delete(
        "/reservations/{reservation_id}",
        status_code=204,
        tags=["reservations"],
        responses={404: {"model": ErrorOut}, 401: {"model": ErrorOut}},
        dependencies=[Depends(require_token)],
    )
    async def delete_reservation(reservation_id: int) -> Response:
        record = _find(reservation_id)
        await service.close(record.key)
        return Response(status_code=204)

    @app.get(
        "/reservations/{reservation_id}/counters",
        tags=["reservations"],
        responses={404: {"model": ErrorOut}},
    )
    async def reservation_counters(reservation_id: int) -> list[dict[str, Any]]:
        record = _find(reservation_id)
        out = []
        for hop in record.allocation.hops:
            item: dict[str, Any] = {"switch": hop.port.switch, "port": hop.port.port}
            try:
                c = await telemetry.channel_counters(hop.port.switch, record.selector, record.channel_id)
                item.update(
                    packets=c.packets,
                    bytes=c.bytes,
                    yellow_packets=c.yellow_packets,
                    red_packets=c.red_packets,
                )
            except Exception as exc:  # a disconnected switch: say so, do not fail the call
                item["telemetry_error"] = str(exc) or type(exc).__name__
            out.append(item)
        return out

    @app.get("/status/switches", tags=["status"])
    async def switches_status() -> list[dict[str, Any]]:
        return [await _switch_status(name, with_telemetry=False) for name in telemetry.names]

    @app.get(
        "/status/switches/{name}",
        tags=["status"],
        responses={404: {"model": ErrorOut}},
    )
    async def switch_status(name: str) -> dict[str, Any]:
        if name not in telemetry.names:
            raise HTTPException(404, detail={"error": f"no switch {name}"})
        return await _switch_status(name, with_telemetry=True)

    async def _switch_status(name: str, with_telemetry: bool) -> dict[str, Any]:
        ledger = service.ledger
        ports = sorted(p for p in ledger.ports if p.switch == name)
        tele: dict[tuple[int, int], QueueTelemetry] = {}
        body: dict[str, Any] = {"switch": name, "ready": telemetry.is_ready(name)}
        if with_telemetry:
            try:
                for item in await telemetry.queue_telemetry(name, [p.port for p in ports]):
                    tele[(item.port, item.priority)] = item
                body["drops"] = await telemetry.drop_counters(name)
            except Exception as exc:
                body["telemetry_error"] = str(exc) or type(exc).__name__
        port_list = []
        for pid in ports:
            st = ledger.port_status(pid)
            queues = []
            for prio in range(8):
                level = st.levels[prio - 1] if 1 <= prio <= 6 else None
                q = tele.get((pid.port, prio))
                queues.append(
                    {
                        "priority": prio,
                        "channels": level.channels if level else 0,
                        "allocated_rate": level.rate if level else 0,
                        "allocated_burst": level.burst if level else 0,
                        "worst_case_delay_us": level.worst_case_delay_us if level else None,
                        "delay_limit_us": level.delay_limit_us if level else None,
                        "max_depth_packets": q.max_depth_packets if q else None,
                        "max_delay_us": q.max_delay_us if q else None,
                        "packets": q.packets if q else None,
                        "bytes": q.bytes if q else None,
                    }
                )
            port_list.append(
                {
                    "port": pid.port,
                    "line_rate": st.line_rate,
                    "reservable_rate": st.reservable_rate,
                    "allocated_rate": st.admitted_rate,
                    "queue_capacity": st.queue_capacity,
                    "channels": st.channels,
                    "queues": queues,
                }
            )
        body["ports"] = port_list
        return body

    return app
