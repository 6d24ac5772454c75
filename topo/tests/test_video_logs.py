"""How the demo and the end-to-end test read the video's logs: a frame's delay through the network
versus the latency the application saw, and frames that lost packets."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from topo import video
from topo.experiment import read_video_logs

MS = 1_000_000  # ns


def write_logs(tmp_path: Path, frames: list[tuple[int, list[tuple[int, int] | None]]]) -> tuple[Path, Path]:
    """frames: (start ns, per packet (sent ns, arrival ns) or None if lost)."""
    sent, received = [], []
    for number, (start, packets) in enumerate(frames):
        sent.append({"frame": number, "bytes": 1000, "packets": len(packets), "start_ns": start})
        times = [(i, p[0], p[1]) for i, p in enumerate(packets) if p is not None]
        if times:
            received.append(
                {
                    "frame": number,
                    "bytes": 1000,
                    "packets": len(packets),
                    "start_ns": start,
                    "received": len(times),
                    "last_arrival_ns": max(t[2] for t in times),
                    "packet_times": times,
                }
            )
    sender, receiver = tmp_path / "sender.json", tmp_path / "receiver.json"
    sender.write_text(json.dumps({"frames": sent}))
    receiver.write_text(json.dumps({"frames": received}))
    return sender, receiver


@pytest.mark.parametrize(
    ("packets", "latency_ms", "sending_ms", "network_ms"),
    [
        # Handed over at once: the last packet waited behind the others, 2 ms in all.
        ([(0, 1 * MS), (0, 2 * MS)], 2.0, 0.0, 2.0),
        # The sender stalled 3 ms before the second packet: the application saw 3.5 ms, the
        # network took at most 1 ms for either packet.
        ([(0, 1 * MS), (3 * MS, 3 * MS + MS // 2)], 3.5, 3.0, 1.0),
    ],
)
def test_frame_delay_splits_sender_from_network(
    tmp_path: Path, packets: list[tuple[int, int]], latency_ms: float, sending_ms: float, network_ms: float
) -> None:
    start = 1_000 * MS
    shifted: list[tuple[int, int] | None] = [(start + s, start + a) for s, a in packets]
    run = read_video_logs(*write_logs(tmp_path, [(start, shifted)]))
    (timing,) = run.timings
    assert (timing.latency_ms, timing.sending_ms, timing.network_ms) == pytest.approx(
        (latency_ms, sending_ms, network_ms)
    )


def test_lost_packets_break_a_frame(tmp_path: Path) -> None:
    frames: list[tuple[int, list[tuple[int, int] | None]]] = [
        (0, [(0, 1 * MS), (0, 2 * MS)]),  # whole
        (33 * MS, [(33 * MS, 40 * MS), None]),  # second packet lost
        (66 * MS, [None, None]),  # nothing arrived
    ]
    run = read_video_logs(*write_logs(tmp_path, frames))
    assert (run.frames_sent, run.frames_whole, run.packets_sent, run.packets_received) == (3, 1, 6, 3)
    assert run.packet_loss == pytest.approx(0.5)
    (broken,) = run.broken
    assert broken.frame == 1
    assert (broken.at_s, broken.network_ms) == pytest.approx((0.033, 7.0))
    assert [t.frame for t in run.slowest(5)] == [0]


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root")
def test_a_sender_is_real_time_while_it_sends_and_only_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real-time sender's set-up and log writing would hold off a normal-priority switch."""
    policies: dict[str, set[int]] = {"sending": set(), "logging": set()}
    real_wait, real_dump = video.wait_until, json.dump

    def wait_until(due_ns: int) -> None:
        policies["sending"].add(os.sched_getscheduler(0))
        real_wait(due_ns)

    def dump(obj: object, out: Any) -> None:
        policies["logging"].add(os.sched_getscheduler(0))
        real_dump(obj, out)

    monkeypatch.setattr(video, "wait_until", wait_until)
    monkeypatch.setattr(json, "dump", dump)
    spec = {"flows": [{"port": 47999, "packet_bytes": 200, "frames": [[0.0], [0.001]]}]}
    before = os.sched_getscheduler(0)
    video.send_flows("127.0.0.1", spec, str(tmp_path / "flows.json"), rt_priority=3)
    video.send("127.0.0.1", 47998, 0.1, 1, str(tmp_path / "video.json"), 46, None, rt_priority=3)
    assert policies == {"sending": {os.SCHED_FIFO}, "logging": {os.SCHED_OTHER}}
    assert os.sched_getscheduler(0) == before == os.SCHED_OTHER
    assert json.loads((tmp_path / "flows.json").read_text())["flows"][0]["port"] == 47999


def test_the_network_delay_counts_from_the_wire(tmp_path: Path) -> None:
    """A sender preempted between stamping a packet and its kernel sending it (it stamped at 0,
    the wire took the packet at 20 ms) delayed a packet the network had not seen: the frame's
    network delay counts from the wire stamp, 1 ms; a packet without one counts from its own."""
    start = 1_000 * MS
    sender, receiver = write_logs(tmp_path, [(start, [(start, start + 21 * MS), (start, start + 3 * MS)])])
    log = json.loads(sender.read_text())
    log["frames"][0]["wire_ns"] = [start + 20 * MS, None]
    sender.write_text(json.dumps(log))
    (timing,) = read_video_logs(sender, receiver).timings
    assert (timing.network_ms, timing.latency_ms) == pytest.approx((3.0, 21.0))


def test_wire_stamps_come_from_the_kernel() -> None:
    """Each datagram gets the kernel's transmit stamp, in sending order, after the sender's."""
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamps = video.WireStamps(sender)
    assert stamps.on
    before = []
    for index in range(40):
        before.append(time.time_ns())
        sender.sendto(b"x" * 64, receiver.getsockname())
        stamps.sent(0, index)
    stamps.collect(wait_s=1.0)
    wire = stamps.of_frame(0, 40)
    assert all(w is not None for w in wire)
    assert all(b <= w for b, w in zip(before, wire, strict=True))  # type: ignore[operator]
    assert wire == sorted(wire)  # type: ignore[type-var]
    sender.close()
    receiver.close()
