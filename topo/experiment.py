"""Traffic for the demo and the end-to-end test: the video channel against best-effort floods.

`video_under_flood` runs the seed 000 scenario on a running network — iperf3 floods from some
hosts to the sink at their line rate, the video (topo/video.py) from the source to the same sink —
and returns what the receiver saw, frame by frame.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo.network import RunningNetwork
from topo.p4switch import REPO

PYTHON = str(REPO / "build" / "venv" / "bin" / "python")
VIDEO_PORT = 5004
FLOOD_PORT_BASE = 5201


@dataclass
class FrameTiming:
    """Where a whole frame's time went.

    `network_ms` is the frame's delay through the network, the quantity a reservation's delay bound
    covers: the longest any of its packets took from the sender's socket to the receiver's kernel,
    each packet including its wait behind the frame's earlier packets. `latency_ms` is what the
    application saw, from the frame's start to its last packet's arrival; it adds the sender's own
    lateness in handing the packets over (`sending_ms`: a sending host preempted or its vCPU
    stalled between two packets), which no network can promise anything about. When the packets
    leave back to back, the two differ by the ~0.1 ms the sender takes to write them."""

    frame: int
    at_s: float  # frame start, seconds after the first frame's
    latency_ms: float  # last packet's arrival - frame start
    sending_ms: float  # last packet's send - frame start: the sender's own share
    network_ms: float  # the largest per-packet arrival - send


@dataclass
class VideoRun:
    frames_sent: int
    packets_sent: int
    packets_received: int
    timings: list[FrameTiming]  # whole frames, in frame order
    broken: list[FrameTiming]  # frames that lost packets: the timing of those that arrived

    def slowest(self, count: int) -> list[FrameTiming]:
        return sorted(self.timings, key=lambda t: t.latency_ms, reverse=True)[:count]

    @property
    def frames_whole(self) -> int:
        return len(self.timings)

    @property
    def packet_loss(self) -> float:
        return 1 - self.packets_received / self.packets_sent if self.packets_sent else 0.0


def video_under_flood(
    run: RunningNetwork,
    *,
    source: str,
    sink: str,
    flooders: tuple[str, ...],
    seconds: float,
    work: Path,
    shape: tuple[int, int] | None = None,
) -> VideoRun:
    """Each flooder sends UDP to `sink` at its access rate while `source` sends the video.
    `shape` = (bytes/s, bytes) makes the video sender keep to a reservation's envelope."""
    plan = run.plan
    destination = plan.hosts[sink]
    sink_node = run.host(sink)
    sender_log, receiver_log = work / "video-sender.json", work / "video-receiver.json"
    video = f"{PYTHON} -m topo.video"
    receiver = sink_node.popen(
        f"{video} receive --port {VIDEO_PORT} --seconds {seconds + 4} --log {receiver_log}".split(),
        cwd=str(REPO),
    )
    ports = [FLOOD_PORT_BASE + i for i in range(len(flooders))]
    servers = [sink_node.popen(["iperf3", "-s", "-1", "-p", str(p)]) for p in ports]
    time.sleep(1)
    datagram = str(plan.mtu - 100)
    floods = [
        run.host(name).popen(
            f"iperf3 -c {destination.address} -u -b {plan.hosts[name].rate_bps} -l {datagram}"
            f" -t {int(seconds + 2)} -p {port}".split()
        )
        for name, port in zip(flooders, ports, strict=True)
    ]
    time.sleep(1)
    send = f"{video} send --dst {destination.address} --port {VIDEO_PORT} --seconds {seconds}"
    send += f" --log {sender_log}"
    if shape:
        send += f" --shape-rate {shape[0]} --shape-burst {shape[1]}"
    # The sender runs at a real-time priority, like the seed's dedicated video PC: it sleeps
    # between frames, and once awake it must not be preempted by the floods' processes halfway
    # through a frame, which would count as network latency.
    sender = run.host(source).popen(["chrt", "-f", "10", *send.split()], cwd=str(REPO))
    try:
        if sender.wait(timeout=seconds + 60) != 0:
            raise RuntimeError("the video sender failed")
        if receiver.wait(timeout=60) != 0:
            raise RuntimeError("the video receiver failed")
    finally:
        for process in (sender, receiver, *floods, *servers):
            if process.poll() is None:
                process.terminate()
            process.wait()
    return read_video_logs(sender_log, receiver_log)


def read_video_logs(sender_log: Path, receiver_log: Path) -> VideoRun:
    """What topo/video.py's sender and receiver logged, frame by frame."""
    sent = json.loads(sender_log.read_text())["frames"]
    got = {f["frame"]: f for f in json.loads(receiver_log.read_text())["frames"]}
    t0 = sent[0]["start_ns"]

    def timing(f: dict[str, Any], r: dict[str, Any]) -> FrameTiming:
        return FrameTiming(
            frame=f["frame"],
            at_s=(f["start_ns"] - t0) / 1e9,
            latency_ms=(r["last_arrival_ns"] - f["start_ns"]) / 1e6,
            sending_ms=(max(sent_ns for _, sent_ns, _ in r["packet_times"]) - f["start_ns"]) / 1e6,
            network_ms=max(arrival - sent_ns for _, sent_ns, arrival in r["packet_times"]) / 1e6,
        )

    arrived = [(f, got[f["frame"]]) for f in sent if f["frame"] in got]
    return VideoRun(
        frames_sent=len(sent),
        packets_sent=sum(f["packets"] for f in sent),
        packets_received=sum(min(r["received"], r["packets"]) for r in got.values()),
        timings=[timing(f, r) for f, r in arrived if r["received"] == f["packets"]],
        broken=[timing(f, r) for f, r in arrived if r["received"] < f["packets"]],
    )
