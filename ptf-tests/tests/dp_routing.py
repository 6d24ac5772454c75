"""IPv4 routing: LPM, next-hop and port MAC rewrite, TTL, header checksum (options too), 802.1Q."""

from __future__ import annotations

from scapy.all import IP, Dot1Q, Ether  # type: ignore[attr-defined]
from scapy.layers.inet import IPOption_Router_Alert

from terrapin_base import TerrapinTest, host_ip, host_mac, ipv4_packet, routed, switch_mac


class RouteRewritesMacsTtlAndChecksum(TerrapinTest):
    """A routed packet leaves by the LPM port with the next hop's MAC, the port's own MAC,
    TTL - 1 and a correct header checksum, and nowhere else."""

    def runTest(self) -> None:
        pkt = ipv4_packet(1, host_ip(2), ttl=64)
        self.send(1, pkt)
        exp = routed(pkt, 2)
        self.assertEqual(exp[Ether].src, switch_mac(2))
        self.assertEqual(exp[Ether].dst, host_mac(2))
        self.assertEqual(exp[IP].ttl, 63)
        self.assertNotEqual(exp[IP].chksum, Ether(bytes(pkt))[IP].chksum)
        self.expect(exp, 2)
        self.expect_nothing()
        # Host 3 replies the other way round.
        back = ipv4_packet(3, host_ip(1), ttl=5)
        self.send(3, back)
        self.expect(routed(back, 1), 1)
        self.expect_nothing()


class LongestPrefixWins(TerrapinTest):
    def runTest(self) -> None:
        self.sw.insert("routes", {"dst_addr": ("10.0.2.128", 25)}, "route",
                       {"port": 3, "next_hop_mac": host_mac(3)})
        far = ipv4_packet(1, "10.0.2.200")
        near = ipv4_packet(1, "10.0.2.5")
        self.send(1, far)
        self.expect(routed(far, 3), 3)
        self.send(1, near)
        self.expect(routed(near, 2), 2)
        self.expect_nothing()


class NoRouteIsDropped(TerrapinTest):
    def runTest(self) -> None:
        self.send(1, ipv4_packet(1, "192.168.7.7"), count=3)
        self.settle()
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_NO_ROUTE"), 3)


class TtlExpiresAtZero(TerrapinTest):
    """TTL 2 leaves with TTL 1; TTL 1 and 0 would leave with 0 and are dropped (RFC 1812)."""

    def runTest(self) -> None:
        last_hop = ipv4_packet(1, host_ip(2), ttl=2)
        self.send(1, last_hop)
        exp = routed(last_hop, 2)
        self.assertEqual(exp[IP].ttl, 1)
        self.expect(exp, 2)
        self.send(1, ipv4_packet(1, host_ip(2), ttl=1))
        self.send(1, ipv4_packet(1, host_ip(2), ttl=0))
        self.settle()
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_TTL_EXPIRED"), 2)


class Ipv4OptionsAreCarriedAndChecksummed(TerrapinTest):
    """Options are parsed (ihl 6 and 15), kept, and covered by the recomputed checksum."""

    def runTest(self) -> None:
        for options in ([IPOption_Router_Alert()], [IPOption_Router_Alert()] * 10):
            pkt = ipv4_packet(1, host_ip(2), options=options)
            ihl = Ether(bytes(pkt))[IP].ihl
            self.assertIn(ihl, (6, 15))
            self.send(1, pkt)
            exp = routed(pkt, 2)
            self.assertEqual(exp[IP].ihl, ihl)
            self.expect(exp, 2)
        self.expect_nothing()


class BadHeaderChecksumIsDropped(TerrapinTest):
    def runTest(self) -> None:
        plain = Ether(bytes(ipv4_packet(1, host_ip(2))))
        plain[IP].chksum ^= 0x0101
        with_options = Ether(bytes(ipv4_packet(1, host_ip(2), options=[IPOption_Router_Alert()])))
        with_options[IP].chksum ^= 0x0001
        self.send(1, plain)
        self.send(1, with_options)
        self.settle()
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_BAD_CHECKSUM"), 2)


class VlanTaggedPacketIsRouted(TerrapinTest):
    """An 802.1Q-tagged IPv4 packet is parsed through its tag and routed with the tag kept."""

    def runTest(self) -> None:
        pkt = ipv4_packet(1, host_ip(2), vlan=42)
        self.send(1, pkt)
        exp = routed(pkt, 2)
        self.assertEqual(exp[Dot1Q].vlan, 42)
        self.expect(exp, 2)
        self.expect_nothing()


class NonFirstFragmentIsRoutedWithoutTransportHeader(TerrapinTest):
    """A later fragment carries no transport header: 8 bytes of XTP payload is not a
    truncated XTP header."""

    def runTest(self) -> None:
        frag = Ether(src=host_mac(1), dst=switch_mac(1)) / IP(
            src=host_ip(1), dst=host_ip(2), proto=36, frag=100, ttl=9) / (b"\x01" * 8)
        self.send(1, frag)
        self.expect(routed(frag, 2), 2)
        self.expect_nothing()
        udp_frag = Ether(src=host_mac(1), dst=switch_mac(1)) / IP(
            src=host_ip(1), dst=host_ip(2), proto=17, frag=3, ttl=9) / (b"\x02" * 4)
        self.send(1, udp_frag)
        self.expect(routed(udp_frag, 2), 2)
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_MALFORMED"), 0)

