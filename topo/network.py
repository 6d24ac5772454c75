"""Turns a `NetworkPlan` into a running Mininet network with P4Runtime switches and the controller.

`running(plan, ...)` is a context manager: on exit (normal, exception or Ctrl-C) it stops the
controller, the switches and Mininet, so no process, namespace or veth outlives it.

The controller is one process on a SQLite file (the default), or, with `store="postgres"`, N
replicas c0, c1, ... on REST ports rest_port, rest_port + 1, ... sharing a PostgreSQL cluster
the runner starts (docs/deployment.md): one holds the lease and is the switches' primary, the
others are backups that answer reads and forward writes to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.link import Link
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host as MininetHost

from terrapin_tools.pgserver import PostgresServer
from topo.controller_config import write_config
from topo.p4switch import REPO, P4RuntimeSwitch
from topo.plan import NetworkPlan
from topo.run_tls import RunTls, make_run_tls
from topo.supervise import Supervisor, watch_postgres, write_pid

# make run's logs, state and PIDs. TERRAPIN_RUN_DIR moves it (as it does for make stop), so a
# test can run the real runner without touching a developer's build/run.
RUN_DIR = REPO / os.environ.get("TERRAPIN_RUN_DIR", "build/run")
# make stop (scripts/stop.sh) stops what the files here list: the runner, each switch, the controller.
PID_DIR = RUN_DIR / "pids"
CONTROLLER = REPO / "build" / "venv" / "bin" / "terrapin-controller"
STORES = ("sqlite", "postgres")
# make run's PostgreSQL (STORE=postgres): its cluster, one database per topology, on a fixed port
# so the URL in the banner and docs/deployment.md stays the same from run to run. Not 5432, where
# Debian's own cluster would listen if someone started it.
POSTGRES_DIR = RUN_DIR / "postgres"
POSTGRES_PORT = 15432


def store_problem(store: str, replicas: int) -> str | None:
    """Why this store and number of controllers cannot run together, or None."""
    if store not in STORES:
        return f"STORE must be one of {', '.join(STORES)}, not {store!r}"
    if replicas < 1:
        return f"REPLICAS must be at least 1, not {replicas}"
    if store == "sqlite" and replicas > 1:
        return (
            f"REPLICAS={replicas} needs STORE=postgres: a SQLite store is one file that one "
            "controller process owns (make run REPLICAS=2 STORE=postgres; docs/deployment.md)"
        )
    return None


@dataclass
class ControllerProcess:
    """One controller: the only one (SQLite store), or replica `replica` of several."""

    name: str  # the supervisor's: "controller", or "controller c1"
    rest_url: str
    log_path: Path
    pid_file: Path | None
    replica: str | None = None
    index: int = 0
    process: subprocess.Popen[bytes] | None = None  # the first one started (the supervisor's now)
    # a cgroup v2 directory it is started in, every time (the chaos run partitions it by that)
    cgroup: Path | None = None

    def flags(self) -> list[str]:
        if self.replica is None:
            return []
        port = self.rest_url.rsplit(":", 1)[1]
        return ["--replica", self.replica, "--replica-index", str(self.index), "--port", port]


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
    controllers: list[ControllerProcess] = field(default_factory=list)
    store: str = ""  # the SQLite file or the PostgreSQL URL the controllers use
    tls: RunTls | None = None  # make run TLS=1: the run's certificates (topo/run_tls.py)

    @property
    def https(self) -> ssl.SSLContext | None:
        """The context the run's HTTPS calls are made with (None: plain HTTP)."""
        return None if self.tls is None else self.tls.client_context()

    def host(self, name: str) -> MininetHost:
        return self.net.get(name)

    @property
    def replicated(self) -> bool:
        return any(c.replica is not None for c in self.controllers)

    def process(self, controller: ControllerProcess) -> subprocess.Popen[bytes] | None:
        """The process running as `controller` now (the supervisor's latest start)."""
        if self.supervisor is not None:
            return self.supervisor.process(controller.name) or controller.process
        return controller.process


