"""Reservation messages (ICMP type 253) ⇄ dataclasses, per docs/protocol.md.

Decoding never raises anything but `MalformedMessage`, which names the offending field, so a
bad packet from the network becomes a log line and a counter, never a crash.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field, replace

from terrapin.admission.model import JUMPING_WINDOW, METER, MOVING_WINDOW, Policer
from terrapin.constants import (
    ICMP_TYPE_RESERVATION,
    MESSAGE_LENGTH,
    POLICER_TRAILER_LENGTH,
    PROTOCOL_VERSION,
    MessageCode,
)

# offset: type code checksum version flags hops context initiator destination protocol
#         priority reason reserved flow_key rate burst avg_idle_us max_packet delay_us shortfall
_LAYOUT = struct.Struct("!BBHBBHI4s4sBBBBQIIIIII")
assert _LAYOUT.size == MESSAGE_LENGTH
# The policer trailer (flag bit 2): policer, options, reserved, then three parameters:
# jumping window: window_us, 0, 0; moving window: xmin_us, xave_us, interval_us.
_TRAILER = struct.Struct("!BBHIII")
assert _TRAILER.size == POLICER_TRAILER_LENGTH

FLAG_RETRANSMISSION = 0x01
FLAG_TRUNCATED = 0x02  # REPORT_STATUS: more records than fit in one message
# A window policer's trailer follows the 56 bytes. Messages without it mean the meter, so
# every message of the first layout still decodes, and means what it meant.
FLAG_POLICER = 0x04
# REQUEST_ADMIT: if a trunk or switch on the channel's path goes down and no other path admits
# it, close it (NOTIFY_CLOSE, PATH_DOWN) rather than keep it down until one does.
FLAG_CLOSE_WHEN_DOWN = 0x08
# REQUEST_ADMIT: 1+1 protection, admitted on two paths that share no trunk or refused with
# NO_DISJOINT_PATHS; with FLAG_PROTECTION_OPTIONAL admitted on one path instead.
FLAG_PROTECTION = 0x10
FLAG_PROTECTION_OPTIONAL = 0x20
# The flags only a REQUEST_ADMIT carries (an answer to it drops them).
_ADMIT_FLAGS = FLAG_CLOSE_WHEN_DOWN | FLAG_PROTECTION | FLAG_PROTECTION_OPTIONAL
_KNOWN_FLAGS = FLAG_RETRANSMISSION | FLAG_TRUNCATED | FLAG_POLICER | _ADMIT_FLAGS

POLICER_CODES = {JUMPING_WINDOW: 1, MOVING_WINDOW: 2}
OPTION_COUNT_PACKETS = 0x01  # jumping window: B counts whole max_packet packets
# Status messages describe a router, not a channel: they carry no policer.
_NO_POLICER = (MessageCode.REQUEST_STATUS, MessageCode.REPORT_STATUS)

U8, U16, U32, U64 = 0xFF, 0xFFFF, 0xFFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF


class MalformedMessage(ValueError):
    """A message that does not follow docs/protocol.md; `field` names what is wrong."""

    def __init__(self, field_name: str, why: str) -> None:
        super().__init__(f"{field_name}: {why}")
        self.field = field_name
        self.why = why


def internet_checksum(data: bytes) -> int:
    """RFC 1071 one's-complement sum, as ICMP (RFC 792) and IPv4 use it."""
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass(frozen=True)
class ReservationMessage:
    code: MessageCode
    context: int
    initiator: str
    destination: str
    protocol: int = 0
    priority: int = 0
    flow_key: int = 0
    rate: int = 0
    burst: int = 0
    avg_idle_us: int = 0
    max_packet: int = 0
    delay_us: int = 0
    shortfall: int = 0
    reason: int = 0
    flags: int = 0  # FLAG_POLICER is not kept here: `policer` says whether the trailer is there
    hops: int = 0
    payload: bytes = field(default=b"", repr=False)
    policer: Policer = field(default_factory=Policer)

    @property
    def channel(self) -> tuple[str, int]:
        return self.initiator, self.context

    @property
    def is_retransmission(self) -> bool:
        return bool(self.flags & FLAG_RETRANSMISSION)

    def with_code(self, code: MessageCode, **changes: object) -> ReservationMessage:
        """The same channel's message of another code (an answer to this one): flag bits 3-5 stay
        with a REQUEST_ADMIT."""
        if code != MessageCode.REQUEST_ADMIT and "flags" not in changes:
            changes["flags"] = self.flags & ~_ADMIT_FLAGS
        return replace(self, code=code, **changes)  # type: ignore[arg-type]

    def encode(self) -> bytes:
        """The ICMP message (type, code, checksum, body, payload) with its checksum filled in."""
        _check_ranges(self)
        trailer = _encode_policer(self.policer)
        body = _LAYOUT.pack(
            ICMP_TYPE_RESERVATION,
            int(self.code),
            0,
            PROTOCOL_VERSION,
            self.flags | (FLAG_POLICER if trailer else 0),
            self.hops,
            self.context,
            ipaddress.IPv4Address(self.initiator).packed,
            ipaddress.IPv4Address(self.destination).packed,
            self.protocol,
            self.priority,
            self.reason,
            0,
            self.flow_key,
            self.rate,
            self.burst,
            self.avg_idle_us,
            self.max_packet,
            self.delay_us,
            self.shortfall,
        )
        message = body + trailer + self.payload
        checksum = internet_checksum(message)
        return message[:2] + struct.pack("!H", checksum) + message[4:]


