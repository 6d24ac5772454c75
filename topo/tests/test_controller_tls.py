"""The controller's side of P4Runtime over mutual TLS (docs/deployment.md, "For the controller"):
a switch's `tls:` block in the controller's configuration becomes finsy's credentials, and the
controller's real connection code (terrapin/switches/connection.py) gets in to terrapin-switch
and to p4lang's simple_switch_grpc run with the same flags. Every other combination is refused,
and the controller logs once what is wrong (a switch certificate of another CA or for another
name, its own certificate refused, plaintext on one side and TLS on the other), keeps it for
/health, and changes nothing on the switch; a file that is missing, unreadable or not a key of
its certificate stops the controller at start with the setting and the file named.

Each switch runs without interfaces on a free loopback port (topo/tests/test_switch_tls.py's
start_switch); the BMv2 half runs in make test's topo-bmv2 suite."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from terrapin.config import Config, ConfigError, parse_config
from terrapin.switches.connection import SwitchConnections
from topo.p4switch import SWITCH_KINDS
from topo.pki import PKI, Issued
from topo.tests.test_switch_tls import DEVICE_ID, RunningSwitch, start_switch, stop_switch, tls_flags

REPO = Path(__file__).resolve().parents[2]
HOUR = dt.timedelta(hours=1)
P4_FILES = [REPO / "build" / "p4" / "terrapin.json", REPO / "build" / "p4" / "terrapin.p4info.txtpb"]
if missing := [str(p) for p in P4_FILES if not p.exists()]:
    pytest.skip(f"{', '.join(missing)} missing (make p4)", allow_module_level=True)

READY_WITHIN_S = 20.0
# The controller probes a switch that has not connected after 2 s (connection.DIAGNOSE_AFTER_S).
DIAGNOSED_WITHIN_S = 10.0


@dataclass(frozen=True)
class Certs:
    ours: PKI
    switch: Issued  # for 127.0.0.1 and the name "s1"
    controller: Issued
    foreign_ca: Path  # another CA's certificate
    foreign_controller: Issued  # a client certificate of that other CA
    expired_controller: Issued  # ours, out of its dates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    base = tmp_path_factory.mktemp("pki")
    ours, theirs = PKI(base / "ours"), PKI(base / "theirs", ca_name="Another CA")
    now = dt.datetime.now(dt.UTC)
    return Certs(
        ours=ours,
        switch=ours.switch("s1", ["127.0.0.1", "s1"]),
        controller=ours.controller("c0"),
        foreign_ca=theirs.ca(),
        foreign_controller=theirs.controller("c0"),
        expired_controller=ours.issue(
            "c0-expired", client=True, not_before=now - 2 * HOUR, not_after=now - HOUR
        ),
    )


def config(address: str, kind: str, tls: dict[str, Any] | None) -> Config:
    switch: dict[str, Any] = {
        "name": "s1",
        "address": address,
        "device_id": DEVICE_ID,
        "ports": [{"number": 1, "mac": "02:00:00:00:01:01", "rate_bps": 10_000_000, "peer": "h1"}],
    }
    if kind == "bmv2":
        switch |= {"kind": "bmv2", "thrift_port": 9090}  # not used: only P4Runtime is spoken here
    if tls is not None:
        switch["tls"] = tls
    return parse_config(
        {
            "p4": {"p4info": str(P4_FILES[1]), "json": str(P4_FILES[0])},
            "switches": [switch],
            "hosts": [
                {"name": "h1", "ip": "10.0.1.2", "mac": "0a:00:00:00:00:01", "switch": "s1", "port": 1}
            ],
        }
    )


def mutual_tls(certs: Certs, **change: Any) -> dict[str, Any]:
    return {
        "ca": str(certs.ours.ca()),
        "cert": str(certs.controller.cert),
        "key": str(certs.controller.key),
    } | change


@dataclass
class Outcome:
    ready: bool
    problem: str | None  # what the controller kept for /health
    logged: list[str]  # the controller's ERROR lines about the switch
    reconciled: bool


def connect(cfg: Config, caplog: pytest.LogCaptureFixture, wait_s: float) -> Outcome:
    """The controller's connection code against the switch for up to `wait_s`: whether the switch
    became ready (reconciled as this controller's primary), and what was logged."""
    reconciles: list[str] = []

    async def reconcile(name: str) -> Any:  # a stand-in for the ReconcileReport
        reconciles.append(name)
        return "reconciled"

    async def serve_packets(_sw: Any) -> None:
        await asyncio.sleep(3600)

    async def run() -> Outcome:
        connections = SwitchConnections(cfg, reconcile, serve_packets)
        connections.start()
        try:
            ready = await connections.wait_ready(wait_s)
            if not ready:  # give the diagnosis its time, then one more look: logged once?
                deadline = asyncio.get_running_loop().time() + DIAGNOSED_WITHIN_S
                while "s1" not in connections.last_error and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.5)
            return Outcome(ready, connections.why_not_ready("s1"), [], bool(reconciles))
        finally:
            await connections.stop()

    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="terrapin.switches"):
        outcome = asyncio.run(run())
    outcome.logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("switch s1:")]
    return outcome


@pytest.fixture(scope="module", params=SWITCH_KINDS)
def mutual(
    request: pytest.FixtureRequest, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningSwitch]:
    """A switch of each kind that requires client certificates of our CA."""
    running = start_switch(
        request.param,
        tmp_path_factory.mktemp("switch"),
        "mutual",
        tls_flags(certs.switch, certs.ours.ca(), True),
    )
    yield running
    stop_switch(running)


