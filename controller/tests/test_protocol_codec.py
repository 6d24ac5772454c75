"""Codec tests: round trips, byte positions from docs/protocol.md, malformed input."""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from terrapin.admission.model import JUMPING_WINDOW, METER, MOVING_WINDOW, Policer
from terrapin.constants import MessageCode
from terrapin.protocol.messages import (
    FLAG_CLOSE_WHEN_DOWN,
    FLAG_POLICER,
    FLAG_PROTECTION,
    FLAG_PROTECTION_OPTIONAL,
    MalformedMessage,
    ReservationMessage,
    decode,
    flow_key_from_ports,
    internet_checksum,
)
from terrapin.protocol.packets import build_frame, build_ipv4, parse_frame, parse_ipv4
from terrapin.protocol.status import (
    ChannelRecord,
    QueueRecord,
    StatusReport,
    decode_status,
    encode_status,
)

ADMIT = ReservationMessage(
    code=MessageCode.REQUEST_ADMIT,
    context=0x01020304,
    initiator="10.0.1.2",
    destination="10.0.2.2",
    protocol=17,
    priority=6,
    flow_key=flow_key_from_ports(5000, 6000),
    rate=1_125_000,
    burst=27_000,
    avg_idle_us=33_000,
    max_packet=1500,
    delay_us=20_000,
    hops=2,
    flags=1,
)


def test_byte_positions_follow_docs_protocol_md() -> None:
    raw = ADMIT.encode()
    assert len(raw) == 56
    assert raw[0] == 253 and raw[1] == 1
    assert internet_checksum(raw) == 0
    assert raw[4] == 1 and raw[5] == 1  # version, flags
    assert struct.unpack_from("!H", raw, 6)[0] == 2  # hops
    assert struct.unpack_from("!I", raw, 8)[0] == 0x01020304  # context
    assert raw[12:16] == bytes([10, 0, 1, 2]) and raw[16:20] == bytes([10, 0, 2, 2])
    assert (raw[20], raw[21], raw[22], raw[23]) == (17, 6, 0, 0)
    assert struct.unpack_from("!Q", raw, 24)[0] == 5000 << 16 | 6000
    assert struct.unpack_from("!6I", raw, 32) == (1_125_000, 27_000, 33_000, 1500, 20_000, 0)


def test_round_trip() -> None:
    assert decode(ADMIT.encode()) == ADMIT


messages = st.builds(
    ReservationMessage,
    code=st.sampled_from([c for c in MessageCode if c != MessageCode.REPORT_STATUS]),
    context=st.integers(0, 2**32 - 1),
    initiator=st.ip_addresses(v=4).map(str),
    destination=st.ip_addresses(v=4).map(str),
    protocol=st.integers(0, 255),
    priority=st.integers(0, 255),
    flow_key=st.integers(0, 2**64 - 1),
    rate=st.integers(0, 2**32 - 1),
    burst=st.integers(0, 2**32 - 1),
    avg_idle_us=st.integers(0, 2**32 - 1),
    max_packet=st.integers(0, 2**32 - 1),
    delay_us=st.integers(0, 2**32 - 1),
    shortfall=st.integers(0, 2**32 - 1),
    reason=st.integers(0, 255),
    flags=st.sampled_from([0, 1]),
    hops=st.integers(0, 65535),
)


@given(messages)
def test_round_trip_any_message(msg: ReservationMessage) -> None:
    assert decode(msg.encode()) == msg
    datagram = parse_frame(build_frame("10.0.0.1", "10.0.0.2", msg.encode()))
    assert decode(datagram.icmp) == msg


@given(st.binary(max_size=200))
def test_random_bytes_never_crash(data: bytes) -> None:
    with contextlib.suppress(MalformedMessage):
        decode(data)
    with contextlib.suppress(MalformedMessage):
        parse_frame(data)


@given(st.integers(0, 55), st.integers(0, 255))
def test_any_flipped_byte_is_detected(position: int, value: int) -> None:
    raw = bytearray(ADMIT.encode())
    if raw[position] == value:
        return
    raw[position] = value
    with pytest.raises(MalformedMessage):
        decode(bytes(raw))


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b[:40], "length"),
        (lambda b: bytes([8]) + b[1:], "type"),
        (lambda b: b[:1] + bytes([9]) + b[2:], "code"),
        (lambda b: b[:1] + bytes([0]) + b[2:], "code"),
        (lambda b: b + b"\x00\x00", "length"),  # trailing bytes on a non-status message
    ],
)
def test_malformed_messages_name_the_field(mutate: object, field: str) -> None:
    with pytest.raises(MalformedMessage) as info:
        decode(mutate(ADMIT.encode()))  # type: ignore[operator]
    assert info.value.field == field


