"""A Mininet switch node that runs a P4Runtime software switch on its interfaces.

Either Terrapin's bundled `terrapin-switch` (SWITCH=terrapin, the default) or p4lang's
`simple_switch_grpc` (SWITCH=bmv2: from PATH, else build/oracle/bin; scripts/bmv2-bin.sh decides).
Both take the same BMv2-style command line; only the per-port line rate differs: terrapin-switch
paces each port itself in bytes/s (`--port-rate`), while BMv2 can only cap each of a port's
priority queues in packets/s through its Thrift CLI, so for BMv2 the byte rate is converted with
the plan's MTU as the packet size (`port_shaping`), and the controller is told so (rate_pps).

The switch starts without a pipeline (`--no-p4`); the controller pushes the compiled program over
P4Runtime, as it would to a hardware target.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mininet.node import Switch

from terrapin.bmv2 import Bmv2Cli, Bmv2CliError, queue_rate_pps
from topo.plan import CPU_PORT, PRIORITY_QUEUES

REPO = Path(__file__).resolve().parent.parent
TERRAPIN_SWITCH = REPO / "build" / "bin" / "terrapin-switch"
# SCHED_FIFO priority of terrapin-switch's forwarding threads: above the hosts' real-time senders.
RT_PRIORITY = 20
METRICS_PORT_BASE = 9700


def metrics_port(device_id: int) -> int:
    """terrapin-switch's Prometheus endpoint under make run: 127.0.0.1:(9700 + device id)."""
    return METRICS_PORT_BASE + device_id


SWITCH_KINDS = ("terrapin", "bmv2")
# How much each kind of switch's delay outside its egress queues varies, µs: what the controller
# is told (SwitchConfig.jitter_us, docs/controller.md "Jitter"), so that the policers of channels
# entering there tolerate it and admission counts it. `make jitter` measures it (docs/bmv2.md, 6:
# on the 2-core VMs, outside the machine's own stalls, terrapin-switch's whole forwarding delay
# varies by at most ~1.4 ms, BMv2's by up to ~5.2 ms under the experiments' floods, its queues'
# turn included); these keep a margin above that. TERRAPIN_JITTER_US=N gives every switch N
# instead (what `make jitter` printed on another machine).
SWITCH_JITTER_US = {"terrapin": 2_000, "bmv2": 6_000}
JITTER_ENV = "TERRAPIN_JITTER_US"


# How the controller's link watch probes each kind of switch (its `links:` section;
# docs/controller.md "Trunks"). terrapin-switch reports a port's lost carrier over gNMI within
# milliseconds (the watch reads it every 10 ms), so a cut is found by that; its probes find the
# silent failures, a trunk silent for 250 ms (at 35 ms, a headless browser's load on two cores
# held some probes 40-51 ms, at 100 ms E11's flood and a machine stall one for 103 ms, and took
# trunks down that were not cut; probing every 10 ms cost the controller enough CPU to slow
# E11's restorations to 177 ms). BMv2 serves no gNMI and forwards a few thousand
# packets/s through one ingress queue, where a flood can hold a probe for hundreds of
# milliseconds, and every probe is a packet it does not forward: one per 100 ms, a trunk cut
# after a second of silence.
SWITCH_LINK_WATCH: dict[str, dict[str, float]] = {
    "terrapin": {"probe_interval_ms": 25, "down_after_ms": 250, "up_after_ms": 500},
    "bmv2": {"probe_interval_ms": 100, "down_after_ms": 1_000, "up_after_ms": 2_000},
}


def switch_jitter_us(kind: str) -> int:
    given = os.environ.get(JITTER_ENV, "").strip()
    if not given:
        return SWITCH_JITTER_US[kind]
    if not given.isdigit():
        raise ValueError(f"{JITTER_ENV}={given!r}: give the jitter in whole microseconds")
    return int(given)


