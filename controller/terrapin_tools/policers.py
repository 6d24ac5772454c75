"""The data plane's policers for one channel, in Python: what p4src/include/ingress.p4's
admit_moving_window and admit_jumping_window and BMv2's meters do to a sequence of packets.

Two users: the property tests (controller/tests/test_policers.py) check the admission tests'
bounds against them, and the experiments replay a run through them with the machine's stalls
(experiments/harness.py, `losses_the_stalls_explain`), to tell a loss the stalls caused from
one the system did. Times in µs; an `amount` is whatever the policer counts (bytes, or 1 per
packet).
"""

from __future__ import annotations

from typing import Protocol

from terrapin.admission.model import JUMPING_WINDOW, MICROS, MOVING_WINDOW, ChannelEnvelope, Policer
from terrapin.admission.policers import jumping_window_bytes, moving_ring


class PolicerModel(Protocol):
    def offer(self, now: int, amount: int) -> bool:
        """Whether a packet of `amount` stamped `now` keeps the envelope (and is counted)."""
        ...


class MovingWindow:
    """admit_moving_window: the ring of group start times + I, the group fill and the Xmin
    gate, judged with a tolerance as GCRA does (a packet up to `tolerance` early passes; the
    state advances from its virtual time, never from its stamp alone). Counts packets."""

    def __init__(self, policer: Policer, tolerance: int = 0) -> None:
        ring = moving_ring(policer)
        self.slots, self.quantum = ring.slots, ring.quantum
        self.xmin, self.interval = policer.xmin_us, policer.interval_us
        self.tolerance = tolerance
        self.free_at = [0] * self.slots
        self.head = self.fill = self.next = 0

    def offer(self, now: int, amount: int = 1) -> bool:
        free_at = self.free_at[self.head] if self.fill == 0 else 0
        latest = now + self.tolerance
        if latest < self.next or latest < free_at:
            return False
        virtual = max(now, self.next, free_at)
        self.next = virtual + self.xmin
        if self.fill == 0:
            self.free_at[self.head] = virtual + self.interval
        self.fill += 1
        if self.fill >= self.quantum:
            self.fill = 0
            self.head = 0 if self.head >= self.slots - 1 else self.head + 1
        return True


class JumpingWindow:
    """admit_jumping_window: `limit` per window of `window` µs, the current window and the count
    of the window before it; windows follow one another while the channel is busy and restart
    at a packet after two windows (and the tolerance) without one; a packet within `tolerance`
    after a boundary may count in the window before, one within it before a boundary, its own
    window full, in the window after (which becomes current), each if it has room, the earlier
    first."""

    def __init__(self, window: int, limit: int, tolerance: int = 0) -> None:
        self.window, self.limit, self.tolerance = window, limit, tolerance
        self.start = self.last = 0
        self.used = self.before = 0
        self.fresh = True

    def offer(self, now: int, amount: int = 1) -> bool:
        if self.fresh or now - self.last >= 2 * self.window + self.tolerance:
            self.start, self.used, self.before = now, 0, self.limit
        for _ in range(3):  # as the action, unrolled: at most three windows ahead when busy
            if now - self.start >= self.window:
                self.start += self.window
                self.before, self.used = self.used, 0
        elapsed = max(0, now - self.start)
        self.last = now if self.fresh else max(self.last, now)
        self.fresh = False
        if elapsed < self.tolerance and amount <= self.limit - self.before:
            self.before += amount
        elif amount <= self.limit - self.used:
            self.used += amount
        elif elapsed + self.tolerance >= self.window and amount <= self.limit:
            self.start += self.window
            self.before, self.used = self.used, amount
        else:
            return False
        return True


class Meter:
    """A channel's meter as the controller programs it (CIR = PIR, CBS = PBS, so one bucket):
    it starts full, refills at `rate` bytes/s up to `burst`, and a packet conforms if the bucket
    holds its bytes, which it then takes (BMv2's bm_sim; terrapin-switch's engine alike)."""

    def __init__(self, rate: int, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.stamp: int | None = None

    def offer(self, now: int, amount: int) -> bool:
        if self.stamp is not None and now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate / MICROS)
        self.stamp = now if self.stamp is None else max(self.stamp, now)
        if amount > self.tokens:
            return False
        self.tokens -= amount
        return True


def first_hop_policer(env: ChannelEnvelope, burst: int, tolerance: int) -> PolicerModel:
    """The policer a channel's first switch runs, counting IPv4 bytes (the meter, the jumping
    window counting bytes) or packets: `burst` is the allocation's (the meter's tolerance is in
    it), `tolerance` the window's."""
    policer = env.policer
    if policer.kind == MOVING_WINDOW:
        return MovingWindow(policer, tolerance)
    if policer.kind == JUMPING_WINDOW:
        limit = jumping_window_bytes(env)
        if policer.count_packets:
            limit //= env.max_packet
        return JumpingWindow(policer.window_us, limit, tolerance)
    return Meter(env.rate, burst)


def counts_packets(env: ChannelEnvelope) -> bool:
    """Whether the first hop's policer counts packets (1 each) rather than bytes."""
    kind = env.policer.kind
    return kind == MOVING_WINDOW or (kind == JUMPING_WINDOW and env.policer.count_packets)
