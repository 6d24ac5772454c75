"""The controller's TLS files: read and checked once at start-up, so that a missing file, a key
that is not its certificate's or a CA file without certificates stops the controller with one
line naming the setting and the file, instead of becoming a reconnect loop (or a handshake
failure on every request) later.

Each channel that leaves the host names its files in the configuration (config.TlsFiles): the
P4Runtime streams to the switches (finsy's credentials, switches/connection.py), the REST server
(uvicorn), a backup's forwarding to the primary (httpx) and PostgreSQL (libpq's sslrootcert).
Only the standard library's ssl module reads them: it is what uvicorn and httpx use as well,
so a file it accepts here is one they accept.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from terrapin.config import ConfigError, TlsFiles


@dataclass(frozen=True)
class CheckedTls:
    """Absolute paths of files that were readable and consistent at start-up."""

    ca: Path
    cert: Path | None
    key: Path | None


def resolve(base: Path | None, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() or base is None else base / p


def _readable(where: str, field: str, path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{where}.{field} {path}: cannot read it: {(exc.strerror or str(exc)).lower()}"
        ) from None
    if not data.strip():
        raise ConfigError(f"{where}.{field} {path}: the file is empty")
    return data


def check(files: TlsFiles, base: Path | None, where: str) -> CheckedTls:
    """The files of `files` resolved against `base`, each read and checked; a ConfigError names
    `where` (e.g. "switches.s1.tls"), the field and the file otherwise."""
    ca = resolve(base, files.ca)
    _readable(where, "ca", ca)
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    try:
        context.load_verify_locations(cafile=str(ca))
    except ssl.SSLError:
        raise ConfigError(f"{where}.ca {ca}: no certificates in the file (PEM expected)") from None
    if files.cert is None or files.key is None:
        return CheckedTls(ca, None, None)
    cert, key = resolve(base, files.cert), resolve(base, files.key)
    if b"-----BEGIN CERTIFICATE-----" not in _readable(where, "cert", cert):
        raise ConfigError(f"{where}.cert {cert}: no certificate in the file (PEM expected)")
    if b"PRIVATE KEY-----" not in _readable(where, "key", key):
        raise ConfigError(f"{where}.key {key}: no private key in the file (PEM expected)")
    try:
        context.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc) or "key values mismatch" in str(exc):
            raise ConfigError(
                f"{where}.key {key} does not match the certificate in {where}.cert {cert}"
            ) from None
        raise ConfigError(f"{where}.cert {cert} / {where}.key {key}: not usable: {exc.reason}") from None
    return CheckedTls(ca, cert, key)


def client_context(checked: CheckedTls) -> ssl.SSLContext:
    """A client's context: the peer must hold a certificate of `ca` for the name dialled; ours
    is presented when there is one."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(checked.ca))
    if checked.cert is not None and checked.key is not None:
        context.load_cert_chain(str(checked.cert), str(checked.key))
    return context


def uvicorn_options(checked: CheckedTls, client_auth: bool) -> dict[str, Any]:
    """uvicorn's settings for HTTPS with the REST API's checked files; with `client_auth`, a
    client without a certificate of the CA is refused in the handshake."""
    return {
        "ssl_certfile": str(checked.cert),
        "ssl_keyfile": str(checked.key),
        "ssl_ca_certs": str(checked.ca),
        "ssl_cert_reqs": ssl.CERT_REQUIRED if client_auth else ssl.CERT_NONE,
    }


# How long a probe waits for the handshake, then for an alert the server sends after it (under
# TLS 1.3 a server refuses the client's certificate only after the client has finished).
PROBE_TIMEOUT_S = 5.0
ALERT_WAIT_S = 1.0
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


