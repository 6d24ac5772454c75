"""topo/pki.py: the CA and certificates are what TLS peers need (checked with the `cryptography`
library's own verifier, which applies the same rules as a TLS client: chain, dates, names,
key usage), keys stay private, and asking again reuses what is still good and replaces the rest."""

from __future__ import annotations

import datetime as dt
import ipaddress
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from topo.pki import PKI, main

HOUR = dt.timedelta(hours=1)


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def verify_server(pki: PKI, leaf: Path, host: str, at: dt.datetime | None = None) -> None:
    """As a TLS client of `host` that trusts only the CA would."""
    store = Store([cert(pki.ca())])
    builder = PolicyBuilder().store(store).time(at or dt.datetime.now(dt.UTC))
    try:
        name: x509.verification.Subject = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        name = x509.DNSName(host)
    builder.build_server_verifier(name).verify(cert(leaf), [])


def verify_client(pki: PKI, leaf: Path) -> None:
    store = Store([cert(pki.ca())])
    PolicyBuilder().store(store).time(dt.datetime.now(dt.UTC)).build_client_verifier().verify(cert(leaf), [])


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_switch_certificate_serves_every_name_it_was_made_for(tmp_path: Path) -> None:
    pki = PKI(tmp_path)
    s1 = pki.switch("s1", ["127.0.0.1", "s1", "s1.lab.example"])
    for host in ("127.0.0.1", "s1", "s1.lab.example"):
        verify_server(pki, s1.cert, host)
    with pytest.raises(VerificationError):
        verify_server(pki, s1.cert, "s2")
    with pytest.raises(VerificationError):
        verify_server(pki, s1.cert, "10.0.0.1")
    usages = cert(s1.cert).extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_controller_and_client_certificates_authenticate_clients(tmp_path: Path) -> None:
    pki = PKI(tmp_path)
    verify_client(pki, pki.controller("c0").cert)
    verify_client(pki, pki.client("admin").cert)
    # a plain client cannot serve: no server use, no names
    with pytest.raises(VerificationError):
        verify_server(pki, pki.client("admin").cert, "admin")
    # a controller given host names serves them too (its REST API)
    c1 = pki.controller("c1", ["10.0.2.1"])
    verify_client(pki, c1.cert)
    verify_server(pki, c1.cert, "10.0.2.1")


def test_keys_are_p256_private_and_match(tmp_path: Path) -> None:
    pki = PKI(tmp_path)
    s1 = pki.switch("s1", ["127.0.0.1"])
    for key_path, cert_path in ((s1.key, s1.cert), (pki.ca_key_path, pki.ca_cert_path)):
        assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        assert isinstance(key.curve, ec.SECP256R1)
        assert key.public_key() == cert(cert_path).public_key()
    assert stat.S_IMODE(s1.cert.stat().st_mode) == 0o644


def test_asking_again_reuses_the_files(tmp_path: Path) -> None:
    PKI(tmp_path).switch("s1", ["127.0.0.1", "s1"])
    PKI(tmp_path).client("admin")
    before = files(tmp_path)
    pki = PKI(tmp_path)
    pki.switch("s1", ["s1", "127.0.0.1"])  # same names, another order
    pki.client("admin")
    assert files(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_key_left_readable_is_made_private(tmp_path: Path) -> None:
    s1 = PKI(tmp_path).switch("s1", ["127.0.0.1"])
    s1.key.chmod(0o644)
    PKI(tmp_path).switch("s1", ["127.0.0.1"])
    assert stat.S_IMODE(s1.key.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "spoil",
    ["other names", "key of another certificate", "truncated certificate", "missing key", "expired"],
)
def test_what_is_no_longer_good_is_replaced(tmp_path: Path, spoil: str) -> None:
    pki = PKI(tmp_path)
    s1 = pki.switch("s1", ["127.0.0.1"])
    hosts = ["127.0.0.1"]
    if spoil == "other names":
        hosts = ["127.0.0.1", "10.0.0.1"]
    elif spoil == "key of another certificate":
        s1.key.write_bytes(pki.client("x").key.read_bytes())
    elif spoil == "truncated certificate":
        s1.cert.write_bytes(s1.cert.read_bytes()[:100])
    elif spoil == "missing key":
        s1.key.unlink()
    elif spoil == "expired":
        now = dt.datetime.now(dt.UTC)
        pki.issue("s1", server_hosts=hosts, not_before=now - 2 * HOUR, not_after=now - HOUR)
    old = s1.cert.read_bytes()
    again = PKI(tmp_path).switch("s1", hosts)
    assert again.cert.read_bytes() != old
    for host in hosts:
        verify_server(pki, again.cert, host)


def test_a_new_ca_reissues_what_the_old_one_signed(tmp_path: Path) -> None:
    pki = PKI(tmp_path)
    s1 = pki.switch("s1", ["127.0.0.1"])
    old_ca, old_s1 = pki.ca().read_bytes(), s1.cert.read_bytes()
    pki.ca_key_path.unlink()  # the CA is lost: a new one is made
    fresh = PKI(tmp_path)
    assert fresh.ca().read_bytes() != old_ca
    verify_server(fresh, fresh.switch("s1", ["127.0.0.1"]).cert, "127.0.0.1")
    assert s1.cert.read_bytes() != old_s1


def test_certificates_for_tests_outside_their_dates_and_of_another_ca(tmp_path: Path) -> None:
    pki = PKI(tmp_path / "ours")
    other = PKI(tmp_path / "theirs", ca_name="Another CA")
    now = dt.datetime.now(dt.UTC)
    expired = pki.issue("expired", client=True, not_before=now - 2 * HOUR, not_after=now - HOUR)
    early = pki.issue("early", server_hosts=["s1"], not_before=now + HOUR, not_after=now + 2 * HOUR)
    with pytest.raises(VerificationError):
        verify_client(pki, expired.cert)
    with pytest.raises(VerificationError):
        verify_server(pki, early.cert, "s1")
    verify_server(pki, early.cert, "s1", at=now + 90 * dt.timedelta(minutes=1))
    # asked for again with the same dates, they are kept, however the dates are written
    before = expired.cert.read_bytes()
    for start, end in (
        (now - 2 * HOUR, now - HOUR),
        ((now - 2 * HOUR).replace(tzinfo=None), (now - HOUR).astimezone(dt.timezone(HOUR))),
    ):
        assert pki.issue("expired", client=True, not_before=start, not_after=end).cert.read_bytes() == before
    foreign = other.client("admin")
    verify_client(other, foreign.cert)
    with pytest.raises(VerificationError):
        verify_client(pki, foreign.cert)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: p.switch("s1", []), "give the addresses"),
        (lambda p: p.switch("s1", ["bad host"]), "neither an IP address nor a host name"),
        (lambda p: p.issue("ca", client=True), "cannot name"),
        (lambda p: p.issue("../x", client=True), "cannot name"),
        (lambda p: p.issue("x"), "neither a server nor a client"),
    ],
)
def test_bad_requests_are_refused(tmp_path: Path, call: Callable[[PKI], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(PKI(tmp_path))


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["--dir", str(tmp_path), "--switch", "s1=127.0.0.1,s1", "--controller", "c0", "--client", "admin"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"s1          {tmp_path / 's1.pem'} {tmp_path / 's1.key'}" in out
    pki = PKI(tmp_path)
    verify_server(pki, tmp_path / "s1.pem", "s1")
    verify_client(pki, tmp_path / "c0.pem")
    assert main(["--dir", str(tmp_path), "--switch", "s2"]) == 2
    assert "give the addresses" in capsys.readouterr().err
