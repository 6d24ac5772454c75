"""Protection: IEEE 802.1CB frame replication and elimination (docs/dataplane.md "Protection").

One switch plays each role in turn:

- first switch: a protected channel's packets that its policer passes are numbered (per
  channel, wrapping at 2^16), tagged (R-TAG, EtherType ETHERTYPE_RTAG) and sent down both
  paths (a multicast group whose replicas' egress_rid is each path's member stream, written into
  the tag, each to its path's next hop); nothing goes by the route. Excess the policer demotes is
  neither numbered nor replicated: it follows the route untagged, at best effort.
- transit: a copy is forwarded by its member stream alone (not its destination), tag unchanged,
  policed by the member entry's meter; a member the switch does not know is dropped and counted.
- last switch: sequence recovery keeps the first copy of each number, removes the tag and routes
  it; duplicates, numbers outside the history window and (after a number jumped ahead) numbers
  that left the window unseen are counted as 802.1CB counts them; silence of reset_us, or a new
  installation tag, resets it.
"""

from __future__ import annotations

import time

from scapy.all import IP, Ether, Packet, ShortField, XShortField, bind_layers  # type: ignore[attr-defined]

from p4runtime_client import MeterEnvelope
from terrapin_base import (
    C,
    TerrapinTest,
    generous_envelope,
    host_mac,
    routed,
    sized_udp,
    switch_mac,
    udp_flow_key,
)


class RTag(Packet):  # type: ignore[misc]
    name = "R-TAG"
    fields_desc = [ShortField("member", 0), ShortField("seq", 0), XShortField("type", 0x0800)]


bind_layers(Ether, RTag, type=0xF1C1)
bind_layers(RTag, IP, type=0x0800)

FRAME = 300
SPORT, DPORT = 9300, 9301
FLOW = udp_flow_key(SPORT, DPORT)
CHANNEL = 51
PRIORITY = 5
GROUP = CHANNEL + 1
MEMBER_A = 2 * CHANNEL + 1
MEMBER_B = 2 * CHANNEL + 2
NEXT_A = "02:aa:00:00:00:0a"
NEXT_B = "02:aa:00:00:00:0b"


def channel_frame(payload_byte: int = 0) -> bytes:
    """A frame of the channel, from host 1 to host 2 (its route leaves by port 2)."""
    frame = sized_udp(1, 2, FRAME, sport=SPORT, dport=DPORT)
    raw = bytearray(bytes(frame))
    raw[-1] = payload_byte  # tells the frames apart
    return bytes(raw)


def as_copy(frame: bytes, member: int, seq: int, port: int, next_hop: str) -> bytes:
    """`frame` (as its host sent it) leaving a first switch by `port` as member `member`'s copy."""
    out = routed(Ether(frame), port)
    out[Ether].dst = next_hop
    return bytes(Ether(dst=next_hop, src=switch_mac(port), type=C["ETHERTYPE_RTAG"])
                 / RTag(member=member, seq=seq, type=0x0800) / out[IP])


def arriving_copy(frame: bytes, member: int, seq: int, port: int) -> bytes:
    """A copy as it arrives at the next switch on `port` (from the previous switch)."""
    ip = Ether(frame)[IP].copy()
    ip.ttl -= 1
    ip.chksum = None
    return bytes(Ether(dst=switch_mac(port), src="02:bb:00:00:00:01", type=C["ETHERTYPE_RTAG"])
                 / RTag(member=member, seq=seq, type=0x0800) / ip)


def delivered(frame: bytes) -> bytes:
    """A recovered copy leaving the last switch to host 2: untagged, routed once more."""
    ip = Ether(frame)[IP].copy()
    ip.ttl -= 2
    ip.chksum = None
    return bytes(Ether(dst=host_mac(2), src=switch_mac(2)) / IP(bytes(ip)))