async def diagnose(address: str, checked: CheckedTls | None, server_name: str | None) -> str | None:
    """Why a P4Runtime connection to `address` does not come up, as far as TLS can tell, or None
    when a handshake as the controller makes it succeeds (the trouble is elsewhere).

    gRPC keeps a channel whose handshake fails in TRANSIENT_FAILURE and retries it without a
    word (finsy waits for the channel to be ready, and logs UNAVAILABLE only at debug level), so
    the controller makes the same handshake itself with the standard library to name what is
    wrong: a switch certificate of another CA or for another name, a switch that is not
    speaking TLS, our certificate refused, or (with no `tls:`) a switch that speaks TLS."""
    host, _, port_text = address.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        return f"{address} is not host:port"
    if checked is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = client_context(checked)
    context.set_alpn_protocols(["h2"])
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context, server_hostname=server_name or host),
            PROBE_TIMEOUT_S,
        )
    except ssl.SSLCertVerificationError as exc:
        assert checked is not None  # a plaintext probe verifies nothing
        return _verify_failure(exc, address, checked, server_name)
    except ssl.SSLError as exc:
        # An alert is a TLS server refusing us (under TLS 1.2, our certificate, or none);
        # anything else (a record that is not TLS, the connection closed) says it is not one.
        alert = "ALERT" in str(exc.reason or exc).upper()
        if checked is None:
            return _speaks_tls(address) if alert else None
        if alert:
            return _refused_ours(address, checked, exc)
        return _not_tls(address, exc.reason or str(exc))
    except (ConnectionResetError, asyncio.IncompleteReadError, EOFError) as exc:
        return None if checked is None else _not_tls(address, f"it closed the connection: {exc!r}")
    except TimeoutError:
        return f"cannot reach {address}: no answer within {PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"cannot reach {address}: {exc.strerror or exc!r}"
    try:
        if checked is None:
            return _speaks_tls(address)
        # The HTTP/2 connection preface: a server that accepted us answers it with its SETTINGS;
        # one that refused our certificate sends an alert instead (gRPC's C core only once the
        # client has sent something).
        writer.write(HTTP2_PREFACE)
        try:
            answer = await asyncio.wait_for(reader.read(1), ALERT_WAIT_S)
        except TimeoutError:
            return None  # nothing either way: TLS is up, the trouble is elsewhere
        except ssl.SSLError as exc:
            return _refused_ours(address, checked, exc)
        except (ConnectionResetError, EOFError) as exc:
            return _refused_ours(address, checked, exc)
        return None if answer else _refused_ours(address, checked, EOFError("closed after the handshake"))
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _speaks_tls(address: str) -> str:
    return (
        f"the switch at {address} speaks TLS (it runs with --grpc-server-ssl) and this "
        "controller dials it in plaintext: give the switch a tls: block"
    )


def _not_tls(address: str, why: str) -> str:
    return f"the switch at {address} does not answer TLS ({why}): is it running without --grpc-server-ssl?"


def _refused_ours(address: str, checked: CheckedTls, exc: Exception) -> str:
    reason = getattr(exc, "reason", None) or exc
    return (
        f"the switch at {address} refused this controller's certificate "
        f"{checked.cert or '(none given)'} ({reason}): it must be a client certificate "
        "of the CA the switch's --grpc-server-cacert names, and within its dates"
    )


def _verify_failure(
    exc: ssl.SSLCertVerificationError, address: str, checked: CheckedTls, server_name: str | None
) -> str:
    reason = exc.verify_message or str(exc)
    if "Hostname mismatch" in reason or "IP address mismatch" in reason:
        name = server_name or address.rpartition(":")[0]
        return (
            f"the switch at {address} presents a certificate that is not for {name!r} ({reason}): "
            "set tls.server_name to a name the certificate holds, or reissue it with this address"
        )
    if "expired" in reason or "not yet valid" in reason:
        return f"the switch at {address} presents a certificate out of its dates ({reason})"
    return (
        f"the switch at {address} presents a certificate that {checked.ca} does not vouch for "
        f"({reason}): tls.ca must be the CA that signed the switch's certificate"
    )


def postgres_url(url: str, checked: CheckedTls) -> str:
    """The store's libpq URL with TLS required and the server's certificate checked against the
    CA for the URL's host (sslmode=verify-full: verify-ca alone would accept any server holding a
    certificate of the CA), and our certificate when there is one."""
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query)) | {"sslmode": "verify-full", "sslrootcert": str(checked.ca)}
    if checked.cert is not None and checked.key is not None:
        params |= {"sslcert": str(checked.cert), "sslkey": str(checked.key)}
    return urlunsplit(parts._replace(query=urlencode(params)))
