"""ARP: the switch answers requests for the addresses in `arp_replies`, and nothing else."""

from __future__ import annotations

from scapy.all import ARP, Ether  # type: ignore[attr-defined]

from terrapin_base import C, TerrapinTest, gateway_ip, host_ip, host_mac, switch_mac


def arp_request(port: int, target: str) -> Ether:
    return Ether(src=host_mac(port), dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=host_mac(port), psrc=host_ip(port), hwdst="00:00:00:00:00:00", pdst=target)


class GatewayArpIsAnswered(TerrapinTest):
    """The reply goes back out of the asking port, from the port's MAC, in the top queue."""

    def runTest(self) -> None:
        for port in (1, 3):
            self.send(port, arp_request(port, gateway_ip(port)))
            reply = Ether(src=switch_mac(port), dst=host_mac(port)) / ARP(
                op=2, hwsrc=switch_mac(port), psrc=gateway_ip(port), hwdst=host_mac(port),
                pdst=host_ip(port))
            self.expect(reply, port)
            self.expect_nothing()
            self.assertEqual(self.queue_packets(port, C["PRIORITY_RESERVATION"]), 1)


class UnlistedAddressIsNotAnswered(TerrapinTest):
    def runTest(self) -> None:
        self.send(1, arp_request(1, "10.0.1.99"))
        self.settle()
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_ARP_UNANSWERED"), 1)


class AnswerComesFromTheTable(TerrapinTest):
    """Any address the controller lists is answered with the MAC it gives (here a host's own,
    as for a flat subnet)."""

    def runTest(self) -> None:
        self.sw.insert("arp_replies", {"target_ip": host_ip(2)}, "answer_arp", {"mac": host_mac(2)})
        self.send(1, arp_request(1, host_ip(2)))
        reply = Ether(src=host_mac(2), dst=host_mac(1)) / ARP(
            op=2, hwsrc=host_mac(2), psrc=host_ip(2), hwdst=host_mac(1), pdst=host_ip(1))
        self.expect(reply, 1)
        self.expect_nothing()


class ArpRepliesFromHostsAreDropped(TerrapinTest):
    def runTest(self) -> None:
        gratuitous = Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(
            op=2, hwsrc=host_mac(1), psrc=host_ip(1), hwdst=host_mac(1), pdst=host_ip(1))
        self.send(1, gratuitous)
        self.settle()
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_UNSUPPORTED"), 1)
