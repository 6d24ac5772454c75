"""Turns a `NetworkPlan` into a running Mininet network with P4Runtime switches and the controller.

`running(plan, ...)` is a context manager: on exit (normal, exception or Ctrl-C) it stops the
controller, the switches and Mininet, so no process, namespace or veth outlives it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet.link import Link
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host as MininetHost

from topo.controller_config import write_config
from topo.p4switch import REPO, P4RuntimeSwitch
from topo.plan import NetworkPlan
from topo.supervise import Supervisor, write_pid

RUN_DIR = REPO / "build" / "run"
# make stop (scripts/stop.sh) stops what the files here list: the runner, each switch, the controller.
PID_DIR = RUN_DIR / "pids"
CONTROLLER = REPO / "build" / "venv" / "bin" / "terrapin-controller"


@dataclass
class RunningNetwork:
    plan: NetworkPlan
    net: Mininet
    controller: subprocess.Popen[bytes] | None
    rest_url: str
    token: str
    config_path: Path
    supervisor: Supervisor | None = None
    switch_kind: str = "terrapin"

    def host(self, name: str) -> MininetHost:
        return self.net.get(name)


class RestError(Exception):
    """A REST call answered with an error status; `body` is its decoded JSON."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        super().__init__(f"{method} {path}: {status} {json.dumps(body)}")
        self.status, self.body = status, body


def call(
    run: RunningNetwork, method: str, path: str, body: object = None, token: bool = True
) -> tuple[int, Any]:
    """A call to the running controller's REST API (with its token unless `token` is False):
    the status and the decoded JSON reply, errors included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{run.rest_url}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {run.token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read()
            return reply.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text) if text else None
        except ValueError:
            return error.code, text.decode(errors="replace")


def rest(run: RunningNetwork, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A call to the running controller's REST API with its token; the decoded JSON reply, or
    RestError for an error status."""
    status, reply = call(run, method, path, body)
    if status >= 400:
        raise RestError(method, path, status, reply)
    return reply


