"""Trunks: what the data plane does for the controller's link watch and restoration
(docs/controller.md "Trunks").

- A link probe (EtherType ETHERTYPE_LINK_PROBE) that arrives on any port goes to the
  controller, unchanged, tagged with that port, in the CPU port's top queue; it is never
  forwarded, whatever its destination address.
- A pinned channel leaves by its pin's port, towards its pin's next hop, in its own queue;
  everything else to the same destination follows the route. Excess a channel demotes to best
  effort still follows the pin (the channel's packets keep one path). Without the pin the
  channel follows the route again.
- A pin whose channel is not admitted moves nothing: pins refine admitted channels only.
- A channel is admitted only where its path enters the switch: its entry names the host side
  or a trunk port (`trunk_ports`); its frames arriving any other way go best effort, untouched
  by its meter.
"""

from __future__ import annotations

from scapy.all import Ether  # type: ignore[attr-defined]

from p4runtime_client import MeterEnvelope
from terrapin_base import (
    CPU_PORT,
    PORTS,
    C,
    TerrapinTest,
    generous_envelope,
    host_mac,
    routed,
    sized_udp,
    switch_mac,
    udp_flow_key,
)

FRAME = 400
SPORT, DPORT = 9200, 9201
FLOW = udp_flow_key(SPORT, DPORT)
PINNED_NEXT_HOP = "02:aa:00:00:00:03"


def probe(port: int, payload: bytes) -> bytes:
    l2 = Ether(src=switch_mac(port), dst="01:80:c2:00:00:0e", type=C["ETHERTYPE_LINK_PROBE"])
    return bytes(l2 / payload)


def pinned(frame: bytes, port: int, next_hop: str) -> bytes:
    """What a channel frame must look like leaving by its pin: the pin's next hop, the pin
    port's MAC, TTL - 1."""
    out = routed(Ether(frame), port)
    out[Ether].dst = next_hop
    return bytes(out)


class LinkProbesGoToTheController(TerrapinTest):
    """A probe from every port, of every length the controller could send, reaches the
    controller once with its ingress port and is forwarded nowhere, even when its destination
    is a host's or the switch's own address."""

    def runTest(self) -> None:
        sent = 0
        for port in PORTS:
            for payload in (b"", bytes(range(32)), b"\x5a" * 1400):
                frame = probe(port, payload)
                self.send(port, frame)
                sent += 1
                got = self.sw.packet_in(timeout=3.0)
                self.assertIsNotNone(got, f"no PacketIn for the probe from port {port}")
                assert got is not None
                self.assertEqual(got.metadata.get("ingress_port"), port)
                self.assertEqual(got.payload, frame)
        for dst in (host_mac(2), switch_mac(1)):
            frame = bytes(Ether(src=host_mac(1), dst=dst, type=C["ETHERTYPE_LINK_PROBE"]) / b"probe")
            self.send(1, frame)
            sent += 1
            got = self.sw.packet_in(timeout=3.0)
            assert got is not None
            self.assertEqual(got.payload, frame)
        self.expect_nothing()
        self.assertIsNone(self.sw.packet_in(timeout=0.3))
        self.assertEqual(self.queue_packets(CPU_PORT, C["PRIORITY_RESERVATION"]), sent)
        self.assertEqual(self.drops("DROP_UNSUPPORTED"), 0)


class PinnedChannelTest(TerrapinTest):
    CHANNEL = 41
    PRIORITY = 4

    def channel_frame(self, sport: int = SPORT) -> bytes:
        return bytes(sized_udp(1, 2, FRAME, sport=sport, dport=DPORT))

    def pin(self, port: int, next_hop: str):  # type: ignore[no-untyped-def]
        return self.sw.insert(
            "channel_paths",
            self.selector_match(1, 2, 17, FLOW),
            "pin",
            {"port": port, "next_hop_mac": next_hop},
        )


