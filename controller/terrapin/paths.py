"""Topology and routing from the configuration; the path of a channel; two-phase path setup.

Routing is shortest-path over the trunks that carry traffic now (every configured one, less
those found down: links.py; ties broken by name and port number, so every run computes the same
routes). A channel's path is the list of egress ports its packets leave by, from the switch its
source is attached to up to the destination's port: each is a resource the admission ledger
accounts for.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from terrapin.admission.model import PortId
from terrapin.config import Config, HostConfig
from terrapin.constants import CHANNEL_IN_HOST


class NoRoute(Exception):
    """No configured path between two addresses."""


class NoDisjointPaths(Exception):
    """No two paths that share no trunk between two addresses' switches (protection)."""


@dataclass(frozen=True)
class PathPair:
    """A protected channel's two paths (egress ports, each ending at the destination's port),
    sharing no trunk; `disjoint` says whether they also share no switch but their ends ("node")
    or only no trunk ("link")."""

    first: tuple[PortId, ...]
    second: tuple[PortId, ...]
    disjoint: str


@dataclass(frozen=True)
class ChannelSelector:
    """What the data plane matches: source, destination, protocol, XTP key or L4 ports."""

    src: str
    dst: str
    protocol: int
    flow_key: int


@dataclass(frozen=True)
class Route:
    prefix: str  # a host route, a.b.c.d/32
    port: int
    next_hop_mac: str


@dataclass(frozen=True)
class Forwarding:
    """The base state a switch needs before any channel: routes, ARP answers, port MACs."""

    routes: tuple[Route, ...]
    arp_answers: tuple[tuple[str, str], ...]  # (gateway ip, mac)
    port_macs: tuple[tuple[int, str], ...]
    trunk_ports: tuple[int, ...] = ()  # where packets come from other switches (`trunk_ports`)


@dataclass(frozen=True, order=True)
class Trunk:
    """A switch-to-switch link of the configuration, by its two ends (the lower first)."""

    a: PortId
    b: PortId

    def __str__(self) -> str:
        return f"{self.a}-{self.b}"

    @property
    def ends(self) -> tuple[PortId, PortId]:
        return self.a, self.b


