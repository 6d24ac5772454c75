"""`terrapin-host`: the end system's side of the reservation protocol (seed 000 §4.1.2).

    terrapin-host request --dst 10.0.2.2 --protocol udp --sport 5000 --dport 6000 \\
                          --priority 6 --rate 1125000 --burst 27000 [--max-packet 1500]
    terrapin-host request ... --watch 60     # then print the routers' notices for 60 s
    terrapin-host request ... --policer jumping_window --window-us 18000 --burst 22500
    terrapin-host request ... --policer moving_window --xmin-us 900 --xave-us 3600 \\
                          --interval-us 18000 --max-packet 4500
    terrapin-host serve [--max-rate N] [--deny-priority P ...] [--count N]
    terrapin-host close --dst 10.0.2.2 --context N
    terrapin-host status [--router 10.0.1.1] [--context N]

Runs on Mininet hosts (or in any namespace) with a raw ICMP socket (root). `request` and
`close` retransmit (flag bit 0) until they hear the answer, as the protocol expects lost
messages; `serve` remembers its decisions so a retransmitted request gets the same answer.
Each command prints one JSON object and exits 0 on success (accepted, closed, reported),
1 on a denial, 2 on a timeout or an error. With `--watch S`, `request` then prints one more
object per notice a router sends about the channel within S seconds (NOTIFY_CLOSE with
PATH_DOWN when no path carries it, REQUEST_ACCEPT when one does again: docs/protocol.md),
answering each NOTIFY_CLOSE with RECVD_CLOSE; it stops early when the channel is closed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import select
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from terrapin.admission.model import METER, POLICER_KINDS, ChannelEnvelope, Policer
from terrapin.admission.policers import arrival_envelope
from terrapin.constants import (
    ICMP_TYPE_RESERVATION,
    IP_PROTO_ICMP,
    IP_PROTO_TCP,
    IP_PROTO_UDP,
    IP_PROTO_XTP,
    DenialReason,
    MessageCode,
)
from terrapin.protocol.messages import (
    FLAG_CLOSE_WHEN_DOWN,
    FLAG_PROTECTION,
    FLAG_PROTECTION_OPTIONAL,
    FLAG_RETRANSMISSION,
    MalformedMessage,
    ReservationMessage,
    decode,
    flow_key_from_ports,
)
from terrapin.protocol.packets import parse_ipv4
from terrapin.protocol.status import ChannelRecord, decode_status

PROTOCOLS = {"udp": IP_PROTO_UDP, "tcp": IP_PROTO_TCP, "xtp": IP_PROTO_XTP}


class Endpoint:
    """A raw ICMP socket: the kernel writes the IPv4 header on send; we parse it on receive."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, IP_PROTO_ICMP)
        # CS7 like the controller's own messages; the switch queues them at level 7 anyway.
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0xE0)

    def send(self, dst: str, msg: ReservationMessage) -> None:
        self.sock.sendto(msg.encode(), (dst, 0))

    def receive(self, timeout: float) -> tuple[str, ReservationMessage] | None:
        """The next reservation message within `timeout` seconds; other ICMP is skipped."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            packet = self.sock.recv(65535)
            try:
                datagram = parse_ipv4(packet)
                if not datagram.icmp or datagram.icmp[0] != ICMP_TYPE_RESERVATION:
                    continue
                return datagram.src, decode(datagram.icmp)
            except MalformedMessage as exc:
                print(json.dumps({"ignored": str(exc)}), file=sys.stderr)

    def close(self) -> None:
        self.sock.close()


def local_address(towards: str) -> str:
    """The address the kernel would use as the source towards `towards`."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((towards, 9))
        return str(probe.getsockname()[0])
    finally:
        probe.close()


def default_gateway() -> str | None:
    try:
        with open("/proc/net/route") as routes:
            for line in routes.readlines()[1:]:
                fields = line.split()
                if fields[1] == "00000000" and int(fields[3], 16) & 2:
                    return str(ipaddress.IPv4Address(struct.pack("<I", int(fields[2], 16))))
    except OSError:
        return None
    return None


