"""What a person reads of the API: the Swagger UI and ReDoc pages must work without internet,
and the OpenAPI document must say what every operation does and returns."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeFabric, chain_config
from fastapi.testclient import TestClient

from terrapin.config import Config
from terrapin.main import Controller


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return FakeFabric(topo.switch_names)

    with TestClient(Controller(chain_config(4), fabric_factory=factory).app) as c:
        yield c


# Attributes that make a browser fetch something, and Swagger UI's `url:` for the spec.
REFERENCE = re.compile(r"""(?:\bsrc|\bhref|\bspec-url)\s*=\s*["']([^"']+)["']|\burl:\s*'([^']+)'""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_every_asset_from_this_server(client: TestClient, page: str) -> None:
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    # Nothing from a CDN, Google Fonts or an online validator: the page must work offline.
    assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html), html
    references = [a or b for a, b in REFERENCE.findall(html)]
    scripts = [u for u in references if u.endswith(".js")]
    assert scripts, f"{page} references no script: {html}"
    assert "/openapi.json" in references
    for url in references:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url
    # The bundles are the real ones (hundreds of kB), not stubs.
    for url in scripts:
        assert len(client.get(url).content) > 500_000, url


def test_every_operation_has_a_description(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    missing = [
        f"{method.upper()} {path}"
        for path, operations in spec["paths"].items()
        for method, op in operations.items()
        if not op.get("description")
    ]
    assert missing == []


def _response_schema(spec: dict[str, Any], path: str, status: str = "200") -> dict[str, Any]:
    schema: dict[str, Any] = spec["paths"][path]["get"]["responses"][status]["content"]["application/json"][
        "schema"
    ]
    return schema


def test_status_and_health_responses_are_typed(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert _response_schema(spec, "/health")["$ref"] == "#/components/schemas/HealthOut"
    assert _response_schema(spec, "/health", "503")["$ref"] == "#/components/schemas/HealthOut"
    assert _response_schema(spec, "/status/switches/{name}")["$ref"] == "#/components/schemas/SwitchStatusOut"
    assert (
        _response_schema(spec, "/status/switches")["items"]["$ref"] == "#/components/schemas/SwitchStatusOut"
    )
    counters = _response_schema(spec, "/reservations/{reservation_id}/counters")
    assert counters["items"]["$ref"] == "#/components/schemas/HopCountersOut"
    health = schemas["HealthOut"]["properties"]
    assert health["status"]["enum"] == ["ok", "degraded"] and "degraded" in health
    port = schemas["PortStatusOut"]["properties"]
    assert port["queues"]["items"]["$ref"] == "#/components/schemas/QueueStatusOut"


def test_addresses_are_ipv4_in_and_out(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model in ("ReservationIn", "ReservationOut"):
        for name in ("src", "dst"):
            assert schemas[model]["properties"][name]["format"] == "ipv4", (model, name)


def test_error_answers_of_create_are_documented(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    responses = spec["paths"]["/reservations"]["post"]["responses"]
    assert {"201", "400", "401", "409", "415", "422", "502", "503"} <= set(responses)