def _encode_policer(policer: Policer) -> bytes:
    if policer.kind == METER:
        return b""
    if policer.kind == JUMPING_WINDOW:
        options = OPTION_COUNT_PACKETS if policer.count_packets else 0
        return _TRAILER.pack(POLICER_CODES[JUMPING_WINDOW], options, 0, policer.window_us, 0, 0)
    return _TRAILER.pack(
        POLICER_CODES[MOVING_WINDOW], 0, 0, policer.xmin_us, policer.xave_us, policer.interval_us
    )


def _decode_policer(data: bytes) -> Policer:
    kind, options, reserved, first, second, third = _TRAILER.unpack_from(data, MESSAGE_LENGTH)
    if reserved != 0:
        raise MalformedMessage("policer", f"reserved bytes are {reserved}, must be 0")
    if kind == POLICER_CODES[JUMPING_WINDOW]:
        if options & ~OPTION_COUNT_PACKETS:
            raise MalformedMessage("policer", f"unknown jumping window options {options:#x}")
        if second or third:
            raise MalformedMessage("policer", "a jumping window has one parameter; the others must be 0")
        return Policer(JUMPING_WINDOW, window_us=first, count_packets=bool(options & OPTION_COUNT_PACKETS))
    if kind == POLICER_CODES[MOVING_WINDOW]:
        if options:
            raise MalformedMessage("policer", f"a moving window has no options ({options:#x})")
        return Policer(MOVING_WINDOW, xmin_us=first, xave_us=second, interval_us=third)
    raise MalformedMessage("policer", f"{kind} is not a policer (1 jumping window, 2 moving window)")


def _check_ranges(msg: ReservationMessage) -> None:
    if msg.flags & FLAG_POLICER:
        raise MalformedMessage("flags", "bit 2 follows the policer; set `policer` instead")
    policer = msg.policer
    if policer.kind not in (METER, *POLICER_CODES):
        raise MalformedMessage("policer", f"{policer.kind!r} is not a policer")
    if policer.kind != METER and msg.code in _NO_POLICER:
        raise MalformedMessage("policer", f"a {msg.code.name} carries no policer")
    for name in ("window_us", "xmin_us", "xave_us", "interval_us"):
        value = getattr(policer, name)
        if not 0 <= value <= U32:
            raise MalformedMessage(name, f"{value} does not fit ({U32} at most)")
    limits = {
        "flags": U8,
        "hops": U16,
        "context": U32,
        "protocol": U8,
        "priority": U8,
        "reason": U8,
        "flow_key": U64,
        "rate": U32,
        "burst": U32,
        "avg_idle_us": U32,
        "max_packet": U32,
        "delay_us": U32,
        "shortfall": U32,
    }
    for name, limit in limits.items():
        value = getattr(msg, name)
        if not 0 <= value <= limit:
            raise MalformedMessage(name, f"{value} does not fit ({limit} at most)")
    for name in ("initiator", "destination"):
        try:
            ipaddress.IPv4Address(getattr(msg, name))
        except ValueError as exc:
            raise MalformedMessage(name, str(exc)) from None


