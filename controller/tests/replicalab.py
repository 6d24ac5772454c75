"""Replicated controllers for the failover drills: a PostgreSQL of the test's own, terrapin-switch
processes without interfaces (the drills check the control plane: what the store and the
switches hold), and N controller replicas, each a real process. A client burst of reservations
and deletions records what every request was answered, so a drill can check after a failure
that the answers were kept."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from netlab import P4_INFO, P4_JSON, REPO, SWITCH_BIN, missing_bmv2
from topo.p4switch import bmv2_command

from terrapin.admission import AdmissionLedger, Allocation
from terrapin.bmv2 import queue_rate_pps
from terrapin.config import parse_config
from terrapin.paths import ChannelSelector, Topology
from terrapin_tools import p4read, processes
from terrapin_tools.bench import Rest
from terrapin_tools.pgserver import PostgresServer

TOKEN = "drill-token"
SWITCHES = 3
# 10 Mbit/s ports: a few dozen of the burst's channels fit, the rest are denied (409), so a
# drill also checks that what was refused never appears.
RATE_BPS = 10_000_000


def missing_prerequisites(kind: str = "terrapin") -> str | None:
    if os.geteuid() != 0:
        return "needs root (PostgreSQL runs as the postgres user)"
    for path in (SWITCH_BIN, P4_JSON, P4_INFO):
        if not path.exists():
            return f"{path} is missing (make toolchain p4)"
    return missing_bmv2() if kind == "bmv2" else None


def free_ports(n: int) -> list[int]:
    """n ports of 127.0.0.1 free now (the drills may run beside benchmarks and other tests)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def config(
    dsn: str,
    grpc_ports: list[int],
    rest_port: int,
    kind: str = "terrapin",
    thrift_ports: list[int] | None = None,
) -> dict[str, Any]:
    """h1 — s1 — s2 — s3 — h2, plus h3 on s2: paths of 1 to 3 hops."""
    switches = []
    for i in range(1, SWITCHES + 1):
        ports: list[dict[str, Any]] = [
            {"number": 1, "mac": f"02:00:00:00:0{i}:01", "rate_bps": RATE_BPS},
            {"number": 2, "mac": f"02:00:00:00:0{i}:02", "rate_bps": RATE_BPS},
        ]
        ports[0].update({"peer": "h1", "gateway_ip": "10.0.1.1"} if i == 1 else {"peer": f"s{i - 1}:2"})
        ports[1].update(
            {"peer": "h2", "gateway_ip": "10.0.2.1"} if i == SWITCHES else {"peer": f"s{i + 1}:1"}
        )
        if i == 2:
            ports.append(
                {"number": 3, "mac": "02:00:00:00:02:03", "rate_bps": RATE_BPS}
                | {"peer": "h3", "gateway_ip": "10.0.3.1"}
            )
        switch: dict[str, Any] = {
            "name": f"s{i}",
            "address": f"127.0.0.1:{grpc_ports[i - 1]}",
            "device_id": i,
        }
        if kind == "bmv2":
            assert thrift_ports is not None
            switch.update(
                kind="bmv2", thrift_port=thrift_ports[i - 1], bmv2_cli=bmv2_command("simple_switch_CLI")
            )
            for port in ports:
                port["rate_pps"] = queue_rate_pps(RATE_BPS, 1500)
        switches.append(switch | {"ports": ports})
    return {
        "p4": {"p4info": str(P4_INFO), "json": str(P4_JSON)},
        "rest": {"host": "127.0.0.1", "port": rest_port, "token": TOKEN},
        "store": dsn,
        "replication": {"lease_seconds": 1.5, "renew_seconds": 0.25},
        "monitor": {"enabled": False},
        # The switches have no interfaces: no probe could cross a trunk (the drills check the
        # store and the switches' tables, not forwarding).
        "links": {"enabled": False},
        "switches": switches,
        "hosts": [
            {"name": "h1", "ip": "10.0.1.2", "mac": "0a:00:00:00:00:01", "switch": "s1", "port": 1},
            {"name": "h2", "ip": "10.0.2.2", "mac": "0a:00:00:00:00:02", "switch": f"s{SWITCHES}", "port": 2},
            {"name": "h3", "ip": "10.0.3.2", "mac": "0a:00:00:00:00:03", "switch": "s2", "port": 3},
        ],
    }


