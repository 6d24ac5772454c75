"""The chaos checker (topo/chaos/checker.py) on histories whose faults are known: a store's real
journal replays clean; two stores that each admitted to a port's limit, interleaved as two
primaries of a split brain would commit, are caught; every answer class is judged as the issue
allows; an acknowledged reservation missing from the store or from a switch is named."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from terrapin.admission import AdmissionLedger, ChannelEnvelope, ChannelKey
from terrapin.channel_requests import ChannelRequest
from terrapin.config import Config
from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.reservations import ReservationService
from terrapin.restoration import Restoration
from terrapin.store import Reservation, ReservationStore
from topo import sequoia_ring
from topo.chaos.checker import Answer, JournalEntry, acknowledged_problems, answer_problems, replay_capacity
from topo.tests.configs import run_config

KBIT = 125  # bytes/s


class Switches:
    """Every switch ready, every write accepted: the checker judges the store, not the switches."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def is_ready(self, name: str) -> bool:
        return True

    async def install_channel(self, entry: ChannelEntry) -> None:
        pass

    async def remove_channel(self, entry: ChannelEntry) -> None:
        pass

    async def reconcile(self, name: str) -> None:
        pass


def ring() -> Config:
    return run_config(sequoia_ring.plan())


def service(config: Config, path: Path) -> tuple[ReservationService, ReservationStore, Topology]:
    topology = Topology(config)
    store = ReservationStore(str(path), AdmissionLedger(config.port_models()))
    assert store.ledger is not None
    return ReservationService(store.ledger, topology, store, Switches(topology.switch_names)), store, topology


def request(
    config: Config, src: str, dst: str, context: int, kbit: int, protected: bool = False
) -> ChannelRequest:
    hosts = {h.name: h.ip for h in config.hosts}
    selector = ChannelSelector(hosts[src], hosts[dst], 17, context)
    return ChannelRequest(
        ChannelKey(hosts[src], context),
        selector,
        ChannelEnvelope(5, kbit * KBIT, 4000, 1000),
        protected=protected,
    )


def journal(path: Path) -> list[JournalEntry]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT seq, kind, initiator, context, body, written_at FROM journal ORDER BY seq"
        ).fetchall()
    return [
        JournalEntry(int(s), str(k), ChannelKey(str(i), int(c)), str(b), float(w))
        for s, k, i, c, b, w in rows
    ]


def test_a_single_primarys_journal_replays_clean(tmp_path: Path) -> None:
    """Reservations, a protected one, an in-band hold and its installation, refusals, closes and
    a restoration's moves, committed by one store: nothing is over-admitted."""
    config = ring()
    svc, store, topology = service(config, tmp_path / "one.db")

    async def run() -> None:
        protected = await svc.create(request(config, "propaganda", "venezia", 50, 100, protected=True))
        assert isinstance(protected, Reservation) and protected.allocation.protected
        held = request(config, "grayling", "blizzard", 60, 100)
        svc.hold(held, 30.0)
        assert isinstance(await svc.install(held), Reservation)
        made = []
        for context in range(1, 12):  # more than the ucb-ucsd T1 takes: the last are refused
            result = await svc.create(request(config, "faith", "paola", context, 300))
            if isinstance(result, Reservation):
                made.append(result)
        assert 1 < len(made) < 11
        await svc.close(made[0].key)
        cut = next(t for t in topology.trunks if {t.a.switch, t.b.switch} == {"ucb", "ucsd"})
        await Restoration(svc, topology, Switches(topology.switch_names)).restore(frozenset({cut}))

    asyncio.run(run())
    entries = journal(tmp_path / "one.db")
    assert {e.kind for e in entries} >= {"reserve", "hold", "release", "move"}
    assert replay_capacity(entries, config.port_models()) == []
    store.close()


