"""A witness of the times the machine itself did not run: one probe per CPU, pinned there at a
real-time priority above everything the experiments start (the switch's forwarding threads, the
senders), asks to wake every millisecond and records each wake-up that came late.

Why: on a virtual machine the hypervisor deschedules a vCPU for a few milliseconds now and then
(this project's 2-core VMs, idle: ~18 wake-ups a second later than 0.5 ms, the longest ~3 ms). A
packet in flight through a host's or the switch's receive path at that moment arrives that much
later, and a receiver's timestamps bunch, while no queue or policer did anything. A delay bound of
2-3 ms cannot be judged by the hosts' clocks without knowing when that happened; the experiments
use `Stalls.overlap` to tell a late packet the machine explains from one it does not.

Run as `python -m topo.stalls --cpu N --out FILE`: probes until SIGTERM, then writes the stalls
(CLOCK_REALTIME ns, the experiments' senders' clock) as JSON."""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from terrapin_tools.processes import stop_all

PERIOD_NS = 1_000_000
# Late wake-ups shorter than this are the kernel's own timer and scheduling latency, not a stall.
RECORD_ABOVE_NS = 200_000
# A stall this long holds a packet (`Stalls.holding`); shorter ones are the scheduling the
# switches' jitter already covers.
STALL_NS = 500_000
# Above the switch's forwarding threads (topo/p4switch.py, 20) and the senders (10), below the
# kernel's own real-time threads (99).
PROBE_PRIORITY = 90


@dataclass(frozen=True)
class Stalls:
    """The machine's stalls, merged over every CPU: sorted, non-overlapping [start, end) in ns."""

    intervals: tuple[tuple[int, int], ...]
    cpus: int = 0

    @classmethod
    def merged(cls, per_cpu: list[list[tuple[int, int]]]) -> Stalls:
        spans = sorted(span for spans in per_cpu for span in spans)
        out: list[tuple[int, int]] = []
        for start, end in spans:
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end))
            else:
                out.append((start, end))
        return cls(tuple(out), len(per_cpu))

    def overlap(self, start_ns: int, end_ns: int) -> int:
        """How many ns of [start_ns, end_ns) some CPU was stalled."""
        i = max(0, bisect.bisect_right(self.intervals, (start_ns, end_ns)) - 1)
        total = 0
        while i < len(self.intervals) and self.intervals[i][0] < end_ns:
            s, e = self.intervals[i]
            total += max(0, min(e, end_ns) - max(s, start_ns))
            i += 1
        return total

    def holding(self, at_ns: int, margin_ns: int = 0) -> int | None:
        """The end of the stall at least STALL_NS long that was under way at `at_ns`, or began
        within `margin_ns` after it (a packet sent just before still waited for it); None if
        there was none."""
        i = bisect.bisect_right(self.intervals, (at_ns + margin_ns, 1 << 62)) - 1
        while i >= 0 and self.intervals[i][1] > at_ns:
            start, end = self.intervals[i]
            if end - start >= STALL_NS:
                return end
            i -= 1
        return None

    def summary(self, start_ns: int | None = None, end_ns: int | None = None) -> str:
        spans = [
            (s, e)
            for s, e in self.intervals
            if (start_ns is None or e > start_ns) and (end_ns is None or s < end_ns)
        ]
        if not spans:
            return "no stalls over 0.2 ms"
        longest = max(e - s for s, e in spans)
        total = sum(e - s for s, e in spans)
        return (
            f"{len(spans)} stalls over 0.2 ms, {total / 1e6:.1f} ms in all,"
            f" the longest {longest / 1e6:.2f} ms"
        )


@contextlib.contextmanager
def witnessed(work: Path) -> Iterator[list[Stalls]]:
    """Probes on every CPU while the block runs; the list it yields holds the Stalls once the
    block has ended (empty if the probes could not run, e.g. without root)."""
    cpus = sorted(os.sched_getaffinity(0))
    work.mkdir(parents=True, exist_ok=True)
    outs = [work / f"stalls-cpu{cpu}.json" for cpu in cpus]
    for out in outs:
        out.unlink(missing_ok=True)
    probes = [
        subprocess.Popen([sys.executable, "-m", "topo.stalls", "--cpu", str(cpu), "--out", str(out)])
        for cpu, out in zip(cpus, outs, strict=True)
    ]
    result: list[Stalls] = []
    try:
        yield result
    finally:
        stop_all(probes)
        if all(out.exists() for out in outs):
            per_cpu = [[(s, e) for s, e in json.loads(out.read_text())["stalls"]] for out in outs]
            result.append(Stalls.merged(per_cpu))


def probe(cpu: int, out: Path) -> None:
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PROBE_PRIORITY))
    stalls: list[tuple[int, int]] = []
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    parent = os.getppid()
    # An experiment killed outright cannot stop its probes: they end when it is gone.
    while not stopping and os.getppid() == parent:
        asked = time.monotonic_ns()
        time.sleep(PERIOD_NS / 1e9)
        woke = time.monotonic_ns()
        late = woke - asked - PERIOD_NS
        if late > RECORD_ABOVE_NS:
            now = time.time_ns()
            stalls.append((now - late, now))
    out.write_text(json.dumps({"cpu": cpu, "period_ns": PERIOD_NS, "stalls": stalls}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    probe(args.cpu, args.out)


if __name__ == "__main__":
    main()
