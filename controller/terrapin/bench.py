"""`make bench-controller` (python -m terrapin.bench): admission and set-up figures.

1. Admission decision time: one multi-hop decision (every test on, 4 hops) on a ledger already
   holding 500 channels, measured in-process.
2. REST set-up over a 4-switch path: POST /reservations to the real controller process, which
   admits, stores and writes a meter+entry to 4 terrapin-switch processes over P4Runtime, and
   answers 201 only when every hop is written.
3. Time to install 1,000 reservations the same way, one after another.

It ends with three machine-readable lines (admission_decision_p99_ms, setup_4hop_p50_ms,
install_1000_s). The switches run without interfaces: only the control path is measured.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from terrapin.admission import AdmissionLedger, ChannelEnvelope, ChannelKey
from terrapin.config import parse_config
from terrapin.paths import Topology

REPO = Path(__file__).resolve().parents[2]
SWITCH = REPO / "build" / "bin" / "terrapin-switch"
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
    def __init__(self) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", REST_PORT, timeout=30)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
        try:
            self.conn.request(method, path, None if body is None else json.dumps(body), headers)
            reply = self.conn.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # uvicorn closes keep-alive connections idle for 5 s: reconnect once
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", REST_PORT, timeout=30)
            self.conn.request(method, path, None if body is None else json.dumps(body), headers)
            reply = self.conn.getresponse()
        data = reply.read()
        return reply.status, json.loads(data) if data else None


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


def wait_healthy(proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("controller exited during start-up")
        try:
            status, body = Rest().call("GET", "/health")
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
            with open(logs / f"s{i}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            str(SWITCH),
                            "--no-p4",
                            "--device-id",
                            str(i),
                            "--",
                            "--grpc-server-addr",
                            f"127.0.0.1:{GRPC_BASE + i}",
                            "--cpu-port",
                            "255",
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
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
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m terrapin.bench", description=__doc__)
    parser.add_argument("--decisions", type=int, default=5000)
    parser.add_argument("--setups", type=int, default=200)
    parser.add_argument("--installs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients installing")
    args = parser.parse_args(argv)
    for needed in (SWITCH, P4_JSON, P4_INFO):
        if not needed.exists():
            print(f"{needed} is missing: run make toolchain p4", file=sys.stderr)
            return 2
    p50, p99, cpu50, cpu99 = bench_admission(args.decisions)
    print(
        f"admission decision (4 hops, 500 channels held): wall p50 {p50:.3f} ms, p99 {p99:.3f} ms;"
        f" cpu p50 {cpu50:.3f} ms, p99 {cpu99:.3f} ms over {args.decisions}"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cpus")
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
        f"{concurrent_s:.2f} s ({args.installs / concurrent_s:.0f}/s)"
    )
    print(f"admission_decision_p99_ms: {cpu99:.3f}")
    print(f"setup_4hop_p50_ms: {s50:.2f}")
    print(f"install_1000_s: {sequential_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
