"""The example reservations `make run` prints: one over REST, one in band, both between the
banner's pair of hosts and sized for the run's own configuration by the controller's own
admission tests, so each is admitted when pasted, on every topology and either switch.

The envelope starts from seed 000's video channel (9 Mbit/s, a burst of six packets of the MTU,
priority 6) and steps down a ladder of round rates, then of bursts, until the path admits four
such channels side by side: the two examples then fit, pasted in either order, and leave room
for as many again. Reservations already in the store (a run keeps them across restarts) are
charged first, and the examples never reuse one of their flows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from terrapin.admission import AdmissionLedger
from terrapin.admission.model import (
    METER,
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    Policer,
    PortId,
)
from terrapin.config import Config, HostConfig
from terrapin.constants import IP_PROTO_UDP
from terrapin.paths import NoRoute, Topology

SEED_RATE_BPS = 9_000_000  # seed 000's video reservation, §4.3.2
SEED_BURST_PACKETS = 6  # its 27,000-byte burst: six 4,500-byte FDDI packets
PRIORITY = 6
# Four examples' worth must fit: the REST one, the in-band one, and as much again for a
# person's own first try.
SIDE_BY_SIDE = 4
# UDP ports of the REST and in-band examples (RTP's even ports); another pair is taken when a
# stored reservation holds the flow already.
REST_PORT = 5004
INBAND_PORT = 5006


@dataclass(frozen=True)
class Example:
    """One envelope, and the two flows (REST, in band) the banner reserves with it."""

    src: HostConfig
    dst: HostConfig
    rate: int  # bytes/s
    burst: int  # bytes
    max_packet: int
    rest_port: int
    inband_port: int
    priority: int = PRIORITY

    def rest_body(self) -> dict[str, Any]:
        """The JSON body of the printed `curl -X POST /reservations`."""
        return {
            "src": self.src.ip,
            "dst": self.dst.ip,
            "protocol": "udp",
            "src_port": self.rest_port,
            "dst_port": self.rest_port,
            "priority": self.priority,
            "rate": self.rate,
            "burst": self.burst,
            "max_packet": self.max_packet,
        }

    def inband_request(self) -> str:
        """The printed `terrapin-host request` line, as typed after the host's name."""
        return (
            f"terrapin-host request --dst {self.dst.ip} --protocol udp --sport {self.inband_port} "
            f"--dport {self.inband_port} --priority {self.priority} --rate {self.rate} "
            f"--burst {self.burst} --max-packet {self.max_packet}"
        )

    def envelope_text(self) -> str:
        """E.g. "9 Mbit/s = 1,125,000 B/s, 27,000-byte burst, priority 6"."""
        return (
            f"{bit_rate_text(self.rate * 8)} = {self.rate:,} B/s, {self.burst:,}-byte burst, "
            f"priority {self.priority}"
        )