class RestError(Exception):
    """A REST call answered with an error status; `body` is its decoded JSON."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        super().__init__(f"{method} {path}: {status} {json.dumps(body)}")
        self.method, self.path, self.status, self.body = method, path, status, body


def call(
    run: RunningNetwork,
    method: str,
    path: str,
    body: object = None,
    token: bool = True,
    url: str | None = None,
) -> tuple[int, Any]:
    """A call to the running controller's REST API (with its token unless `token` is False), at
    `url` (one replica's) or the first controller's: the status and the decoded JSON reply,
    errors included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url or run.rest_url}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {run.token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=run.https) as reply:
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


def roles(run: RunningNetwork) -> dict[str, str | None]:
    """Each replica's role as its /health says (primary or backup), None when it does not answer."""
    found: dict[str, str | None] = {}
    for controller in run.controllers:
        assert controller.replica is not None
        try:
            _, health = call(run, "GET", "/health", url=controller.rest_url)
            found[controller.replica] = health["replication"]["role"]
        except (OSError, KeyError, TypeError):
            found[controller.replica] = None
    return found


def wait_primary(run: RunningNetwork, timeout: float = 30) -> ControllerProcess:
    """Until exactly one replica says it is primary; that one."""
    deadline = time.monotonic() + timeout
    while True:
        primaries = [name for name, role in roles(run).items() if role == "primary"]
        if len(primaries) == 1:
            return next(c for c in run.controllers if c.replica == primaries[0])
        if time.monotonic() > deadline:
            raise TimeoutError(f"no single primary among the replicas: {roles(run)}")
        time.sleep(0.2)


def announce(line: str) -> None:
    """The supervisor's lines worth printing where a person works (make run's CLI): deaths and
    restarts, not the "watching" of every process it starts; its log keeps them all."""
    if ": watching " not in line:
        print(line, flush=True)


def _quiet_offloads(intf_name: str, run: object) -> None:
    # Segmentation offloads would hand the switch frames larger than the MTU, and checksum
    # offload leaves partial checksums in the frames it reads.
    run(f"ethtool -K {intf_name} tx off rx off tso off gso off gro off >/dev/null 2>&1")  # type: ignore[operator]


def build(
    plan: NetworkPlan, switch_kind: str, intf_prefix: str | None = None, tls: RunTls | None = None
) -> Mininet:
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
            tls_flags=None if tls is None else tls.switch_flags(sw.name),
            metrics_context=None if tls is None else tls.client_context(),
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


def controller_command(
    config_path: Path, pid_file: Path | None = None, flags: list[str] | None = None
) -> list[str]:
    command = [str(CONTROLLER), "--config", str(config_path), *(flags or [])]
    if pid_file is not None:
        command += ["--pid-file", str(pid_file)]
    return command


