"""The window policers of seed 000 §2.2.2: the jumping window (Figure 4) and the Tenet
(Xmin, Xave, I, Smax) moving window (Figure 5), each chosen per channel by the entry's action
(docs/dataplane.md "Window policers").

What the seed says of them, and what each test shows:
- conforming traffic passes untouched, in the channel's queue;
- a jumping window lets up to 2B through across a window edge (Figure 10), the moving window
  never more than its n packets in any interval I;
- a source above its envelope is cut to it;
- excess is dropped or demoted exactly as a meter's red is, and counted as red;
- a broken configuration is refused by the switch (a ring larger than the register) or lets
  nothing through (a window of zero), never everything.

Times are the sender's; the switch judges by its own ingress timestamps, so every schedule
keeps its packets at least 50 ms away from the window edges it relies on.
"""

from __future__ import annotations

from finsy.proto import p4r

from p4runtime_client import P4RuntimeError
from terrapin_base import C, TerrapinTest, routed, sized_udp, udp_flow_key

FRAME = 500
SPORT, DPORT = 9100, 9101
FLOW = udp_flow_key(SPORT, DPORT)


def queue_counts(test: TerrapinTest, port: int) -> list[int]:
    return [test.queue_packets(port, prio) for prio in range(8)]


class WindowTest(TerrapinTest):
    CHANNEL = 31
    PRIORITY = 5

    def frame(self, size: int = FRAME, sport: int = SPORT) -> bytes:
        return bytes(sized_udp(1, 2, size, sport=sport, dport=DPORT))

    def offer(self, schedule: list[tuple[float, bytes]]) -> float:
        return self.send_at(1, schedule)

    def forwarded(self) -> list[bytes]:
        return [p for _, p in self.collect(2, idle=1.0)]

    def check_untouched(self, entry: object, got: list[bytes], count: int) -> None:
        """All `count` frames arrived unchanged, from the channel's queue, none red."""
        self.assertEqual(len(got), count)
        expected = bytes(routed(sized_udp(1, 2, FRAME, sport=SPORT, dport=DPORT), 2))
        for packet in got:
            self.assertEqual(packet, expected)
        self.assertEqual(queue_counts(self, 2), [0, 0, 0, 0, 0, count, 0, 0])
        self.assertEqual(self.sw.direct_counter(entry), (count, count * FRAME))  # type: ignore[arg-type]
        self.check_policed(count, count)
        self.assertEqual(self.drops("DROP_POLICED"), 0)

    def check_policed(self, offered: int, passed: int, channel: int | None = None) -> None:
        """Excess is red: counted in channel_red and dropped as DROP_POLICED."""
        channel = self.CHANNEL if channel is None else channel
        self.assertEqual(self.sw.counter("channel_red", channel)[0], offered - passed)
        self.assertEqual(self.sw.counter("channel_yellow", channel), (0, 0))


# ---- jumping window ------------------------------------------------------------------------


class JumpingWindowConformingPassesUntouched(WindowTest):
    """B = 2,000 B per T = 300 ms; one 500-byte frame every 100 ms never puts more than four
    frames in one window, so all ten pass, unchanged, in the channel's queue."""

    def runTest(self) -> None:
        entry = self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                          window_us=300_000, limit=4 * FRAME)
        frame = self.frame()
        self.offer([(0.1 * i, frame) for i in range(10)])
        self.check_untouched(entry, self.forwarded(), 10)


class JumpingWindowLetsTwoBurstsAcrossAnEdge(WindowTest):
    """Seed 000 Figure 10: B at the end of one window and B at the start of the next. With
    B = 4 frames and T = 400 ms: one frame opens the window at 0, three more at 0.3 s use the
    rest of it, six at 0.5 s find a fresh window and four of them pass. Seven frames (3,500 B,
    1.75 B) pass within 0.2 s, half a window; two are cut."""

    def runTest(self) -> None:
        self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                  window_us=400_000, limit=4 * FRAME)
        frame = self.frame()
        schedule = [(0.0, frame)] + [(0.3, frame)] * 3 + [(0.5, frame)] * 6
        self.offer(schedule)
        passed = len(self.forwarded())
        edge = passed - 1  # the frames of the two bursts that passed
        self.record_figure(f"B={4 * FRAME} B T=0.4 s: {edge * FRAME} B passed within 0.2 s across the "
                           f"edge ({edge} frames; at most 2B - one frame here)")
        self.assertEqual(passed, 8)
        self.assertGreater(edge * FRAME, 4 * FRAME, "no more than B across the edge")
        self.check_policed(len(schedule), passed)
        self.assertEqual(self.drops("DROP_POLICED"), 2)