def decode(data: bytes) -> ReservationMessage:
    """Parse one ICMP message (starting at the ICMP type byte)."""
    if len(data) < MESSAGE_LENGTH:
        raise MalformedMessage("length", f"{len(data)} bytes, the message has {MESSAGE_LENGTH}")
    (
        icmp_type,
        code,
        _checksum,
        version,
        flags,
        hops,
        context,
        initiator,
        destination,
        protocol,
        priority,
        reason,
        reserved,
        flow_key,
        rate,
        burst,
        avg_idle_us,
        max_packet,
        delay_us,
        shortfall,
    ) = _LAYOUT.unpack_from(data)
    if icmp_type != ICMP_TYPE_RESERVATION:
        raise MalformedMessage("type", f"{icmp_type}, expected {ICMP_TYPE_RESERVATION}")
    try:
        message_code = MessageCode(code)
    except ValueError:
        raise MalformedMessage("code", f"{code} is not 1..7") from None
    if internet_checksum(bytes(data)) != 0:
        raise MalformedMessage("checksum", "ICMP checksum does not verify")
    if version != PROTOCOL_VERSION:
        raise MalformedMessage("version", f"{version}, only {PROTOCOL_VERSION} is known")
    if flags & ~_KNOWN_FLAGS:
        raise MalformedMessage("flags", f"unknown flag bits {flags & ~_KNOWN_FLAGS:#x}")
    if reserved != 0:
        raise MalformedMessage("reserved", f"{reserved}, must be 0")
    if flags & _ADMIT_FLAGS and message_code != MessageCode.REQUEST_ADMIT:
        bit = (flags & _ADMIT_FLAGS).bit_length() - 1
        raise MalformedMessage("flags", f"bit {bit} is a REQUEST_ADMIT's, not a {message_code.name}'s")
    if flags & FLAG_PROTECTION_OPTIONAL and not flags & FLAG_PROTECTION:
        raise MalformedMessage("flags", "bit 5 (protection optional) without bit 4 (protection)")
    policer = Policer()
    body_end = MESSAGE_LENGTH
    if flags & FLAG_POLICER:
        if message_code in _NO_POLICER:
            raise MalformedMessage("flags", f"a {message_code.name} carries no policer")
        whole = MESSAGE_LENGTH + POLICER_TRAILER_LENGTH
        if len(data) < whole:
            raise MalformedMessage("length", f"{len(data)} bytes; with a policer the message has {whole}")
        policer = _decode_policer(bytes(data))
        body_end += POLICER_TRAILER_LENGTH
    payload = bytes(data[body_end:])
    if payload and message_code != MessageCode.REPORT_STATUS:
        raise MalformedMessage("length", f"{len(payload)} bytes after a {message_code.name}")
    return ReservationMessage(
        code=message_code,
        context=context,
        initiator=str(ipaddress.IPv4Address(initiator)),
        destination=str(ipaddress.IPv4Address(destination)),
        protocol=protocol,
        priority=priority,
        flow_key=flow_key,
        rate=rate,
        burst=burst,
        avg_idle_us=avg_idle_us,
        max_packet=max_packet,
        delay_us=delay_us,
        shortfall=shortfall,
        reason=reason,
        flags=flags & ~FLAG_POLICER,
        hops=hops,
        payload=payload,
        policer=policer,
    )


def flow_key_from_ports(src_port: int, dst_port: int) -> int:
    """UDP/TCP channels: src_port << 16 | dst_port (docs/protocol.md, docs/dataplane.md)."""
    return (src_port & U16) << 16 | (dst_port & U16)


def ports_from_flow_key(flow_key: int) -> tuple[int, int]:
    return (flow_key >> 16) & U16, flow_key & U16
