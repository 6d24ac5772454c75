"""The host side of the experiments: a video-like sender, a sender of scheduled packet flows, and
a receiver that timestamps every packet. Run inside Mininet hosts:

    python -m topo.video send --dst 10.0.2.1 --port 5004 --seconds 20 --log sender.json
    python -m topo.video flows --dst 10.0.2.1 --flows flows.json --log sender.json
    python -m topo.video receive --ports 5004,5010 --log receiver.json   # until SIGTERM

**Video** (seed 000 §4.3's motion-JPEG transmission, resynthesised). The seed sent a ten-minute
clip at 30 frames/s, JPEG Q=60, whose frame buffers (its Figure 17) peaked at 21,680 bytes, a peak
rate of 21,680 B / 33 ms ≈ 5.25 Mbit/s; XTP segmented each frame into packets of at most 4,500
bytes. Frame sizes come from a Beta(4, 3) shape between 8,000 and 21,680 bytes — a single-mode
spread with a long low tail like the histogram — from a seeded generator, so every run sends the
same frames. `--fps`, `--smallest`, `--peak` and `--max-packet` make other videos (seed 001's vic:
10 frames/s of at most 7,200 bytes in 1,000-byte packets). With `--shape-rate/--shape-burst` the
sender keeps to a reservation's envelope with its own token bucket, either handing each frame
over whole once the bucket holds it (the default: latency counts from then, so it measures the
network) or, with `--pace`, each packet as its tokens arrive, the frame's latency counting from
its capture (seed 000's XTP sender, whose credits came one packet per credit period).

**Flows**: packets of one size per flow at times a JSON file gives, several flows (each its own
UDP port, DSCP and optional token bucket) from one process:

    {"flows": [{"port": 5010, "dscp": 46, "packet_bytes": 4500, "frames": [[0.0], [0.0045, 0.0046]],
                "shape": [rate B/s, burst B] or null}]}

each inner list the send times (s from the start) of one frame's packets. A packet whose time
has passed (the sender was descheduled) leaves at once, unless its flow's token bucket holds it.

With `--rt-priority N` a sender runs its send loop, and only that, at SCHED_FIFO N: its start-up
(the interpreter, imports) and its end (writing the log, exiting) take tens of milliseconds of
CPU that, at a real-time priority, would hold off a switch running at the normal one (p4lang's
simple_switch_grpc) on that CPU for as long.

Every packet carries (frame number, index, count, frame start time, its own send time); the
receiver records when the kernel received each packet (SO_TIMESTAMPNS). The sender also asks its
kernel when each packet left for the wire (SO_TIMESTAMPING's software transmit stamp, taken as
the host's veth hands it on) and logs it per packet as `wire_ns`: the network's delay is counted
from then, since a sender preempted between stamping a packet and the kernel sending it (the
switch's real-time threads outrank it) delays a packet no network has seen yet. Sender and
receiver run in Mininet hosts on one machine, so they share CLOCK_REALTIME and one-way delay is
simply arrival minus wire time.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

FRAMES_PER_SECOND = 30
PEAK_FRAME_BYTES = 21_680
SMALLEST_FRAME_BYTES = 8_000
MAX_PACKET_BYTES = 4_500  # IPv4 total length, the FDDI-era packet of the seed
UDP_IP_OVERHEAD = 28
HEADER = struct.Struct("!4sIHHIQQ")  # magic, frame, index, count, frame bytes, frame start, sent ns
MAGIC = b"TVID"
# A packet due this close is sent now rather than after a sleep the kernel would overshoot.
SPIN_NS = 50_000


def frame_sizes(
    count: int, seed: int = 1995, smallest: int = SMALLEST_FRAME_BYTES, peak: int = PEAK_FRAME_BYTES
) -> list[int]:
    rng = random.Random(seed)
    span = peak - smallest
    return [smallest + round(rng.betavariate(4, 3) * span) for _ in range(count)]


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
    port: int = 0
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

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def ready_in(self, amount: float) -> float:
        """Seconds until `amount` can be taken (0: now)."""
        self._refill()
        return 0.0 if self.tokens >= amount else (amount - self.tokens) / self.rate

    def take(self, amount: float) -> None:
        self._refill()
        self.tokens -= amount

    def wait_for(self, amount: float) -> None:
        if amount > self.burst:
            raise ValueError(f"{amount} bytes can never fit a bucket of {self.burst}")
        while (wait := self.ready_in(amount)) > 0:
            time.sleep(wait)
        self.take(amount)


def sender_socket(port: int, dscp: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    # The reservation names the flow by both ports, so the source port is fixed too.
    sock.bind(("0.0.0.0", port))
    return sock


# SO_TIMESTAMPING (linux/net_tstamp.h): a software stamp when each datagram leaves for the device,
# returned on the socket's error queue with a per-socket counter (OPT_ID) and no payload (TSONLY).
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
TX_STAMPS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)  # TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY
SO_EE_ORIGIN_TIMESTAMPING = 4
EXTENDED_ERR = struct.Struct("@IBBBBII")  # struct sock_extended_err, up to ee_data


class WireStamps:
    """When the kernel sent each datagram of one socket: `sent(key)` after each sendto names the
    packet, `collect()` reads the stamps the kernel has queued since. A kernel or socket without
    the option leaves every stamp None (the analysis then counts from the sender's own)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.keys: list[tuple[int, int]] = []  # (frame, index) by the kernel's counter
        self.stamps: dict[tuple[int, int], int] = {}
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, TX_STAMPS)
            self.on = True
        except OSError:
            self.on = False

    def sent(self, frame: int, index: int) -> None:
        if self.on:
            self.keys.append((frame, index))
            if len(self.keys) % 32 == 0:
                self.collect()

    def collect(self, wait_s: float = 0.0) -> None:
        """Reads the queued stamps; with `wait_s`, until every packet has one or that long."""
        deadline = time.monotonic() + wait_s
        while self.on:
            try:
                _data, ancillary, _flags, _addr = self.sock.recvmsg(
                    0, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT
                )
            except BlockingIOError:
                if len(self.stamps) >= len(self.keys) or time.monotonic() >= deadline:
                    return
                time.sleep(0.001)
                continue
            # the software stamp is the first of SO_TIMESTAMPING's three timespecs
            stamp, counter = kernel_timestamp(ancillary, SO_TIMESTAMPING), None
            for level, _kind, payload in ancillary:
                if level != socket.SOL_SOCKET and len(payload) >= EXTENDED_ERR.size:
                    _errno, origin, _type, _code, _pad, _info, data = EXTENDED_ERR.unpack_from(payload)
                    if origin == SO_EE_ORIGIN_TIMESTAMPING:
                        counter = data
            if stamp and counter is not None and counter < len(self.keys):
                self.stamps[self.keys[counter]] = stamp

    def of_frame(self, frame: int, packets: int) -> list[int | None]:
        return [self.stamps.get((frame, index)) for index in range(packets)]


