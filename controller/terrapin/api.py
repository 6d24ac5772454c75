"""The REST API (FastAPI; OpenAPI at /docs, /redoc and /openapi.json).

Reads are open; every call that changes state needs `Authorization: Bearer <token>` (the token
from the configuration). Every error is a flat JSON object with an `error` field: 400 for a body
that is not JSON (or a request uvicorn cannot parse), 415 for a body sent as another type, 422
naming the invalid field, 409 for a denied admission (naming the constraint that failed and by
how much) or a channel that exists already, 503 with Retry-After when a switch on the path is
down, 502 when a switch refused the write. The table is in docs/controller.md.

Swagger UI and ReDoc are served from the fastapi-offline package, so the pages work on a
machine without internet.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, Protocol

import h11
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi import Response as FastAPIResponse
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from terrapin.admission import Allocation, Denial
from terrapin.admission.model import (
    JUMPING_WINDOW,
    METER,
    MOVING_WINDOW,
    ChannelEnvelope,
    ChannelKey,
    Policer,
)
from terrapin.admission.policers import envelope_problem, moving_ring
from terrapin.constants import IP_PROTO_TCP, IP_PROTO_UDP, IP_PROTO_XTP
from terrapin.paths import ChannelSelector
from terrapin.protocol.messages import flow_key_from_ports, ports_from_flow_key
from terrapin.reservations import (
    OUTCOME_UNKNOWN,
    STORE_UNAVAILABLE,
    SWITCH_REFUSED,
    SWITCH_UNAVAILABLE,
    ChannelRequest,
    Conflict,
    ReservationService,
)
from terrapin.store import NotPrimary, Reservation, StoreUnavailable
from terrapin.switches import ChannelCounters, QueueTelemetry

U32 = 0xFFFF_FFFF
# Module level: FastAPI resolves these annotations by name (this module uses postponed ones).
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))]
PROTOCOLS = {"udp": IP_PROTO_UDP, "tcp": IP_PROTO_TCP, "xtp": IP_PROTO_XTP}
# What a 503 tells a client to wait: finsy retries a switch whose connection failed quickly
# after 10 s (its _FAIL_THROTTLE_SECS), so an earlier retry would mostly find it still down.
RETRY_AFTER_SECONDS = 10
# A switch that is connected but being restored (reconciled: a restart, a new primary taking
# over) is ready within about a second.
RESTORING_RETRY_AFTER_SECONDS = 2
# A store that is away (a database restart) or a primary's lease changing hands is back within a
# few seconds (docs/deployment.md).
STORE_RETRY_AFTER_SECONDS = 2


class Telemetry(Protocol):
    """What the API reads from the switches (switches.SwitchFabric, or a test fake)."""

    @property
    def names(self) -> list[str]: ...

    def is_ready(self, name: str) -> bool: ...

    def why_not_ready(self, name: str) -> str | None: ...

    def is_connected(self, name: str) -> bool: ...

    async def queue_telemetry(self, name: str, ports: list[int]) -> list[QueueTelemetry]: ...

    async def channel_counters(
        self, name: str, selector: ChannelSelector, channel_id: int
    ) -> ChannelCounters: ...

    async def drop_counters(self, name: str) -> dict[str, int]: ...


# ---- request and response bodies -----------------------------------------------------------


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
    rate: int | None = Field(
        default=None, gt=0, le=U32, validate_default=True, description="ρ, bytes per second (meter only)"
    )
    burst: int | None = Field(
        default=None,
        gt=0,
        le=U32,
        validate_default=True,
        description="σ, bytes (meter), or B, bytes per window (jumping_window)",
    )
    max_packet: int = Field(gt=0, le=65535, description="largest IPv4 packet, bytes (moving_window: Smax)")
    delay_bound_us: int = Field(default=0, ge=0, le=U32, description="end-to-end; 0 = none")
    avg_idle_us: int = Field(default=0, ge=0, le=U32, description="the seed's average idle time")
    context: int | None = Field(default=None, ge=0, le=U32, description="default: allocated")
    excess: Literal["demote", "drop"] | None = Field(
        default=None, description="what traffic beyond the envelope gets; default from config"
    )
    window_us: int | None = Field(
        default=None, gt=0, le=U32, validate_default=True, description="jumping_window: the window T, µs"
    )
    window_counts: Literal["bytes", "packets"] | None = Field(
        default=None,
        validate_default=True,
        description="jumping_window: B counts bytes (default), or whole max_packet packets",
    )
    xmin_us: int | None = Field(
        default=None,
        ge=0,
        le=U32,
        validate_default=True,
        description="moving_window: Xmin, the smallest gap between packets, µs (default 0)",
    )
    xave_us: int | None = Field(
        default=None,
        gt=0,
        le=U32,
        validate_default=True,
        description="moving_window: Xave, the average gap over any interval I, µs",
    )
    interval_us: int | None = Field(
        default=None, gt=0, le=U32, validate_default=True, description="moving_window: the interval I, µs"
    )

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
    state: str
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


class ErrorOut(BaseModel):
    error: str
    detail: Any = None


class InvalidFieldOut(BaseModel):
    field: str = Field(description="dotted path of the field in the body, or `body`")
    message: str


class InvalidOut(BaseModel):
    error: str = "invalid request"
    detail: list[InvalidFieldOut]


class ConflictOut(BaseModel):
    error: Literal["already reserved", "context in use"]
    constraint: Literal["flow_reserved", "context_conflict"]
    message: str
    reservation: int | None = Field(
        description="the id of the reservation in the way; null for an in-band request in progress"
    )


class SwitchErrorOut(BaseModel):
    error: Literal["switch unavailable", "switch error"]
    switch: str
    message: str
    retry_after: int | None = Field(description="seconds, as in the Retry-After header (503 only)")


class StoreErrorOut(BaseModel):
    error: Literal["store unavailable"]
    message: str
    retry_after: int = Field(description="seconds, as in the Retry-After header")


class OutcomeUnknownOut(BaseModel):
    error: Literal["outcome unknown"]
    message: str = Field(
        description="the request may or may not have taken effect (the store or the primary went away "
        "at the moment of commit): GET /reservations tells which, and a retry with the same context "
        "is answered 409 if it did"
    )


MAX_BATCH = 1000  # reservations in one POST /reservations/batch

# The answers of every call that takes a JSON body and the token, before it looks at the body.
_BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the body is not JSON"},
    401: {"model": ErrorOut, "description": "no valid bearer token"},
    415: {"model": ErrorOut, "description": "the body is not sent as application/json"},
}


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


class SwitchHealthOut(BaseModel):
    ready: bool
    problem: str | None = Field(default=None, description="why it is not ready")


class ReconcileOut(BaseModel):
    switch: str
    inserted: int
    modified: int
    deleted: int
    kept: int
    finished_at: float = Field(description="when it ended (Unix time, seconds)")


class ReplicaOut(BaseModel):
    replica: str
    role: Literal["primary", "backup"] = Field(
        description="the primary programs the switches and admits; a backup serves reads and "
        "forwards writes to the primary (a backup's switches are ready when connected)"
    )
    term: int | None = Field(description="the lease term this replica holds, while primary")
    primary: str | None = Field(description="the replica the lease names, if it is valid")
    primary_url: str | None
    store_error: str | None = Field(default=None, description="why the lease could not be read")


class HealthOut(BaseModel):
    # Extra keys may be added by the process that serves the API (main.py adds the two below).
    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "degraded"] = Field(
        description="ok (HTTP 200): this controller can do its part: its store answers, a replica "
        "holds the lease (replicated controllers), and every switch is connected and reconciled (a "
        "backup replica's: connected); degraded (HTTP 503) otherwise, `reasons` saying why"
    )
    reasons: list[str] = Field(
        default_factory=list,
        description="why the status is degraded: the store cannot be reached, no replica holds the "
        "lease, a switch is not ready (empty when ok)",
    )
    degraded: list[str] = Field(description="the switches that are not ready")
    switches: dict[str, SwitchHealthOut]
    reservations: int
    protocol: dict[str, int] = Field(default_factory=dict, description="reservation protocol counters")
    reconciled: dict[str, ReconcileOut] = Field(
        default_factory=dict, description="each switch's last reconciliation"
    )
    replication: ReplicaOut | None = Field(
        default=None, description="replicated controllers only: this replica's role and the lease"
    )


class HopCountersOut(BaseModel):
    switch: str
    port: int
    packets: int | None = None
    bytes: int | None = None
    yellow_packets: int | None = None
    red_packets: int | None = None
    telemetry_error: str | None = Field(default=None, description="present when the switch is unreachable")


class QueueStatusOut(BaseModel):
    priority: int
    channels: int
    allocated_rate: int
    allocated_burst: int
    worst_case_delay_us: int | None
    delay_limit_us: int | None
    max_depth_packets: int | None = Field(description="telemetry; null without it")
    max_delay_us: int | None
    packets: int | None
    bytes: int | None


class PortStatusOut(BaseModel):
    port: int
    line_rate: int
    reservable_rate: int
    allocated_rate: int
    queue_capacity: int
    channels: int
    queues: list[QueueStatusOut]


class SwitchStatusOut(BaseModel):
    switch: str
    ready: bool
    drops: dict[str, int] | None = Field(default=None, description="with telemetry only")
    telemetry_error: str | None = Field(default=None, description="present when telemetry failed")
    ports: list[PortStatusOut]


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


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


async def require_json(request: Request) -> None:
    """A body sent as anything but JSON (curl -d sends form encoding) is refused as such, rather
    than failing validation with a message that does not say why."""
    if not await request.body():
        return  # validation says the body is missing
    content_type = request.headers.get("content-type", "")
    if not _is_json(content_type):
        raise HTTPException(
            415,
            detail={
                "error": "unsupported content type",
                "detail": "send the body as application/json (it came as "
                + (content_type or "no Content-Type")
                + ")",
            },
        )


def _malformed_json(exc: RequestValidationError) -> JSONResponse | None:
    """400 for a body that is not JSON at all, saying where it breaks (FastAPI reports the
    character offset as the field and only "JSON decode error")."""
    for err in exc.errors():
        if err.get("type") != "json_invalid":
            continue
        loc = err.get("loc", ())
        offset = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
        reason = str(err.get("ctx", {}).get("error", "not JSON"))
        text = exc.body if isinstance(exc.body, str) else ""
        where = str(json.JSONDecodeError(reason, text, offset)) if text else reason
        return JSONResponse(status_code=400, content={"error": "malformed JSON", "detail": where})
    return None


def token_required(token: str) -> Callable[[BearerCredentials], Awaitable[None]]:
    """The dependency of every mutating call: 401 unless `Authorization: Bearer <token>`."""

    # async: a plain def would be run in a worker thread, a round trip per request.
    async def require_token(credentials: BearerCredentials) -> None:
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
            raise HTTPException(
                status_code=401,
                detail="a valid bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_token


def create_app(
    service: ReservationService,
    telemetry: Telemetry,
    token: str,
    health_extra: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    serving: Callable[[str], bool] | None = None,
    store_problems: Callable[[], Awaitable[list[str]]] | None = None,
) -> FastAPI:
    """`serving(name)`: whether this controller does its part with switch `name` (by default
    telemetry.is_ready; a backup replica's part is only to stay connected). `store_problems()`:
    what keeps it from doing its part besides its switches (a store it cannot reach, nobody
    holding the lease); /health is degraded while there is any."""
    serves = serving or telemetry.is_ready
    app = FastAPIOffline(
        title="Terrapin controller",
        version="0.1.0",
        description="Admission control and reservations for guaranteed-service channels "
        "(seed 000 §4.1). Mutating calls need `Authorization: Bearer <token>`. Every error is a "
        "JSON object with an `error` field.",
        # No online validator badge: the page must not reach out of this machine.
        swagger_ui_parameters={"validatorUrl": None},
    )

    require_token = token_required(token)

    # Registered for Starlette's base class so the router's own 404 and 405 are flat JSON too.
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Bodies are flat JSON objects ({"error": ...}), as the response models say.
        body = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
        return JSONResponse(status_code=exc.status_code, content=body, headers=exc.headers)

    @app.exception_handler(StoreUnavailable)
    @app.exception_handler(NotPrimary)
    async def _store_away(_request: Request, exc: Exception) -> JSONResponse:
        # Nothing was changed: the transaction that saw this was rolled back.
        return store_unavailable(str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        malformed = _malformed_json(exc)
        if malformed is not None:
            return malformed
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

    @app.get(
        "/health",
        tags=["status"],
        response_model=HealthOut,
        responses={
            503: {
                "model": HealthOut,
                "description": "degraded: the store cannot be reached, no replica holds the lease, "
                "or a switch is not ready (`reasons`)",
            }
        },
    )
    async def health(response: FastAPIResponse) -> HealthOut:
        """Whether this controller can do its part: 200 with `ok` when its store answers, a
        replica holds the lease (replicated controllers) and every switch is connected and
        reconciled (a backup's: connected); else 503 with `degraded` and the `reasons`, so a
        load balancer or a supervisor can act on the status code alone (docs/deployment.md)."""
        switches = {}
        for name in telemetry.names:
            ready = serves(name)
            problem = None if ready else telemetry.why_not_ready(name)
            switches[name] = SwitchHealthOut(ready=ready, problem=problem)
        down = sorted(name for name, s in switches.items() if not s.ready)
        reasons = await store_problems() if store_problems is not None else []
        reasons += [f"switch {name}: {switches[name].problem or 'not ready'}" for name in down]
        extra = await health_extra() if health_extra is not None else {}
        if reasons:
            response.status_code = 503
        return HealthOut(
            status="degraded" if reasons else "ok",
            reasons=reasons,
            degraded=down,
            switches=switches,
            reservations=service.count(),
            **extra,
        )

    @app.post(
        "/reservations",
        status_code=201,
        tags=["reservations"],
        responses={
            **_BODY_ERRORS,
            409: {
                "model": DenialOut | ConflictOut,
                "description": "admission denied (DenialOut), or the flow or context is taken (ConflictOut)",
            },
            422: {"model": InvalidOut, "description": "a field is invalid; each is named"},
            502: {"model": SwitchErrorOut, "description": "a switch refused the write; all rolled back"},
            504: {
                "model": OutcomeUnknownOut,
                "description": "the store or the primary went away while the reservation was being "
                "confirmed: it may or may not exist",
            },
            503: {
                "model": SwitchErrorOut | StoreErrorOut,
                "description": "a switch on the path is not connected, or the store cannot be written;"
                " nothing reserved (Retry-After)",
            },
        },
        dependencies=[Depends(require_token), Depends(require_json)],
    )
    async def create_reservation(body: ReservationIn) -> ReservationOut:
        """Admit a simplex channel and set it up on every switch of its path, all or nothing.

        201 with the allocation (rate and burst after rounding, per hop the burst there and the
        worst-case delay now and promised); 409 naming the constraint that failed and by how
        much, or the reservation already holding this flow or context."""
        return await create(body)

    @app.post(
        "/reservations/batch",
        tags=["reservations"],
        responses={
            **_BODY_ERRORS,
            422: {
                "model": InvalidOut,
                "description": "a field of some reservation is invalid (each is named, e.g. "
                "`reservations.3.rate`); none of the batch was tried",
            },
            503: {"model": StoreErrorOut, "description": "the store cannot be read; nothing reserved"},
        },
        dependencies=[Depends(require_token), Depends(require_json)],
    )
    async def create_reservations(body: ReservationBatchIn) -> ReservationBatchOut:
        """Make many reservations in one request: each is admitted and set up exactly as by
        POST /reservations, all or nothing for itself and independently of the others, and
        they go through admission side by side, as many concurrent POSTs would (so two that
        compete for one port are admitted in no stated order).

        200 with one result per reservation, in order: its status (201, 409, 502, 503, 504) and
        the reservation made or the error body POST /reservations would have answered. One
        request instead of many costs the controller far less per reservation (docs/controller.md)."""
        results = await asyncio.gather(*(_batch_item(item) for item in body.reservations))
        return ReservationBatchOut(created=sum(r.status == 201 for r in results), results=list(results))

    async def _batch_item(body: ReservationIn) -> BatchItemOut:
        try:
            made = await create(body)
        except HTTPException as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
            return BatchItemOut(status=exc.status_code, error=detail)
        except (StoreUnavailable, NotPrimary) as exc:
            return BatchItemOut(status=503, error=store_error(str(exc)).model_dump())
        return BatchItemOut(status=201, reservation=made)

    async def create(body: ReservationIn) -> ReservationOut:
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
            envelope=body.envelope(),
            origin="rest",
            demote_excess=None if body.excess is None else body.excess == "demote",
        )
        try:
            result = await service.create(request)
        except Conflict as exc:
            flow = exc.kind == "flow"
            raise HTTPException(
                409,
                detail=ConflictOut(
                    error="already reserved" if flow else "context in use",
                    constraint="flow_reserved" if flow else "context_conflict",
                    message=str(exc),
                    reservation=exc.existing.reservation_id if exc.existing else None,
                ).model_dump(),
            ) from None
        if isinstance(result, Denial):
            _raise_switch_trouble(result, telemetry)
            raise HTTPException(409, detail=denial_out(result).model_dump())
        return reservation_out(result)

    @app.get("/reservations", tags=["reservations"])
    async def list_reservations() -> list[ReservationOut]:
        """Every reservation, REST and in-band, in the order they were made."""
        return [reservation_out(r) for r in sorted(service.list(), key=lambda r: r.reservation_id)]

    def _find(reservation_id: int) -> Reservation:
        record = service.by_reservation_id(reservation_id)
        if record is None:
            raise HTTPException(404, detail={"error": f"no reservation {reservation_id}"})
        return record

    @app.get(
        "/reservations/{reservation_id}",
        tags=["reservations"],
        responses={404: {"model": ErrorOut}},
    )
    async def get_reservation(reservation_id: int) -> ReservationOut:
        """One reservation by its id."""
        return reservation_out(_find(reservation_id))

    @app.delete(
        "/reservations/{reservation_id}",
        status_code=204,
        tags=["reservations"],
        responses={404: {"model": ErrorOut}, 401: {"model": ErrorOut}},
        dependencies=[Depends(require_token)],
    )
    async def delete_reservation(reservation_id: int) -> Response:
        """Release the channel and remove it from every switch of its path; a switch that is
        down then is corrected when it reconnects. The id is never given out again."""
        record = _find(reservation_id)
        await service.close(record.key)
        return Response(status_code=204)

    @app.get(
        "/reservations/{reservation_id}/counters",
        tags=["reservations"],
        responses={404: {"model": ErrorOut}},
        response_model_exclude_unset=True,
    )
    async def reservation_counters(reservation_id: int) -> list[HopCountersOut]:
        """Per hop: packets and bytes the channel's entry matched, and packets its meter
        marked yellow and red. A switch that cannot be read says so in `telemetry_error`."""
        record = _find(reservation_id)
        out = []
        for hop in record.allocation.hops:
            try:
                c = await telemetry.channel_counters(hop.port.switch, record.selector, record.channel_id)
            except Exception as exc:  # a disconnected switch: say so, do not fail the call
                out.append(
                    HopCountersOut(
                        switch=hop.port.switch,
                        port=hop.port.port,
                        telemetry_error=str(exc) or type(exc).__name__,
                    )
                )
                continue
            out.append(
                HopCountersOut(
                    switch=hop.port.switch,
                    port=hop.port.port,
                    packets=c.packets,
                    bytes=c.bytes,
                    yellow_packets=c.yellow_packets,
                    red_packets=c.red_packets,
                )
            )
        return out

    @app.get("/status/switches", tags=["status"], response_model_exclude_unset=True)
    async def switches_status() -> list[SwitchStatusOut]:
        """Every switch: per port the capacity, and per queue what is allocated and promised."""
        return [await _switch_status(name, with_telemetry=False) for name in telemetry.names]

    @app.get(
        "/status/switches/{name}",
        tags=["status"],
        responses={404: {"model": ErrorOut}},
        response_model_exclude_unset=True,
    )
    async def switch_status(name: str) -> SwitchStatusOut:
        """One switch as in /status/switches, with telemetry read from it: per queue the
        largest depth and delay seen and the traffic counted, and the drop counters."""
        if name not in telemetry.names:
            raise HTTPException(404, detail={"error": f"no switch {name}"})
        return await _switch_status(name, with_telemetry=True)

    async def _switch_status(name: str, with_telemetry: bool) -> SwitchStatusOut:
        ledger = service.ledger
        ports = sorted(p for p in ledger.ports if p.switch == name)
        tele: dict[tuple[int, int], QueueTelemetry] = {}
        extra: dict[str, Any] = {}
        if with_telemetry:
            try:
                for item in await telemetry.queue_telemetry(name, [p.port for p in ports]):
                    tele[(item.port, item.priority)] = item
                extra["drops"] = await telemetry.drop_counters(name)
            except Exception as exc:
                extra["telemetry_error"] = str(exc) or type(exc).__name__
        port_list = []
        for pid in ports:
            st = ledger.port_status(pid)
            queues = []
            for prio in range(8):
                level = st.levels[prio - 1] if 1 <= prio <= 6 else None
                q = tele.get((pid.port, prio))
                queues.append(
                    QueueStatusOut(
                        priority=prio,
                        channels=level.channels if level else 0,
                        allocated_rate=level.rate if level else 0,
                        allocated_burst=level.burst if level else 0,
                        worst_case_delay_us=level.worst_case_delay_us if level else None,
                        delay_limit_us=level.delay_limit_us if level else None,
                        max_depth_packets=q.max_depth_packets if q else None,
                        max_delay_us=q.max_delay_us if q else None,
                        packets=q.packets if q else None,
                        bytes=q.bytes if q else None,
                    )
                )
            port_list.append(
                PortStatusOut(
                    port=pid.port,
                    line_rate=st.line_rate,
                    reservable_rate=st.reservable_rate,
                    allocated_rate=st.admitted_rate,
                    queue_capacity=st.queue_capacity,
                    channels=st.channels,
                    queues=queues,
                )
            )
        return SwitchStatusOut(switch=name, ready=telemetry.is_ready(name), ports=port_list, **extra)

    return app


def _raise_switch_trouble(denial: Denial, telemetry: Telemetry) -> None:
    """A switch that could not be written is not an admission decision: 503 (down: retry later)
    or 502 (it refused the write), naming the switch."""
    v = denial.primary
    if v.constraint == OUTCOME_UNKNOWN:
        raise HTTPException(
            504, detail=OutcomeUnknownOut(error="outcome unknown", message=v.detail).model_dump()
        )
    if v.constraint == STORE_UNAVAILABLE:
        raise HTTPException(503, detail=store_error(v.detail).model_dump(), headers=_store_retry())
    if v.constraint not in (SWITCH_UNAVAILABLE, SWITCH_REFUSED) or v.port is None:
        return
    if v.constraint == SWITCH_UNAVAILABLE:
        restoring = telemetry.is_connected(v.port.switch)
        wait = RESTORING_RETRY_AFTER_SECONDS if restoring else RETRY_AFTER_SECONDS
        body = SwitchErrorOut(
            error="switch unavailable", switch=v.port.switch, message=v.detail, retry_after=wait
        )
        raise HTTPException(503, detail=body.model_dump(), headers={"Retry-After": str(wait)})
    body = SwitchErrorOut(error="switch error", switch=v.port.switch, message=v.detail, retry_after=None)
    raise HTTPException(502, detail=body.model_dump())


def store_error(message: str) -> StoreErrorOut:
    return StoreErrorOut(error="store unavailable", message=message, retry_after=STORE_RETRY_AFTER_SECONDS)


def _store_retry() -> dict[str, str]:
    return {"Retry-After": str(STORE_RETRY_AFTER_SECONDS)}


def store_unavailable(message: str) -> JSONResponse:
    return JSONResponse(status_code=503, content=store_error(message).model_dump(), headers=_store_retry())


class JsonErrorsH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, but a request it cannot parse (a header or request line
    beyond h11's 16 KiB, a malformed request line) gets a JSON 400 like every other error; uvicorn
    answers those in plain text before the application sees them."""

    def send_400_response(self, msg: str) -> None:
        body = json.dumps(
            {
                "error": "bad request",
                "detail": "not a valid HTTP/1.1 request, or its request line or headers exceed 16 KiB",
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()
