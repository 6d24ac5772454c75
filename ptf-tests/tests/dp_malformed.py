"""Malformed, truncated and unsupported frames are dropped and counted, and do no harm: the
switch keeps routing and answering the controller afterwards."""

from __future__ import annotations

from scapy.all import ARP, IP, UDP, Ether, IPv6  # type: ignore[attr-defined]

from terrapin_base import XTP, TerrapinTest, host_ip, host_mac, ipv4_packet, routed, switch_mac


def l2(port: int = 1, ether_type: int = 0x0800) -> bytes:
    return bytes(Ether(src=host_mac(port), dst=switch_mac(port), type=ether_type))


def ipv4_header(**fields: object) -> bytes:
    """A 20-byte IPv4 header to host 2 with a correct checksum over the given fields."""
    return bytes(IP(src=host_ip(1), dst=host_ip(2), **fields))[:20]


def malformed_frames() -> dict[str, bytes]:
    good = bytes(ipv4_packet(1, host_ip(2)))
    udp_payload = bytes(UDP(sport=1, dport=2) / b"x")
    return {
        # (Linux refuses to send a frame shorter than an Ethernet header.)
        "Ethernet header only": l2(),
        "IPv4 header cut short": l2() + ipv4_header(len=40)[:12],
        "IPv4 version 6": l2() + bytes([0x65]) + ipv4_header(len=28)[1:] + udp_payload[:8],
        "IPv4 ihl 4": l2() + bytes([0x44]) + ipv4_header(len=28)[1:] + udp_payload[:8],
        "total length beyond the frame": l2() + ipv4_header(len=400, proto=17) + udp_payload,
        "total length inside the header": l2() + ipv4_header(len=12, proto=17) + udp_payload,
        "options beyond the frame": l2() + bytes(IP(src=host_ip(1), dst=host_ip(2), ihl=15,
                                                    len=60))[:20] + b"\x01" * 8,
        "XTP header cut short": l2() + bytes(IP(src=host_ip(1), dst=host_ip(2), proto=36) / (b"\x00" * 20)),
        "UDP header cut short": l2() + bytes(IP(src=host_ip(1), dst=host_ip(2), proto=17) / (b"\x00" * 4)),
        "TCP header cut short": l2() + bytes(IP(src=host_ip(1), dst=host_ip(2), proto=6) / (b"\x00" * 12)),
        "ARP cut short": bytes(Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.1.1"))[:30],
        "ARP for another hardware": bytes(Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") /
                                          ARP(hwtype=6, hwlen=6, plen=4, pdst="10.0.1.1")),
        "good frame cut short": good[:len(good) - 30],
    }


class MalformedFramesAreDroppedWithoutHarm(TerrapinTest):
    def runTest(self) -> None:
        frames = malformed_frames()
        for frame in frames.values():
            self.send(1, frame)
        self.send(1, bytes(Ether(src=host_mac(1), dst=switch_mac(1)) / IPv6(dst="fe80::1") / UDP()))
        self.send(1, l2(ether_type=0x88CC) + b"\x02\x07\x04" + b"\x00" * 40)  # LLDP
        self.settle()
        self.expect_nothing()
        self.assertIsNone(self.sw.packet_in(timeout=0.2))
        self.assertEqual(self.drops("DROP_MALFORMED"), len(frames))
        self.assertEqual(self.drops("DROP_UNSUPPORTED"), 2)
        # The switch still routes, and still answers the controller.
        after = ipv4_packet(2, host_ip(3), proto_layer=XTP(key=1, sort=0))
        self.send(2, after)
        self.expect(routed(after, 3), 3)
        self.expect_nothing()
        self.assertEqual(len(self.sw.table_entries("routes")), 4)