class Topology:
    def __init__(self, config: Config) -> None:
        self._config = config
        self.switch_names = sorted(s.name for s in config.switches)
        self._ports = {s.name: {p.number: p for p in s.ports} for s in config.switches}
        self.hosts_by_ip: dict[str, HostConfig] = {h.ip: h for h in config.hosts}
        # trunk adjacency: switch → [(port, peer switch)]
        self._trunks: dict[str, list[tuple[int, str]]] = {name: [] for name in self._ports}
        trunks: set[Trunk] = set()
        for s in config.switches:
            for p in sorted(s.ports, key=lambda x: x.number):
                if ":" in p.peer:
                    peer, _, peer_port = p.peer.partition(":")
                    self._trunks[s.name].append((p.number, peer))
                    here, there = PortId(s.name, p.number), PortId(peer, int(peer_port))
                    trunks.add(Trunk(min(here, there), max(here, there)))
        self.trunks: tuple[Trunk, ...] = tuple(sorted(trunks))
        self._trunk_at = {end: t for t in self.trunks for end in t.ends}
        self.down: frozenset[Trunk] = frozenset()
        self.version = 0  # counts the changes of routes (set_down): what was derived from them is stale
        self._next_port: dict[tuple[str, str], int] = {}
        self._route()

    def set_down(self, trunks: Iterable[Trunk]) -> None:
        """Route around `trunks` (and only those) from now on."""
        down = frozenset(trunks)
        if down != self.down:
            self.down = down
            self.version += 1
            self._route()

    def trunk_at(self, port: PortId) -> Trunk | None:
        """The trunk a switch port is an end of; None for a host's port."""
        return self._trunk_at.get(port)

    def _route(self) -> None:
        self._next_port = {}
        for target in self._ports:
            self._route_towards(target)

    def _route_towards(self, target: str) -> None:
        """BFS from `target` over the trunks that are up: each switch learns its port towards it."""
        seen = {target}
        queue = deque([target])
        while queue:
            here = queue.popleft()
            for name in sorted(self._ports):
                if name in seen:
                    continue
                for port, peer in self._trunks[name]:
                    if peer == here and self._trunk_at[PortId(name, port)] not in self.down:
                        self._next_port[(name, target)] = port
                        seen.add(name)
                        queue.append(name)
                        break

    def host(self, ip: str) -> HostConfig:
        found = self.hosts_by_ip.get(ip)  # an address in its usual form: no parsing (each hop asks)
        if found is not None:
            return found
        try:
            return self.hosts_by_ip[str(ipaddress.IPv4Address(ip))]
        except (KeyError, ValueError):
            raise NoRoute(f"{ip} is not a configured host") from None

    def egress_port(self, switch: str, dst_ip: str) -> int:
        dest = self.host(dst_ip)
        if dest.switch == switch:
            return dest.port
        port = self._next_port.get((switch, dest.switch))
        if port is None:
            raise NoRoute(f"no path from {switch} to {dest.switch}")
        return port

    def peer_switch(self, switch: str, port: int) -> str | None:
        peer = self._ports[switch][port].peer
        return peer.partition(":")[0] if ":" in peer else None

    def pin(self, hop: PortId, dst_ip: str) -> tuple[int, str] | None:
        """How a channel to `dst_ip` whose admitted path leaves `hop.switch` by `hop.port` is
        sent there: None if its destination's route does, else that port and the next hop's
        MAC (docs/controller.md, "Trunks")."""
        try:
            if self.egress_port(hop.switch, dst_ip) == hop.port:
                return None
        except NoRoute:
            pass
        return hop.port, self.next_hop_mac(hop.switch, hop.port, dst_ip)

    def path(self, src_ip: str, dst_ip: str, first_switch: str | None = None) -> list[PortId]:
        """Egress ports from the source's switch (or `first_switch`) to the destination."""
        switch = first_switch or self.host(src_ip).switch
        self.host(dst_ip)
        hops: list[PortId] = []
        while True:
            port = self.egress_port(switch, dst_ip)
            hops.append(PortId(switch, port))
            nxt = self.peer_switch(switch, port)
            if nxt is None:
                return hops
            if len(hops) > len(self._ports):
                raise NoRoute(f"routing loop towards {dst_ip}")
            switch = nxt

    def disjoint_paths(self, src_ip: str, dst_ip: str, keep: Sequence[PortId] | None = None) -> PathPair:
        """Two paths from the source's switch to the destination's over the trunks up now that
        share no trunk, and no switch but their ends where the topology allows: the pair of least
        total length (a minimum-cost flow of two), the shorter first. With `keep` (a path
        already carrying a channel), that path and the shortest partner of it."""
        first_switch = self.host(src_ip).switch
        dest = self.host(dst_ip)
        if first_switch == dest.switch:
            raise NoDisjointPaths(
                f"{src_ip} and {dst_ip} are on one switch ({dest.switch}): there is one path"
            )
        last = PortId(dest.switch, dest.port)
        for node_disjoint in (True, False):
            if keep is not None:
                found = self._partner(list(keep), node_disjoint)
                pair = None if found is None else [list(keep[:-1]), found]
            else:
                pair = _two_paths(self._arcs(), first_switch, dest.switch, node_disjoint)
            if pair is not None:
                a, b = pair if keep is not None else sorted(pair, key=lambda p: (len(p), p))
                return PathPair((*a, last), (*b, last), "node" if node_disjoint else "link")
        raise NoDisjointPaths(
            f"no two paths from {first_switch} to {dest.switch} share no trunk{self._while_down()}"
        )

    def _while_down(self) -> str:
        if not self.down:
            return ""
        return (
            " while "
            + ", ".join(str(t) for t in sorted(self.down))
            + (" are down" if len(self.down) > 1 else " is down")
        )

    def _arcs(self) -> list[tuple[str, int, str]]:
        """Every trunk that is up, in both directions: (switch, egress port, peer switch)."""
        return [
            (name, port, peer)
            for name in sorted(self._trunks)
            for port, peer in self._trunks[name]
            if self._trunk_at[PortId(name, port)] not in self.down
        ]

    def _partner(self, keep: list[PortId], node_disjoint: bool) -> list[PortId] | None:
        """The shortest path between `keep`'s end switches over trunks it does not use (and, if
        node_disjoint, through no switch it crosses)."""
        first, last = keep[0].switch, keep[-1].switch
        used = {self._trunk_at.get(hop) for hop in keep}
        middle = {hop.switch for hop in keep[1:]} - {last}
        arcs = [
            (u, port, v)
            for u, port, v in self._arcs()
            if self._trunk_at[PortId(u, port)] not in used
            and not (node_disjoint and (u in middle or v in middle))
        ]
        found = _two_paths(arcs, first, last, node_disjoint=False, count=1)
        return None if found is None else found[0]

    def forwarding(self, switch: str) -> Forwarding:
        routes = []
        for ip in sorted(self.hosts_by_ip):
            try:
                port = self.egress_port(switch, ip)
            except NoRoute:
                continue
            routes.append(Route(f"{ip}/32", port, self.next_hop_mac(switch, port, ip)))
        arps = tuple(
            (p.gateway_ip, p.mac)
            for p in sorted(self._ports[switch].values(), key=lambda x: x.number)
            if p.gateway_ip
        )
        macs = tuple((n, p.mac) for n, p in sorted(self._ports[switch].items()))
        trunk_ports = tuple(n for n, p in sorted(self._ports[switch].items()) if ":" in p.peer)
        return Forwarding(tuple(routes), arps, macs, trunk_ports)

    def in_ports(self, path: Sequence[PortId]) -> list[int]:
        """Where a channel on `path` (its egress ports) enters each switch of it
        (ChannelEntry.in_port): from the host side at the first, by the trunk from the hop
        before at the others."""
        return [CHANNEL_IN_HOST] + [self.arrival_port(before) for before in path[:-1]]

    def arrival_port(self, leaving: PortId) -> int:
        """The port at the next switch that what leaves by trunk port `leaving` arrives on."""
        peer = self._ports[leaving.switch][leaving.port].peer
        _, colon, port = peer.partition(":")
        if not colon:
            raise NoRoute(f"{leaving} leads to host {peer}, not to a switch")
        return int(port)

    def next_hop_mac(self, switch: str, port: int, dst_ip: str) -> str:
        """The MAC a packet to `dst_ip` leaving `switch` by `port` is addressed to: the host's
        own on its port, the peer switch's port's on a trunk."""
        host = self.host(dst_ip)
        if host.switch == switch and host.port == port:
            return host.mac
        peer_switch, _, peer_port = self._ports[switch][port].peer.partition(":")
        if not peer_port:
            raise NoRoute(f"{switch}:{port} leads to host {peer_switch}, not towards {dst_ip}")
        return self._ports[peer_switch][int(peer_port)].mac

    def router_ip(self, switch: str) -> str | None:
        for s in self._config.switches:
            if s.name == switch:
                if s.router_ip:
                    return s.router_ip
                gateways = [p.gateway_ip for p in s.ports if p.gateway_ip]
                return gateways[0] if gateways else None
        return None