def wait_ready(run: RunningNetwork, timeout: float = 60) -> None:
    """Until the controller reports every switch connected and reconciled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _ = call(run, "GET", "/health")
        if status == 200:
            return
        if status != 503:  # 503 while a switch is not ready yet
            raise RuntimeError(f"/health answered {status}")
        time.sleep(0.5)
    raise TimeoutError("the controller never reported its switches ready")


def _quiet_offloads(intf_name: str, run: object) -> None:
    # Segmentation offloads would hand the switch frames larger than the MTU, and checksum
    # offload leaves partial checksums in the frames it reads.
    run(f"ethtool -K {intf_name} tx off rx off tso off gso off gro off >/dev/null 2>&1")  # type: ignore[operator]


def build(plan: NetworkPlan, switch_kind: str, intf_prefix: str | None = None) -> Mininet:
    """Creates (but does not start) the Mininet network for a plan.

    With `intf_prefix`, the switches' interfaces (the veth ends in the root namespace) are named
    <prefix><device id>p<port> instead of Mininet's <switch>-eth<port>: the tests name
    everything they create with a prefix of their own, so `make test` can tell its leftovers
    from what else runs on the machine."""

    def switch_intf(switch: str, port: int) -> dict[str, str]:
        if intf_prefix is None:
            return {}
        return {"intfName": f"{intf_prefix}{plan.switches[switch].device_id}p{port}"}

    net = Mininet(controller=None, autoSetMacs=False, autoStaticArp=False, build=False)
    for sw in plan.switches.values():
        net.addSwitch(
            sw.name,
            cls=P4RuntimeSwitch,
            device_id=sw.device_id,
            grpc_port=sw.grpc_port,
            thrift_port=sw.thrift_port,
            port_rates={n: p.rate_bps for n, p in sw.ports.items()},
            queue_capacity=plan.queue_capacity,
            kind=switch_kind,
            mtu=plan.mtu,
            log_dir=str(RUN_DIR),
        )
    for host in plan.hosts.values():
        net.addHost(host.name, ip=host.ip, mac=host.mac)
        # Links are not shaped in the kernel: the switch paces each of its ports at the link's
        # line rate, so the queues build inside the switch, where priorities apply. A host can
        # therefore hand the router a whole burst at once, which is the case the admission test
        # (Σσ within the buffer) and the delay bound ((Σσ + L_max) / C) are written for.
        net.addLink(
            host.name,
            host.switch,
            port2=host.port,
            cls=Link,
            **{k + "2": v for k, v in switch_intf(host.switch, host.port).items()},
        )
    for a, port_a, b, port_b, _rate in plan.trunks():
        names = {k + "1": v for k, v in switch_intf(a, port_a).items()}
        names |= {k + "2": v for k, v in switch_intf(b, port_b).items()}
        net.addLink(a, b, port1=port_a, port2=port_b, cls=Link, **names)
    return net


def configure_hosts(plan: NetworkPlan, net: Mininet) -> None:
    for host in plan.hosts.values():
        node = net.get(host.name)
        intf = node.defaultIntf()
        _quiet_offloads(intf.name, node.cmd)
        node.cmd(f"ip link set {intf.name} mtu {plan.mtu}")
        node.cmd(f"ip route replace default via {host.gateway} dev {intf.name}")
        # Every neighbour is reached through the router port, so resolve the gateway and the
        # hosts of the same subnet to that port's MAC up front; the switch also answers ARP.
        router_mac = plan.switches[host.switch].ports[host.port].mac
        node.cmd(f"ip neigh replace {host.gateway} lladdr {router_mac} dev {intf.name}")
        prefix = host.ip.split("/")[1]
        for other in plan.hosts.values():
            if other.name != host.name and _same_subnet(host.ip, other.address, prefix):
                node.cmd(f"ip neigh replace {other.address} lladdr {router_mac} dev {intf.name}")
    for sw in plan.switches.values():
        node = net.get(sw.name)
        for intf in node.intfList():
            if intf.name != "lo":
                _quiet_offloads(intf.name, node.cmd)


def _same_subnet(cidr: str, address: str, prefix: str) -> bool:
    import ipaddress

    return ipaddress.ip_address(address) in ipaddress.ip_network(cidr, strict=False)


def controller_command(config_path: Path, pid_file: Path | None = None) -> list[str]:
    command = [str(CONTROLLER), "--config", str(config_path)]
    if pid_file is not None:
        command += ["--pid-file", str(pid_file)]
    return command


def launch_controller(
    config_path: Path, log_path: Path, pid_file: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the controller process (at start, and again when make run's supervisor saw it die);
    its log says the command line, to start it by hand."""
    if not CONTROLLER.exists():
        raise FileNotFoundError(f"{CONTROLLER} is missing: run `make controller`")
    command = controller_command(config_path, pid_file)
    with open(log_path, "ab") as log:
        log.write(f"--- starting: {shlex.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def start_controller(
    config_path: Path, rest_url: str, log_path: Path, pid_file: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the controller and wait until /health says every switch is ready (200). A controller
    whose REST API answers but stays degraded (503) after 30 s is kept: the switch it is missing
    is named in its log and in /health, and make run's supervisor may yet bring it back."""
    log_path.write_bytes(b"")
    process = launch_controller(config_path, log_path, pid_file)
    deadline = time.monotonic() + 30
    degraded = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"controller exited with {process.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(f"{rest_url}/health", timeout=1) as reply:
                if json.load(reply).get("status") == "ok":
                    return process
        except urllib.error.HTTPError as error:
            if error.code == 503:
                degraded = json.load(error).get("degraded")
        except OSError:
            pass
        time.sleep(0.2)
    if degraded is not None:
        print(f"warning: the controller is up but these switches are not ready: {degraded}", file=sys.stderr)
        return process
    stop_process(process)
    raise TimeoutError(f"controller did not become healthy; see {log_path}")


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def running(
    plan: NetworkPlan,
    *,
    switch_kind: str = "terrapin",
    rest_port: int = 8080,
    token: str = "terrapin",
    with_controller: bool = True,
    state_dir: Path | None = None,
    intf_prefix: str | None = None,
    supervise: bool = False,
    pid_dir: Path | None = None,
    admission: dict[str, Any] | None = None,
    controller_extra: dict[str, Any] | None = None,
) -> Iterator[RunningNetwork]:
    """Brings the whole network up and guarantees it is torn down again (`intf_prefix`: see
    `build`). With `supervise`, a switch or controller that dies is restarted (topo/supervise.py);
    `pid_dir` records every PID there (`make stop` stops what it lists). `admission` overrides
    keys of the controller's admission defaults (an experiment's service classes or best-effort
    floor), `controller_extra` adds top-level sections (`monitor:`)."""
    setLogLevel(os.environ.get("MININET_LOG", "warning"))
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    state = state_dir or RUN_DIR / plan.name
    state.mkdir(parents=True, exist_ok=True)
    rest_url = f"http://127.0.0.1:{rest_port}"
    config_path = write_config(
        plan,
        state,
        rest_port=rest_port,
        token=token,
        switch_kind=switch_kind,
        admission=admission,
        extra=controller_extra,
    )
    net = build(plan, switch_kind, intf_prefix)
    controller = None
    supervisor = Supervisor(state / "supervisor.log") if supervise else None
    controller_log = RUN_DIR / f"{plan.name}-controller.log"
    controller_pid = pid_dir / "controller.pid" if pid_dir else None
    try:
        net.build()
        net.start()
        for sw in plan.switches.values():
            node = net.get(sw.name)
            pid_file = pid_dir / f"switch-{sw.name}.pid" if pid_dir is not None else None
            write_pid(pid_file, node.process.pid)
            if supervisor is not None:
                supervisor.watch(f"switch {sw.name}", node.process, node.respawn, pid_file)
        configure_hosts(plan, net)
        if with_controller:
            controller = start_controller(config_path, rest_url, controller_log, controller_pid)
            if supervisor is not None:
                supervisor.watch(
                    "controller",
                    controller,
                    lambda: launch_controller(config_path, controller_log, controller_pid),
                    controller_pid,
                )
        if supervisor is not None:
            supervisor.start()
        yield RunningNetwork(plan, net, controller, rest_url, token, config_path, supervisor, switch_kind)
    finally:
        if supervisor is not None:
            supervisor.stop()  # before stopping on purpose what it would restart
            controller = supervisor.process("controller") or controller
        stop_process(controller)
        try:
            net.stop()
        except Exception as error:
            print(f"warning: mininet stop: {error}", file=sys.stderr)
        if pid_dir is not None:
            for record in pid_dir.glob("*.pid"):
                if record.name != "runner.pid":
                    record.unlink(missing_ok=True)
