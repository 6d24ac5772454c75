"""E10 — seed 000's policers side by side (§2.2.2, Figures 3–5 and 10; §4.1.1.1, Figures 11–14).

The seed compares the leaky bucket, the jumping window and the moving window by their upper
bound A*(t) on traffic, and measures XTP traffic policed at 10 Mbit/s with a 22,500-byte burst
(five 4,500-byte packets; the jumping window then resets every 18 ms). Here the same envelope
is reserved through the controller's REST API on the christie testbed, once per policer the
data plane offers:

    meter            trTCM, ρ = 1,250,000 B/s, σ = 22,500 B           A*(t) = σ + ρt
    jumping_window   B = 22,500 B per T = 18 ms                        A*(t) = 2B + ⌊t/T⌋B
    moving_window    Xmin = 0.9 ms, Xave = 3.6 ms, I = 18 ms, Smax = 4,500 B (n = 5 per I)

and the same three unshaped sources, of 4,500-byte packets from a1 to b1, go through each:

    conforming   one packet every 4.5 ms (80% of ρ)
    greedy       one packet every 1.8 ms (twice ρ), the source above its envelope
    edge         every 100 ms: one packet, then 4 packets 1 ms apart from 13 ms and 5 more
                 from 19 ms: B at the end of a window and B at the start of the next
                 (Figure 10), as the jumping window's window opens with the first packet

It prints `key: value` figures, draws received bytes against time with each policer's A*(t)
(build/results/E10-<source>.png), writes build/results/E10.json and ends with
`E10 policers: pass` or `E10 policers: FAIL <reason>`. Verdict: every policer passes the
conforming source whole; the greedy source is cut to each policer's A*(t) and no lower than
90% of ρ; across a window edge the jumping window lets more than B through within less than T
and the moving window never more than its n packets within I.

    sudo build/venv/bin/python -m experiments.e10_policers [--seconds 3] [--short] [--switch bmv2]

Timing: the switch polices at its own ingress timestamp, up to its jitter τ after the packet
arrived; each policer tolerates the first switch's τ (docs/dataplane.md "Tolerance"), so what it
passes keeps A*(t + kτ) (k = 2 for the jumping window). The receiver's kernel timestamps come
after the egress port's queue and the switch's own variation, at most the end-to-end bound the
controller admitted the channel with, so the arrivals are judged against A*(t + J), J = kτ + that
bound (harness.Promise), and a conforming packet lost counts unless the machine's witnessed
stalls explain it: the run replayed through the policer, every packet stamped when the stalls
let the switch see it, loses it too (topo/experiment.py losses_the_stalls_explain).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from experiments.harness import Experiment, Promise, most_over_envelope, sending_stall_slack, stall_slack
from terrapin.admission.model import ChannelEnvelope, Policer
from terrapin.admission.policers import arrival_bytes, moving_ring
from terrapin_tools.policers import counts_packets
from topo import christie
from topo.experiment import (
    FirstHopCounts,
    Traffic,
    channel,
    first_hop_counts,
    losses_the_stalls_explain,
    on_the_wire,
    release,
    reserve,
)
from topo.network import RunningNetwork
from topo.stalls import Stalls

PORT = 5010
PRIORITY = 6
PACKET = 4500  # IPv4 bytes, the seed's FDDI packet
RATE = 1_250_000  # 10 Mbit/s
BURST = 22_500  # five packets
WINDOW_US = 18_000  # Burst / Rate, XTP's credit reset period in the seed

POLICERS: dict[str, dict[str, Any]] = {
    "meter": {"rate": RATE, "burst": BURST},
    "jumping_window": {"policer": "jumping_window", "burst": BURST, "window_us": WINDOW_US},
    "moving_window": {"policer": "moving_window", "xmin_us": 900, "xave_us": 3600, "interval_us": WINDOW_US},
}


def sources(seconds: float) -> dict[str, list[list[float]]]:
    """Each source as frames of packet send times (s), the pattern topo/video.py sends."""
    edge: list[list[float]] = []
    for cycle in range(int(seconds / 0.1)):
        base = cycle * 0.1
        edge += [
            [base],
            [base + 0.013 + i * 0.001 for i in range(4)],
            [base + 0.019 + i * 0.001 for i in range(5)],
        ]
    return {
        "conforming": [[i * 0.0045] for i in range(int(seconds / 0.0045))],
        "greedy": [[i * 0.0018] for i in range(int(seconds / 0.0018))],
        "edge": edge,
    }


def envelope(name: str) -> ChannelEnvelope:
    """The requested envelope as the controller sees it, for A*(t)."""
    body = POLICERS[name]
    policer = Policer(
        body.get("policer", "meter"),
        window_us=body.get("window_us", 0),
        xmin_us=body.get("xmin_us", 0),
        xave_us=body.get("xave_us", 0),
        interval_us=body.get("interval_us", 0),
    )
    return ChannelEnvelope(PRIORITY, body.get("rate", 0), body.get("burst", 0), PACKET, policer=policer)


@dataclass
class Run:
    policer: str
    source: str
    allocation: dict[str, int]
    sent: int
    received: int
    offered_us: list[int] = field(repr=False)  # each packet on the wire (else when due), µs from start
    arrivals_us: list[int] = field(repr=False)  # each received packet's arrival, µs from start
    passed_sent_us: list[int] = field(repr=False)  # each received packet's send time, µs from start
    lost_us: list[int] = field(repr=False)  # offered_us of the packets that never came
    start_ns: int = 0  # the first frame's start (CLOCK_REALTIME), from which the µs count
    promise: Promise = field(default_factory=lambda: Promise(0, 0))  # the reservation's
    # what reached the first switch's entry and what its policer marked: a conforming packet lost
    # and not marked was lost elsewhere (a queue, a veth, the receiver), not by the policer
    first_hop: FirstHopCounts | None = None

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 0.0

    @property
    def rate(self) -> float:
        """Received IPv4 bytes per second over the source's duration."""
        span = (self.offered_us[-1] - self.offered_us[0]) / 1e6 if len(self.offered_us) > 1 else 0
        return self.received * PACKET / span if span else 0.0

    def over_bound(self, stalls: Stalls | None) -> int:
        """The most the received traffic exceeds A*(t + J) over any interval, in bytes (≤ 0:
        kept), each interval allowed the machine's stalls just before it too (harness.stall_slack)."""
        slack = stall_slack(stalls, self.start_ns)
        return most_over_envelope(self.arrivals_us, PACKET, envelope(self.policer), self.promise, slack)

    @property
    def shift_us(self) -> int:
        """J: how much earlier than the envelope allows the receiver may see a packet."""
        return self.promise.shift_us(envelope(self.policer))

    def lost_outside_stalls(self, stalls: Stalls | None) -> int:
        """Packets lost that the machine's stalls do not explain (topo/experiment.py
        losses_the_stalls_explain, the run replayed through its policer)."""
        env = envelope(self.policer)
        gone = set(self.lost_us)
        lost = [t in gone for t in self.offered_us]
        sent = [self.start_ns + t * 1000 for t in self.offered_us]
        amount = 1 if counts_packets(env) else PACKET
        explained = losses_the_stalls_explain(sent, lost, stalls, self.promise.policer(env), amount)
        return sum(1 for g, why in zip(lost, explained, strict=True) if g and not why)

    def most_within(self, span_us: int, by_send_time: bool = False, stalls: Stalls | None = None) -> int:
        """The most bytes received within any interval shorter than span_us: of arrival, or with
        `by_send_time` of the packets' sending (what the policer judged, each stamped up to its
        tolerance later), each interval shortened by the machine's stalls around its start
        (harness.sending_stall_slack: a stall stamps packets later than the tolerance allows)."""
        times, best, first = self.passed_sent_us if by_send_time else self.arrivals_us, 0, 0
        slack = sending_stall_slack(stalls if by_send_time else None, self.start_ns)
        for last, t in enumerate(times):
            while first <= last and t - times[first] >= span_us - slack(times[first]):
                first += 1
            best = max(best, (last - first + 1) * PACKET)
        return best

    @property
    def first_cut_ms(self) -> float | None:
        return min(self.lost_us) / 1000 if self.lost_us else None


