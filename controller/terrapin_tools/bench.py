"""`make bench-controller` (python -m terrapin_tools.bench): admission and set-up figures.

1. Admission decision time: one multi-hop decision (every test on, 4 hops) on a ledger already
   holding 500 channels, measured in-process.
2. REST set-up over a 4-switch path: POST /reservations to the real controller process, which
   admits, stores and writes a meter+entry to 4 terrapin-switch processes over P4Runtime, and
   answers 201 only when every hop is written.
3. Time to install 1,000 reservations the same way, one after another.

It ends with three machine-readable lines (admission_decision_p99_ms, setup_4hop_p50_ms,
install_1000_s). The switches run without interfaces: only the control path is measured.

Then the scale runs (--stores): 10,000 channels over 16 switches on SQLite and on replicated
PostgreSQL, where kill -9 drills of the primary (failover_s) and of PostgreSQL itself, restarted
by make run's supervisor (db_outage_s: from the kill to the first accepted write), follow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import ipaddress
import json
import os
import pstats
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from finsy import P4Schema
from finsy.p4client import P4Client
from finsy.proto import p4i, p4r
from topo.supervise import Supervisor, watch_postgres

from terrapin.admission import AdmissionLedger, ChannelEnvelope, ChannelKey
from terrapin.api.reservation_bodies import MAX_BATCH
from terrapin.config import parse_config
from terrapin.paths import Topology
from terrapin_tools.pgserver import PostgresServer, cluster_processes
from terrapin_tools.processes import SWITCH, start_bare_switch, stop, stop_all

REPO = Path(__file__).resolve().parents[2]
P4_JSON = REPO / "build" / "p4" / "terrapin.json"
P4_INFO = REPO / "build" / "p4" / "terrapin.p4info.txtpb"
GRPC_BASE = 19760
REST_PORT = 19759
TOKEN = "bench-token"


def chain(n: int, store: str) -> dict[str, Any]:
    """h1 — s1 — … — sN — h2 on 10 Gbit/s ports with room for thousands of channels."""
    rate = 10_000_000_000
    switches = []
    for i in range(1, n + 1):
        left: dict[str, Any] = {"number": 1, "mac": f"02:00:00:00:{i:02x}:01", "rate_bps": rate}
        right: dict[str, Any] = {"number": 2, "mac": f"02:00:00:00:{i:02x}:02", "rate_bps": rate}
        left.update({"peer": "h1", "gateway_ip": "10.0.1.1"} if i == 1 else {"peer": f"s{i - 1}:2"})
        right.update({"peer": "h2", "gateway_ip": "10.0.2.1"} if i == n else {"peer": f"s{i + 1}:1"})
        switches.append(
            {
                "name": f"s{i}",
                "address": f"127.0.0.1:{GRPC_BASE + i}",
                "device_id": i,
                "ports": [left, right],
            }
        )
    return {
        "p4": {"p4info": str(P4_INFO), "json": str(P4_JSON)},
        "rest": {"host": "127.0.0.1", "port": REST_PORT, "token": TOKEN},
        "store": store,
        "admission": {
            "tests": ["rate_buffer", "static_priority", "best_effort_floor"],
            "queue_capacity": 50_000_000,
            "level_delay_budget_us": {6: 50_000, 5: 100_000},
        },
        "switches": switches,
        "hosts": [
            {"name": "h1", "ip": "10.0.1.2", "mac": "0a:00:00:00:00:01", "switch": "s1", "port": 1},
            {"name": "h2", "ip": "10.0.2.2", "mac": "0a:00:00:00:00:02", "switch": f"s{n}", "port": 2},
        ],
    }


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_admission(iterations: int) -> tuple[float, float, float, float]:
    """Wall-clock and CPU (thread) time of one decision, in ms. The decision does no I/O, so
    the CPU time is the decision itself; wall-clock adds whatever else runs on the machine."""
    config = parse_config(chain(4, ":memory:"))
    ledger = AdmissionLedger(config.port_models())
    path = Topology(config).path("10.0.1.2", "10.0.2.2")
    for n in range(500):
        env = ChannelEnvelope(1 + n % 6, 10_000, 3000, 1500, delay_bound_us=0 if n % 3 else 400_000)
        ledger.admit(ChannelKey("10.0.1.2", n), path, env)
    wall, cpu = [], []
    for n in range(iterations):
        env = ChannelEnvelope(1 + n % 6, 20_000, 4500, 1500, delay_bound_us=300_000 * (n % 2))
        key = ChannelKey("10.0.9.9", n)
        start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        ledger.admit(key, path, env)
        cpu.append((time.thread_time_ns() - start_cpu) / 1e6)
        wall.append((time.perf_counter_ns() - start) / 1e6)
        ledger.release(key)
    return percentile(wall, 0.5), percentile(wall, 0.99), percentile(cpu, 0.5), percentile(cpu, 0.99)


class Rest:
    """One keep-alive HTTP connection to one controller's REST API."""

    def __init__(
        self,
        port: int = REST_PORT,
        timeout: float = 30,
        token: str = TOKEN,
        host: str = "127.0.0.1",
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.context = context  # HTTPS with it (a controller with rest.tls)
        self.headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        self.conn = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        if self.context is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=self.context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def attempt(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, body); status 0 when the connection failed, so the outcome is unknown (the
        next request goes on a new connection)."""
        try:
            self.conn.request(method, path, None if body is None else json.dumps(body), self.headers)
            reply = self.conn.getresponse()
            data = reply.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = self._connect()
            return 0, None
        return reply.status, json.loads(data) if data else None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, body), trying once more on a new connection if the first failed: uvicorn closes
        keep-alive connections idle for 5 s."""
        status, answer = self.attempt(method, path, body)
        if status == 0:
            status, answer = self.attempt(method, path, body)
        if status == 0:
            raise ConnectionError(f"{method} {path}: no answer from {self.host}:{self.port}")
        return status, answer


def reservation(n: int) -> dict[str, Any]:
    return {
        "src": "10.0.1.2",
        "dst": "10.0.2.2",
        "protocol": "udp",
        "src_port": 1 + n // 60000,
        "dst_port": 1 + n % 60000,
        "priority": 1 + n % 6,
        "rate": 10_000,
        "burst": 3000,
        "max_packet": 1500,
    }


def wait_healthy(proc: subprocess.Popen[bytes], timeout: float, port: int = REST_PORT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("controller exited during start-up")
        try:
            status, body = Rest(port).call("GET", "/health")
            if status == 200 and all(s["ready"] for s in body["switches"].values()):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError("controller did not become ready")


def install_batch(numbers: range, clients: int) -> float:
    """POST every reservation in `numbers` from `clients` concurrent HTTP clients."""
    failures: list[str] = []

    def worker(part: list[int]) -> None:
        rest = Rest()
        for n in part:
            status, body = rest.call("POST", "/reservations", reservation(n))
            if status != 201:
                failures.append(f"{n}: {status} {body}")

    parts = [list(numbers)[i::clients] for i in range(clients)]
    threads = [threading.Thread(target=worker, args=(part,)) for part in parts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} installs failed, first: {failures[0]}")
    return took


def bench_rest(setups: int, installs: int, clients: int, workdir: Path) -> tuple[float, float, float, float]:
    procs: list[subprocess.Popen[bytes]] = []
    logs = workdir / "logs"
    logs.mkdir()
    try:
        for i in range(1, 5):
            procs.append(start_bare_switch(i, f"127.0.0.1:{GRPC_BASE + i}", logs / f"s{i}.log"))
        config_file = workdir / "bench.yaml"
        config_file.write_text(yaml.safe_dump(chain(4, str(workdir / "bench.sqlite"))))
        with open(logs / "controller.log", "wb") as log:
            controller = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "terrapin.main",
                    "--config",
                    str(config_file),
                    "--log-level",
                    "WARNING",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        procs.append(controller)
        wait_healthy(controller, 30)
        rest = Rest()
        setup_ms = []
        for n in range(setups):
            start = time.perf_counter()
            status, body = rest.call("POST", "/reservations", reservation(n))
            setup_ms.append((time.perf_counter() - start) * 1000)
            if status != 201:
                raise RuntimeError(f"set-up {n} failed: {status} {body}")
            if len(body["allocation"]["hops"]) != 4:
                raise RuntimeError("expected a 4-hop path")
            rest.call("DELETE", f"/reservations/{body['id']}")
        sequential_s = install_batch(range(100_000, 100_000 + installs), clients=1)
        for record in rest.call("GET", "/reservations")[1]:
            rest.call("DELETE", f"/reservations/{record['id']}")
        install_s = install_batch(range(200_000, 200_000 + installs), clients=clients)
        status, listed = rest.call("GET", "/reservations")
        if len(listed) != installs:
            raise RuntimeError(f"{len(listed)} reservations listed, expected {installs}")
        return percentile(setup_ms, 0.5), percentile(setup_ms, 0.99), sequential_s, install_s
    finally:
        stop_all(list(reversed(procs)))


# ---- scale: 10,000 channels over 16 switches, replicated on PostgreSQL; failover ------------

GRID = 4  # switches s1..s16 in a 4×4 grid, s1 at the top left, row by row
HOSTS_PER_SWITCH = 2
SCALE_GRPC_BASE = 19780
SCALE_REST = {"r0": 19757, "r1": 19758}  # each replica's REST port (the SQLite controller: r0's)
REPLICA_INDEX = {"r0": 0, "r1": 1}
TRUNK_BPS = 40_000_000_000
HOST_BPS = 10_000_000_000
HOST_PORT_BASE = 5  # ports 1..4 are the trunks north, east, south, west
# (row step, column step, this switch's port, the neighbour's port towards it)
NEIGHBOURS = ((-1, 0, 1, 3), (0, 1, 2, 4), (1, 0, 3, 1), (0, -1, 4, 2))
PROGRESS_EVERY_S = 10.0
RATE_WINDOW_S = 30.0
FAILOVER_RETRY_S = 0.05
# How long both replicas run, the backup caught up, before a drill kills the primary: the steady
# state of the deployment (a backup prepares its takeover as it follows, which a replica restarted
# by the previous drill has only just begun).
FAILOVER_SETTLE_S = 10.0
CHANNELS_TABLE = "TerrapinIngress.channels"


def grid_switch(row: int, col: int) -> int:
    return row * GRID + col + 1


def grid_host_ip(switch: int, k: int) -> str:
    return f"10.{k + 1}.{switch}.2"


def grid(store: str, rest_port: int, replicated: bool, lease_seconds: float | None = None) -> dict[str, Any]:
    """16 switches in a 4×4 grid (40 Gbit/s trunks), two hosts on every switch (10 Gbit/s)."""
    switches = []
    hosts = []
    for row in range(GRID):
        for col in range(GRID):
            i = grid_switch(row, col)
            ports: list[dict[str, Any]] = []
            for drow, dcol, mine, theirs in NEIGHBOURS:
                r, c = row + drow, col + dcol
                if 0 <= r < GRID and 0 <= c < GRID:
                    peer = f"s{grid_switch(r, c)}:{theirs}"
                    ports.append(
                        {
                            "number": mine,
                            "mac": f"02:00:01:00:{i:02x}:{mine:02x}",
                            "rate_bps": TRUNK_BPS,
                            "peer": peer,
                        }
                    )
            for k in range(HOSTS_PER_SWITCH):
                number = HOST_PORT_BASE + k
                name = f"h{i}x{k}"
                ports.append(
                    {
                        "number": number,
                        "mac": f"02:00:01:00:{i:02x}:{number:02x}",
                        "rate_bps": HOST_BPS,
                        "peer": name,
                        "gateway_ip": f"10.{k + 1}.{i}.1",
                    }
                )
                hosts.append(
                    {
                        "name": name,
                        "ip": grid_host_ip(i, k),
                        "mac": f"0a:00:01:{k:02x}:{i:02x}:02",
                        "switch": f"s{i}",
                        "port": number,
                    }
                )
            switches.append(
                {
                    "name": f"s{i}",
                    "address": f"127.0.0.1:{SCALE_GRPC_BASE + i}",
                    "device_id": i,
                    "ports": ports,
                }
            )
    config = chain(1, store) | {"switches": switches, "hosts": hosts}
    config["rest"] = {"host": "127.0.0.1", "port": rest_port, "token": TOKEN}
    if replicated:
        # By default the configuration's defaults: a 1.0 s lease renewed every 0.2 s.
        lease = (
            {}
            if lease_seconds is None
            else {"lease_seconds": lease_seconds, "renew_seconds": lease_seconds / 6}
        )
        config["replication"] = lease
    return config


def grid_pairs() -> list[tuple[str, str]]:
    """(source, destination) host addresses whose switches are 1 to 4 grid steps apart, so every
    path has 2 to 5 hops (egress ports), interleaved so each block of channels mixes lengths."""
    by_distance: dict[int, list[tuple[str, str]]] = {}
    cells = [(r, c) for r in range(GRID) for c in range(GRID)]
    for r1, c1 in cells:
        for r2, c2 in cells:
            distance = abs(r1 - r2) + abs(c1 - c2)
            if not 1 <= distance <= 4:
                continue
            for k1 in range(HOSTS_PER_SWITCH):
                for k2 in range(HOSTS_PER_SWITCH):
                    pair = (grid_host_ip(grid_switch(r1, c1), k1), grid_host_ip(grid_switch(r2, c2), k2))
                    by_distance.setdefault(distance, []).append(pair)
    lists = [by_distance[d] for d in sorted(by_distance)]
    pairs: list[tuple[str, str]] = []
    for n in range(max(len(x) for x in lists)):
        pairs.extend(x[n] for x in lists if n < len(x))
    return pairs


PAIRS = grid_pairs()


def scale_reservation(n: int) -> dict[str, Any]:
    """Channel n: a pair of hosts in turn, and a source port of its own within the pair."""
    src, dst = PAIRS[n % len(PAIRS)]
    return {
        "src": src,
        "dst": dst,
        "protocol": "udp",
        "src_port": 10_000 + n // len(PAIRS),
        "dst_port": 5000,
        "priority": 1 + n % 6,
        "rate": 10_000,
        "burst": 3000,
        "max_packet": 1500,
    }


def say(stage: str, text: str) -> None:
    """A line of a long run, with the time of day (the controllers' logs carry it too)."""
    print(f"  {time.strftime('%H:%M:%S')} [{stage}] {text}", flush=True)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (stat's fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def postgres_pids(server: PostgresServer | None) -> list[int]:
    return [] if server is None else cluster_processes(server.data_dir)


@dataclass
class Installed:
    seconds: float
    installed: int
    failures: list[str]


def per_request(batch: int) -> str:
    return "one reservation per request" if batch == 1 else f"{batch} per request"


def install_with_progress(
    port: int,
    numbers: list[int],
    clients: int,
    stage: str,
    watch: Callable[[], str] | None = None,
    batch: int = 1,
) -> Installed:
    """POST scale_reservation(n) for every n from `clients` threads, each with its own keep-alive
    connection, `batch` reservations a request (1: POST /reservations, more: POST
    /reservations/batch); a line of progress every PROGRESS_EVERY_S (with what `watch` says)."""
    failures: list[str] = []
    done = [0] * clients
    finished = threading.Event()

    def worker(index: int, part: list[int]) -> None:
        rest = Rest(port)
        for start in range(0, len(part), batch):
            chunk = part[start : start + batch]
            try:
                if batch == 1:
                    status, body = rest.call("POST", "/reservations", scale_reservation(chunk[0]))
                    answers = [(status, body)]
                else:
                    status, body = rest.call(
                        "POST", "/reservations/batch", {"reservations": [scale_reservation(n) for n in chunk]}
                    )
                    answers = (
                        [(x["status"], x["error"]) for x in body["results"]]
                        if status == 200
                        else [(status, body)] * len(chunk)
                    )
            except OSError as exc:
                answers = [(0, str(exc))] * len(chunk)
                rest = Rest(port)
            for n, (status, body) in zip(chunk, answers, strict=True):
                if status == 201:
                    done[index] += 1
                else:
                    failures.append(f"{n}: {status} {body}")

    def progress() -> None:
        # The estimate uses the last RATE_WINDOW_S: the rate falls as the ledger fills.
        recent = [(0.0, 0)]
        while not finished.wait(PROGRESS_EVERY_S):
            elapsed = time.perf_counter() - start
            count = sum(done)
            recent.append((elapsed, count))
            while recent[0][0] < elapsed - RATE_WINDOW_S:
                recent.pop(0)
            then, before = recent[0]
            rate = (count - before) / (elapsed - then) if elapsed > then else 0.0
            left = f"~{(len(numbers) - count) / rate:.0f} s to go" if rate else "no progress"
            say(
                stage,
                f"{elapsed:6.1f} s: {count}/{len(numbers)} installed (now {rate:.0f}/s), {left},"
                f" {len(failures)} failed; load {load_average()}" + (f"; {watch()}" if watch else ""),
            )

    threads = [
        threading.Thread(target=worker, args=(i, numbers[i::clients]), name=f"client-{i}", daemon=True)
        for i in range(clients)
    ]
    reporter = threading.Thread(target=progress, name="progress", daemon=True)
    start = time.perf_counter()
    reporter.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - start
    finished.set()
    reporter.join()
    return Installed(took, sum(done), failures)


Match = tuple[str, str, int, int]  # a channels entry's key: src, dst, protocol, flow key


async def channel_matches(grpc_port: int, device_id: int, info: p4i.P4Info) -> set[Match]:
    """The key of every entry in the switch's channels table, read over P4Runtime (a read needs
    no arbitration, so the bench does not disturb the primary)."""
    table = next(t for t in info.tables if t.preamble.name == CHANNELS_TABLE)
    name = {f.id: f.name for f in table.match_fields}
    request = p4r.ReadRequest(
        device_id=device_id,
        entities=[p4r.Entity(table_entry=p4r.TableEntry(table_id=table.preamble.id))],
    )
    found: set[Match] = set()
    async with P4Client(f"127.0.0.1:{grpc_port}", wait_for_ready=False) as client:
        async for reply in client.request_iter(request):
            for entity in reply.entities:
                key = {
                    name[m.field_id]: int.from_bytes(m.exact.value, "big") for m in entity.table_entry.match
                }
                src, dst = ipaddress.IPv4Address(key["src_addr"]), ipaddress.IPv4Address(key["dst_addr"])
                found.add((str(src), str(dst), key["protocol"], key["flow_key"]))
    return found


def check_switches(port: int, expected_count: int, switches: int) -> tuple[bool, str]:
    """Are `expected_count` reservations listed (all active), and does every switch hold exactly
    the entries the store's reservations put there (one per hop), no more, no fewer?"""
    status, listed = Rest(port, timeout=120).call("GET", "/reservations")
    if status != 200:
        return False, f"GET /reservations answered {status}"
    wanted: dict[str, set[Match]] = {f"s{i}": set() for i in range(1, switches + 1)}
    states: dict[str, int] = {}
    for record in listed:
        states[record["state"]] = states.get(record["state"], 0) + 1
        match = (record["src"], record["dst"], record["protocol"], record["flow_key"])
        for hop in record["allocation"]["hops"]:
            wanted[hop["switch"]].add(match)
    info = P4Schema(P4_INFO).p4info
    problems = []
    held = 0
    for i in range(1, switches + 1):
        name = f"s{i}"
        found = asyncio.run(channel_matches(SCALE_GRPC_BASE + i, i, info))
        held += len(found)
        missing, extra = sorted(wanted[name] - found), sorted(found - wanted[name])
        if missing or extra:
            example = f" (e.g. {(missing or extra)[0]})"
            problems.append(f"{name} lacks {len(missing)} and has {len(extra)} not in the store{example}")
    hops = sum(len(x) for x in wanted.values())
    ok = len(listed) == expected_count and states == {"active": len(listed)} and not problems
    busiest = max(wanted, key=lambda s: len(wanted[s]))
    text = (
        f"{len(listed)} reservations listed (expected {expected_count}; states {states}); the store's "
        f"hops put {hops} entries on {switches} switches (most on {busiest}: {len(wanted[busiest])}); "
        f"the switches hold {held}: "
        + ("each switch exactly the store's" if not problems else "; ".join(problems))
    )
    return ok, text


def health(port: int) -> tuple[int, Any]:
    try:
        return Rest(port, timeout=5).call("GET", "/health")
    except (OSError, http.client.HTTPException):
        return 0, None


def role_of(body: Any) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("replication"), dict):
        return None
    role = body["replication"].get("role")
    return str(role) if role is not None else None


def primary_of(names: list[str]) -> str | None:
    """Which replica says it is primary (the first that does), by its /health."""
    for name in names:
        if role_of(health(SCALE_REST[name])[1]) == "primary":
            return name
    return None


class Deployment:
    """The scale run's processes: 16 switches and one or two controllers, all stopped by close()."""

    def __init__(
        self, workdir: Path, config: dict[str, Any], profile_dir: Path | None, log_level: str
    ) -> None:
        self.workdir = workdir
        self.log_level = log_level
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (workdir / "build" / "run").mkdir(parents=True, exist_ok=True)  # each replica's event history
        self.config_file = workdir / "scale.yaml"
        self.config_file.write_text(yaml.safe_dump(config))
        self.switch_count = len(config["switches"])
        self.profile_dir = profile_dir
        self.switches: list[subprocess.Popen[bytes]] = []
        self.controllers: dict[str, subprocess.Popen[bytes]] = {}

    def check_ports_free(self) -> None:
        """Refuse to start beside another run on these ports (another bench, say): its
        controller would answer this run's requests, and the figures would be of neither."""
        ports = [SCALE_GRPC_BASE + i for i in range(1, self.switch_count + 1)] + list(SCALE_REST.values())
        for port in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                # as the servers bind: a port only in TIME_WAIT is free to them
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    raise RuntimeError(
                        f"127.0.0.1:{port} is in use: is another bench-controller running? (ports "
                        f"{min(ports)}-{max(ports)})"
                    ) from None

    def start_switches(self) -> None:
        self.check_ports_free()
        for i in range(1, self.switch_count + 1):
            address = f"127.0.0.1:{SCALE_GRPC_BASE + i}"
            self.switches.append(start_bare_switch(i, address, self.logs / f"s{i}.log"))

    def start_controller(self, name: str, replica: int | None) -> subprocess.Popen[bytes]:
        command = [sys.executable]
        if self.profile_dir is not None:
            command += ["-m", "cProfile", "-o", str(self.profile_dir / f"{name}.prof")]
        command += [
            "-m",
            "terrapin.main",
            "--config",
            str(self.config_file),
            "--base-dir",
            str(self.workdir),
            "--port",
            str(SCALE_REST[name]),
            "--log-level",
            self.log_level,
        ]
        if replica is not None:
            command += ["--replica", name, "--replica-index", str(replica)]
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.controllers[name] = proc
        return proc

    def wait_role(self, name: str, role: str | None, timeout: float = 120) -> None:
        """Until the controller answers /health with 200 (every switch ready, or connected for a
        backup) in `role` (None: not replicated)."""
        proc = self.controllers[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"controller {name} exited (see {self.logs / name}.log)")
            status, body = health(SCALE_REST[name])
            if status == 200 and role_of(body) == role:
                return
            time.sleep(0.1)
        raise TimeoutError(f"controller {name} did not become ready as {role or 'the controller'}")

    def wait_count(self, name: str, count: int, timeout: float = 60) -> None:
        """Until the replica's copy holds `count` reservations (a backup follows the journal)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _status, body = health(SCALE_REST[name])
            if isinstance(body, dict) and body.get("reservations") == count:
                return
            time.sleep(0.1)
        raise TimeoutError(f"replica {name} did not reach {count} reservations")

    def stop(self, name: str) -> None:
        """A clean stop (SIGTERM): a replica gives its lease up; cProfile writes its profile."""
        stop(self.controllers.pop(name), timeout=60)

    def kill(self, name: str) -> None:
        proc = self.controllers.pop(name)
        proc.kill()  # SIGKILL: what a crash leaves behind
        proc.wait()

    def pids(self) -> dict[str, list[int]]:
        found = {name: [p.pid] for name, p in self.controllers.items()}
        found["switches"] = [p.pid for p in self.switches]
        return found

    def close(self) -> None:
        for name in list(self.controllers):
            self.stop(name)
        for proc in self.switches:
            stop(proc)
        self.switches.clear()


@dataclass
class ScaleResult:
    store: str
    channels: int
    install: Installed
    check_ok: bool
    rss_before_mb: float
    rss_after_mb: float
    failovers: list[float] = field(default_factory=list)
    db_outages: list[float] = field(default_factory=list)

    @property
    def mb_per_1000(self) -> float:
        return (self.rss_after_mb - self.rss_before_mb) / self.channels * 1000


def print_cpu(stage: str, wall: float, before: dict[str, float], after: dict[str, float]) -> None:
    used = {k: after[k] - before.get(k, 0.0) for k in after}
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in used.items())
    say(stage, f"CPU used over {wall:.1f} s wall (2 cores: {2 * wall:.1f} s): {parts}")


def cpu_snapshot(dep: Deployment, pg: PostgresServer | None) -> dict[str, float]:
    snapshot = {name: cpu_seconds(pids) for name, pids in dep.pids().items()}
    if pg is not None:
        snapshot["postgres"] = cpu_seconds(postgres_pids(pg))
    times = os.times()
    snapshot["bench clients"] = times.user + times.system
    return snapshot


def failover_once(dep: Deployment, number: int) -> tuple[str, float, float, int]:
    """kill -9 whichever replica is primary, once both are settled (the primary serving every
    switch, the backup caught up and running FAILOVER_SETTLE_S more); POST a new channel to the
    backup every FAILOVER_RETRY_S until one is answered 201. Returns (the replica killed, seconds
    to that 201, seconds until every switch is ready on the new primary, channel numbers used)."""
    primary = primary_of(list(dep.controllers))
    if primary is None:
        raise RuntimeError("no replica is primary before the drill")
    backup = next(name for name in dep.controllers if name != primary)
    dep.wait_role(primary, "primary")
    dep.wait_role(backup, "backup")
    dep.wait_count(backup, health(SCALE_REST[primary])[1]["reservations"])
    time.sleep(FAILOVER_SETTLE_S)
    start = time.perf_counter()
    dep.kill(primary)
    first, used, tried = post_until_accepted([backup], number, start)
    dep.wait_role(backup, "primary")
    ready = time.perf_counter() - start
    say(
        "failover",
        f"{primary} killed: first 201 from {backup} after {first:.2f} s ({tried}); "
        f"every switch ready on it after {ready:.2f} s",
    )
    return primary, first, ready, used


def database_outage_once(dep: Deployment, pg: PostgresServer, number: int) -> tuple[float, int]:
    """kill -9 the PostgreSQL postmaster once both replicas are settled, with make run's
    supervisor watching it (topo/supervise.py: reaped, started again on its data after the first
    back-off); POST a new channel every FAILOVER_RETRY_S, to each replica in turn, until one is
    answered 201. Returns (seconds from the kill to that 201, channel numbers used)."""
    names = list(dep.controllers)
    primary = primary_of(names)
    if primary is None:
        raise RuntimeError("no replica is primary before the database drill")
    for name in names:
        dep.wait_role(name, "primary" if name == primary else "backup")
        dep.wait_count(name, health(SCALE_REST[primary])[1]["reservations"])
    supervisor = Supervisor(echo=lambda line: say("database", line.partition("supervisor: ")[2]))
    watch_postgres(supervisor, pg)
    postmaster = supervisor.process("postgres")
    assert postmaster is not None
    supervisor.start()
    try:
        start = time.perf_counter()
        os.kill(postmaster.pid, signal.SIGKILL)
        first, used, tried = post_until_accepted(names, number, start)
    finally:
        supervisor.stop()
    say("database", f"PostgreSQL killed: first 201 after {first:.2f} s ({tried})")
    return first, used


def post_until_accepted(replicas: list[str], number: int, since: float) -> tuple[float, int, str]:
    """POST a new channel (`number`, `number` + 1, ...) every FAILOVER_RETRY_S, to each replica
    in turn, until one is answered 201. Returns (seconds from `since` to that 201, channel
    numbers used, how often each answer came)."""
    used = 0
    answers: dict[str, int] = {}
    while True:
        attempt = time.perf_counter()
        status, body = Rest(SCALE_REST[replicas[used % len(replicas)]], timeout=10).attempt(
            "POST", "/reservations", scale_reservation(number + used)
        )
        used += 1
        # A refusal says whose: the store's, the lease's (no primary), or a switch's.
        error = body.get("error") if isinstance(body, dict) else None
        why = f"{status} {error}" if error else str(status or "no answer")
        answers[why] = answers.get(why, 0) + 1
        if status == 201:
            tried = ", ".join(f"{count}× {why}" for why, count in sorted(answers.items()))
            return time.perf_counter() - since, used, tried
        if attempt - since > 120:
            raise RuntimeError(f"no 201 from {', '.join(replicas)} within 120 s of the kill: {answers}")
        time.sleep(max(0.0, FAILOVER_RETRY_S - (time.perf_counter() - attempt)))


def bench_scale(
    store: str,
    channels: int,
    clients: int,
    failovers: int,
    workdir: Path,
    profile_dir: Path | None,
    log_level: str = "WARNING",
    lease_seconds: float | None = None,
    batch: int = 1,
    db_outages: int = 0,
) -> ScaleResult:
    """One scale run: 'postgres' (replicas r0 and r1 on a fresh PostgreSQL) or 'sqlite' (one
    controller). Installs `channels`, checks every switch against the store; then, replicated,
    `failovers` kill -9 drills of the primary and `db_outages` of PostgreSQL (without
    profiling), or one clean hand-over (with it)."""
    replicated = store == "postgres"
    stage = f"{store}{' r0+r1' if replicated else ''}"
    with contextlib.ExitStack() as stack:
        pg: PostgresServer | None = None
        if replicated:
            pg = stack.enter_context(PostgresServer())
            location = pg.dsn
        else:
            location = str(workdir / "scale.sqlite")
        profiles = None if profile_dir is None else profile_dir / store
        if profiles is not None:
            profiles.mkdir(parents=True, exist_ok=True)
        config = grid(location, SCALE_REST["r0"], replicated, lease_seconds)
        dep = Deployment(workdir / store, config, profiles, log_level)
        stack.callback(dep.close)
        say(
            stage,
            f"starting 16 switches and the controller{'s' if replicated else ''}; load {load_average()}",
        )
        dep.start_switches()
        dep.start_controller("r0", REPLICA_INDEX["r0"] if replicated else None)
        dep.wait_role("r0", "primary" if replicated else None)
        if replicated:
            dep.start_controller("r1", REPLICA_INDEX["r1"])
            dep.wait_role("r1", "backup")
        primary = dep.controllers["r0"].pid
        time.sleep(1.0)  # let start-up settle before the memory reading
        rss_before = vm_rss_mb(primary)
        cpu_before = cpu_snapshot(dep, pg)
        say(
            stage,
            f"installing {channels} channels from {clients} clients, {per_request(batch)}; "
            f"load {load_average()}",
        )
        primaries: list[str] = ["r0"]

        def watch() -> str:
            # A primary too busy to renew its lease in time loses it: say so as it happens.
            now = primary_of(list(dep.controllers)) or "none"
            if now != primaries[-1]:
                primaries.append(now)
            return f"primary {now}"

        installed = install_with_progress(
            SCALE_REST["r0"], list(range(channels)), clients, stage, watch if replicated else None, batch
        )
        print_cpu(stage, installed.seconds, cpu_before, cpu_snapshot(dep, pg))
        rss_after = vm_rss_mb(primary)
        say(
            stage,
            f"{installed.installed}/{channels} installed in {installed.seconds:.2f} s "
            f"({installed.installed / installed.seconds:.0f}/s), {len(installed.failures)} failed"
            + (f", first: {installed.failures[0][:300]}" if installed.failures else "")
            + f"; load {load_average()}",
        )
        say(stage, f"primary RSS {rss_before:.1f} MB before, {rss_after:.1f} MB after")
        ok, text = check_switches(SCALE_REST["r0"], installed.installed, dep.switch_count)
        say(stage, f"check {'passed' if ok else 'FAILED'}: {text}")
        result = ScaleResult(store, installed.installed, installed, ok, rss_before, rss_after)
        if replicated:
            watch()
            if len(primaries) > 1:
                say(stage, f"THE LEASE CHANGED HANDS DURING THE INSTALL: primary {' -> '.join(primaries)}")
            dep.wait_count("r1", installed.installed)
            say(
                stage,
                f"r1 follows: {installed.installed} reservations; "
                f"RSS {vm_rss_mb(dep.controllers['r1'].pid):.1f} MB",
            )
            total = installed.installed
            if profile_dir is not None:
                leaving = primary_of(list(dep.controllers)) or "r0"
                staying = next(name for name in dep.controllers if name != leaving)
                start = time.perf_counter()
                dep.stop(leaving)
                dep.wait_role(staying, "primary")
                say(
                    stage,
                    f"clean hand-over (profiling, so no kill -9): {staying} primary with every switch "
                    f"ready {time.perf_counter() - start:.2f} s after {leaving} was stopped",
                )
            else:
                number = channels
                for _ in range(failovers):
                    killed, first, _ready, used = failover_once(dep, number)
                    result.failovers.append(first)
                    number += used
                    total += 1
                    dep.start_controller(killed, REPLICA_INDEX[killed])
                    dep.wait_role(killed, "backup")
                assert pg is not None
                for _ in range(db_outages):
                    outage, used = database_outage_once(dep, pg, number)
                    result.db_outages.append(outage)
                    number += used
                    total += 1
                if failovers or db_outages:
                    primary_name = primary_of(list(dep.controllers)) or "r0"
                    for name in dep.controllers:
                        dep.wait_count(name, total)
                    ok, text = check_switches(SCALE_REST[primary_name], total, dep.switch_count)
                    drills = f"{failovers} failovers and {db_outages} database kills"
                    say(stage, f"after {drills}, check {'passed' if ok else 'FAILED'}: {text}")
                    result.check_ok = result.check_ok and ok
        say(stage, f"done; load {load_average()}")
    return result


def profile_component(file_name: str, function: str) -> str:
    """Where a profiled function belongs: a package of the venv, a terrapin module, a stdlib file."""
    if file_name == "~":
        return f"builtin {function}"
    if "site-packages/" in file_name:
        return file_name.split("site-packages/")[1].split("/")[0]
    if "/terrapin/" in file_name:
        return "terrapin/" + file_name.split("/terrapin/")[-1]
    return "stdlib " + Path(file_name).name


# pstats' raw table: (file, line, function) → (primitive calls, calls, own s, cumulative s, callers)
ProfileRows = dict[tuple[str, int, str], tuple[int, int, float, float, Any]]


def profile_summary(path: Path, installs: int, top: int = 20) -> list[str]:
    """The profile's costs per install: own time by component (package or module), the
    costliest functions by own time, and by cumulative time (a coroutine's cumulative time
    counts each of its resumptions, so it overstates async call chains)."""
    # The raw table, not get_stats_profile(): that keys functions by bare name, so every
    # `__init__` or `wait` but one is dropped.
    rows: ProfileRows = vars(pstats.Stats(str(path)))["stats"]
    total = sum(row[2] for row in rows.values())
    lines = [f"{path.name}: {total:.1f} s profiled (the main thread); ms per install of {installs}"]
    components: dict[str, float] = {}
    for (file_name, _line, function), row in rows.items():
        key = profile_component(file_name, function)
        components[key] = components.get(key, 0.0) + row[2]
    lines.append("  own time by component:")
    for key, seconds in sorted(components.items(), key=lambda kv: kv[1], reverse=True)[:top]:
        share = 100 * seconds / total if total else 0.0
        lines.append(f"    {seconds * 1000 / installs:7.3f} ms {share:5.1f}%  {key}")
    for title, column in (("own time", 2), ("cumulative", 3)):
        lines.append(f"  functions by {title}:")
        ranked = sorted(rows.items(), key=lambda kv: float(kv[1][column]), reverse=True)[:top]
        for (file_name, line, function), row in ranked:
            where = f"{Path(file_name).name}:{line}" if file_name != "~" else "(builtin)"
            lines.append(
                f"    {row[2] * 1000 / installs:7.3f} own {row[3] * 1000 / installs:8.3f} cum"
                f"  {row[1]:>10}  {function} {where}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m terrapin_tools.bench", description=__doc__)
    parser.add_argument("--decisions", type=int, default=5000)
    parser.add_argument("--setups", type=int, default=200)
    parser.add_argument("--installs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients installing")
    parser.add_argument("--channels", type=int, default=10_000, help="channels of each scale run")
    parser.add_argument("--scale-clients", type=int, default=16, help="concurrent clients of the scale runs")
    parser.add_argument(
        "--scale-batch",
        type=int,
        default=100,
        help="reservations per request of the scale runs' install (POST /reservations/batch; 1: one "
        "POST /reservations each)",
    )
    parser.add_argument("--failovers", type=int, default=3, help="kill -9 drills after the PostgreSQL run")
    parser.add_argument(
        "--db-outages", type=int, default=1, help="kill -9 drills of PostgreSQL itself, after the failovers"
    )
    parser.add_argument(
        "--stores", default="sqlite,postgres", help="the scale runs, in order (sqlite, postgres; '' for none)"
    )
    parser.add_argument("--scale-only", action="store_true", help="skip the decision and 4-switch figures")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="run the scale runs' controllers under cProfile (DIR/<store>/<replica>.prof) and print the "
        "top costs per install; a clean hand-over replaces the kill -9 drills, and the figures are "
        "cProfile's, not the bench's",
    )
    parser.add_argument("--controller-log-level", default="WARNING", help="the scale runs' controllers'")
    parser.add_argument("--keep-logs", action="store_true", help="keep the scale runs' logs when all passed")
    parser.add_argument(
        "--lease-seconds",
        type=float,
        help="the replicas' lease (renewed every sixth of it; default the configuration's, 1.0 s)",
    )
    args = parser.parse_args(argv)
    # A SIGTERM unwinds like Ctrl-C, so the switches, controllers and PostgreSQL are stopped.
    signal.signal(signal.SIGTERM, _terminated)
    if not 1 <= args.scale_batch <= MAX_BATCH:
        parser.error(f"--scale-batch: 1..{MAX_BATCH}, not {args.scale_batch}")
    stores = [x for x in args.stores.split(",") if x]
    if any(x not in ("sqlite", "postgres") for x in stores):
        parser.error(f"--stores: {args.stores!r} (sqlite, postgres)")
    for needed in (SWITCH, P4_JSON, P4_INFO):
        if not needed.exists():
            print(f"{needed} is missing: run make toolchain p4", file=sys.stderr)
            return 2
    print(f"load average: {load_average()} on {os.cpu_count()} cpus", flush=True)
    machine: list[str] = []
    if not args.scale_only:
        machine += bench_small(args)
    profile_dir = None if args.profile is None else Path(args.profile).absolute()
    results: dict[str, ScaleResult] = {}
    workdir = Path(tempfile.mkdtemp(prefix="terrapin-bench-"))
    clean = False
    try:
        for store in stores:
            print(f"scale run on {store}:", flush=True)
            results[store] = bench_scale(
                store,
                args.channels,
                args.scale_clients,
                args.failovers,
                workdir,
                profile_dir,
                args.controller_log_level,
                args.lease_seconds,
                args.scale_batch,
                args.db_outages,
            )
        clean = all(r.check_ok and r.channels == args.channels for r in results.values())
    finally:
        if clean and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"the scale runs' logs are kept in {workdir}", file=sys.stderr)
    for store, r in results.items():
        how = (
            "replicated (primary r0 + backup r1) on PostgreSQL"
            if store == "postgres"
            else "one controller on SQLite"
        )
        short = "" if r.channels == args.channels else f" (ONLY {r.channels} of {args.channels})"
        print(
            f"install {args.channels} channels over 16 switches (2-5 hops), {how}, "
            f"{args.scale_clients} clients, {per_request(args.scale_batch)}: "
            f"{r.install.seconds:.2f} s ({r.channels / r.install.seconds:.0f}/s){short}; switches checked: "
            f"{'equal to the store' if r.check_ok else 'MISMATCH'}; primary RSS {r.rss_before_mb:.0f} -> "
            f"{r.rss_after_mb:.0f} MB ({r.mb_per_1000:.1f} MB per 1000 channels)"
        )
        if r.failovers:
            each = ", ".join(f"{x:.2f}" for x in r.failovers)
            median = statistics.median(r.failovers)
            print(f"failover (kill -9 primary -> first 201 on the new one): {each} s; median {median:.2f} s")
        if r.db_outages:
            each = ", ".join(f"{x:.2f}" for x in r.db_outages)
            median = statistics.median(r.db_outages)
            print(f"database outage (kill -9 PostgreSQL -> first 201): {each} s; median {median:.2f} s")
    print(f"load average: {load_average()}")
    if profile_dir is not None:
        for store, r in results.items():
            for prof in sorted((profile_dir / store).glob("*.prof")):
                print("\n".join(profile_summary(prof, r.channels)))
    for line in machine:
        print(line)
    if "postgres" in results:
        r = results["postgres"]
        print(f"install_{args.channels}_s: {r.install.seconds:.2f}")
        if r.failovers:
            print(f"failover_s: {statistics.median(r.failovers):.2f}")
        if r.db_outages:
            print(f"db_outage_s: {statistics.median(r.db_outages):.2f}")
        print(f"controller_memory_per_1000_channels_mb: {r.mb_per_1000:.1f}")
    if "sqlite" in results:
        print(f"install_{args.channels}_sqlite_s: {results['sqlite'].install.seconds:.2f}")
    failed = [s for s, r in results.items() if not r.check_ok or r.channels != args.channels]
    if failed:
        print(f"NOT ALL INSTALLED OR CHECKED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def bench_small(args: argparse.Namespace) -> list[str]:
    """The decision and 4-switch figures; returns their machine-readable lines."""
    p50, p99, cpu50, cpu99 = bench_admission(args.decisions)
    print(
        f"admission decision (4 hops, 500 channels held): wall p50 {p50:.3f} ms, p99 {p99:.3f} ms;"
        f" cpu p50 {cpu50:.3f} ms, p99 {cpu99:.3f} ms over {args.decisions}"
    )
    workdir = Path(tempfile.mkdtemp(prefix="terrapin-bench-"))
    try:
        s50, s99, sequential_s, concurrent_s = bench_rest(args.setups, args.installs, args.clients, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"REST set-up over 4 switches incl. P4Runtime writes: p50 {s50:.2f} ms, "
        f"p99 {s99:.2f} ms over {args.setups}"
    )
    print(f"install {args.installs} reservations (4 hops each), one after another: {sequential_s:.2f} s")
    print(
        f"install {args.installs} reservations from {args.clients} concurrent clients: "
        f"{concurrent_s:.2f} s ({args.installs / concurrent_s:.0f}/s)",
        flush=True,
    )
    return [
        f"admission_decision_p99_ms: {cpu99:.3f}",
        f"setup_4hop_p50_ms: {s50:.2f}",
        f"install_1000_s: {sequential_s:.2f}",
    ]


if __name__ == "__main__":
    sys.exit(main())
