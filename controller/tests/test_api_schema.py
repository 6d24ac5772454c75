"""Schemathesis over the OpenAPI spec: generated requests (valid and invalid, with the token and
without) never get a 5xx. Switches are faked; ledger, store and app are real."""

from __future__ import annotations

from typing import Any

import schemathesis
from fakes import FakeFabric, chain_config
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from terrapin.config import Config
from terrapin.main import Controller


def _app() -> Any:
    cfg = chain_config(4, rate_bps=8_000_000)

    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return FakeFabric(topo.switch_names)

    return Controller(cfg, fabric_factory=factory).app


# The server-sent events stream answers forever (test_monitor reads it): each test's one call to
# it held schemathesis for 30 s, a minute of every make test.
schema = schemathesis.openapi.from_asgi("/openapi.json", _app()).exclude(path="/events/stream")


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_with_token(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": "Bearer secret-token"}, checks=[not_a_server_error])


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_without_token(case: schemathesis.Case) -> None:
    response = case.call_and_validate(checks=[not_a_server_error])
    if case.method in ("POST", "DELETE"):
        assert response.status_code in (400, 401, 404, 405, 422)
