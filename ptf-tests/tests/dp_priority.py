"""Queue selection for unadmitted traffic: XTP SORT and DSCP claims are demoted to best
effort (seed 000 §3.2), except the aggregates the controller lists in `aggregates`."""

from __future__ import annotations

from terrapin_base import (
    IP,
    UDP,
    XTP,
    C,
    MeterEnvelope,
    TerrapinTest,
    generous_envelope,
    host_ip,
    ipv4_packet,
    routed,
    sized_udp,
)

EF = 46  # RFC 3246 Expedited Forwarding
CS6 = 48  # network control (RFC 4594)
CS7 = 56


def queue_counts(test: TerrapinTest, port: int) -> list[int]:
    return [test.queue_packets(port, prio) for prio in range(8)]


class XtpSortClaimIsDemoted(TerrapinTest):
    """Unadmitted XTP asking for the most urgent SORT goes to queue 0; the claim is counted,
    and a SORT 0 packet claims nothing."""

    def runTest(self) -> None:
        urgent = ipv4_packet(1, host_ip(2), proto_layer=XTP(key=0x5157, sort=0xFFFF, dlen=64),
                             payload_len=64)
        plain = ipv4_packet(1, host_ip(2), proto_layer=XTP(key=0x5157, sort=0, dlen=64),
                            payload_len=64)
        for _ in range(4):
            self.send(1, urgent)
            self.expect(routed(urgent, 2), 2)
        self.send(1, plain)
        self.expect(routed(plain, 2), 2)
        self.expect_nothing()
        self.assertEqual(queue_counts(self, 2), [5, 0, 0, 0, 0, 0, 0, 0])
        self.assertEqual(self.sw.counter("demoted_claims", C["CLAIM_XTP_SORT"])[0], 4)
        self.assertEqual(self.sw.counter("demoted_claims", C["CLAIM_DSCP"])[0], 0)


class XtpChannelIsMatchedByKey(TerrapinTest):
    """An XTP channel is selected by its connection key: the admitted key reaches the
    channel's queue whatever its SORT, another key of the same hosts does not."""

    def runTest(self) -> None:
        entry = self.admit(1, 2, 36, 0xC0FFEE0012345678, channel_id=7, priority=5,
                           meter=generous_envelope())
        admitted = ipv4_packet(1, host_ip(2), proto_layer=XTP(key=0xC0FFEE0012345678, sort=1),
                               payload_len=40)
        stranger = ipv4_packet(1, host_ip(2), proto_layer=XTP(key=0xC0FFEE0012345679, sort=9),
                               payload_len=40)
        self.send(1, admitted)
        self.expect(routed(admitted, 2), 2)
        self.send(1, stranger)
        self.expect(routed(stranger, 2), 2)
        self.expect_nothing()
        self.assertEqual(queue_counts(self, 2), [1, 0, 0, 0, 0, 1, 0, 0])
        self.assertEqual(self.sw.direct_counter(entry), (1, len(admitted)))
        self.assertEqual(self.sw.counter("demoted_claims", C["CLAIM_XTP_SORT"])[0], 1)


class DscpClaimIsDemoted(TerrapinTest):
    """IP traffic marked EF without a reservation is best effort; DSCP is neither trusted
    nor rewritten."""

    def runTest(self) -> None:
        ef = ipv4_packet(1, host_ip(2), tos=EF << 2)
        self.send(1, ef)
        exp = routed(ef, 2)
        self.assertEqual(exp[IP].tos >> 2, EF)
        self.expect(exp, 2)
        self.expect_nothing()
        self.assertEqual(queue_counts(self, 2), [1, 0, 0, 0, 0, 0, 0, 0])
        self.assertEqual(self.sw.counter("demoted_claims", C["CLAIM_DSCP"])[0], 1)


class AggregateTableLiftsListedDscp(TerrapinTest):
    """An aggregate entry (DSCP CS6, any protocol) serves matching traffic at its priority and
    counts it; other DSCPs stay best effort."""

    def runTest(self) -> None:
        self.sw.set_meter("aggregate_meters", 3, generous_envelope())
        entry = self.sw.insert("aggregates", {"dscp": (CS6, 0x3F)}, "set_aggregate",
                               {"aggregate_id": 3, "priority": 6}, priority=10)
        control = ipv4_packet(1, host_ip(2), tos=CS6 << 2, proto_layer=UDP(sport=179, dport=179))
        other = ipv4_packet(1, host_ip(2), tos=CS7 << 2)
        self.send(1, control, count=2)
        self.send(1, other)
        self.expect(routed(control, 2), 2)
        self.expect(routed(control, 2), 2)
        self.expect(routed(other, 2), 2)
        self.expect_nothing()
        self.assertEqual(queue_counts(self, 2), [1, 0, 0, 0, 0, 0, 2, 0])
        self.assertEqual(self.sw.direct_counter(entry), (2, 2 * len(control)))
        self.assertEqual(self.sw.counter("demoted_claims", C["CLAIM_DSCP"])[0], 1)


class AggregateMeterDemotesExcess(TerrapinTest):
    """Two aggregate entries sharing aggregate id 1 share its meter: once the aggregate burst is
    spent, either entry's traffic is demoted to best effort and counted as aggregate excess."""

    def runTest(self) -> None:
        frame = 200
        # Room for exactly two frames, refilled at 100 B/s: nothing refills during the test.
        self.sw.set_meter("aggregate_meters", 1, MeterEnvelope(cir=100, cburst=2 * frame,
                                                           pir=100, pburst=2 * frame))
        self.sw.insert("aggregates", {"dscp": (CS6, 0x3F)}, "set_aggregate",
                       {"aggregate_id": 1, "priority": 6}, priority=10)
        self.sw.insert("aggregates", {"dscp": (CS7, 0x3F)}, "set_aggregate",
                       {"aggregate_id": 1, "priority": 6}, priority=10)
        cs6 = sized_udp(1, 2, frame, tos=CS6 << 2)
        cs7 = sized_udp(1, 2, frame, tos=CS7 << 2)
        for pkt in (cs6, cs7, cs6, cs7):
            self.send(1, pkt)
            self.expect(routed(pkt, 2), 2)
        self.expect_nothing()
        self.assertEqual(queue_counts(self, 2), [2, 0, 0, 0, 0, 0, 2, 0])
        self.assertEqual(self.sw.counter("aggregate_excess", 1), (2, 2 * frame))