@contextlib.contextmanager
def real_time(priority: int) -> Iterator[None]:
    """SCHED_FIFO `priority` inside the block (0, or without the right to: leave the policy
    alone), the normal policy after."""
    if priority <= 0:
        yield
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:  # no right to (not root, or a cgroup without real-time time): as is
        yield
        return
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def wait_until(due_ns: int) -> None:
    while (left := due_ns - time.time_ns()) > SPIN_NS:
        time.sleep(min(0.002, (left - SPIN_NS) / 1e9))


@dataclass(frozen=True)
class VideoShape:
    fps: float = FRAMES_PER_SECOND
    smallest: int = SMALLEST_FRAME_BYTES
    peak: int = PEAK_FRAME_BYTES
    max_packet: int = MAX_PACKET_BYTES

    def args(self) -> list[str]:
        return [
            f"--fps={self.fps:g}",
            f"--smallest={self.smallest}",
            f"--peak={self.peak}",
            f"--max-packet={self.max_packet}",
        ]


def send(
    dst: str,
    port: int,
    seconds: float,
    seed: int,
    log: str,
    dscp: int,
    shape: tuple[int, int] | None,
    video: VideoShape = VideoShape(),
    pace: bool = False,
    rt_priority: int = 0,
) -> None:
    sizes = frame_sizes(int(seconds * video.fps), seed, video.smallest, video.peak)
    sock = sender_socket(port, dscp)
    filler = bytes(video.max_packet)
    period_ns = round(1e9 / video.fps)
    bucket = TokenBucket(*shape) if shape else None
    wire = WireStamps(sock)
    sent: list[dict[str, Any]] = []
    with real_time(rt_priority):
        first = time.time_ns() + 100_000_000
        for number, size in enumerate(sizes):
            due = first + number * period_ns
            wait_until(due)
            payloads = segment(size, video.max_packet)
            on_wire = [p + HEADER.size + UDP_IP_OVERHEAD for p in payloads]
            if bucket and not pace:
                # The whole frame leaves as one burst once the bucket holds it; its latency is
                # counted from then, so it measures the network, not the sender's own shaping.
                bucket.wait_for(sum(on_wire))
            # Paced, the frame was captured when it was due and its packets wait for their credit.
            start = due if pace else time.time_ns()
            for index, payload in enumerate(payloads):
                if bucket and pace:
                    bucket.wait_for(on_wire[index])
                head = HEADER.pack(MAGIC, number, index, len(payloads), size, start, time.time_ns())
                sock.sendto(head + filler[:payload], (dst, port))
                wire.sent(number, index)
            sent.append({"frame": number, "bytes": size, "packets": len(payloads), "start_ns": start})
    wire.collect(wait_s=0.5)
    for frame in sent:
        frame["wire_ns"] = wire.of_frame(frame["frame"], frame["packets"])
    with open(log, "w") as out:
        json.dump({"frames": sent, "peak_bps": video.peak * 8 * video.fps}, out)


