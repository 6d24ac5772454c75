"""An in-process stand-in for the switches layer, used only for faults that cannot be caused
for real (a write failing on one switch of four, a switch vanishing mid-setup) and for tests
that need no data plane. Integration tests use the real terrapin-switch instead."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from terrapin.api.reservation_bodies import ReservationIn
from terrapin.config import Config, parse_config
from terrapin.paths import ChannelEntry, ChannelSelector
from terrapin.switches import ChannelCounters, MonitorSample, QueueBound, QueueTelemetry, RecoveryCounters

# A channel h1 → h2 that fits every test topology here (REST body of POST /reservations): the
# example the API documents (so the tests that post it keep the example valid), at a rate and
# burst the 8 Mbit/s chains take.
RESERVATION: dict[str, Any] = ReservationIn.model_json_schema()["example"] | {"rate": 100_000, "burst": 6000}


class InjectedFault(Exception):
    pass


@dataclass
class FakeFabric:
    names: list[str]
    # Per switch, its entries by selector (a protected channel's copy in transit by (selector,
    # member): a switch on both its paths relays two).
    entries: dict[str, dict[Any, ChannelEntry]] = field(default_factory=dict)
    fail_install_on: set[str] = field(default_factory=set)
    vanish_on_install: set[str] = field(default_factory=set)  # the connection breaks mid-write
    fail_remove_on: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    maxima_cleared: list[tuple[str, list[int]]] = field(default_factory=list)
    sent: list[tuple[str, bytes]] = field(default_factory=list)
    writes: int = 0
    reconciled: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.names:
            self.entries.setdefault(name, {})

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def is_ready(self, name: str) -> bool:
        return name in self.entries and name not in self.down

    def is_connected(self, name: str) -> bool:
        return self.is_ready(name)

    def precompute(self, desired: Mapping[str, Sequence[ChannelEntry]], encode: bool = True) -> int:
        return 0  # nothing is encoded here

    def why_not_ready(self, name: str) -> str | None:
        return None if self.is_ready(name) else f"{name} is down"

    async def install_channel(self, entry: ChannelEntry) -> None:
        self.writes += 1
        if entry.switch in self.vanish_on_install:
            self.down.add(entry.switch)
        if entry.switch in self.fail_install_on or entry.switch in self.down:
            raise InjectedFault(f"write to {entry.switch} failed")
        table = self.entries[entry.switch]
        if fake_key(entry) in table:
            raise InjectedFault("ALREADY_EXISTS")
        table[fake_key(entry)] = entry

    async def remove_channel(self, entry: ChannelEntry) -> None:
        if entry.switch in self.fail_remove_on or entry.switch in self.down:
            raise InjectedFault(f"delete on {entry.switch} failed")
        self.entries[entry.switch].pop(fake_key(entry), None)

    async def packet_out(self, name: str, frame: bytes, egress_port: int | None = None) -> None:
        self.sent.append((name, frame))

    # The ports' links as the switches report them (gNMI): (switch, port) -> up; unknown if absent.
    carrier: dict[tuple[str, int], bool] = field(default_factory=dict)

    def port_carrier(self, name: str, port: int) -> bool | None:
        return None if name in self.down else self.carrier.get((name, port))

    def fence_writes(self, may_write: Callable[[], bool]) -> None:
        self.may_write = may_write

    async def round_trip(self, name: str) -> None:
        if name in self.down:
            raise InjectedFault(f"{name} is down")

    # A reconciliation makes a switch's channel entries the desired ones (`desired`, when a test
    # gives it: the reservation service's desired_entries) and is recorded, in order.
    desired: Callable[[str], Sequence[ChannelEntry]] | None = None
    reconciliations: list[str] = field(default_factory=list)

    async def reconcile(self, name: str) -> Any:
        if name in self.down:
            raise InjectedFault(f"{name} is down")
        self.reconciliations.append(name)
        if self.desired is not None:
            self.entries[name] = {fake_key(e): e for e in self.desired(name)}
        return None

    async def queue_telemetry(self, name: str, ports: list[int]) -> list[QueueTelemetry]:
        if name in self.down:
            raise InjectedFault(f"{name} is down")
        return [QueueTelemetry(p, q, 3, 1000, 10, 10_000) for p in ports for q in range(8)]

    async def channel_counters(
        self, name: str, selector: ChannelSelector, in_port: int, channel_id: int
    ) -> ChannelCounters:
        if name in self.down:
            raise InjectedFault(f"{name} is down")
        return ChannelCounters(5, 5000, 0, 0)

    async def drop_counters(self, name: str) -> dict[str, int]:
        return {"malformed": 0}

    # ---- the guarantee monitor: bounds are kept, samples are what a test scripted -------------

    bounds: dict[str, list[QueueBound]] = field(default_factory=dict)
    samples: dict[str, list[MonitorSample]] = field(default_factory=dict)
    registers: bool = True

    async def sync_queue_bounds(self, name: str, bounds: Sequence[QueueBound]) -> int:
        if name in self.down:
            raise InjectedFault(f"{name} is down")
        self.bounds[name] = list(bounds)
        return len(bounds)

    def stage_bounds(
        self,
        name: str,
        bounds: Sequence[QueueBound],
        installed: Mapping[tuple[int, int], int],
    ) -> asyncio.Future[None]:
        staged: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if name in self.down:
            staged.set_exception(InjectedFault(f"{name} is down"))
        else:
            self.bounds[name] = list(bounds)
            staged.set_result(None)
        return staged

    async def monitor_sample(
        self,
        name: str,
        cells: Sequence[tuple[int, int]],
        channel_ids: Sequence[int],
        recovering: Sequence[int] = (),
    ) -> MonitorSample:
        if name in self.down:
            raise InjectedFault(f"{name} is down")
        scripted = self.samples.get(name)
        if scripted:
            return scripted.pop(0) if len(scripted) > 1 else scripted[0]
        recovery = {cid: RecoveryCounters(7, 7, 0, 0, 1, 0) for cid in recovering} if recovering else None
        return MonitorSample(name, 0.0, 0.0, {}, {}, None, None, {}, {}, recovery)

    async def reset_queue_telemetry(self, name: str, ports: list[int]) -> None:
        if name in self.down:
            raise InjectedFault(f"{name} is down")
        self.maxima_cleared.append((name, list(ports)))

    def reads_registers(self, name: str) -> bool:
        return self.registers


def fake_key(entry: ChannelEntry) -> Any:
    return entry.selector if entry.relay is None else (entry.selector, entry.relay.member)


def chain_config(switches: int = 4, rate_bps: int = 100_000_000, **admission: Any) -> Config:
    """h1 — s1 — s2 — … — sN — h2, plus h3 on s1: the 4-switch chain of seed 003 §6. Without the
    link watch: a line has no other path, and the hand-computed bounds of the tests on it leave
    out the probes (ring_config has both)."""
    sw: list[dict[str, Any]] = []
    for i in range(1, switches + 1):
        ports: list[dict[str, Any]] = []
        if i == 1:
            ports.append(
                dict(number=1, mac="02:00:00:00:01:01", rate_bps=rate_bps, peer="h1", gateway_ip="10.0.1.1")
            )
            ports.append(
                dict(number=3, mac="02:00:00:00:01:03", rate_bps=rate_bps, peer="h3", gateway_ip="10.0.3.1")
            )
        if i > 1:
            ports.append(dict(number=1, mac=f"02:00:00:00:0{i}:01", rate_bps=rate_bps, peer=f"s{i - 1}:2"))
        if i < switches:
            ports.append(dict(number=2, mac=f"02:00:00:00:0{i}:02", rate_bps=rate_bps, peer=f"s{i + 1}:1"))
        else:
            ports.append(
                dict(
                    number=2, mac=f"02:00:00:00:0{i}:02", rate_bps=rate_bps, peer="h2", gateway_ip="10.0.2.1"
                )
            )
        sw.append(dict(name=f"s{i}", address=f"127.0.0.1:{19710 + i}", device_id=i, ports=ports))
    return parse_config(
        dict(
            store=":memory:",
            rest=dict(token="secret-token"),
            admission=admission,
            links=dict(enabled=False),
            switches=sw,
            hosts=[
                dict(name="h1", ip="10.0.1.2", mac="0a:00:00:00:00:01", switch="s1", port=1),
                dict(name="h2", ip="10.0.2.2", mac="0a:00:00:00:00:02", switch=f"s{switches}", port=2),
                dict(name="h3", ip="10.0.3.2", mac="0a:00:00:00:00:03", switch="s1", port=3),
            ],
        )
    )


def ring_config(
    switches: int = 4,
    rate_bps: int = 100_000_000,
    chords: Sequence[tuple[int, int]] = (),
    **admission: Any,
) -> Config:
    """s1 — s2 — … — sN — s1 in a ring, host hi (10.0.i.2) on port 1 of si; port 2 leads to the
    next switch, port 3 to the one before: every pair of switches has two link-disjoint paths.
    Each chord (i, j) adds a trunk between si and sj on their next free ports (a mesh of rings;
    a chord that repeats a trunk, or joins a switch to itself, is left out)."""
    sw: list[dict[str, Any]] = []
    hosts: list[dict[str, Any]] = []
    ports_of: dict[int, list[dict[str, Any]]] = {}
    for i in range(1, switches + 1):
        after, before = i % switches + 1, (i - 2) % switches + 1
        ports_of[i] = [
            dict(
                number=1,
                mac=f"02:00:00:00:{i:02x}:01",
                rate_bps=rate_bps,
                peer=f"h{i}",
                gateway_ip=f"10.0.{i}.1",
            ),
            dict(number=2, mac=f"02:00:00:00:{i:02x}:02", rate_bps=rate_bps, peer=f"s{after}:3"),
            dict(number=3, mac=f"02:00:00:00:{i:02x}:03", rate_bps=rate_bps, peer=f"s{before}:2"),
        ]
    linked = {frozenset((i, i % switches + 1)) for i in range(1, switches + 1)}
    for a, b in chords:
        if a == b or frozenset((a, b)) in linked or not (1 <= a <= switches and 1 <= b <= switches):
            continue
        linked.add(frozenset((a, b)))
        pa, pb = len(ports_of[a]) + 1, len(ports_of[b]) + 1
        mac = "02:00:00:00:{:02x}:{:02x}"
        ports_of[a].append(dict(number=pa, mac=mac.format(a, pa), rate_bps=rate_bps, peer=f"s{b}:{pb}"))
        ports_of[b].append(dict(number=pb, mac=mac.format(b, pb), rate_bps=rate_bps, peer=f"s{a}:{pa}"))
    for i in range(1, switches + 1):
        sw.append(dict(name=f"s{i}", address=f"127.0.0.1:{19810 + i}", device_id=i, ports=ports_of[i]))
        hosts.append(
            dict(name=f"h{i}", ip=f"10.0.{i}.2", mac=f"0a:00:00:00:00:{i:02x}", switch=f"s{i}", port=1)
        )
    return parse_config(
        dict(store=":memory:", rest=dict(token="secret-token"), admission=admission, switches=sw, hosts=hosts)
    )
