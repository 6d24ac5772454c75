"""create_app: the FastAPI application, assembled from the routers of this package. It owns no
route and no rule of its own: the routers (one module per resource) answer, errors.py shapes
every error, auth.py checks the token and names its role, and context.py hands the routes what
they read.

Swagger UI and ReDoc are served from the fastapi-offline package, so /docs and /redoc work on a
machine without internet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from terrapin.api import auth, dashboard, health, monitor, reservations, status
from terrapin.api.context import ApiContext, OperatorContext, Telemetry
from terrapin.api.errors import install_error_handlers
from terrapin.reservations import ReservationService


def create_app(
    service: ReservationService,
    telemetry: Telemetry,
    tokens: auth.Tokens,
    health_extra: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    serving: Callable[[str], bool] | None = None,
    store_problems: Callable[[], Awaitable[list[str]]] | None = None,
    operator: OperatorContext | None = None,
) -> FastAPI:
    """`serving(name)`: whether this controller does its part with switch `name` (by default
    telemetry.is_ready; a backup replica's part is only to stay connected). `store_problems()`:
    what keeps it from doing its part besides its switches (a store it cannot reach, nobody
    holding the lease); /health is degraded while there is any. `operator`: the dashboard and
    the guarantee monitor's routes, served when given (the controller process gives it)."""
    app = FastAPIOffline(
        title="Terrapin controller",
        version="0.1.0",
        description="Admission control and reservations for guaranteed-service channels "
        "(seed 000 §4.1). Reads are open; mutating calls need `Authorization: Bearer <token>` with "
        "the operator's token (the viewer's is refused 403). Every error is a JSON object with an "
        "`error` field.",
        # No online validator badge: the page must not reach out of this machine.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.api = ApiContext(
        service=service,
        telemetry=telemetry,
        tokens=tokens,
        serving=serving or telemetry.is_ready,
        health_extra=health_extra,
        store_problems=store_problems,
    )
    install_error_handlers(app)
    # The order of the routes is the order of the OpenAPI document's paths.
    for router in (health.router, auth.router, reservations.router, status.router):
        app.include_router(_forbidden_documented(router))
    if operator is not None:
        app.state.operator = operator
        app.include_router(_forbidden_documented(dashboard.router))
        app.include_router(_forbidden_documented(monitor.router))
        app.mount("/static", dashboard.static_files(), name="static")
    return app


def _forbidden_documented(router: APIRouter) -> APIRouter:
    """Every route that needs the operator's token answers the viewer's with 403: said once
    here for all of them, rather than in each route's list of responses (before the router is
    included: the app takes its routes' responses then)."""
    for route in router.routes:
        if isinstance(route, APIRoute) and any(
            d.call is auth.require_token for d in route.dependant.dependencies
        ):
            route.responses.setdefault(403, auth.FORBIDDEN_RESPONSE)
    return router