def bmv2_command(name: str) -> str:
    """Where p4lang's BMv2 command `name` is: scripts/bmv2-bin.sh decides, for every caller."""
    found = subprocess.run(
        ["bash", str(REPO / "scripts" / "bmv2-bin.sh"), name], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        raise FileNotFoundError(found.stderr.strip())
    return found.stdout.strip()


def switch_binary(kind: str) -> str:
    """The executable for SWITCH=kind, or a clear error if it is not installed."""
    if kind == "terrapin":
        if not TERRAPIN_SWITCH.exists():
            raise FileNotFoundError(f"{TERRAPIN_SWITCH} is missing: run `make toolchain`")
        return str(TERRAPIN_SWITCH)
    if kind == "bmv2":
        return bmv2_command("simple_switch_grpc")
    raise ValueError(f"unknown switch kind {kind!r} (terrapin or bmv2)")


def port_shaping(kind: str, rate_bps: int, mtu: int) -> int | None:
    """The packets/s at which a switch of `kind` limits a port of `rate_bps`, or None when it
    paces the port in bytes/s itself. BMv2 limits each priority queue of the port to this many
    packets of any size: MTU-sized packets then fill the line, smaller ones leave it idle."""
    return queue_rate_pps(rate_bps, mtu) if kind == "bmv2" else None


def switch_command(
    kind: str,
    device_id: int,
    interfaces: dict[int, str],
    *,
    grpc_port: int,
    thrift_port: int,
    queue_capacity: int = 64,
    port_rates: dict[int, int] | None = None,
    metrics_port: int | None = None,
    tls_flags: list[str] | None = None,
    program: Path | None = None,
) -> list[str]:
    """The command line of a switch of `kind` on `interfaces` (port → interface name): the same
    BMv2-style flags for both, started without a pipeline (`--no-p4`, the controller pushes it)
    unless `program` names a BMv2 JSON file to load."""
    args = [switch_binary(kind), "--device-id", str(device_id)]
    for port, name in sorted(interfaces.items()):
        args += ["-i", f"{port}@{name}"]
    args += ["--thrift-port", str(thrift_port), str(program) if program else "--no-p4", "--"]
    args += ["--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
    args += ["--cpu-port", str(CPU_PORT), "--priority-queues", str(PRIORITY_QUEUES), *(tls_flags or [])]
    if kind == "terrapin":
        args += ["--queue-capacity", str(queue_capacity)]
        if metrics_port is not None:
            args += ["--metrics-addr", f"127.0.0.1:{metrics_port}"]
        for port, rate in sorted((port_rates or {}).items()):
            args += ["--port-rate", f"{port}:{rate}"]
        # Forwarding threads above the hosts' processes (the demo's video sender runs at
        # SCHED_FIFO 10) within the switch's real-time CPU budget; see docs/switch.md.
        args += ["--rt-priority", str(RT_PRIORITY)]
    # Extra switch flags for experiments, e.g. TERRAPIN_SWITCH_ARGS="--tx sendmmsg".
    args += os.environ.get("TERRAPIN_SWITCH_ARGS", "").split()
    return args


# The scheduling weight of a BMv2 switch's session (its autogroup): p4lang's simple_switch runs
# its threads at the normal policy (at a real-time one they spin and the kernel's throttling stops
# the CPU's every real-time thread: docs/bmv2.md, 6), and Mininet starts every host's process in
# a session of its own, where a process's nice value counts only within it. So the session's
# own nice decides how soon the switch runs beside the hosts' floods and receivers.
BMV2_SESSION_NICE = -10


def favour_session(pid: int, nice: int = BMV2_SESSION_NICE) -> bool:
    """Gives the session (autogroup) of `pid` the nice value `nice`, as a router's forwarding
    plane is ahead of the processes beside it; False where the kernel has no autogroups or the
    right is missing (the switch then runs as started)."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:
        return False
    return True


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Stops a switch started in a session of its own (start_new_session): SIGTERM to its group,
    SIGKILL after `timeout` s; reaped either way. Nothing if it has exited already."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class P4RuntimeSwitch(Switch):  # type: ignore[misc]  # Mininet has no type hints
    """Mininet node for a P4Runtime switch process in the root namespace."""

    def __init__(
        self,
        name: str,
        *,
        device_id: int,
        grpc_port: int,
        thrift_port: int,
        port_rates: dict[int, int] | None = None,
        queue_capacity: int = 64,
        kind: str = "terrapin",
        mtu: int = 1500,
        log_dir: str = "build/run",
        tls_flags: list[str] | None = None,
        metrics_context: ssl.SSLContext | None = None,
        **params: object,
    ) -> None:
        super().__init__(name, dpid=f"{device_id:016x}", **params)
        # make run TLS=1 (topo/run_tls.py): the switch's TLS flags, and the client context its
        # metrics (then HTTPS, asking for a client certificate) are read with.
        self.tls_flags = tls_flags or []
        self.metrics_context = metrics_context
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.port_rates = port_rates or {}
        self.queue_capacity = queue_capacity
        self.kind = kind
        self.mtu = mtu
        self.log_path = Path(log_dir) / f"{name}.log"
        self.thrift_port = thrift_port
        # terrapin-switch's Prometheus counters (per priority queue depth and drops).
        self.metrics_port = metrics_port(device_id)
        self.process: subprocess.Popen[bytes] | None = None

    def command_line(self) -> list[str]:
        interfaces = {
            self.ports[intf]: intf.name
            for intf in self.intfList()
            if intf.name != "lo" and self.ports[intf] != 0
        }
        return switch_command(
            self.kind,
            self.device_id,
            interfaces,
            grpc_port=self.grpc_port,
            thrift_port=self.thrift_port,
            queue_capacity=self.queue_capacity,
            port_rates=self.port_rates,
            metrics_port=self.metrics_port,
            tls_flags=self.tls_flags,
        )

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
        if self.kind == "bmv2":
            favour_session(self.process.pid)
        try:
            self._wait_for_grpc()
            if self.kind == "bmv2" and self.port_rates:
                self._set_bmv2_rates()
        except Exception:
            self._kill()  # never leave a half-started switch behind (or unreaped)
            raise
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
        """simple_switch has no rate flag: its CLI limits every priority queue of each port to the
        port's packet rate and sets the queues' depth to the plan's. A switch left unshaped would
        make every figure of the run meaningless, so a CLI failure stops the start."""
        rates = {port: port_shaping(self.kind, rate, self.mtu) for port, rate in self.port_rates.items()}
        cli = Bmv2Cli(bmv2_command("simple_switch_CLI"), self.thrift_port)
        try:
            cli.shape_ports({p: pps for p, pps in rates.items() if pps}, depth_packets=self.queue_capacity)
        except Bmv2CliError as error:
            raise RuntimeError(f"{self.name}: could not shape its ports: {error}") from None

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """The switch's Prometheus counters, keyed by (name, labels); empty for BMv2."""
        if self.kind != "terrapin":
            return {}
        scheme = "https" if self.tls_flags else "http"
        url = f"{scheme}://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5, context=self.metrics_context) as reply:
            return parse_prometheus(reply.read().decode())

    def _kill(self) -> None:
        if self.process is not None:
            stop_process_group(self.process)

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


def waits_summary(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], over_ms: float = 2.0) -> str:
    """Where a terrapin-switch's frames waited long, from its metrics: per port, the longest
    wait in its receive ring and the latest pacer wake-up, with how many receive batches and
    pacer sleeps took longer than `over_ms`; per priority queue, the longest queueing (ms, port);
    and the windows in which the forwarding threads ran out of real-time budget. A late packet
    with no stall of the machine is then placed in a switch (docs/switch.md "Metrics")."""
    parts = []
    for kind, name in (
        ("ring", "terrapin_port_rx_delay_seconds"),
        ("pacer", "terrapin_port_pacer_late_seconds"),
    ):
        for (metric, labels), value in sorted(samples.items(), key=lambda kv: sorted(kv[0][1])):
            label = dict(labels)
            if metric != f"{name}_max" or value * 1000 <= over_ms:
                continue
            total = samples.get((f"{name}_count", labels), 0.0)
            # the histogram is cumulative and has a bucket at over_ms (docs/switch.md "Metrics")
            within = samples.get((f"{name}_bucket", labels | {("le", f"{over_ms / 1000:g}")}), 0.0)
            parts.append(
                f"{label.get('iface')} {kind} {value * 1000:.2f} ms ({total - within:.0f} over {over_ms:g})"
            )
    queues: dict[str, tuple[float, str]] = {}
    for (metric, labels), value in samples.items():
        label = dict(labels)
        if (
            metric == "terrapin_queue_delay_seconds_max"
            and value * 1000 > queues.get(label["queue"], (0.0, ""))[0]
        ):
            queues[label["queue"]] = (value * 1000, label["port"])
    if queues:
        parts.append(
            "queueing "
            + " ".join(
                f"q{q} {ms:.2f} (port {port})"
                for q, (ms, port) in sorted(queues.items(), key=lambda kv: -int(kv[0]))
            )
        )
    exhausted = int(sum(v for (m, _), v in samples.items() if m == "terrapin_rt_budget_exhausted_total"))
    parts.append(f"real-time budget exhausted {exhausted}x")
    return "; ".join(parts)


def switch_waits(switches: Iterable[Any]) -> dict[str, str]:
    """waits_summary of each terrapin-switch among `switches` (Mininet nodes), read from its
    metrics now: since it last started. One that cannot be read (stopped, dead) says why."""
    found = {}
    for switch in switches:
        if getattr(switch, "kind", None) != "terrapin":
            continue
        try:
            found[switch.name] = waits_summary(switch.metrics())
        except OSError as error:
            found[switch.name] = f"not read: {error}"
    return found