def test_a_channel_moved_down_and_up_again_replays_clean(tmp_path: Path) -> None:
    """A channel whose only site was cut off goes down (it holds nothing) and comes back when a
    trunk is mended: its move back up is an admission, not a move of something it held. Found
    by `make chaos` (seed 4, --duration 60): a switch killed took its channels down, and the
    checker named each one's return "moved, but it held nothing before"."""
    config = ring()
    svc, store, topology = service(config, tmp_path / "down-up.db")
    ucla = [t for t in topology.trunks if "ucla" in {t.a.switch, t.b.switch}]
    assert len(ucla) == 2

    async def run() -> None:
        made = await svc.create(request(config, "blizzard", "paola", 7, 100))
        assert isinstance(made, Reservation)
        restoration = Restoration(svc, topology, Switches(topology.switch_names))
        await restoration.restore(frozenset(ucla))  # ucla cut off: the channel goes down
        assert svc.list()[0].state == "down"
        await restoration.restore(frozenset())  # mended: admitted again
        assert svc.list()[0].state == "active"

    asyncio.run(run())
    entries = journal(tmp_path / "down-up.db")
    assert [e.kind for e in entries].count("move") >= 2
    assert replay_capacity(entries, config.port_models()) == []
    store.close()


def test_two_primaries_that_each_admitted_to_the_limit_are_caught(tmp_path: Path) -> None:
    """Each of two stores fills the ucb-ucsd T1 on its own (as two controllers that both held the
    lease would, each with its own view); their commits interleaved are an over-admission, named
    with the journal entry and the port."""
    config = ring()
    journals = []
    for name in ("a", "b"):
        svc, store, _ = service(config, tmp_path / f"{name}.db")

        async def fill(svc: ReservationService = svc, offset: int = 100 if name == "b" else 0) -> None:
            for context in range(1, 12):
                await svc.create(request(config, "faith", "paola", offset + context, 300))

        asyncio.run(fill())
        journals.append([e for e in journal(tmp_path / f"{name}.db") if e.kind == "reserve"])
        store.close()
    merged = [e for pair in zip(*journals, strict=False) for e in pair]
    problems = replay_capacity(merged, config.port_models())
    assert problems, "an interleaving of two full ports must over-admit"
    assert all("over-admitted" in p for p in problems)
    assert any("ucb:" in p for p in problems)


def test_a_channel_admitted_twice_is_named(tmp_path: Path) -> None:
    config = ring()
    svc, store, _ = service(config, tmp_path / "twice.db")
    asyncio.run(svc.create(request(config, "faith", "paola", 1, 100)))
    entries = journal(tmp_path / "twice.db")
    problems = replay_capacity(entries + entries, config.port_models())
    assert any("already exists" in p for p in problems)
    store.close()


@pytest.mark.parametrize(
    ("status", "retry_after", "allowed"),
    [
        (201, None, True),
        (204, None, True),
        (409, None, True),  # an admission decision or a conflict: the request's
        (422, None, True),
        (503, "1", True),
        (503, None, False),  # "not now" must say when
        (502, None, False),  # a switch refused a write
        (504, None, False),  # the outcome unknown
        (500, None, False),
        (0, None, False),  # no answer at all
    ],
)
def test_answers_are_judged_as_the_issue_allows(status: int, retry_after: str | None, allowed: bool) -> None:
    answer = Answer("c1", "POST", "/reservations", 1.0, 1.1, status, retry_after)
    assert (answer_problems([answer]) == []) == allowed


def test_an_acknowledged_reservation_missing_anywhere_is_named() -> None:
    a, b, c, d = (ChannelKey("10.0.0.1", n) for n in range(4))
    problems = acknowledged_problems(
        created={1: a, 2: b, 3: c, 4: d},
        closed=[4],
        stored={1: "active", 3: "down"},
        on_switches={1: ["s1"]},
        expected_switches={1: ["s1", "s2"], 3: ["s1"]},
    )
    assert problems == [
        "reservation 1 (10.0.0.1/0) is active in the store but missing on s2",
        "reservation 2 (10.0.0.1/1) was answered 201 and is not in the store",
    ]
