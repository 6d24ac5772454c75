"""REST over HTTPS (uvicorn's TLS with `rest.tls`), and a backup's forwarding of writes to an
https:// primary: the primary's certificate checked against the deployment's CA, the backup's
own presented when the primary asks for client certificates. Certificates from topo/pki.py;
the servers are real uvicorn servers on loopback ports of their own."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakes import RESERVATION, FakeFabric, chain_config
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from test_rest_server import serving as rest_serving
from topo.pki import PKI

from terrapin import tls
from terrapin.config import Config, ConfigError, RestTlsConfig
from terrapin.forwarding import forward_writes
from terrapin.main import Controller, replica_identity

TOKEN = "secret-token"  # chain_config's


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    pki = PKI(tmp_path_factory.mktemp("pki"))
    pki.controller("c0", ["127.0.0.1"])
    pki.controller("c1", ["127.0.0.1"])
    pki.client("admin")
    return pki


def rest_tls(pki: PKI, name: str = "c0", client_auth: bool = False) -> RestTlsConfig:
    d = pki.directory
    return RestTlsConfig(
        ca=str(d / "ca.pem"), cert=str(d / f"{name}.pem"), key=str(d / f"{name}.key"), client_auth=client_auth
    )


def controller(rest_tls: RestTlsConfig | None) -> Controller:
    base = chain_config(4)
    config = base.model_copy(update={"rest": base.rest.model_copy(update={"tls": rest_tls})})

    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return FakeFabric(topo.switch_names)

    return Controller(config, fabric_factory=factory)


@contextmanager
def serving(app: FastAPI, tls_options: dict[str, Any]) -> Iterator[str]:
    with rest_serving(app, tls_options) as (host, port):
        yield f"{host}:{port}"


def client_context(pki: PKI, cert: str | None = None, ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca or pki.ca()))
    if cert is not None:
        context.load_cert_chain(pki.directory / f"{cert}.pem", pki.directory / f"{cert}.key")
    return context


def get(
    url: str, context: ssl.SSLContext | None = None, method: str = "GET", body: bytes | None = None
) -> int:
    request = urllib.request.Request(url, method=method, data=body)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_rest_api_over_https(pki: PKI, tmp_path: Path) -> None:
    ctl = controller(rest_tls(pki))
    assert ctl.rest_tls is not None
    options = tls.uvicorn_options(ctl.rest_tls, client_auth=False)
    with serving(ctl.app, options) as address:
        assert get(f"https://{address}/health", client_context(pki)) == 200
        body = (
            b'{"src": "10.0.1.2", "dst": "10.0.2.2", "protocol": "udp", "src_port": 5004, "dst_port": 5004, '
        )
        body += b'"priority": 6, "rate": 125000, "burst": 9000, "max_packet": 1500}'
        assert get(f"https://{address}/reservations", client_context(pki), "POST", body) == 201
        # a client that does not trust the deployment's CA refuses the server
        other = PKI(tmp_path / "other", ca_name="Another CA")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            get(f"https://{address}/health", client_context(pki, ca=other.ca()))
        # plaintext HTTP to the HTTPS port gets no answer
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            get(f"http://{address}/health")


def test_client_auth_asks_every_client_for_a_certificate_of_the_ca(pki: PKI, tmp_path: Path) -> None:
    ctl = controller(rest_tls(pki, client_auth=True))
    assert ctl.rest_tls is not None
    with serving(ctl.app, tls.uvicorn_options(ctl.rest_tls, client_auth=True)) as address:
        assert get(f"https://{address}/health", client_context(pki, cert="admin")) == 200
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(f"https://{address}/health", client_context(pki))
        other = PKI(tmp_path / "other", ca_name="Another CA")
        other.client("admin")
        foreign = client_context(pki)
        foreign.load_cert_chain(other.directory / "admin.pem", other.directory / "admin.key")
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(f"https://{address}/health", foreign)


def test_a_bad_rest_tls_file_stops_the_controller_at_start(pki: PKI, tmp_path: Path) -> None:
    missing = rest_tls(pki).model_copy(update={"key": str(tmp_path / "gone.key")})
    with pytest.raises(ConfigError, match=r"^rest\.tls\.key \S+/gone\.key: cannot read it: no such file"):
        controller(missing)
    mismatched = rest_tls(pki).model_copy(update={"key": str(pki.directory / "c1.key")})
    with pytest.raises(ConfigError, match=r"^rest\.tls\.key \S+/c1\.key does not match the certificate"):
        controller(mismatched)


def test_a_replica_with_https_advertises_an_https_url(pki: PKI) -> None:
    base = chain_config(4)
    config = base.model_copy(
        update={
            "rest": base.rest.model_copy(update={"tls": rest_tls(pki)}),
            "store": "postgresql://terrapin@127.0.0.1:1/x",
            "replication": {"replica": "c0", "index": 0},
        }
    )
    config = Config.model_validate(config.model_dump())
    identity = replica_identity(config)
    assert identity is not None and identity.url == "https://127.0.0.1:8080"


def primary_app(seen: list[dict[str, str]]) -> FastAPI:
    """A stand-in for the primary: records what reached it and answers 201."""
    app = FastAPI()

    @app.post("/reservations", status_code=201)
    async def create(request: Request) -> dict[str, Any]:
        seen.append(dict(request.headers))
        return {"id": 1, "body": (await request.json())["src"]}

    return app


def backup_app(primary: str, context: ssl.SSLContext) -> TestClient:
    app = FastAPI()
    forward_writes(app, "c1", lambda: False, lambda: f"https://{primary}", lambda: None, context)
    return TestClient(app)


def test_a_backup_forwards_over_https_checking_the_primary_and_showing_its_certificate(
    pki: PKI, tmp_path: Path
) -> None:
    seen: list[dict[str, str]] = []
    primary_tls = tls.check(rest_tls(pki, "c0", client_auth=True), None, "rest.tls")
    backup_tls = tls.check(rest_tls(pki, "c1"), None, "rest.tls")
    with serving(primary_app(seen), tls.uvicorn_options(primary_tls, client_auth=True)) as primary:
        reply = backup_app(primary, tls.client_context(backup_tls)).post(
            "/reservations", json=RESERVATION, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert reply.status_code == 201, reply.text
        assert reply.json() == {"id": 1, "body": RESERVATION["src"]}
        assert seen[0]["x-terrapin-forwarded-by"] == "c1" and seen[0]["authorization"] == f"Bearer {TOKEN}"

        # the primary's certificate not of the CA the backup trusts: refused, nothing forwarded
        other = PKI(tmp_path / "other", ca_name="Another CA")
        stranger = tls.check(
            RestTlsConfig(ca=str(other.ca()), cert=str(backup_tls.cert), key=str(backup_tls.key)),
            None,
            "rest.tls",
        )
        reply = backup_app(primary, tls.client_context(stranger)).post("/reservations", json=RESERVATION)
        assert reply.status_code == 503, reply.text
        assert reply.json()["error"] == "no primary"
        assert "could not be reached" in reply.json()["message"]
        assert "CERTIFICATE_VERIFY_FAILED" in reply.json()["message"]

        # the backup without a certificate of its own: the primary refuses it in the handshake
        # (after the request was sent, under TLS 1.3: the backup cannot tell it from a primary
        # that died on it, so 504, with a hint); nothing reached the primary's application
        bare = ssl.create_default_context(cafile=str(pki.ca()))
        reply = backup_app(primary, bare).post("/reservations", json=RESERVATION)
        assert reply.status_code in (503, 504), reply.text
        if reply.status_code == 504:
            assert "this replica's rest.tls cert must be one of the CA" in reply.json()["message"]
        assert len(seen) == 1
