"""A backup's forwarding of writes to the primary (terrapin/forwarding.py): a primary that holds
a forwarded request past its lease is answered for by the backup at once, not after the
forwarding's own 30 s timeout that outlasts any client's."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from test_rest_server import serving

from terrapin.forwarding import FORWARD_TIMEOUT_S, forward_writes


def stalled_primary(arrived: threading.Event, released: threading.Event) -> FastAPI:
    """A stand-in for a primary paused by SIGSTOP: it accepts the request and answers nothing
    until `released` (the test's end, so that its server can stop)."""
    app = FastAPI()

    @app.post("/reservations", status_code=201)
    async def create() -> dict[str, Any]:
        arrived.set()
        while not released.is_set():
            await asyncio.sleep(0.02)
        return {}

    return app


def test_a_request_held_by_a_primary_that_loses_its_lease_is_answered_504_at_once() -> None:
    """Found by `make chaos` (seed 7, --duration 1800: pause_primary of c0 at 8.1 s): three POSTs
    to the backup c1, forwarded to the paused c0, were never answered within the clients' 10 s
    while c1 answered /health. The backup now watches the lease while it waits: once the lease
    no longer names the primary it forwarded to, it answers 504 (the outcome is unknown: the
    primary may have written before it stopped) with Retry-After."""
    arrived, released = threading.Event(), threading.Event()
    with serving(stalled_primary(arrived, released)) as (host, port):
        target = f"http://{host}:{port}"
        lease = {"url": target}
        app = FastAPI()
        forward_writes(app, "c1", lambda: False, lambda: lease["url"], lambda: None)

        def lapse() -> None:
            arrived.wait(10)
            time.sleep(0.3)
            lease["url"] = None  # type: ignore[assignment]  # the lease expired unrenewed

        threading.Thread(target=lapse, daemon=True).start()
        started = time.monotonic()
        reply = TestClient(app).post("/reservations", json={"src": "10.0.1.2"})
        took = time.monotonic() - started
        released.set()
    assert arrived.is_set()
    assert reply.status_code == 504, reply.text
    assert reply.json()["error"] == "outcome unknown" and "lost its lease" in reply.json()["message"]
    assert reply.headers["retry-after"] and reply.headers["x-terrapin-replica"] == "c1"
    assert took < FORWARD_TIMEOUT_S / 3, took


def test_a_request_answered_while_the_lease_holds_is_the_primarys_answer() -> None:
    app_primary = FastAPI()

    @app_primary.post("/reservations", status_code=201)
    async def create() -> dict[str, Any]:
        await asyncio.sleep(0.35)  # longer than a look at the lease
        return {"id": 7}

    with serving(app_primary) as (host, port):
        app = FastAPI()
        forward_writes(app, "c1", lambda: False, lambda: f"http://{host}:{port}", lambda: None)
        reply = TestClient(app).post("/reservations", json={"src": "10.0.1.2"})
    assert reply.status_code == 201 and reply.json() == {"id": 7}
