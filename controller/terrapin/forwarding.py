"""A backup replica forwards every write it receives to the primary and answers with the
primary's answer, so a client may talk to any replica (docs/deployment.md). Reads are answered
by the replica itself, from its copy of the store.

A forwarded request carries `X-Terrapin-Forwarded-By`; a replica that is not primary either
refuses it (503) instead of forwarding it again, so two replicas that each believe the other
primary (a lease changing hands) cannot bounce a request between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from terrapin.api.errors import STORE_RETRY_AFTER_SECONDS

LOG = logging.getLogger("terrapin.forwarding")

FORWARDED_BY = "x-terrapin-forwarded-by"
SERVED_BY = "x-terrapin-replica"
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
# Hop-by-hop headers (RFC 9110 §7.6.1), what httpx sets itself, and what uvicorn adds to every
# answer (so a forwarded answer does not carry two).
_NOT_FORWARDED = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "trailer"}
)
_NOT_RETURNED = _NOT_FORWARDED | {"date", "server", "content-encoding"}
FORWARD_TIMEOUT_S = 30.0  # a set-up waits for every switch of its path
LEASE_LOOK_S = 0.1  # how often a forwarded request looks whether its primary still holds the lease


def forward_writes(
    app: FastAPI,
    replica: str,
    is_primary: Callable[[], bool],
    primary_url: Callable[[], str | None],
    caught_up: Callable[[], object],
    tls: ssl.SSLContext | None = None,
) -> Callable[[], Awaitable[None]]:
    """Install the forwarding on `app`; returns the coroutine function that closes its client.
    `caught_up()` runs after a forwarded write, so a client reading from this replica next sees
    what it wrote (this replica follows the journal at once rather than at its next look).
    `tls`: the context an https:// primary is reached with (its certificate checked against the
    deployment's CA, this replica's own presented), tls.client_context's."""
    # A connection of its own per request: a kept-alive one to a primary that has died fails
    # after the request was written, which looks like a lost answer (504); a fresh one fails to
    # connect, which says for certain that nothing happened (503).
    client = httpx.AsyncClient(
        timeout=FORWARD_TIMEOUT_S,
        limits=httpx.Limits(max_keepalive_connections=0),
        verify=tls if tls is not None else True,
    )
    app.add_middleware(
        ForwardWrites,
        replica=replica,
        is_primary=is_primary,
        primary_url=primary_url,
        caught_up=caught_up,
        client=client,
    )

    async def close() -> None:
        await client.aclose()

    return close


class ForwardWrites:
    """The middleware: a plain ASGI one, since every request of the primary passes through it
    (Starlette's BaseHTTPMiddleware costs a task and a stream per request)."""

    def __init__(
        self,
        app: ASGIApp,
        replica: str,
        is_primary: Callable[[], bool],
        primary_url: Callable[[], str | None],
        caught_up: Callable[[], object],
        client: httpx.AsyncClient,
    ) -> None:
        self._app = app
        self._replica = replica
        self._served_by = (SERVED_BY.encode(), replica.encode())
        self._is_primary = is_primary
        self._primary_url = primary_url
        self._caught_up = caught_up
        self._client = client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _READS or self._is_primary():

            async def served_here(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), self._served_by]
                await send(message)

            await self._app(scope, receive, served_here)
            return
        response = await self._forward(Request(scope, receive))
        await response(scope, receive, send)

    async def _forward(self, request: Request) -> Response:
        replica = self._replica
        target = self._primary_url()
        if target is None or request.headers.get(FORWARDED_BY):
            why = (
                "no replica holds the primary's lease at the moment"
                if target is None
                else f"{replica} is not primary either (the lease is changing hands)"
            )
            return _unavailable(why, replica)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        headers[FORWARDED_BY] = replica
        url = target.rstrip("/") + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        body = await request.body()
        try:
            answer = await self._while_primary(
                target, self._client.request(request.method, url, content=body, headers=headers)
            )
        except LeaseLapsed:
            # The primary went on holding the request past its lease (paused, or cut off from
            # the store): a client must not wait for an answer its next primary cannot give.
            LOG.warning(
                "forwarding %s %s: the primary at %s lost its lease before it answered",
                request.method,
                request.url.path,
                target,
            )
            return JSONResponse(
                status_code=504,
                content={
                    "error": "outcome unknown",
                    "message": f"the primary at {target} lost its lease before it answered; the request "
                    "may or may not have taken effect: GET /reservations tells which",
                },
                headers={SERVED_BY: replica, "Retry-After": str(STORE_RETRY_AFTER_SECONDS)},
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # Nothing reached the primary: nothing happened. A refused TLS handshake lands here
            # too (the primary's certificate not of our CA, or not for its address).
            LOG.warning(
                "forwarding %s %s: the primary at %s could not be reached: %s",
                request.method,
                request.url.path,
                target,
                exc,
            )
            return _unavailable(f"the primary at {target} could not be reached: {exc}", replica)
        except httpx.HTTPError as exc:
            # The request reached the primary and no answer came back: it may have happened.
            # Under TLS 1.3 a primary that refuses this replica's certificate hangs up only after
            # the request was sent, which looks the same from here (a read error, or a hang-up).
            hint = ""
            if target.startswith("https:") and isinstance(exc, httpx.ReadError | httpx.RemoteProtocolError):
                hint = (
                    " (if the primary asks for client certificates, this replica's rest.tls cert "
                    "must be one of the CA its rest.tls ca names)"
                )
            LOG.warning(
                "forwarding %s %s: the primary at %s did not answer: %r%s",
                request.method,
                request.url.path,
                target,
                exc,
                hint,
            )
            return JSONResponse(
                status_code=504,
                content={
                    "error": "outcome unknown",
                    "message": f"the primary at {target} did not answer ({exc!r}); the request may or may "
                    f"not have taken effect: GET /reservations tells which{hint}",
                },
                headers={SERVED_BY: replica},
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _NOT_RETURNED}
        with contextlib.suppress(Exception):  # a store that is away: the next look catches up
            self._caught_up()
        return Response(content=answer.content, status_code=answer.status_code, headers=kept)

    async def _while_primary(self, target: str, call: Awaitable[httpx.Response]) -> httpx.Response:
        """The forwarded call's answer, unless the lease stops naming `target` first (LeaseLapsed)."""
        forwarded = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({forwarded}, timeout=LEASE_LOOK_S)
                if done:
                    return forwarded.result()
                if self._primary_url() != target:
                    raise LeaseLapsed(target)
        finally:
            forwarded.cancel()


class LeaseLapsed(Exception):
    """The replica a request was forwarded to no longer holds the lease."""


def _unavailable(message: str, replica: str) -> JSONResponse:
    body: dict[str, Any] = {
        "error": "no primary",
        "message": message,
        "retry_after": STORE_RETRY_AFTER_SECONDS,
    }
    return JSONResponse(
        status_code=503,
        content=body,
        headers={"Retry-After": str(STORE_RETRY_AFTER_SECONDS), SERVED_BY: replica},
    )
