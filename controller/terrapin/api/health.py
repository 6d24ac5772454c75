"""GET /health: whether this controller can do its part (its store, the lease, every switch),
as a status code a load balancer or a supervisor acts on, and the body that says why.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi import Response as FastAPIResponse
from pydantic import BaseModel, ConfigDict, Field

from terrapin.api.context import Api
from terrapin.store import DOWN

router = APIRouter()


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


class TrunkOut(BaseModel):
    trunk: str = Field(description="its two ends, switch:port-switch:port")
    up: bool = Field(
        description="whether it carries the controller's probes both ways (docs/controller.md, Trunks)"
    )
    changed_at: float | None = Field(description="when it last went down or came back (Unix time)")
    why: str | None = Field(description="why it is down")


class RestorationChangeOut(BaseModel):
    reservation: int
    channel: str = Field(description="initiator/context")
    kind: Literal["moved", "down", "restored", "closed"]
    what: str = Field(description="its path before => after, or why it is down")


class RestorationOut(BaseModel):
    down: list[str] = Field(description="the trunks down when it ran")
    started_at: float = Field(description="Unix time")
    finished_at: float = Field(description="Unix time: every change recorded and written")
    store_ms: float = Field(description="admitting each channel on its new path and recording it")
    switches_ms: float = Field(description="making the switches match (new paths first)")
    changes: list[RestorationChangeOut]
    errors: dict[str, str] = Field(description="switches not written (they are when they reconnect)")


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
    trunks: list[TrunkOut] = Field(
        default_factory=list,
        description="the switch-to-switch links and whether they carry traffic (the primary's view;"
        " a trunk down degrades the status only if it leaves a channel down)",
    )
    channels_down: int = Field(default=0, description="reservations no path admits now (state down)")
    restoration: RestorationOut | None = Field(
        default=None, description="the last restoration: what moved off dead trunks, and how fast"
    )


@router.get(
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
async def health(api: Api, response: FastAPIResponse) -> HealthOut:
    """Whether this controller can do its part: 200 with `ok` when its store answers, a
    replica holds the lease (replicated controllers) and every switch is connected and
    reconciled (a backup's: connected); else 503 with `degraded` and the `reasons`, so a
    load balancer or a supervisor can act on the status code alone (docs/deployment.md)."""
    telemetry = api.telemetry
    switches = {}
    for name in telemetry.names:
        ready = api.serving(name)
        problem = None if ready else telemetry.why_not_ready(name)
        switches[name] = SwitchHealthOut(ready=ready, problem=problem)
    down = sorted(name for name, s in switches.items() if not s.ready)
    reasons = await api.store_problems() if api.store_problems is not None else []
    reasons += [f"switch {name}: {switches[name].problem or 'not ready'}" for name in down]
    stranded = [r for r in api.service.list() if r.state == DOWN]
    if stranded:
        ids = ", ".join(str(r.reservation_id) for r in stranded[:10])
        more = f" and {len(stranded) - 10} more" if len(stranded) > 10 else ""
        reasons.append(f"{len(stranded)} reservations down, no path admits them: {ids}{more}")
    extra = await api.health_extra() if api.health_extra is not None else {}
    if reasons:
        response.status_code = 503
    return HealthOut(
        status="degraded" if reasons else "ok",
        reasons=reasons,
        degraded=down,
        switches=switches,
        reservations=api.service.count(),
        channels_down=len(stranded),
        **extra,
    )
