"""The emulated wire ahead of what it connects: while a measured run lasts, the kernel's softirq
threads (ksoftirqd/N, which carry packets across the veth pairs when the softirq budget runs out
in the sender's own context) run at a real-time priority above the switch's forwarding threads
and the senders. `python -m topo.rtwire` puts them back as the kernel has them.

Why: those threads are normal-priority by default, and the switch's forwarding threads (SCHED_FIFO
20, busy-waiting up to 500 µs for admitted traffic) and the senders (SCHED_FIFO 10) starve them
under a flood: packets waited 2-4 ms in the veths' backlog with no stall of the machine (E7's
urgent channel, bound 3.96 ms: 7.9 ms). On a wire nothing waits behind the hosts' CPUs."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

# Above the switch's forwarding threads (topo/p4switch.py RT_PRIORITY 20) and the senders (10),
# below the stall witness's probes (topo/stalls.py, 90).
SOFTIRQ_PRIORITY = 50
# For runs whose load is the control plane rather than a flood (make chaos: replicas, PostgreSQL
# and clients talking TCP over loopback, whose softirq work ksoftirqd/N carries too): above the
# senders and every normal-priority process, below the switch's forwarding threads. At 50 that
# loopback work preempted the switch: in two minutes of chaos its receive rings held frames over
# 2 ms 109-271 times a port (up to 73 ms) and 1-3 measured packets a run were late; at 15, 14-52
# times, and none late.
SOFTIRQ_BELOW_SWITCH = 15


def softirq_threads() -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/comm"):
        try:
            if status.read_text().startswith("ksoftirqd/"):
                found.append(int(status.parent.name))
        except OSError:
            continue
    return sorted(found)


@contextlib.contextmanager
def wire_first(priority: int = SOFTIRQ_PRIORITY) -> Iterator[None]:
    """ksoftirqd/N at SCHED_FIFO `priority` for the block, then as they were. Without the right
    to (not root), the block runs as the machine is."""
    before: dict[int, tuple[int, int]] = {}
    for pid in softirq_threads():
        try:
            before[pid] = (os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority)
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
        except OSError:
            before.pop(pid, None)
    try:
        yield
    finally:
        for pid, (policy, priority) in before.items():
            with contextlib.suppress(OSError):
                os.sched_setscheduler(pid, policy, os.sched_param(priority))


def reset() -> None:
    """ksoftirqd/N back to the kernel's default (SCHED_OTHER), as after an experiment that was
    killed outright and never restored them (make experiments starts with this)."""
    for pid in softirq_threads():
        with contextlib.suppress(OSError):
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))


if __name__ == "__main__":
    reset()
