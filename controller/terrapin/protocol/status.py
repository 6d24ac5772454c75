"""REPORT_STATUS payload: the router's state after the 56-byte message (docs/protocol.md).

Seed 000 §4.1.2: "It contains state information about the router and current connections." A
header, then fixed 36-byte records: one QUEUE record per (port, admitted priority) in use, then
one CHANNEL record per channel through that router.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from terrapin.protocol.messages import MalformedMessage

_HEADER = struct.Struct("!IHBB")  # device_id, record count, kind-agnostic flags, reserved
_QUEUE = struct.Struct("!BBHIIIIIIII")
_CHANNEL = struct.Struct("!BBHI4s4sIIIII")
RECORD_SIZE = 36
assert _QUEUE.size == RECORD_SIZE and _CHANNEL.size == RECORD_SIZE
KIND_QUEUE = 1
KIND_CHANNEL = 2
# An Ethernet MTU of 1500 minus IPv4 (20), the message (56) and the header (8) leaves 39 records.
MAX_RECORDS = (1500 - 20 - 56 - _HEADER.size) // RECORD_SIZE


@dataclass(frozen=True)
class QueueRecord:
    port: int
    priority: int
    channels: int
    allocated_rate: int  # bytes/s
    reservable_rate: int  # bytes/s
    allocated_burst: int  # bytes
    queue_capacity: int  # bytes
    max_depth_packets: int  # telemetry register max_queue_depth
    max_delay_us: int  # telemetry register max_queue_delay
    worst_case_delay_us: int  # the admission bound for the level


@dataclass(frozen=True)
class ChannelRecord:
    port: int
    priority: int
    context: int
    initiator: str
    destination: str
    rate: int
    burst: int
    protected_delay_us: int  # 0 = none promised
    worst_case_delay_us: int
    max_packet: int


StatusRecord = QueueRecord | ChannelRecord


@dataclass(frozen=True)
class StatusReport:
    device_id: int
    records: tuple[StatusRecord, ...]


def _u32(value: int) -> int:
    return max(0, min(value, 0xFFFF_FFFF))


def encode_status(report: StatusReport) -> tuple[bytes, bool]:
    """The payload, and whether records had to be left out (the message's truncated flag)."""
    records = report.records[:MAX_RECORDS]
    out = [_HEADER.pack(report.device_id, len(records), 0, 0)]
    for rec in records:
        if isinstance(rec, QueueRecord):
            out.append(
                _QUEUE.pack(
                    KIND_QUEUE,
                    rec.priority,
                    rec.port,
                    _u32(rec.channels),
                    _u32(rec.allocated_rate),
                    _u32(rec.reservable_rate),
                    _u32(rec.allocated_burst),
                    _u32(rec.queue_capacity),
                    _u32(rec.max_depth_packets),
                    _u32(rec.max_delay_us),
                    _u32(rec.worst_case_delay_us),
                )
            )
        else:
            out.append(
                _CHANNEL.pack(
                    KIND_CHANNEL,
                    rec.priority,
                    rec.port,
                    rec.context,
                    ipaddress.IPv4Address(rec.initiator).packed,
                    ipaddress.IPv4Address(rec.destination).packed,
                    _u32(rec.rate),
                    _u32(rec.burst),
                    _u32(rec.protected_delay_us),
                    _u32(rec.worst_case_delay_us),
                    _u32(rec.max_packet),
                )
            )
    return b"".join(out), len(report.records) > len(records)


def decode_status(payload: bytes) -> StatusReport:
    if len(payload) < _HEADER.size:
        raise MalformedMessage("payload", f"{len(payload)} bytes, status header needs 8")
    device_id, count, _flags, _reserved = _HEADER.unpack_from(payload)
    expected = _HEADER.size + count * RECORD_SIZE
    if len(payload) != expected:
        raise MalformedMessage("payload", f"{len(payload)} bytes for {count} records")
    records: list[StatusRecord] = []
    for index in range(count):
        offset = _HEADER.size + index * RECORD_SIZE
        kind = payload[offset]
        if kind == KIND_QUEUE:
            fields = _QUEUE.unpack_from(payload, offset)
            records.append(
                QueueRecord(
                    port=fields[2],
                    priority=fields[1],
                    channels=fields[3],
                    allocated_rate=fields[4],
                    reservable_rate=fields[5],
                    allocated_burst=fields[6],
                    queue_capacity=fields[7],
                    max_depth_packets=fields[8],
                    max_delay_us=fields[9],
                    worst_case_delay_us=fields[10],
                )
            )
        elif kind == KIND_CHANNEL:
            f = _CHANNEL.unpack_from(payload, offset)
            records.append(
                ChannelRecord(
                    port=f[2],
                    priority=f[1],
                    context=f[3],
                    initiator=str(ipaddress.IPv4Address(f[4])),
                    destination=str(ipaddress.IPv4Address(f[5])),
                    rate=f[6],
                    burst=f[7],
                    protected_delay_us=f[8],
                    worst_case_delay_us=f[9],
                    max_packet=f[10],
                )
            )
        else:
            raise MalformedMessage("payload", f"record {index} has unknown kind {kind}")
    return StatusReport(device_id=device_id, records=tuple(records))
