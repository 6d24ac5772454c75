"""E8 — seed 004 §4.2-4.4 (RMTP/RTIP on Tenet): rate control (Xmin, Xave, I), a loaded router,
and two real-time channels side by side, each as a sequence-number-against-time plot.

The seed's sender wrote packets in a tight loop and RMTP's rate control held it to (Xmin, Xave,
I) (Fig. 6: the sequence-time curves keep the declared slopes); loading the gateway did not
change a real-time channel's arrivals while UDP lost packets (Fig. 8); two channels arrived
almost the same whether alone or together (Fig. 7).

Here the envelope is enforced in the network, by the switch's moving-window policer (the
data plane's Xmin/Xave/I policer, docs/dataplane.md), reserved through the REST API on christie
with excess dropped:

1. rate control: a1 sends 1,000-byte packets to b1 every 0.25 ms (4x and more what each
   envelope allows) through three envelopes; the packets that arrive must keep A*(t) of the
   envelope (at most n = I/Xave in any I, no closer than Xmin), measured at the receiver;
2. load: one channel (a1, Xmin 1 ms, Xave 2 ms, I 200 ms, sent every 2.2 ms and, as RMTP's
   rate control did, never two packets closer than Xmin) alone and with
   a2 and a3 flooding b1 at the line rate: no loss, every packet within the controller's bound;
3. coexistence: channel 1 and a second (a2, Xmin 2, Xave 5, I 200, sent every 5.5 ms) alone and
   together: no loss, and each channel's 99th-percentile delay together within 1 ms of alone.

The switch stamps a packet a little after it arrived, by up to its jitter (make jitter; much
more on BMv2, whose receive thread stamps it, than on terrapin-switch, which takes the kernel's
time): the policer tolerates the first switch's jitter τ (GCRA's tolerance), so a packet that kept
Xmin on the wire is never cut for a late stamp, and what it passes keeps the envelope over t + τ.
The receiver sees that delayed by up to the end-to-end bound more, so the envelope is judged at
the receiver as α(t + J), J = τ + the bound the controller admitted the channel with
(harness.Promise), not a constant.

The hosts' clocks and the policer's Xmin also see the VM's own stalls (topo/stalls.py: a vCPU
held for 1-7 ms, ~15 times a second here): a stall bunches the packets it held, so the receiver
sees them closer than the policer passed them, and the policer drops a conforming packet that a
stall longer than its tolerance pushed to within Xmin of the one before. So each check leaves out
what the witnessed stalls account for: the receiver's intervals are allowed the stall time just
before them, a loss counts unless the machine stalled longer than the policer's tolerance just
before the packet was due, and the delays compared are those of packets no stall overlapped.
What was left out is printed beside.

    sudo build/venv/bin/python -m experiments.e8_rate_control [--short] [--switch bmv2]
"""

from __future__ import annotations

import bisect
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.harness import (
    Experiment,
    Promise,
    most_over_envelope,
    pyplot,
    sending_stall_slack,
    stall_slack,
)
from terrapin.admission.model import ChannelEnvelope, Policer
from topo import christie
from topo.experiment import (
    FirstHopCounts,
    FlowRun,
    Traffic,
    channel,
    evenly,
    first_hop_counts,
    flow,
    percentile,
    read_flow_logs,
    release,
    reserve,
)
from topo.network import RunningNetwork
from topo.stalls import Stalls

PACKET = 1000
PRIORITY = 6
ENVELOPES = {  # name: (Xmin µs, Xave µs, I µs)
    "xmin1_xave2": (1000, 2000, 200_000),
    "xmin2_xave5": (2000, 5000, 200_000),
    "xmin0.5_xave4": (500, 4000, 200_000),
}
GREEDY_GAP_S = 0.00025
BMV2_LINE_MBPS, BMV2_QUEUE_PACKETS = 50.0, 128
CHANNELS = {  # channel: (source, port, envelope, send gap s)
    1: ("a1", 5040, "xmin1_xave2", 0.0022),
    2: ("a2", 5041, "xmin2_xave5", 0.0055),
}

EXPERIMENT = Experiment(
    8,
    "rate-control",
    title="rate control (Xmin, Xave, I), a loaded router, two channels side by side",
    seed_ref="seed 004 §4.2-4.4, Figs 6-8",
    seed_numbers=[
        "Fig. 6: a tight-loop sender held to (Xmin, Xave, I = 1 s) by rate control",
        "Fig. 8: the gateway loaded or not, the real-time channel's arrivals the same (UDP lost packets)",
        "Fig. 7: channels 1 and 2 arrive almost the same alone and together",
    ],
)