def exchange(
    endpoint: Endpoint,
    dst: str,
    msg: ReservationMessage,
    answers: set[MessageCode],
    match: Callable[[ReservationMessage], bool],
    timeout: float,
    retries: int,
) -> ReservationMessage | None:
    """Send, and retransmit every `timeout` seconds, until a matching answer arrives."""
    for attempt in range(retries + 1):
        flags = msg.flags | (FLAG_RETRANSMISSION if attempt else 0)
        endpoint.send(dst, msg.with_code(msg.code, flags=flags))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            got = endpoint.receive(left)
            if got is None:
                break
            _src, reply = got
            if reply.code in answers and match(reply):
                return reply
    return None


def ask(
    endpoint: Endpoint,
    dst: str,
    msg: ReservationMessage,
    answers: set[MessageCode],
    match: Callable[[ReservationMessage], bool],
    args: argparse.Namespace,
) -> ReservationMessage | None:
    """exchange() with the command's --timeout and --retries; the endpoint is closed after."""
    try:
        return exchange(endpoint, dst, msg, answers, match, args.timeout, args.retries)
    finally:
        endpoint.close()


def _reason(code: int) -> str:
    try:
        return DenialReason(code).name
    except ValueError:
        return str(code)


def message_json(msg: ReservationMessage) -> dict[str, Any]:
    body = asdict(msg)
    body.pop("payload")
    body["code"] = msg.code.name
    if msg.code == MessageCode.REQUEST_DENIED or (msg.code == MessageCode.NOTIFY_CLOSE and msg.reason):
        body["reason_name"] = _reason(msg.reason)
    return body


# ---- commands ------------------------------------------------------------------------------


def cmd_request(args: argparse.Namespace) -> int:
    protocol = PROTOCOLS[args.protocol]
    flow_key = args.xtp_key if protocol == IP_PROTO_XTP else flow_key_from_ports(args.sport, args.dport)
    initiator = args.source or local_address(args.dst)
    context = args.context if args.context is not None else (os.getpid() << 8 | int(time.time()) & 0xFF)
    policer = Policer(
        args.policer,
        window_us=args.window_us,
        count_packets=args.window_counts == "packets",
        xmin_us=args.xmin_us,
        xave_us=args.xave_us,
        interval_us=args.interval_us,
    )
    msg = ReservationMessage(
        code=MessageCode.REQUEST_ADMIT,
        context=context & 0x7FFF_FFFF,
        initiator=initiator,
        destination=args.dst,
        protocol=protocol,
        priority=args.priority,
        flow_key=flow_key,
        rate=args.rate,
        burst=args.burst,
        avg_idle_us=args.avg_idle_us,
        max_packet=args.max_packet,
        delay_us=args.delay_us,
        policer=policer,
        flags=(FLAG_CLOSE_WHEN_DOWN if args.close_when_down else 0)
        | (FLAG_PROTECTION if args.protect else 0)
        | (FLAG_PROTECTION_OPTIONAL if args.protect == "optional" else 0),
    )
    endpoint = Endpoint()
    try:
        started = time.perf_counter()  # the set-up latency the initiator sees (docs/protocol.md)
        answers = {MessageCode.REQUEST_ACCEPT, MessageCode.REQUEST_DENIED}
        mine = lambda r: r.channel == msg.channel  # noqa: E731
        reply = exchange(endpoint, args.dst, msg, answers, mine, args.timeout, args.retries)
        if reply is None:
            print(json.dumps({"outcome": "TIMEOUT", "context": msg.context}))
            return 2
        outcome = "ACCEPTED" if reply.code == MessageCode.REQUEST_ACCEPT else "DENIED"
        elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        print(json.dumps({"outcome": outcome, "elapsed_ms": elapsed_ms, **message_json(reply)}), flush=True)
        if outcome == "ACCEPTED" and args.watch > 0:
            watch(endpoint, msg, args.watch)
        return 0 if outcome == "ACCEPTED" else 1
    finally:
        endpoint.close()


