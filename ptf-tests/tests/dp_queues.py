"""Strict priority between the queues of a rate-limited port, and the egress telemetry.

Port rate_limited_port is limited by the switch to rate_limited_bps, so that a burst offered
faster than that builds a queue. terrapin-switch paces the port itself (--port-rate, bytes/s);
p4lang's simple_switch limits each of the port's priority queues to a packet rate (its CLI's
set_queue_rate, packets/s; ptf-tests/run.sh sets rate_limited_bps / 8 / FRAME), the same rate
for the FRAME-byte frames these tests send. The margins are large: at 1 Mbit/s a 1000-byte frame
takes 8 ms to leave, while the whole burst is offered in a few milliseconds, so dozens of frames
wait however loaded the machine is.

What both switches must do, and how they differ (docs/bmv2.md):
- admitted frames that arrive behind a best-effort backlog do not wait for it;
- terrapin-switch serves the port at its rate in strict priority: the admitted frames leave
  back to back, every best-effort frame waits;
- BMv2 gives every priority queue its own packet-rate limiter and serves the highest queue whose
  next packet is due: the admitted queue runs at the port's rate beside the best-effort queue,
  one admitted and one best-effort frame per period, so the port sends up to twice its rate
  while both are backlogged.
"""

from __future__ import annotations

import time

from terrapin_base import C, TerrapinTest, generous_envelope, sized_udp, udp_flow_key

FRAME = 1000
LOW_FRAMES = 40
HIGH_FRAMES = 10
HIGH_PRIORITY = 6


class QueueTest(TerrapinTest):
    def overload(self) -> list[str]:
        """Offers LOW_FRAMES best-effort frames, then HIGH_FRAMES of an admitted channel, all
        for the rate-limited port; returns the kinds (low/high) in the order they left it."""
        out = self.rate_limited_port
        self.admit(2, out, 17, udp_flow_key(8000, 8001), channel_id=5, priority=HIGH_PRIORITY,
                   meter=generous_envelope())
        low = bytes(sized_udp(1, out, FRAME, sport=3000, dport=3001))
        high = bytes(sized_udp(2, out, FRAME, sport=8000, dport=8001))
        self.send(1, low, count=LOW_FRAMES)
        # The two ports are read by independent receive loops, so frames sent back to back on
        # two ports may be enqueued in either order; a short pause makes the admitted frames
        # arrive behind the whole best-effort burst (of which ~36 frames, 8 ms each, still wait).
        time.sleep(0.03)
        self.send(2, high, count=HIGH_FRAMES)
        limit = 10 + 4 * (LOW_FRAMES + HIGH_FRAMES) * FRAME * 8 / self.rate_limited_bps
        received = self.collect(out, idle=2.0, limit=limit)
        # Frames are told apart by their UDP source port (bytes 34..35 of the frame).
        order = ["high" if p[34:36] == (8000).to_bytes(2, "big") else "low" for _, p in received]
        return order


