"""A small real network for the integration tests: namespaces, veths, switch processes
(terrapin-switch, or p4lang's simple_switch_grpc with `kind="bmv2"`) and the controller process.
Every name starts with `trptctl`; `Lab.close()` removes everything it made, also after a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from finsy.proto import p4r as p4runtime_pb2
from topo.p4switch import SWITCH_LINK_WATCH, bmv2_command

from terrapin.bmv2 import Bmv2Cli, queue_rate_pps
from terrapin_tools import p4read, processes

REPO = Path(__file__).resolve().parents[2]
SWITCH_BIN = REPO / "build" / "bin" / "terrapin-switch"
P4_JSON = REPO / "build" / "p4" / "terrapin.json"
P4_INFO = REPO / "build" / "p4" / "terrapin.p4info.txtpb"
CONTROLLER_BIN = REPO / "build" / "venv" / "bin" / "terrapin-controller"
HOST_BIN = REPO / "build" / "venv" / "bin" / "terrapin-host"
TOKEN = "integration-token"
VIEWER_TOKEN = "integration-viewer"  # the viewer role's (docs/operations.md, "Roles")
REST_PORT = 19720
GRPC_BASE = 19730
THRIFT_BASE = 19750  # BMv2's runtime (Thrift) server, for its CLI
MTU = 1500


def missing_prerequisites(kind: str = "terrapin") -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for path in (P4_JSON, P4_INFO, CONTROLLER_BIN, HOST_BIN):
        if not path.exists():
            return f"{path} is missing (make toolchain p4 controller)"
    if kind == "terrapin" and not SWITCH_BIN.exists():
        return f"{SWITCH_BIN} is missing (make toolchain)"
    if kind == "bmv2" and (reason := missing_bmv2()) is not None:
        return reason
    if shutil.which("ip") is None:
        return "iproute2 is missing"
    return None


def missing_bmv2() -> str | None:
    """Why p4lang's simple_switch_grpc cannot run here, or None (the labs' `kind="bmv2"`)."""
    try:
        bmv2_command("simple_switch_grpc")
    except FileNotFoundError as missing:
        return str(missing)
    return None


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True)


@dataclass
class Lab:
    """h1 — s1 — s2 — s3 — h2 (3 switches, so a path has interior hops)."""

    workdir: Path
    kind: str = "terrapin"
    switches: int = 3
    rate_bps: int = 10_000_000
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    config_path: Path | None = None
    # (switch number, port) → the line rate the controller is told, where it differs from the
    # rate the switch really paces the port at: a deliberately wrong model (an understated
    # delay bound), for the guarantee monitor's induced-violation tests.
    believed_rate_bps: dict[tuple[int, int], int] = field(default_factory=dict)
    monitor: dict[str, Any] = field(default_factory=dict)  # the config's `monitor:` section
    aggregates: list[dict[str, Any]] = field(default_factory=list)  # the config's `aggregates:`

    # ---- building ---------------------------------------------------------------------------

    def up(self) -> None:
        self._cleanup_leftovers()
        for host in ("h1", "h2"):
            ns = f"trptctl-{host}"
            sh("ip", "netns", "add", ns)
            self.namespaces.append(ns)
        # host links: switch side in the root namespace, host side in the host's namespace
        self._veth(
            "trptctl1s",
            "trptctl1h",
            ns="trptctl-h1",
            mac="0a:00:00:00:00:01",
            ip="10.0.1.2/24",
            gw="10.0.1.1",
        )
        last = self.switches
        self._veth(
            f"trptctl{last}s",
            f"trptctl{last}h",
            ns="trptctl-h2",
            mac="0a:00:00:00:00:02",
            ip="10.0.2.2/24",
            gw="10.0.2.1",
        )
        for i in range(1, last):
            self._veth(f"trptctl{i}{i + 1}", f"trptctl{i + 1}{i}")
        for i in range(1, last + 1):
            self.start_switch(i)
        self.config_path = self.workdir / "controller.yaml"
        self.config_path.write_text(yaml.safe_dump(self.config()))

    def _veth(
        self,
        a: str,
        b: str,
        ns: str | None = None,
        mac: str | None = None,
        ip: str | None = None,
        gw: str | None = None,
    ) -> None:
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        self.links.append(a)
        sh("ip", "link", "set", a, "up")
        for dev in (a, b):
            sh("ethtool", "-K", dev, "tx", "off", "rx", "off", check=False)
        if ns is None:
            sh("ip", "link", "set", b, "up")
            return
        sh("ip", "link", "set", b, "netns", ns)
        run = ("ip", "netns", "exec", ns)
        if mac:
            sh(*run, "ip", "link", "set", b, "address", mac)
        sh(*run, "ip", "link", "set", b, "up")
        sh(*run, "ip", "link", "set", "lo", "up")
        if ip:
            sh(*run, "ip", "addr", "add", ip, "dev", b)
        if gw:
            sh(*run, "ip", "route", "add", "default", "via", gw)
        sh(*run, "ethtool", "-K", b, "tx", "off", "rx", "off", check=False)

    def interfaces(self, i: int) -> list[tuple[int, str]]:
        left = "trptctl1s" if i == 1 else f"trptctl{i}{i - 1}"
        right = f"trptctl{i}s" if i == self.switches else f"trptctl{i}{i + 1}"
        return [(1, left), (2, right)]

    def start_switch(self, i: int) -> None:
        binary = str(SWITCH_BIN) if self.kind == "terrapin" else bmv2_command("simple_switch_grpc")
        args = [binary, "--no-p4", "--device-id", str(i)]
        for port, iface in self.interfaces(i):
            args += ["-i", f"{port}@{iface}"]
        if self.kind == "bmv2":
            args += ["--thrift-port", str(THRIFT_BASE + i)]
        args += [
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{GRPC_BASE + i}",
            "--cpu-port",
            "255",
            "--priority-queues",
            "8",
        ]
        if self.kind == "terrapin":
            for port, _iface in self.interfaces(i):
                args += ["--port-rate", f"{port}:{self.rate_bps}"]
        with open(self.workdir / f"s{i}.log", "ab") as log:
            self.procs[f"s{i}"] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                grpc.channel_ready_future(grpc.insecure_channel(f"127.0.0.1:{GRPC_BASE + i}")).result(
                    timeout=0.5
                )
                break
            except grpc.FutureTimeoutError:
                continue
        else:
            raise RuntimeError(f"switch s{i} did not start; see {self.workdir}/s{i}.log")
        if self.kind == "bmv2":
            # simple_switch has no rate flag: its CLI limits every queue of each port (packets/s).
            pps = queue_rate_pps(self.rate_bps, MTU)
            self.bmv2_cli(i).shape_ports({port: pps for port, _iface in self.interfaces(i)})

    def bmv2_cli(self, i: int) -> Bmv2Cli:
        return Bmv2Cli(bmv2_command("simple_switch_CLI"), THRIFT_BASE + i)

    def stop_switch(self, i: int) -> None:
        self._stop(f"s{i}")

    def config(self) -> dict[str, Any]:
        switches = []
        n = self.switches
        for i in range(1, n + 1):
            ports = []
            for port, _iface in self.interfaces(i):
                entry: dict[str, Any] = {
                    "number": port,
                    "mac": f"02:00:00:00:0{i}:0{port}",
                    "rate_bps": self.believed_rate_bps.get((i, port), self.rate_bps),
                }
                if self.kind == "bmv2":
                    believed = self.believed_rate_bps.get((i, port), self.rate_bps)
                    entry["rate_pps"] = queue_rate_pps(believed, MTU)
                if i == 1 and port == 1:
                    entry.update(peer="h1", gateway_ip="10.0.1.1")
                elif i == n and port == 2:
                    entry.update(peer="h2", gateway_ip="10.0.2.1")
                else:
                    entry["peer"] = f"s{i - 1}:2" if port == 1 else f"s{i + 1}:1"
                ports.append(entry)
            address = f"127.0.0.1:{GRPC_BASE + i}"
            switch: dict[str, Any] = {"name": f"s{i}", "address": address, "device_id": i}
            if self.kind == "bmv2":
                switch.update(
                    kind="bmv2", thrift_port=THRIFT_BASE + i, bmv2_cli=bmv2_command("simple_switch_CLI")
                )
            switches.append(switch | {"ports": ports})
        return {
            "p4": {"p4info": str(P4_INFO), "json": str(P4_JSON)},
            "rest": {"host": "127.0.0.1", "port": REST_PORT, "token": TOKEN, "viewer_token": VIEWER_TOKEN},
            "store": str(self.workdir / "reservations.sqlite"),
            "protocol": {"hold_seconds": 3.0},
            "admission": {"largest_packet": MTU, "queue_capacity": 64 * MTU},
            "monitor": self.monitor,
            "aggregates": self.aggregates,
            "links": self.link_watch(),
            "switches": switches,
            "hosts": [
                {"name": "h1", "ip": "10.0.1.2", "mac": "0a:00:00:00:00:01", "switch": "s1", "port": 1},
                {"name": "h2", "ip": "10.0.2.2", "mac": "0a:00:00:00:00:02", "switch": f"s{n}", "port": 2},
            ],
        }

    def link_watch(self) -> dict[str, float]:
        """The switch kind's link watch (topo/p4switch.py), probing no faster than every 50 ms:
        a line has no other path to move a channel to, and 400 probes a second through the
        controller were load enough on two cores to spread a test's burst (the monitor's
        understated-bound test saw no packet queue)."""
        links = dict(SWITCH_LINK_WATCH[self.kind])
        links["probe_interval_ms"] = max(links["probe_interval_ms"], 50)
        links["down_after_ms"] = max(links["down_after_ms"], 500)
        return links

    # ---- the controller ---------------------------------------------------------------------

    def start_controller(self) -> None:
        assert self.config_path is not None
        with open(self.workdir / "controller.log", "ab") as log:
            self.procs["controller"] = subprocess.Popen(
                [str(CONTROLLER_BIN), "--config", str(self.config_path), "--log-level", "INFO"],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        self.wait_healthy(30)

    def wait_healthy(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            proc = self.procs.get("controller")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"controller exited; see {self.workdir}/controller.log")
            try:
                last = self.rest("GET", "/health")[1]
                # Ready: every switch, and every trunk back up (a restarted switch's are down
                # until its probes have come for links.up_after_ms).
                if all(s["ready"] for s in last["switches"].values()) and all(
                    t["up"] for t in last.get("trunks", [])
                ):
                    return dict(last)
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"controller not ready ({last}); see {self.workdir}/controller.log")

    def stop_controller(self) -> None:
        self._stop("controller")

    def rest(
        self, method: str, path: str, body: Any = None, token: bool = True, raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(f"http://127.0.0.1:{REST_PORT}{path}", data=data, method=method)
        request.add_header("content-type", "application/json")
        if token:
            request.add_header("authorization", f"Bearer {TOKEN}")
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                text = reply.read()
                return reply.status, json.loads(text) if text else None
        except urllib.error.HTTPError as err:
            text = err.read()
            return err.code, json.loads(text) if text else None

    # ---- hosts ------------------------------------------------------------------------------

    def host(self, host: str, *args: str, timeout: float = 30) -> tuple[int, dict[str, Any]]:
        proc = subprocess.run(
            ["ip", "netns", "exec", f"trptctl-{host}", str(HOST_BIN), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        return proc.returncode, json.loads(lines[-1]) if lines else {"stderr": proc.stderr}

    def host_background(self, host: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.workdir / f"{host}-agent.log", "ab") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", f"trptctl-{host}", str(HOST_BIN), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs[f"{host}-agent-{proc.pid}"] = proc
        return proc

    def raw_icmp(self, host: str, dst: str, icmp: bytes) -> None:
        """Send arbitrary ICMP bytes from a host (for malformed-message tests)."""
        code = (
            "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_RAW,1);"
            f"s.sendto(bytes.fromhex('{icmp.hex()}'),('{dst}',0))"
        )
        self._python_in(host, code)

    def _python_in(self, host: str, code: str) -> None:
        sh(
            "ip",
            "netns",
            "exec",
            f"trptctl-{host}",
            str(REPO / "build" / "venv" / "bin" / "python"),
            "-c",
            code,
        )

    def send_udp(self, host: str, dst: str, sport: int, dport: int, count: int, size: int = 200) -> None:
        code = (
            "import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
            f"s.bind(('0.0.0.0',{sport}));"
            f"[s.sendto(b'x'*{size},('{dst}',{dport})) for _ in range({count})]"
        )
        self._python_in(host, code)

    # ---- P4Runtime, read independently of the controller -------------------------------------

    def address(self, i: int) -> str:
        return f"127.0.0.1:{GRPC_BASE + i}"

    def read_channels(self, i: int) -> list[p4runtime_pb2.TableEntry]:
        return p4read.read_table(self.address(i), i, "TerrapinIngress.channels", direct_resources=True)

    def read_aggregates(self, i: int) -> list[tuple[dict[str, tuple[int, int]], int, dict[str, int]]]:
        """TerrapinIngress.aggregates of switch i: (field → (value, mask), P4Runtime priority,
        action parameters by name) per entry."""
        action = next(
            a for a in p4read.p4info().actions if a.preamble.name == "TerrapinIngress.set_aggregate"
        )
        fields = p4read.field_names("TerrapinIngress.aggregates")
        params = {p.id: p.name for p in action.params}
        found = []
        for entry in p4read.read_table(self.address(i), i, "TerrapinIngress.aggregates"):
            match = {
                fields[m.field_id]: (
                    int.from_bytes(m.ternary.value, "big"),
                    int.from_bytes(m.ternary.mask, "big"),
                )
                for m in entry.match
            }
            args = {params[p.param_id]: int.from_bytes(p.value, "big") for p in entry.action.action.params}
            found.append((match, entry.priority, args))
        return found

    def read_meter(self, i: int, name: str, index: int) -> tuple[int, int, int, int] | None:
        """An indexed meter's config on switch i as (cir, cburst, pir, pburst); None if unset."""
        meter_id = next(m.preamble.id for m in p4read.p4info().meters if m.preamble.name == name)
        entity = p4runtime_pb2.Entity(
            meter_entry=p4runtime_pb2.MeterEntry(meter_id=meter_id, index=p4runtime_pb2.Index(index=index))
        )
        for e in p4read.read(self.address(i), i, entity):
            if e.meter_entry.HasField("config"):
                c = e.meter_entry.config
                return (c.cir, c.cburst, c.pir, c.pburst)
        return None

    def action_name(self, entry: p4runtime_pb2.TableEntry) -> str:
        action_id = entry.action.action.action_id
        return next(a.preamble.name for a in p4read.p4info().actions if a.preamble.id == action_id)

    def read_queue_bounds(self, i: int) -> dict[tuple[int, int], int]:
        """TerrapinEgress.queue_bounds of switch i: (port, priority) → the bound in µs."""
        fields = p4read.field_names("TerrapinEgress.queue_bounds")
        bounds = {}
        for entry in p4read.read_table(self.address(i), i, "TerrapinEgress.queue_bounds"):
            key = p4read.exact_key(entry, fields)
            params = {p.param_id: int.from_bytes(p.value, "big") for p in entry.action.action.params}
            bounds[(key["port"], key["priority"])] = params[3]  # limit_us (quarter, half, limit)
        return bounds

    # ---- teardown -----------------------------------------------------------------------------

    def _stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            processes.stop(proc)

    def close(self) -> None:
        for name in list(self.procs):
            self._stop(name)
        for link in self.links:
            sh("ip", "link", "del", link, check=False)
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
        self.links.clear()
        self.namespaces.clear()

    def _cleanup_leftovers(self) -> None:
        for ns in sh("ip", "netns", "list", check=False).stdout.split():
            if ns.startswith("trptctl-"):
                sh("ip", "netns", "del", ns, check=False)
        for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith("trptctl"):
                sh("ip", "link", "del", name, check=False)
