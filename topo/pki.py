"""A private certificate authority for a Terrapin deployment, and the certificates of its parts.

Everything that leaves a host speaks TLS with certificates of one private CA: each switch serves
P4Runtime with a server certificate whose subject alternative names are the addresses and host
names its controllers dial; controllers and people's tools hold client certificates. The files
live under one directory (default build/run/pki):

    ca.pem  ca.key            the CA (keep ca.key on the machine that issues certificates only)
    NAME.pem  NAME.key        one component's certificate and key

Keys are ECDSA P-256 (what gRPC's C core, Go's crypto/tls and OpenSSL all speak), written 0600.
Made with the `cryptography` library; no hand-written cryptography.

Idempotent: asking again for what exists reuses the files while they are valid (the CA's own,
not expiring within RENEW_BEFORE, the same names and use, key matching certificate) and replaces
them otherwise; a new CA re-issues everything it signed. Tests can ask for certificates outside
their validity (`not_before`, `not_after`) and make a second, unrelated CA in another directory.

    python -m topo.pki [--dir DIR] --switch s1=127.0.0.1,s1 --controller c0 --client admin
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO / "build" / "run" / "pki"

CA_LIFETIME = dt.timedelta(days=3650)
LEAF_LIFETIME = dt.timedelta(days=365)
# A certificate closer than this to its end is replaced rather than reused.
RENEW_BEFORE = dt.timedelta(days=30)
# Issued certificates start a little in the past: a clock slightly behind the issuer's must not
# see a fresh certificate as not yet valid.
BACKDATE = dt.timedelta(minutes=5)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Issued:
    """One component's certificate and private key files (PEM)."""

    name: str
    cert: Path
    key: Path


@dataclass(frozen=True)
class _Want:
    """What a certificate must say to be reused."""

    server: bool
    client: bool
    dns: frozenset[str]
    ips: frozenset[IPAddress]
    not_before: dt.datetime | None
    not_after: dt.datetime | None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _utc_second(when: dt.datetime | None) -> dt.datetime | None:
    """`when` as a certificate holds it: UTC (a naive time is taken as UTC), whole seconds."""
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).replace(microsecond=0)


def split_hosts(hosts: Sequence[str]) -> tuple[frozenset[str], frozenset[IPAddress]]:
    """Host names and IP addresses, for a certificate's subject alternative names."""
    dns: set[str] = set()
    ips: set[IPAddress] = set()
    for host in hosts:
        try:
            ips.add(ipaddress.ip_address(host))
        except ValueError:
            if not host or any(c.isspace() for c in host):
                raise ValueError(f"{host!r} is neither an IP address nor a host name") from None
            dns.add(host)
    return frozenset(dns), frozenset(ips)


