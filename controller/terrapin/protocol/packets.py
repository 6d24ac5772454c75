"""IPv4 framing of reservation messages for PacketIn/PacketOut and raw sockets.

The data plane hands the controller whole Ethernet frames (PacketIn) and routes the frames the
controller injects (PacketOut through the pipeline), so the controller parses and builds
Ethernet + IPv4 itself. Parsing validates every length and checksum and raises
`MalformedMessage` naming the field; it never trusts the frame.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from terrapin.constants import IP_PROTO_ICMP
from terrapin.protocol.messages import MalformedMessage, internet_checksum

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_VLAN = 0x8100
_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
DEFAULT_TTL = 64
# DSCP CS7 (network control): the class protocol messages belong to; the data plane ignores
# DSCP for queueing, so this is only for hosts and captures.
PROTOCOL_TOS = 0xE0


@dataclass(frozen=True)
class IcmpDatagram:
    src: str
    dst: str
    ttl: int
    icmp: bytes


def parse_ipv4(packet: bytes) -> IcmpDatagram:
    """An IPv4 datagram carrying ICMP (starting at the IPv4 header)."""
    if len(packet) < _IPV4.size:
        raise MalformedMessage("ipv4", f"{len(packet)} bytes, shorter than an IPv4 header")
    ver_ihl, _tos, total, _ident, frag, ttl, proto, _csum, src, dst = _IPV4.unpack_from(packet)
    if ver_ihl >> 4 != 4:
        raise MalformedMessage("ipv4.version", f"{ver_ihl >> 4}")
    ihl = (ver_ihl & 0xF) * 4
    if ihl < 20 or total < ihl or total > len(packet):
        raise MalformedMessage("ipv4.length", f"ihl {ihl}, total {total}, have {len(packet)}")
    if internet_checksum(packet[:ihl]) != 0:
        raise MalformedMessage("ipv4.checksum", "header checksum does not verify")
    if frag & 0x3FFF:
        raise MalformedMessage("ipv4.fragment", "reservation messages are never fragmented")
    if proto != IP_PROTO_ICMP:
        raise MalformedMessage("ipv4.protocol", f"{proto}, expected ICMP")
    return IcmpDatagram(
        src=str(ipaddress.IPv4Address(src)),
        dst=str(ipaddress.IPv4Address(dst)),
        ttl=ttl,
        icmp=bytes(packet[ihl:total]),
    )


def parse_frame(frame: bytes) -> IcmpDatagram:
    """An Ethernet II frame (optionally one 802.1Q tag) carrying IPv4/ICMP."""
    if len(frame) < _ETH.size:
        raise MalformedMessage("ethernet", f"{len(frame)} bytes, shorter than a header")
    _dst, _src, ethertype = _ETH.unpack_from(frame)
    offset = _ETH.size
    if ethertype == ETHERTYPE_VLAN:
        if len(frame) < offset + 4:
            raise MalformedMessage("ethernet.vlan", "truncated 802.1Q tag")
        (ethertype,) = struct.unpack_from("!H", frame, offset + 2)
        offset += 4
    if ethertype != ETHERTYPE_IPV4:
        raise MalformedMessage("ethernet.type", f"{ethertype:#06x}, expected IPv4")
    return parse_ipv4(frame[offset:])


def build_ipv4(src: str, dst: str, payload: bytes, ttl: int = DEFAULT_TTL) -> bytes:
    total = _IPV4.size + len(payload)
    header = _IPV4.pack(
        0x45,
        PROTOCOL_TOS,
        total,
        0,
        0x4000,  # don't fragment
        ttl,
        IP_PROTO_ICMP,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    checksum = internet_checksum(header)
    return header[:10] + struct.pack("!H", checksum) + header[12:] + payload


def build_frame(
    src: str,
    dst: str,
    payload: bytes,
    *,
    dst_mac: bytes = b"\x00" * 6,
    src_mac: bytes = b"\x00" * 6,
    ttl: int = DEFAULT_TTL,
) -> bytes:
    """A frame for PacketOut. Through the pipeline the switch's `routes` rewrites both MACs."""
    return _ETH.pack(dst_mac, src_mac, ETHERTYPE_IPV4) + build_ipv4(src, dst, payload, ttl)
