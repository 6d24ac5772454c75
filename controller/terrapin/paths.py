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


class NoRoute(Exception):
    """No configured path between two addresses."""


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
        return Forwarding(tuple(routes), arps, macs)

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
    # Where the channel's admitted path leaves its destination's route at this switch (a
    # restoration moved it, and the route has moved back since): the port and the next hop's
    # MAC its packets are sent to instead (`channel_paths`). None: it follows the route.
    pin: tuple[int, str] | None = None

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
                    self.pin,
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