class FirstSwitchTest(TerrapinTest):
    def tearDown(self) -> None:
        # simple_switch_grpc keeps multicast groups across pipeline pushes (docs/bmv2.md): a
        # group left behind would double the next test's replicas.
        try:
            self.sw.delete_multicast_group(GROUP)
        except Exception:  # noqa: BLE001 - the test may have failed before inserting it
            pass
        super().tearDown()

    def protect(self, meter: MeterEnvelope | None = None, demote: bool = False) -> None:
        excess = C["EXCESS_DEMOTE"] if demote else C["EXCESS_DROP"]
        self.admit(1, 2, 17, FLOW, channel_id=CHANNEL, priority=PRIORITY, meter=meter or generous_envelope(),
                   on_yellow=excess, on_red=excess)
        self.sw.insert("protections", {"channel_id": CHANNEL}, "replicate", {"group": GROUP})
        self.sw.insert_multicast_group(GROUP, [(3, MEMBER_A), (4, MEMBER_B)])
        self.sw.insert("copies", {"member": MEMBER_A}, "send_copy", {"next_hop_mac": NEXT_A})
        self.sw.insert("copies", {"member": MEMBER_B}, "send_copy", {"next_hop_mac": NEXT_B})

    def both_paths(self, count: int) -> tuple[list[bytes], list[bytes]]:
        a = [p for _, p in self.collect(3, idle=1.0)]
        b = [p for _, p in self.collect(4, idle=0.2)]
        self.assertEqual((len(a), len(b)), (count, count), "copies per path")
        return a, b


class ReplicasAreTaggedAndNumbered(FirstSwitchTest):
    """Five frames: each leaves once by each path's port, tagged with that path's member and the
    channel's next number (0..4), to that path's next hop, in the channel's queue; none by the
    route. With the channel's counter set to 0xFFFE the numbers wrap: FFFE, FFFF, 0, 1."""

    def runTest(self) -> None:
        self.protect()
        frames = [channel_frame(i) for i in range(5)]
        for f in frames:
            self.send(1, f)
        a, b = self.both_paths(5)
        self.assertEqual(a, [as_copy(f, MEMBER_A, i, 3, NEXT_A) for i, f in enumerate(frames)])
        self.assertEqual(b, [as_copy(f, MEMBER_B, i, 4, NEXT_B) for i, f in enumerate(frames)])
        self.expect_nothing()
        self.assertEqual(self.queue_packets(3, PRIORITY), 5)
        self.assertEqual(self.queue_packets(4, PRIORITY), 5)
        self.assertEqual(self.queue_packets(2, PRIORITY) + self.queue_packets(2, 0), 0)

        self.set_register("frer_next_seq", CHANNEL, 0xFFFE)
        for f in frames[:4]:
            self.send(1, f)
        a, b = self.both_paths(4)
        self.assertEqual([RTag(p[14:20]).seq for p in a], [0xFFFE, 0xFFFF, 0, 1])
        self.assertEqual([RTag(p[14:20]).seq for p in b], [0xFFFE, 0xFFFF, 0, 1])


class ExcessIsNotReplicated(FirstSwitchTest):
    """An envelope of two frames, excess demoted: of six back-to-back frames two are numbered and
    replicated, four follow the route untagged at best effort, and the numbers skip none."""

    def runTest(self) -> None:
        self.protect(MeterEnvelope(cir=100, cburst=2 * FRAME, pir=100, pburst=2 * FRAME), demote=True)
        frame = channel_frame()
        self.send(1, frame, count=6)
        a, b = self.both_paths(2)
        self.assertEqual([RTag(p[14:20]).seq for p in a + b], [0, 1, 0, 1])
        rest = [p for _, p in self.collect(2, idle=0.3)]
        self.assertEqual(rest, [bytes(routed(Ether(frame), 2))] * 4)
        self.assertEqual(self.queue_packets(2, C["PRIORITY_BEST_EFFORT"]), 4)
        self.assertEqual(self.sw.counter("channel_red", CHANNEL)[0], 4)


class ReplicaWithoutACopyEntryIsDropped(FirstSwitchTest):
    """A replica whose member has no `copies` entry is dropped (it could not be forwarded by
    member): the other path's copy still leaves."""

    def runTest(self) -> None:
        self.admit(1, 2, 17, FLOW, channel_id=CHANNEL, priority=PRIORITY, meter=generous_envelope())
        self.sw.insert("protections", {"channel_id": CHANNEL}, "replicate", {"group": GROUP})
        self.sw.insert_multicast_group(GROUP, [(3, MEMBER_A), (4, MEMBER_B)])
        self.sw.insert("copies", {"member": MEMBER_B}, "send_copy", {"next_hop_mac": NEXT_B})
        frame = channel_frame()
        self.send(1, frame)
        self.expect(as_copy(frame, MEMBER_B, 0, 4, NEXT_B), 4)
        self.expect_nothing()


