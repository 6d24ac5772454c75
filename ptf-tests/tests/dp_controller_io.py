"""Controller I/O: reservation messages reach the controller as PacketIn with their ingress
port; PacketOut sends a packet out of a chosen port, or through the routing pipeline."""

from __future__ import annotations

from scapy.all import IP, Ether  # type: ignore[attr-defined]

from terrapin_base import (
    CPU_PORT,
    C,
    Reservation,
    TerrapinTest,
    host_ip,
    host_mac,
    ipv4_packet,
    routed,
    switch_mac,
)


def reservation_frame(port: int, dst: str, code: int, **fields: object) -> Ether:
    msg = Reservation(code=code, context=77, initiator=host_ip(port), destination=dst,
                      protocol=17, priority=3, flow_key=(5000 << 16) | 6000, rate=125_000,
                      burst=9000, max_packet=1500, **fields)
    return Ether(src=host_mac(port), dst=switch_mac(port)) / IP(src=host_ip(port), dst=dst, proto=1) / msg


class ReservationMessagesGoToTheController(TerrapinTest):
    """Every reservation message code reaches the controller unchanged, tagged with the
    port it arrived on, in the CPU port's top queue; none is forwarded."""

    def runTest(self) -> None:
        sent = 0
        for code in range(C["RESV_REQUEST_ADMIT"], C["RESV_RECVD_CLOSE"] + 1):
            port = 1 + code % 4
            frame = reservation_frame(port, host_ip(1 + (code + 1) % 4), code)
            self.assertEqual(len(frame[Reservation]), 56)
            self.send(port, frame)
            sent += 1
            got = self.sw.packet_in(timeout=3.0)
            self.assertIsNotNone(got, f"no PacketIn for code {code}")
            assert got is not None
            self.assertEqual(got.metadata.get("ingress_port"), port)
            self.assertEqual(got.payload, bytes(frame))
        self.expect_nothing()
        self.assertEqual(self.queue_packets(CPU_PORT, C["PRIORITY_RESERVATION"]), sent)


class MalformedReservationMessagesAreDropped(TerrapinTest):
    """Truncated messages, unknown codes and versions never reach the controller."""

    def runTest(self) -> None:
        whole = reservation_frame(2, host_ip(1), C["RESV_REQUEST_ADMIT"])
        icmp_at = len(whole) - 56
        truncated = Ether(bytes(whole)[:icmp_at + 40])
        truncated[IP].len = None  # a consistent IPv4 header around a short message
        truncated[IP].chksum = None
        bad = [
            Ether(bytes(truncated)),
            reservation_frame(2, host_ip(1), 0),
            reservation_frame(2, host_ip(1), 8),
            reservation_frame(2, host_ip(1), C["RESV_REQUEST_ADMIT"], version=2),
        ]
        for frame in bad:
            self.send(2, frame)
        self.settle(port=2, dst_port=1)
        self.assertIsNone(self.sw.packet_in(timeout=0.5))
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_MALFORMED"), len(bad))
        # An ordinary ICMP message of another type is routed, not punted.
        echo = Ether(src=host_mac(2), dst=switch_mac(2)) / IP(src=host_ip(2), dst=host_ip(1), proto=1) / \
            bytes([8, 0, 0xF7, 0xFF, 0, 0, 0, 0])
        self.send(2, echo)
        self.expect(routed(echo, 1), 1)
        self.assertIsNone(self.sw.packet_in(timeout=0.3))


class PacketOutToAChosenPort(TerrapinTest):
    """A direct PacketOut leaves unchanged by the port named in its header, at the top
    priority, and nowhere else."""

    def runTest(self) -> None:
        frame = bytes(reservation_frame(4, host_ip(3), C["RESV_REQUEST_ACCEPT"]))
        for port in (3, 1):
            self.sw.packet_out(frame, egress_port=port, through_pipeline=C["PACKET_OUT_DIRECT"])
            self.expect(frame, port)
            self.expect_nothing()
            self.assertEqual(self.queue_packets(port, C["PRIORITY_RESERVATION"]), 1)
        self.assertIsNone(self.sw.packet_in(timeout=0.3))


class PacketOutThroughThePipeline(TerrapinTest):
    """Through the pipeline a re-injected reservation message is routed (not punted again)
    in the top queue; ordinary traffic is routed at best effort."""

    def runTest(self) -> None:
        msg = reservation_frame(1, host_ip(2), C["RESV_REQUEST_ADMIT"])
        self.sw.packet_out(bytes(msg), egress_port=0, through_pipeline=C["PACKET_OUT_PIPELINE"])
        self.expect(routed(msg, 2), 2)
        self.expect_nothing()
        self.assertIsNone(self.sw.packet_in(timeout=0.3))
        self.assertEqual(self.queue_packets(2, C["PRIORITY_RESERVATION"]), 1)

        udp = ipv4_packet(1, host_ip(3))
        self.sw.packet_out(bytes(udp), egress_port=0, through_pipeline=C["PACKET_OUT_PIPELINE"])
        self.expect(routed(udp, 3), 3)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(3, C["PRIORITY_BEST_EFFORT"]), 1)