@dataclass
class _Flow:
    port: int
    sock: socket.socket
    payload: int
    frames: list[list[float]]
    bucket: TokenBucket | None
    starts: dict[int, int] = field(default_factory=dict)
    wire: WireStamps | None = None


def send_flows(dst: str, spec: dict[str, Any], log: str, rt_priority: int = 0) -> None:
    """Every flow of `spec` (see the module's doc) from one process, in time order. A packet its
    flow's bucket cannot take yet goes back into the schedule at the time it can, so one flow's
    shaping never holds another flow's packets."""
    flows = []
    for f in spec["flows"]:
        payload = int(f["packet_bytes"]) - UDP_IP_OVERHEAD - HEADER.size
        if payload < 0:
            raise ValueError(f"port {f['port']}: packets of {f['packet_bytes']} B cannot hold the header")
        shape = f.get("shape")
        flows.append(
            _Flow(
                int(f["port"]),
                sender_socket(int(f["port"]), int(f.get("dscp", 46))),
                payload,
                f["frames"],
                TokenBucket(*shape) if shape else None,
            )
        )
    first = time.time_ns() + 100_000_000
    # (due ns, flow, frame, index): the packets' scheduled times, earliest first.
    schedule = [
        (first + round(offset * 1e9), i, number, index)
        for i, flow in enumerate(flows)
        for number, offsets in enumerate(flow.frames)
        for index, offset in enumerate(offsets)
    ]
    heapq.heapify(schedule)
    for f in flows:
        f.wire = WireStamps(f.sock)
    filler = bytes(max((f.payload for f in flows), default=0))
    with real_time(rt_priority):
        while schedule:
            due, i, number, index = schedule[0]
            wait_until(due)
            heapq.heappop(schedule)
            flow = flows[i]
            size = flow.payload + HEADER.size + UDP_IP_OVERHEAD
            if flow.bucket is not None:
                wait = flow.bucket.ready_in(size)
                if wait > 0:
                    heapq.heappush(schedule, (time.time_ns() + round(wait * 1e9), i, number, index))
                    continue
                flow.bucket.take(size)
            count = len(flow.frames[number])
            start = flow.starts.setdefault(number, first + round(flow.frames[number][0] * 1e9))
            head = HEADER.pack(MAGIC, number, index, count, count * flow.payload, start, time.time_ns())
            flow.sock.sendto(head + filler[: flow.payload], (dst, flow.port))
            if flow.wire is not None:
                flow.wire.sent(number, index)
    for flow in flows:
        if flow.wire is not None:
            flow.wire.collect(wait_s=0.5)
    with open(log, "w") as out:
        json.dump(
            {
                "flows": [
                    {
                        "port": flow.port,
                        "packet_bytes": flow.payload + HEADER.size + UDP_IP_OVERHEAD,
                        "frames": [
                            {
                                "frame": number,
                                "bytes": len(offsets) * flow.payload,
                                "packets": len(offsets),
                                "start_ns": flow.starts.get(number, first + round(offsets[0] * 1e9)),
                                "wire_ns": flow.wire.of_frame(number, len(offsets)) if flow.wire else [],
                            }
                            for number, offsets in enumerate(flow.frames)
                        ],
                    }
                    for flow in flows
                ]
            },
            out,
        )


