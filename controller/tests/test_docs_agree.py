"""One source of truth: docs/protocol.md and p4src/include/constants.p4 against constants.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from terrapin import constants
from terrapin.constants import DenialReason, MessageCode
from terrapin.protocol import messages

REPO = Path(__file__).resolve().parents[2]


def section(title: str) -> str:
    text = (REPO / "docs" / "protocol.md").read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_message_codes_match_docs_protocol_md() -> None:
    text = section("Message codes")
    rows = re.findall(r"^\| (\d) \| ([A-Z_]+)\s*\|", text, flags=re.M)
    assert {int(code): name for code, name in rows} == {c.value: c.name for c in MessageCode}


def test_reason_codes_match_docs_protocol_md() -> None:
    rows = re.findall(r"^\| (\d+) \| ([A-Z_]+) \|", section("Reason codes"), flags=re.M)
    assert {int(code): name for code, name in rows} == {r.value: r.name for r in DenialReason}


def test_layout_matches_docs_protocol_md() -> None:
    text = section("Byte layout")
    layout = re.findall(r"^\s+(\d+)\s+(\d+) (\w+)", text, flags=re.M)
    fields = {name: (int(offset), int(size)) for offset, size, name in layout}
    assert fields["type"] == (0, 1) and fields["shortfall"] == (52, 4)
    # every field ends where the next begins, and the last one at 56
    ordered = sorted(fields.values())
    ends = [offset + size for offset, size in ordered if offset < 56]
    starts = [*[offset for offset, _ in ordered if offset < 56][1:], 56]
    assert ends == starts
    assert messages._LAYOUT.size == constants.MESSAGE_LENGTH == 56


def test_numbers_match_p4src_constants() -> None:
    path = REPO / "p4src" / "include" / "constants.p4"
    if not path.exists():
        pytest.skip("p4src/include/constants.p4 not present")
    values = {
        name: int(value, 0)
        for name, value in re.findall(r"^const bit<\d+> (\w+) = (\w+);", path.read_text(), re.M)
    }
    assert values["CPU_PORT"] == constants.CPU_PORT
    assert values["CHANNEL_IN_HOST"] == constants.CHANNEL_IN_HOST
    assert values["CHANNEL_IN_RECOVERED"] == constants.CHANNEL_IN_RECOVERED
    assert values["PRIORITY_BEST_EFFORT"] == constants.BEST_EFFORT_PRIORITY
    assert values["PRIORITY_RESERVATION"] == constants.PROTOCOL_PRIORITY
    assert values["PRIORITY_CHANNEL_MIN"] == min(constants.ADMITTED_PRIORITIES)
    assert values["PRIORITY_CHANNEL_MAX"] == max(constants.ADMITTED_PRIORITIES)
    assert values["ICMP_TYPE_RESERVATION"] == constants.ICMP_TYPE_RESERVATION
    assert values["RESERVATION_VERSION"] == constants.PROTOCOL_VERSION
    assert values["IP_PROTO_XTP"] == constants.IP_PROTO_XTP
    for code in MessageCode:
        assert values["RESV_" + code.name] == code.value
    assert values["MOVING_SLOTS"] == constants.MOVING_SLOTS
    assert values["MOVING_RING_CELLS"] == values["MAX_CHANNELS"] * constants.MOVING_SLOTS


def test_policer_trailer_matches_docs_protocol_md() -> None:
    text = section("Policer trailer")
    layout = re.findall(r"^\s+(\d+)\s+(\d+) (\w+)", text, flags=re.M)
    fields = [(int(offset), int(size)) for offset, size, _name in layout]
    assert fields[0][0] == constants.MESSAGE_LENGTH
    assert [o for o, _ in fields[1:]] == [o + s for o, s in fields[:-1]]
    assert sum(s for _, s in fields) == messages._TRAILER.size == constants.POLICER_TRAILER_LENGTH
    policer_line = next(line for line in text.splitlines() if re.match(r"^\s+56\s+1 policer", line))
    codes = dict(re.findall(r"(\d) (jumping window|moving window)", policer_line))
    assert {name.replace(" ", "_"): int(code) for code, name in codes.items()} == messages.POLICER_CODES
    assert "bit 2 (`0x04`)" in section("Byte layout") and messages.FLAG_POLICER == 0x04