def envelope(name: str) -> ChannelEnvelope:
    xmin, xave, interval = ENVELOPES[name]
    policer = Policer("moving_window", xmin_us=xmin, xave_us=xave, interval_us=interval)
    return ChannelEnvelope(PRIORITY, 0, 0, PACKET, policer=policer)


def body(run: RunningNetwork, source: str, port: int, name: str) -> dict[str, Any]:
    xmin, xave, interval = ENVELOPES[name]
    window = {"xmin_us": xmin, "xave_us": xave, "interval_us": interval}
    return channel(
        run, source, "b1", port, PRIORITY, PACKET, policer="moving_window", excess="drop", **window
    )


def most_within(arrivals_us: list[int], span_us: int, slack_us: Callable[[int], int] = lambda _: 0) -> int:
    """The most packets that arrived within any interval shorter than span_us, less `slack_us`
    of the interval's first arrival (harness.stall_slack: packets a stall held arrive closer
    to the ones after them than the policer passed them). Kept by α(t + J) for span_us = I − J:
    at most n packets."""
    return max(
        (bisect.bisect_left(arrivals_us, t + span_us - slack_us(t)) - i for i, t in enumerate(arrivals_us)),
        default=0,
    )


@dataclass
class Measured:
    label: str
    run: FlowRun
    promise: Promise  # of the channel's reservation
    seen: FirstHopCounts | None = None  # its first hop's counters over the run

    def arrivals_us(self) -> list[int]:
        t0 = self.run.first_start_ns
        return [(a - t0) // 1000 for a in self.run.arrivals_ns()]

    def sent_us(self) -> list[int]:
        """When each packet that arrived was sent."""
        t0 = self.run.first_start_ns
        return sorted((p.sent_ns - t0) // 1000 for p in self.run.packets if p.sent_ns is not None)

    def p99_ms(self, stalls: Stalls | None = None) -> float:
        """The 99th percentile delay (with `stalls`, of the packets no stall of the machine's
        overlapped: FlowRun.delays_ms)."""
        return percentile(self.run.delays_ms(stalls), 99)


def send(
    run: RunningNetwork,
    work: Path,
    channels: Sequence[tuple[str, int, float, str | None]],
    seconds: float,
    flood: bool = False,
) -> dict[int, FlowRun]:
    """Each (source, port, gap, envelope) sends PACKET-byte packets every gap for `seconds`;
    with an envelope, never two closer than its Xmin (RMTP's rate control at the source: a
    sender late by a few ms would otherwise send its overdue packets back to back, and the
    policer drops what comes closer than Xmin). Without one, unshaped."""
    with Traffic(run, work) as traffic:
        received = traffic.receiver("b1", [port for _, port, _, _ in channels])
        if flood:
            for name in ("a2", "a3"):
                rate = run.plan.hosts[name].rate_bps
                traffic.flood(name, "b1", rate_bps=rate, packet_bytes=run.plan.mtu - 72, seconds=seconds + 2)
        time.sleep(1)
        logs = []
        for source, port, gap, envelope in channels:
            times = evenly(PACKET / gap, PACKET, seconds)
            # a bucket of one packet that refills in Xmin (IPv4 bytes, as the sender counts them)
            shape = (round(PACKET * 1e6 / ENVELOPES[envelope][0]), PACKET) if envelope else None
            logs.append(
                traffic.flows(source, "b1", [flow(port, PACKET, times, shape=shape)], name=f"flow-{port}")
            )
        traffic.wait(seconds + 30)
    runs: dict[int, FlowRun] = {}
    for log in logs:
        runs.update(read_flow_logs(log, received))
    return runs


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT
    experiment.parse(argv)
    seconds = 1.0 if experiment.short else 2.5
    experiment.note_scale(
        f"{seconds:g} s per run; I = 200 ms instead of the seed's 1 s (so that a run holds many windows);"
        " the 'tight loop' is a packet every 0.25 ms; the envelope is enforced by the switch's policer,"
        " not the sender's protocol stack; christie at 100 Mbit/s"
    )
    problems: list[str] = []
    greedy: dict[str, Measured] = experiment.keep("greedy", {})
    load: dict[str, Measured] = experiment.keep("load", {})
    together: dict[str, Measured] = experiment.keep("together", {})
    plan = christie.plan()
    if experiment.switch == "bmv2":
        plan = christie.plan(rate_mbps=BMV2_LINE_MBPS, queue_capacity=BMV2_QUEUE_PACKETS)
        experiment.note_scale(
            f"BMv2: christie at {BMV2_LINE_MBPS:g} Mbit/s (its one ingress thread carries the floods'"
            f" packets too: docs/bmv2.md, difference 5) and queues of {BMV2_QUEUE_PACKETS} packets: a"
            f" packet-rate port counts each {PACKET} B packet of a burst as a {plan.mtu} B slot, and the two"
            " channels' moving windows take more than 64 of them"
        )
    with experiment.network(plan) as run:
        for name in ENVELOPES:
            experiment.phase(f"rate control: greedy source through {name}")
            granted = reserve(run, body(run, "a1", 5050, name))
            try:
                runs = send(
                    run, experiment.work / f"greedy-{name}", [("a1", 5050, GREEDY_GAP_S, None)], seconds
                )
            finally:
                release(run, granted)
            greedy[name] = Measured(name, runs[5050], Promise.of(granted))
        granted_channels = {c: reserve(run, body(run, s, p, e)) for c, (s, p, e, _) in CHANNELS.items()}
        promises = {c: Promise.of(g) for c, g in granted_channels.items()}
        bounds = {c: promise.delay_us / 1000 for c, promise in promises.items()}
        try:
            one = CHANNELS[1]
            for label, flood in (("unloaded", False), ("loaded", True)):
                experiment.phase(f"channel 1, router {label}")
                counted = first_hop_counts(run, granted_channels[1])
                runs = send(
                    run, experiment.work / f"load-{label}", [(one[0], one[1], one[3], one[2])], seconds, flood
                )
                seen = first_hop_counts(run, granted_channels[1]) - counted
                load[label] = Measured(label, runs[one[1]], promises[1], seen)
            for label, members in (("1 alone", [1]), ("2 alone", [2]), ("together", [1, 2])):
                experiment.phase(f"channels: {label}")
                spec = [(CHANNELS[c][0], CHANNELS[c][1], CHANNELS[c][3], CHANNELS[c][2]) for c in members]
                before = {c: first_hop_counts(run, granted_channels[c]) for c in members}
                runs = send(run, experiment.work / f"coexist-{label.replace(' ', '-')}", spec, seconds)
                for c in members:
                    seen = first_hop_counts(run, granted_channels[c]) - before[c]
                    together[f"{c} {label}" if label == "together" else label] = Measured(
                        label, runs[CHANNELS[c][1]], promises[c], seen
                    )
        finally:
            for g in granted_channels.values():
                release(run, g)

    for name, m in greedy.items():
        _, xave, interval = ENVELOPES[name]
        allowed = interval // xave
        slack = stall_slack(experiment.stalls, m.run.first_start_ns)
        over = most_over_envelope(m.arrivals_us(), PACKET, envelope(name), m.promise, slack)
        shift = m.promise.shift_us(envelope(name))
        experiment.figure(f"greedy.{name}.sent", m.run.sent)
        experiment.figure(f"greedy.{name}.received", m.run.received)
        experiment.figure(f"greedy.{name}.policer_tolerance_us", m.promise.tolerance_us)
        experiment.figure(f"greedy.{name}.J_us", shift)
        most = most_within(m.arrivals_us(), interval - shift, slack)
        experiment.figure(
            f"greedy.{name}.most_packets_within_I_less_J", most, seed=f"<= {allowed} (I/Xave)"
        )
        if most > allowed:
            problems.append(
                f"{name}: {most} packets arrived within I - J = {interval - shift} µs, more than"
                f" I/Xave = {allowed}"
            )
        # What the policer did, by when the passed packets were sent: each was stamped up to
        # its tolerance τ later, so what passed keeps n per I − 2τ of sending.
        span = interval - 2 * m.promise.tolerance_us
        sent = m.sent_us()
        most_sent = most_within(sent, span, sending_stall_slack(experiment.stalls, m.run.first_start_ns))
        experiment.figure(
            f"greedy.{name}.most_passed_sent_within_I_less_2tau", most_sent, seed=f"<= {allowed}"
        )
        if most_sent > allowed:
            problems.append(
                f"{name}: {most_sent} of the packets sent within {span} µs passed, more than {allowed}"
            )
        experiment.figure(f"greedy.{name}.over_envelope_B", over, seed="<= 0 (envelope kept)")
        if over > 0:
            problems.append(f"{name}: the arrivals exceeded the envelope by {over} B")
        if m.run.received < 0.8 * seconds * 1e6 / xave:
            problems.append(f"{name}: only {m.run.received} packets passed, below 80% of I/Xave per I")
    for label, m in load.items():
        experiment.figure(f"load.{label}.loss", m.run.loss, seed="0")
        experiment.figure(f"load.{label}.p99_ms", m.p99_ms())
        worst = percentile(m.run.delays_ms(), 100)
        experiment.figure(f"load.{label}.max_ms", worst, seed=f"bound {bounds[1]:.3f}")
        late = m.run.late_outside_stalls(bounds[1], experiment.stalls)
        lost = m.run.lost_outside_stalls(experiment.stalls, m.promise.policer(envelope(CHANNELS[1][2])))
        experiment.figure(f"load.{label}.lost_in_machine_stalls", m.run.sent - m.run.received - lost)
        report_losses(experiment, f"load.{label}", m)
        if lost or late:
            problems.append(
                f"channel 1 {label}: {lost} packets lost and {late} over the bound"
                " outside the machine's stalls"
            )
    for c in CHANNELS:
        alone, both = together[f"{c} alone"], together[f"{c} together"]
        experiment.figure(f"coexist.channel{c}.alone_p99_ms", alone.p99_ms())
        experiment.figure(f"coexist.channel{c}.together_p99_ms", both.p99_ms(), seed="almost the same")
        # judged without the packets the machine's stalls held (a 1 s short run's p99 is its
        # second-slowest packet) and the losses they caused (topo/experiment.py FlowRun)
        for m in (alone, both):
            lost = m.run.lost_outside_stalls(experiment.stalls, m.promise.policer(envelope(CHANNELS[c][2])))
            report_losses(experiment, f"coexist.channel{c}.{m.label.replace(' ', '_')}", m)
            experiment.figure(
                f"coexist.channel{c}.{m.label.replace(' ', '_')}.lost", m.run.sent - m.run.received
            )
            if lost:
                problems.append(f"channel {c} {m.label}: lost {lost} packets outside the machine's stalls")
        ran_alone, ran_both = alone.p99_ms(experiment.stalls), both.p99_ms(experiment.stalls)
        if ran_both > ran_alone + 1.0:
            problems.append(
                f"channel {c}: p99 {ran_both:.3f} ms together against {ran_alone:.3f} alone (outside stalls)"
            )
    plot(experiment, greedy, load, together)
    return experiment.finish(problems, {"bounds_ms": bounds})


def report_losses(experiment: Experiment, key: str, m: Measured) -> None:
    """Where a channel's lost packets were lost, by its first hop's counters: before the switch's
    pipeline (its ingress), or marked by the policer there."""
    if m.seen is None or m.run.received == m.run.sent:
        return
    experiment.figure(f"{key}.lost_before_the_pipeline", m.run.sent - m.seen.packets)
    experiment.figure(f"{key}.marked_by_the_policer", m.seen.marked)


def plot(
    experiment: Experiment,
    greedy: dict[str, Measured],
    load: dict[str, Measured],
    together: dict[str, Measured],
) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for name, m in greedy.items():
        xs = [t / 1000 for t in m.arrivals_us()]
        axes[0].step(xs, range(1, len(xs) + 1), where="post", label=name.replace("_", ", "))
    axes[0].set_title("greedy source, received (seed 004 Fig. 6)")
    for label, m in load.items():
        xs = [t / 1000 for t in m.arrivals_us()]
        axes[1].step(xs, range(1, len(xs) + 1), where="post", label=f"router {label}")
    axes[1].set_title("channel 1, router loaded or not (Fig. 8)")
    for label, m in together.items():
        xs = [t / 1000 for t in m.arrivals_us()]
        axes[2].step(xs, range(1, len(xs) + 1), where="post", label=f"channel {label}")
    axes[2].set_title("two channels alone and together (Fig. 7)")
    for ax in axes:
        ax.set_xlabel("time since the first packet was due (ms)")
        ax.set_ylabel("packets received (sequence)")
        ax.legend(fontsize=8)
    fig.suptitle("E8: rate control and channel isolation")
    experiment.save_plot(fig, "sequence")


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