def _resign(raw: bytearray) -> bytes:
    raw[2:4] = b"\x00\x00"
    raw[2:4] = struct.pack("!H", internet_checksum(bytes(raw)))
    return bytes(raw)


@pytest.mark.parametrize(
    ("offset", "value", "field"), [(4, 2, "version"), (5, 0x80, "flags"), (23, 1, "reserved")]
)
def test_bad_field_with_valid_checksum(offset: int, value: int, field: str) -> None:
    raw = bytearray(ADMIT.encode())
    raw[offset] = value
    with pytest.raises(MalformedMessage) as info:
        decode(_resign(raw))
    assert info.value.field == field


def test_out_of_range_fields_are_refused_on_encode() -> None:
    with pytest.raises(MalformedMessage) as info:
        ReservationMessage(MessageCode.REQUEST_ADMIT, 1, "10.0.0.1", "10.0.0.2", rate=2**32).encode()
    assert info.value.field == "rate"
    with pytest.raises(MalformedMessage) as info:
        ReservationMessage(MessageCode.REQUEST_ADMIT, 1, "10.0.0.300", "10.0.0.2").encode()
    assert info.value.field == "initiator"


def test_ipv4_framing_checks_lengths_and_checksum() -> None:
    packet = build_ipv4("10.0.1.2", "10.0.2.2", ADMIT.encode())
    assert parse_ipv4(packet).icmp == ADMIT.encode()
    assert parse_ipv4(packet + b"\x00" * 10).icmp == ADMIT.encode()  # Ethernet padding ignored
    bad = bytearray(packet)
    bad[8] = 1  # TTL changed without fixing the checksum
    with pytest.raises(MalformedMessage, match="checksum"):
        parse_ipv4(bytes(bad))
    with pytest.raises(MalformedMessage, match="length"):
        parse_ipv4(packet[:60])
    vlan = build_frame("10.0.1.2", "10.0.2.2", ADMIT.encode())
    tagged = vlan[:12] + b"\x81\x00\x00\x05" + vlan[12:]
    assert decode(parse_frame(tagged).icmp) == ADMIT


def test_status_records_round_trip_and_truncate() -> None:
    queue = QueueRecord(2, 6, 3, 3_375_000, 3_750_000, 36_000, 144_000, 8, 7100, 7200)
    channel = ChannelRecord(2, 6, 7, "10.0.1.2", "10.0.2.2", 1_125_000, 27_000, 0, 7200, 1500)
    payload, truncated = encode_status(StatusReport(9, (queue, channel)))
    assert not truncated and len(payload) == 8 + 2 * 36
    assert decode_status(payload) == StatusReport(9, (queue, channel))
    many = StatusReport(1, tuple([channel] * 100))
    payload, truncated = encode_status(many)
    assert truncated and len(payload) <= 1500 - 20 - 56
    msg = ReservationMessage(MessageCode.REPORT_STATUS, 0, "10.0.1.2", "0.0.0.0", payload=payload)
    assert decode_status(decode(msg.encode()).payload).records[0] == channel
    with pytest.raises(MalformedMessage):
        decode_status(payload[:-1])


# ---- the policer trailer (docs/protocol.md "Policer trailer") ------------------------------

MOVING = replace(
    ADMIT,
    context=9,
    flags=0,
    rate=0,
    burst=0,
    max_packet=4500,
    policer=Policer(MOVING_WINDOW, xmin_us=900, xave_us=3600, interval_us=18_000),
)
JUMPING = replace(
    MOVING, context=10, burst=22_500, policer=Policer(JUMPING_WINDOW, window_us=18_000, count_packets=True)
)


def test_policer_trailer_byte_positions() -> None:
    raw = MOVING.encode()
    assert len(raw) == 56 + 16 and internet_checksum(raw) == 0
    assert raw[5] == FLAG_POLICER  # flags
    assert (raw[56], raw[57], raw[58:60]) == (2, 0, b"\x00\x00")
    assert struct.unpack_from("!3I", raw, 60) == (900, 3600, 18_000)
    raw = JUMPING.encode()
    assert (raw[56], raw[57]) == (1, 1)  # jumping window, counting packets
    assert struct.unpack_from("!3I", raw, 60) == (18_000, 0, 0)
    assert struct.unpack_from("!2I", raw, 32) == (0, 22_500)  # rate 0 (derived), burst B


def test_policer_round_trips_and_survives_a_denial() -> None:
    assert decode(MOVING.encode()) == MOVING
    assert decode(JUMPING.encode()) == JUMPING
    denied = decode(MOVING.with_code(MessageCode.REQUEST_DENIED, reason=13, flags=0).encode())
    assert denied.policer == MOVING.policer and denied.flags == 0


