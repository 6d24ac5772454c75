"""A network described as data: switches, their ports and line rates, hosts and their addresses.

Each topology module (christie, sequoia, chain) builds a `NetworkPlan`; `network.py` turns a plan
into a running Mininet network and `controller_config.py` into the controller's configuration.
Keeping the plan free of Mininet lets it be tested without root and keeps addressing in one place.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field

CPU_PORT = 255
PRIORITY_QUEUES = 8
# Port numbers, MACs and gRPC ports are derived from positions so that a plan is deterministic.
GRPC_PORT_BASE = 9559
# BMv2's Thrift runtime server (its CLI's port; simple_switch's default is 9090).
THRIFT_PORT_BASE = 9090


@dataclass(frozen=True)
class Host:
    name: str
    ip: str  # address with prefix, e.g. 10.0.1.1/24
    mac: str
    gateway: str  # the router's address on the host's subnet
    switch: str
    port: int  # the switch port the host is attached to
    rate_bps: int  # the access link's line rate

    @property
    def address(self) -> str:
        return self.ip.split("/")[0]


@dataclass(frozen=True)
class Port:
    number: int
    mac: str
    rate_bps: int
    peer: str  # host or switch name
    peer_port: int | None = None  # the peer switch's port, for switch-to-switch links
    gateway_ip: str | None = None  # the router's address on a host-facing port


@dataclass
class Switch:
    name: str
    device_id: int
    grpc_port: int
    ports: dict[int, Port] = field(default_factory=dict)

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def thrift_port(self) -> int:
        return THRIFT_PORT_BASE + self.device_id


@dataclass(frozen=True)
class Route:
    """One LPM entry: packets to `prefix` leave on `port`, rewritten to `next_hop_mac`."""

    prefix: str
    port: int
    next_hop_mac: str


@dataclass
class NetworkPlan:
    name: str
    switches: dict[str, Switch] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)
    mtu: int = 1500
    queue_capacity: int = 64

    # --- building -----------------------------------------------------------------------------

    def add_switch(self, name: str) -> Switch:
        device_id = len(self.switches) + 1
        switch = Switch(name, device_id, GRPC_PORT_BASE + device_id - 1)
        self.switches[name] = switch
        return switch

    def _next_port(self, switch: Switch) -> int:
        return max(switch.ports, default=0) + 1

    def add_host(self, name: str, switch_name: str, ip: str, gateway: str, rate_bps: int) -> Host:
        switch = self.switches[switch_name]
        number = self._next_port(switch)
        host = Host(
            name=name,
            ip=ip,
            mac=_mac(0x0A, len(self.hosts) + 1, 0),
            gateway=gateway,
            switch=switch_name,
            port=number,
            rate_bps=rate_bps,
        )
        switch.ports[number] = Port(
            number, _mac(0x02, switch.device_id, number), rate_bps, name, gateway_ip=gateway
        )
        self.hosts[name] = host
        return host

    def add_trunk(self, a: str, b: str, rate_bps: int) -> None:
        sa, sb = self.switches[a], self.switches[b]
        pa, pb = self._next_port(sa), self._next_port(sb)
        sa.ports[pa] = Port(pa, _mac(0x02, sa.device_id, pa), rate_bps, b, pb)
        sb.ports[pb] = Port(pb, _mac(0x02, sb.device_id, pb), rate_bps, a, pa)

    # --- derived facts ------------------------------------------------------------------------

    def trunks(self) -> list[tuple[str, int, str, int, int]]:
        """Switch-to-switch links, each once: (a, port_a, b, port_b, rate_bps)."""
        links = []
        for sw in self.switches.values():
            for port in sw.ports.values():
                if port.peer in self.switches and (sw.name, port.number) < (
                    port.peer,
                    port.peer_port or 0,
                ):
                    links.append((sw.name, port.number, port.peer, port.peer_port or 0, port.rate_bps))
        return links

    def next_hops(self, switch_name: str) -> dict[str, int]:
        """For every other switch, the port `switch_name` uses to reach it (BFS, fewest hops;
        ties go to the lower port so routing is deterministic)."""
        first_port: dict[str, int] = {}
        seen = {switch_name}
        queue: deque[tuple[str, int | None]] = deque([(switch_name, None)])
        while queue:
            current, via = queue.popleft()
            for port in sorted(self.switches[current].ports.values(), key=lambda p: p.number):
                peer = port.peer
                if peer in self.switches and peer not in seen:
                    seen.add(peer)
                    out = port.number if via is None else via
                    first_port[peer] = out
                    queue.append((peer, out))
        return first_port

    def routes(self, switch_name: str) -> list[Route]:
        """Host routes (/32) for every host in the network, as this switch forwards them."""
        switch = self.switches[switch_name]
        towards = self.next_hops(switch_name)
        routes = []
        for host in sorted(self.hosts.values(), key=lambda h: h.name):
            if host.switch == switch_name:
                routes.append(Route(f"{host.address}/32", host.port, host.mac))
            else:
                out = towards[host.switch]
                peer_port = switch.ports[out].peer_port
                assert peer_port is not None
                peer_mac = self.switches[switch.ports[out].peer].ports[peer_port].mac
                routes.append(Route(f"{host.address}/32", out, peer_mac))
        return routes

    def path(self, src_host: str, dst_host: str) -> list[tuple[str, int, int]]:
        """The hops a packet from src to dst takes: (switch, ingress port, egress port)."""
        src, dst = self.hosts[src_host], self.hosts[dst_host]
        hops = []
        current, in_port = src.switch, src.port
        for _ in range(len(self.switches)):
            if current == dst.switch:
                hops.append((current, in_port, dst.port))
                return hops
            out = self.next_hops(current)[dst.switch]
            port = self.switches[current].ports[out]
            hops.append((current, in_port, out))
            assert port.peer_port is not None
            current, in_port = port.peer, port.peer_port
        raise ValueError(f"no path from {src_host} to {dst_host}")


def _mac(kind: int, a: int, b: int) -> str:
    return f"{kind:02x}:00:00:{a:02x}:{(b >> 8) & 0xFF:02x}:{b & 0xFF:02x}"


def subnet_hosts(cidr: str) -> tuple[list[str], str]:
    """Host addresses of a subnet (with prefix) and its gateway, the last usable address."""
    net = ipaddress.ip_network(cidr)
    usable = list(net.hosts())
    return [f"{a}/{net.prefixlen}" for a in usable[:-1]], str(usable[-1])