class _Stop(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop


def receive(ports: list[int], seconds: float, log: str) -> None:
    """Until SIGTERM (or `seconds`, if positive), then the log: every frame of every port."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    selector = selectors.DefaultSelector()
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        # The kernel's receive time, not when this process got round to reading: on a busy
        # machine the receiver's own scheduling delay would otherwise count as network latency.
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind(("0.0.0.0", port))
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, port)
    frames: dict[tuple[int, int], FrameRecord] = {}
    deadline = time.monotonic() + seconds if seconds > 0 else None
    control_size = socket.CMSG_SPACE(TIMESPEC.size)
    try:
        while deadline is None or time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.2):
                ready, port = key.fileobj, key.data
                assert isinstance(ready, socket.socket)  # only sockets were registered
                while True:
                    try:
                        data, ancillary, _flags, _addr = ready.recvmsg(65536, control_size)
                    except BlockingIOError:
                        break
                    arrival = kernel_timestamp(ancillary) or time.time_ns()
                    if len(data) < HEADER.size:
                        continue
                    magic, number, index, count, size, start, sent = HEADER.unpack_from(data)
                    if magic != MAGIC:
                        continue
                    record = frames.setdefault((port, number), FrameRecord(number, size, count, start, port))
                    record.received += 1
                    record.last_arrival_ns = max(record.last_arrival_ns, arrival)
                    record.packet_times.append((index, sent, arrival))
    except _Stop:
        pass
    with open(log, "w") as out:
        json.dump({"frames": [asdict(r) for _, r in sorted(frames.items())]}, out)


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux value; CPython may not export it
TIMESPEC = struct.Struct("@qq")


def kernel_timestamp(ancillary: list[tuple[int, int, bytes]], stamp_kind: int = SO_TIMESTAMPNS) -> int | None:
    """The kernel's stamp (ns) a message's control data carries as `stamp_kind`, if any."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == stamp_kind and len(payload) >= TIMESPEC.size:
            seconds, nanoseconds = TIMESPEC.unpack_from(payload)
            return int(seconds) * 1_000_000_000 + int(nanoseconds)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send", help="the video")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=5004)
    s.add_argument("--seconds", type=float, default=20)
    s.add_argument("--seed", type=int, default=1995)
    s.add_argument("--dscp", type=int, default=46, help="the sender's priority claim (EF)")
    s.add_argument("--log", required=True)
    s.add_argument("--shape-rate", type=int, default=0, help="token bucket rate, IP bytes/s (0 = none)")
    s.add_argument("--shape-burst", type=int, default=0, help="token bucket depth, IP bytes")
    s.add_argument("--pace", action="store_true", help="shape each packet, not each frame")
    s.add_argument("--fps", type=float, default=FRAMES_PER_SECOND)
    s.add_argument("--smallest", type=int, default=SMALLEST_FRAME_BYTES, help="smallest frame, bytes")
    s.add_argument("--peak", type=int, default=PEAK_FRAME_BYTES, help="largest frame, bytes")
    s.add_argument("--max-packet", type=int, default=MAX_PACKET_BYTES, help="largest IPv4 packet")
    fl = sub.add_parser("flows", help="flows of fixed-size packets at the times a file gives")
    fl.add_argument("--dst", required=True)
    fl.add_argument("--flows", required=True, help="JSON file, see the module's doc")
    fl.add_argument("--log", required=True)
    for sender in (s, fl):
        sender.add_argument(
            "--rt-priority", type=int, default=0, help="SCHED_FIFO priority of the send loop (0: none)"
        )
    r = sub.add_parser("receive")
    r.add_argument("--ports", default="5004", help="comma-separated UDP ports")
    r.add_argument("--seconds", type=float, default=0, help="stop after this long (0: at SIGTERM)")
    r.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    if args.mode == "send":
        shape = (args.shape_rate, args.shape_burst) if args.shape_rate else None
        video = VideoShape(args.fps, args.smallest, args.peak, args.max_packet)
        send(
            args.dst,
            args.port,
            args.seconds,
            args.seed,
            args.log,
            args.dscp,
            shape,
            video,
            args.pace,
            args.rt_priority,
        )
    elif args.mode == "flows":
        with open(args.flows) as spec:
            send_flows(args.dst, json.load(spec), args.log, args.rt_priority)
    else:
        receive([int(p) for p in args.ports.split(",")], args.seconds, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
