"""Shared fixture for the Terrapin PTF tests: a clean switch, the test topology, packets.

Topology (every test starts from it): switch port p (1..4) faces host p on 10.0.p.0/24.
Host p is 10.0.p.2 with MAC 02:00:00:00:00:0p; the switch's port p has MAC
02:7e:00:00:00:0p and answers ARP for the gateway 10.0.p.1. PTF port p is the veth peer
of switch port p (ptf-tests/run.sh).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest
from scapy.all import (  # type: ignore[attr-defined]
    ICMP,
    IP,
    TCP,
    UDP,
    ByteField,
    Dot1Q,
    Ether,
    IntField,
    IPField,
    LongField,
    Packet,
    ShortField,
    bind_layers,
    checksum,
)
from terrapin.bmv2 import Bmv2Cli

from p4runtime_client import MeterEnvelope, P4RuntimeClient

PORTS = (1, 2, 3, 4)
CPU_PORT = 255


def host_ip(port: int) -> str:
    return f"10.0.{port}.2"


def gateway_ip(port: int) -> str:
    return f"10.0.{port}.1"


def host_mac(port: int) -> str:
    return f"02:00:00:00:00:{port:02x}"


def switch_mac(port: int) -> str:
    return f"02:7e:00:00:00:{port:02x}"


def load_constants() -> dict[str, int]:
    """The `const` lines of p4src/include/constants.p4: the tests use the same numbers."""
    path = Path(__file__).resolve().parents[2] / "p4src" / "include" / "constants.p4"
    found: dict[str, int] = {}
    for m in re.finditer(r"^const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", path.read_text(), re.M):
        found[m.group(1)] = int(m.group(2), 0)
    return found


C = load_constants()


class XTP(Packet):  # type: ignore[misc]
    """XTP 4.0 common header, 32 bytes (docs/dataplane.md)."""

    name = "XTP"
    fields_desc = [
        LongField("key", 0),
        IntField("cmd", 0),
        IntField("dlen", 0),
        ShortField("check", 0),
        ShortField("sort", 0),
        IntField("sync", 0),
        LongField("seq", 0),
    ]


bind_layers(IP, XTP, proto=36)


class Reservation(Packet):  # type: ignore[misc]
    """The fixed 56-byte reservation protocol message of docs/protocol.md (ICMP type 253)."""

    name = "TerrapinReservation"
    fields_desc = [
        ByteField("type", 253),
        ByteField("code", 1),
        ShortField("checksum", None),
        ByteField("version", 1),
        ByteField("flags", 0),
        ShortField("hops", 0),
        IntField("context", 0),
        IPField("initiator", "0.0.0.0"),
        IPField("destination", "0.0.0.0"),
        ByteField("protocol", 17),
        ByteField("priority", 3),
        ByteField("reason", 0),
        ByteField("reserved", 0),
        LongField("flow_key", 0),
        IntField("rate", 0),
        IntField("burst", 0),
        IntField("avg_idle_us", 0),
        IntField("max_packet", 0),
        IntField("delay_us", 0),
        IntField("shortfall", 0),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        whole = pkt + pay
        if self.checksum is None:
            c = checksum(whole)
            whole = whole[:2] + c.to_bytes(2, "big") + whole[4:]
        return whole



def ipv4_packet(src_port: int, dst: str, *, ttl: int = 64, tos: int = 0, proto_layer: Packet | None = None,
                payload_len: int = 100, src: str | None = None, options: list | None = None,
                vlan: int | None = None) -> Packet:
    """A frame as host `src_port` sends it to its gateway, with `payload_len` bytes of payload."""
    l2 = Ether(src=host_mac(src_port), dst=switch_mac(src_port))
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan)
    ip = IP(src=src or host_ip(src_port), dst=dst, ttl=ttl, tos=tos, id=0x1234)
    if options is not None:
        ip.options = options
    l4 = proto_layer if proto_layer is not None else UDP(sport=5000, dport=6000)
    return l2 / ip / l4 / (b"\xab" * payload_len)


def routed(pkt: Packet, out_port: int) -> Packet:
    """What `pkt` must look like leaving `out_port`: next-hop MAC, port MAC, TTL - 1, new checksum."""
    exp = pkt.copy()
    exp[Ether].dst = host_mac(out_port)
    exp[Ether].src = switch_mac(out_port)
    exp[IP].ttl -= 1
    exp[IP].chksum = None
    return Ether(bytes(exp))


def sized_udp(src_port: int, dst_port: int, frame_len: int, sport: int = 5000, dport: int = 6000,
              tos: int = 0) -> Packet:
    """A UDP frame of exactly frame_len bytes from host src_port to host dst_port."""
    payload = frame_len - 14 - 20 - 8
    assert payload >= 0
    return ipv4_packet(src_port, host_ip(dst_port), tos=tos, proto_layer=UDP(sport=sport, dport=dport),
                       payload_len=payload)


class TerrapinTest(BaseTest):  # type: ignore[misc]
    """Pushes the compiled pipeline to a clean switch and installs the test topology."""

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        params = tu.test_params_get()
        self.switch_kind = params.get("switch", "terrapin")
        self.sw = P4RuntimeClient(params["grpc_addr"])
        self.sw.set_pipeline(params["p4info"], params["json"])
        self.rate_limited_port = int(params.get("rate_limited_port", 4))
        self.rate_limited_bps = int(params.get("rate_limited_bps", 1_000_000))
        self.bmv2_cli = (
            Bmv2Cli(params["bmv2_cli"], int(params["thrift_port"])) if self.switch_kind == "bmv2" else None
        )
        self.figures_file = params.get("figures_file")
        self.install_topology()

    def tearDown(self) -> None:
        self.sw.close()
        BaseTest.tearDown(self)

    def install_topology(self) -> None:
        for p in PORTS:
            self.sw.insert("routes", {"dst_addr": (f"10.0.{p}.0", 24)}, "route",
                           {"port": p, "next_hop_mac": host_mac(p)})
            self.sw.insert("port_macs", {"port": p}, "set_source_mac", {"mac": switch_mac(p)})
            self.sw.insert("arp_replies", {"target_ip": gateway_ip(p)}, "answer_arp", {"mac": switch_mac(p)})

    # ---- helpers -------------------------------------------------------------------------

    def record_figure(self, line: str) -> None:
        """A measured figure: logged, and appended to the run's figures file (run.sh prints
        it at the end) rather than to the console, where it would split PTF's result lines."""
        logging.info("figure: %s", line)
        if self.figures_file:
            with open(self.figures_file, "a") as f:
                f.write(f"{self.id()}: {line}\n")

    def send(self, port: int, pkt: Packet | bytes, count: int = 1) -> None:
        tu.send_packet(self, port, bytes(pkt), count)

    def send_at(self, port: int, schedule: list[tuple[float, bytes]]) -> float:
        """Sends each frame at its offset (seconds from now); returns the span, first to last
        send, as the sender measured it."""
        start = time.monotonic()
        first = last = start
        for i, (offset, frame) in enumerate(schedule):
            delay = start + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.send(port, frame)
            last = time.monotonic()
            if i == 0:
                first = last
        return last - first

    def expect(self, pkt: Packet | bytes | object, port: int, timeout: float = 2.0) -> None:
        tu.verify_packet(self, pkt, port, timeout=timeout)

    def expect_nothing(self, timeout: float = 0.5) -> None:
        tu.verify_no_other_packets(self, timeout=timeout)

    def collect(self, port: int, idle: float = 1.0, limit: float = 30.0,
                keep: Callable[[bytes], bool] | None = None) -> list[tuple[float, bytes]]:
        """Every packet that leaves `port` until it has been quiet for `idle` seconds."""
        got: list[tuple[float, bytes]] = []
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            res = tu.dp_poll(self, port_number=port, timeout=idle)
            if not isinstance(res, self.dataplane.PollSuccess):
                break
            if keep is None or keep(bytes(res.packet)):
                got.append((res.time, bytes(res.packet)))
        return got

    def settle(self, port: int = 1, dst_port: int = 2) -> None:
        """Send a marker through the same ingress port and wait for it: everything sent before
        it on that port has then been processed (ports are served in order)."""
        marker = ipv4_packet(port, host_ip(dst_port), proto_layer=UDP(sport=1, dport=1), payload_len=18)
        self.send(port, marker)
        self.expect(routed(marker, dst_port), dst_port, timeout=5.0)

    def register(self, name: str, index: int) -> int:
        """One register cell. p4lang's simple_switch_grpc answers P4Runtime register reads with
        UNIMPLEMENTED (PI does not implement them), so on BMv2 the cell is read through BMv2's
        own Thrift CLI, the way its operators read registers (docs/bmv2.md)."""
        if self.bmv2_cli is None:
            return self.sw.register(name, index)
        full_name = self.sw.schema.register(name).preamble.name
        return self.bmv2_cli.read_registers([full_name])[full_name][index]

    def set_register(self, name: str, index: int, value: int) -> None:
        """Write one register cell (on BMv2 through its CLI, as register() reads)."""
        if self.bmv2_cli is None:
            self.sw.set_register(name, index, value)
            return
        full_name = self.sw.schema.register(name).preamble.name
        self.bmv2_cli.run([f"register_write {full_name} {index} {value}"])

    def queue_cell(self, port: int, priority: int) -> int:
        return port * C["QUEUES_PER_PORT"] + priority

    def queue_packets(self, port: int, priority: int) -> int:
        return self.sw.counter("queue_traffic", self.queue_cell(port, priority))[0]

    def drops(self, reason: str) -> int:
        return self.sw.counter("drops", C[reason])[0]

    def admit(self, src_port: int, dst_port: int, protocol: int, flow_key: int, *, channel_id: int,
              priority: int, meter: MeterEnvelope, on_yellow: int | None = None,
              on_red: int | None = None, in_port: int | None = None):  # type: ignore[no-untyped-def]
        """A channel policed by its meter; `in_port` is where its packets enter (default: the
        host side, any port not in `trunk_ports`)."""
        return self.sw.insert(
            "channels",
            self.channel_match(src_port, dst_port, protocol, flow_key, in_port),
            "admit",
            {"channel_id": channel_id, "priority": priority,
             "on_yellow": C["EXCESS_DROP"] if on_yellow is None else on_yellow,
             "on_red": C["EXCESS_DROP"] if on_red is None else on_red},
            meter=meter,
        )

    def channel_match(self, src_port: int, dst_port: int, protocol: int, flow_key: int,
                      in_port: int | None = None) -> dict[str, object]:
        """A `channels` key: the selector and where the channel enters (default: the host side)."""
        return {**self.selector_match(src_port, dst_port, protocol, flow_key),
                "in_port": C["CHANNEL_IN_HOST"] if in_port is None else in_port}

    def selector_match(self, src_port: int, dst_port: int, protocol: int, flow_key: int) -> dict[str, object]:
        """A `channel_paths` key: the selector alone."""
        return {"src_addr": host_ip(src_port), "dst_addr": host_ip(dst_port), "protocol": protocol,
                "flow_key": flow_key}

    def admit_jumping_window(self, src_port: int, dst_port: int, flow_key: int, *, channel_id: int,
                             priority: int, window_us: int, limit: int, count_packets: bool = False,
                             smax: int = 1514, tolerance_us: int = 0, tag: int = 1,
                             on_excess: int | None = None):  # type: ignore[no-untyped-def]
        """A UDP channel policed by a jumping window of `limit` frame bytes (or packets) per
        `window_us`, none above `smax` frame bytes, a frame stamped within `tolerance_us` of a
        boundary counting in the window across it if that one has room (docs/dataplane.md
        "Window policers")."""
        return self.sw.insert(
            "channels", self.channel_match(src_port, dst_port, 17, flow_key), "admit_jumping_window",
            {"channel_id": channel_id, "priority": priority,
             "on_excess": C["EXCESS_DROP"] if on_excess is None else on_excess,
             "window_us": window_us, "limit": limit,
             "count_packets": C["WINDOW_COUNTS_PACKETS"] if count_packets else C["WINDOW_COUNTS_BYTES"],
             "smax": smax, "tolerance_us": tolerance_us, "tag": tag},
        )

    def admit_moving_window(self, src_port: int, dst_port: int, flow_key: int, *, channel_id: int,
                            priority: int, xmin_us: int, interval_us: int, slots: int, smax: int,
                            quantum: int = 1, tolerance_us: int = 0, tag: int = 1,
                            on_excess: int | None = None):  # type: ignore[no-untyped-def]
        """A UDP channel policed by the (Xmin, Xave, I, Smax) moving window: at most
        slots * quantum packets per `interval_us` (+ quantum - 1), none closer than `xmin_us`,
        none above `smax` frame bytes, each judged as if it came up to `tolerance_us` earlier
        (GCRA's tolerance). `tag` names the installation: cells another tag wrote are no
        history."""
        return self.sw.insert(
            "channels", self.channel_match(src_port, dst_port, 17, flow_key), "admit_moving_window",
            {"channel_id": channel_id, "priority": priority,
             "on_excess": C["EXCESS_DROP"] if on_excess is None else on_excess,
             "xmin_us": xmin_us, "interval_us": interval_us, "last_slot": slots - 1,
             "quantum": quantum, "smax": smax, "tolerance_us": tolerance_us, "tag": tag},
        )


def udp_flow_key(sport: int, dport: int) -> int:
    """docs/protocol.md: UDP/TCP channels are selected by src_port << 16 | dst_port."""
    return sport << 16 | dport


def generous_envelope() -> MeterEnvelope:
    """An envelope no test stream comes near: every packet is green."""
    return MeterEnvelope(cir=100_000_000, cburst=10_000_000, pir=100_000_000, pburst=10_000_000)


__all__ = [
    "C", "CPU_PORT", "ICMP", "IP", "PORTS", "TCP", "UDP", "XTP", "Dot1Q", "Ether", "MeterEnvelope",
    "Reservation", "TerrapinTest", "generous_envelope", "host_ip", "host_mac", "ipv4_packet", "routed",
    "sized_udp", "switch_mac", "udp_flow_key", "gateway_ip"
]
