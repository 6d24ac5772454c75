"""How late a switch's clock sees a packet: `make jitter [SWITCH=bmv2] [SHORT=1]`.

A window policer or a meter judges a packet by the switch's ingress timestamp, not by when the
packet reached the switch's port. If the switch stamps a packet a variable time after it arrived
(BMv2 stamps it when its receive thread takes it from the port, terrapin-switch takes the
kernel's receive time), packets that kept their envelope on the wire can look closer together to
the policer, by up to that variation J. Network calculus says what follows: a policer downstream
of delay variation J needs a tolerance of J (ATM's GCRA calls it the cell delay variation
tolerance), and what it passes then keeps the envelope over t + J, α(t + J). This script
measures J on one switch, at the rates the experiments use, so that the controller can be told
it (docs/controller.md, "Timestamp jitter"; the figures are in docs/bmv2.md).

It builds a switch on three veths (ports 1 and 3 forward to port 2, port 2 to port 1) running
experiments/jitter/probe.p4, which writes the switch's timestamps into every probe packet and
serves it at priority 6, as an admitted channel; port 2 is shaped to christie's line rate, as
the experiments' hosts' ports are. A
sender in its own namespace sends a probe packet every PROBE_GAP_S (topo/video.py's flows
sender at the experiments' real-time priority, its send time in each packet); a receiver on
port 2's side records when each arrived (the kernel's receive time); a third namespace floods
port 2 through port 3 with iperf3 as the experiments' backgrounds do. For each packet:

    stamp lag      the switch's ingress timestamp − the sender's send time: what a window
                   policer sees of the packet's arrival
    enqueue lag    the switch's enq_timestamp − the sender's send time: when the packet joined
                   its egress queue (a meter judges it on the way there)
    outside queue  the receiver's kernel timestamp − the sender's send time − the time the
                   switch held the packet in its egress queue (deq_timedelta)
    queue          deq_timedelta itself: the probe is alone at its level and far below the port's
                   rate, so beyond a background packet on the wire it waits only for the switch
                   to get round to it
    forwarding     the receiver's kernel timestamp − the sender's send time: all of it

Each is a constant (the clocks' offsets, the fastest path) plus a variable part; what is printed
is the variable part: each value less the smallest, after removing any drift between the clocks
(a line under the per-second minima). The switch's jitter J, what the controller is told
(`jitter_us`, docs/controller.md "Jitter"), is the largest variable part of them all,
counted without the packets in flight while the machine itself stalled (topo/stalls.py: the
experiments leave those to their stall witness); the figures with them are printed beside.

    sudo build/venv/bin/python -m experiments.jitter.measure --switch bmv2 [--seconds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments.harness import RESULTS, SWITCHES, pyplot
from terrapin.bmv2 import Bmv2Cli
from topo import christie
from topo.experiment import PYTHON, SENDER_RT_PRIORITY
from topo.p4switch import (
    REPO,
    RT_PRIORITY,
    bmv2_command,
    favour_session,
    port_shaping,
    stop_process_group,
    switch_command,
)
from topo.rtwire import wire_first
from topo.stalls import Stalls, witnessed
from topo.video import HEADER, MAGIC, SO_TIMESTAMPNS, TIMESPEC, kernel_timestamp

PROBE_P4 = Path(__file__).with_name("probe.p4")
PROBE_PORT = 5099  # probe.p4's PROBE_PORT
STAMPS = struct.Struct("!QQII")  # probe.p4's stamps_h: ingress µs, egress µs, enq µs, deq Δ µs
PREFIX = "trptj"  # scripts/leftovers.py judges what the suites leave by the trpt prefix
SUBNET = "10.99.0"
GRPC_PORT, THRIFT_PORT = 9659, 9190
# E8's channel 1: a 1,000-byte packet every 2.2 ms.
PROBE_BYTES, PROBE_GAP_S = 1000, 0.0022
FLOOD_PORT = 5299


@dataclass(frozen=True)
class Background:
    """What floods the probe's egress port while it is measured."""

    name: str
    packet_bytes: int  # IPv4
    mbps: float

    @property
    def pps(self) -> float:
        return self.mbps * 1e6 / 8 / self.packet_bytes if self.packet_bytes else 0.0


