"""The controller's configuration for a `NetworkPlan` (the schema is controller/terrapin/config.py).

Admission per port follows the switch: each priority queue holds `queue_capacity` packets of at
most the MTU, so that is its buffer in bytes; the largest packet any level sends is the MTU. A BMv2
switch is declared as such (its Thrift port and CLI serve the telemetry registers), and its ports
with the packet rate it shapes them at (`rate_pps`), so admission counts packets, not bytes.
Every switch is declared with its kind's jitter (`jitter_us`, topo/p4switch.py SWITCH_JITTER_US).

The reservation protocol's own envelope (`control_rate`, 12,000 B/s of 90-byte messages by
default) would take half or more of a slow port; there it is capped to a tenth of what the port
carries (`protocol_rate`): of its bytes, or on a packet-rate port, where every message takes a
whole packet slot, of its packets. Uncapped, a T1 of 1,500-byte slots on BMv2 (128 packets/s,
fewer than the default's 134 messages/s) or a 64 kbit/s line would leave nothing to admit.

The store is a SQLite file in the state directory (one controller), or a PostgreSQL URL and a
`replication:` section for replicas, which share the file and name themselves with --replica and
--replica-index (docs/deployment.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from terrapin.config import AdmissionConfig
from terrapin.constants import CONTROL_FRAME_BYTES
from topo.p4switch import REPO, SWITCH_LINK_WATCH, bmv2_command, port_shaping, switch_jitter_us
from topo.plan import NetworkPlan
from topo.run_tls import RunTls

# On a port where the protocol's default envelope would take half or more (of its bytes, or of
# its packets on a packet-rate port), it is given a tenth instead.
PROTOCOL_SLOW_PORT_SHARE = 2
PROTOCOL_CAPPED_SHARE = 10


def protocol_rate(rate_bps: int, rate_pps: int | None = None) -> int | None:
    """The protocol's rate (B/s of its messages) on a port of `rate_bps`, shaped to `rate_pps` on
    BMv2, when the default would take half of it or more; None keeps the default."""
    frame: int = CONTROL_FRAME_BYTES
    default: int = AdmissionConfig().control_rate
    if rate_pps is None:  # a byte-rate port: messages are charged their bytes
        port, charged = rate_bps // 8, default
    else:  # a packet-rate port: every message takes one of its packets
        port, charged = rate_pps, -(-default // frame)
    if charged * PROTOCOL_SLOW_PORT_SHARE < port:
        return None
    share = port // PROTOCOL_CAPPED_SHARE
    messages = share if rate_pps is not None else share // frame
    return max(1, messages) * frame


def controller_config(
    plan: NetworkPlan,
    state_dir: Path,
    *,
    rest_port: int,
    token: str,
    switch_kind: str = "terrapin",
    admission: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    postgres_dsn: str | None = None,
    tls: RunTls | None = None,
) -> dict[str, Any]:
    """`admission` overrides keys of the admission defaults below (the controller validates
    them), `extra` adds top-level sections. With `postgres_dsn` the store is that database and
    the controllers are replicas (the lease's timings are the controller's defaults). With `tls`
    every switch gets a `tls:` block and the REST API `rest.tls` (topo/run_tls.py)."""
    switches = []
    for sw in plan.switches.values():
        ports = []
        for port in sorted(sw.ports.values(), key=lambda p: p.number):
            peer = port.peer if port.peer_port is None else f"{port.peer}:{port.peer_port}"
            entry: dict[str, Any] = {
                "number": port.number,
                "mac": port.mac,
                "rate_bps": port.rate_bps,
                "peer": peer,
            }
            if port.gateway_ip:
                entry["gateway_ip"] = port.gateway_ip
            pps = port_shaping(switch_kind, port.rate_bps, plan.mtu)
            if pps is not None:
                entry["rate_pps"] = pps
            capped = protocol_rate(port.rate_bps, pps)
            if capped is not None:
                entry["admission"] = {"control_rate": capped}
            ports.append(entry)
        gateways = [p.gateway_ip for p in sw.ports.values() if p.gateway_ip]
        kind: dict[str, Any] = {}
        if switch_kind == "bmv2":
            cli = bmv2_command("simple_switch_CLI")
            kind = {"kind": "bmv2", "thrift_port": sw.thrift_port, "bmv2_cli": cli}
        switches.append(
            {
                "name": sw.name,
                "address": sw.grpc_addr,
                "device_id": sw.device_id,
                **({"router_ip": gateways[0]} if gateways else {}),
                **kind,
                "jitter_us": switch_jitter_us(switch_kind),
                **({"tls": tls.switch_block()} if tls is not None else {}),
                "ports": ports,
            }
        )
    return {
        "p4": {
            "p4info": str(REPO / "build/p4/terrapin.p4info.txtpb"),
            "json": str(REPO / "build/p4/terrapin.json"),
        },
        "rest": {
            "host": "127.0.0.1",
            "port": rest_port,
            "token": token,
            **({"tls": tls.rest_block()} if tls is not None else {}),
        },
        "store": postgres_dsn or str(state_dir / "reservations.sqlite"),
        **({"replication": {}} if postgres_dsn else {}),
        "admission": {
            "queue_capacity": plan.queue_capacity * plan.mtu,
            "largest_packet": plan.mtu,
            **(admission or {}),
        },
        "links": dict(SWITCH_LINK_WATCH[switch_kind]),
        "switches": switches,
        "hosts": [
            {"name": h.name, "ip": h.address, "mac": h.mac, "switch": h.switch, "port": h.port}
            for h in sorted(plan.hosts.values(), key=lambda h: h.name)
        ],
        **(extra or {}),
    }


def write_config(
    plan: NetworkPlan,
    state_dir: Path,
    *,
    rest_port: int,
    token: str,
    switch_kind: str = "terrapin",
    admission: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    postgres_dsn: str | None = None,
    tls: RunTls | None = None,
) -> Path:
    path = state_dir / "controller.yaml"
    data = controller_config(
        plan,
        state_dir,
        rest_port=rest_port,
        token=token,
        switch_kind=switch_kind,
        admission=admission,
        extra=extra,
        postgres_dsn=postgres_dsn,
        tls=tls,
    )
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