def _write_private(path: Path, data: bytes) -> None:
    """Writes a secret: created 0600 (never readable by others, even for a moment), then moved
    into place, so a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    os.replace(tmp, path)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """A CA signs certificates (and lists of revoked ones); a leaf signs its TLS handshakes."""
    return x509.KeyUsage(
        digital_signature=not signs_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _load(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The certificate and its key, or None if either is missing, unreadable, not P-256 or the
    key is not the certificate's."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        return None
    if cert.public_key() != key.public_key():
        return None
    if key_path.stat().st_mode & 0o077:
        key_path.chmod(0o600)
    return cert, key


class PKI:
    """The CA in `directory` (made on first use) and the certificates it issues there."""

    def __init__(self, directory: Path = DEFAULT_DIR, ca_name: str = "Terrapin CA") -> None:
        self.directory = directory
        self.ca_name = ca_name
        self.ca_cert_path = directory / "ca.pem"
        self.ca_key_path = directory / "ca.key"
        self._ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None

    # ---- the CA -----------------------------------------------------------------------------

    def ca(self) -> Path:
        """ca.pem, the certificate every party trusts: made, or remade if it is no longer fit."""
        self._ensure_ca()
        return self.ca_cert_path

    def _ensure_ca(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        if self._ca is not None:
            return self._ca
        self.directory.mkdir(parents=True, exist_ok=True)
        loaded = _load(self.ca_cert_path, self.ca_key_path)
        if loaded is not None and self._ca_fit(loaded[0]):
            self._ca = loaded
            return loaded
        key = _new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.ca_name)])
        now = _now()
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + CA_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(signs_certificates=True), critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256())
        )
        _write_private(self.ca_key_path, _key_pem(key))
        _write_public(self.ca_cert_path, cert.public_bytes(serialization.Encoding.PEM))
        self._ca = (cert, key)
        return self._ca

    def _ca_fit(self, cert: x509.Certificate) -> bool:
        try:
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            return False
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return (
            constraints.ca
            and bool(cn)
            and cn[0].value == self.ca_name
            and cert.not_valid_before_utc <= _now()
            and cert.not_valid_after_utc - RENEW_BEFORE > _now()
        )

    # ---- issued certificates ----------------------------------------------------------------

    def switch(self, name: str, hosts: Sequence[str]) -> Issued:
        """A switch's P4Runtime server certificate, valid for every address and host name in
        `hosts` (the names its controllers dial: 127.0.0.1 under make run, the management address
        across hosts)."""
        if not hosts:
            raise ValueError(f"switch {name}: give the addresses or host names clients dial")
        return self.issue(name, server_hosts=hosts)

    def controller(self, name: str, hosts: Sequence[str] = ()) -> Issued:
        """A controller's certificate: a client of the switches (and of the primary, for a
        backup), and, with `hosts`, a server too (its REST API)."""
        return self.issue(name, client=True, server_hosts=hosts)

    def client(self, name: str) -> Issued:
        """A person's or a tool's client certificate (p4runtime-shell, a test)."""
        return self.issue(name, client=True)

    def issue(
        self,
        name: str,
        *,
        server_hosts: Sequence[str] = (),
        client: bool = False,
        not_before: dt.datetime | None = None,
        not_after: dt.datetime | None = None,
    ) -> Issued:
        """NAME.pem and NAME.key, signed by the CA: a server certificate for `server_hosts`
        (if any), a client certificate if `client`. `not_before`/`not_after` fix the validity
        (e.g. an expired certificate for a test); by default it starts now and lasts
        LEAF_LIFETIME."""
        if not name or "/" in name or name.startswith(".") or name in ("ca",):
            raise ValueError(f"{name!r} cannot name a certificate file")
        if not server_hosts and not client:
            raise ValueError(f"{name}: a certificate for neither a server nor a client")
        # Every certificate names its subject in a subject alternative name, as RFC 5280's
        # profile (and strict verifiers) want: a server its hosts, a client its own name.
        dns, ips = split_hosts(server_hosts or [name])
        want = _Want(bool(server_hosts), client, dns, ips, _utc_second(not_before), _utc_second(not_after))
        ca_cert, ca_key = self._ensure_ca()
        issued = Issued(name, self.directory / f"{name}.pem", self.directory / f"{name}.key")
        loaded = _load(issued.cert, issued.key)
        if loaded is not None and _fits(loaded[0], want, ca_cert):
            return issued
        key = _new_key()
        now = _now()
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if want.server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(want.not_before or now - BACKDATE)
            .not_valid_after(want.not_after or now + LEAF_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in sorted(dns)]
        sans += [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        _write_private(issued.key, _key_pem(key))
        _write_public(issued.cert, cert.public_bytes(serialization.Encoding.PEM))
        return issued


def _fits(cert: x509.Certificate, want: _Want, ca: x509.Certificate) -> bool:
    """Whether an existing certificate is the one asked for, from this CA, and still good."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    if want.not_before is not None or want.not_after is not None:
        # asked-for dates (tests): the same dates, whatever the clock says
        if want.not_before is not None and cert.not_valid_before_utc != want.not_before:
            return False
        if want.not_after is not None and cert.not_valid_after_utc != want.not_after:
            return False
    elif not (cert.not_valid_before_utc <= _now() < cert.not_valid_after_utc - RENEW_BEFORE):
        return False
    try:
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return False
    if usages != {
        u
        for u, on in (
            (ExtendedKeyUsageOID.SERVER_AUTH, want.server),
            (ExtendedKeyUsageOID.CLIENT_AUTH, want.client),
        )
        if on
    }:
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = frozenset(san.get_values_for_type(x509.DNSName))
        ips = frozenset(san.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        dns, ips = frozenset(), frozenset()
    return dns == want.dns and ips == want.ips


def _named_hosts(spec: str) -> tuple[str, list[str]]:
    name, _, hosts = spec.partition("=")
    return name, [h for h in hosts.split(",") if h]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m topo.pki",
        description="Make (or reuse) a private CA and certificates for Terrapin's components.",
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where the files go (%(default)s)")
    parser.add_argument(
        "--switch",
        action="append",
        default=[],
        metavar="NAME=HOST[,HOST...]",
        help="a switch's server certificate for the addresses/host names clients dial",
    )
    parser.add_argument(
        "--controller",
        action="append",
        default=[],
        metavar="NAME[=HOST,...]",
        help="a controller's client certificate (a server one too for HOSTs)",
    )
    parser.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="NAME",
        help="a client certificate (a person or a tool)",
    )
    args = parser.parse_args(argv)
    pki = PKI(args.dir)
    try:
        print(f"ca          {pki.ca()}")
        issued = [pki.switch(*_named_hosts(s)) for s in args.switch]
        issued += [pki.controller(*_named_hosts(c)) for c in args.controller]
        issued += [pki.client(c) for c in args.client]
    except ValueError as bad:
        print(f"topo.pki: {bad}", file=sys.stderr)
        return 2
    for i in issued:
        print(f"{i.name:<11} {i.cert} {i.key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
