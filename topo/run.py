"""`make run`: one of the topologies, its switches, the controller and its REST API.

    python -m topo.run [--topo christie|sequoia|chain] [--switch terrapin|bmv2] [--headless]
                       [--store sqlite|postgres] [--replicas N] [--tls]

Opens the Mininet CLI (or, headless, waits for Ctrl-C / SIGTERM); everything it started is
stopped on the way out. The CLI shows what host commands print (Mininet's `output` level;
MININET_LOG=info|debug|warning chooses another). While it runs, build/run/network.json says where
its switches are, for make shell. TERRAPIN_RUN_DIR moves build/run and TERRAPIN_INTF_PREFIX names
the switches' interfaces <prefix><device id>p<port>, so a test can run the real runner beside a
developer's own. `--store postgres` runs N controller replicas on a PostgreSQL cluster in
build/run/postgres (127.0.0.1:15432), REST on 8080, 8081, ... (docs/deployment.md). `--tls`
(make run TLS=1) runs P4Runtime, the switches' metrics and REST with TLS, on certificates of a
private CA in build/run/pki (topo/run_tls.py).
"""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import json
import os
import signal
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

from mininet.cli import CLI

from terrapin.config import load_config
from topo import TOPOLOGIES, module_name
from topo.examples import Example, NoExample, derive
from topo.network import (
    PID_DIR,
    POSTGRES_DIR,
    POSTGRES_PORT,
    RUN_DIR,
    STORES,
    RunningNetwork,
    call,
    roles,
    running,
    store_problem,
)
from topo.p4switch import metrics_port
from topo.plan import Host, NetworkPlan
from topo.supervise import write_pid

# make run TLS=1's CA and certificates (kept between runs: topo/pki.py reuses what is valid).
PKI_DIR = RUN_DIR / "pki"
# make shell reads it (scripts/p4rt_shell.py): present exactly while a runner is up.
NETWORK_FILE = RUN_DIR / "network.json"


class Stopped(BaseException):
    """SIGTERM (make stop) or SIGHUP (its terminal closed) while the CLI runs. Not a
    KeyboardInterrupt, which Mininet's CLI catches and carries on from, and not an Exception,
    which a command might swallow."""


def load_plan(name: str, rate_mbps: float | None) -> NetworkPlan:
    module = importlib.import_module(f"topo.{module_name(name)}")
    if rate_mbps is None:
        return module.plan()  # type: ignore[no-any-return]
    if name.startswith("sequoia"):
        return module.plan(t1_bps=int(rate_mbps * 1e6))  # type: ignore[no-any-return]
    return module.plan(rate_mbps=rate_mbps)  # type: ignore[no-any-return]


def example_pair(plan: NetworkPlan) -> tuple[Host, Host]:
    """The hosts the banner's example reserves between: the first host, and the first host of
    another subnet (christie: a1 -> b1, the README's and the demo's pair)."""
    hosts = sorted(plan.hosts.values(), key=lambda h: h.name)
    src = hosts[0]
    source_net = ipaddress.ip_interface(src.ip).network
    dst = next((h for h in hosts if ipaddress.ip_address(h.address) not in source_net), hosts[-1])
    return src, dst


def describe_replicas(run: RunningNetwork, role: Mapping[str, str | None]) -> list[str]:
    """The banner's lines on the replicas and their store (nothing for a single controller)."""
    if not run.replicated:
        return []
    listed = ", ".join(
        f"{c.replica} {c.rest_url} ({role.get(c.replica or '') or 'not answering'})" for c in run.controllers
    )
    primary = next((name for name, r in role.items() if r == "primary"), None)
    return [
        f"  replicas: {listed}",
        f"            {primary or 'no replica'} is primary (programs the switches and admits); any replica's",
        "            REST port accepts every request: a backup answers reads itself and forwards writes",
        "            to the primary. Kill the primary and a backup takes over within about 2 s.",
        f"  store:    PostgreSQL {run.store}",
    ]