class JumpingWindowCutsAGreedySource(WindowTest):
    """Frames offered at five times B/T for 3 s (B = 2,000 B, T = 250 ms): every window lets
    exactly B through, so the forwarded bytes lie between B per whole window and the seed's
    A*(t) = 2B + floor(t/T) B."""

    def runTest(self) -> None:
        window, limit = 0.25, 4 * FRAME
        self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                  window_us=int(window * 1e6), limit=limit)
        interval = FRAME / (5 * limit / window)
        frame = self.frame()
        schedule = [(i * interval, frame) for i in range(int(3.0 / interval) + 1)]
        span = self.offer(schedule)
        forwarded = len(self.forwarded()) * FRAME
        slack = 0.1
        low = limit * int((span - slack) / window)
        bound = 2 * limit + int((span + slack) / window) * limit
        a_star = 2 * limit + int(span / window) * limit
        self.record_figure(f"B={limit} B T={window} s t={span:.3f} s A*(t)={a_star} B "
                           f"forwarded={forwarded} B")
        self.assertGreaterEqual(forwarded, low)
        self.assertLessEqual(forwarded, bound)
        self.check_policed(len(schedule), forwarded // FRAME)


class JumpingWindowsFollowOneAnother(WindowTest):
    """While the channel is busy the windows keep their phase (start, start + T, ...), as
    XTP's periodic credit reset: one frame per 300 ms window, frames every 250 ms. Windows
    [0, 0.3) [0.3, 0.6) [0.6, 0.9) [0.9, 1.2) [1.2, 1.5) take 0 | 0.5 | 0.75 | 1.0 | 1.25;
    only 0.25 shares a window with another. (Windows restarted at each late frame would pass
    every other frame: 3 of 6.)"""

    def runTest(self) -> None:
        self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                  window_us=300_000, limit=FRAME)
        frame = self.frame()
        self.offer([(0.25 * i, frame) for i in range(6)])
        self.assertEqual(len(self.forwarded()), 5)


class JumpingWindowRestartsAfterTwoIdleWindows(WindowTest):
    """One frame per T = 100 ms window: after a second without a frame the next window opens
    at the next frame (1.0 s), so a frame 50 ms later shares its window and is cut, and one
    150 ms later is in the window after and passes."""

    def runTest(self) -> None:
        self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                  window_us=100_000, limit=FRAME)
        frame = self.frame()
        self.offer([(0.0, frame), (1.0, frame), (1.05, frame), (1.15, frame)])
        self.assertEqual(len(self.forwarded()), 3)
        self.check_policed(4, 3)


class JumpingWindowCountsBytesOrPackets(WindowTest):
    """Seed 000 §2.2.2: "up to N packets or bytes". Six 1,000-byte frames at once: a window of
    2,000 bytes passes two, a window of 4 packets passes four. A frame above the channel's
    largest (smax = 1,000 B) is excess even with room in the window: counting packets, the
    window's bound in bytes rests on it."""

    def runTest(self) -> None:
        self.admit_jumping_window(1, 2, udp_flow_key(9200, DPORT), channel_id=41, priority=self.PRIORITY,
                                  window_us=10_000_000, limit=2000, smax=1000)
        self.admit_jumping_window(1, 2, udp_flow_key(9201, DPORT), channel_id=42, priority=self.PRIORITY,
                                  window_us=10_000_000, limit=4, count_packets=True, smax=1000)
        self.send(1, self.frame(1200, sport=9201))
        for sport in (9200, 9201):
            self.send(1, self.frame(1000, sport=sport), count=6)
        got = self.forwarded()
        self.assertEqual({len(p) for p in got}, {1000})
        by_bytes = sum(1 for p in got if int.from_bytes(p[34:36], "big") == 9200)
        by_packets = sum(1 for p in got if int.from_bytes(p[34:36], "big") == 9201)
        self.assertEqual((by_bytes, by_packets), (2, 4))
        self.check_policed(6, 2, channel=41)
        self.check_policed(7, 4, channel=42)


# ---- moving window -------------------------------------------------------------------------


class MovingWindowConformingPassesUntouched(WindowTest):
    """Xmin = 20 ms, n = 4 packets per I = 400 ms (Xave = 100 ms), Smax = 500 B: a frame every
    110 ms keeps every interval of 400 ms to four frames and every gap above Xmin."""

    def runTest(self) -> None:
        entry = self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                         xmin_us=20_000, interval_us=400_000, slots=4, smax=FRAME)
        frame = self.frame()
        self.offer([(0.11 * i, frame) for i in range(10)])
        self.check_untouched(entry, self.forwarded(), 10)