# ---- two-phase path setup ------------------------------------------------------------------


@dataclass(frozen=True)
class JumpingWindowEntry:
    """admit_jumping_window's parameters (docs/dataplane.md "Window policers")."""

    window_us: int
    limit: int  # frame bytes, or packets with count_packets
    count_packets: bool
    smax: int  # frame bytes
    tolerance_us: int  # the switch's jitter: a packet stamped this late may count a window over
    tag: int  # the installation: window cells another tag wrote are no history


@dataclass(frozen=True)
class MovingWindowEntry:
    """admit_moving_window's parameters (docs/dataplane.md "Window policers")."""

    xmin_us: int
    interval_us: int
    last_slot: int  # ring slots in use − 1
    quantum: int  # packets per slot
    smax: int  # frame bytes
    tolerance_us: int  # the switch's jitter: how early a packet may look and still pass (GCRA)
    tag: int  # the installation: window cells another tag wrote are no history


@dataclass(frozen=True)
class Copy:
    """One of a protected channel's two copies at a switch (docs/dataplane.md "Protection"): its
    member stream (the R-TAG's), the port it leaves by and the next hop's MAC."""

    member: int
    port: int
    next_hop_mac: str


@dataclass(frozen=True)
class Recovery:
    """Sequence recovery at a protected channel's last switch: the two member streams that end
    there, the history window (numbers) and the silence after which it resets (µs), and the
    installation tag (state another tag left is no state)."""

    members: tuple[int, int]
    history_length: int
    reset_us: int
    tag: int