def line_mbps(switch: str) -> float:
    """christie's line rate on this switch in the experiments that flood it (E1, E3, E4, E8)."""
    from experiments.e4_queue_depth import LINE_MBPS

    return LINE_MBPS[switch]


def backgrounds(switch: str) -> list[Background]:
    """The backgrounds the experiments put beside a channel on this switch: none; two hosts at
    christie's line rate in its MTU-sized packets (E1, E3, E8's load); E4's 128-byte one (held
    to E4's packet rate on BMv2)."""
    from experiments.e4_queue_depth import BMV2_BACKGROUND_PPS

    line = line_mbps(switch)
    mtu_packet = christie.plan().mtu - 72
    small = 7.2 if switch != "bmv2" else round(BMV2_BACKGROUND_PPS * 128 * 8 / 1e6, 2)
    return [
        Background("idle", 0, 0.0),
        Background(f"{2 * line:g} Mbit/s of {mtu_packet} B", mtu_packet, 2 * line),
        Background(f"{small:g} Mbit/s of 128 B", 128, small),
    ]


# ---- the probe network -------------------------------------------------------------------------


def sh(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def ns(name: str) -> str:
    return f"{PREFIX}-{name}"


HOSTS = {"src": (1, 1), "dst": (2, 2), "bg": (3, 3)}  # namespace: (switch port, address)


def mac(port: int) -> str:
    return f"0a:00:00:99:00:{port:02x}"


@contextlib.contextmanager
def probe_network(mtu: int) -> Iterator[dict[int, str]]:
    """Three namespaces, each on one veth to a switch port; yields port → root-side interface.
    Every host knows the others' MACs (the probe switch answers no ARP)."""
    interfaces = {port: f"{PREFIX}{port}" for port, _ in HOSTS.values()}
    teardown()
    try:
        for host, (port, _) in HOSTS.items():
            name, intf = ns(host), interfaces[port]
            sh("ip", "netns", "add", name)
            sh("ip", "link", "add", intf, "type", "veth", "peer", "name", "eth0", "netns", name)
            for where in ([], ["ip", "netns", "exec", name]):
                link = intf if not where else "eth0"
                sh(*where, "ip", "link", "set", link, "mtu", str(mtu), "up")
                sh(*where, "ethtool", "-K", link, "tx", "off", "rx", "off")
            sh("ip", "netns", "exec", name, "ip", "link", "set", "eth0", "address", mac(port))
            sh("ip", "netns", "exec", name, "ip", "addr", "add", f"{SUBNET}.{port}/24", "dev", "eth0")
            sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
            for _, (other, _) in HOSTS.items():
                if other != port:
                    sh("ip", "netns", "exec", name, "ip", "neigh", "replace", f"{SUBNET}.{other}",
                       "lladdr", mac(other), "dev", "eth0", "nud", "permanent")  # fmt: skip
        yield interfaces
    finally:
        teardown()


def teardown() -> None:
    for host, (port, _) in HOSTS.items():
        subprocess.run(["ip", "link", "del", f"{PREFIX}{port}"], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", ns(host)], capture_output=True, check=False)


def compile_probe(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "probe.json"
    p4info = out_dir / "probe.p4info.txtpb"
    sh(str(REPO / "build/bin/terrapin-p4c"), "--target", "bmv2", "--arch", "v1model",
       "--p4runtime-files", str(p4info), "-o", str(json_path), str(PROBE_P4))  # fmt: skip
    return json_path


@contextlib.contextmanager
def probe_switch(
    kind: str, interfaces: dict[int, str], program: Path, log: Path, rate_bps: int, mtu: int
) -> Iterator[None]:
    """The switch on `interfaces`, its egress port 2 shaped to `rate_bps` as the experiments'
    topology shapes a host's port (terrapin-switch paces it, BMv2 limits each queue's packets)."""
    rates = {2: rate_bps}
    command = switch_command(
        kind, 1, interfaces, grpc_port=GRPC_PORT, thrift_port=THRIFT_PORT, program=program, port_rates=rates
    )
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    if kind == "bmv2":
        favour_session(process.pid)  # as the topologies start it
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the switch exited with {process.returncode}: see {log}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", GRPC_PORT), 0.5):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the switch did not start: see {log}")
            time.sleep(0.1)
        if kind == "bmv2":
            pps = {port: port_shaping(kind, rate, mtu) or 0 for port, rate in rates.items()}
            Bmv2Cli(bmv2_command("simple_switch_CLI"), THRIFT_PORT).shape_ports(pps, depth_packets=64)
        yield
    finally:
        stop_process_group(process)


# ---- one measurement -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    sent_ns: int  # the sender's CLOCK_REALTIME just before it sent
    ingress_us: int  # the switch's ingress_global_timestamp
    enqueue_us: int  # enq_timestamp
    queue_us: int  # deq_timedelta
    arrival_ns: int  # the receiver's kernel timestamp (CLOCK_REALTIME)


def in_netns(name: str, command: Sequence[str]) -> list[str]:
    return ["ip", "netns", "exec", ns(name), *command]


def measure(background: Background, seconds: float, work: Path) -> list[Sample]:
    work.mkdir(parents=True, exist_ok=True)
    received = work / "received.json"
    flows = work / "flows.json"
    count = int(seconds / PROBE_GAP_S)
    frames = [[i * PROBE_GAP_S] for i in range(count)]
    spec = {"port": PROBE_PORT, "dscp": 46, "packet_bytes": PROBE_BYTES, "frames": frames, "shape": None}
    flows.write_text(json.dumps({"flows": [spec]}))
    started: list[subprocess.Popen[bytes]] = []
    try:
        receiver = subprocess.Popen(
            in_netns("dst", [PYTHON, "-m", "experiments.jitter.measure", "receive", "--out", str(received)]),
            cwd=REPO,
        )
        started.append(receiver)
        if background.packet_bytes:
            started.append(subprocess.Popen(in_netns("dst", ["iperf3", "-s", "-1", "-p", str(FLOOD_PORT)]),
                                            stdout=subprocess.DEVNULL))  # fmt: skip
            time.sleep(0.5)
            client = ["iperf3", "-c", f"{SUBNET}.2", "-u", "-b", str(int(background.mbps * 1e6)),
                      "-l", str(background.packet_bytes - 28), "-t", str(math.ceil(seconds) + 2),
                      "-p", str(FLOOD_PORT)]  # fmt: skip
            started.append(subprocess.Popen(in_netns("bg", client), stdout=subprocess.DEVNULL))
        time.sleep(1)
        sender = [PYTHON, "-m", "topo.video", "flows", "--dst", f"{SUBNET}.2", "--flows", str(flows),
                  "--log", str(work / "sent.json"), "--rt-priority", str(SENDER_RT_PRIORITY)]  # fmt: skip
        subprocess.run(in_netns("src", sender), cwd=REPO, check=True, timeout=seconds + 60)
        time.sleep(0.5)
    finally:
        for process in reversed(started):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            if process.poll() is None:
                process.kill()
                process.wait()
    return [Sample(*row) for row in json.loads(received.read_text())["samples"]]


def receive(out: Path) -> None:
    """In the receiver's namespace: every probe packet's header, stamps and kernel arrival time,
    until SIGTERM."""
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", PROBE_PORT))
    sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    control = socket.CMSG_SPACE(TIMESPEC.size)
    samples = []
    while not stopping:
        for _ in selector.select(timeout=0.2):
            while True:
                try:
                    data, ancillary, _flags, _addr = sock.recvmsg(65536, control)
                except BlockingIOError:
                    break
                if len(data) < HEADER.size + STAMPS.size:
                    continue
                magic, _frame, _index, _count, _size, _start, sent = HEADER.unpack_from(data)
                if magic != MAGIC:
                    continue
                ingress, _egress, enqueue, queue = STAMPS.unpack_from(data, HEADER.size)
                arrival = kernel_timestamp(ancillary) or time.time_ns()
                samples.append((sent, ingress, enqueue, queue, arrival))
    out.write_text(json.dumps({"samples": samples}))


# ---- what the samples say ----------------------------------------------------------------------------


def variable_part(times_ns: Sequence[int], values_ns: Sequence[int]) -> list[int]:
    """values less their constant part: less a line under the lowest value of each second (the
    drift between two clocks, if any), then less the smallest that remains."""
    if not values_ns:
        return []
    t0 = times_ns[0]
    minima: dict[int, tuple[int, int]] = {}
    for t, v in zip(times_ns, values_ns, strict=True):
        second = (t - t0) // 1_000_000_000
        if second not in minima or v < minima[second][1]:
            minima[second] = (t - t0, v)
    points = list(minima.values())
    slope = 0.0
    if len(points) >= 3:
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        var = sum((x - mx) ** 2 for x, _ in points)
        slope = sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0
    detrended = [v - slope * (t - t0) for t, v in zip(times_ns, values_ns, strict=True)]
    low = min(detrended)
    return [round(d - low) for d in detrended]


def quantile(values: Sequence[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] if ordered else 0


@dataclass
class Spread:
    """The variable part of one quantity over a run, in µs."""

    p50: float
    p99: float
    p999: float
    max: float
    max_outside_stalls: float

    @staticmethod
    def of(values_ns: Sequence[int], in_stall: Sequence[bool]) -> Spread:
        outside = [v for v, s in zip(values_ns, in_stall, strict=True) if not s]
        return Spread(
            quantile(values_ns, 0.5) / 1000,
            quantile(values_ns, 0.99) / 1000,
            quantile(values_ns, 0.999) / 1000,
            max(values_ns, default=0) / 1000,
            max(outside, default=0) / 1000,
        )


@dataclass
class Result:
    background: Background
    sent: int
    received: int
    stamp_lag_us: Spread
    enqueue_lag_us: Spread
    outside_queue_us: Spread
    queue_us: Spread
    forwarding_us: Spread
    stamp_lags_ns: list[int]  # each packet's, for the plot

    @property
    def jitter_us(self) -> float:
        """J: the largest variation, outside the machine's stalls, of the stamp, of the way to the
        queue, of the way out of it, and of the whole (a late dequeue shows there)."""
        spreads = (self.stamp_lag_us, self.enqueue_lag_us, self.outside_queue_us, self.forwarding_us)
        return max(s.max_outside_stalls for s in spreads)


def analyse(background: Background, sent: int, samples: list[Sample], stalls: Stalls | None) -> Result:
    samples = sorted(samples, key=lambda s: s.sent_ns)
    times = [s.sent_ns for s in samples]
    lag = variable_part(times, [s.ingress_us * 1000 - s.sent_ns for s in samples])
    enqueue = variable_part(times, [s.enqueue_us * 1000 - s.sent_ns for s in samples])
    outside = variable_part(times, [s.arrival_ns - s.sent_ns - s.queue_us * 1000 for s in samples])
    queue = [s.queue_us * 1000 for s in samples]
    forwarding = variable_part(times, [s.arrival_ns - s.sent_ns for s in samples])
    in_stall = [stalls is not None and stalls.overlap(s.sent_ns, s.arrival_ns) > 0 for s in samples]
    return Result(
        background,
        sent,
        len(samples),
        Spread.of(lag, in_stall),
        Spread.of(enqueue, in_stall),
        Spread.of(outside, in_stall),
        Spread.of(queue, in_stall),
        Spread.of(forwarding, in_stall),
        lag,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    receiver = sub.add_parser("receive", help="(internal) the receiver, run in its namespace")
    receiver.add_argument("--out", type=Path, required=True)
    parser.add_argument("--switch", choices=SWITCHES, default=os.environ.get("SWITCH") or "terrapin")
    parser.add_argument("--seconds", type=float, default=None, help="per background (10; short 3)")
    parser.add_argument("--short", action="store_true", default=os.environ.get("SHORT", "") not in ("", "0"))
    args = parser.parse_args(argv)
    if args.mode == "receive":
        receive(args.out)
        return 0
    seconds = args.seconds or (3.0 if args.short else 10.0)
    out = RESULTS / "jitter" / args.switch
    out.mkdir(parents=True, exist_ok=True)
    program = compile_probe(out)
    results: list[Result] = []
    print(f"jitter: {args.switch}, {seconds:g} s per background, a {PROBE_BYTES} B probe every"
          f" {PROBE_GAP_S * 1000:g} ms", flush=True)  # fmt: skip
    mtu = christie.plan().mtu
    line = int(line_mbps(args.switch) * 1e6)
    with (
        probe_network(mtu) as interfaces,
        probe_switch(args.switch, interfaces, program, out / "switch.log", line, mtu),
        wire_first(),
    ):
        time.sleep(1)
        for index, background in enumerate(backgrounds(args.switch)):
            print(f"phase: {background.name} ({index + 1}/{len(backgrounds(args.switch))})", flush=True)
            with witnessed(out / f"stalls-{index}") as found:
                samples = measure(background, seconds, out / f"run-{index}")
            stalls = found[0] if found else None
            result = analyse(background, int(seconds / PROBE_GAP_S), samples, stalls)
            results.append(result)
            report(result, stalls)
    record = {
        "switch": args.switch,
        "seconds": seconds,
        "probe": {"bytes": PROBE_BYTES, "gap_s": PROBE_GAP_S},
        "switch_rt_priority": RT_PRIORITY,
        "results": [
            {**{k: v for k, v in asdict(r).items() if k != "stamp_lags_ns"}, "jitter_us": r.jitter_us}
            for r in results
        ],
        "jitter_us": max(r.jitter_us for r in results),
    }
    (out / "jitter.json").write_text(json.dumps(record, indent=1))
    plot(results, args.switch, out / "stamp-lag.png")
    print(f"jitter J (the largest variation outside the queue, outside stalls): {record['jitter_us']:.0f} µs")
    shown = out.relative_to(REPO)
    print(f"record: {shown / 'jitter.json'}; plot: {shown / 'stamp-lag.png'}")
    return 0


def report(result: Result, stalls: Stalls | None) -> None:
    def spread(s: Spread) -> str:
        return (f"p50 {s.p50:.0f}, p99 {s.p99:.0f}, p99.9 {s.p999:.0f}, max {s.max:.0f}"
                f" ({s.max_outside_stalls:.0f} outside stalls) µs")  # fmt: skip

    key = result.background.name
    print(f"{key}: received {result.received} of {result.sent}")
    print(f"{key}: stamp lag: {spread(result.stamp_lag_us)}")
    print(f"{key}: enqueue lag: {spread(result.enqueue_lag_us)}")
    print(f"{key}: outside the queue: {spread(result.outside_queue_us)}")
    print(f"{key}: egress queue: {spread(result.queue_us)}")
    print(f"{key}: forwarding: {spread(result.forwarding_us)}")
    print(f"{key}: J {result.jitter_us:.0f} µs")
    print(f"{key}: machine: {stalls.summary() if stalls else 'not witnessed'}", flush=True)


def plot(results: list[Result], switch: str, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        lags = sorted(v / 1000 for v in r.stamp_lags_ns)
        if lags:
            ax.step(lags, [1 - (i + 1) / len(lags) for i in range(len(lags))], where="post",
                    label=r.background.name)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("stamp lag beyond the smallest (µs)")
    ax.set_ylabel("share of packets lagging more")
    ax.set_title(f"{switch}: the ingress timestamp's lag behind the sender's clock")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
