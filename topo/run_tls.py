"""`make run TLS=1`: the run's private CA and certificates (topo/pki.py, under build/run/pki), and
what each part of the run is given of them: the switches' five flags, the controller's `tls:`
blocks, the HTTPS context the runner's own calls (and the banner's curl) use.

Every channel of the run that would leave a host across machines speaks TLS: P4Runtime and the
switches' metrics (mutual: the switches ask for a client certificate of the CA), the REST API
and a backup's forwarding to the primary (HTTPS; the primary's certificate checked, the
replica's own presented). On one machine the replicas share one controller certificate, since
they share one configuration file; docs/deployment.md gives each its own across hosts. The
PostgreSQL store of STORE=postgres stays on the loopback without TLS here.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo.pki import PKI, Issued
from topo.plan import NetworkPlan

CONTROLLER = "controller"  # the controllers' certificate: client of the switches, server of REST
CLIENT = "admin"  # the runner's, the banner's curl and a person's tools


def switch_tls_flags(issued: Issued, ca: Path | str | None, client_auth: bool) -> list[str]:
    """A switch's P4Runtime TLS flags, the same on terrapin-switch and simple_switch_grpc: its
    certificate and key, the CA its clients' certificates are checked by, whether it asks for one."""
    flags = ["--grpc-server-ssl", "--grpc-server-cert", str(issued.cert)]
    flags += ["--grpc-server-key", str(issued.key)]
    if ca is not None:
        flags += ["--grpc-server-cacert", str(ca)]
    if client_auth:
        flags.append("--grpc-server-with-client-auth")
    return flags


@dataclass(frozen=True)
class RunTls:
    ca: Path
    switches: dict[str, Issued]
    controller: Issued
    client: Issued

    def switch_flags(self, name: str) -> list[str]:
        """The switch's TLS flags, client certificates of the run's CA required."""
        return switch_tls_flags(self.switches[name], self.ca, client_auth=True)

    def switch_block(self) -> dict[str, Any]:
        """A switch's `tls:` in the controller's configuration."""
        return {"ca": str(self.ca), "cert": str(self.controller.cert), "key": str(self.controller.key)}

    def rest_block(self) -> dict[str, Any]:
        """`rest.tls`: HTTPS, no client certificate asked (a browser opens the dashboard once it
        trusts ca.pem); the same files serve a backup's forwarding."""
        return self.switch_block() | {"client_auth": False}

    def client_context(self) -> ssl.SSLContext:
        """For the runner's own HTTPS calls: trusts the CA, presents the client certificate
        (what the switches' metrics ask for)."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(self.client.cert, self.client.key)
        return context


def make_run_tls(plan: NetworkPlan, directory: Path) -> RunTls:
    """The CA and the run's certificates in `directory`, reused while they are valid
    (topo/pki.py): every switch's for 127.0.0.1 and its name, the controllers', the client's."""
    pki = PKI(directory)
    return RunTls(
        ca=pki.ca(),
        switches={name: pki.switch(name, ["127.0.0.1", name]) for name in plan.switches},
        controller=pki.controller(CONTROLLER, ["127.0.0.1", "localhost"]),
        client=pki.client(CLIENT),
    )