@dataclass(frozen=True)
class ChannelEntry:
    """One hop's classification entry and policer, in the switch's own units: the meter's
    (CIR, CBS, PIR, PBS), or on the channel's first hop a window policer (`window`), whose
    state the switch keeps in registers by channel id, tagged by the installation."""

    switch: str
    selector: ChannelSelector
    channel_id: int
    priority: int
    cir: int  # bytes/s (Ethernet frame bytes, as the meters count)
    cburst: int
    pir: int
    pburst: int
    demote_excess: bool
    window: JumpingWindowEntry | MovingWindowEntry | None = None
    port: int | None = None  # the hop's egress port (not part of the entry: what it loads)
    # Where the channel's packets enter this switch (part of the key): CHANNEL_IN_HOST at its
    # first switch, the trunk port from the hop before at the others, CHANNEL_IN_RECOVERED at a
    # protected channel's last. Its packets arriving any other way are not admitted here.
    in_port: int = CHANNEL_IN_HOST
    # Where the channel's admitted path leaves its destination's route at this switch (a
    # restoration moved it, and the route has moved back since): the port and the next hop's
    # MAC its packets are sent to instead (`channel_paths`). None: it follows the route.
    pin: tuple[int, str] | None = None
    # Protection (docs/dataplane.md "Protection"). At a protected channel's first switch, its two
    # copies (replicated after the policer); at its last, the recovery that keeps the first copy
    # of each number. At a transit switch of one of its paths the entry is `relay` alone: the
    # copy forwarded by its member stream and policed by the hop's meter, no `channels` entry.
    replicas: tuple[Copy, ...] = ()
    recovery: Recovery | None = None
    relay: Copy | None = None

    def __hash__(self) -> int:
        # Entries are dictionary keys by the tens of thousands (a backup's encoded entries,
        # looked up every few seconds): the dataclass hash rebuilt its tuple each time.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(
                (
                    self.switch,
                    self.selector,
                    self.channel_id,
                    self.priority,
                    self.cir,
                    self.cburst,
                    self.pir,
                    self.pburst,
                    self.demote_excess,
                    self.window,
                    self.port,
                    self.in_port,
                    self.pin,
                    self.replicas,
                    self.recovery,
                    self.relay,
                )
            )
            object.__setattr__(self, "_hash", cached)
        return cached


class ChannelProgrammer(Protocol):
    """What path setup needs from the switches (switches.SwitchFabric, or a test fake)."""

    def is_ready(self, name: str) -> bool: ...

    async def install_channel(self, entry: ChannelEntry) -> None: ...

    async def remove_channel(self, entry: ChannelEntry) -> None: ...


class PathSetupError(Exception):
    def __init__(self, switch: str, cause: BaseException) -> None:
        super().__init__(f"{switch}: {cause}")
        self.switch = switch
        self.cause = cause