class TransitForwardsByMember(TerrapinTest):
    """A copy goes where its member's entry says, whatever its destination address, tag
    unchanged, TTL - 1, in the hop's queue; the member's meter polices it (an envelope of two
    frames passes two of five); a copy of an unknown member is dropped and counted."""

    def runTest(self) -> None:
        relay = self.sw.insert(
            "member_streams", {"member": MEMBER_A}, "relay_copy",
            {"port": 4, "next_hop_mac": NEXT_A, "channel_id": CHANNEL, "priority": 3,
             "on_yellow": C["EXCESS_DROP"], "on_red": C["EXCESS_DROP"]},
            meter=generous_envelope(),
        )
        frame = channel_frame()  # to host 2: its route would leave by port 2
        for seq in (7, 8):
            self.send(3, arriving_copy(frame, MEMBER_A, seq, 3))
            out = routed(Ether(arriving_copy(frame, MEMBER_A, seq, 3)), 4)
            out[Ether].dst = NEXT_A
            self.expect(bytes(out), 4)
        self.expect_nothing()
        self.assertEqual(self.queue_packets(4, 3), 2)
        self.assertEqual(self.sw.direct_counter(relay)[0], 2)

        tagged = FRAME + 6
        self.sw.set_direct_meter(relay, MeterEnvelope(cir=100, cburst=2 * tagged, pir=100, pburst=2 * tagged))
        for seq in range(10, 15):
            self.send(3, arriving_copy(frame, MEMBER_A, seq, 3))
        got = self.collect(4, idle=1.0)
        self.assertEqual(len(got), 2)
        self.assertEqual(self.drops("DROP_POLICED"), 3)

        self.send(3, arriving_copy(frame, MEMBER_B, 1, 3))
        self.expect_nothing()
        self.assertEqual(self.drops("DROP_NO_MEMBER"), 1)


class LastSwitchTest(TerrapinTest):
    """Members A (port 3) and B (port 4) end here; the recovered frame goes to host 2."""

    def recover(self, history: int = 16, reset_us: int = 2_000_000, tag: int = 1) -> None:
        # What reaches `channels` here is what the recovery kept, whichever port brought it.
        self.admit(1, 2, 17, FLOW, channel_id=CHANNEL, priority=PRIORITY, meter=generous_envelope(),
                   in_port=C["CHANNEL_IN_RECOVERED"])
        for member in (MEMBER_A, MEMBER_B):
            self.sw.insert("member_streams", {"member": member}, "recover_copy",
                           {"channel_id": CHANNEL, "history_length": history, "reset_us": reset_us,
                            "tag": tag})

    def copy(self, seq: int, member: int = MEMBER_A) -> None:
        port = 3 if member == MEMBER_A else 4
        self.send(port, arriving_copy(channel_frame(seq & 0xFF), member, seq, port))

    def delivered_seqs(self) -> list[int]:
        """The frames host 2 got (by their last payload byte), each checked untagged and routed."""
        got = [p for _, p in self.collect(2, idle=0.6)]
        for p in got:
            self.assertEqual(p, delivered(channel_frame(p[-1])))
        return [p[-1] for p in got]

    def frer(self) -> dict[str, int]:
        counts = {name: self.sw.counter(f"frer_{name}", CHANNEL)[0]
                  for name in ("passed", "discarded", "out_of_order", "rogue", "resets")}
        counts["lost"] = self.register("frer_lost", CHANNEL)
        return counts


class DuplicatesAreEliminated(LastSwitchTest):
    """Both copies of numbers 0..9, A's first then B's: host 2 gets each number once, in order,
    untagged, in the channel's queue; B's ten are discarded; each path's entry counts its ten."""

    def runTest(self) -> None:
        self.recover()
        for seq in range(10):
            self.copy(seq, MEMBER_A)
            self.copy(seq, MEMBER_B)
        self.assertEqual(self.delivered_seqs(), list(range(10)))
        self.expect_nothing()
        self.assertEqual(self.frer(), {"passed": 10, "discarded": 10, "out_of_order": 0, "rogue": 0,
                                       "resets": 1, "lost": 0})
        self.assertEqual(self.drops("DROP_ELIMINATED"), 10)
        self.assertEqual(self.queue_packets(2, PRIORITY), 10)
        for member in (MEMBER_A, MEMBER_B):
            entry = self.sw.table_entry("member_streams", {"member": member})
            self.assertEqual(self.sw.direct_counter(entry)[0], 10)