class MovingWindowHoldsAcrossAnEdge(WindowTest):
    """The schedule of JumpingWindowLetsTwoBurstsAcrossAnEdge against n = 4 per I = 400 ms: at
    0.5 s only the frame whose fourth predecessor (at 0) is an interval old passes, so the
    bursts put n = 4 frames through, not 7."""

    def runTest(self) -> None:
        self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                 xmin_us=0, interval_us=400_000, slots=4, smax=FRAME)
        frame = self.frame()
        schedule = [(0.0, frame)] + [(0.3, frame)] * 3 + [(0.5, frame)] * 6
        self.offer(schedule)
        passed = len(self.forwarded())
        edge = passed - 1
        self.record_figure(f"n=4 I=0.4 s: {edge * FRAME} B passed within 0.2 s across the edge "
                           f"({edge} frames)")
        self.assertEqual(passed, 5)
        self.check_policed(len(schedule), passed)


class MovingWindowCutsAGreedySource(WindowTest):
    """Frames offered at five times n/I for 3 s (n = 4, I = 250 ms): n frames per interval
    pass, so between n per whole interval and n (floor(t/I) + 1)."""

    def runTest(self) -> None:
        interval_s, n = 0.25, 4
        self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                 xmin_us=0, interval_us=int(interval_s * 1e6), slots=n, smax=FRAME)
        gap = interval_s / (5 * n)
        frame = self.frame()
        schedule = [(i * gap, frame) for i in range(int(3.0 / gap) + 1)]
        span = self.offer(schedule)
        passed = len(self.forwarded())
        slack = 0.1
        self.record_figure(f"n={n} I={interval_s} s t={span:.3f} s n*(floor(t/I)+1)="
                           f"{n * (int(span / interval_s) + 1)} frames forwarded={passed} frames")
        self.assertGreaterEqual(passed, n * int((span - slack) / interval_s))
        self.assertLessEqual(passed, n * (int((span + slack) / interval_s) + 1))
        self.check_policed(len(schedule), passed)


class MovingWindowKeepsXminAndSmax(WindowTest):
    """Xmin = 100 ms, Smax = 600 B, a roomy window (32 per second): of ten back-to-back frames
    one passes; 150 ms later a 700-byte frame is cut for its size alone; a 500-byte frame
    then passes."""

    def runTest(self) -> None:
        self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                 xmin_us=100_000, interval_us=1_000_000, slots=32, smax=600)
        frame = self.frame()
        schedule = [(0.0, frame)] * 10 + [(0.15, self.frame(700)), (0.2, frame)]
        self.offer(schedule)
        sizes = [len(p) for p in self.forwarded()]
        self.assertEqual(sizes, [FRAME, FRAME])
        self.check_policed(len(schedule), 2)


class MovingWindowGroupsPackets(WindowTest):
    """A ring of 2 slots of 3 packets each (n = 6 per I = 400 ms): a burst of ten passes six
    (two groups), and after an interval six more."""

    def runTest(self) -> None:
        self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                 xmin_us=0, interval_us=400_000, slots=2, quantum=3, smax=FRAME)
        frame = self.frame()
        self.offer([(0.0, frame)] * 10 + [(0.5, frame)] * 10)
        self.assertEqual(len(self.forwarded()), 12)
        self.check_policed(20, 12)


class MovingWindowsOfTwoChannelsAreIndependent(WindowTest):
    """Each channel has its own ring (cells channel_id * MOVING_SLOTS ...): two channels of
    n = 2 per 10 s pass two frames each of the same burst."""

    def runTest(self) -> None:
        for channel, sport in ((3, 9600), (4, 9601)):
            self.admit_moving_window(1, 2, udp_flow_key(sport, DPORT), channel_id=channel, priority=4,
                                     xmin_us=0, interval_us=10_000_000, slots=2, smax=FRAME)
        for sport in (9600, 9601):
            self.send(1, self.frame(sport=sport), count=3)
        self.assertEqual(len(self.forwarded()), 4)
        self.check_policed(3, 2, channel=3)
        self.check_policed(3, 2, channel=4)


# ---- tolerance -----------------------------------------------------------------------------
# A switch may stamp a packet later than it arrived, by up to its jitter; the controller gives
# the first hop's window that much tolerance (docs/dataplane.md "Tolerance"). Here the sender
# plays the late stamps: frames sent closer than the envelope allows by less than the tolerance.