def watch(endpoint: Endpoint, request: ReservationMessage, seconds: float) -> None:
    """Print every router's notice about the channel for `seconds` (see the module's doc)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        got = endpoint.receive(left)
        if got is None:
            return
        src, notice = got
        if notice.channel != request.channel or notice.code not in (
            MessageCode.NOTIFY_CLOSE,
            MessageCode.REQUEST_ACCEPT,
        ):
            continue
        told = {"notice": notice.code.name, "from": src, "at": time.time(), **message_json(notice)}
        print(json.dumps(told), flush=True)
        if notice.code == MessageCode.NOTIFY_CLOSE:
            endpoint.send(src, notice.with_code(MessageCode.RECVD_CLOSE, flags=0, hops=0))
            if notice.reason != DenialReason.PATH_DOWN:
                return  # closed for good


def cmd_close(args: argparse.Namespace) -> int:
    initiator = args.initiator or local_address(args.dst)
    msg = ReservationMessage(MessageCode.NOTIFY_CLOSE, args.context, initiator, args.dst)
    answers = {MessageCode.RECVD_CLOSE}
    reply = ask(Endpoint(), args.dst, msg, answers, lambda r: r.channel == msg.channel, args)
    if reply is None:
        print(json.dumps({"outcome": "TIMEOUT", "context": args.context}))
        return 2
    print(json.dumps({"outcome": "CLOSED", **message_json(reply)}))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    router = args.router or default_gateway()
    if router is None:
        print(json.dumps({"outcome": "ERROR", "error": "no --router and no default gateway"}))
        return 2
    me = local_address(router)
    msg = ReservationMessage(MessageCode.REQUEST_STATUS, args.context, me, args.target or "0.0.0.0")
    answers = {MessageCode.REPORT_STATUS}

    def mine(r: ReservationMessage) -> bool:
        return r.initiator == me and r.context == args.context

    reply = ask(Endpoint(), router, msg, answers, mine, args)
    if reply is None:
        print(json.dumps({"outcome": "TIMEOUT"}))
        return 2
    try:
        report = decode_status(reply.payload)
    except MalformedMessage as exc:
        print(json.dumps({"outcome": "ERROR", "error": str(exc)}))
        return 2
    records = [
        {"kind": "channel" if isinstance(r, ChannelRecord) else "queue", **asdict(r)} for r in report.records
    ]
    print(
        json.dumps(
            {
                "outcome": "REPORTED",
                "device_id": report.device_id,
                "truncated": bool(reply.flags & 0x02),
                "records": records,
            }
        )
    )
    return 0


def serve_decision(args: argparse.Namespace, msg: ReservationMessage) -> int:
    """The destination's accept policy: 0 to accept, else a DenialReason."""
    if args.deny_all or msg.priority in (args.deny_priority or []):
        return int(DenialReason.DESTINATION_DENIED)
    if args.max_rate and requested_rate(msg) > args.max_rate:
        return int(DenialReason.DESTINATION_DENIED)
    return 0


def requested_rate(msg: ReservationMessage) -> int:
    """ρ, or a window policer's long-run rate (it sends no rate of its own)."""
    if msg.policer.kind == METER:
        return msg.rate
    envelope = ChannelEnvelope(msg.priority, msg.rate, msg.burst, max(msg.max_packet, 1), policer=msg.policer)
    return arrival_envelope(envelope)[0]