class StrictPriorityOnRateLimitedPort(QueueTest):
    """Admitted frames that arrive behind a best-effort backlog leave before it."""

    def runTest(self) -> None:
        order = self.overload()
        self.assertEqual(order.count("low"), LOW_FRAMES, "best effort lost frames (queue too short?)")
        self.assertEqual(order.count("high"), HIGH_FRAMES)
        first_high = order.index("high")
        last_high = max(i for i, kind in enumerate(order) if kind == "high")
        lows_after = len(order) - 1 - last_high
        lows_between = last_high - first_high + 1 - HIGH_FRAMES
        self.record_figure(f"{lows_after} of {LOW_FRAMES} best-effort frames left after the last of "
                           f"{HIGH_FRAMES} priority-{HIGH_PRIORITY} frames, {lows_between} between the "
                           f"first and the last; departure order {''.join(k[0] for k in order)}")
        # With FIFO service all lows would leave first (lows_after == 0).
        self.assertGreaterEqual(lows_after, LOW_FRAMES // 2)
        if self.switch_kind == "bmv2":
            # One limiter per queue: the best-effort queue keeps its own rate beside the admitted
            # one, at most one of its frames per admitted frame (plus one at the turn).
            self.assertLessEqual(lows_between, HIGH_FRAMES)
        else:
            # One paced port in strict priority: nothing of lower priority in between.
            self.assertEqual(lows_between, 0)


class QueueTrafficCounters(QueueTest):
    """queue_traffic counts the packets and bytes that left each (port, queue), and nothing
    where nothing left."""

    def runTest(self) -> None:
        out = self.rate_limited_port
        self.assertEqual(len(self.overload()), LOW_FRAMES + HIGH_FRAMES)
        self.assertEqual(self.sw.counter("queue_traffic", self.queue_cell(out, C["PRIORITY_BEST_EFFORT"])),
                         (LOW_FRAMES, LOW_FRAMES * FRAME))
        self.assertEqual(self.sw.counter("queue_traffic", self.queue_cell(out, HIGH_PRIORITY)),
                         (HIGH_FRAMES, HIGH_FRAMES * FRAME))
        for cell in (self.queue_cell(3, 0), self.queue_cell(out, 3)):
            self.assertEqual(self.sw.counter("queue_traffic", cell), (0, 0))


class MaxQueueDelay(QueueTest):
    """max_queue_delay holds the longest wait (deq_timedelta, us) per (port, queue): the
    best-effort backlog waited for most of the burst, the admitted channel far less."""

    def runTest(self) -> None:
        out = self.rate_limited_port
        self.assertEqual(len(self.overload()), LOW_FRAMES + HIGH_FRAMES)
        low_delay = self.register("max_queue_delay", self.queue_cell(out, C["PRIORITY_BEST_EFFORT"]))
        high_delay = self.register("max_queue_delay", self.queue_cell(out, HIGH_PRIORITY))
        frame_time_us = FRAME * 8 * 1_000_000 / self.rate_limited_bps
        self.record_figure(f"port {out}: max delay queue 0 {low_delay} us, queue {HIGH_PRIORITY} "
                           f"{high_delay} us (one frame = {frame_time_us:.0f} us)")
        self.assertGreaterEqual(low_delay, (LOW_FRAMES // 2) * frame_time_us)
        # The admitted frames waited for each other (HIGH_FRAMES - 1 frame times for the last),
        # never for the best-effort backlog (which FIFO service would have added).
        self.assertLess(high_delay, (LOW_FRAMES // 2) * frame_time_us)
        self.assertLess(high_delay, low_delay)
        for cell in (self.queue_cell(3, 0), self.queue_cell(out, 3)):
            self.assertEqual(self.register("max_queue_delay", cell), 0)


class MaxQueueDepth(QueueTest):
    """max_queue_depth holds, per (port, queue), the deepest backlog a packet of that queue
    found in its own queue: enq_qdepth counts the packet's priority queue only, as p4lang's
    simple_switch sets it (egress_buffers.size(port, priority)) and terrapin-switch does alike.
    The admitted frames, which arrive behind the best-effort burst, see only each other: seed
    000's check (top queue depth <= the admitted bursts) reads straight from this register."""

    def runTest(self) -> None:
        out = self.rate_limited_port
        self.assertEqual(len(self.overload()), LOW_FRAMES + HIGH_FRAMES)
        low_depth = self.register("max_queue_depth", self.queue_cell(out, C["PRIORITY_BEST_EFFORT"]))
        high_depth = self.register("max_queue_depth", self.queue_cell(out, HIGH_PRIORITY))
        self.record_figure(f"port {out}: max depth seen by queue 0 {low_depth}, by queue {HIGH_PRIORITY} "
                           f"{high_depth} (frames offered: {LOW_FRAMES} then {HIGH_FRAMES})")
        # The last best-effort frame found most of the burst ahead of it, never all of it.
        self.assertGreaterEqual(low_depth, LOW_FRAMES // 2)
        self.assertLess(low_depth, LOW_FRAMES)
        # The admitted frames found most of their own burst, and none of the best-effort one.
        self.assertGreaterEqual(high_depth, HIGH_FRAMES // 2)
        self.assertLess(high_depth, HIGH_FRAMES)
        for cell in (self.queue_cell(3, 0), self.queue_cell(out, 3)):
            self.assertEqual(self.register("max_queue_depth", cell), 0)


class DelayBandsCountWaitsAgainstTheBound(QueueTest):
    """queue_delay_bands counts each packet of a queue that has a queue_bounds entry once, in
    the band of its wait against the bound: up to a quarter, half, the bound, or over it. It is
    a counter (read by PI as well as by terrapin-switch), so no register is read here. A queue
    without an entry counts nothing."""

    def runTest(self) -> None:
        out = self.rate_limited_port
        frame_us = FRAME * 8 * 1_000_000 // self.rate_limited_bps
        # Half the admitted frames' worth: the last frames cannot have waited less than the
        # frames ahead of them took on the wire, so at least that many are over it.
        bound = (HIGH_FRAMES // 2) * frame_us
        self.sw.insert("queue_bounds", {"port": out, "priority": HIGH_PRIORITY}, "set_delay_bound",
                       {"quarter_us": bound // 4, "half_us": bound // 2, "limit_us": bound})
        self.assertEqual(len(self.overload()), LOW_FRAMES + HIGH_FRAMES)
        bands = C["DELAY_BANDS"]

        def counts(priority: int) -> list[tuple[int, int]]:
            cell = self.queue_cell(out, priority)
            return [self.sw.counter("queue_delay_bands", cell * bands + b) for b in range(bands)]

        high = counts(HIGH_PRIORITY)
        self.record_figure(f"port {out} queue {HIGH_PRIORITY}, bound {bound} us: packets per band "
                           f"(quarter, half, within, over) {[p for p, _ in high]}")
        self.assertEqual(sum(p for p, _ in high), HIGH_FRAMES)
        self.assertEqual(sum(b for _, b in high), HIGH_FRAMES * FRAME)
        # frames 6..9 had at least 6 frames ahead of them on the wire: 48 ms against 40 ms
        self.assertGreaterEqual(high[C["DELAY_BAND_OVER"]][0], HIGH_FRAMES - (HIGH_FRAMES // 2 + 1))
        # the first waited for one best-effort frame in transmission at most
        self.assertGreaterEqual(sum(p for p, _ in high[: C["DELAY_BAND_OVER"]]), 1)
        self.assertEqual(counts(C["PRIORITY_BEST_EFFORT"]), [(0, 0)] * bands)
