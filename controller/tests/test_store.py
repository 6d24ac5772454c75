"""The reservation store on both of its databases: what one replica writes another follows; the
admission lock keeps replicas admitting at once from over-admitting; the lease fences a replica
that lost it; holds carry one deadline for all; a failed transaction leaves nothing behind.

Every test runs on SQLite (a file two store objects open, as two processes would) and on a real
PostgreSQL (tests/pg.py starts it)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes import chain_config

from terrapin.admission import AdmissionLedger, Allocation, ChannelEnvelope, ChannelKey, Denial
from terrapin.admission.model import PortId, PortModel
from terrapin.paths import ChannelSelector
from terrapin.store import (
    INSTALLING,
    Fence,
    NotPrimary,
    ReservationStore,
    SchemaTooNew,
    StoreUnavailable,
)
from terrapin.store.migrations import LATEST

pytest_plugins = ["pg"]

PATH = [PortId("s1", 2), PortId("s2", 2)]
# 10 Mbit/s ports (1,250,000 B/s; 90% reservable): 11 channels of 100,000 B/s fit, the 12th not.
ENVELOPE = ChannelEnvelope(6, 100_000, 3000, 1500)
FITS = 11


def selector(context: int) -> ChannelSelector:
    return ChannelSelector("10.0.1.2", "10.0.2.2", 17, context)


def ledger() -> AdmissionLedger:
    return AdmissionLedger(chain_config(2, rate_bps=10_000_000).port_models(), clock=time.time)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def replicas(where: str) -> Iterator[Callable[[], ReservationStore]]:
    """Opens replicas of one store, each with its own ledger; all closed after the test."""
    opened: list[ReservationStore] = []

    def open_replica() -> ReservationStore:
        store = ReservationStore(where, ledger())
        opened.append(store)
        return store

    yield open_replica
    for store in opened:
        store.close()


def admit(store: ReservationStore, context: int, hold_seconds: float | None = None) -> Allocation | Denial:
    key = ChannelKey("10.0.1.2", context)
    with store.transaction() as txn:
        decision = txn.admit(key, PATH, ENVELOPE, hold_seconds)
        if isinstance(decision, Allocation):
            if hold_seconds is None:
                txn.reserve(decision, selector(context), "rest", True)
            else:
                txn.hold(decision, selector(context))
    return decision


def loads(store: ReservationStore) -> dict[PortId, tuple[int, int, int]]:
    assert store.ledger is not None
    return {
        port: (load.admitted_rate, load.levels[6].burst, load.admitted_channels)
        for port in PATH
        for load in [store.ledger.load(port)]
    }


def test_a_second_replica_follows_the_journal(replicas: Callable[[], ReservationStore]) -> None:
    a, b = replicas(), replicas()
    first = admit(a, 1)
    admit(a, 2)
    assert isinstance(admit(a, 3, hold_seconds=30), Allocation)
    assert b.count() == 0
    assert b.sync() > 0
    assert [r.key.context for r in b.all()] == [1, 2]
    assert b.get(ChannelKey("10.0.1.2", 1)) == a.get(ChannelKey("10.0.1.2", 1))
    assert b.hold(ChannelKey("10.0.1.2", 3)) == a.hold(ChannelKey("10.0.1.2", 3))
    assert loads(b) == loads(a)
    assert isinstance(first, Allocation)
    with a.transaction() as txn:
        txn.release(first.key)
        txn.set_state(ChannelKey("10.0.1.2", 2), "active")
    b.sync()
    assert [(r.key.context, r.state) for r in b.all()] == [(2, "active")]
    assert loads(b) == loads(a)
    # reservation ids keep growing on every replica: the one deleted is never given out again
    assert isinstance(admit(b, 4), Allocation)
    got = b.get(ChannelKey("10.0.1.2", 4))
    assert got is not None and got.reservation_id == 3 and got.channel_id == 0


def test_replicas_admitting_at_once_never_over_admit(replicas: Callable[[], ReservationStore]) -> None:
    stores = [replicas(), replicas()]
    outcomes: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def run(store: ReservationStore, first: int) -> None:
        try:
            for context in range(first, first + FITS):
                outcomes.append((context, isinstance(admit(store, context), Allocation)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s, 1 + 100 * n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    admitted = sorted(c for c, ok in outcomes if ok)
    assert len(admitted) == FITS  # 22 tried, exactly what the ports hold admitted
    fresh = replicas()
    assert sorted(r.key.context for r in fresh.all()) == admitted
    for store in stores:
        store.sync()
        assert loads(store) == loads(fresh)
    assert len({r.channel_id for r in fresh.all()}) == FITS


def test_the_lease_fences_a_replica_that_lost_it(replicas: Callable[[], ReservationStore]) -> None:
    a, b = replicas(), replicas()
    lease = a.claim_lease("a", "http://a", 0.3, None)
    assert lease is not None and (lease.holder, lease.term) == ("a", 1)
    taken = b.claim_lease("b", "http://b", 0.3, None)
    assert taken is not None and taken.holder == "a"  # still valid: b cannot take it
    with a.transaction(Fence("a", 1)) as txn:
        txn.set_state(ChannelKey("x", 1), "active")  # nothing to change, but allowed
    time.sleep(0.4)  # a did not renew
    taken = b.claim_lease("b", "http://b", 5.0, None)
    assert taken is not None and (taken.holder, taken.term) == ("b", 2)
    with pytest.raises(NotPrimary), a.transaction(Fence("a", 1)) as txn:
        admit_in(txn, 1)
    assert a.count() == 0 and loads(a)[PATH[0]] == (0, 0, 0)  # nothing changed, not even the copy
    # a's renewal now fails (it names term 1): it must step down
    renewed = a.claim_lease("a", "http://a", 5.0, 1)
    assert renewed is not None and (renewed.holder, renewed.term) == ("b", 2)
    with b.transaction(Fence("b", 2)) as txn:
        admit_in(txn, 1)
    a.sync()
    assert a.count() == 1
    b.release_lease("b", 2)
    after = a.claim_lease("a", "http://a", 5.0, None)  # released: a takes it at once
    assert after is not None and (after.holder, after.term) == ("a", 3)


def admit_in(txn: object, context: int) -> None:
    from terrapin.store import Transaction

    assert isinstance(txn, Transaction)
    decision = txn.admit(ChannelKey("10.0.1.2", context), PATH, ENVELOPE)
    assert isinstance(decision, Allocation)
    txn.reserve(decision, selector(context), "rest", True)


def test_a_hold_has_one_deadline_for_every_replica(replicas: Callable[[], ReservationStore]) -> None:
    a, b = replicas(), replicas()
    admit(a, 7, hold_seconds=0.3)
    b.sync()
    key = ChannelKey("10.0.1.2", 7)
    held_a, held_b = a.hold(key), b.hold(key)
    assert held_a is not None and held_a == held_b
    assert b.ledger is not None and b.ledger.deadline(key) == held_a.expires_at
    with a.transaction() as txn:
        assert txn.refresh(key, 0.3)
    b.sync()
    refreshed = b.hold(key)
    assert refreshed is not None and refreshed.expires_at > held_a.expires_at
    time.sleep(0.35)
    with a.transaction() as txn:
        assert [h.key for h in txn.expired] == [key]
    b.sync()
    assert b.hold(key) is None and b.ledger.get(key) is None
    # a hold that becomes a reservation keeps its allocation
    admit(a, 8, hold_seconds=30)
    hold = a.hold(ChannelKey("10.0.1.2", 8))
    assert hold is not None
    with a.transaction() as txn:
        txn.reserve(hold.allocation, hold.selector, "inband", True)
    b.sync()
    assert b.hold(ChannelKey("10.0.1.2", 8)) is None
    record = b.get(ChannelKey("10.0.1.2", 8))
    assert record is not None and record.allocation == hold.allocation
    assert loads(b) == loads(a) and loads(b)[PATH[0]][2] == 1


def test_a_lapsed_hold_is_found_by_any_replica_until_its_key_is_held_or_reserved(
    replicas: Callable[[], ReservationStore],
) -> None:
    """What a hold's request asked (its flags) outlives the hold in the journal, so the replica
    that gets the late REQUEST_ACCEPT admits it again as asked; a reservation of the key, or a
    hold that is still there, is not a lapsed hold."""
    a, b = replicas(), replicas()
    key = ChannelKey("10.0.1.2", 9)
    assert b.lapsed_hold(key) is None  # never held
    with a.transaction() as txn:
        decision = txn.admit(key, PATH, ENVELOPE, 0.2)
        assert isinstance(decision, Allocation)
        txn.hold(decision, selector(9), close_when_down=True, protected=True, protection_optional=True)
    assert a.lapsed_hold(key) is None  # held now
    time.sleep(0.25)
    with a.transaction() as txn:
        assert [h.key for h in txn.expired] == [key]
    b.sync()
    lapsed = b.lapsed_hold(key)
    assert lapsed is not None and lapsed.selector == selector(9) and lapsed.allocation == decision
    assert (lapsed.close_when_down, lapsed.protected, lapsed.protection_optional) == (True, True, True)
    with b.transaction() as txn:
        again = txn.admit(key, PATH, ENVELOPE, None)
        assert isinstance(again, Allocation)
        txn.reserve(again, selector(9), "inband", True)
    assert a.lapsed_hold(key) is None  # a's copy is behind, its journal is not
    with b.transaction() as txn:
        txn.release(key)
    assert b.lapsed_hold(key) is None  # the last thing the key was is a reservation


def test_one_transactions_changes_reach_the_tables_in_their_order(
    replicas: Callable[[], ReservationStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group commit carries many set-ups' rows and state changes, written together at the
    end, and other changes in between that must see them (or be undone by them) in order."""
    from terrapin.store import transaction as transaction_module

    monkeypatch.setattr(transaction_module, "RESERVATION_ROWS_PER_INSERT", 2)  # several statements
    monkeypatch.setattr(transaction_module, "KEYS_PER_UPDATE", 2)
    a = replicas()
    with a.transaction() as txn:
        for context in range(1, 6):
            admit_in(txn, context)
        for context in (1, 2, 3):
            txn.set_state(ChannelKey("10.0.1.2", context), "active")
        txn.release(ChannelKey("10.0.1.2", 2))  # a row inserted in this transaction
        admit_in(txn, 2)  # and the key again, after its release
        txn.set_state(ChannelKey("10.0.1.2", 3), "failed")  # the last state counts
        txn.set_state(ChannelKey("10.0.1.2", 4), "active")
    expected = [(1, "active"), (2, INSTALLING), (3, "failed"), (4, "active"), (5, INSTALLING)]
    assert sorted((r.key.context, r.state) for r in a.all()) == expected
    fresh = replicas()  # the tables, read afresh
    assert sorted((r.key.context, r.state) for r in fresh.all()) == expected
    assert fresh.all() == a.all() and loads(fresh) == loads(a)


