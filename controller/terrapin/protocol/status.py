"""REPORT_STATUS payload: the router's state after the 56-byte message (docs/protocol.md).

Seed 000 §4.1.2: "It contains state information about the router and current connections." A
header, then fixed 36-byte records: one QUEUE record per (port, admitted priority) in use, then
one CHANNEL record per channel through that router.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import astuple, dataclass

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


# On the wire a record is its kind (the record's class), its priority (a byte), its port (a u16),
# then the rest of its fields in the order the dataclass declares them: encode and decode rely on
# that order.


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
            # Every figure after the port and priority is a u32, clamped.
            figures = (_u32(value) for value in astuple(rec)[2:])
            out.append(_QUEUE.pack(KIND_QUEUE, rec.priority, rec.port, *figures))
        else:
            addresses = (ipaddress.IPv4Address(a).packed for a in (rec.initiator, rec.destination))
            figures = (_u32(value) for value in astuple(rec)[5:])
            out.append(_CHANNEL.pack(KIND_CHANNEL, rec.priority, rec.port, rec.context, *addresses, *figures))
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
            _kind, priority, port, *figures = _QUEUE.unpack_from(payload, offset)
            records.append(QueueRecord(port, priority, *figures))
        elif kind == KIND_CHANNEL:
            _kind, priority, port, context, initiator, destination, *figures = _CHANNEL.unpack_from(
                payload, offset
            )
            initiator, destination = (str(ipaddress.IPv4Address(a)) for a in (initiator, destination))
            records.append(ChannelRecord(port, priority, context, initiator, destination, *figures))
        else:
            raise MalformedMessage("payload", f"record {index} has unknown kind {kind}")
    return StatusReport(device_id=device_id, records=tuple(records))