def test_a_message_of_the_first_layout_still_means_the_meter() -> None:
    """Backward compatible: the 56 bytes every earlier sender wrote decode as before, with
    the meter; and a meter message is byte for byte what it was (no trailer, flag clear)."""
    raw = ADMIT.encode()
    assert len(raw) == 56 and not raw[5] & FLAG_POLICER
    assert decode(raw).policer == Policer() and decode(raw).policer.kind == METER


def _trailer_mutation(offset: int, value: int) -> bytes:
    raw = bytearray(MOVING.encode())
    raw[offset] = value
    return _resign(raw)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (_resign(bytearray(MOVING.encode()[:60])), "length"),  # flag set, trailer cut short
        (_trailer_mutation(56, 3), "policer"),  # no such policer
        (_trailer_mutation(57, 1), "policer"),  # an option on a moving window
        (_trailer_mutation(59, 1), "policer"),  # reserved
        (_resign(bytearray(JUMPING.encode()[:67] + b"\x01" + JUMPING.encode()[68:])), "policer"),
        (_resign(bytearray(MOVING.encode()[:5] + b"\x00" + MOVING.encode()[6:])), "length"),
        (_resign(bytearray(MOVING.encode()[:1] + b"\x04" + MOVING.encode()[2:])), "flags"),  # STATUS
    ],
)
def test_malformed_policer_trailers_name_the_field(raw: bytes, field: str) -> None:
    with pytest.raises(MalformedMessage) as info:
        decode(raw)
    assert info.value.field == field


def test_policer_is_set_by_its_field_not_by_the_flag() -> None:
    with pytest.raises(MalformedMessage) as info:
        ReservationMessage(MessageCode.REQUEST_ADMIT, 1, "10.0.0.1", "10.0.0.2", flags=FLAG_POLICER).encode()
    assert info.value.field == "flags"
    with pytest.raises(MalformedMessage) as info:
        MOVING.with_code(MessageCode.REQUEST_STATUS).encode()
    assert info.value.field == "policer"
    with pytest.raises(MalformedMessage) as info:
        ReservationMessage(
            MessageCode.REQUEST_ADMIT,
            1,
            "10.0.0.1",
            "10.0.0.2",
            policer=Policer(JUMPING_WINDOW, window_us=2**32),
        ).encode()
    assert info.value.field == "window_us"


policers = st.one_of(
    st.just(Policer()),
    st.builds(
        Policer,
        kind=st.just(JUMPING_WINDOW),
        window_us=st.integers(0, 2**32 - 1),
        count_packets=st.booleans(),
    ),
    st.builds(
        Policer,
        kind=st.just(MOVING_WINDOW),
        xmin_us=st.integers(0, 2**32 - 1),
        xave_us=st.integers(0, 2**32 - 1),
        interval_us=st.integers(0, 2**32 - 1),
    ),
)


@given(messages, policers)
def test_round_trip_any_message_with_any_policer(msg: ReservationMessage, policer: Policer) -> None:
    if msg.code == MessageCode.REQUEST_STATUS:
        policer = Policer()
    with_policer = replace(msg, policer=policer)
    assert decode(with_policer.encode()) == with_policer


def _with_flag(message: ReservationMessage, flag: int) -> bytes:
    """`message` encoded with `flag` forced into its flags byte (checksum fixed)."""
    forged = bytearray(message.encode())
    forged[5] |= flag
    forged[2:4] = b"\0\0"
    forged[2:4] = struct.pack("!H", internet_checksum(bytes(forged)))
    return bytes(forged)


@pytest.mark.parametrize(
    "flags",
    [FLAG_CLOSE_WHEN_DOWN, FLAG_PROTECTION, FLAG_PROTECTION | FLAG_PROTECTION_OPTIONAL],
)
def test_admit_flags_are_a_request_admits_and_its_answers_drop_them(flags: int) -> None:
    """Flag bits 3, 4 and 5 (docs/protocol.md): kept by a REQUEST_ADMIT, dropped from every
    answer made from it, malformed on any other message."""
    asked = replace(ADMIT, flags=flags)
    raw = asked.encode()
    assert raw[5] == flags and decode(raw) == asked
    for code in MessageCode:
        if code != MessageCode.REQUEST_ADMIT:
            assert not asked.with_code(code).flags & flags
    with pytest.raises(MalformedMessage) as info:
        decode(_with_flag(ADMIT.with_code(MessageCode.REQUEST_ACCEPT), flags))
    assert info.value.field == "flags"


def test_protection_optional_needs_protection() -> None:
    with pytest.raises(MalformedMessage) as info:
        decode(_with_flag(ADMIT, FLAG_PROTECTION_OPTIONAL))
    assert info.value.field == "flags" and "bit 4" in str(info.value)
