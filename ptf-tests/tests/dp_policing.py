"""Admitted channels: their queue while they conform, and policing to the meter's envelope.

A channel's direct meter is an RFC 2698 trTCM with CIR = rho and CBS = sigma (bytes of
Ethernet frame). Over any interval t during which a sender offers more than its envelope,
the green (forwarded) bytes F satisfy sigma + rho*t - L < F <= sigma + rho*t for frames of
L bytes: the bucket starts full, gains rho per second and can never go negative, and a
frame is refused only while fewer than L tokens remain. The tests measure t at the sender,
so they allow TIMING_SLACK seconds of difference between when the sender and the switch
saw the first and the last frame (at the rates used, well under one frame of tokens).
"""

from __future__ import annotations

from terrapin_base import (
    TCP,
    C,
    MeterEnvelope,
    TerrapinTest,
    generous_envelope,
    host_ip,
    ipv4_packet,
    routed,
    sized_udp,
    udp_flow_key,
)

TIMING_SLACK = 0.1  # seconds


def queue_counts(test: TerrapinTest, port: int) -> list[int]:
    return [test.queue_packets(port, prio) for prio in range(8)]


class ConformingChannelKeepsItsQueue(TerrapinTest):
    """Within its envelope every packet of a UDP and of a TCP channel is served from the
    channel's queue and counted on its entry; the same hosts' other flows stay best effort."""

    def runTest(self) -> None:
        udp_entry = self.admit(1, 2, 17, udp_flow_key(7000, 7001), channel_id=1, priority=4,
                               meter=MeterEnvelope(cir=1_000_000, cburst=64_000, pir=1_000_000,
                                                   pburst=64_000))
        tcp_entry = self.admit(3, 2, 6, udp_flow_key(40000, 80), channel_id=2, priority=2,
                               meter=generous_envelope())
        udp = sized_udp(1, 2, 500, sport=7000, dport=7001)
        tcp = ipv4_packet(3, host_ip(2), proto_layer=TCP(sport=40000, dport=80, flags="A"),
                          payload_len=300)
        other = sized_udp(1, 2, 500, sport=7000, dport=7002)
        for _ in range(20):
            self.send(1, udp)
        for _ in range(20):
            self.expect(routed(udp, 2), 2)
        for _ in range(5):
            self.send(3, tcp)
            self.expect(routed(tcp, 2), 2)
        self.send(1, other)
        self.expect(routed(other, 2), 2)
        self.expect_nothing()
        self.assertEqual(queue_counts(self, 2), [1, 0, 5, 0, 20, 0, 0, 0])
        self.assertEqual(self.sw.direct_counter(udp_entry), (20, 20 * 500))
        self.assertEqual(self.sw.direct_counter(tcp_entry), (5, 5 * len(tcp)))
        for channel in (1, 2):
            self.assertEqual(self.sw.counter("channel_yellow", channel), (0, 0))
            self.assertEqual(self.sw.counter("channel_red", channel), (0, 0))


