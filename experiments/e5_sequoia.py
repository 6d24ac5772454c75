"""E5 — seed 001 §4.1-4.2 and §4.5 on `TOPO=sequoia`: reserved against unreserved video across a
saturated T1, two reserved channels side by side, and a third refused.

The seed sent vic (10 frames/s, about 580 kbit/s) from faith.berkeley to paola.ucsd over a Tenet
real-time channel and from propaganda.berkeley to paola over UDP/IP, while a data-loading
application congested the UCB-UCSB T1 between t = 20 and 30 s: the UDP session's receive rate
fell 25% (580 to 437 kbit/s, at worst 310) and its inter-frame times reached 300-500 ms; the
real-time session was unaffected. Two real-time sessions then coexisted unaffected, and a third
would have been refused for want of T1 bandwidth (§4.5).

Here the same hosts on `topo/sequoia.py` (T1s at 1.544 Mbit/s): topo/video.py's vic-like video
(10 frames/s, frames of 3,000-7,200 bytes, 1,000-byte packets) from faith and from propaganda to
paola; the data loading is iperf3 from grayling (ucb) to blizzard (ucla) at twice the T1 rate,
in the video's direction across the UCB-UCSB T1, for the middle third of the run. Part 1: faith's
video reserved through the REST API, propaganda's not. Part 2: both reserved, the load on
throughout. Part 3: a third channel of the same envelope (from grayling to paola)
is asked for and must be refused, naming the constraint.

Verdict: the reserved videos lose nothing and keep their receive rate under load (≥ 95% of
the unloaded rate), the unreserved one loses packets under load (the T1 really was saturated),
and the third channel is refused.

    sudo build/venv/bin/python -m experiments.e5_sequoia [--short] [--switch bmv2]
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from statistics import fmean

from experiments.harness import Experiment, pyplot
from topo import sequoia
from topo.experiment import Traffic, channel, read_video_logs, release, reserve
from topo.network import RestError, RunningNetwork
from topo.video import HEADER, UDP_IP_OVERHEAD, VideoShape

VIC = VideoShape(fps=10, smallest=3_000, peak=7_200, max_packet=1_000)
RATE, BURST = 80_000, 8_000  # 640 kbit/s above the video's 576 kbit/s peak; a whole frame
PRIORITY = 5
# The T1s and the queues (packets) per switch: BMv2 admits its packet-rate ports in slots of the
# MTU (see main).
T1_BPS = {"terrapin": sequoia.T1_RATE_BPS, "bmv2": 2 * sequoia.T1_RATE_BPS}
QUEUE_PACKETS = {"terrapin": 64, "bmv2": 128}
PORTS = {"faith": 5004, "propaganda": 5005}
LOAD = ("grayling", "blizzard")

EXPERIMENT = Experiment(
    5,
    "sequoia",
    title="reserved vs unreserved video across a saturated T1; two channels; a third refused",
    seed_ref="seed 001 §4.1-4.2 (Figs 5, 6, 8) and §4.5",
    seed_numbers=[
        "UDP/IP vic under load: receive rate 580 -> 437 kbit/s (-25%), minimum 310; inter-frame times"
        " up to 300-500 ms",
        "RMTP/RTIP vic under load: unaffected (Fig. 5b, 6b); two RTIP channels unaffected (Fig. 8)",
        "a third vic channel would be blocked by RCAP for insufficient T1 bandwidth (§4.5)",
    ],
)


@dataclass
class Session:
    host: str
    reserved: bool
    arrivals_s: list[float] = field(default_factory=list)  # each whole frame's last packet
    received_bytes: list[tuple[float, int]] = field(default_factory=list)  # (arrival s, IPv4 bytes)
    loss: float = 0.0
    frames: str = ""

    def rate_kbps(self, start: float, end: float) -> float:
        total = sum(b for t, b in self.received_bytes if start <= t < end)
        return total * 8 / 1000 / (end - start) if end > start else 0.0

    def gaps_ms(self) -> list[tuple[float, float]]:
        return [(b, (b - a) * 1000) for a, b in zip(self.arrivals_s, self.arrivals_s[1:], strict=False)]


def body(run: RunningNetwork, source: str, port: int) -> dict[str, object]:
    return channel(run, source, "paola", port, PRIORITY, VIC.max_packet, rate=RATE, burst=BURST)


def videos(run: RunningNetwork, name: str, seconds: float, load: tuple[float, float]) -> dict[str, Session]:
    """Both videos to paola for `seconds`, the load from load[0] to load[1] s."""
    work = EXPERIMENT.work / name
    with Traffic(run, work) as traffic:
        received = traffic.receiver("paola", list(PORTS.values()))
        logs = {
            host: traffic.video(
                host, "paola", seconds=seconds, port=port, video=VIC, seed=port, name=f"video-{host}"
            )
            for host, port in PORTS.items()
        }
        started = time.monotonic()
        time.sleep(max(0.0, load[0] - 0.1))
        rate = 2 * T1_BPS[EXPERIMENT.switch]
        traffic.flood(*LOAD, rate_bps=rate, packet_bytes=run.plan.mtu, seconds=load[1] - load[0])
        traffic.wait(seconds + 60 - (time.monotonic() - started))
    frames = json.loads(received.read_text())["frames"]
    sessions = {}
    for host, port in PORTS.items():
        video = read_video_logs(logs[host], received, port=port)
        session = Session(
            host, False, loss=video.packet_loss, frames=f"{video.frames_whole}/{video.frames_sent}"
        )
        session.arrivals_s = sorted(t.at_s + t.latency_ms / 1000 for t in video.timings)
        t0 = video.first_start_ns
        # each packet's IPv4 bytes: its share of the frame plus its headers
        session.received_bytes = [
            ((arrival - t0) / 1e9, f["bytes"] // f["packets"] + UDP_IP_OVERHEAD + HEADER.size)
            for f in frames
            if f.get("port") == port
            for _, _, arrival in f["packet_times"]
        ]
        sessions[host] = session
    return sessions


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT
    experiment.parse(argv)
    seconds = 15.0 if experiment.short else 30.0
    load = (seconds / 3, 2 * seconds / 3)
    experiment.note_scale(
        f"{seconds:g} s runs, the load from {load[0]:g} to {load[1]:g} s (the seed: 20-30 s of ~45);"
        " the data loading is iperf3 UDP at twice the T1 rate in the video's direction;"
        " the video is synthetic, vic-like (topo/video.py)"
    )
    problems: list[str] = []
    t1, queue = T1_BPS[experiment.switch], QUEUE_PACKETS[experiment.switch]
    if t1 != sequoia.T1_RATE_BPS:
        experiment.note_scale(
            f"BMv2: the T1s at {t1 / 1e6:g} Mbit/s, not {sequoia.T1_RATE_BPS / 1e6:g}, and queues of {queue}"
            " packets, not 64: a port shaped in packets/s charges each of the video's 1,000 B packets a"
            f" 1,500 B slot (docs/bmv2.md), so two channels of {RATE:,} B/s take {2 * RATE * 3 // 2:,} B/s of"
            f" slots, more than a T1's {sequoia.T1_RATE_BPS // 8:,}, and their bursts, grown over the T1s,"
            " more than 64 slots at the last hop; so scaled, two fit and a third still does not"
        )
    with experiment.network(sequoia.plan(t1_bps=t1, queue_capacity=queue)) as run:
        experiment.phase("part 1: faith reserved, propaganda not, load in the middle")
        first = reserve(run, body(run, "faith", PORTS["faith"]))
        try:
            part1 = videos(run, "part1", seconds, load)
        finally:
            release(run, first)
        part1["faith"].reserved = True
        experiment.phase("part 2: both reserved, load throughout")
        granted = [reserve(run, body(run, host, port)) for host, port in PORTS.items()]
        try:
            part2 = videos(run, "part2", seconds, (0.5, seconds))
            for s in part2.values():
                s.reserved = True
            experiment.phase("part 3: a third channel")
            try:
                third = reserve(run, {**body(run, "grayling", 5006)})
                release(run, third)
                refusal = None
            except RestError as error:
                if error.status != 409:  # a switch's or the API's error is no refusal to judge
                    raise
                refusal = error.body
        finally:
            for g in granted:
                release(run, g)
    bound = (load[0] + 1, load[1])  # the load's effect, from a second after it starts
    quiet = (1.0, load[0])
    for label, sessions in (("part1", part1), ("part2", part2)):
        for host, s in sessions.items():
            key = f"{label}.{host}{'' if s.reserved else '_unreserved'}"
            span = bound if label == "part1" else (1.0, seconds - 1)
            before = s.rate_kbps(*quiet) if label == "part1" else None
            during = s.rate_kbps(*span)
            seeds = ("580", "437 (min 310)") if not s.reserved else ("580", "unaffected")
            experiment.figure(f"{key}.frames", s.frames)
            experiment.figure(f"{key}.loss", s.loss, seed=None if not s.reserved else "0")
            if before is not None:
                experiment.figure(f"{key}.kbps_unloaded", before, seed=seeds[0])
            experiment.figure(f"{key}.kbps_loaded", during, seed=seeds[1])
            gaps = [g for t, g in s.gaps_ms() if span[0] <= t < span[1]]
            experiment.figure(f"{key}.max_interframe_ms_loaded", max(gaps, default=None),
                              seed="~100" if s.reserved else "300-500")  # fmt: skip
            if s.reserved:
                if s.loss > 0:
                    problems.append(f"{key}: the reserved video lost {s.loss:.2%} of its packets")
                reference = before if before is not None else fmean(
                    [x.rate_kbps(*quiet) for x in part1.values() if x.reserved])  # fmt: skip
                if during < 0.95 * reference:
                    problems.append(f"{key}: {during:.0f} kbit/s under load against {reference:.0f} without")
            elif s.loss == 0:
                problems.append(f"{key}: the unreserved video lost nothing: the T1 was not saturated")
    if refusal is None:
        problems.append("a third channel over the T1 was admitted")
    else:
        experiment.figure(
            "part3.third_channel", f"refused: {refusal.get('constraint')}", seed="blocked by RCAP"
        )
        experiment.figure("part3.refusal", refusal.get("message"))
    plot(experiment, part1, part2, load, seconds)
    return experiment.finish(problems, {"refusal": refusal, "load_s": load})


def plot(
    experiment: Experiment,
    part1: dict[str, Session],
    part2: dict[str, Session],
    load: tuple[float, float],
    seconds: float,
) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 7))
    for column, (title, sessions, span) in enumerate(
        (("part 1: one reserved, one not", part1, load), ("part 2: two reserved", part2, (0.5, seconds)))
    ):
        top, bottom = axes[0][column], axes[1][column]
        for host, s in sessions.items():
            label = f"{host} -> paola ({'reserved' if s.reserved else 'unreserved'})"
            bins = [(t, s.rate_kbps(t, t + 1)) for t in range(int(seconds) + 1)]
            top.plot([t + 0.5 for t, _ in bins], [r for _, r in bins], "-o", ms=3, label=label)
            gaps = s.gaps_ms()
            bottom.plot([t for t, _ in gaps], [g for _, g in gaps], ".", ms=3, label=label)
        for ax in (top, bottom):
            ax.axvspan(*span, color="0.9", label="T1 loaded")
        top.set_ylabel("receive rate (kbit/s, 1 s bins)")
        top.set_title(f"E5 {title} (seed 001 Figs 5, 6, 8)")
        top.legend(fontsize=7)
        bottom.set_ylabel("receive inter-frame time (ms)")
        bottom.set_xlabel("time (s)")
        bottom.set_yscale("log")
    experiment.save_plot(fig, "video")


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
