"""The PostgreSQL store over TLS (`store_tls:`): the controller connects with sslmode=verify-full,
the server's certificate checked against the configured CA for the URL's host, and refuses a
server of another CA, one whose certificate is for another name, and one that does not speak
TLS, each with a message that says so and nothing stored. A server of terrapin_tools.pgserver
of the module's own with ssl on, certificates from topo/pki.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import RESERVATION, FakeFabric, chain_config
from fastapi.testclient import TestClient
from topo.pki import PKI

from terrapin.config import Config, ConfigError, parse_config
from terrapin.main import Controller
from terrapin.store import StoreUnavailable
from terrapin_tools import pgserver
from terrapin_tools.pgserver import PostgresServer

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not pgserver.installed(), reason="needs root and PostgreSQL (make setup)"
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    pki = PKI(tmp_path_factory.mktemp("pki"))
    pki.issue("db", server_hosts=["127.0.0.1"])
    pki.issue("db-elsewhere", server_hosts=["db.example"])  # not the address dialled
    pki.controller("c0")
    return pki


def server(pki: PKI, name: str | None) -> PostgresServer:
    files = None if name is None else (pki.directory / f"{name}.pem", pki.directory / f"{name}.key")
    return PostgresServer(ssl_files=files).start()


@pytest.fixture(scope="module")
def tls_server(pki: PKI) -> Iterator[PostgresServer]:
    with server(pki, "db") as s:
        yield s


def controller(dsn: str, store_tls: dict[str, Any] | None) -> Controller:
    base = chain_config(4)
    config = parse_config(base.model_dump(by_alias=True) | {"store": dsn, "store_tls": store_tls})

    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return FakeFabric(topo.switch_names)

    return Controller(config, fabric_factory=factory)


def ca_only(pki: PKI) -> dict[str, Any]:
    return {"ca": str(pki.ca())}


def test_the_store_over_verified_tls(tls_server: PostgresServer, pki: PKI) -> None:
    ctl = controller(tls_server.dsn, ca_only(pki))
    try:
        with TestClient(ctl.app) as client:
            created = client.post(
                "/reservations", json=RESERVATION, headers={"Authorization": "Bearer secret-token"}
            )
            assert created.status_code == 201, created.json()
        # the store's own connection: over TLS, with the server's certificate checked
        driver = ctl.store._driver
        assert driver.fetchone("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == (True,)
        assert "sslmode=verify-full" in driver._conn.info.dsn  # type: ignore[attr-defined]
    finally:
        ctl.store.close()
        ctl.events.close()


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("server of another CA", "certificate verify failed"),
        ("server certificate for another name", 'does not match host name "127.0.0.1"'),
        ("server without TLS", "server does not support SSL"),
    ],
)
def test_the_store_refuses_a_server_it_cannot_verify(pki: PKI, tmp_path: Path, case: str, says: str) -> None:
    if case == "server of another CA":
        other = PKI(tmp_path / "other", ca_name="Another CA")
        other.issue("db", server_hosts=["127.0.0.1"])
        running = server(other, "db")
    else:
        running = server(pki, "db-elsewhere" if case == "server certificate for another name" else None)
    with running, pytest.raises(StoreUnavailable) as refused:
        controller(running.dsn, ca_only(pki))
    assert f"PostgreSQL at 127.0.0.1:{running.port}/terrapin" in str(refused.value)
    assert says in str(refused.value), str(refused.value)


def test_store_tls_needs_a_postgres_store_and_readable_files(pki: PKI, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="store_tls is for a PostgreSQL store"):
        controller(":memory:", ca_only(pki))
    with pytest.raises(ConfigError, match=r"^store_tls\.ca \S+/absent\.pem: cannot read it: no such file"):
        controller("postgresql://terrapin@127.0.0.1:1/x", {"ca": str(tmp_path / "absent.pem")})
