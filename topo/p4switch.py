"""A Mininet switch node that runs a P4Runtime software switch on its interfaces.

Either Terrapin's bundled `terrapin-switch` (SWITCH=terrapin, the default) or p4lang's
`simple_switch_grpc` (SWITCH=bmv2, when installed). Both take the same BMv2-style command line;
only the per-port line rate differs: terrapin-switch paces each port itself (`--port-rate`), while
BMv2 can only cap a port's queues in packets per second through its Thrift CLI, so for BMv2 the
byte rate is converted with the plan's MTU as the packet size.

The switch starts without a pipeline (`--no-p4`); the controller pushes the compiled program over
P4Runtime, as it would to a hardware target.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from mininet.node import Switch

from topo.plan import CPU_PORT, PRIORITY_QUEUES

REPO = Path(__file__).resolve().parent.parent
TERRAPIN_SWITCH = REPO / "build" / "bin" / "terrapin-switch"
# SCHED_FIFO priority of terrapin-switch's forwarding threads: above the hosts' real-time senders.
RT_PRIORITY = 20
METRICS_PORT_BASE = 9700


def metrics_port(device_id: int) -> int:
    """terrapin-switch's Prometheus endpoint under make run: 127.0.0.1:(9700 + device id)."""
    return METRICS_PORT_BASE + device_id


def switch_binary(kind: str) -> str:
    """The executable for SWITCH=kind, or a clear error if it is not installed."""
    if kind == "terrapin":
        if not TERRAPIN_SWITCH.exists():
            raise FileNotFoundError(f"{TERRAPIN_SWITCH} is missing: run `make toolchain`")
        return str(TERRAPIN_SWITCH)
    if kind == "bmv2":
        found = shutil.which("simple_switch_grpc")
        if not found:
            raise FileNotFoundError("SWITCH=bmv2 needs p4lang's simple_switch_grpc on PATH")
        return found
    raise ValueError(f"unknown switch kind {kind!r} (terrapin or bmv2)")


class P4RuntimeSwitch(Switch):  # type: ignore[misc]  # Mininet has no type hints
    """Mininet node for a P4Runtime switch process in the root namespace."""

    def __init__(
        self,
        name: str,
        *,
        device_id: int,
        grpc_port: int,
        port_rates: dict[int, int] | None = None,
        queue_capacity: int = 64,
        kind: str = "terrapin",
        mtu: int = 1500,
        log_dir: str = "build/run",
        **params: object,
    ) -> None:
        super().__init__(name, dpid=f"{device_id:016x}", **params)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.port_rates = port_rates or {}
        self.queue_capacity = queue_capacity
        self.kind = kind
        self.mtu = mtu
        self.log_path = Path(log_dir) / f"{name}.log"
        self.thrift_port = 9090 + device_id
        # terrapin-switch's Prometheus counters (per priority queue depth and drops).
        self.metrics_port = metrics_port(device_id)
        self.process: subprocess.Popen[bytes] | None = None

    def command_line(self) -> list[str]:
        args = [switch_binary(self.kind), "--device-id", str(self.device_id)]
        for intf in self.intfList():
            port = self.ports[intf]
            if intf.name != "lo" and port != 0:
                args += ["-i", f"{port}@{intf.name}"]
        args += ["--thrift-port", str(self.thrift_port), "--no-p4", "--"]
        args += ["--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
        args += ["--cpu-port", str(CPU_PORT), "--priority-queues", str(PRIORITY_QUEUES)]
        if self.kind == "terrapin":
            args += ["--queue-capacity", str(self.queue_capacity)]
            args += ["--metrics-addr", f"127.0.0.1:{self.metrics_port}"]
            for port, rate in sorted(self.port_rates.items()):
                args += ["--port-rate", f"{port}:{rate}"]
            # Forwarding threads above the hosts' processes (the demo's video sender runs at
            # SCHED_FIFO 10) within the switch's real-time CPU budget; see docs/switch.md.
            args += ["--rt-priority", str(RT_PRIORITY)]
        # Extra switch flags for experiments, e.g. TERRAPIN_SWITCH_ARGS="--tx sendmmsg".
        args += os.environ.get("TERRAPIN_SWITCH_ARGS", "").split()
        return args

    def start(self, controllers: list[object]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for intf in self.intfList():
            if intf.name != "lo":
                # Checksum offload would leave partial checksums in frames the switch reads.
                self.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")
                self.cmd(f"ip link set {intf.name} mtu {self.mtu}")
        self.log_path.write_bytes(b"")
        self.respawn()

    def respawn(self) -> subprocess.Popen[bytes]:
        """Start the switch process on the node's interfaces: at start, and again when make
        run's supervisor saw it die. Its log says the command line, to start it by hand."""
        command = self.command_line()
        with open(self.log_path, "ab") as log:
            log.write(f"--- starting: {shlex.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_for_grpc()
        except Exception:
            self._kill()  # never leave a half-started switch behind (or unreaped)
            raise
        if self.kind == "bmv2" and self.port_rates:
            self._set_bmv2_rates()
        return self.process

    def _wait_for_grpc(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name}: switch exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{self.name}: no P4Runtime server on port {self.grpc_port}")

    def _set_bmv2_rates(self) -> None:
        cli = shutil.which("simple_switch_CLI")
        if not cli:
            return
        commands = "".join(
            f"set_queue_rate {max(1, rate // (8 * self.mtu))} {port}\n"
            for port, rate in self.port_rates.items()
        )
        subprocess.run(
            [cli, "--thrift-port", str(self.thrift_port)],
            input=commands.encode(),
            capture_output=True,
            check=False,
        )

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """The switch's Prometheus counters, keyed by (name, labels); empty for BMv2."""
        if self.kind != "terrapin":
            return {}
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as reply:
            return parse_prometheus(reply.read().decode())

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def stop(self, deleteIntfs: bool = True) -> None:
        self._kill()
        self.process = None
        super().stop(deleteIntfs)


def parse_prometheus(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Samples of the Prometheus text format: `name{a="x",b="y"} value` lines."""
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        pairs = frozenset(
            (k, v.strip('"')) for k, _, v in (p.partition("=") for p in labels.rstrip("}").split(",") if p)
        )
        samples[(name, pairs)] = float(value)
    return samples