class OnePathOnly(LastSwitchTest):
    """Numbers 0..9 on path B alone all pass, none lost; A's copies arriving late are all
    duplicates."""

    def runTest(self) -> None:
        self.recover()
        for seq in range(10):
            self.copy(seq, MEMBER_B)
        self.assertEqual(self.delivered_seqs(), list(range(10)))
        for seq in range(10):
            self.copy(seq, MEMBER_A)
        self.assertEqual(self.delivered_seqs(), [])
        self.assertEqual(self.frer(), {"passed": 10, "discarded": 10, "out_of_order": 0, "rogue": 0,
                                       "resets": 1, "lost": 0})


class HistoryWindow(LastSwitchTest):
    """A history of four numbers. 0, then 3 (ahead by 3: out of order), 4, 5, 6, 7: numbers 1 and
    2 leave the window unseen (lost 2). 2 now (behind by 5) and 12 (ahead by 5) are rogue; 5 again
    is a duplicate; 9 then 8 both pass, each out of order."""

    def runTest(self) -> None:
        self.recover(history=4)
        for seq in (0, 3, 4, 5, 6, 7, 2, 12, 5, 9, 8):
            self.copy(seq)
        self.assertEqual(self.delivered_seqs(), [0, 3, 4, 5, 6, 7, 9, 8])
        self.assertEqual(self.frer(), {"passed": 8, "discarded": 1, "out_of_order": 3, "rogue": 2,
                                       "resets": 1, "lost": 2})
        self.assertEqual(self.drops("DROP_ELIMINATED"), 3)


class SequenceNumbersWrap(LastSwitchTest):
    """0xFFFE, 0xFFFF, 0, 1 from each path: each passes once across the wrap; a late copy of
    0xFFFF after 1 is a duplicate."""

    def runTest(self) -> None:
        self.recover()
        for seq in (0xFFFE, 0xFFFF, 0, 1):
            self.copy(seq, MEMBER_A)
            self.copy(seq, MEMBER_B)
        self.copy(0xFFFF, MEMBER_B)
        self.assertEqual(self.delivered_seqs(), [0xFE, 0xFF, 0, 1])
        self.assertEqual(self.frer(), {"passed": 4, "discarded": 5, "out_of_order": 0, "rogue": 0,
                                       "resets": 1, "lost": 0})


class ResetAfterSilence(LastSwitchTest):
    """reset_us 300 ms: after 100, number 40 is rogue; after 0.6 s without a passing copy, 40 is
    taken as it is (a reset) and 41 follows it."""

    def runTest(self) -> None:
        self.recover(history=8, reset_us=300_000)
        self.copy(100)
        self.copy(40)
        self.assertEqual(self.delivered_seqs(), [100])
        time.sleep(0.6)
        self.copy(40)
        self.copy(41)
        self.assertEqual(self.delivered_seqs(), [40, 41])
        self.assertEqual(self.frer(), {"passed": 3, "discarded": 0, "out_of_order": 0, "rogue": 1,
                                       "resets": 2, "lost": 0})


class NewInstallationStartsFresh(LastSwitchTest):
    """Recovery state another installation tag wrote is no state: a history of four, 0..4 then 7,
    9 and 10 lose 5 and 6 (out of the window once 10 passed); after the members' entries are
    rewritten with a new tag, number 3, a duplicate under the old tag, passes (a reset) and the
    lost count starts again from 0."""

    def runTest(self) -> None:
        self.recover(history=4, tag=1)
        for seq in (0, 1, 2, 3, 4, 7, 9, 10):
            self.copy(seq)
        self.assertEqual(self.delivered_seqs(), [0, 1, 2, 3, 4, 7, 9, 10])
        self.assertEqual(self.frer()["lost"], 2)
        for member in (MEMBER_A, MEMBER_B):
            self.sw.delete(self.sw.table_entry("member_streams", {"member": member}))
            self.sw.insert("member_streams", {"member": member}, "recover_copy",
                           {"channel_id": CHANNEL, "history_length": 4, "reset_us": 2_000_000, "tag": 2})
        self.copy(3, MEMBER_B)
        self.copy(3, MEMBER_A)
        self.assertEqual(self.delivered_seqs(), [3])
        counts = self.frer()
        self.assertEqual((counts["resets"], counts["lost"]), (2, 0))


class NoHistoryPassesNothing(LastSwitchTest):
    """history_length 0 is a broken configuration: it fails closed."""

    def runTest(self) -> None:
        self.recover(history=0)
        for seq in range(3):
            self.copy(seq)
        self.assertEqual(self.delivered_seqs(), [])
        self.assertEqual(self.frer()["passed"], 0)
