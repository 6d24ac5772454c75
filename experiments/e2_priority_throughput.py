"""E2 — seed 000 §3.3.2, Figure 9: high-priority throughput without loss against its packet size,
while low-priority traffic of a fixed size congests the port.

The seed's router lost CPU to the interrupts of small low-priority packets: against 128-byte
background (5,800 packets/s) it carried 28 Mbit/s of 4,500-byte high-priority traffic without
loss, against 4,500-byte background about 40. Its conclusion was to limit what is admitted. Here
the limit is the controller's: on christie, for each background size (128, 1,024, 2,048, 4,500 B:
iperf3 from a2 to b1 at 1.3x the line rate, so the best-effort queue towards b1 overflows) and
each high-priority packet size, a1 reserves the largest rate the controller admits towards b1
(it asks for the line rate and takes off what a denial names) and sends exactly that, evenly,
held to the reservation by its own token bucket. Verdict: at every background size the admitted
rate arrives whole (no high-priority packet lost that the machine's own stalls do not explain,
at least 97% of the admitted rate received) while the background loses packets (the port really
was congested). A stall of the shared 2-core machine holds the sender's packets and releases them
bunched; the first switch's meter, replayed with every packet stamped when the stall let the switch
see it, cuts such a bunch beyond its tolerance, and that loss is the source's, not the network's
(E4's rule, experiments/harness.py Promise; docs/experiments.md "Stalls").

    sudo build/venv/bin/python -m experiments.e2_priority_throughput [--short] [--switch bmv2]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from experiments.harness import Experiment, Promise, pyplot
from terrapin.admission.model import ChannelEnvelope
from terrapin_tools.policers import PolicerModel
from topo import christie
from topo.experiment import (
    FlowRun,
    NothingAdmitted,
    Traffic,
    channel,
    evenly,
    first_hop_counts,
    flood_received,
    flow,
    largest_admitted,
    read_flow_logs,
    release,
)
from topo.network import RunningNetwork

BACKGROUND_SIZES = (128, 1024, 2048, 4500)
PRIORITY = 6
PORT = 5020
OVERLOAD = 1.3  # the background offers this many times the line rate
# Line rates each switch carries with 128-byte background at 1.3x on two cores (it and the
# generators share them): terrapin-switch 20 Mbit/s (25,000 packets/s offered), BMv2 10.
LINE_MBPS = {"terrapin": 20.0, "bmv2": 10.0}
# The burst the channel declares covers this much of the line rate: the sender keeps to its
# token bucket, but the host's veth and the switch's ingress can be descheduled between it and
# the meter on a busy 2-core machine and pass its packets on bunched. With four 512-byte packets
# (0.9 ms at the rate) the meter demoted the bunches to the congested best-effort queue.
JITTER_S = 0.010

EXPERIMENT = Experiment(
    2,
    "priority",
    title="zero-loss high-priority throughput against its packet size under low-priority congestion",
    seed_ref="seed 000 §3.3.2, Figure 9",
    seed_numbers=[
        "4,500 B high priority vs 128 B background (5,800 pkt/s, 5.5 Mbit/s): 28 Mbit/s without loss",
        "4,500 B high priority vs 4,500 B background (1,411 pkt/s, 50.8 Mbit/s): about 40 Mbit/s",
        "the larger the background packets, the more high-priority throughput (fewer interrupts)",
    ],
)


@dataclass
class Point:
    background: int
    size: int
    admitted_Bps: int
    sent: int
    received: int
    received_Bps: float
    background_sent: int
    background_lost: int
    nothing_admitted: str = ""  # why no rate of this size was admitted (then nothing was sent)
    marked: int = 0  # packets the first switch's meter marked (yellow or red: demoted) in the run
    lost_outside_stalls: int = 0  # of those lost, the ones the machine's stalls do not explain


@dataclass
class Sent:
    """What one point's high-priority flow did, kept to judge it once the run's stalls are known."""

    run: FlowRun
    policer: Callable[[], PolicerModel]
    size: int


def one_point(
    run: RunningNetwork, background: int, size: int, seconds: float, line_bps: int
) -> tuple[Point, Sent | None]:
    body = channel(run, "a1", "b1", PORT, PRIORITY, size, burst=max(4 * size, int(line_bps / 8 * JITTER_S)))
    try:
        granted = largest_admitted(run, body, line_bps // 8)
    except NothingAdmitted as refused:
        return Point(background, size, 0, 0, 0, 0.0, 0, 0, nothing_admitted=str(refused)), None
    rate = int(granted["allocation"]["rate"])
    counted = first_hop_counts(run, granted)
    try:
        with Traffic(run, EXPERIMENT.work / f"bg{background}-hp{size}") as traffic:
            received = traffic.receiver("b1", [PORT])
            flood = traffic.flood(
                "a2", "b1", rate_bps=OVERLOAD * line_bps, packet_bytes=background, seconds=seconds + 1.5
            )
            time.sleep(1)  # the background is up and the queue towards b1 full
            hp = flow(
                PORT, size, evenly(rate, size, seconds), shape=(rate, int(granted["allocation"]["burst"]))
            )
            sent = traffic.flows("a1", "b1", [hp])
            traffic.wait(seconds + 30)
        seen = first_hop_counts(run, granted) - counted
    finally:
        release(run, granted)
    result = read_flow_logs(sent, received)[PORT]
    arrivals = result.arrivals_ns()
    span = (arrivals[-1] - arrivals[0]) / 1e9 if len(arrivals) > 1 else 0.0
    report = flood_received(flood)
    point = Point(
        background,
        size,
        rate,
        result.sent,
        result.received,
        (len(arrivals) - 1) * size / span if span else 0.0,
        report.packets,
        report.lost,
        marked=seen.marked,
    )
    envelope = ChannelEnvelope(
        PRIORITY, int(granted["requested_rate"]), int(granted["requested_burst"]), size
    )
    return point, Sent(result, Promise.of(granted).policer(envelope), size)


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT
    experiment.parse(argv)
    line_mbps = LINE_MBPS[experiment.switch]
    sizes = (1024, 4500) if experiment.short else (512, 1024, 2048, 4500)
    seconds = 1.5 if experiment.short else 3.0
    experiment.note_scale(
        f"links at {line_mbps:g} Mbit/s, not FDDI's 100: 128-byte background at {OVERLOAD}x that is"
        f" {OVERLOAD * line_mbps * 1e6 / 8 / 128:,.0f} packets/s, which the generators and the switch"
        f" sharing two cores still carry; {seconds:g} s per point; high-priority sizes {sizes}; each"
        f" channel's burst covers {JITTER_S * 1000:g} ms at the line rate (the host's scheduling jitter)"
    )
    line_bps = int(line_mbps * 1_000_000)
    points: list[Point] = experiment.keep("points", [])
    sent: dict[tuple[int, int], Sent] = {}
    with experiment.network(christie.plan(rate_mbps=line_mbps)) as run:
        for background in BACKGROUND_SIZES:
            for size in sizes:
                experiment.phase(f"background {background} B, high priority {size} B")
                point, flow_sent = one_point(run, background, size, seconds, line_bps)
                points.append(point)
                if flow_sent is not None:
                    sent[(background, size)] = flow_sent
    for p in points:
        if (p.background, p.size) in sent:
            s = sent[(p.background, p.size)]
            p.lost_outside_stalls = s.run.lost_outside_stalls(experiment.stalls, s.policer, s.size)
    problems = []
    for p in points:
        key = f"bg{p.background}.hp{p.size}"
        seed = None
        if p.size == 4500 and p.background in (128, 4500):
            seed = "28 Mbit/s" if p.background == 128 else "~40 Mbit/s"
        experiment.figure(f"{key}.admitted_mbps", p.admitted_Bps * 8 / 1e6)
        if p.nothing_admitted:
            problems.append(f"{key}: {p.nothing_admitted}")
            continue
        experiment.figure(f"{key}.received_mbps", p.received_Bps * 8 / 1e6, seed=seed)
        experiment.figure(f"{key}.loss", 1 - p.received / p.sent if p.sent else 1.0, seed="0")
        experiment.figure(f"{key}.background_loss", p.background_lost / max(1, p.background_sent))
        experiment.figure(f"{key}.marked_by_the_meter", p.marked)
        if p.received != p.sent:
            in_stalls = p.sent - p.received - p.lost_outside_stalls
            experiment.figure(f"{key}.lost_in_machine_stalls", in_stalls)
        if p.lost_outside_stalls:
            problems.append(
                f"{key}: {p.lost_outside_stalls} of {p.sent} high-priority packets lost outside the"
                f" machine's stalls ({p.marked} marked by the first switch's meter)"
            )
        elif p.received_Bps < 0.97 * p.admitted_Bps:
            problems.append(f"{key}: {p.received_Bps:.0f} B/s received of {p.admitted_Bps} admitted")
        if p.background_lost == 0:
            problems.append(f"{key}: the background lost nothing, so the port was not congested")
    plot(experiment, points, line_mbps)
    return experiment.finish(problems, {"points": [asdict(p) for p in points], "line_mbps": line_mbps})


def plot(experiment: Experiment, points: list[Point], line_mbps: float) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for background in BACKGROUND_SIZES:
        mine = [p for p in points if p.background == background]
        ax.plot(
            [p.size for p in mine],
            [p.received_Bps * 8 / 1e6 for p in mine],
            "-o",
            label=f"background {background} B",
        )
    admitted = sorted({(p.size, p.admitted_Bps) for p in points})
    ax.plot([s for s, _ in admitted], [r * 8 / 1e6 for _, r in admitted], "k--", lw=1, label="admitted rate")
    ax.axhline(line_mbps, color="0.6", lw=1, label=f"line rate {line_mbps:g} Mbit/s")
    ax.set_xlabel("high-priority packet size (bytes)")
    ax.set_ylabel("high-priority throughput without loss (Mbit/s)")
    ax.set_ylim(0, line_mbps * 1.1)
    ax.set_title("E2: high priority under low-priority congestion (seed 000 Fig. 9)")
    ax.legend(fontsize=8, loc="lower right")
    experiment.save_plot(fig, "throughput")


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