def one_run(net: RunningNetwork, policer: str, source: str, frames: list[list[float]], work: Path) -> Run:
    body = channel(net, "a1", "b1", PORT, PRIORITY, PACKET, excess="drop", **POLICERS[policer])
    granted = reserve(net, body)
    promise = Promise.of(granted)
    seconds = frames[-1][-1] + 0.2
    try:
        # An unshaped source: whatever it sends is what the switch must police. The sender runs
        # at a real-time priority (Traffic): descheduled mid-pattern it would bunch its packets
        # and be policed for it.
        with Traffic(net, work) as traffic:
            received = traffic.receiver("b1", [PORT])
            time.sleep(0.5)
            flows = [{"port": PORT, "dscp": 46, "packet_bytes": PACKET, "frames": frames, "shape": None}]
            sent = traffic.flows("a1", "b1", flows)
            traffic.wait(seconds + 60)
        counts = first_hop_counts(net, granted)
    finally:
        release(net, granted)
    run = read_run(policer, source, granted["allocation"], frames, sent, received, promise)
    run.first_hop = counts
    return run


def read_run(
    policer: str,
    source: str,
    allocation: dict[str, Any],
    frames: list[list[float]],
    sender_log: Path,
    receiver_log: Path,
    promise: Promise,
) -> Run:
    sent = json.loads(sender_log.read_text())["flows"][0]["frames"]
    t0 = sent[0]["start_ns"]
    got = {f["frame"]: f for f in json.loads(receiver_log.read_text())["frames"]}
    offered, arrivals, passed_sent, lost = [], [], [], []
    for record, offsets in zip(sent, frames, strict=True):
        arrived = {
            index: (sent_ns, arrival)
            for index, sent_ns, arrival in on_the_wire(
                record, got.get(record["frame"], {}).get("packet_times", [])
            )
        }
        wire = record.get("wire_ns") or []
        for index, offset in enumerate(offsets):
            # when the sending host put it on the wire (topo/video.py WireStamps), else when due
            at = (record["start_ns"] - t0) // 1000 + round((offset - offsets[0]) * 1e6)
            if index < len(wire) and wire[index]:
                at = (wire[index] - t0) // 1000
            offered.append(at)
            if index in arrived:
                sent_ns, arrival = arrived[index]
                arrivals.append((arrival - t0) // 1000)
                passed_sent.append((sent_ns - t0) // 1000)
            else:
                lost.append(at)
    arrivals.sort()
    passed_sent.sort()
    return Run(
        policer,
        source,
        {"rate": allocation["rate"], "burst": allocation["burst"]},
        len(offered),
        len(arrivals),
        offered,
        arrivals,
        passed_sent,
        lost,
        t0,
        promise,
    )


def bound_curve(policer: str, end_us: int) -> tuple[list[float], list[float]]:
    """A*(t) in kB against t in ms, fine enough to show the jumping window's steps."""
    env = envelope(policer)
    ts = list(range(0, end_us, 100))
    return [t / 1000 for t in ts], [arrival_bytes(env, t) / 1000 for t in ts]


def plot(runs: dict[str, dict[str, Run]], source: str, span_ms: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharey=True)
    for ax, policer in zip(axes, POLICERS, strict=True):
        run = runs[policer][source]
        offered = [t / 1000 for t in run.offered_us if t / 1000 <= span_ms]
        ax.step(offered, [(i + 1) * PACKET / 1000 for i in range(len(offered))], where="post",
                color="0.7", label="offered")  # fmt: skip
        got = [t / 1000 for t in run.arrivals_us if t / 1000 <= span_ms]
        ax.step(got, [(i + 1) * PACKET / 1000 for i in range(len(got))], where="post", color="tab:blue",
                label=f"received ({run.received}/{run.sent} packets)")  # fmt: skip
        if run.arrivals_us:
            start = run.arrivals_us[0] / 1000
            xs, ys = bound_curve(policer, int((span_ms - start) * 1000) + 1)
            ax.plot(
                [start + x for x in xs], ys, "--", color="black", lw=1, label="A*(t) from the first packet"
            )
        ax.set_title(policer.replace("_", " "))
        ax.set_xlabel("time (ms)")
        ax.set_xlim(0, span_ms)
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("bytes (kB, IPv4)")
    top = max(
        (len([t for t in r[source].offered_us if t / 1000 <= span_ms]) for r in runs.values()), default=1
    )
    axes[0].set_ylim(0, top * PACKET / 1000 * 1.05)
    fig.suptitle(f"E10: the {source} source through each policer (10 Mbit/s, 22,500 B; seed 000 Figs 11-14)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def verdict(runs: dict[str, dict[str, Run]], stalls: Stalls | None = None) -> list[str]:
    """Why E10 fails; empty if it passes."""
    problems = []
    for policer, by_source in runs.items():
        conforming, greedy = by_source["conforming"], by_source["greedy"]
        if lost := conforming.lost_outside_stalls(stalls):
            marked = conforming.first_hop.marked if conforming.first_hop else None
            where = "" if marked is None else f"; its policer marked {marked}"
            problems.append(
                f"{policer} cut the conforming source ({lost} lost outside the machine's stalls{where})"
            )
        if (over := greedy.over_bound(stalls)) > 0:
            problems.append(f"{policer} let the greedy source {over} B above A*(t)")
        if greedy.rate < 0.9 * RATE:
            problems.append(f"{policer} cut the greedy source to {greedy.rate:.0f} B/s, below 90% of rho")
    # What the policers did, judged by when the passed packets were sent: the switch stamped
    # each up to its tolerance τ later, so packets sent within T − τ were stamped within T, and
    # what passed a tolerant moving window keeps n packets per I − 2τ of sending.
    jumping, moving = runs["jumping_window"]["edge"], runs["moving_window"]["edge"]
    if jumping.most_within(WINDOW_US - jumping.promise.tolerance_us, True, stalls) <= BURST:
        problems.append("the jumping window let no more than B through across an edge")
    n = moving_ring(envelope("moving_window").policer).enforced
    if moving.most_within(WINDOW_US - 2 * moving.promise.tolerance_us, True, stalls) > n * PACKET:
        problems.append("the moving window let more than n packets through within I")
    return problems


EXPERIMENT = Experiment(
    10,
    "policers",
    title="the data plane's policers on the same conforming, greedy and window-edge sources",
    seed_ref="seed 000 §2.2.2 Figs 3-5 and 10; §4.1.1.1 Figs 11-14",
    seed_numbers=[
        "XTP policed at 10 Mbit/s with a 22,500 B burst (five 4,500 B packets); window 18 ms",
        "leaky bucket A*(t) = σ + ρt; jumping window up to 2B within T at a window edge (Fig. 10);"
        " moving window never more than n packets within I",
    ],
)


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--seconds", type=float, default=None, help="length of each source (3; 1 short)")

    args = experiment.parse(argv, add)
    seconds = args.seconds or (1.0 if experiment.short else 3.0)
    experiment.note_scale(
        f"each source {seconds:g} s (the seed's runs were minutes); 4,500 B packets at the seed's 10 Mbit/s"
        " on christie's 100 Mbit/s links, as in the seed"
    )
    patterns = sources(seconds)
    runs: dict[str, dict[str, Run]] = experiment.keep("runs", {})
    with experiment.network(christie.plan()) as net:
        for policer in POLICERS:
            runs[policer] = {}
            for source, frames in patterns.items():
                experiment.phase(f"{policer} / {source}")
                runs[policer][source] = one_run(
                    net, policer, source, frames, experiment.work / f"{policer}-{source}"
                )

    for policer, by_source in runs.items():
        alloc = by_source["conforming"].allocation
        experiment.figure(f"{policer}.admitted_rate_Bps", alloc["rate"], seed="1,250,000 (10 Mbit/s)")
        experiment.figure(f"{policer}.admitted_burst_B", alloc["burst"], seed="22,500")
        for source, run in by_source.items():
            key = f"{policer}.{source}"
            experiment.figure(f"{key}.sent", run.sent)
            experiment.figure(f"{key}.received", run.received)
            experiment.figure(f"{key}.loss", round(run.loss, 4), seed="0" if source == "conforming" else None)
            experiment.figure(f"{key}.received_Bps", round(run.rate))
            experiment.figure(f"{key}.J_us", run.shift_us)
            if run.first_hop is not None:
                experiment.figure(f"{key}.reached_first_switch", run.first_hop.packets)
                experiment.figure(f"{key}.policer_marked", run.first_hop.marked)
            # (none when J is longer than T: the receiver's arrivals then say nothing of a window)
            short = WINDOW_US - run.shift_us
            within = run.most_within(short) if short > 0 else None
            experiment.figure(f"{key}.most_bytes_within_T_less_J", within)
            sending = WINDOW_US - (2 if policer == "moving_window" else 1) * run.promise.tolerance_us
            sent_within = run.most_within(sending, True, experiment.stalls)
            experiment.figure(f"{key}.most_bytes_sent_within_{sending}_us", sent_within)
            if source == "conforming":
                experiment.figure(f"{key}.lost_outside_stalls", run.lost_outside_stalls(experiment.stalls))
            if source != "conforming":
                experiment.figure(
                    f"{key}.over_bound_B", run.over_bound(experiment.stalls), seed="<= 0 (A*(t) kept)"
                )
                experiment.figure(f"{key}.first_cut_ms", run.first_cut_ms)
    for source, span in (("conforming", 200.0), ("greedy", 200.0), ("edge", 130.0)):
        plot(runs, source, span, experiment.plot_path(source))
    data = {
        "seconds": seconds,
        "promises": {p: asdict(by["conforming"].promise) for p, by in runs.items()},
        "policers": POLICERS,
        "runs": {p: {s: asdict(r) for s, r in by.items()} for p, by in runs.items()},
    }
    return experiment.finish(verdict(runs, experiment.stalls), data)


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