class EnvelopeTest(TerrapinTest):
    """Offers frames of FRAME bytes to a channel policed at (RHO, SIGMA) and checks the
    forwarded bytes against sigma + rho*t."""

    FRAME = 500
    SIGMA = 3000
    RHO = 2000
    CHANNEL = 11
    PRIORITY = 5

    def offer(self, send_times: list[float]) -> tuple[int, int, float]:
        """Sends one frame at each offset of send_times (seconds from now); returns
        (frames offered, bytes forwarded, seconds from first to last send)."""
        entry = self.admit(1, 2, 17, udp_flow_key(9000, 9001), channel_id=self.CHANNEL,
                           priority=self.PRIORITY,
                           meter=MeterEnvelope(cir=self.RHO, cburst=self.SIGMA, pir=self.RHO,
                                               pburst=self.SIGMA))
        frame = bytes(sized_udp(1, 2, self.FRAME, sport=9000, dport=9001))
        span = self.send_at(1, [(offset, frame) for offset in send_times])
        received = self.collect(2, idle=1.0)
        forwarded = sum(len(p) for _, p in received)
        offered = len(send_times)
        passed = len(received)

        self.assertEqual(self.sw.direct_counter(entry), (offered, offered * self.FRAME))
        self.assertEqual(queue_counts(self, 2)[self.PRIORITY], passed)
        # Yellow needs PIR > CIR or PBS > CBS; this envelope only knows green and red.
        self.assertEqual(self.sw.counter("channel_yellow", self.CHANNEL), (0, 0))
        self.assertEqual(self.sw.counter("channel_red", self.CHANNEL)[0], offered - passed)
        self.assertEqual(self.drops("DROP_POLICED"), offered - passed)
        return offered, forwarded, span

    def check_envelope(self, what: str, forwarded: int, span: float) -> None:
        envelope = self.SIGMA + self.RHO * span
        low = self.SIGMA + self.RHO * max(0.0, span - TIMING_SLACK) - self.FRAME
        high = self.SIGMA + self.RHO * (span + TIMING_SLACK)
        self.record_figure(f"sigma={self.SIGMA} B rho={self.RHO} B/s t={span:.3f} s "
                           f"sigma+rho*t={envelope:.0f} B forwarded={forwarded} B "
                           f"({forwarded // self.FRAME} frames of {self.FRAME} B)")
        self.assertGreater(forwarded, low, f"{what}: forwarded fewer bytes than the envelope allows")
        self.assertLessEqual(forwarded, high, f"{what}: forwarded more than sigma + rho*t")


class BurstAboveSigmaIsCut(EnvelopeTest):
    """30 back-to-back frames (15000 B) against sigma = 3000 B: about sigma goes through."""

    def runTest(self) -> None:
        offered, forwarded, span = self.offer([0.0] * 30)
        self.assertEqual(offered, 30)
        self.check_envelope("burst", forwarded, span)


class RateAboveRhoIsCut(EnvelopeTest):
    """Frames offered at five times rho for three seconds: sigma + rho*t goes through."""

    def runTest(self) -> None:
        interval = self.FRAME / (5 * self.RHO)
        offered, forwarded, span = self.offer([i * interval for i in range(int(3.0 / interval) + 1)])
        self.assertGreater(span, 2.9)
        self.check_envelope("rate", forwarded, span)


class YellowAndRedFollowTheEntry(TerrapinTest):
    """A trTCM with CBS = 2 frames and PBS = 4 frames, refilling 100 B/s, colours 8
    back-to-back frames green, green, yellow, yellow, red x4. Each entry says what its
    yellow and red traffic gets: dropped, or demoted to best effort."""

    FRAME = 500

    def burst(self, sport: int, channel: int, on_yellow: int, on_red: int) -> int:
        envelope = MeterEnvelope(cir=100, cburst=2 * self.FRAME, pir=100, pburst=4 * self.FRAME)
        self.admit(1, 2, 17, udp_flow_key(sport, 5001), channel_id=channel, priority=4,
                   meter=envelope, on_yellow=on_yellow, on_red=on_red)
        frame = sized_udp(1, 2, self.FRAME, sport=sport, dport=5001)
        self.send(1, frame, count=8)
        received = self.collect(2, idle=1.0)
        self.assertEqual(self.sw.counter("channel_yellow", channel), (2, 2 * self.FRAME))
        self.assertEqual(self.sw.counter("channel_red", channel), (4, 4 * self.FRAME))
        return len(received)

    def runTest(self) -> None:
        drop, demote = C["EXCESS_DROP"], C["EXCESS_DEMOTE"]
        self.assertEqual(self.burst(6001, 21, on_yellow=demote, on_red=drop), 4)
        self.assertEqual(queue_counts(self, 2), [2, 0, 0, 0, 2, 0, 0, 0])
        self.assertEqual(self.drops("DROP_POLICED"), 4)

        self.assertEqual(self.burst(6002, 22, on_yellow=drop, on_red=demote), 6)
        self.assertEqual(queue_counts(self, 2), [2 + 4, 0, 0, 0, 2 + 2, 0, 0, 0])
        self.assertEqual(self.drops("DROP_POLICED"), 4 + 2)

        self.assertEqual(self.burst(6003, 23, on_yellow=demote, on_red=demote), 8)
        self.assertEqual(queue_counts(self, 2), [6 + 6, 0, 0, 0, 4 + 2, 0, 0, 0])
        self.assertEqual(self.drops("DROP_POLICED"), 6)
