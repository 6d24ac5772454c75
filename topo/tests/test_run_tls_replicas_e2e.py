"""`make run TLS=1 REPLICAS=2 STORE=postgres`: christie with two controller replicas on a
PostgreSQL store, TLS everywhere; a write sent to the backup is forwarded to the primary over
HTTPS. A module of its own: the single-controller network of test_run_tls_e2e.py is torn down
(with its veths and its switch's port) before this one comes up.

Needs root, build/p4 and PostgreSQL (make setup)."""

from __future__ import annotations

import os
import time

import pytest

from topo import christie
from topo.network import call, running
from topo.p4switch import REPO
from topo.tests.test_christie_e2e import reservation_body

INTF_PREFIX = "trptlr"  # its own (scripts/leftovers.py judges every trpt one)
REST_PORT = 18391

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build/p4/terrapin.json").exists(),
    reason="needs root and build/p4 (make setup)",
)


def test_replicas_forward_over_https(tmp_path_factory: pytest.TempPathFactory) -> None:
    """make run TLS=1 REPLICAS=2 STORE=postgres: a write sent to the backup reaches the primary
    over HTTPS (the primary's certificate checked, the backup's presented) and is answered by it."""
    from terrapin_tools import pgserver

    if not pgserver.installed():
        pytest.skip("needs PostgreSQL (make setup)")
    state = tmp_path_factory.mktemp("replicas-tls")
    with running(
        christie.plan(rate_mbps=20),
        rest_port=REST_PORT,
        token="tls-token",
        state_dir=state,
        intf_prefix=INTF_PREFIX,
        pid_dir=state / "pids",
        store="postgres",
        replicas=2,
        tls_dir=state / "pki",
    ) as network:
        primary, backup = network.controllers
        assert backup.rest_url == f"https://127.0.0.1:{REST_PORT + 1}"
        deadline = time.monotonic() + 30
        while True:  # the backup is healthy once connected, the primary once reconciled
            status, created = call(
                network, "POST", "/reservations", reservation_body(network, "a1", "b1"), url=backup.rest_url
            )
            if status == 201 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert status == 201, created
        _, health = call(network, "GET", "/health", url=backup.rest_url)
        assert health["replication"]["primary_url"] == primary.rest_url
        status, listed = call(network, "GET", "/reservations", url=primary.rest_url)
        assert status == 200 and [r["id"] for r in listed] == [created["id"]]
