"""A video-like UDP stream for the demo: seed 000 §4.3's motion-JPEG transmission, resynthesised.

The seed sent a ten-minute clip at 30 frames/s, JPEG Q=60, whose frame buffers (its Figure 17)
peaked at 21,680 bytes, a peak rate of 21,680 B / 33 ms ≈ 5.25 Mbit/s; XTP segmented each frame
into packets of at most 4,500 bytes. We draw frame sizes from a Beta(4, 3) shape between 8,000
and 21,680 bytes — a single-mode spread with a long low tail like the histogram — from a seeded
generator, so both demo runs send the same frames.

    python -m topo.video send --dst 10.0.2.1 --port 5004 --seconds 20 --log sender.json
    python -m topo.video receive --port 5004 --seconds 25 --log receiver.json
    python -m topo.video pattern --dst 10.0.2.1 --port 5010 --pattern p.json --log sender.json

Every packet carries (frame number, index, count, frame start time, its own send time); the
receiver records when the kernel received each packet (SO_TIMESTAMPNS). A frame's latency is its
last packet's arrival minus the frame start; the per-packet send times tell the sender's share of
it (a sender preempted between packets) from the network's. Sender and receiver run in
Mininet hosts on one machine, so they share CLOCK_REALTIME and one-way latency is simply arrival
minus frame start.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field

FRAMES_PER_SECOND = 30
PEAK_FRAME_BYTES = 21_680
SMALLEST_FRAME_BYTES = 8_000
MAX_PACKET_BYTES = 4_500  # IPv4 total length, the FDDI-era packet of the seed
UDP_IP_OVERHEAD = 28
HEADER = struct.Struct("!4sIHHIQQ")  # magic, frame, index, count, frame bytes, frame start, sent ns
MAGIC = b"TVID"


def frame_sizes(count: int, seed: int = 1995) -> list[int]:
    rng = random.Random(seed)
    span = PEAK_FRAME_BYTES - SMALLEST_FRAME_BYTES
    return [SMALLEST_FRAME_BYTES + round(rng.betavariate(4, 3) * span) for _ in range(count)]


def segment(frame_bytes: int, max_packet: int = MAX_PACKET_BYTES) -> list[int]:
    """UDP payload sizes of a frame's packets: each whole packet at most `max_packet` bytes."""
    room = max_packet - UDP_IP_OVERHEAD - HEADER.size
    sizes = []
    left = frame_bytes
    while left > 0:
        sizes.append(min(room, left))
        left -= sizes[-1]
    return sizes


@dataclass
class FrameRecord:
    frame: int
    bytes: int
    packets: int
    start_ns: int
    received: int = 0
    last_arrival_ns: int = 0
    # per packet received: (index, sent ns, kernel arrival ns)
    packet_times: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.received == self.packets

    @property
    def latency_ms(self) -> float:
        return (self.last_arrival_ns - self.start_ns) / 1e6


