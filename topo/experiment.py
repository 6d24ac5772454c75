"""Traffic and measurements on a running network, shared by the experiments (experiments/, `make
experiments`; E1 is `make demo`) and the end-to-end test.

`Traffic` starts what a run needs in the Mininet hosts — receivers that timestamp every packet,
video senders and senders of scheduled flows (topo/video.py), iperf3 floods — and stops it all
again, receivers last, once the switches' queues have drained. `read_video_logs` and
`read_flow_logs` turn the logs into frames and packets with their delays. The rest reads the
controller: reservations (`reserve`, `largest_admitted`) and the switches' queue telemetry
(`queue_reading`, `clear_maxima`).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from terrapin_tools.policers import PolicerModel
from topo.network import RestError, RunningNetwork, call, rest
from topo.p4switch import REPO
from topo.plan import NetworkPlan
from topo.stalls import Stalls
from topo.video import VideoShape

PYTHON = str(REPO / "build" / "venv" / "bin" / "python")
VIDEO_PORT = 5004
FLOOD_PORT_BASE = 5201
# The senders run at a real-time priority, like the seed's dedicated video PC: asleep between
# packets, and once awake not preempted by the floods' processes halfway through a frame, which
# would count as network latency. Below the switch's forwarding threads (topo/p4switch.py).
SENDER_RT_PRIORITY = 10
# A packet sent this long before a stall began may still have been waiting for the switch when
# it did (Stalls.holding).
STALL_HOLD_MARGIN_NS = 1_000_000


def stamps_after_stalls(sent_ns: Sequence[int], stalls: Stalls | None) -> list[int]:
    """When a switch could have stamped packets sent at `sent_ns`, in sending order: as they
    were sent, but a packet sent while the machine stalled (or just before) when the stall
    ended, and never before the packet ahead of it (one port's packets are stamped in order)."""
    stamps: list[int] = []
    for sent in sent_ns:
        held = stalls.holding(sent, STALL_HOLD_MARGIN_NS) if stalls is not None else None
        stamps.append(max(sent if held is None else held, stamps[-1] if stamps else sent))
    return stamps


def losses_the_stalls_explain(
    sent_ns: Sequence[int],
    lost: Sequence[bool],
    stalls: Stalls | None,
    policer: Callable[[], PolicerModel] | None,
    amount: int,
) -> list[bool]:
    """For each lost packet of a channel (in sending order), whether the machine's stalls
    explain its loss: it was sent into a stall (it waited, with everything else, while nothing
    ran), or the channel's first-hop `policer`, replayed (terrapin_tools.policers) with every
    packet stamped when the stalls let the switch see it, refuses it or the packet beside it. A
    stall bunches the packets it holds, and a policer cuts a bunch beyond its tolerance; one
    cuts nothing the stalls did not bunch, so a loss that the replay does not have is the
    system's. `amount` is what the policer counts per packet (bytes, or 1)."""
    if stalls is None:
        return [False] * len(lost)
    refused = [False] * len(lost)
    if policer is not None:
        model = policer()
        refused = [not model.offer(t // 1000, amount) for t in stamps_after_stalls(sent_ns, stalls)]
    explained = []
    for i, (sent, gone) in enumerate(zip(sent_ns, lost, strict=True)):
        near = refused[max(0, i - 1) : i + 2]
        explained.append(gone and (stalls.holding(sent, STALL_HOLD_MARGIN_NS) is not None or any(near)))
    return explained


def late_outside_stalls(
    sent_ns: int, arrival_ns: int, bound_ms: float, stalls: Stalls | None, backlog_ns: int = 0
) -> bool:
    """A packet took longer than `bound_ms` by more than the machine was stalled while it was in
    flight, or in the `backlog_ns` before it was sent, whose held packets it may wait behind
    (topo/stalls.py; without `stalls`, by any amount)."""
    excess_ns = arrival_ns - sent_ns - bound_ms * 1e6
    return excess_ns > 0 and (stalls is None or excess_ns > stalls.overlap(sent_ns - backlog_ns, arrival_ns))


# ---- what the receivers saw ----------------------------------------------------------------------


@dataclass
class FrameTiming:
    """Where a whole frame's time went.

    `network_ms` is the frame's delay through the network, the quantity a reservation's delay bound
    covers: the longest any of its packets took from the sender's socket to the receiver's kernel,
    each packet including its wait behind the frame's earlier packets. `latency_ms` is what the
    application saw, from the frame's start to its last packet's arrival; it adds the sender's own
    lateness in handing the packets over (`sending_ms`: a sending host preempted or its vCPU
    stalled between two packets, or a paced sender waiting for its credit), which no network can
    promise anything about. When the packets leave back to back, the two differ by the ~0.1 ms
    the sender takes to write them."""

    frame: int
    at_s: float  # frame start, seconds after the first frame's
    latency_ms: float  # last packet's arrival - frame start
    sending_ms: float  # last packet's send - frame start: the sender's own share
    network_ms: float  # the largest per-packet arrival - send
    packets: tuple[tuple[int, int], ...] = field(default=(), repr=False)  # (sent, arrival) ns each

    def late_outside_stalls(self, bound_ms: float, stalls: Stalls | None) -> bool:
        """Some packet took longer than `bound_ms` through the network by more than the machine
        was stalled while it was in flight (topo/stalls.py; without `stalls`, by any amount)."""
        return any(late_outside_stalls(sent, arrival, bound_ms, stalls) for sent, arrival in self.packets)


@dataclass
class VideoRun:
    frames_sent: int
    packets_sent: int
    packets_received: int
    timings: list[FrameTiming]  # whole frames, in frame order
    broken: list[FrameTiming]  # frames that lost packets: the timing of those that arrived
    first_start_ns: int = 0  # the first frame's start (CLOCK_REALTIME)

    def slowest(self, count: int) -> list[FrameTiming]:
        return sorted(self.timings, key=lambda t: t.latency_ms, reverse=True)[:count]

    @property
    def frames_whole(self) -> int:
        return len(self.timings)

    @property
    def packet_loss(self) -> float:
        return 1 - self.packets_received / self.packets_sent if self.packets_sent else 0.0

    def frames_over(self, bound_ms: float, application: bool = False) -> int:
        """Frames that missed `bound_ms`; a frame that never arrived whole missed it too."""
        late = sum(1 for t in self.timings if (t.latency_ms if application else t.network_ms) > bound_ms)
        return late + self.frames_sent - self.frames_whole

    def frames_over_outside_stalls(self, bound_ms: float, stalls: Stalls | None) -> int:
        """frames_over through the network, without the frames whose lateness the machine's own
        stalls account for (FrameTiming.late_outside_stalls)."""
        late = sum(1 for t in self.timings if t.late_outside_stalls(bound_ms, stalls))
        return late + self.frames_sent - self.frames_whole

    def queue_wait_in_stalls(self, queue_bound_ms: float, wait_ms: float, stalls: Stalls | None) -> bool:
        """Whether a wait of `wait_ms` past its queue's bound in this video's own queue is the
        machine's: every frame arrived, each one that took longer than the queue's bound by the
        hosts' clocks was in flight during witnessed stalls covering the excess, and one took at
        least as long as the wait (alone in its queue, every packet the switch held is one the
        hosts saw)."""
        return (
            stalls is not None
            and self.frames_whole == self.frames_sent
            and self.frames_over_outside_stalls(queue_bound_ms, stalls) == 0
            and self.percentile(100) >= max(wait_ms, queue_bound_ms)
        )

    def percentile(self, p: float, application: bool = False) -> float:
        """Frame delay through the network (or, with `application`, as the receiving application
        saw it, the sender's own lateness included; see FrameTiming)."""
        return percentile([t.latency_ms if application else t.network_ms for t in self.timings], p)


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100; 100 is the maximum); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def _received_frames(receiver_log: Path, port: int | None) -> dict[int, dict[str, Any]]:
    frames = json.loads(receiver_log.read_text())["frames"]
    return {f["frame"]: f for f in frames if port is None or f.get("port", port) == port}


def on_the_wire(
    sender_frame: dict[str, Any], packet_times: Iterable[Sequence[int]]
) -> list[tuple[int, int, int]]:
    """A frame's received packets as (index, sent, arrival) ns, `sent` when the sending host's
    kernel put the packet on the wire where the sender logged it (topo/video.py WireStamps), else
    the sender's own stamp: the network's delay starts on the wire."""
    wire = sender_frame.get("wire_ns") or []
    return [
        (index, wire[index] if index < len(wire) and wire[index] else sent, arrival)
        for index, sent, arrival in packet_times
    ]


def read_video_logs(sender_log: Path, receiver_log: Path, port: int | None = None) -> VideoRun:
    """What topo/video.py's sender and receiver logged, frame by frame (`port`: the video's, when
    the receiver listened on several)."""
    sent = json.loads(sender_log.read_text())["frames"]
    got = _received_frames(receiver_log, port)
    t0 = sent[0]["start_ns"]

    def timing(f: dict[str, Any], r: dict[str, Any]) -> FrameTiming:
        times = on_the_wire(f, r["packet_times"])
        return FrameTiming(
            frame=f["frame"],
            at_s=(f["start_ns"] - t0) / 1e9,
            latency_ms=(r["last_arrival_ns"] - f["start_ns"]) / 1e6,
            sending_ms=(max(sent_ns for _, sent_ns, _ in times) - f["start_ns"]) / 1e6,
            network_ms=max(arrival - sent_ns for _, sent_ns, arrival in times) / 1e6,
            packets=tuple((sent_ns, arrival) for _, sent_ns, arrival in times),
        )

    arrived = [(f, got[f["frame"]]) for f in sent if f["frame"] in got]
    return VideoRun(
        frames_sent=len(sent),
        packets_sent=sum(f["packets"] for f in sent),
        packets_received=sum(min(r["received"], r["packets"]) for r in got.values()),
        timings=[timing(f, r) for f, r in arrived if r["received"] == f["packets"]],
        broken=[timing(f, r) for f, r in arrived if r["received"] < f["packets"]],
        first_start_ns=t0,
    )


@dataclass
class PacketTiming:
    """One packet of a flow: when its frame started, and, if it arrived, when it was sent (on the
    wire, else by its own timestamp: on_the_wire) and when the receiver's kernel had it."""

    frame: int
    index: int
    start_ns: int
    sent_ns: int | None = None
    arrival_ns: int | None = None

    @property
    def delay_ms(self) -> float | None:
        if self.sent_ns is None or self.arrival_ns is None:
            return None
        return (self.arrival_ns - self.sent_ns) / 1e6


@dataclass
class FlowRun:
    """Every packet a flow sent, in send order, with what arrived."""

    port: int
    packet_bytes: int
    packets: list[PacketTiming] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return len(self.packets)

    @property
    def received(self) -> int:
        return sum(1 for p in self.packets if p.arrival_ns is not None)

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 0.0

    def delays_ms(self, stalls: Stalls | None = None) -> list[float]:
        """Each received packet's delay; with `stalls`, only the packets in flight while the
        machine ran (none of the stalls overlapped them)."""
        return [
            d
            for p in self.packets
            if (d := p.delay_ms) is not None
            and (stalls is None or stalls.overlap(p.sent_ns or 0, p.arrival_ns or 0) == 0)
        ]

    def lost_outside_stalls(
        self, stalls: Stalls | None, policer: Callable[[], PolicerModel] | None = None, amount: int = 1
    ) -> int:
        """Lost packets the machine's stalls do not explain (losses_the_stalls_explain, with
        the channel's first-hop `policer` counting `amount` per packet)."""
        sent = [p.sent_ns if p.sent_ns is not None else p.start_ns for p in self.packets]
        lost = [p.arrival_ns is None for p in self.packets]
        explained = losses_the_stalls_explain(sent, lost, stalls, policer, amount)
        return sum(1 for gone, why in zip(lost, explained, strict=True) if gone and not why)

    def late_outside_stalls(self, bound_ms: float, stalls: Stalls | None, backlog_ns: int = 0) -> int:
        """Packets that took longer than `bound_ms` by more than the machine was stalled while
        they were in flight, or in the `backlog_ns` before (topo/stalls.py)."""
        return sum(
            1
            for p in self.packets
            if p.sent_ns is not None
            and p.arrival_ns is not None
            and late_outside_stalls(p.sent_ns, p.arrival_ns, bound_ms, stalls, backlog_ns)
        )

    def arrivals_ns(self) -> list[int]:
        return sorted(p.arrival_ns for p in self.packets if p.arrival_ns is not None)

    def received_between(self, start_ns: int, end_ns: int) -> int:
        """IPv4 bytes that arrived in [start_ns, end_ns)."""
        return self.packet_bytes * sum(
            1 for p in self.packets if p.arrival_ns is not None and start_ns <= p.arrival_ns < end_ns
        )

    @property
    def first_start_ns(self) -> int:
        return self.packets[0].start_ns if self.packets else 0


def read_flow_logs(sender_log: Path, receiver_log: Path) -> dict[int, FlowRun]:
    """Per UDP port, what `topo.video flows` sent and what the receiver got of it."""
    flows = json.loads(sender_log.read_text())["flows"]
    received = json.loads(receiver_log.read_text())["frames"]
    got: dict[tuple[int, int], list[list[int]]] = {}
    for record in received:
        got.setdefault((record["port"], record["frame"]), []).extend(record["packet_times"])
    runs = {}
    for flow in flows:
        run = FlowRun(flow["port"], flow["packet_bytes"])
        for frame in flow["frames"]:
            arrived: dict[int, tuple[int, int]] = {}
            for index, sent_ns, arrival_ns in on_the_wire(frame, got.get((flow["port"], frame["frame"]), [])):
                arrived.setdefault(index, (sent_ns, arrival_ns))
            for index in range(frame["packets"]):
                times = arrived.get(index)
                run.packets.append(
                    PacketTiming(
                        frame["frame"],
                        index,
                        frame["start_ns"],
                        times[0] if times else None,
                        times[1] if times else None,
                    )
                )
        runs[flow["port"]] = run
    return runs


def flow(
    port: int,
    packet_bytes: int,
    times_s: Sequence[float],
    *,
    dscp: int = 46,
    shape: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """One flow of `topo.video flows`: a packet at each time (s from the start), each its own
    frame, shaped by the sender's token bucket (rate B/s, burst B) if given."""
    return {
        "port": port,
        "dscp": dscp,
        "packet_bytes": packet_bytes,
        "frames": [[t] for t in times_s],
        "shape": list(shape) if shape else None,
    }


# What a packet costs a port beyond its IPv4 bytes: the Ethernet header, and the FCS, preamble
# and inter-frame gap the switch's port serializes too (docs/switch.md).
WIRE_EXTRA = 14 + 24


def on_wire(ip_bytes_per_s: float, packet_bytes: int) -> float:
    """The line's bytes per second that IPv4 traffic of `packet_bytes` packets takes."""
    return ip_bytes_per_s * (packet_bytes + WIRE_EXTRA) / packet_bytes


def evenly(rate: float, packet_bytes: int, seconds: float, start_s: float = 0.0) -> list[float]:
    """Send times of packets of `packet_bytes` at `rate` bytes/s for `seconds`."""
    gap = packet_bytes / rate
    return [start_s + i * gap for i in range(int(seconds / gap))]


# ---- running traffic ------------------------------------------------------------------------------


def drain_seconds(plan: NetworkPlan) -> float:
    """How long after the last packet was sent the slowest path still delivers: every queue on it
    full, at its port's rate (at most the plan's longest path of them)."""
    worst = max(
        (
            plan.queue_capacity * plan.mtu * 8 / port.rate_bps
            for sw in plan.switches.values()
            for port in sw.ports.values()
        ),
        default=0.0,
    )
    return min(5.0, 0.3 + worst * len(plan.switches))


class Traffic:
    """Receivers, senders and floods of one run, in `work`; on leaving the `with` block the floods
    stop, the queues drain, and the receivers write their logs and end (also on an exception)."""

    def __init__(self, run: RunningNetwork, work: Path) -> None:
        self.run = run
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self._receivers: list[subprocess.Popen[bytes]] = []
        self._senders: list[tuple[str, subprocess.Popen[bytes]]] = []
        # (server, client, when the client is due to end) of each flood
        self._floods: list[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], float]] = []
        self._flood_port = FLOOD_PORT_BASE

    def __enter__(self) -> Traffic:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def receiver(self, host: str, ports: Sequence[int], name: str = "receiver") -> Path:
        """A receiver on `host` for `ports`; its log is written when the run stops."""
        log = self.work / f"{name}.json"
        ports_arg = ",".join(str(p) for p in ports)
        command = f"{PYTHON} -m topo.video receive --ports {ports_arg} --log {log}"
        process = self.run.host(host).popen(command.split(), cwd=str(REPO))
        self._receivers.append(process)
        self._wait_bound(host, ports, process)
        return log

    def _wait_bound(self, host: str, ports: Sequence[int], process: subprocess.Popen[bytes]) -> None:
        """Until the receiver listens on every port: the senders run at a real-time priority and
        would otherwise send their first packets before a receiver started at the normal one has
        bound its sockets (the host answers them port unreachable, and they count as lost)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listening = self.run.host(host).cmd("ss -Hnlu")
            bound = {int(m) for m in re.findall(r":(\d+)\s", listening)}
            if bound >= set(ports):
                return
            if process.poll() is not None:
                raise RuntimeError(f"the receiver on {host} exited ({process.returncode})")
            time.sleep(0.05)
        raise RuntimeError(f"the receiver on {host} did not bind {sorted(ports)} within 30 s")

    def _sender(self, host: str, name: str, command: list[str]) -> None:
        # Real-time for the send loop only (topo/video.py --rt-priority).
        command = [*command, f"--rt-priority={SENDER_RT_PRIORITY}"]
        # Its complaints are kept: a sender that fails says why in the error (wait).
        with (self.work / f"{name}-sender.err").open("w") as err:
            process = self.run.host(host).popen(command, cwd=str(REPO), stderr=err)
        self._senders.append((name, process))

    def video(
        self,
        source: str,
        sink: str,
        *,
        seconds: float,
        port: int = VIDEO_PORT,
        shape: tuple[int, int] | None = None,
        pace: bool = False,
        video: VideoShape | None = None,
        dscp: int = 46,
        seed: int = 1995,
        name: str = "video",
    ) -> Path:
        """topo/video.py's video from `source` to `sink`; the sender's log."""
        log = self.work / f"{name}-sender.json"
        command = [PYTHON, "-m", "topo.video", "send", "--dst", self.run.plan.hosts[sink].address]
        command += [f"--port={port}", f"--seconds={seconds}", f"--seed={seed}", f"--dscp={dscp}"]
        command += [f"--log={log}", *(video or VideoShape()).args()]
        if shape:
            command += [f"--shape-rate={shape[0]}", f"--shape-burst={shape[1]}"]
        if pace:
            command.append("--pace")
        self._sender(source, name, command)
        return log

    def flows(self, source: str, sink: str, flows: list[dict[str, Any]], name: str = "flows") -> Path:
        """Scheduled flows (see `flow`) from `source` to `sink` in one sender; its log."""
        spec, log = self.work / f"{name}.json", self.work / f"{name}-sender.json"
        spec.write_text(json.dumps({"flows": flows}))
        command = [PYTHON, "-m", "topo.video", "flows", "--dst", self.run.plan.hosts[sink].address]
        self._sender(source, name, [*command, f"--flows={spec}", f"--log={log}"])
        return log

    def flood(
        self, source: str, sink: str, *, rate_bps: float, packet_bytes: int, seconds: float, dscp: int = 0
    ) -> Path:
        """Best-effort UDP (iperf3) from `source` to `sink` at `rate_bps` in IPv4 packets of
        `packet_bytes`, starting now, for `seconds`; the server's JSON report (`flood_received`
        reads it once the run has stopped)."""
        port = self._flood_port
        self._flood_port += 1
        log = self.work / f"flood-{port}.json"
        log.unlink(missing_ok=True)
        host = self.run.host(sink)
        server = host.popen(["iperf3", "-s", "-1", "-J", "--logfile", str(log), "-p", str(port)])
        # The client must find the server listening: one that comes too early fails to connect,
        # and the server then waits, reportless, until it is ended (a fixed 0.3 s was too short
        # on a busy machine: E9's report had no end).
        deadline = time.monotonic() + 10
        while f":{port}" not in host.cmd(f"ss -Hltn 'sport = :{port}'"):
            if server.poll() is not None or time.monotonic() > deadline:
                _end(server)
                raise RuntimeError(f"iperf3 server on {sink} port {port} is not listening")
            time.sleep(0.05)
        datagram = packet_bytes - 28
        client = (
            f"iperf3 -c {self.run.plan.hosts[sink].address} -u -b {int(rate_bps)} -l {datagram}"
            f" -t {max(1, math.ceil(seconds))} -p {port} --tos {dscp << 2}"
        )
        self._floods.append((server, self.run.host(source).popen(client.split()), time.monotonic() + seconds))
        return log

    def wait(self, timeout: float) -> None:
        """Until every sender has finished; one that fails or overruns is an error."""
        deadline = time.monotonic() + timeout
        for name, process in self._senders:
            try:
                code = process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"sender {name} did not finish within {timeout:.0f} s") from None
            if code != 0:
                said = (self.work / f"{name}-sender.err").read_text(errors="replace").strip()
                last = said.splitlines()[-1] if said else "it said nothing"
                raise RuntimeError(f"sender {name} failed with exit code {code}: {last}")
        self._senders.clear()

    def stop(self) -> None:
        for _, process in self._senders:
            _end(process)
        self._senders.clear()
        for server, client, end_at in self._floods:
            # A flood that ran its course writes its report; one cut short (an error) is ended.
            with contextlib.suppress(subprocess.TimeoutExpired):
                client.wait(timeout=max(0.0, end_at - time.monotonic()) + 3)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=3)
            _end(client)
            _end(server)
        self._floods.clear()
        if self._receivers:
            time.sleep(drain_seconds(self.run.plan))
        for process in self._receivers:
            _end(process, grace=10)
        self._receivers.clear()


@dataclass(frozen=True)
class FloodReport:
    """A finished flood as its iperf3 server counted it (by the datagrams' sequence numbers)."""

    packets: int  # datagrams the client sent
    lost: int
    seconds: float  # from the first datagram's arrival to the test's end
    # per second of the test: (start s, end s, UDP payload bytes received)
    intervals: tuple[tuple[float, float, int], ...] = ()

    def received_Bps(self, packet_bytes: int) -> float:
        """IPv4 bytes per second that arrived (packet_bytes: the flood's IPv4 packet size)."""
        return (self.packets - self.lost) * packet_bytes / self.seconds if self.seconds > 0 else 0.0

    def received_Bps_within(self, start_s: float, end_s: float, packet_bytes: int) -> float:
        """IPv4 bytes per second that arrived in the test's whole seconds that lie within
        [start_s, end_s] of it (the part of a run other traffic shared); NaN if none does."""
        inside = [(a, b, n) for a, b, n in self.intervals if a >= start_s - 0.01 and b <= end_s + 0.01]
        seconds = sum(b - a for a, b, _ in inside)
        payload = sum(n for _, _, n in inside)
        return payload * packet_bytes / (packet_bytes - 28) / seconds if seconds > 0 else math.nan


def flood_received(log: Path) -> FloodReport:
    """What a finished flood delivered, from its iperf3 server's report."""
    try:
        report = json.loads(log.read_text())
        total = report["end"]["sum"]
        intervals = tuple(
            (float(i["sum"]["start"]), float(i["sum"]["end"]), int(i["sum"]["bytes"]))
            for i in report["intervals"]
        )
        return FloodReport(
            int(total["packets"]), int(total["lost_packets"]), float(total["seconds"]), intervals
        )
    except (OSError, ValueError, KeyError) as error:
        raise RuntimeError(f"the flood's report {log} is unreadable: {error}") from None


def _end(process: subprocess.Popen[bytes], grace: float = 5) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


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
    """Seed 000's scenario: each flooder sends UDP to `sink` at its access rate while `source`
    sends the video. `shape` = (bytes/s, bytes) makes the video sender keep to a reservation's
    envelope."""
    plan = run.plan
    with Traffic(run, work) as traffic:
        received = traffic.receiver(sink, [VIDEO_PORT])
        for name in flooders:
            rate = plan.hosts[name].rate_bps
            traffic.flood(name, sink, rate_bps=rate, packet_bytes=plan.mtu - 72, seconds=seconds + 2)
        time.sleep(1)  # the floods are up
        sent = traffic.video(source, sink, seconds=seconds, shape=shape)
        traffic.wait(seconds + 60)
    return read_video_logs(sent, received)


# ---- the controller ---------------------------------------------------------------------------------


def channel(
    run: RunningNetwork, source: str, sink: str, port: int, priority: int, max_packet: int, **envelope: Any
) -> dict[str, Any]:
    """The POST /reservations body of a UDP channel from `source` to `sink` (host names), from
    and to `port`; `envelope` adds the rest (rate, burst, policer, excess, ...)."""
    return {
        "src": run.plan.hosts[source].address,
        "dst": run.plan.hosts[sink].address,
        "protocol": "udp",
        "src_port": port,
        "dst_port": port,
        "priority": priority,
        "max_packet": max_packet,
        **envelope,
    }


@dataclass(frozen=True)
class FirstHopCounts:
    """A channel's counters at its first hop (GET /reservations/{id}/counters): the packets its
    entry matched, that is that reached the pipeline, and those its policer marked beyond the
    envelope (demoted or dropped there)."""

    packets: int
    marked: int

    def __sub__(self, before: FirstHopCounts) -> FirstHopCounts:
        return FirstHopCounts(self.packets - before.packets, self.marked - before.marked)


def first_hop_counts(run: RunningNetwork, reservation: dict[str, Any]) -> FirstHopCounts:
    hop = rest(run, "GET", f"/reservations/{reservation['id']}/counters")[0]
    marked = int(hop["yellow_packets"] or 0) + int(hop["red_packets"] or 0)
    return FirstHopCounts(int(hop["packets"] or 0), marked)


def queue_wait_bound_ms(reservation: dict[str, Any], switch: str) -> float:
    """What a reservation's packets' waits in its queue at `switch` are held to, as the guarantee
    monitor holds them (monitor/checks.py queue_wait_bound_us): the hop's static-priority bound
    and the switch's jitter, which a late dequeue shows in the wait. The switch's queue telemetry
    is judged against it; the hosts' clocks against the end-to-end bound."""
    hop = next(h for h in reservation["allocation"]["hops"] if h["switch"] == switch)
    return float(hop["worst_case_delay_us"] + hop["jitter_us"]) / 1000


def reserve(run: RunningNetwork, body: dict[str, Any]) -> dict[str, Any]:
    """POST /reservations; the reservation (RestError with the denial otherwise)."""
    granted: dict[str, Any] = rest(run, "POST", "/reservations", body)
    return granted


def release(run: RunningNetwork, reservation: dict[str, Any]) -> None:
    rest(run, "DELETE", f"/reservations/{reservation['id']}")


# The smallest rate POST /reservations takes (its `rate` must be > 0, bytes/s).
SMALLEST_RATE = 1
LARGEST_ADMITTED_TRIES = 12


class NothingAdmitted(RuntimeError):
    """No rate of a channel is admitted: the controller denied even the smallest it takes, or
    named no rate shortfall to give up (a burst or a route, which a lower rate does not cure)."""

    def __init__(self, body: dict[str, Any], asked: int, lowest: int, denial: dict[str, Any]) -> None:
        why = denial.get("message") or denial.get("error") or json.dumps(denial)
        super().__init__(
            f"nothing admitted for {body.get('src')}->{body.get('dst')} port {body.get('dst_port')}"
            f" (max_packet {body.get('max_packet')} B): asked {asked} B/s, denied down to {lowest} B/s:"
            f" {why}"
        )
        self.asked, self.lowest, self.denial = asked, lowest, denial


def largest_admitted(run: RunningNetwork, body: dict[str, Any], asked: int) -> dict[str, Any]:
    """The reservation of `body` at the largest rate the controller admits, asking `asked`
    bytes/s first. A denial names each constraint that failed and by how much (`next_rate` says
    how that leads to the next request). Never asks below SMALLEST_RATE; NothingAdmitted when
    that is denied too, or when a denial names no rate shortfall to give up."""
    rate = asked
    denied: list[tuple[int, int]] = []  # (rate asked, its largest bytes/s shortfall)
    for _ in range(LARGEST_ADMITTED_TRIES):
        status, reply = call(run, "POST", "/reservations", {**body, "rate": rate})
        if status == 201:
            granted: dict[str, Any] = reply
            return granted
        if status != 409 or not isinstance(reply, dict) or reply.get("error") != "admission denied":
            raise RestError("POST", "/reservations", status, reply)
        shortfalls = [int(v["excess"]) for v in reply.get("violations", []) if v.get("unit") == "bytes/s"]
        if not shortfalls or rate <= SMALLEST_RATE:
            raise NothingAdmitted(body, asked, rate, reply)
        denied.append((rate, max(shortfalls)))
        rate = max(SMALLEST_RATE, next_rate(denied))
    raise RuntimeError(
        f"no rate of {body.get('src')}->{body.get('dst')} was admitted within {LARGEST_ADMITTED_TRIES}"
        f" requests from {asked} B/s down to {rate} B/s"
    )


def next_rate(denied: list[tuple[int, int]]) -> int:
    """The rate to ask for after the denials so far, each (rate, its shortfall). A shortfall is
    in the port's units: the channel's bytes on a port shaped in bytes/s (terrapin-switch), but
    on one shaped in packets/s (BMv2) each packet is charged a slot of the line, so the channel's
    shortfall is the port's scaled by its packet size over the slot, which the client does not
    know. So the first denial is followed by a request 1% lower, and the line through the last two
    denials gives the rate at which the shortfall reaches zero (the shortfall grows linearly with
    the rate); on a byte-rate port that is exactly the first rate less its shortfall."""
    rate, shortfall = denied[-1]
    if len(denied) == 1:
        return rate - max(1, rate // 100)
    before, shortfall_before = denied[-2]
    if before > rate and shortfall_before > shortfall:
        return rate - math.ceil(shortfall * (before - rate) / (shortfall_before - shortfall))
    return rate - max(1, shortfall)  # the shortfall did not fall with the rate: give it up whole


def switch_status(run: RunningNetwork, switch: str) -> dict[str, Any]:
    status: dict[str, Any] = rest(run, "GET", f"/status/switches/{switch}")
    if "telemetry_error" in status:
        raise RuntimeError(f"the controller could not read {switch}'s telemetry: {status['telemetry_error']}")
    return status


@dataclass(frozen=True)
class QueueReading:
    """One priority queue of a port as the P4 program's telemetry registers saw it, through the
    controller (which reads them over P4Runtime, or on BMv2 through its CLI), since the switch
    started or its maxima were last cleared: the deepest the queue was when one of its packets
    joined it (enq_qdepth, that queue only) and its longest enqueue-to-dequeue wait; with what is
    admitted at that level."""

    max_depth_packets: int
    max_delay_ms: float
    allocated_rate: int
    allocated_burst: int
    worst_case_delay_ms: float | None
    mtu: int

    @property
    def burst_packets(self) -> int:
        """Σσ admitted at the level, in packets of the MTU (the queue depth's unit)."""
        return math.ceil(self.allocated_burst / self.mtu)


def queue_reading(run: RunningNetwork, switch: str, port: int, priority: int) -> QueueReading:
    for entry in switch_status(run, switch)["ports"]:
        if entry["port"] == port:
            queue = entry["queues"][priority]
            worst = queue["worst_case_delay_us"]
            return QueueReading(
                int(queue["max_depth_packets"] or 0),
                (queue["max_delay_us"] or 0) / 1000,
                int(queue["allocated_rate"] or 0),
                int(queue["allocated_burst"] or 0),
                None if worst is None else worst / 1000,
                run.plan.mtu,
            )
    raise KeyError(f"{switch} has no port {port}")


@dataclass
class MonitorVerdict:
    """The guarantee monitor over one run: figures are differences of /metrics taken before and
    after a run, for one reservation's queue."""

    polls: int
    network: int  # network violation episodes raised during the run
    source: int
    bands: dict[str, int]  # the queue's packets by their wait against the bound
    alarm_s: float | None = None  # first network alarm after the first frame (broken run)
    interval_s: float = 0.0

    @property
    def violations(self) -> int:
        return self.network + self.source

    def line(self) -> str:
        bands = ",".join(f"{name}:{count}" for name, count in self.bands.items())
        text = (
            f"monitor: violations={self.violations} network={self.network} source={self.source}"
            f" polls={self.polls} checked_packets={sum(self.bands.values())} bands={bands}"
        )
        if self.alarm_s is not None:
            within = self.alarm_s <= 2 * self.interval_s
            text += (
                f" alarm_s={self.alarm_s:.3f} interval_s={self.interval_s:g}"
                f" within_two_intervals={int(within)}"
            )
        return text


# (polls, packets of one queue by their wait against the bound, violations by cause)
MonitorCounts = tuple[int, dict[str, int], dict[str, int]]


def monitor_counts(run: RunningNetwork, port: int, priority: int) -> MonitorCounts:
    """The guarantee monitor's counters so far: (polls, packets of queue `priority` of `port` by
    their wait against the bound, violations by cause)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{run.rest_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    bands = {"quarter": 0, "half": 0, "within": 0, "over": 0}
    causes = {"network": 0, "source": 0}
    polls = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "terrapin_monitor_polls_total":
                polls = int(sample.value)
            elif (
                sample.name == "terrapin_monitor_queue_delay_band_packets_total"
                and labels.get("port") == str(port)
                and labels.get("queue") == str(priority)
            ):
                bands[labels["band"]] += int(sample.value)
            elif sample.name == "terrapin_monitor_violations_total":
                causes[labels["cause"]] = causes.get(labels["cause"], 0) + int(sample.value)
    return polls, bands, causes


def verdict_between(before: MonitorCounts, after: MonitorCounts) -> MonitorVerdict:
    return MonitorVerdict(
        polls=after[0] - before[0],
        network=after[2]["network"] - before[2]["network"],
        source=after[2]["source"] - before[2]["source"],
        bands={band: after[1][band] - before[1][band] for band in after[1]},
    )


def clear_maxima(run: RunningNetwork, switches: Iterable[str] | None = None) -> None:
    """Clears the queue maxima registers, so that the next reading is of what follows."""
    for name in switches if switches is not None else run.plan.switches:
        rest(run, "DELETE", f"/status/switches/{name}/maxima")