def curl_tls(run: RunningNetwork, client: bool = False) -> str:
    """curl's TLS options for the run's HTTPS (make run TLS=1): the CA, and with `client` the
    client certificate the switches' metrics ask for."""
    if run.tls is None:
        return ""
    flags = f" --cacert {run.tls.ca}"
    if client:
        flags += f" --cert {run.tls.client.cert} --key {run.tls.client.key}"
    return flags


def describe_tls(run: RunningNetwork) -> list[str]:
    if run.tls is None:
        return []
    return [
        f"  TLS:      everywhere (make run TLS=1): CA {run.tls.ca}; the switches ask for a client",
        "            certificate of it (P4Runtime and metrics); REST is HTTPS (curl --cacert, as below).",
        "            make shell does not speak TLS yet.",
    ]


def describe_examples(run: RunningNetwork, example: Example | NoExample) -> list[str]:
    """The banner's example reservations, or why there is none (a network too slow for any)."""
    if isinstance(example, NoExample):
        return [f"No example reservation is printed: {example}", ""]
    src, dst = example.src, example.dst
    return [
        f"Reserve a channel {src.name} -> {dst.name} (UDP {example.rest_port} -> {example.rest_port},"
        f" {example.envelope_text()}):",
        f"  curl -s{curl_tls(run)} -X POST {run.rest_url}/reservations"
        f" -H 'Authorization: Bearer {run.token}' \\",
        f"       -H 'Content-Type: application/json' -d '{json.dumps(example.rest_body())}'",
        f"  curl -s{curl_tls(run)} {run.rest_url}/reservations",
        "",
        "Or in band, from the hosts (in the Mininet CLI below):",
        f"  {dst.name} terrapin-host serve &",
        f"  {src.name} {example.inband_request()}",
        f"  {src.name} terrapin-host status",
        "",
        f"(Sized by the controller's admission tests for the path {src.name} -> {dst.name}: four such"
        " channels fit side by side.)",
        "",
    ]


def describe(
    run: RunningNetwork, example: Example | NoExample, role: Mapping[str, str | None] | None = None
) -> str:
    """What make run prints; `example`: the reservations it suggests (the_example); `role`:
    each replica's (roles()), when the controllers are replicas."""
    plan = run.plan
    hosts = sorted(plan.hosts.values(), key=lambda h: h.name)
    shell_choice = " [DEVICE=<switch>]" if len(plan.switches) > 1 else ""
    lines = [
        f"Terrapin is up: topology {plan.name!r}, {len(plan.switches)} switch(es), {len(hosts)} hosts.",
        "",
        "  hosts:    " + ", ".join(f"{h.name} {h.address}" for h in hosts),
        "  switches: " + ", ".join(f"{s.name} (P4Runtime {s.grpc_addr})" for s in plan.switches.values()),
        f"  REST API: {run.rest_url}  (OpenAPI at {run.rest_url}/docs, token {run.token!r})",
        *describe_replicas(run, role or {}),
        *describe_tls(run),
        f"  dashboard: {run.rest_url}/  (guarantee monitor: {run.rest_url}/monitor;"
        f" controller metrics: {run.rest_url}/metrics)",
        "",
        *describe_examples(run, example),
        f"A P4Runtime shell on a switch, reading its tables beside the controller: make shell{shell_choice}",
        "Switch metrics (Prometheus text): "
        + ", ".join(
            f"{s.name} {'https' if run.tls else 'http'}://127.0.0.1:{metrics_port(s.device_id)}/metrics"
            for s in plan.switches.values()
        )
        + (f" (curl{curl_tls(run, client=True)})" if run.tls else "")
        + (" (terrapin-switch only)" if run.switch_kind != "terrapin" else ""),
        "",
        (
            "A switch, a controller or the PostgreSQL server that dies is restarted"
            if run.replicated
            else "A switch or the controller that dies is restarted"
        )
        + " (build/run/<topology>/supervisor.log says why);",
        "their PIDs are in build/run/pids/. Logs: build/run/.",
        "Stop with Ctrl-C (or `exit` in the CLI) or `make stop`.",
    ]
    return "\n".join(lines)


def stored_reservations(run: RunningNetwork) -> list[dict[str, Any]]:
    """What the controller holds already (a run restores its store): the example fits beside it."""
    status, listed = call(run, "GET", "/reservations")
    return listed if status == 200 and isinstance(listed, list) else []