def test_a_failed_transaction_leaves_nothing(replicas: Callable[[], ReservationStore]) -> None:
    a = replicas()
    admit(a, 1)
    admit(a, 2, hold_seconds=30)
    before = (a.all(), a.holds(), loads(a))

    class Boom(Exception):
        pass

    with pytest.raises(Boom), a.transaction() as txn:
        admit_in(txn, 3)
        txn.release(ChannelKey("10.0.1.2", 1))
        hold = a.hold(ChannelKey("10.0.1.2", 2))
        assert hold is not None
        txn.reserve(hold.allocation, hold.selector, "inband", True)
        raise Boom
    assert (a.all(), a.holds(), loads(a)) == before  # the copy, at once
    again = replicas()
    assert (again.all(), again.holds(), loads(again)) == before  # and the tables
    assert isinstance(admit(a, 3), Allocation)  # the copy was rebuilt and decides correctly


def test_a_replica_behind_a_pruned_journal_rebuilds_its_copy(
    replicas: Callable[[], ReservationStore],
) -> None:
    a, b = replicas(), replicas()
    for context in range(1, 4):
        admit(a, context)
    with a.transaction() as txn:
        txn.release(ChannelKey("10.0.1.2", 2))
    assert a.prune_journal(older_than_s=-1) == 4
    b_before = b.cursor
    b.sync()
    assert b.cursor > b_before
    assert [r.key.context for r in b.all()] == [1, 3] and loads(b) == loads(a)


