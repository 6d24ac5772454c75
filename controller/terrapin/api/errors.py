"""Every error the REST API answers, in one shape: a flat JSON object with an `error` field.

400 for a body that is not JSON (or a request uvicorn cannot parse), 415 for a body sent as
another type, 422 naming the invalid field, 409 for a denied admission (naming the constraint
that failed and by how much) or a channel that exists already, 503 with Retry-After when a
switch on the path is down or the store is away, 502 when a switch refused the write, 504 when
the outcome is unknown. The table is in docs/controller.md.

This module owns the error bodies, the handlers that produce them (install_error_handlers), the
Retry-After figures, the mapping of a set-up's switch and store trouble onto 502/503/504
(raise_switch_trouble), and uvicorn's protocol that answers unparsable requests in JSON too.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import h11
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from terrapin.admission import Denial
from terrapin.api.context import Telemetry
from terrapin.channel_requests import OUTCOME_UNKNOWN, STORE_UNAVAILABLE, SWITCH_REFUSED, SWITCH_UNAVAILABLE
from terrapin.store import NotPrimary, StoreUnavailable

# What a 503 tells a client to wait: finsy retries a switch whose connection failed quickly
# after 10 s (its _FAIL_THROTTLE_SECS), so an earlier retry would mostly find it still down.
RETRY_AFTER_SECONDS = 10
# A switch that is connected but being restored (reconciled: a restart, a new primary taking
# over) is ready within about a second.
RESTORING_RETRY_AFTER_SECONDS = 2
# A store that is away (a database restart) or a primary's lease changing hands is back within a
# few seconds (docs/deployment.md).
STORE_RETRY_AFTER_SECONDS = 2


class ErrorOut(BaseModel):
    error: str
    detail: Any = None


class InvalidFieldOut(BaseModel):
    field: str = Field(description="dotted path of the field in the body, or `body`")
    message: str


class InvalidOut(BaseModel):
    error: str = "invalid request"
    detail: list[InvalidFieldOut]


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


def install_error_handlers(app: FastAPI) -> None:
    """Every error of `app` as a flat JSON object (the models above)."""

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


def raise_switch_trouble(denial: Denial, telemetry: Telemetry) -> None:
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