class TokenBucket:
    """The sender's own leaky bucket (seed 000 §4.1.1.1: end systems police what they send), so
    that a sender the scheduler woke late cannot catch up with a burst beyond its reservation."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp = burst, time.monotonic()

    def wait_for(self, amount: float) -> None:
        while True:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= amount:
                self.tokens -= amount
                return
            time.sleep((amount - self.tokens) / self.rate)


def sender_socket(port: int, dscp: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    # The reservation names the flow by both ports, so the source port is fixed too.
    sock.bind(("0.0.0.0", port))
    return sock


def wait_until(due_ns: int) -> None:
    while (now := time.time_ns()) < due_ns:
        time.sleep(min(0.002, (due_ns - now) / 1e9))


def send(
    dst: str, port: int, seconds: float, seed: int, log: str, dscp: int, shape: tuple[int, int] | None
) -> None:
    sizes = frame_sizes(int(seconds * FRAMES_PER_SECOND), seed)
    sock = sender_socket(port, dscp)
    filler = bytes(MAX_PACKET_BYTES)
    period_ns = 1_000_000_000 // FRAMES_PER_SECOND
    first = time.time_ns() + 100_000_000
    bucket = TokenBucket(*shape) if shape else None
    sent = []
    for number, size in enumerate(sizes):
        wait_until(first + number * period_ns)
        payloads = segment(size)
        if bucket:
            # The whole frame leaves as one burst once the bucket holds it; its latency is
            # counted from then, so it measures the network, not the sender's own shaping.
            bucket.wait_for(sum(p + HEADER.size + UDP_IP_OVERHEAD for p in payloads))
        start = time.time_ns()
        for index, payload in enumerate(payloads):
            head = HEADER.pack(MAGIC, number, index, len(payloads), size, start, time.time_ns())
            sock.sendto(head + filler[:payload], (dst, port))
        sent.append({"frame": number, "bytes": size, "packets": len(payloads), "start_ns": start})
    with open(log, "w") as out:
        json.dump({"frames": sent, "peak_bps": PEAK_FRAME_BYTES * 8 * FRAMES_PER_SECOND}, out)


def send_pattern(dst: str, port: int, pattern: str, log: str, dscp: int) -> None:
    """Packets of one size at given times, in this module's packet format so that `receive`
    logs them: the pattern file is {"packet_bytes": IPv4 bytes, "frames": [[offset_s, ...],
    ...]}, each inner list the send times of one frame's packets, in seconds from the start.
    A packet whose time has passed (the sender was descheduled) leaves at once: the source
    is not shaped, whatever it sends is what the network must police."""
    with open(pattern) as spec_file:
        spec = json.load(spec_file)
    payload = int(spec["packet_bytes"]) - UDP_IP_OVERHEAD - HEADER.size
    sock = sender_socket(port, dscp)
    filler = bytes(payload)
    first = time.time_ns() + 100_000_000
    sent = []
    for number, offsets in enumerate(spec["frames"]):
        start = first + int(offsets[0] * 1e9)
        for index, offset in enumerate(offsets):
            wait_until(first + int(offset * 1e9))
            head = HEADER.pack(
                MAGIC, number, index, len(offsets), len(offsets) * payload, start, time.time_ns()
            )
            sock.sendto(head + filler, (dst, port))
        sent.append(
            {"frame": number, "bytes": len(offsets) * payload, "packets": len(offsets), "start_ns": start}
        )
    with open(log, "w") as out:
        json.dump({"frames": sent, "packet_bytes": spec["packet_bytes"]}, out)


def receive(port: int, seconds: float, log: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    # The kernel's receive time, not when this process got round to reading: on a busy machine
    # the receiver's own scheduling delay would otherwise count as network latency.
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    frames: dict[int, FrameRecord] = {}
    deadline = time.monotonic() + seconds
    control_size = socket.CMSG_SPACE(TIMESPEC.size)
    while time.monotonic() < deadline:
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(65536, control_size)
        except TimeoutError:
            continue
        arrival = kernel_timestamp(ancillary) or time.time_ns()
        if len(data) < HEADER.size:
            continue
        magic, number, index, count, size, start, sent = HEADER.unpack_from(data)
        if magic != MAGIC:
            continue
        record = frames.setdefault(number, FrameRecord(number, size, count, start))
        record.received += 1
        record.last_arrival_ns = max(record.last_arrival_ns, arrival)
        record.packet_times.append((index, sent, arrival))
    with open(log, "w") as out:
        json.dump({"frames": [asdict(r) for r in sorted(frames.values(), key=lambda r: r.frame)]}, out)


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux value; CPython may not export it
TIMESPEC = struct.Struct("@qq")


def kernel_timestamp(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= TIMESPEC.size:
            seconds, nanoseconds = TIMESPEC.unpack_from(payload)
            return int(seconds) * 1_000_000_000 + int(nanoseconds)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=5004)
    s.add_argument("--seconds", type=float, default=20)
    s.add_argument("--seed", type=int, default=1995)
    s.add_argument("--dscp", type=int, default=46, help="the sender's priority claim (EF)")
    s.add_argument("--log", required=True)
    s.add_argument("--shape-rate", type=int, default=0, help="token bucket rate, IP bytes/s (0 = none)")
    s.add_argument("--shape-burst", type=int, default=0, help="token bucket depth, IP bytes")
    pt = sub.add_parser("pattern", help="packets of one size at the times a pattern file gives")
    pt.add_argument("--dst", required=True)
    pt.add_argument("--port", type=int, default=5004)
    pt.add_argument("--pattern", required=True, help='{"packet_bytes": N, "frames": [[offset_s, ...], ...]}')
    pt.add_argument("--dscp", type=int, default=46)
    pt.add_argument("--log", required=True)
    r = sub.add_parser("receive")
    r.add_argument("--port", type=int, default=5004)
    r.add_argument("--seconds", type=float, default=25)
    r.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    if args.mode == "send":
        shape = (args.shape_rate, args.shape_burst) if args.shape_rate else None
        send(args.dst, args.port, args.seconds, args.seed, args.log, args.dscp, shape)
    elif args.mode == "pattern":
        send_pattern(args.dst, args.port, args.pattern, args.log, args.dscp)
    else:
        receive(args.port, args.seconds, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
