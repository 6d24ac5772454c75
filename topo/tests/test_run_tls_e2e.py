"""`make run TLS=1`: christie under Mininet as topo/run.py brings it up with --tls (a private CA
and the run's certificates from topo/pki.py in a directory of the test's own, supervised, on
terrapin-switch): the controller reaches the switch over mutual TLS, the REST API answers over
HTTPS only, a reservation made over HTTPS is on the switch, the switch's metrics are HTTPS with
a client certificate, and everything is gone after.

Needs root and build/p4 (make setup)."""

from __future__ import annotations

import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from topo import christie
from topo.network import RunningNetwork, call, running
from topo.p4switch import REPO
from topo.run import describe, the_example
from topo.tests.test_christie_e2e import reservation_body

# Its own prefix (scripts/leftovers.py judges every trpt one), apart from the other topo tests'.
INTF_PREFIX = "trptls"
REST_PORT = 18381

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build/p4/terrapin.json").exists(),
    reason="needs root and build/p4 (make setup)",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNetwork]:
    os.environ["PATH"] = f"{REPO / 'build' / 'venv' / 'bin'}:{os.environ['PATH']}"
    state = tmp_path_factory.mktemp("run-tls")
    with running(
        christie.plan(rate_mbps=20),
        rest_port=REST_PORT,
        token="tls-token",
        state_dir=state,
        intf_prefix=INTF_PREFIX,
        supervise=True,  # as make run does
        pid_dir=state / "pids",
        tls_dir=state / "pki",
    ) as network:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, _ = call(network, "GET", "/health")
            if status == 200:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the controller never reported the switch ready: {call(network, 'GET', '/health')}")
        yield network
    leftovers = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f": {INTF_PREFIX}" not in leftovers, "veths left behind"


def test_everything_is_configured_for_tls(run: RunningNetwork) -> None:
    assert run.tls is not None and run.rest_url == f"https://127.0.0.1:{REST_PORT}"
    config = yaml.safe_load(run.config_path.read_text())
    assert config["rest"]["tls"]["ca"] == str(run.tls.ca)
    assert all(s["tls"]["cert"] == str(run.tls.controller.cert) for s in config["switches"])
    switch = run.net.get("terrapin")
    assert "--grpc-server-with-client-auth" in switch.command_line()
    banner = describe(run, the_example(run))
    assert f"REST API: https://127.0.0.1:{REST_PORT}" in banner
    assert f"curl -s --cacert {run.tls.ca} -X POST https://127.0.0.1:{REST_PORT}/reservations" in banner


def test_a_reservation_over_https_is_on_the_switch(run: RunningNetwork) -> None:
    status, created = call(run, "POST", "/reservations", reservation_body(run, "a1", "b1"))
    assert status == 201, created
    status, listed = call(run, "GET", "/reservations")
    assert status == 200 and [r["id"] for r in listed] == [created["id"]]
    # on the switch: read back over the controller's own TLS stream
    status, counters = call(run, "GET", f"/reservations/{created['id']}/counters")
    assert status == 200, counters
    status, _ = call(run, "DELETE", f"/reservations/{created['id']}")
    assert status == 204


def test_plain_http_and_untrusting_clients_get_nothing(run: RunningNetwork) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://127.0.0.1:{REST_PORT}/health", timeout=5).read()
    untrusting = ssl.create_default_context()  # the system's CAs, not the run's
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://127.0.0.1:{REST_PORT}/health", timeout=5, context=untrusting)


def test_the_switch_metrics_need_a_client_certificate(run: RunningNetwork) -> None:
    switch = run.net.get("terrapin")
    assert any(name == "terrapin_drops_total" for name, _labels in switch.metrics())
    assert run.tls is not None
    without = ssl.create_default_context(cafile=str(run.tls.ca))
    with pytest.raises(OSError):
        urllib.request.urlopen(
            f"https://127.0.0.1:{switch.metrics_port}/metrics", timeout=5, context=without
        ).read()
