"""E4 — seed 000 §4.3.2, Figure 19: video and a file transfer at high priority under growing
background load; the high-priority queue never deeper than the sum of the admitted bursts.

The seed reserved the video at 9 Mbit/s with a 27,000-byte burst and a file transfer at 18 Mbit/s
with a 9,000-byte burst (together 8 packets of 4,500 bytes), then ran four tests: video alone,
video and file transfer, both with 47 Mbit/s of 4,377-byte background, both with 7.2 Mbit/s of
128-byte background. Its router's high-priority queue stayed within the 8 packets except in the
fourth test (13), where the small background packets took its CPU.

Here, on christie, a1 sends the video to b1 (paced, as E3 explains) and a2 the file transfer
(4,500-byte packets at its rate, held by its own token bucket), both reserved through the REST
API; a3 sends the background to b1 with iperf3. Each test clears the switch's queue maxima
first (DELETE /status/switches/terrapin/maxima) and reads them after (GET /status/switches/
terrapin: the deepest the priority-6 queue towards b1 was when a packet joined it). Verdict: in
every test the maximum depth is at most the admitted bursts in packets, and no video frame is
lost or later through the network than the controller's bound, save frames whose extra delay the
machine's own stalls while they were in flight account for (topo/stalls.py: a VM's vCPU held by
its hypervisor for a few ms is no queueing of ours, and the bound here is 3.3 ms).

    sudo build/venv/bin/python -m experiments.e4_queue_depth [--short] [--switch bmv2]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from experiments.harness import Experiment, Promise, pyplot
from terrapin.admission.model import ChannelEnvelope
from topo import christie
from topo.experiment import (
    VIDEO_PORT,
    FirstHopCounts,
    FlowRun,
    QueueReading,
    Traffic,
    VideoRun,
    channel,
    clear_maxima,
    evenly,
    first_hop_counts,
    flow,
    queue_reading,
    read_flow_logs,
    read_video_logs,
    release,
    reserve,
)
from topo.network import RunningNetwork
from topo.video import MAX_PACKET_BYTES

PRIORITY = 6
VIDEO = (9_000_000 // 8, 27_000)  # rate B/s, burst B
FILE = (18_000_000 // 8, 9_000)
FILE_PORT = 5030
LINE_MBPS = {"terrapin": 100.0, "bmv2": 50.0}
# simple_switch carries every port's packets on one ingress thread, about 4,800-6,200 packets/s
# here (docs/bmv2.md); what it cannot take is lost before any queue, admitted or not. So on BMv2
# a background is held to this many packets/s (the 128 B one: 2 of 7.2 Mbit/s), leaving room
# for the video and the file transfer.
BMV2_BACKGROUND_PPS = 2000
# (name, background packet bytes, background Mbit/s, file transfer on)
TESTS = (
    ("video alone", 0, 0.0, False),
    ("video + file transfer", 0, 0.0, True),
    ("+ 47 Mbit/s of 4,377 B background", 4377, 47.0, True),
    ("+ 7.2 Mbit/s of 128 B background", 128, 7.2, True),
)
KEYS = {
    "video alone": "alone",
    "video + file transfer": "file",
    "+ 47 Mbit/s of 4,377 B background": "bg4377",
    "+ 7.2 Mbit/s of 128 B background": "bg128",
}
SEED = {  # mean / max frame latency, max queue depth
    "video alone": ("10.1 ms", "22 ms", "<= 8"),
    "video + file transfer": ("10.8 ms", "22 ms", "<= 8"),
    "+ 47 Mbit/s of 4,377 B background": ("12.9 ms", "22 ms", "<= 8"),
    "+ 7.2 Mbit/s of 128 B background": ("~26 ms", "33 ms", "13 (> 8: the router's CPU)"),
}

EXPERIMENT = Experiment(
    4,
    "queue-depth",
    title="video + file transfer under background load; priority queue depth vs admitted bursts",
    seed_ref="seed 000 §4.3.2, Figure 19",
    seed_numbers=[
        "video 9 Mbit/s, 27,000 B burst; file transfer 18 Mbit/s, 9,000 B burst: 8 packets in all",
        "mean/max frame latency: alone 10.1/22 ms, + file 10.8/22, + 47 Mbit/s of 4,377 B 12.9/22,"
        " + 7.2 Mbit/s of 128 B ~26/33",
        "max high-priority queue depth <= 8 except in the 128 B test (13)",
    ],
)


@dataclass
class FileTransfer:
    """The file transfer's packets in one test: what the sender and receiver logged, and what
    its first switch's channel counters saw over the test (the meter's marked packets are
    demoted to best effort, where the background may drown them)."""

    run: FlowRun
    seen: FirstHopCounts


@dataclass
class Test:
    name: str
    video: VideoRun
    queue: QueueReading
    bound_ms: float
    file: FileTransfer | None


def body(run: RunningNetwork, source: str, port: int, envelope: tuple[int, int]) -> dict[str, object]:
    return channel(run, source, "b1", port, PRIORITY, run.plan.mtu, rate=envelope[0], burst=envelope[1])


def background_mbps(switch: str, packet_bytes: int, mbps: float) -> float:
    """The background's rate as run: the seed's, held to BMV2_BACKGROUND_PPS on BMv2."""
    if switch != "bmv2" or not packet_bytes:
        return mbps
    return min(mbps, round(BMV2_BACKGROUND_PPS * packet_bytes * 8 / 1e6, 2))


def one_test(
    run: RunningNetwork,
    name: str,
    background: int,
    mbps: float,
    file: dict[str, Any] | None,
    seconds: float,
    jitter_ms: float,
) -> Test:
    """One test; the video's frames are judged against its queue's bound as it stands (the file
    transfer beside it grows it) and the switch's jitter (`jitter_ms`), which the hosts' clocks
    see too (docs/controller.md, "Jitter")."""
    b1_port = run.plan.hosts["b1"].port
    clear_maxima(run, ["terrapin"])
    counted = first_hop_counts(run, file) if file else None
    with Traffic(run, EXPERIMENT.work / KEYS[name]) as traffic:
        received = traffic.receiver("b1", [VIDEO_PORT, FILE_PORT])
        if background:
            traffic.flood("a3", "b1", rate_bps=mbps * 1e6, packet_bytes=background, seconds=seconds + 2)
            time.sleep(1)
        sent = traffic.video("a1", "b1", seconds=seconds, shape=(VIDEO[0], MAX_PACKET_BYTES), pace=True)
        file_log = None
        if file:
            times = evenly(FILE[0], MAX_PACKET_BYTES, seconds)
            file_log = traffic.flows("a2", "b1", [flow(FILE_PORT, MAX_PACKET_BYTES, times, shape=FILE)])
        traffic.wait(seconds + 60)
    video = read_video_logs(sent, received, port=VIDEO_PORT)
    transfer = None
    if file_log is not None and file is not None and counted is not None:
        flow_run = read_flow_logs(file_log, received)[FILE_PORT]
        transfer = FileTransfer(flow_run, first_hop_counts(run, file) - counted)
    queue = queue_reading(run, "terrapin", b1_port, PRIORITY)
    return Test(name, video, queue, (queue.worst_case_delay_ms or float("nan")) + jitter_ms, transfer)


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT
    experiment.parse(argv)
    seconds = 5.0 if experiment.short else 15.0
    line = LINE_MBPS[experiment.switch]
    tests_run = [
        (name, size, background_mbps(experiment.switch, size, mbps), f) for name, size, mbps, f in TESTS
    ]
    scaled = [
        f"{mbps:g} Mbit/s of {size} B background sent as {run_mbps:g}"
        for (_, size, mbps, _), (_, _, run_mbps, _) in zip(TESTS, tests_run, strict=True)
        if run_mbps != mbps
    ]
    experiment.note_scale(
        f"{seconds:g} s per test (the seed: ten minutes); christie at {line:g} Mbit/s; the seed's rates"
        " and bursts unchanged; "
        + (
            "; ".join(scaled) + f" (BMv2 forwards a few thousand packets/s: {BMV2_BACKGROUND_PPS}/s at most)"
            if scaled
            else "background unchanged"
        )
    )
    tests: list[Test] = experiment.keep("tests", [])
    with experiment.network(christie.plan(rate_mbps=line)) as run:
        video = reserve(run, body(run, "a1", VIDEO_PORT, VIDEO))
        file = reserve(run, body(run, "a2", FILE_PORT, FILE))
        file_promise = Promise.of(file)
        try:
            for name, background, mbps, with_file in tests_run:
                experiment.phase(name)
                jitter_ms = sum(hop["jitter_us"] for hop in video["allocation"]["hops"]) / 1000
                with_it = file if with_file else None
                tests.append(one_test(run, name, background, mbps, with_it, seconds, jitter_ms))
        finally:
            release(run, file)
            release(run, video)
    problems = []
    for t in tests:
        key = KEYS[t.name]
        seed = SEED[t.name]
        latencies = [x.latency_ms for x in t.video.timings]
        experiment.figure(f"{key}.mean_latency_ms", fmean(latencies) if latencies else None, seed=seed[0])
        experiment.figure(f"{key}.max_latency_ms", max(latencies, default=None), seed=seed[1])
        experiment.figure(f"{key}.network_max_ms", t.video.percentile(100))
        experiment.figure(f"{key}.bound_ms", t.bound_ms)
        experiment.figure(f"{key}.max_queue_depth", t.queue.max_depth_packets, seed=seed[2])
        experiment.figure(f"{key}.admitted_bursts_packets", t.queue.burst_packets, seed="8")
        experiment.figure(f"{key}.longest_queue_wait_ms", t.queue.max_delay_ms)
        if t.file is not None:
            sent, received = t.file.run.sent, t.file.run.received
            experiment.figure(f"{key}.file_transfer_loss", 1 - received / sent if sent else 0.0, seed="0")
            # Where the lost ones went: never reached the pipeline (the switch's ingress), or
            # marked by the meter (beyond its tolerance) and demoted, or lost after it.
            experiment.figure(f"{key}.file_transfer_lost_before_the_pipeline", sent - t.file.seen.packets)
            experiment.figure(f"{key}.file_transfer_marked_by_the_meter", t.file.seen.marked)
            meter = ChannelEnvelope(PRIORITY, FILE[0], FILE[1], MAX_PACKET_BYTES)
            policer = file_promise.policer(meter)
            lost = t.file.run.lost_outside_stalls(experiment.stalls, policer, MAX_PACKET_BYTES)
            experiment.figure(f"{key}.file_transfer_lost_in_machine_stalls", sent - received - lost)
            if lost:
                problems.append(
                    f"{t.name}: the file transfer lost {lost} packets outside the machine's stalls"
                )
        if t.queue.max_depth_packets > t.queue.burst_packets:
            problems.append(
                f"{t.name}: queue depth {t.queue.max_depth_packets} > {t.queue.burst_packets} admitted"
            )
        lost = t.video.frames_sent - t.video.frames_whole
        over = t.video.frames_over_outside_stalls(t.bound_ms, experiment.stalls) - lost
        in_stalls = t.video.frames_over(t.bound_ms) - lost - over
        experiment.figure(f"{key}.frames_late_in_machine_stalls", in_stalls)
        if lost or over:
            problems.append(f"{t.name}: {lost} video frames lost, {over} over the {t.bound_ms:.3f} ms bound")
    plot(experiment, tests)
    data = {
        t.name: {
            "latency_ms": [x.latency_ms for x in t.video.timings],
            "max_depth_packets": t.queue.max_depth_packets,
            "burst_packets": t.queue.burst_packets,
        }
        for t in tests
    }
    return experiment.finish(problems, data)


def plot(experiment: Experiment, tests: list[Test]) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    offset = 0.0
    for t in tests:
        xs = [offset + x.at_s for x in t.video.timings]
        left.plot(xs, [x.latency_ms for x in t.video.timings], ".", ms=3, label=t.name)
        offset = max(xs, default=offset) + 1
    left.set_xlabel("time (s), the tests one after another")
    left.set_ylabel("frame latency, capture to last packet (ms)")
    left.set_title("E4: video frame latency (seed 000 Fig. 19)")
    left.legend(fontsize=7)
    names = [str(i + 1) for i in range(len(tests))]
    right.bar(names, [t.queue.max_depth_packets for t in tests], color="tab:blue", label="max depth")
    right.plot(names, [t.queue.burst_packets for t in tests], "k_", ms=30, mew=2, label="admitted bursts")
    right.set_xlabel("test")
    right.set_ylabel("priority-6 queue towards b1 (packets)")
    right.set_title("max queue depth vs admitted bursts")
    right.legend(fontsize=8)
    experiment.save_plot(fig, "depth")


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