class JumpingWindowCountsALateFrameInTheWindowBefore(WindowTest):
    """B = 2 frames per T = 400 ms, tolerance 100 ms. The source keeps B per window of its own
    ([0, 0.4) and [0.4, 0.8)) but its second frame is stamped late, at 0.45 s: it is counted in
    the window before, which has room, so 0.5 and 0.6 still fit the next one and all four pass.
    Without the tolerance the window [0.4, 0.8) holds three and one is cut."""

    def runTest(self) -> None:
        schedule = [(0.0, self.frame()), (0.45, self.frame()), (0.5, self.frame()), (0.6, self.frame())]
        for tolerance, passing in ((100_000, 4), (0, 3)):
            with self.subTest(tolerance_us=tolerance):
                entry = self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                                  window_us=400_000, limit=2 * FRAME, tolerance_us=tolerance,
                                                  tag=1 + tolerance)
                self.offer(schedule)
                self.assertEqual(len(self.forwarded()), passing)
                self.sw.delete(entry)


class JumpingWindowCountsAnEarlyFrameInTheWindowAfter(WindowTest):
    """B = 1,000 B per T = 400 ms, tolerance 100 ms: frames of 500 B at 0 and 0.1 fill the first
    window; a 400-byte one at 0.35, within the tolerance of the boundary, is counted in the next
    window, [0.4, 0.8), where the 500-byte frame at 0.5 still fits and the one at 0.6 does not
    (that window would hold 1,400 B). The sizes tell which frames passed."""

    def runTest(self) -> None:
        self.admit_jumping_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                  window_us=400_000, limit=2 * FRAME, tolerance_us=100_000)
        frame = self.frame()
        self.offer([(0.0, frame), (0.1, frame), (0.35, self.frame(400)), (0.5, frame), (0.6, frame)])
        self.assertEqual([len(p) for p in self.forwarded()], [FRAME, FRAME, 400, FRAME])
        self.check_policed(5, 4)


class MovingWindowToleratesLateStamps(WindowTest):
    """Xmin = 100 ms, tolerance 80 ms: a source that kept 120 ms between frames but whose third
    frame, due at 0.24 s, was stamped 60 ms late (0.30) and the next on time (0.36) passes
    whole; without the tolerance the frame at 0.36 is cut."""

    def runTest(self) -> None:
        schedule = [(t, self.frame()) for t in (0.0, 0.12, 0.30, 0.36, 0.48)]
        for tolerance, passing in ((80_000, 5), (0, 4)):
            with self.subTest(tolerance_us=tolerance):
                entry = self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                                 xmin_us=100_000, interval_us=10_000_000, slots=32,
                                                 smax=FRAME, tolerance_us=tolerance, tag=1 + tolerance)
                self.offer(schedule)
                self.assertEqual(len(self.forwarded()), passing)
                self.sw.delete(entry)


class MovingWindowToleranceDoesNotRaiseTheRate(WindowTest):
    """GCRA: a tolerance admits early frames, not a faster source. Frames every 40 ms for 2 s
    against Xmin = 100 ms with 80 ms of tolerance: what passes keeps Xmin over t + 80 ms, at
    most (t + 0.08) / 0.1 + 1 frames, about 21; a policer that judged each frame from the one
    before (next = stamp + Xmin, passing if stamp + tolerance reaches it) would pass all 51."""

    def runTest(self) -> None:
        self.admit_moving_window(1, 2, FLOW, channel_id=self.CHANNEL, priority=self.PRIORITY,
                                 xmin_us=100_000, interval_us=10_000_000, slots=32, smax=FRAME,
                                 tolerance_us=80_000)
        frame = self.frame()
        schedule = [(0.04 * i, frame) for i in range(51)]
        span = self.offer(schedule)
        passed = len(self.forwarded())
        self.record_figure(f"Xmin=0.1 s tolerance=0.08 s t={span:.3f} s: {passed} of 51 frames passed")
        self.assertLessEqual(passed, int((span + 0.08 + 0.05) / 0.1) + 1)
        self.assertGreaterEqual(passed, int((span - 0.05) / 0.1))
        self.check_policed(51, passed)


# ---- both ----------------------------------------------------------------------------------