def the_example(run: RunningNetwork) -> Example | NoExample:
    src, dst = example_pair(run.plan)
    try:
        return derive(load_config(run.config_path), src.name, dst.name, stored_reservations(run))
    except NoExample as none:
        return none


def describe_network(run: RunningNetwork) -> dict[str, Any]:
    """What make shell (scripts/p4rt_shell.py) reads to attach to this run: every switch's
    P4Runtime address and device id as the run's configuration gives them."""
    config = load_config(run.config_path)
    return {
        "runner_pid": os.getpid(),
        "topology": run.plan.name,
        "switch_kind": run.switch_kind,
        "config": str(run.config_path),
        "rest_url": run.rest_url,
        "p4info": config.p4.p4info,
        "json": config.p4.json_path,
        "switches": [
            {
                "name": s.name,
                "address": s.address,
                "device_id": s.device_id,
                "kind": s.kind,
                "thrift_port": s.thrift_port,
                "bmv2_cli": s.bmv2_cli,
                # make run TLS=1: the CA, and the run's client certificate (a person's tools')
                "tls": None
                if run.tls is None
                else {
                    "ca": str(run.tls.ca),
                    "cert": str(run.tls.client.cert),
                    "key": str(run.tls.client.key),
                },
            }
            for s in config.switches
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Bring up a Terrapin network.")
    parser.add_argument("--topo", choices=TOPOLOGIES, default="christie")
    parser.add_argument("--switch", choices=("terrapin", "bmv2"), default="terrapin")
    parser.add_argument("--rate-mbps", type=float, default=None, help="link rate (T1 rate for sequoia)")
    parser.add_argument("--rest-port", type=int, default=8080)
    parser.add_argument("--token", default="terrapin")
    parser.add_argument("--headless", action="store_true", help="no CLI; run until interrupted")
    parser.add_argument(
        "--store", choices=STORES, default="sqlite", help="postgres: replicas on build/run/postgres"
    )
    parser.add_argument(
        "--replicas", type=int, default=1, help="controller replicas (needs --store postgres)"
    )
    parser.add_argument("--postgres-port", type=int, default=POSTGRES_PORT)
    parser.add_argument(
        "--tls",
        action="store_true",
        help=f"TLS everywhere, certificates of a CA in {PKI_DIR} (topo/run_tls.py)",
    )
    args = parser.parse_args(argv)
    problem = store_problem(args.store, args.replicas)
    if problem is not None:
        print(f"make run: {problem}", file=sys.stderr)
        return 2

    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        if not args.headless:
            raise Stopped

    signal.signal(signal.SIGTERM, on_signal)
    # A closed terminal (SIGHUP) ends the run as make stop does, rather than killing the runner
    # and leaving its switches and controller behind.
    signal.signal(signal.SIGHUP, on_signal)
    plan = load_plan(args.topo, args.rate_mbps)
    runner_pid = PID_DIR / "runner.pid"
    write_pid(runner_pid, os.getpid())
    try:
        with running(
            plan,
            switch_kind=args.switch,
            rest_port=args.rest_port,
            token=args.token,
            supervise=True,
            pid_dir=PID_DIR,
            store=args.store,
            replicas=args.replicas,
            postgres_dir=POSTGRES_DIR,
            postgres_port=args.postgres_port,
            intf_prefix=os.environ.get("TERRAPIN_INTF_PREFIX") or None,
            mininet_log="output",
            tls_dir=PKI_DIR if args.tls else None,
        ) as run:
            NETWORK_FILE.write_text(json.dumps(describe_network(run), indent=2) + "\n")
            print(describe(run, the_example(run), roles(run) if run.replicated else None), flush=True)
            if args.headless:
                signal.signal(signal.SIGINT, on_signal)
                stop.wait()
            else:
                CLI(run.net)
    except (KeyboardInterrupt, Stopped):
        pass
    finally:
        NETWORK_FILE.unlink(missing_ok=True)
        runner_pid.unlink(missing_ok=True)
    print("Terrapin stopped; everything it started is gone.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
