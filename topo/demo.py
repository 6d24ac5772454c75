"""`make demo`: seed 000's headline result on the christie testbed.

A video-like channel (30 frames/s, peak ≈ 5.25 Mbit/s, ≤ 4,500-byte packets; see topo/video.py)
goes from a1 (the seed's Gluttony) to b1 (Lust) while a2 and a3 flood b1 with best-effort UDP
(iperf3), each at the line rate, so the router's port towards b1 is offered twice what it can
send. The run is made twice:

- unreserved: the video claims priority (DSCP EF) but has no reservation, so the router demotes
  it to best effort and it shares the congested queue;
- reserved: the video first reserves 9 Mbit/s with a 27,000-byte burst at high priority, as in
  seed 000 §4.3.2, through the controller's REST API.

For each run it prints frames sent/received, packet loss, frame latency p50/p99/max, the highest
depth of the reservation's priority queue against the sum of admitted bursts, and the delay bound
the controller computed; it draws both runs into build/results/demo-latency.png and ends with one
machine-readable line per run.

The controller's guarantee monitor (docs/operations.md) watches the reserved run; its verdict is
printed (`monitor: violations=0 ...`). A third run breaks a promise on purpose: the controller is
restarted believing that the port towards b1 runs ten times faster than it does, so the bound it
computes for the same reservation is a tenth of what the port can keep, and the demo reports how
soon after the first frame the monitor raised the network alarm (it must be within two polling
intervals).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from topo import christie
from topo.experiment import (
    VIDEO_PORT,
    MonitorVerdict,
    VideoRun,
    channel,
    monitor_counts,
    queue_reading,
    queue_wait_bound_ms,
    verdict_between,
    video_under_flood,
)
from topo.network import (
    PID_DIR,
    RUN_DIR,
    RunningNetwork,
    rest,
    running,
    start_controller,
    stop_process,
    wait_ready,
)
from topo.p4switch import REPO
from topo.stalls import Stalls
from topo.supervise import write_pid

RESULTS = REPO / "build" / "results"
# The seed's FDDI rate on terrapin-switch. BMv2 forwards far fewer packets per second: on the 2-core
# VM the 100 Mbit/s flood (5,600 frames/s offered) left one reserved frame of 600 over its bound,
# delayed outside the egress queues (docs/bmv2.md), so its demo runs at half the rate.
DEFAULT_RATE_MBPS = {"terrapin": 100.0, "bmv2": 50.0}
PRIORITY = 6
RATE_BYTES_PER_S = 9_000_000 // 8  # 9 Mbit/s
BURST_BYTES = 27_000  # six 4,500-byte packets: the largest frame plus control overhead
BROKEN_SPEEDUP = 10  # the broken run's controller believes b1's port is this much faster


@dataclass
class RunResult:
    label: str
    video: VideoRun
    bound_ms: float  # end to end: what the hosts' clocks are judged against
    max_qdepth: int
    sum_bursts: int  # in packets of the maximum size, the unit of the queue depth
    queue_delay_ms: float  # the switch's longest wait in that queue, enqueue to dequeue
    monitor: MonitorVerdict | None = None  # what the guarantee monitor saw during the run
    queue_bound_ms: float = math.nan  # the queue's own: what the monitor judges

    def percentile(self, p: float, application: bool = False) -> float:
        return self.video.percentile(p, application)

    def frames_over(self, application: bool = False) -> int:
        """Frames that missed the bound; a frame that never arrived whole missed it too."""
        return self.video.frames_over(self.bound_ms, application)

    @property
    def over_bound(self) -> int:
        return self.frames_over()

    def line(self) -> str:
        return (
            f"{self.label}: loss={self.video.packet_loss:.4f} frames={self.video.frames_whole}"
            f" p50_ms={self.percentile(50):.3f} p99_ms={self.percentile(99):.3f}"
            f" max_ms={self.percentile(100):.3f} bound_ms={self.bound_ms:.3f}"
            f" over_bound={self.over_bound} max_qdepth={self.max_qdepth} sum_bursts={self.sum_bursts}"
        )


def one_run(
    run: RunningNetwork,
    label: str,
    seconds: float,
    reserve: bool,
    work: Path,
    flooders: tuple[str, ...] = ("a2", "a3"),
) -> RunResult:
    plan = run.plan
    b1 = plan.hosts["b1"]
    bound_ms = queue_ms = math.nan
    reservation_id = None
    sum_bursts = 0
    if reserve:
        body = channel(
            run, "a1", "b1", VIDEO_PORT, PRIORITY, plan.mtu, rate=RATE_BYTES_PER_S, burst=BURST_BYTES
        )
        granted = rest(run, "POST", "/reservations", body)
        reservation_id = granted["id"]
        bound_ms = granted["allocation"]["worst_case_delay_us"] / 1000
        queue_ms = queue_wait_bound_ms(granted, "terrapin")
        sum_bursts = queue_reading(run, "terrapin", b1.port, PRIORITY).burst_packets
        allocation = granted["allocation"]
        print(
            f"  reservation {reservation_id}: {allocation['rate']} B/s, {allocation['burst']} B;"
            f" computed bound {bound_ms:.3f} ms"
        )
    (work / label).mkdir(parents=True, exist_ok=True)
    interval = rest(run, "GET", "/monitor")["interval_s"]
    before = monitor_counts(run, b1.port, PRIORITY)
    try:
        video = video_under_flood(
            run,
            source="a1",
            sink="b1",
            flooders=flooders,
            seconds=seconds,
            work=work / label,
            shape=(RATE_BYTES_PER_S, BURST_BYTES) if reserve else None,
        )
        # The last frames' window is checked at the next poll; wait for it to be counted.
        time.sleep(2 * interval)
        monitor = verdict_between(before, monitor_counts(run, b1.port, PRIORITY)) if reserve else None
    finally:
        if reservation_id is not None:
            rest(run, "DELETE", f"/reservations/{reservation_id}")
    if monitor is not None:
        monitor.interval_s = interval
        print(f"  {monitor.line()}")
    queue = queue_reading(run, "terrapin", b1.port, PRIORITY)
    return RunResult(
        label, video, bound_ms, queue.max_depth_packets, sum_bursts, queue.max_delay_ms, monitor, queue_ms
    )


def broken_run(run: RunningNetwork, seconds: float, work: Path) -> RunResult:
    """The same reservation under a controller that believes b1's port is BROKEN_SPEEDUP times
    faster than it is, and the switch exact: its bound cannot hold, and the monitor must say so
    within two polls."""
    b1 = run.plan.hosts["b1"]
    config = yaml.safe_load(run.config_path.read_text())
    for switch in config["switches"]:
        # ... and that the switch is exact: a promise tight enough that waits the port's real
        # rate makes are past it, not within the jitter it would otherwise allow for.
        switch["jitter_us"] = 0
        for port in switch["ports"]:
            if port["peer"] == "b1":
                port["rate_bps"] *= BROKEN_SPEEDUP
                if "rate_pps" in port:  # a BMv2 port is admitted by its packet rate
                    port["rate_pps"] *= BROKEN_SPEEDUP
    broken_config = run.config_path.with_name("controller-broken.yaml")
    broken_config.write_text(yaml.safe_dump(config, sort_keys=False))
    stop_process(run.controller)
    run.controller = start_controller(
        broken_config, run.rest_url, RUN_DIR / "christie-controller-broken.log", PID_DIR / "controller.pid"
    )
    wait_ready(run)
    result = one_run(run, "broken", seconds, reserve=True, work=work, flooders=())
    sender_log = json.loads((work / "broken" / "video-sender.json").read_text())
    first_frame = sender_log["frames"][0]["start_ns"] / 1e9
    alarms = [
        e
        for e in rest(run, "GET", "/events?cause=network&kind=queue_delay&limit=1000")
        if e["port"] == b1.port and e["raised_at"] >= first_frame - 1
    ]
    if result.monitor is not None and alarms:
        result.monitor.alarm_s = min(e["raised_at"] for e in alarms) - first_frame
    return result


def plot(results: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for result, style in zip(results, ("tab:red", "tab:blue"), strict=False):
        video = result.video
        xs = [t.at_s for t in video.timings]
        ys = [t.network_ms for t in video.timings]
        whole = f"{video.frames_whole}/{video.frames_sent} frames whole"
        ax.plot(xs, ys, ".", ms=3, color=style, label=f"{result.label} ({whole})")
        if video.broken:
            ax.plot(
                [t.at_s for t in video.broken],
                [t.network_ms for t in video.broken],
                "x",
                ms=3,
                color=style,
                alpha=0.5,
                label=f"{result.label}, frames that lost packets (the packets that arrived)",
            )
    bound = results[-1].bound_ms
    ax.axhline(bound, color="black", ls="--", lw=1, label=f"computed bound {bound:.2f} ms")
    ax.set_yscale("log")
    ax.set_xlabel("time since the first frame (s)")
    ax.set_ylabel("frame delay through the network (ms)")
    ax.set_title("Video across Terrapin with the egress port offered 2x its line rate")
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def report(result: RunResult) -> None:
    print(f"{result.label}:")
    video = result.video
    print(
        f"  frames sent {video.frames_sent}, received whole {video.frames_whole};"
        f" packet loss {video.packet_loss:.2%}"
    )
    print(
        f"  frame delay through the network p50 {result.percentile(50):.3f} ms, "
        f"p99 {result.percentile(99):.3f} ms, max {result.percentile(100):.3f} ms; "
        f"bound {result.bound_ms:.3f} ms, {result.over_bound} frames over it (lost frames included)"
    )
    print(
        f"  as the application saw it (the sender's own lateness included) p50 "
        f"{result.percentile(50, True):.3f} ms, p99 {result.percentile(99, True):.3f} ms, "
        f"max {result.percentile(100, True):.3f} ms; {result.frames_over(True)} frames over the bound"
    )
    print(
        f"  priority-{PRIORITY} queue towards b1: max depth {result.max_qdepth} packets; "
        f"admitted bursts {result.sum_bursts} packets; longest wait in it {result.queue_delay_ms:.3f} ms"
    )
    for timing in video.slowest(3):
        print(
            f"  slow frame {timing.frame}: {timing.latency_ms:.3f} ms to the application; the sender "
            f"took {timing.sending_ms:.3f} ms to hand it over, the network {timing.network_ms:.3f} ms"
        )


def three_runs(
    run: RunningNetwork, seconds: float, broken_seconds: float, work: Path
) -> tuple[RunResult, RunResult, RunResult]:
    """The demo on a running christie: unreserved, reserved, and the broken promise (which
    leaves the network with a controller of its own, stopped here)."""
    print("run 1: no reservation (the video's priority claim is demoted)")
    unreserved = one_run(run, "unreserved", seconds, reserve=False, work=work)
    print("run 2: 9 Mbit/s, 27,000-byte burst reserved at high priority")
    reserved = one_run(run, "reserved", seconds, reserve=True, work=work)
    print(
        f"run 3: a broken promise: the controller restarted believing b1's port is "
        f"{BROKEN_SPEEDUP}x faster than it is; the same reservation, no flood"
    )
    try:
        broken = broken_run(run, broken_seconds, work)
    finally:
        stop_process(run.controller)
    # The unreserved run is judged against the bound the reservation was given.
    unreserved.bound_ms = reserved.bound_ms
    return unreserved, reserved, broken


def problems(reserved: RunResult, broken: RunResult, stalls: Stalls | None = None) -> list[str]:
    """Why the demo failed; empty if it passed. With `stalls` (topo/stalls.py, E1), the reserved
    video's frames late while the machine stalled are left out, and so are the monitor's
    violations when the hosts saw every late frame and every one was in a stall (the video is
    alone in its queue: a packet that waited past the bound there also arrived late)."""
    found = []
    video = reserved.video
    over = video.frames_over_outside_stalls(reserved.bound_ms, stalls) if stalls else reserved.over_bound
    if video.packet_loss > 0 or over > 0:
        found.append(f"reserved video: loss {video.packet_loss:.2%}, {over} frames over the bound")
    in_stalls = video.queue_wait_in_stalls(reserved.queue_bound_ms, reserved.queue_delay_ms, stalls)
    if reserved.monitor is not None and reserved.monitor.violations and not in_stalls:
        found.append(f"the monitor saw {reserved.monitor.violations} violations in the reserved run")
    alarm = broken.monitor.alarm_s if broken.monitor is not None else None
    interval = broken.monitor.interval_s if broken.monitor is not None else 0.0
    if alarm is None or alarm > 2 * interval:
        found.append(
            f"the broken promise's alarm came {alarm} s after the first frame (polls every {interval:g} s)"
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Seed 000's reserved-vs-unreserved video demo.")
    parser.add_argument("--seconds", type=float, default=20.0, help="video length per run")
    parser.add_argument(
        "--switch", choices=("terrapin", "bmv2"), default=os.environ.get("SWITCH", "terrapin")
    )
    parser.add_argument(
        "--rate-mbps",
        type=float,
        default=None,
        help=f"line rate (default: {DEFAULT_RATE_MBPS['terrapin']:g} on terrapin-switch, "
        f"{DEFAULT_RATE_MBPS['bmv2']:g} on BMv2)",
    )
    parser.add_argument("--broken-seconds", type=float, default=5.0, help="video length of run 3")
    args = parser.parse_args(argv)

    rate_mbps = args.rate_mbps or DEFAULT_RATE_MBPS[args.switch]
    if args.switch == "bmv2" and args.rate_mbps is None:
        print(
            f"BMv2: links at {rate_mbps:g} Mbit/s, not the seed's 100 (docs/bmv2.md: simple_switch is"
            " slower; at 100 Mbit/s the flood loads its one ingress thread past what it keeps up with)"
        )
    plan = christie.plan(rate_mbps=rate_mbps)
    work = RESULTS / "demo"
    work.mkdir(parents=True, exist_ok=True)
    # make stop ends the demo as it ends make run: by the PIDs recorded in build/run/pids.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    runner_pid = PID_DIR / "runner.pid"
    write_pid(runner_pid, os.getpid())
    try:
        with running(plan, switch_kind=args.switch, rest_port=18080, state_dir=work, pid_dir=PID_DIR) as run:
            wait_ready(run)
            unreserved, reserved, broken = three_runs(run, args.seconds, args.broken_seconds, work)
    finally:
        runner_pid.unlink(missing_ok=True)
    print()
    report(unreserved)
    report(reserved)
    png = RESULTS / "demo-latency.png"
    plot([unreserved, reserved], png)
    print(f"plot: {png.relative_to(REPO)}")
    print(reserved.line())
    print(unreserved.line())
    assert reserved.monitor is not None and broken.monitor is not None
    print(f"reserved {reserved.monitor.line()}")
    alarm = broken.monitor.alarm_s
    if alarm is None:
        print("broken: the monitor raised no network alarm")
    else:
        print(
            f"broken: bound_ms={broken.bound_ms:.3f}; the monitor raised the network alarm "
            f"{alarm:.3f} s after the first frame (polling every {broken.monitor.interval_s:g} s)"
        )
    print(f"broken {broken.monitor.line()}")
    return 0 if not problems(reserved, broken) else 1


if __name__ == "__main__":
    sys.exit(main())