def test_a_store_of_a_newer_controller_is_refused(where: str) -> None:
    store = ReservationStore(where)
    store.close()
    from terrapin.store.drivers import PostgresDriver, SqliteDriver

    driver = PostgresDriver(where) if where.startswith("postgresql") else SqliteDriver(where)
    driver.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (LATEST + 1, "from the future", 0.0))
    driver.close()
    with pytest.raises(SchemaTooNew, match=f"version {LATEST + 1}"):
        ReservationStore(where)


def test_installing_rows_are_reloaded_as_they_are(replicas: Callable[[], ReservationStore]) -> None:
    a = replicas()
    admit(a, 1)
    b = replicas()
    record = b.get(ChannelKey("10.0.1.2", 1))
    assert record is not None and record.state == INSTALLING


def test_an_unreachable_postgresql_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1/terrapin"):
        ReservationStore("postgresql://terrapin@127.0.0.1:1/terrapin")


def test_a_reservation_as_the_journal_carries_it_reads_back_whole() -> None:
    """The journal's body splices in the allocation's JSON made for the row (made once)."""
    from terrapin.store.records import allocation_to_json, reservation_from_json, reservation_to_json

    store = ReservationStore(":memory:", ledger())
    assert isinstance(admit(store, 5), Allocation)
    (record,) = store.all()
    assert reservation_from_json(reservation_to_json(record)) == record
    given = reservation_to_json(record, allocation_to_json(record.allocation))
    assert reservation_from_json(given) == record
    store.close()


