"""terrapin/p4program.py against the program it names: the compiled P4Info and constants.p4."""

from __future__ import annotations

import re
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

from terrapin import p4program
from terrapin.constants import QUEUES_PER_PORT

REPO = Path(__file__).resolve().parents[2]
P4_INFO = REPO / "build" / "p4" / "terrapin.p4info.txtpb"
CONSTANTS_P4 = REPO / "p4src" / "include" / "constants.p4"


def p4info() -> p4i.P4Info:
    assert P4_INFO.exists(), f"{P4_INFO} is missing: `make p4` compiles p4src"
    info = p4i.P4Info()
    text_format.Parse(P4_INFO.read_text(), info)
    return info


def constants_p4() -> dict[str, int]:
    text = CONSTANTS_P4.read_text()
    return {n: int(v, 0) for n, v in re.findall(r"^const bit<\d+> (\w+) = (\w+);", text, re.M)}


def names(prefix: str) -> dict[str, str]:
    return {k: v for k, v in vars(p4program).items() if k.startswith(prefix) and isinstance(v, str)}


def test_every_name_is_in_the_compiled_p4info() -> None:
    info = p4info()
    tables = {t.preamble.name: t for t in info.tables}
    kinds = {
        "T_": set(tables),
        "A_": {a.preamble.name for a in info.actions},
        "C_": {c.preamble.name for c in info.counters},
        "R_": {r.preamble.name for r in info.registers},
        "M_": {m.preamble.name for m in info.meters},
    }
    for prefix, known in kinds.items():
        assert names(prefix), prefix
        for const, name in names(prefix).items():
            assert name in known, f"p4program.{const} = {name!r} is not in {P4_INFO.name}"
    # the controller writes channel entries by these key fields, in this order
    key = tuple(f.name for f in tables[p4program.T_CHANNELS].match_fields)
    assert key == p4program.CHANNEL_KEY
    # one entry per channel id, so the store hands out no id the switch has no room for
    assert tables[p4program.T_CHANNELS].size == p4program.MAX_CHANNELS
    # a channel's pin is found by the channel's selector (the key less where it entered), one
    # per channel at a switch
    pins = tables[p4program.T_CHANNEL_PATHS]
    assert tuple(f.name for f in pins.match_fields) == p4program.SELECTOR_KEY
    assert pins.size == p4program.MAX_CHANNELS
    # 802.1CB's recovery counters, indexed by channel id
    for name in p4program.FRER_COUNTERS.values():
        assert name in kinds["C_"], name
    members = tables[p4program.T_MEMBER_STREAMS]
    assert members.size == tables[p4program.T_COPIES].size == 2 * p4program.MAX_CHANNELS
    # the aggregates' key: ternary fields of these widths (the configuration is checked against them)
    fields = tables[p4program.T_AGGREGATES].match_fields
    assert {f.name: f.bitwidth for f in fields} == p4program.AGGREGATE_KEY
    assert all(f.match_type == p4i.MatchField.TERNARY for f in fields)


def test_numbers_match_constants_p4() -> None:
    values = constants_p4()
    # DROP_REASONS in constants.p4 is the `drops` counter's size (room for more), not a reason
    reasons = {n: v for n, v in values.items() if n.startswith("DROP_") and n != "DROP_REASONS"}
    drops = sorted((v, n.removeprefix("DROP_").lower()) for n, v in reasons.items())
    assert tuple(name for _, name in drops) == p4program.DROP_REASONS
    assert [index for index, _ in drops] == list(range(len(p4program.DROP_REASONS)))
    assert len(p4program.DROP_REASONS) <= values["DROP_REASONS"]
    assert values["QUEUES_PER_PORT"] == QUEUES_PER_PORT == p4program.QUEUES_PER_PORT
    assert values["FRER_HISTORY_MAX"] == p4program.FRER_HISTORY_MAX
    assert values["DELAY_BANDS"] == p4program.DELAY_BANDS == len(p4program.DELAY_BAND_NAMES)
    for index, band in enumerate(p4program.DELAY_BAND_NAMES):
        assert values[f"DELAY_BAND_{band.upper()}"] == index
    named = (
        "PACKET_OUT_DIRECT",
        "PACKET_OUT_PIPELINE",
        "EXCESS_DROP",
        "EXCESS_DEMOTE",
        "MAX_AGGREGATES",
        "MAX_CHANNELS",
        "ETHERTYPE_LINK_PROBE",
    )
    for const in named:
        assert values[const] == getattr(p4program, const), const


def test_queue_cells_are_port_major() -> None:
    assert p4program.queue_cell(0, 0) == 0
    assert p4program.queue_cell(1, 0) == QUEUES_PER_PORT
    assert p4program.queue_cell(2, 7) == 2 * QUEUES_PER_PORT + 7
