"""GET /status/switches and /status/switches/{name}: per switch, port and queue what admission
has allocated and promised (from the ledger), and for one switch what its telemetry saw.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from terrapin.api.bodies import body_from
from terrapin.api.context import Api, ApiContext
from terrapin.api.errors import ErrorOut
from terrapin.switches import QueueTelemetry

router = APIRouter()


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


@router.get("/status/switches", tags=["status"], response_model_exclude_unset=True)
async def switches_status(api: Api) -> list[SwitchStatusOut]:
    """Every switch: per port the capacity, and per queue what is allocated and promised."""
    return [await _switch_status(api, name, with_telemetry=False) for name in api.telemetry.names]


@router.get(
    "/status/switches/{name}",
    tags=["status"],
    responses={404: {"model": ErrorOut}},
    response_model_exclude_unset=True,
)
async def switch_status(api: Api, name: str) -> SwitchStatusOut:
    """One switch as in /status/switches, with telemetry read from it: per queue the
    largest depth and delay seen and the traffic counted, and the drop counters."""
    if name not in api.telemetry.names:
        raise HTTPException(404, detail={"error": f"no switch {name}"})
    return await _switch_status(api, name, with_telemetry=True)


async def _switch_status(api: ApiContext, name: str, with_telemetry: bool) -> SwitchStatusOut:
    telemetry = api.telemetry
    ledger = api.service.ledger
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
            body_from(PortStatusOut, st, port=pid.port, allocated_rate=st.admitted_rate, queues=queues)
        )
    return SwitchStatusOut(switch=name, ready=telemetry.is_ready(name), ports=port_list, **extra)
