"""The guarantee monitor's REST and live stream (docs/operations.md): /metrics, /topology,
/monitor, /events and /events/stream, and clearing a switch's queue maxima (the one write, with
the bearer token). Everything else here reads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse

from terrapin.api.auth import require_token
from terrapin.api.context import Operator
from terrapin.api.errors import RETRY_AFTER_SECONDS, ErrorOut, SwitchErrorOut
from terrapin.metrics import CONTENT_TYPE
from terrapin.monitor import GuaranteeMonitor

# A comment line on an idle stream every so often, so proxies and the browser keep it open
# and a vanished client is noticed.
KEEPALIVE_SECONDS = 15.0
SQLITE_INT_MAX = 2**63 - 1  # the history is filtered in SQLite, whose integers are 64-bit

router = APIRouter()


@router.get("/metrics", tags=["monitor"], response_class=Response)
async def prometheus(op: Operator) -> Response:
    """Prometheus text format (docs/operations.md lists every metric)."""
    return Response(op.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/topology", tags=["monitor"])
async def topology(op: Operator) -> dict[str, Any]:
    """Switches with their ports (rate, peer: a host or `switch:port`) and the hosts."""
    return {
        "switches": [
            {
                "name": s.name,
                "device_id": s.device_id,
                "ports": [
                    {
                        "port": p.number,
                        "rate_bps": p.rate_bps,
                        "peer": p.peer,
                        "gateway_ip": p.gateway_ip,
                    }
                    for p in sorted(s.ports, key=lambda p: p.number)
                ],
            }
            for s in op.config.switches
        ],
        "hosts": [{"name": h.name, "ip": h.ip, "switch": h.switch, "port": h.port} for h in op.config.hosts],
    }


@router.get("/monitor", tags=["monitor"])
async def monitor_state(op: Operator) -> dict[str, Any]:
    """The latest poll: every admitted queue with its bound and what it saw, every channel
    hop with its delivered and reserved rate, the violations going on, and the verdict
    (`ok`, `source`: a sender beyond its envelope, `network`: a promise broken)."""
    return op.monitor.snapshot()


@router.get("/events", tags=["monitor"])
async def events(
    op: Operator,
    switch: str | None = None,
    port: Annotated[int | None, Query(ge=0, le=511, description="a 9-bit v1model port")] = None,
    channel: Annotated[
        int | None, Query(ge=0, le=SQLITE_INT_MAX, description="the channel's reservation id")
    ] = None,
    kind: str | None = None,
    cause: Literal["network", "source"] | None = None,
    active: bool | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[dict[str, Any]]:
    """Violation episodes, newest first."""
    found = op.monitor.events(
        switch=switch,
        port=port,
        reservation_id=channel,
        kind=kind,
        cause=cause,
        active=active,
        limit=limit,
    )
    return [e.as_dict() for e in found]


@router.delete(
    "/status/switches/{name}/maxima",
    tags=["status"],
    status_code=204,
    dependencies=[Depends(require_token)],
    responses={
        401: {"model": ErrorOut, "description": "no valid bearer token"},
        404: {"model": ErrorOut},
        503: {"model": SwitchErrorOut, "description": "the switch could not be written"},
    },
)
async def clear_maxima(op: Operator, name: str) -> Response:
    """Clears the switch's telemetry maxima (every port and queue's largest depth and delay
    in `GET /status/switches/{name}`), so that the next reading covers only what comes
    after: an experiment reads each of its phases on its own. The monitor's windows go on
    unaffected."""
    if name not in {s.name for s in op.config.switches}:
        raise HTTPException(404, detail={"error": f"no switch {name}"})
    try:
        await op.monitor.clear_maxima(name)
    except Exception as exc:
        raise HTTPException(
            503,
            detail={
                "error": "switch unavailable",
                "switch": name,
                "message": str(exc) or type(exc).__name__,
                "retry_after": RETRY_AFTER_SECONDS,
            },
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        ) from None
    return Response(status_code=204)


@router.get("/events/stream", tags=["monitor"], response_class=StreamingResponse)
async def stream(op: Operator, request: Request) -> StreamingResponse:
    """Server-sent events: `monitor` (the state after every poll) and `event` (an episode
    raised or cleared). The first message is the current state."""
    return StreamingResponse(
        _sse(op.monitor, request, op.stopping),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse(monitor: GuaranteeMonitor, request: Request, stopping: asyncio.Event) -> AsyncIterator[str]:
    async with monitor.subscribe() as queue:
        yield _message("monitor", monitor.snapshot())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            while not stopping.is_set():
                get = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {get, stop}, timeout=KEEPALIVE_SECONDS, return_when="FIRST_COMPLETED"
                )
                if get not in done:
                    get.cancel()
                    if stopping.is_set() or await request.is_disconnected():
                        return
                    yield ": keepalive\n\n"
                    continue
                kind, body = get.result()
                yield _message(kind, body)
        finally:
            stop.cancel()


def _message(kind: str, body: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"