class PinnedChannelLeavesByItsPin(PinnedChannelTest):
    """Pinned to port 3 the channel leaves there, to the pin's next hop, in its queue; another
    flow between the same hosts, and the channel once unpinned, leave by the route (port 2)."""

    def runTest(self) -> None:
        self.admit(1, 2, 17, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY, meter=generous_envelope())
        pin = self.pin(3, PINNED_NEXT_HOP)
        frame = self.channel_frame()
        for _ in range(3):
            self.send(1, frame)
            self.expect(pinned(frame, 3, PINNED_NEXT_HOP), 3)
        other = self.channel_frame(sport=SPORT + 1)
        self.send(1, other)
        self.expect(routed(Ether(other), 2), 2)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(3, self.PRIORITY), 3)
        self.assertEqual(self.queue_packets(2, self.PRIORITY), 0)
        self.assertEqual(self.queue_packets(2, C["PRIORITY_BEST_EFFORT"]), 1)

        self.sw.delete(pin)
        self.send(1, frame)
        self.expect(routed(Ether(frame), 2), 2)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(2, self.PRIORITY), 1)


class DemotedExcessFollowsThePin(PinnedChannelTest):
    """An envelope of two frames, excess demoted: eight back-to-back frames all leave by the
    pin, two in the channel's queue and six at best effort; none by the route."""

    def runTest(self) -> None:
        envelope = MeterEnvelope(cir=100, cburst=2 * FRAME, pir=100, pburst=2 * FRAME)
        self.admit(
            1,
            2,
            17,
            FLOW,
            channel_id=self.CHANNEL,
            priority=self.PRIORITY,
            meter=envelope,
            on_yellow=C["EXCESS_DEMOTE"],
            on_red=C["EXCESS_DEMOTE"],
        )
        self.pin(4, PINNED_NEXT_HOP)
        frame = self.channel_frame()
        self.send(1, frame, count=8)
        got = self.collect(4, idle=1.0)
        self.assertEqual([p for _, p in got], [pinned(frame, 4, PINNED_NEXT_HOP)] * 8)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(4, self.PRIORITY), 2)
        self.assertEqual(self.queue_packets(4, C["PRIORITY_BEST_EFFORT"]), 6)
        self.assertEqual(self.sw.counter("channel_red", self.CHANNEL)[0], 6)


class PinWithoutAChannelMovesNothing(PinnedChannelTest):
    """A pin for a flow with no admitted channel leaves that flow on its route at best
    effort."""

    def runTest(self) -> None:
        self.pin(3, PINNED_NEXT_HOP)
        frame = self.channel_frame()
        self.send(1, frame)
        self.expect(routed(Ether(frame), 2), 2)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(2, C["PRIORITY_BEST_EFFORT"]), 1)
        self.assertEqual(self.queue_packets(3, C["PRIORITY_BEST_EFFORT"]), 0)


class ChannelsAdmitOnlyWhereTheirPathEnters(PinnedChannelTest):
    """A channel's entry names where its packets enter the switch. With port 3 a trunk
    (`trunk_ports`): an entry for the host side admits the channel's frames from host port 1
    but not those that come back in by trunk 3, which go best effort and leave its meter
    untouched (after a restoration, the channel's own best-effort frames came back round a ring
    to its first switch and took its tokens from the conforming ones); an entry for trunk 3
    admits the frames from port 3, not those from port 4, which is no trunk (host side)."""

    def runTest(self) -> None:
        self.sw.insert("trunk_ports", {"port": 3}, "from_trunk", {})
        two_frames = MeterEnvelope(cir=100, cburst=2 * FRAME, pir=100, pburst=2 * FRAME)
        entry = self.admit(1, 2, 17, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY, meter=two_frames)
        frame = self.channel_frame()
        for _ in range(3):
            self.send(3, frame)
            self.expect(routed(Ether(frame), 2), 2)
        self.assertEqual(self.queue_packets(2, C["PRIORITY_BEST_EFFORT"]), 3)
        self.assertEqual(self.sw.direct_counter(entry)[0], 0)
        for _ in range(3):  # the meter's two frames are all there; the third is excess
            self.send(1, frame)
        self.assertEqual(len(self.collect(2, idle=0.5)), 2)
        self.assertEqual(self.queue_packets(2, self.PRIORITY), 2)
        self.assertEqual(self.drops("DROP_POLICED"), 1)

        self.sw.delete(entry)
        self.admit(1, 2, 17, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY, meter=generous_envelope(),
                   in_port=3)
        self.send(3, frame)
        self.expect(routed(Ether(frame), 2), 2)
        self.send(4, frame)
        self.expect(routed(Ether(frame), 2), 2)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(2, self.PRIORITY), 3)
        self.assertEqual(self.queue_packets(2, C["PRIORITY_BEST_EFFORT"]), 4)