async def install_path(programmer: ChannelProgrammer, entries: Sequence[ChannelEntry]) -> None:
    """Write every hop (concurrently: the switches are independent); if any write fails, raise
    PathSetupError naming the first switch that failed. The caller removes the channel from the
    store first and then every hop (remove_path), in that order, so that a switch being
    reconciled meanwhile cannot be given the channel back (RCAP: all hops commit or none do)."""
    results = await asyncio.gather(*(programmer.install_channel(e) for e in entries), return_exceptions=True)
    failed = [(e, r) for e, r in zip(entries, results, strict=True) if isinstance(r, BaseException)]
    if failed:
        entry, cause = failed[0]
        raise PathSetupError(entry.switch, cause)


async def remove_path(programmer: ChannelProgrammer, entries: Sequence[ChannelEntry]) -> list[str]:
    """Remove every hop; returns the switches where removal failed (reconciliation retries them
    when they reconnect)."""
    results = await asyncio.gather(*(programmer.remove_channel(e) for e in entries), return_exceptions=True)
    return [e.switch for e, r in zip(entries, results, strict=True) if isinstance(r, BaseException)]


def _two_paths(
    arcs: Sequence[tuple[str, int, str]], source: str, target: str, node_disjoint: bool, count: int = 2
) -> list[list[PortId]] | None:
    """`count` paths from `source` to `target` over `arcs` (switch, port, peer) that share no arc's
    trunk (and no switch but the ends, if node_disjoint), of least total length: successive
    shortest paths of a unit-capacity minimum-cost flow (Suurballe's problem; the graphs are a
    few dozen switches, so Bellman-Ford on the residual graph is plenty). Each path is its
    egress ports, without the destination's own."""
    # Nodes: ("in", s) and ("out", s) per switch, joined by an arc of capacity 1 (node-disjoint)
    # or `count`; each trunk direction an arc of capacity 1, cost 1, out(u) → in(v).
    graph: dict[tuple[str, str], list[_Arc]] = {}

    def add(tail: tuple[str, str], head: tuple[str, str], capacity: int, cost: int, port: int | None) -> None:
        graph.setdefault(tail, [])
        graph.setdefault(head, [])
        graph[tail].append(_Arc(head, capacity, cost, len(graph[head]), port))
        graph[head].append(_Arc(tail, 0, -cost, len(graph[tail]) - 1, None))

    switches = sorted({a for a, _, _ in arcs} | {b for _, _, b in arcs} | {source, target})
    for name in switches:
        through = count if (name in (source, target) or not node_disjoint) else 1
        add(("in", name), ("out", name), through, 0, None)
    for a, port, b in arcs:
        add(("out", a), ("in", b), 1, 1, port)
    start, goal = ("out", source), ("in", target)
    for _ in range(count):
        dist: dict[tuple[str, str], int] = {start: 0}
        back: dict[tuple[str, str], tuple[tuple[str, str], int]] = {}
        for _ in range(len(graph)):
            changed = False
            for node in sorted(dist):
                for i, arc in enumerate(graph[node]):
                    if arc.capacity > 0 and dist[node] + arc.cost < dist.get(arc.head, 1 << 30):
                        dist[arc.head] = dist[node] + arc.cost
                        back[arc.head] = (node, i)
                        changed = True
            if not changed:
                break
        if goal not in dist:
            return None
        node = goal
        while node != start:
            prev, i = back[node]
            arc = graph[prev][i]
            arc.capacity -= 1
            graph[node][arc.reverse].capacity += 1
            node = prev
    paths: list[list[PortId]] = []
    for _ in range(count):
        path: list[PortId] = []
        here = source
        while here != target:
            step = next((a for a in graph[("out", here)] if a.port is not None and a.capacity == 0), None)
            if step is None or step.port is None or len(path) > len(switches):
                return None
            step.capacity = 1  # taken: the next path leaves by another arc
            path.append(PortId(here, step.port))
            here = step.head[1]
        paths.append(path)
    return paths


@dataclass
class _Arc:
    """An arc of _two_paths' residual graph; `reverse` indexes its twin in the head's list."""

    head: tuple[str, str]
    capacity: int
    cost: int
    reverse: int
    port: int | None  # the trunk's egress port (forward arcs only)