def test_the_controller_gets_in_with_mutual_tls(
    mutual: RunningSwitch, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    outcome = connect(config(mutual.address, mutual.kind, mutual_tls(certs)), caplog, READY_WITHIN_S)
    assert outcome.ready and outcome.reconciled and outcome.problem is None, outcome
    assert outcome.logged == []
    # by the name in the switch's certificate instead of the address
    named = mutual_tls(certs, server_name="s1")
    assert connect(config(mutual.address, mutual.kind, named), caplog, READY_WITHIN_S).ready


# Each case: the controller's tls: block (None: plaintext), and what its one log line says.
REFUSED: dict[str, tuple[Any, str]] = {
    "switch certificate of another CA": (
        lambda c: mutual_tls(c, ca=str(c.foreign_ca)),
        # the reason is OpenSSL's: "unable to get local issuer certificate" from terrapin-switch,
        # "self-signed certificate in certificate chain" from simple_switch_grpc (it sends its CA)
        "presents a certificate that {foreign_ca} does not vouch for (",
    ),
    "wrong server name": (
        lambda c: mutual_tls(c, server_name="s2"),
        "presents a certificate that is not for 's2' (Hostname mismatch, certificate is not valid for 's2'.)"
        ": set tls.server_name to a name the certificate holds, or reissue it with this address",
    ),
    "controller certificate of another CA": (
        lambda c: mutual_tls(c, cert=str(c.foreign_controller.cert), key=str(c.foreign_controller.key)),
        "refused this controller's certificate {foreign_cert} (",
    ),
    "expired controller certificate": (
        lambda c: mutual_tls(c, cert=str(c.expired_controller.cert), key=str(c.expired_controller.key)),
        "refused this controller's certificate {expired_cert} (",
    ),
    "plaintext controller": (
        lambda c: None,
        "speaks TLS (it runs with --grpc-server-ssl) and this controller dials it in plaintext: "
        "give the switch a tls: block",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_controller_is_refused_and_says_why(
    mutual: RunningSwitch, certs: Certs, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    block, says = REFUSED[case]
    says = says.format(
        foreign_ca=certs.foreign_ca,
        foreign_cert=certs.foreign_controller.cert,
        expired_cert=certs.expired_controller.cert,
    )
    outcome = connect(config(mutual.address, mutual.kind, block(certs)), caplog, 3.0)
    assert not outcome.ready and not outcome.reconciled, outcome
    assert len(outcome.logged) == 1, outcome.logged  # once, however often gRPC retried
    expected = f"switch s1: the switch at {mutual.address} {says}"
    assert outcome.logged[0].startswith(expected), outcome.logged[0]
    assert outcome.problem is not None and outcome.logged[0].removeprefix("switch s1: ") in outcome.problem


@pytest.mark.parametrize("kind", SWITCH_KINDS)
def test_a_tls_controller_to_a_plaintext_switch_says_so(
    kind: str, certs: Certs, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    running = start_switch(kind, tmp_path, "plain", [])
    try:
        outcome = connect(config(running.address, kind, mutual_tls(certs)), caplog, 3.0)
    finally:
        stop_switch(running)
    assert not outcome.ready and len(outcome.logged) == 1, outcome
    assert outcome.logged[0].startswith(f"switch s1: the switch at {running.address} does not answer TLS (")
    assert outcome.logged[0].endswith("is it running without --grpc-server-ssl?")


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (
            "missing key",
            r"switches\.s1\.tls\.key \S+/missing\.key: cannot read it: no such file or directory",
        ),
        ("unreadable key", r"switches\.s1\.tls\.key \S+/c0\.key: cannot read it: permission denied"),
        ("key of another certificate", r"switches\.s1\.tls\.key \S+/s1\.key does not match the certificate"),
        ("CA file without certificates", r"switches\.s1\.tls\.ca \S+/c0\.key: no certificates in the file"),
    ],
)
def test_bad_files_stop_the_controller_at_start(
    certs: Certs, tmp_path: Path, spoil: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = {
        "missing key": mutual_tls(certs, key=str(tmp_path / "missing.key")),
        "unreadable key": mutual_tls(certs),
        "key of another certificate": mutual_tls(certs, key=str(certs.switch.key)),
        "CA file without certificates": mutual_tls(certs, ca=str(certs.controller.key)),
    }[spoil]
    if spoil == "unreadable key":
        # root reads any file: make reading fail as it would for another user
        real_read_bytes = Path.read_bytes

        def refuse(path: Path) -> bytes:
            if path == certs.controller.key:
                raise PermissionError(13, "Permission denied", str(path))
            return real_read_bytes(path)

        monkeypatch.setattr(Path, "read_bytes", refuse)

    async def never_called(_arg: Any) -> Any:
        raise AssertionError("the configuration is refused before any switch is reached")

    async def build() -> None:
        SwitchConnections(config("127.0.0.1:1", "terrapin", block), never_called, never_called)

    with pytest.raises(ConfigError, match=message):
        asyncio.run(build())


def test_cert_without_key_is_a_configuration_error(certs: Certs) -> None:
    with pytest.raises(ConfigError, match=r"switches\.0\.tls: Value error, cert and key go together"):
        config("127.0.0.1:1", "terrapin", {"ca": str(certs.ours.ca()), "cert": str(certs.controller.cert)})
