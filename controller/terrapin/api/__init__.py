"""The REST API (FastAPI; OpenAPI at /docs, /redoc and /openapi.json), one module per concern:

  app.py                 create_app: assembles the routers below; nothing else
  context.py             what the routes share (ApiContext, OperatorContext on app.state) and
                         the Telemetry protocol (what they read from the switches)
  auth.py                the roles' tokens (operator, viewer), a dependency of every call that
                         changes state; GET /role
  errors.py              every error body and handler; Retry-After; JSON 400s from uvicorn
  health.py              GET /health
  reservations.py        POST /reservations (and /batch), GET, DELETE, counters
  reservation_bodies.py  the bodies of those routes and their conversions
  bodies.py              body_from: a response body from a record, its same-named figures read
  status.py              GET /status/switches[/{name}]
  monitor.py             /metrics, /topology, /monitor, /events[/stream], clearing queue maxima
  dashboard.py           GET / and /static

The OpenAPI document these produce is pinned by tests/snapshots/openapi.json.
"""

from terrapin.api.app import create_app
from terrapin.api.auth import Tokens
from terrapin.api.context import ApiContext, OperatorContext, Telemetry
from terrapin.api.errors import JsonErrorsH11Protocol
from terrapin.api.health import ReplicaOut, RestorationChangeOut, RestorationOut, TrunkOut

__all__ = [
    "ApiContext",
    "JsonErrorsH11Protocol",
    "OperatorContext",
    "ReplicaOut",
    "RestorationChangeOut",
    "RestorationOut",
    "Telemetry",
    "Tokens",
    "TrunkOut",
    "create_app",
]