def launch_controller(
    config_path: Path,
    log_path: Path,
    pid_file: Path | None = None,
    flags: list[str] | None = None,
    cgroup: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start the controller process (at start, and again when make run's supervisor saw it die);
    its log says the command line, to start it by hand. `flags`: a replica's (--replica ...).
    `cgroup`: a cgroup v2 directory the process joins before it runs (so every socket it makes
    belongs to it)."""
    if not CONTROLLER.exists():
        raise FileNotFoundError(f"{CONTROLLER} is missing: run `make controller`")
    command = controller_command(config_path, pid_file, flags)
    with open(log_path, "ab") as log:
        log.write(f"--- starting: {shlex.join(command)}\n".encode())
        log.flush()
        if cgroup is not None:
            joined = f'echo $$ > {shlex.quote(str(cgroup / "cgroup.procs"))} && exec "$@"'
            command = ["sh", "-c", joined, "--", *command]  # exec: the PID stays the controller's
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def start_controller(
    config_path: Path,
    rest_url: str,
    log_path: Path,
    pid_file: Path | None = None,
    flags: list[str] | None = None,
    https: ssl.SSLContext | None = None,
    cgroup: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start the controller and wait until it is healthy (wait_healthy)."""
    log_path.write_bytes(b"")
    process = launch_controller(config_path, log_path, pid_file, flags, cgroup)
    return wait_healthy(process, rest_url, log_path, https)


def wait_healthy(
    process: subprocess.Popen[bytes], rest_url: str, log_path: Path, https: ssl.SSLContext | None = None
) -> subprocess.Popen[bytes]:
    """Wait until the controller's /health says every switch is ready (200; a backup replica's
    are once connected). A controller whose REST API answers but stays degraded (503) after 30 s
    is kept: the switch it is missing is named in its log and in /health, and make run's
    supervisor may yet bring it back."""
    deadline = time.monotonic() + 30
    degraded = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"controller exited with {process.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(f"{rest_url}/health", timeout=1, context=https) as reply:
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
    stop_processes([process])


def stop_processes(processes: list[subprocess.Popen[bytes] | None]) -> None:
    """SIGTERM to all at once (replicas stopped one by one would hand the lease on at each
    step), then SIGKILL to any still running after 10 s."""
    live = [p for p in processes if p is not None and p.poll() is None]
    for process in live:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for process in live:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def plan_controllers(
    plan: NetworkPlan, rest_port: int, replicas: int, store: str, pid_dir: Path | None, scheme: str = "http"
) -> list[ControllerProcess]:
    """The controller (SQLite), or replicas c0 … c<N-1> on consecutive REST ports (PostgreSQL)."""
    if store == "sqlite":
        pid_file = pid_dir / "controller.pid" if pid_dir else None
        log = RUN_DIR / f"{plan.name}-controller.log"
        return [ControllerProcess("controller", f"{scheme}://127.0.0.1:{rest_port}", log, pid_file)]
    controllers = []
    for index in range(replicas):
        name = f"c{index}"
        controllers.append(
            ControllerProcess(
                f"controller {name}",
                f"{scheme}://127.0.0.1:{rest_port + index}",
                RUN_DIR / f"{plan.name}-controller-{name}.log",
                pid_dir / f"controller-{name}.pid" if pid_dir else None,
                replica=name,
                index=index,
            )
        )
    return controllers


def start_controllers(run: RunningNetwork, supervisor: Supervisor | None) -> None:
    """Start every controller and wait until each is healthy. Replica c0 goes first and is
    waited for, so it takes the lease and is primary; the backups then start together."""
    config = run.config_path

    def launcher(controller: ControllerProcess) -> Any:
        return lambda: launch_controller(
            config, controller.log_path, controller.pid_file, controller.flags(), controller.cgroup
        )

    first, rest = run.controllers[0], run.controllers[1:]
    first.process = start_controller(
        config, first.rest_url, first.log_path, first.pid_file, first.flags(), run.https, first.cgroup
    )
    if first.replica is not None:
        wait_primary(run)
    for controller in rest:
        controller.log_path.write_bytes(b"")
        controller.process = launcher(controller)()
    for controller in rest:
        assert controller.process is not None
        wait_healthy(controller.process, controller.rest_url, controller.log_path, run.https)
    if supervisor is not None:
        for controller in run.controllers:
            assert controller.process is not None
            supervisor.watch(controller.name, controller.process, launcher(controller), controller.pid_file)


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
    store: str = "sqlite",
    replicas: int = 1,
    postgres_dir: Path | None = None,
    postgres_port: int | None = None,
    mininet_log: str = "warning",
    tls_dir: Path | None = None,
    cgroups: Path | None = None,
) -> Iterator[RunningNetwork]:
    """Brings the whole network up and guarantees it is torn down again (`intf_prefix`: see
    `build`). With `supervise`, a switch, a controller or the PostgreSQL server that dies is
    restarted (topo/supervise.py); `pid_dir` records every PID there (`make stop` stops what it
    lists). `admission` overrides keys of the controller's admission defaults (an experiment's
    service classes or best-effort floor), `controller_extra` adds top-level sections (`monitor:`).

    `store="postgres"` starts a PostgreSQL cluster in `postgres_dir` (kept between runs; None: a
    temporary one, removed after) on `postgres_port` (None: the cluster's last, else a free one),
    with a database named after the plan, and `replicas` controller replicas on it; it is
    stopped after the controllers.

    `mininet_log` is Mininet's log level (MININET_LOG overrides it): make run's CLI needs
    "output", the level at which it prints what a host command printed.

    With `tls_dir`, everything runs with TLS on certificates of a CA kept there (make run
    TLS=1; topo/run_tls.py): the switches' P4Runtime and metrics, the REST API over HTTPS.

    With `cgroups` (a directory in the cgroup v2 hierarchy), each replica is started, and
    restarted, in a cgroup of its own there, named after it (the chaos run cuts one off from
    the store or the switches by it: build/bin/terrapin-partition); they are removed after."""
    problem = store_problem(store, replicas)
    if problem is not None:
        raise ValueError(problem)
    setLogLevel(os.environ.get("MININET_LOG", mininet_log))
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    state = state_dir or RUN_DIR / plan.name
    state.mkdir(parents=True, exist_ok=True)
    tls = None if tls_dir is None else make_run_tls(plan, tls_dir)
    controllers = plan_controllers(
        plan, rest_port, replicas, store, pid_dir, "http" if tls is None else "https"
    )
    if cgroups is not None:
        for controller in controllers:
            controller.cgroup = cgroups / (controller.replica or "controller")
            controller.cgroup.mkdir(parents=True, exist_ok=True)
    postgres = None
    net = None
    supervisor = Supervisor(state / "supervisor.log", echo=announce) if supervise else None
    run = None
    try:
        if store == "postgres":
            postgres = PostgresServer(postgres_dir, port=postgres_port, database=plan.name).start()
            if supervisor is not None:
                watch_postgres(supervisor, postgres)
        config_path = write_config(
            plan,
            state,
            rest_port=rest_port,
            token=token,
            switch_kind=switch_kind,
            admission=admission,
            extra=controller_extra,
            postgres_dsn=None if postgres is None else postgres.dsn,
            tls=tls,
        )
        net = build(plan, switch_kind, intf_prefix, tls)
        net.build()
        net.start()
        for sw in plan.switches.values():
            node = net.get(sw.name)
            pid_file = pid_dir / f"switch-{sw.name}.pid" if pid_dir is not None else None
            write_pid(pid_file, node.process.pid)
            if supervisor is not None:
                supervisor.watch(f"switch {sw.name}", node.process, node.respawn, pid_file)
        configure_hosts(plan, net)
        run = RunningNetwork(
            plan,
            net,
            None,
            controllers[0].rest_url,
            token,
            config_path,
            supervisor,
            switch_kind,
            controllers=controllers if with_controller else [],
            store=postgres.dsn if postgres is not None else str(state / "reservations.sqlite"),
            tls=tls,
        )
        if with_controller:
            start_controllers(run, supervisor)
            run.controller = controllers[0].process
        if supervisor is not None:
            supervisor.start()
        yield run
    finally:
        if supervisor is not None:
            supervisor.stop()  # before stopping on purpose what it would restart
        # (run.controller: one a caller started in place of the first, as make demo does)
        stop_processes(
            [c.process for c in controllers]
            if run is None
            else [run.controller, *(run.process(c) for c in controllers)]
        )
        if net is not None:
            # The switches first, all at once, while their interfaces still exist: Mininet's stop
            # deletes the links before it stops the switches one by one, and a terrapin-switch
            # whose interfaces vanished under it sat out its whole SIGTERM grace (5 s each).
            stop_processes([getattr(sw, "process", None) for sw in net.switches])
            try:
                net.stop()
            except Exception as error:
                print(f"warning: mininet stop: {error}", file=sys.stderr)
        if postgres is not None:
            postgres.close()
        if pid_dir is not None:
            for record in pid_dir.glob("*.pid"):
                if record.name != "runner.pid":
                    record.unlink(missing_ok=True)
        for controller in controllers:
            if controller.cgroup is not None:
                with contextlib.suppress(OSError):  # still holds a process that outlived its stop
                    controller.cgroup.rmdir()
