"""The failover drill across hosts (docs/deployment.md, "Rehearsing a deployment across hosts"):
ReplicaLab's switches, replicas and PostgreSQL, each group in a network namespace standing for a
machine of its own, with TLS on every channel between them.

    trpthost-sw   10.99.25.1   the switches (terrapin-switch, P4Runtime with --grpc-server-ssl
                              and client certificates required)
    trpthost-ctl  10.99.25.2   both controller replicas (REST over HTTPS; a backup forwards
                              writes to the primary's https:// address)
    trpthost-db   10.99.25.3   PostgreSQL, TLS only from the network (hostssl), the replicas
                              connecting with sslmode=verify-full
    (this host)  10.99.25.9   the operator's machine: the drill's clients and its checks

They are joined only by veths to a bridge in a fourth namespace, trpthost-net, standing for the
network: every connection between two of them crosses it by address, none by a loopback. The
certificates come from topo/pki.py, each server's for its namespace's address.

close() removes the processes, then the namespaces (and with them every veth), also after a
failure; up() first removes what a run killed before its close() may have left."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from replicalab import TOKEN, ReplicaLab
from topo.pki import PKI, Issued
from topo.run_tls import switch_tls_flags

from terrapin_tools.bench import Rest
from terrapin_tools.pgserver import PostgresServer

PREFIX = "trpthost"
NETWORK = f"{PREFIX}-net"
SUBNET = "10.99.25"
# host → (namespace, address); the namespaces' interfaces are all "eth0", their bridge ends
# PREFIX + a letter (interface names hold 15 characters).
HOSTS = {
    "switches": (f"{PREFIX}-sw", f"{SUBNET}.1"),
    "controllers": (f"{PREFIX}-ctl", f"{SUBNET}.2"),
    "database": (f"{PREFIX}-db", f"{SUBNET}.3"),
}
OPERATOR_IP = f"{SUBNET}.9"
OPERATOR_LINK = f"{PREFIX}o"  # this host's end of its veth


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def remove_network() -> None:
    """Every namespace and link of the drill's network, whether or not it exists."""
    for namespace, _ in HOSTS.values():
        ip("netns", "del", namespace, check=False)
    ip("netns", "del", NETWORK, check=False)
    ip("link", "del", OPERATOR_LINK, check=False)


def make_network() -> None:
    ip("netns", "add", NETWORK)
    ip("-n", NETWORK, "link", "add", "br0", "type", "bridge")
    ip("-n", NETWORK, "link", "set", "br0", "up")
    for host, (namespace, address) in HOSTS.items():
        ip("netns", "add", namespace)
        ip("-n", namespace, "link", "set", "lo", "up")  # a machine's own loopback, for itself only
        outer = f"{PREFIX}{host[0]}"
        ip("link", "add", outer, "netns", NETWORK, "type", "veth", "peer", "eth0", "netns", namespace)
        ip("-n", NETWORK, "link", "set", outer, "master", "br0", "up")
        ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")
    ip("link", "add", OPERATOR_LINK, "type", "veth", "peer", f"{PREFIX}ob", "netns", NETWORK)
    ip("-n", NETWORK, "link", "set", f"{PREFIX}ob", "master", "br0", "up")
    ip("addr", "add", f"{OPERATOR_IP}/24", "dev", OPERATOR_LINK)
    ip("link", "set", OPERATOR_LINK, "up")


@dataclass
class HostLab(ReplicaLab):
    """ReplicaLab across three namespaces, TLS everywhere (terrapin-switch only)."""

    pki: PKI | None = None
    certs: dict[str, Issued] | None = None

    def up(self) -> None:
        remove_network()
        make_network()
        self.pki = PKI(self.workdir / "pki")
        self.certs = {f"s{i}": self.pki.switch(f"s{i}", [self.address("switches")]) for i in (1, 2, 3)}
        # One certificate for the controller host: both replicas read one configuration file.
        self.certs["controllers"] = self.pki.controller("controllers", [self.address("controllers")])
        self.certs["database"] = self.pki.issue("database", server_hosts=[self.address("database")])
        self.certs["operator"] = self.pki.client("operator")
        super().up()

    def close(self) -> None:
        try:
            super().close()
        finally:
            remove_network()

    @staticmethod
    def address(host: str) -> str:
        return HOSTS[host][1]

    def cert(self, name: str) -> Issued:
        assert self.certs is not None
        return self.certs[name]

    def ca(self) -> str:
        assert self.pki is not None
        return str(self.pki.ca())

    def tls_files(self, name: str) -> dict[str, str]:
        issued = self.cert(name)
        return {"ca": self.ca(), "cert": str(issued.cert), "key": str(issued.key)}

    # ---- ReplicaLab's hooks ---------------------------------------------------------------------

    def start_postgres(self) -> PostgresServer:
        db = self.cert("database")
        return PostgresServer(
            host=self.address("database"), netns=HOSTS["database"][0], ssl_files=(db.cert, db.key)
        ).start()

    def make_config(self, dsn: str) -> dict[str, Any]:
        config = super().make_config(dsn)
        for i, switch in enumerate(config["switches"], start=1):
            switch["address"] = self.switch_address(i)
            switch["tls"] = self.tls_files("controllers")
        config["rest"]["host"] = self.address("controllers")
        config["rest"]["tls"] = self.tls_files("controllers") | {"client_auth": False}
        config["store_tls"] = {"ca": self.ca()}
        return config

    def switch_address(self, i: int) -> str:
        return f"{self.address('switches')}:{self.grpc_ports[i - 1]}"

    def switch_flags(self, i: int) -> list[str]:
        return switch_tls_flags(self.cert(f"s{i}"), self.ca(), client_auth=True)

    def switch_credentials(self) -> grpc.ChannelCredentials:
        operator = self.cert("operator")
        return grpc.ssl_channel_credentials(
            root_certificates=Path(self.ca()).read_bytes(),
            private_key=operator.key.read_bytes(),
            certificate_chain=operator.cert.read_bytes(),
        )

    def on_host(self, host: str, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", HOSTS[host][0], *args]

    def rest(self, port: int, timeout: float = 15.0) -> Rest:
        context = ssl.create_default_context(cafile=self.ca())
        return Rest(port, timeout, token=TOKEN, host=self.address("controllers"), context=context)


def missing_host_prerequisites() -> str | None:
    for tool in ("ip", "setpriv", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (iproute2, util-linux)"
    return None


def tcp_peers(host: str) -> set[tuple[str, int]]:
    """(address, local port) of every established TCP connection into `host`'s namespace
    from another address than its own: who talks to its servers, from where."""
    namespace, own = HOSTS[host]
    out = subprocess.run(
        ["ip", "netns", "exec", namespace, "ss", "-tnH", "state", "established"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    peers = set()
    for line in out.splitlines():
        local, peer = line.split()[-2:]
        local_port = local.rpartition(":")[2]
        peer_ip = peer.rpartition(":")[0]
        if peer_ip != own:
            peers.add((peer_ip, int(local_port)))
    return peers