class WindowExcessIsDemotedLikeRed(WindowTest):
    """With on_excess = EXCESS_DEMOTE the excess leaves best effort (queue 0), counted red,
    nothing dropped: a jumping window of one frame and a moving window with Xmin = 1 s, five
    frames each."""

    def runTest(self) -> None:
        demote = C["EXCESS_DEMOTE"]
        self.admit_jumping_window(1, 2, udp_flow_key(9300, DPORT), channel_id=51, priority=4,
                                  window_us=10_000_000, limit=FRAME, on_excess=demote)
        self.admit_moving_window(1, 2, udp_flow_key(9301, DPORT), channel_id=52, priority=3,
                                 xmin_us=1_000_000, interval_us=10_000_000, slots=8, smax=FRAME,
                                 on_excess=demote)
        for sport in (9300, 9301):
            self.send(1, self.frame(sport=sport), count=5)
        self.assertEqual(len(self.forwarded()), 10)
        self.assertEqual(queue_counts(self, 2), [8, 0, 0, 1, 1, 0, 0, 0])
        self.check_policed(5, 1, channel=51)
        self.check_policed(5, 1, channel=52)
        self.assertEqual(self.drops("DROP_POLICED"), 0)


class ANewTagStartsAfresh(WindowTest):
    """Window cells carry the tag of the entry that wrote them (docs/dataplane.md): an entry
    re-installed with its tag keeps the exhausted window, one installed with a new tag (a new
    channel on the same channel id) starts with no history, and no register is written by the
    control plane (BMv2's P4Runtime server cannot)."""

    def runTest(self) -> None:
        jumping, moving = 77, 78

        def install(tag: int) -> list[object]:
            return [
                self.admit_jumping_window(1, 2, udp_flow_key(9400, DPORT), channel_id=jumping, priority=4,
                                          window_us=60_000_000, limit=FRAME, tag=tag),
                self.admit_moving_window(1, 2, udp_flow_key(9401, DPORT), channel_id=moving, priority=4,
                                         xmin_us=0, interval_us=60_000_000, slots=2, smax=FRAME, tag=tag),
            ]

        def burst() -> int:
            for sport in (9400, 9401):
                self.send(1, self.frame(sport=sport), count=4)
            return len(self.forwarded())

        def remove(entries: list[object]) -> None:
            for entry in entries:
                self.sw.delete(entry)  # type: ignore[arg-type]

        entries = install(tag=5)
        self.assertEqual(burst(), 1 + 2)
        self.assertEqual(burst(), 0)
        remove(entries)
        entries = install(tag=5)
        self.assertEqual(burst(), 0)
        remove(entries)
        install(tag=6)
        self.assertEqual(burst(), 1 + 2)


class MisconfiguredWindowIsRefusedOrFailsClosed(WindowTest):
    """A ring of 33 slots does not fit the entry (last_slot is 5 bits): the switch refuses it.
    A window of 0 µs, an interval of 0 µs or a group of 0 packets would make no sense; those
    entries let nothing through at the channel's priority rather than everything."""

    def runTest(self) -> None:
        entry = self.sw.table_entry(
            "channels", self.channel_match(1, 2, 17, udp_flow_key(9500, DPORT)), "admit_moving_window",
            {"channel_id": 61, "priority": 4, "on_excess": C["EXCESS_DEMOTE"], "xmin_us": 0,
             "interval_us": 1_000_000, "last_slot": 31, "quantum": 1, "smax": FRAME, "tolerance_us": 0,
             "tag": 1})
        p4info_action = self.sw.schema.action("admit_moving_window")
        last_slot_id = next(p.id for p in p4info_action.params if p.name == "last_slot")
        for param in entry.action.action.params:
            if param.param_id == last_slot_id:
                param.value = (32).to_bytes(1, "big")
        with self.assertRaises(P4RuntimeError):
            self.sw.write(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry)))

        demote = C["EXCESS_DEMOTE"]
        self.admit_jumping_window(1, 2, udp_flow_key(9501, DPORT), channel_id=62, priority=4,
                                  window_us=0, limit=10 * FRAME, on_excess=demote)
        self.admit_moving_window(1, 2, udp_flow_key(9502, DPORT), channel_id=63, priority=4,
                                 xmin_us=0, interval_us=0, slots=8, smax=FRAME, on_excess=demote)
        self.admit_moving_window(1, 2, udp_flow_key(9503, DPORT), channel_id=64, priority=4,
                                 xmin_us=0, interval_us=1_000_000, slots=8, quantum=0, smax=FRAME,
                                 on_excess=demote)
        for sport in (9501, 9502, 9503):
            self.send(1, self.frame(sport=sport), count=3)
        self.assertEqual(len(self.forwarded()), 9)
        self.assertEqual(queue_counts(self, 2), [9, 0, 0, 0, 0, 0, 0, 0])
        for channel in (62, 63, 64):
            self.check_policed(3, 0, channel=channel)