HOSTS = ("10.0.1.2", "10.0.2.2", "10.0.3.2")


def rest(port: int, timeout: float = 15.0) -> Rest:
    return Rest(port, timeout, token=TOKEN)


@dataclass
class Outcomes:
    """What the clients were answered, by flow (each POST uses a flow of its own)."""

    created: dict[tuple[str, str, int], int] = field(default_factory=dict)  # flow → reservation id
    refused: set[tuple[str, str, int]] = field(default_factory=set)  # a 4xx/5xx answer
    unknown: set[tuple[str, str, int]] = field(default_factory=set)  # no answer
    deleted: set[int] = field(default_factory=set)  # reservation ids answered 204
    maybe_deleted: set[int] = field(default_factory=set)  # a DELETE got no answer (0, 504)
    answers: dict[int, int] = field(default_factory=dict)  # status → how many

    def count(self, status: int) -> None:
        self.answers[status] = self.answers.get(status, 0) + 1


@dataclass
class ReplicaLab:
    workdir: Path
    kind: str = "terrapin"  # or "bmv2": p4lang's simple_switch_grpc
    replicas: int = 2
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    postgres: PostgresServer | None = None
    config: dict[str, Any] = field(default_factory=dict)
    grpc_ports: list[int] = field(default_factory=list)  # switch i's is grpc_ports[i - 1]
    rest_ports: list[int] = field(default_factory=list)  # replica r's is rest_ports[r]
    thrift_ports: list[int] = field(default_factory=list)  # BMv2's runtime server, for its CLI

    def up(self) -> None:
        ports = free_ports(2 * SWITCHES + self.replicas)
        self.grpc_ports, self.thrift_ports = ports[:SWITCHES], ports[SWITCHES : 2 * SWITCHES]
        self.rest_ports = ports[2 * SWITCHES :]
        self.postgres = self.start_postgres()
        self.config = self.make_config(self.postgres.dsn)
        (self.workdir / "controller.yaml").write_text(yaml.safe_dump(self.config))
        for i in range(1, SWITCHES + 1):
            self.start_switch(i)
        self.start_replica(0)
        self.wait_role(0, "primary", 30)
        for r in range(1, self.replicas):
            self.start_replica(r)
            self.wait_role(r, "backup", 30)

    # ---- where things run (a lab across hosts, hostlab.py, says otherwise) ----------------------

    def start_postgres(self) -> PostgresServer:
        return PostgresServer().start()  # a temporary directory the server can enter

    def make_config(self, dsn: str) -> dict[str, Any]:
        return config(dsn, self.grpc_ports, self.rest_ports[0], self.kind, self.thrift_ports)

    def switch_address(self, i: int) -> str:
        """Where switch i serves P4Runtime, as the controllers and the checks dial it."""
        return f"127.0.0.1:{self.grpc_ports[i - 1]}"

    def switch_flags(self, i: int) -> list[str]:
        """Switch i's target options beyond the address (TLS across hosts)."""
        return []

    def switch_credentials(self) -> grpc.ChannelCredentials | None:
        """How the checks reach the switches: None is plaintext."""
        return None

    def on_host(self, host: str, args: list[str]) -> list[str]:
        """The command line that runs `args` on `host` ("switches", "controllers"): here, on
        this machine as it is."""
        return args

    def rest(self, port: int, timeout: float = 15.0) -> Rest:
        return rest(port, timeout)

    # ---- processes ------------------------------------------------------------------------------

    def start_switch(self, i: int) -> None:
        binary = str(SWITCH_BIN) if self.kind == "terrapin" else bmv2_command("simple_switch_grpc")
        args = [binary, "--no-p4", "--device-id", str(i)]
        if self.kind == "bmv2":
            args += ["--thrift-port", str(self.thrift_ports[i - 1])]
        args += ["--", "--grpc-server-addr", self.switch_address(i), "--cpu-port", "255"]
        args += self.switch_flags(i)
        with open(self.workdir / f"s{i}.log", "ab") as log:
            self.procs[f"s{i}"] = subprocess.Popen(
                self.on_host("switches", args), stdout=log, stderr=subprocess.STDOUT
            )
        credentials = self.switch_credentials()
        address = self.switch_address(i)
        channel = (
            grpc.insecure_channel(address)
            if credentials is None
            else grpc.secure_channel(address, credentials)
        )
        try:
            grpc.channel_ready_future(channel).result(timeout=20)
        finally:
            channel.close()

    def start_replica(self, r: int) -> None:
        args = [sys.executable, "-m", "terrapin.main", "--config", str(self.workdir / "controller.yaml")]
        args += ["--replica", f"c{r}", "--replica-index", str(r), "--port", str(self.rest_ports[r])]
        args += ["--base-dir", str(self.workdir), "--log-level", "INFO"]
        with open(self.workdir / f"c{r}.log", "ab") as log:
            self.procs[f"c{r}"] = subprocess.Popen(
                self.on_host("controllers", args), stdout=log, stderr=subprocess.STDOUT, cwd=REPO
            )

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def health(self, r: int) -> dict[str, Any] | None:
        status, body = self.rest(self.rest_ports[r], timeout=3).attempt("GET", "/health")
        return body if status in (200, 503) and isinstance(body, dict) else None

    def wait_role(self, r: int, role: str, timeout: float) -> float:
        """Seconds until replica r reports `role` with every switch serving (ready as primary,
        connected as backup)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            proc = self.procs.get(f"c{r}")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"replica c{r} exited; see {self.workdir}/c{r}.log")
            body = self.health(r)
            if body and body.get("status") == "ok" and (body.get("replication") or {}).get("role") == role:
                return time.monotonic() - started
            time.sleep(0.05)
        raise TimeoutError(f"replica c{r} is not {role} after {timeout} s: {self.health(r)}")

    def primary(self) -> int:
        for r in range(self.replicas):
            if f"c{r}" in self.procs:
                body = self.health(r)
                if body and (body.get("replication") or {}).get("role") == "primary":
                    return r
        raise AssertionError("no replica is primary")

    def close(self) -> None:
        for name, proc in list(self.procs.items()):
            processes.stop(proc)
            del self.procs[name]
        if self.postgres is not None:
            self.postgres.close()

    # ---- the burst --------------------------------------------------------------------------------

    def burst(self, clients: int, seconds: float, seed: int) -> Iterator[Outcomes]:
        """Run `clients` threads of reservations (and deletions of a third of what they made)
        against every replica in turn for `seconds`; yields once they run (the drill does its
        damage then), and the outcomes when they are done."""
        outcomes = Outcomes()
        lock = threading.Lock()
        stop = time.monotonic() + seconds

        def client(n: int) -> None:
            rng = random.Random(seed * 100 + n)
            conns = [self.rest(port) for port in self.rest_ports]
            mine: list[int] = []
            flow = 0
            while time.monotonic() < stop:
                conn = conns[rng.randrange(len(conns))]
                if mine and rng.random() < 0.3:
                    rid = mine.pop(rng.randrange(len(mine)))
                    status, _ = conn.attempt("DELETE", f"/reservations/{rid}")
                    with lock:
                        outcomes.count(status)
                        if status in (204, 404):  # 404: an earlier try did delete it
                            outcomes.deleted.add(rid)
                        else:
                            if status in (0, 504):
                                outcomes.maybe_deleted.add(rid)
                            mine.append(rid)  # not deleted, or not known: try again later
                    continue
                flow += 1
                src, dst = rng.sample(HOSTS, 2)
                port = n * 1000 + flow
                body = {
                    "src": src,
                    "dst": dst,
                    "protocol": "udp",
                    "src_port": port,
                    "dst_port": 9000,
                    "priority": rng.randint(1, 6),
                    "rate": rng.choice([10_000, 30_000, 60_000]),
                    "burst": rng.choice([3_000, 9_000]),
                    "max_packet": 1500,
                }
                status, answer = conn.attempt("POST", "/reservations", body)
                key = (src, dst, port)
                with lock:
                    outcomes.count(status)
                    if status == 201:
                        outcomes.created[key] = int(answer["id"])
                        mine.append(int(answer["id"]))
                    elif status in (0, 504):  # no answer, or the primary's was lost
                        outcomes.unknown.add(key)
                    else:
                        outcomes.refused.add(key)
                if status in (0, 503):
                    time.sleep(0.05)

        threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
        for t in threads:
            t.start()
        yield outcomes
        for t in threads:
            t.join()
        yield outcomes

    # ---- the checks ---------------------------------------------------------------------------------

    def check(self, outcomes: Outcomes) -> list[dict[str, Any]]:
        """Every guarantee of docs/deployment.md against the new primary and every switch;
        returns the reservations."""
        r = self.primary()
        # A set-up left "installing" by a store that went away is rolled back by the primary's
        # upkeep (every half second) once the store answers: wait for that, boundedly.
        deadline = time.monotonic() + 10
        while True:
            status, stored = self.rest(self.rest_ports[r]).attempt("GET", "/reservations")
            assert status == 200
            if all(x["state"] != "installing" for x in stored) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        by_flow = {(x["src"], x["dst"], x["src_port"]): x for x in stored}
        ids = {x["id"] for x in stored}
        # every 201 is kept, unless it was deleted (204) since
        gone = outcomes.deleted | outcomes.maybe_deleted
        kept = {flow: rid for flow, rid in outcomes.created.items() if rid not in gone}
        lost = {flow: rid for flow, rid in kept.items() if rid not in ids}
        assert not lost, f"reservations answered 201 are lost: {lost}"
        assert not ids & outcomes.deleted, f"deleted (204) but still there: {ids & outcomes.deleted}"
        # nothing refused is there
        wrongly = set(by_flow) & outcomes.refused
        assert not wrongly, f"refused but installed: {wrongly}"
        # what nobody was answered about is either wholly there or wholly absent (below: switches)
        unexplained = set(by_flow) - set(outcomes.created) - outcomes.unknown
        assert not unexplained, f"reservations nobody asked for: {unexplained}"
        assert all(x["state"] == "active" for x in stored), [x for x in stored if x["state"] != "active"]
        # no port over-admitted: each re-admits, in order, on an empty ledger
        cfg = parse_config(self.config)
        ledger = AdmissionLedger(cfg.port_models())
        topology = Topology(cfg)
        from terrapin.admission import ChannelEnvelope, ChannelKey

        for x in sorted(stored, key=lambda x: x["id"]):
            env = ChannelEnvelope(x["priority"], x["requested_rate"], x["requested_burst"], x["max_packet"])
            again = ledger.admit(
                ChannelKey(x["initiator"], x["context"]), topology.path(x["src"], x["dst"]), env
            )
            assert isinstance(again, Allocation), f"reservation {x['id']} over-admits: {again}"
        # every switch holds exactly the store's channels
        for i in range(1, SWITCHES + 1):
            want = {
                ChannelSelector(x["src"], x["dst"], 17, x["flow_key"])
                for x in stored
                for hop in x["allocation"]["hops"]
                if hop["switch"] == f"s{i}"
            }
            have = set(p4read.channel_selectors(self.switch_address(i), i, self.switch_credentials()))
            assert have == want, f"s{i}: missing {want - have}, extra {have - want}"
        return list(stored)