def test_an_allocation_keeps_its_tolerance_and_its_hops_jitter_across_a_restart() -> None:
    """docs/controller.md "Jitter": the first switch's policer tolerance and every hop's jitter
    are part of the promise, so a restarted controller writes the same policers; rows from
    before them read back as an exact switch."""
    from terrapin.store.records import allocation_from_json, allocation_to_json

    port = PortModel(PortId("s1", 2), 12_500_000, 96_000, 1500, jitter_us=2_000)
    envelope = ChannelEnvelope(6, 100_000, 6_000, 1500)
    made = AdmissionLedger([port]).admit(ChannelKey("h", 1), [port.port], envelope)
    assert isinstance(made, Allocation) and made.tolerance_us == 2_000 and made.hops[0].jitter_us == 2_000
    assert allocation_from_json(allocation_to_json(made)) == made
    old = json.loads(allocation_to_json(made))
    del old["tolerance_us"]
    for hop in old["hops"]:
        del hop["jitter_us"]
    before = allocation_from_json(json.dumps(old))
    assert before.tolerance_us == 0 and before.hops[0].jitter_us == 0


def test_a_moved_or_down_reservation_is_the_same_for_every_replica_and_after_a_restart(
    replicas: Callable[[], ReservationStore],
) -> None:
    """Restoration's writes (Transaction.readmit and move): a reservation admitted again is
    moved with its new allocation, its old released first; one no path admits is down, holding
    nothing, with its note. Another replica following the journal, and one reloading the
    tables, see both the same."""
    a = replicas()
    assert isinstance(admit(a, 1), Allocation) and isinstance(admit(a, 2), Allocation)
    one, two = ChannelKey("10.0.1.2", 1), ChannelKey("10.0.1.2", 2)
    b = replicas()
    with a.transaction() as txn:
        record = a.get(one)
        assert record is not None
        again = txn.readmit(one, PATH, ENVELOPE)
        assert isinstance(again, Allocation)
        moved = txn.move(one, again)
        txn.unadmit(two)
        down = txn.move(two, None, "no path: s2 is not connected")
    assert moved is not None and moved.state == "active" and moved.channel_id == record.channel_id
    assert down is not None and down.state == "down" and down.note == "no path: s2 is not connected"
    assert a.ledger is not None and a.ledger.get(two) is None and a.ledger.get(one) is not None
    for other in (b, replicas()):
        other.sync()
        kept = other.get(two)
        assert kept is not None and (kept.state, kept.note) == ("down", "no path: s2 is not connected")
        assert other.ledger is not None and other.ledger.get(two) is None
        assert other.ledger.get(one) is not None
    # back up: admitted again from down, the note gone
    with a.transaction() as txn:
        again = txn.readmit(two, PATH, ENVELOPE)
        assert isinstance(again, Allocation)
        txn.move(two, again)
    b.sync()
    back = b.get(two)
    assert back is not None and (back.state, back.note) == ("active", "")
    assert b.ledger is not None and b.ledger.get(two) is not None
