"""P4Runtime over TLS, the same configuration on terrapin-switch and p4lang's simple_switch_grpc:
the PKI of topo/pki.py, the switch flags of docs/switch.md, and a client that connects as the
controller does (finsy's GRPCCredentialsTLS). A client with the deployment's CA and its own
certificate gets in and holds a P4Runtime session; every other is refused, and terrapin-switch
logs once why.

Each switch runs without interfaces on a free loopback port (no namespace), stopped at the end
of its test module or test. The BMv2 half runs in make test's topo-bmv2 suite."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest
from finsy import GRPCCredentialsTLS
from finsy.p4client import P4Client, P4ClientError
from finsy.proto import p4r

from terrapin_tools.pgserver import free_port
from topo.p4switch import REPO, SWITCH_KINDS, stop_process_group, switch_binary
from topo.pki import PKI, Issued
from topo.run_tls import switch_tls_flags

HOUR = dt.timedelta(hours=1)
DEVICE_ID = 1
# terrapin-switch's line for each failed handshake (toolchain/p4rt/server.go)
FAILED_HANDSHAKE = "P4Runtime TLS handshake failed"
OUT_OF_DATE = "certificate has expired or is not yet valid"


@dataclass(frozen=True)
class Certificates:
    ours: PKI
    switch: Issued  # s1, for 127.0.0.1 and the host name "s1"
    controller: Issued
    foreign: Issued  # a client certificate of another CA
    expired: Issued
    early: Issued  # not valid yet
    switch_expired: Issued
    switch_early: Issued


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    base = tmp_path_factory.mktemp("pki")
    ours = PKI(base / "ours")
    theirs = PKI(base / "theirs", ca_name="Another CA")
    now = dt.datetime.now(dt.UTC)
    past, future = (now - 2 * HOUR, now - HOUR), (now + HOUR, now + 2 * HOUR)
    hosts = ["127.0.0.1", "s1"]
    return Certificates(
        ours=ours,
        switch=ours.switch("s1", hosts),
        controller=ours.controller("c0"),
        foreign=theirs.controller("c0"),
        expired=ours.issue("expired", client=True, not_before=past[0], not_after=past[1]),
        early=ours.issue("early", client=True, not_before=future[0], not_after=future[1]),
        switch_expired=ours.issue("s1-expired", server_hosts=hosts, not_before=past[0], not_after=past[1]),
        switch_early=ours.issue("s1-early", server_hosts=hosts, not_before=future[0], not_after=future[1]),
    )


@dataclass
class RunningSwitch:
    kind: str
    address: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def failed_handshakes(self, since: int) -> list[str]:
        return [line for line in self.log_lines()[since:] if FAILED_HANDSHAKE in line]

    def wait_failed_handshake(self, since: int, timeout: float = 10) -> list[str]:
        """The failed handshakes logged after line `since`, once there is one (the switch may log
        after the client has seen its connection closed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := self.failed_handshakes(since):
                return found
            time.sleep(0.05)
        tail = "\n".join(self.log_lines()[since:])
        raise AssertionError(f"{self.kind} logged no failed handshake; its log since:\n{tail}")


def tls_flags(switch: Issued, ca: Path | None, client_auth: bool) -> list[str]:
    return switch_tls_flags(switch, ca, client_auth)


def start_switch(kind: str, workdir: Path, name: str, flags: list[str]) -> RunningSwitch:
    grpc_port, thrift_port = free_port(), free_port()
    args = [switch_binary(kind), "--no-p4", "--device-id", str(DEVICE_ID), "--thrift-port", str(thrift_port)]
    if kind == "terrapin":
        args += ["--log-console", "--log-level", "warn"]
    args += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", *flags]
    log = workdir / f"{name}-{kind}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    running = RunningSwitch(kind, f"127.0.0.1:{grpc_port}", log, process)
    deadline = time.monotonic() + 20
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{kind} exited with {process.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", grpc_port), timeout=0.5):
                return running
        except OSError:
            if time.monotonic() > deadline:
                stop_switch(running)
                raise TimeoutError(f"{kind}: nothing listens on {running.address}") from None
            time.sleep(0.05)


def stop_switch(running: RunningSwitch) -> None:
    stop_process_group(running.process, timeout=10)


@pytest.fixture(scope="module", params=SWITCH_KINDS)
def mutual(
    request: pytest.FixtureRequest, certs: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningSwitch]:
    """A switch of each kind that requires client certificates of our CA."""
    kind = request.param
    running = start_switch(
        kind, tmp_path_factory.mktemp("switch"), "mutual", tls_flags(certs.switch, certs.ours.ca(), True)
    )
    yield running
    stop_switch(running)


def credentials(
    certs: Certificates, client: Issued | None, *, server_name: str = "", ca: Path | None = None
) -> GRPCCredentialsTLS:
    return GRPCCredentialsTLS(
        cacert=ca or certs.ours.ca(),
        cert=client.cert if client else None,
        private_key=client.key if client else None,
        target_name_override=server_name,
    )


async def exchange(address: str, creds: GRPCCredentialsTLS | None) -> tuple[str, int]:
    """Capabilities, then a stream that becomes primary: the switch's API version and the
    arbitration's status code."""
    async with P4Client(address, creds, wait_for_ready=False) as client:
        caps = await client.request(p4r.CapabilitiesRequest())
        await client.send(
            p4r.StreamMessageRequest(
                arbitration=p4r.MasterArbitrationUpdate(
                    device_id=DEVICE_ID, election_id=p4r.Uint128(high=0, low=1)
                )
            )
        )
        reply = await asyncio.wait_for(client.receive(), timeout=10)
        return caps.p4runtime_api_version, reply.arbitration.status.code


def refused(address: str, creds: GRPCCredentialsTLS | None) -> str:
    """The client's error for a connection the TLS handshake refuses."""
    with pytest.raises(P4ClientError) as error:
        asyncio.run(exchange(address, creds))
    assert error.value.code.name == "UNAVAILABLE", error.value
    return str(error.value)


def test_controller_with_our_ca_and_its_certificate_gets_in(
    mutual: RunningSwitch, certs: Certificates
) -> None:
    since = len(mutual.log_lines())
    version, arbitration = asyncio.run(exchange(mutual.address, credentials(certs, certs.controller)))
    assert version.startswith("1.")
    assert arbitration == 0  # OK: this stream is primary
    # by the host name in the certificate, too (what a controller config's server_name gives)
    asyncio.run(exchange(mutual.address, credentials(certs, certs.controller, server_name="s1")))
    assert mutual.failed_handshakes(since) == []


# Each case: the client's credentials (None: plaintext), what its error must say (when the client
# itself refuses), and the reason terrapin-switch logs ("" when it logs nothing).
REFUSALS: dict[str, tuple[Callable[[Certificates], GRPCCredentialsTLS | None], str, str]] = {
    "plaintext client": (
        lambda c: None,
        "",
        "first record does not look like a TLS handshake",
    ),
    "no client certificate": (
        lambda c: credentials(c, None),
        "",
        "client didn't provide a certificate",
    ),
    "client certificate of another CA": (
        lambda c: credentials(c, c.foreign),
        "",
        "certificate signed by unknown authority",
    ),
    "expired client certificate": (
        lambda c: credentials(c, c.expired),
        "",
        f"{OUT_OF_DATE}: current time .* is after",
    ),
    "client certificate not yet valid": (
        lambda c: credentials(c, c.early),
        "",
        f"{OUT_OF_DATE}: current time .* is before",
    ),
    # The switch's certificate names 127.0.0.1 and s1, not s2: the client refuses it once TLS
    # is up, so the switch has nothing to log.
    "wrong host name": (
        lambda c: credentials(c, c.controller, server_name="s2"),
        "Hostname Verification Check failed",
        "",
    ),
    # gRPC's C core hangs up in the handshake without an alert.
    "switch certificate of another CA": (
        lambda c: credentials(c, c.controller, ca=c.foreign.cert.parent / "ca.pem"),
        "CERTIFICATE_VERIFY_FAILED",
        "the client closed the connection during the handshake: it may not trust this switch's",
    ),
}


@pytest.mark.parametrize("kind", SWITCH_KINDS)
@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused(kind: str, case: str, certs: Certificates, tmp_path: Path) -> None:
    """A switch of its own for each case: a refused client's channel keeps reconnecting in the
    background, and its handshakes must not be taken for the next case's."""
    creds, client_error, reason = REFUSALS[case]
    running = start_switch(kind, tmp_path, "mutual", tls_flags(certs.switch, certs.ours.ca(), True))
    try:
        message = refused(running.address, creds(certs))
        assert client_error in message
        if kind != "terrapin":
            return  # simple_switch_grpc's gRPC core does not log refused handshakes by default
        if not reason:
            assert running.failed_handshakes(0) == []
            return
        lines = running.wait_failed_handshake(0)
        for line in lines:  # every connection this client made, each logged once
            assert re.search(reason, line), line
            assert "client=127.0.0.1:" in line
    finally:
        stop_switch(running)


@pytest.mark.parametrize("kind", SWITCH_KINDS)
@pytest.mark.parametrize("when", ["expired", "not yet valid"])
def test_switch_certificate_out_of_date_is_refused(
    kind: str, when: str, certs: Certificates, tmp_path: Path
) -> None:
    cert = certs.switch_expired if when == "expired" else certs.switch_early
    running = start_switch(kind, tmp_path, "dates", tls_flags(cert, certs.ours.ca(), True))
    try:
        message = refused(running.address, credentials(certs, certs.controller))
        assert "CERTIFICATE_VERIFY_FAILED" in message
    finally:
        stop_switch(running)
    if kind == "terrapin":  # it said so when it started
        said = "expired at" if when == "expired" else "not valid before"
        assert f"{cert.cert} is {said}" in running.log.read_text()


@pytest.mark.parametrize("kind", SWITCH_KINDS)
def test_without_client_auth_any_tls_client_gets_in(kind: str, certs: Certificates, tmp_path: Path) -> None:
    """--grpc-server-cacert without --grpc-server-with-client-auth: simple_switch_grpc asks for no
    client certificate, so a client with none gets in; plaintext is still refused."""
    running = start_switch(kind, tmp_path, "server-only", tls_flags(certs.switch, certs.ours.ca(), False))
    try:
        asyncio.run(exchange(running.address, credentials(certs, None)))
        refused(running.address, None)
    finally:
        stop_switch(running)


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        ("missing key", r"--grpc-server-key \S+/missing\.key: cannot read it: no such file or directory"),
        (
            "key of another certificate",
            r"--grpc-server-key \S+/c0\.key does not match the certificate in --grpc-server-cert \S+/s1\.pem",
        ),
        ("CA file without certificates", r"--grpc-server-cacert \S+/s1\.key: no certificates in the file"),
        ("client auth without a CA", r"--grpc-server-with-client-auth needs --grpc-server-cacert"),
    ],
)
def test_terrapin_switch_refuses_to_start_on_bad_tls_files(
    certs: Certificates, tmp_path: Path, spoil: str, message: str
) -> None:
    s1 = certs.switch
    flags = {
        "missing key": tls_flags(Issued("s1", s1.cert, tmp_path / "missing.key"), None, False),
        "key of another certificate": tls_flags(Issued("s1", s1.cert, certs.controller.key), None, False),
        "CA file without certificates": tls_flags(s1, s1.key, True),
        "client auth without a CA": tls_flags(s1, None, True),
    }[spoil]
    done = subprocess.run(
        [switch_binary("terrapin"), "--no-p4", "--grpc-server-addr", "127.0.0.1:0", *flags],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr  # one line, naming what is wrong
    assert re.match(f"terrapin-switch: {message}", done.stderr), done.stderr


def test_terrapin_switch_serves_its_metrics_over_the_same_tls(certs: Certificates, tmp_path: Path) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    flags = [*tls_flags(certs.switch, certs.ours.ca(), True), "--metrics-addr", metrics]
    running = start_switch("terrapin", tmp_path, "metrics", flags)
    try:
        context = ssl.create_default_context(cafile=certs.ours.ca())
        context.load_cert_chain(certs.controller.cert, certs.controller.key)
        with urllib.request.urlopen(f"https://{metrics}/metrics", context=context, timeout=10) as reply:
            assert reply.status == 200
            assert "terrapin_drops_total" in reply.read().decode()
        without_certificate = ssl.create_default_context(cafile=certs.ours.ca())
        # refused in the handshake (the alert may come as the reply is read, or as a reset)
        with pytest.raises(OSError) as refused_tls:
            urllib.request.urlopen(
                f"https://{metrics}/metrics", context=without_certificate, timeout=10
            ).read()
        assert not isinstance(refused_tls.value, urllib.error.HTTPError), refused_tls.value
        # Go's HTTPS server answers a plaintext request with 400
        with pytest.raises(urllib.error.HTTPError) as plain:
            urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read()
        assert plain.value.code == 400
    finally:
        stop_switch(running)


def test_make_shell_attaches_over_tls(mutual: RunningSwitch, certs: Certificates) -> None:
    """The shell's own arbitration and p4runtime-shell both speak TLS with the CA and a client
    certificate (make run TLS=1 records them in network.json; --cacert/--cert/--private-key with
    --addr); without them the switch is not reached and the shell says so."""
    subprocess.run(["bash", "scripts/p4rt-shell.sh", "--setup-only"], cwd=REPO, check=True)
    python = str(REPO / "build/venv-p4rtshell/bin/python")
    script = str(REPO / "scripts/p4rt_shell.py")
    where = ["--addr", mutual.address, "--device-id", str(DEVICE_ID)]

    plain = subprocess.run([python, script, *where], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 2 and "does not answer" in plain.stderr, plain.stderr

    client = certs.controller
    tls = ["--cacert", str(certs.ours.ca()), "--cert", str(client.cert), "--private-key", str(client.key)]
    shell = pexpect.spawn(
        python,
        [script, *where, *tls, "--push"],
        cwd=str(REPO),
        env=os.environ | {"PROMPT_TOOLKIT_NO_CPR": "1"},
        encoding="utf-8",
        timeout=60,
        dimensions=(60, 250),
    )
    try:
        shell.expect(r"P4Runtime sh\S* >>>")
        read = 'len(list(table_entry["TerrapinIngress.channels"].read()))'
        shell.sendline(f'print({read}, "entries-" + "read")')  # the mark is not the echoed line
        shell.expect(r"0 entries-read")
        shell.sendline("exit")
        shell.expect(pexpect.EOF)
    finally:
        shell.close(force=True)
