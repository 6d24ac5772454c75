"""A set-up whose entries a reconciliation wrote first (switches.SwitchEntries.install_channel).

Found by `make chaos` (seed 4, --duration 120, the primary killed at 45 s): the new primary's
restoration reconciled the switches while a set-up it had recorded "installing" was about to
write its hops; the reconciliation, which makes a switch hold every stored channel, wrote that
channel's entry first, the set-up's INSERT was refused ALREADY_EXISTS, and the client got 502.
The set-up now makes its entries what it writes (MODIFY) when every refusal is ALREADY_EXISTS;
any other refusal is still an error.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import finsy as fy
import pytest
from fakes import chain_config
from finsy.proto import p4r

from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.switches.batcher import SwitchWriteError
from terrapin.switches.encoding import ChannelCodecs, entry_key
from terrapin.switches.entries import SwitchEntries

P4_INFO = Path(__file__).resolve().parents[2] / "build" / "p4" / "terrapin.p4info.txtpb"

pytestmark = pytest.mark.skipif(not P4_INFO.exists(), reason="needs build/p4 (make p4)")


class Table:
    """A switch's tables as P4Runtime keeps them: an INSERT of a key held is refused
    ALREADY_EXISTS, a MODIFY of one not held NOT_FOUND (the others of the batch applied)."""

    def __init__(self, refuse_with: fy.GRPCStatusCode | None = None) -> None:
        self.held: dict[object, p4r.TableEntry] = {}
        self.requests: list[list[int]] = []
        self.refuse_with = refuse_with

    async def write(self, updates: list[p4r.Update], strict: bool = True) -> None:
        self.requests.append([u.type for u in updates])
        codes = []
        for u in updates:
            if not u.entity.HasField("table_entry"):
                continue
            key = entry_key(u.entity.table_entry)
            if self.refuse_with is not None:
                codes.append(self.refuse_with)
            elif u.type == p4r.Update.INSERT and key in self.held:
                codes.append(fy.GRPCStatusCode.ALREADY_EXISTS)
            elif u.type == p4r.Update.MODIFY and key not in self.held:
                codes.append(fy.GRPCStatusCode.NOT_FOUND)
            else:
                self.held[key] = u.entity.table_entry
        if codes:
            raise SwitchWriteError("; ".join(c.name for c in codes), codes)


class Connections:
    switches = ("s1", "s2")

    def __init__(self) -> None:
        self.sw = type("Switch", (), {"p4info": fy.P4Schema(P4_INFO), "device_id": 1})()

    def is_ready(self, name: str) -> bool:
        return True

    def switch(self, name: str) -> object:
        return self.sw


def entries_with(table: Table) -> SwitchEntries:
    config = chain_config(2)
    made = SwitchEntries(Connections(), ChannelCodecs(), Topology(config), lambda _name: [], [])  # type: ignore[arg-type]
    made._batchers["s1"] = table  # type: ignore[assignment]
    return made


ENTRY = ChannelEntry(
    "s1", ChannelSelector("10.0.1.2", "10.0.2.2", 17, 5000 << 16 | 6000), 7, 6, 1000, 1500, 2000, 3000, True
)


def test_a_set_up_whose_entry_a_reconciliation_wrote_first_succeeds() -> None:
    table = Table()
    entries = entries_with(table)
    asyncio.run(entries.install_channel(ENTRY))  # the reconciliation's write, in effect
    held = dict(table.held)
    asyncio.run(entries.install_channel(ENTRY))  # the set-up's own: refused, then made so
    assert table.held == held
    assert table.requests[-2].count(p4r.Update.INSERT) >= 1
    assert p4r.Update.INSERT not in table.requests[-1] and p4r.Update.MODIFY in table.requests[-1]


def test_any_other_refusal_is_still_an_error() -> None:
    table = Table(refuse_with=fy.GRPCStatusCode.RESOURCE_EXHAUSTED)
    with pytest.raises(SwitchWriteError, match="RESOURCE_EXHAUSTED"):
        asyncio.run(entries_with(table).install_channel(ENTRY))
    assert len(table.requests) == 1  # not tried again
