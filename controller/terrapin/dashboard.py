"""The operator's view: the dashboard at `/`, the guarantee monitor's REST and live stream, and
`/metrics` (docs/operations.md).

Everything here reads, except clearing a switch's queue maxima (with the bearer token); the
dashboard's writes go through the reservation API (api.py) with the bearer token the operator
enters once. The page's assets are package data of `terrapin`
(`terrapin/static/`): no CDN, nothing fetched at run time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles

from terrapin.api import RETRY_AFTER_SECONDS, ErrorOut, SwitchErrorOut, token_required
from terrapin.config import Config
from terrapin.metrics import CONTENT_TYPE, ControllerMetrics
from terrapin.monitor import GuaranteeMonitor

STATIC = Path(__file__).parent / "static"
# A comment line on an idle stream every so often, so proxies and the browser keep it open
# and a vanished client is noticed.
KEEPALIVE_SECONDS = 15.0
SQLITE_INT_MAX = 2**63 - 1  # the history is filtered in SQLite, whose integers are 64-bit


def static_files() -> StaticFiles:
    return StaticFiles(directory=STATIC)


def operator_router(
    monitor: GuaranteeMonitor,
    metrics: ControllerMetrics,
    config: Config,
    stopping: asyncio.Event,
    token: str,
) -> APIRouter:
    router = APIRouter()
    switch_names = {s.name for s in config.switches}

    @router.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @router.get("/metrics", tags=["monitor"], response_class=Response)
    async def prometheus() -> Response:
        """Prometheus text format (docs/operations.md lists every metric)."""
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @router.get("/topology", tags=["monitor"])
    async def topology() -> dict[str, Any]:
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
                for s in config.switches
            ],
            "hosts": [{"name": h.name, "ip": h.ip, "switch": h.switch, "port": h.port} for h in config.hosts],
        }

    @router.get("/monitor", tags=["monitor"])
    async def monitor_state() -> dict[str, Any]:
        """The latest poll: every admitted queue with its bound and what it saw, every channel
        hop with its delivered and reserved rate, the violations going on, and the verdict
        (`ok`, `source`: a sender beyond its envelope, `network`: a promise broken)."""
        return monitor.snapshot()

    @router.get("/events", tags=["monitor"])
    async def events(
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
        found = monitor.events(
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
        dependencies=[Depends(token_required(token))],
        responses={
            401: {"model": ErrorOut, "description": "no valid bearer token"},
            404: {"model": ErrorOut},
            503: {"model": SwitchErrorOut, "description": "the switch could not be written"},
        },
    )
    async def clear_maxima(name: str) -> Response:
        """Clears the switch's telemetry maxima (every port and queue's largest depth and delay
        in `GET /status/switches/{name}`), so that the next reading covers only what comes
        after: an experiment reads each of its phases on its own. The monitor's windows go on
        unaffected."""
        if name not in switch_names:
            raise HTTPException(404, detail={"error": f"no switch {name}"})
        try:
            await monitor.clear_maxima(name)
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
    async def stream(request: Request) -> StreamingResponse:
        """Server-sent events: `monitor` (the state after every poll) and `event` (an episode
        raised or cleared). The first message is the current state."""
        return StreamingResponse(
            _sse(monitor, request, stopping),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return router


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