def bit_rate_text(bps: int) -> str:
    for unit, scale in (("Gbit/s", 10**9), ("Mbit/s", 10**6), ("kbit/s", 10**3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps} bit/s"


def rate_ladder(top_bps: int = SEED_RATE_BPS) -> Iterator[int]:
    """Round rates in bytes/s from `top_bps` down: 9, 8, ... 1 Mbit/s, 900 ... 100 kbit/s, ...
    to 1 kbit/s (125 B/s)."""
    for exponent in range(6, 2, -1):
        for digit in range(9, 0, -1):
            bps = digit * 10**exponent
            if bps <= top_bps:
                yield bps // 8


def envelope(priority: int, rate: int, burst: int, max_packet: int) -> ChannelEnvelope:
    return ChannelEnvelope(priority, rate, burst, max_packet)


def stored_envelope(reservation: Mapping[str, Any]) -> ChannelEnvelope:
    """A reservation as GET /reservations lists it, back as the envelope it asked for."""
    kind = reservation.get("policer") or METER
    policer = Policer(
        kind,
        window_us=reservation.get("window_us") or 0,
        count_packets=reservation.get("window_counts") == "packets",
        xmin_us=reservation.get("xmin_us") or 0,
        xave_us=reservation.get("xave_us") or 0,
        interval_us=reservation.get("interval_us") or 0,
    )
    return ChannelEnvelope(
        int(reservation["priority"]),
        int(reservation["requested_rate"]),
        int(reservation["requested_burst"]),
        int(reservation["max_packet"]),
        int(reservation.get("delay_bound_us") or 0),
        int(reservation.get("avg_idle_us") or 0),
        policer,
    )


class Planner:
    """Admission on the run's configuration, with what the store holds already charged."""

    def __init__(self, config: Config, stored: Sequence[Mapping[str, Any]] = ()) -> None:
        self.config = config
        self.topology = Topology(config)
        self.stored = list(stored)

    def ledger(self) -> AdmissionLedger:
        """A fresh ledger of the configuration's ports carrying every stored reservation it can
        still route (one it cannot, for a topology changed since, takes nothing)."""
        ledger = AdmissionLedger(self.config.port_models())
        for reservation in self.stored:
            try:
                path = self.topology.path(str(reservation["src"]), str(reservation["dst"]))
                key = ChannelKey(str(reservation["initiator"]), int(reservation["context"]))
                ledger.admit(key, path, stored_envelope(reservation))
            except (NoRoute, KeyError, ValueError, TypeError):
                continue
        return ledger

    def path(self, src: HostConfig, dst: HostConfig) -> list[PortId]:
        hops: list[PortId] = self.topology.path(src.ip, dst.ip)
        return hops

    def side_by_side(
        self, path: Sequence[PortId], env: ChannelEnvelope, count: int
    ) -> list[Allocation] | str:
        """`count` channels of `env` admitted one after another beside the stored ones: their
        allocations, or the first denial's description."""
        ledger = self.ledger()
        admitted = []
        for n in range(count):
            decision = ledger.admit(ChannelKey("0.0.0.0", n + 1), path, env)
            if not isinstance(decision, Allocation):
                return str(decision.primary.describe())
            admitted.append(decision)
        return admitted

    def free_port(self, src: HostConfig, dst: HostConfig, start: int, taken: set[int]) -> int:
        """The first even UDP port from `start` whose flow src -> dst no stored reservation holds."""
        used = {
            int(r["src_port"])
            for r in self.stored
            if str(r.get("src")) == src.ip
            and str(r.get("dst")) == dst.ip
            and r.get("protocol") == IP_PROTO_UDP
        }
        port = start
        while port in used or port in taken:
            port += 2
        return port


class NoExample(Exception):
    """Even the smallest envelope is not admitted on the example's path."""


def derive(config: Config, src_name: str, dst_name: str, stored: Sequence[Mapping[str, Any]] = ()) -> Example:
    """The example between the hosts named src_name and dst_name for this configuration, beside
    the `stored` reservations (GET /reservations); see the module's comment."""
    hosts = {h.name: h for h in config.hosts}
    src, dst = hosts[src_name], hosts[dst_name]
    planner = Planner(config, stored)
    path = planner.path(src, dst)
    max_packet = config.admission.largest_packet
    last = "no envelope was tried"
    for rate in rate_ladder():
        for packets in range(SEED_BURST_PACKETS, 0, -1):
            env = envelope(PRIORITY, rate, packets * max_packet, max_packet)
            outcome = planner.side_by_side(path, env, SIDE_BY_SIDE)
            if isinstance(outcome, str):
                last = outcome
                continue
            rest_port = planner.free_port(src, dst, REST_PORT, set())
            inband_port = planner.free_port(src, dst, INBAND_PORT, {rest_port})
            return Example(src, dst, rate, packets * max_packet, max_packet, rest_port, inband_port)
    raise NoExample(f"no example fits between {src.name} and {dst.name}: {last}")