def cmd_serve(args: argparse.Namespace) -> int:
    endpoint = Endpoint()
    decided: dict[tuple[str, int], ReservationMessage] = {}
    handled = 0
    me = args.address
    try:
        while args.count == 0 or handled < args.count:
            got = endpoint.receive(args.idle_timeout if args.idle_timeout else 3600.0)
            if got is None:
                if args.idle_timeout:
                    break
                continue
            src, msg = got
            if me and msg.destination != me:
                continue
            if msg.code == MessageCode.REQUEST_ADMIT:
                if msg.channel not in decided:
                    reason = serve_decision(args, msg)
                    code = MessageCode.REQUEST_DENIED if reason else MessageCode.REQUEST_ACCEPT
                    decided[msg.channel] = msg.with_code(code, reason=reason, flags=0, hops=0)
                    handled += 1
                reply = decided[msg.channel]
                endpoint.send(msg.initiator, reply)
                print(json.dumps({"answered": message_json(reply)}), flush=True)
            elif msg.code == MessageCode.NOTIFY_CLOSE:
                decided.pop(msg.channel, None)
                ack = msg.with_code(MessageCode.RECVD_CLOSE, flags=0, hops=0)
                endpoint.send(src, ack)
                print(json.dumps({"closed": message_json(ack)}), flush=True)
                handled += 1
    except KeyboardInterrupt:
        pass
    finally:
        endpoint.close()
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="terrapin-host", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def timing(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--timeout", type=float, default=1.0, help="seconds per attempt")
        sp.add_argument("--retries", type=int, default=4, help="retransmissions")

    r = sub.add_parser("request", help="ask for a channel and print the outcome")
    r.add_argument("--dst", required=True)
    r.add_argument("--protocol", choices=sorted(PROTOCOLS), default="udp")
    r.add_argument("--sport", type=int, default=0)
    r.add_argument("--dport", type=int, default=0)
    r.add_argument("--xtp-key", type=int, default=0)
    r.add_argument("--priority", type=int, required=True)
    r.add_argument("--rate", type=int, default=0, help="ρ, bytes/s (meter only)")
    r.add_argument("--burst", type=int, default=0, help="σ, bytes (a jumping window's B)")
    r.add_argument("--policer", choices=POLICER_KINDS, default=METER)
    r.add_argument("--window-us", type=int, default=0, help="jumping window: T")
    r.add_argument("--window-counts", choices=("bytes", "packets"), default="bytes")
    r.add_argument("--xmin-us", type=int, default=0, help="moving window: Xmin")
    r.add_argument("--xave-us", type=int, default=0, help="moving window: Xave")
    r.add_argument("--interval-us", type=int, default=0, help="moving window: I (Smax is --max-packet)")
    r.add_argument("--max-packet", type=int, default=1500)
    r.add_argument("--delay-us", type=int, default=0, help="end-to-end bound (0 = none)")
    r.add_argument("--avg-idle-us", type=int, default=0)
    r.add_argument("--context", type=int)
    r.add_argument("--source", help="initiator address (default: the route's source)")
    r.add_argument("--watch", type=float, default=0.0, help="then print the routers' notices for N s")
    r.add_argument(
        "--close-when-down",
        action="store_true",
        help="if no path carries it after a trunk or switch goes down, close it (default: wait for one)",
    )
    r.add_argument(
        "--protect",
        nargs="?",
        const="1+1",
        choices=["1+1", "optional"],
        help="1+1 protection: two paths sharing no trunk, or refused (NO_DISJOINT_PATHS); "
        "`--protect optional`: one path when there is no such pair",
    )
    timing(r)
    r.set_defaults(func=cmd_request)

    s = sub.add_parser("serve", help="answer requests addressed to this host")
    s.add_argument("--address", help="answer only requests for this destination")
    s.add_argument("--max-rate", type=int, default=0, help="deny requests above this rate")
    s.add_argument("--deny-priority", type=int, action="append")
    s.add_argument("--deny-all", action="store_true")
    s.add_argument("--count", type=int, default=0, help="exit after N decisions (0 = never)")
    s.add_argument("--idle-timeout", type=float, default=0.0, help="exit after N idle seconds")
    s.set_defaults(func=cmd_serve)

    c = sub.add_parser("close", help="tear a channel down (NOTIFY_CLOSE)")
    c.add_argument("--dst", required=True)
    c.add_argument("--context", type=int, required=True)
    c.add_argument("--initiator", help="default: this host's address towards --dst")
    timing(c)
    c.set_defaults(func=cmd_close)

    st = sub.add_parser("status", help="ask the router for its report (REQUEST_STATUS)")
    st.add_argument("--router", help="default: the default gateway")
    st.add_argument("--target", help="a router address to ask (default: the first router)")
    st.add_argument("--context", type=int, default=0, help="report only this channel of mine")
    timing(st)
    st.set_defaults(func=cmd_status)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except (OSError, MalformedMessage, ValueError) as exc:
        print(json.dumps({"outcome": "ERROR", "error": str(exc)}))
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
