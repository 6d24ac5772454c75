"""The reservation store: reservations, tentative holds and the primary's lease, on SQLite (one
controller) or PostgreSQL (any number of replicas).

Every change is made in a `transaction()`: it takes the admission lock, brings this replica's
copy (store/mirror.py) up to date with the journal, expires due holds, and lets the caller decide
against that copy and record what it decided, all before the lock is released. So the
admission test and the write it justifies are one transaction, and replicas admitting at once
never over-admit a port (docs/deployment.md, "The store"). Reads are answered from the copy.

Two numbers name a reservation. `channel_id` is the data plane's counter index (0..MAX_CHANNELS
− 1, the lowest free one, so it is reused). `reservation_id` is what clients hold (the REST
`id`): never reused, also across restarts, so a client holding the id of a deleted reservation
can never delete someone else's channel with it. The next one is kept in `meta`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from terrapin.admission import AdmissionLedger, Allocation
from terrapin.admission.model import ChannelKey
from terrapin.paths import ChannelSelector
from terrapin.store import migrations
from terrapin.store.drivers import Driver, PostgresDriver, SqliteDriver, StoreUnavailable
from terrapin.store.mirror import HOLD, RESERVE, Mirror
from terrapin.store.records import (
    INSTALLING,
    Hold,
    Reservation,
    allocation_from_json,
    hold_from_json,
)
from terrapin.store.transaction import NEXT_ID, RESERVATION_COLUMNS, Transaction

LOG = logging.getLogger("terrapin.store")
T = TypeVar("T")

_PRUNED = "journal_pruned_through"
LEASE = "primary"
_COLUMNS = ", ".join(name for name, _type in RESERVATION_COLUMNS)


class NotPrimary(Exception):
    """This replica does not hold the primary's lease (any more): it may not change the store."""


@dataclass(frozen=True)
class Fence:
    """Who may write: the lease holder `replica` in its term `term`. A transaction carrying a
    fence fails with NotPrimary unless the lease still names exactly that holder and term, so a
    replica that lost its lease (and does not know yet) changes nothing."""

    replica: str
    term: int


@dataclass(frozen=True)
class Lease:
    holder: str
    url: str
    term: int
    expires_at: float
    now: float  # the database's clock when this was read

    @property
    def valid(self) -> bool:
        return self.expires_at > self.now


def is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def open_driver(location: str | Path, application_name: str = "terrapin-controller") -> Driver:
    """A PostgreSQL URL (postgresql://user@host:port/db) or a SQLite file (or :memory:)."""
    text = str(location)
    if is_postgres(text):
        return PostgresDriver(text, application_name)
    return SqliteDriver(text)


class ReservationStore:
    def __init__(
        self,
        where: str | Path | Driver = ":memory:",
        ledger: AdmissionLedger | None = None,
        application_name: str = "terrapin-controller",
    ) -> None:
        """`application_name`: how this replica shows in PostgreSQL's pg_stat_activity."""
        self._driver: Driver = (
            where if not isinstance(where, str | Path) else open_driver(where, application_name)
        )
        self._location = None if not isinstance(where, str | Path) else str(where)
        self._application_name = application_name
        self._mirror = Mirror(ledger)
        self._lock = threading.RLock()
        self._leases = LeaseTable(self._driver, self._lock)
        migrations.migrate(self._driver)
        with self._lock, self._driver.snapshot():
            self._reload()

    @property
    def dialect(self) -> str:
        return self._driver.dialect

    @property
    def ledger(self) -> AdmissionLedger | None:
        return self._mirror.ledger

    def close(self) -> None:
        with self._lock:
            self._driver.close()

    # ---- reading (this replica's copy) -----------------------------------------------------

    def get(self, key: ChannelKey) -> Reservation | None:
        return self._mirror.reservations.get(key)

    def get_by_reservation_id(self, reservation_id: int) -> Reservation | None:
        return self._mirror.by_reservation_id.get(reservation_id)

    def get_by_id(self, channel_id: int) -> Reservation | None:
        return self._mirror.by_channel_id.get(channel_id)

    def find_selector(self, selector: ChannelSelector) -> ChannelKey | None:
        """The channel already using this match, if any (the data plane allows one entry)."""
        return self._mirror.by_selector.get(selector)

    def all(self) -> list[Reservation]:
        return sorted(self._mirror.reservations.values(), key=lambda r: r.channel_id)

    def count(self) -> int:
        return len(self._mirror.reservations)

    def largest_context(self, initiator: str) -> int:
        return self._mirror.largest_context.get(initiator, -1)

    def hold(self, key: ChannelKey) -> Hold | None:
        return self._mirror.holds.get(key)

    def lapsed_hold(self, key: ChannelKey) -> Hold | None:
        """The hold `key` had when it was last held, if that hold lapsed (expired or released)
        without becoming a reservation and nothing holds the key now: what its request asked,
        from the journal, so any replica finds it for as long as the journal keeps it."""
        if key in self._mirror.holds or key in self._mirror.reservations:
            return None
        with self._lock, self._driver.snapshot():
            row = self._driver.fetchone(
                "SELECT kind, body FROM journal WHERE initiator = ? AND context = ? AND kind IN (?, ?) "
                "ORDER BY seq DESC LIMIT 1",
                (key.initiator, key.context, HOLD, RESERVE),
            )
        if row is None or row[0] != HOLD:
            return None
        return hold_from_json(str(row[1]))

    def holds(self) -> list[Hold]:
        return list(self._mirror.holds.values())

    @property
    def cursor(self) -> int:
        """The last journal entry this replica's copy includes."""
        return self._mirror.cursor

    # ---- changing ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, fence: Fence | None = None) -> Iterator[Transaction]:
        """The one way to change the store; see the module's comment. An exception inside
        rolls the database back, and a copy that had been changed is rebuilt before it is used
        again; StoreUnavailable when the database cannot be reached, NotPrimary when `fence`
        no longer holds."""
        with self._lock:
            txn = Transaction(self)
            try:
                with self._driver.locked():
                    if fence is not None:
                        self._check_fence(fence)
                    self._catch_up()
                    txn.expired = txn.expire_holds()
                    yield txn
                    txn.flush()
            except BaseException:
                if txn.changed:
                    # Put the copy back as it was (reads until the next transaction see what
                    # the tables hold), and rebuild it from them before it is used to decide:
                    # a commit whose answer was lost may have happened after all.
                    txn.undo()
                    self._mirror.stale = True
                raise
            if txn.last_seq:
                self._mirror.cursor = max(self._mirror.cursor, txn.last_seq)

    def sync(self) -> int:
        """Apply what other replicas committed since this copy was last brought up to date
        (no lock: a backup following the primary). Returns the entries applied."""
        with self._lock:
            before = self._mirror.cursor
            try:
                with self._driver.snapshot():
                    self._catch_up()
            except StoreUnavailable:
                raise
            return max(0, self._mirror.cursor - before)

    def _catch_up(self) -> None:
        m = self._mirror
        if m.stale:
            self._reload()
            return
        rows = self._driver.fetchall(
            "SELECT seq, kind, initiator, context, body FROM journal WHERE seq > ? "
            "UNION ALL SELECT -1, 'pruned', '', value, '' FROM meta WHERE key = ? AND value > ? "
            "ORDER BY 1",
            (m.cursor, _PRUNED, m.cursor),
        )
        if rows and int(rows[0][0]) == -1:
            LOG.info("the journal was pruned past this replica's copy: reloading from the tables")
            self._reload()
            return
        for seq, kind, initiator, context, body in rows:
            m.apply(str(kind), ChannelKey(str(initiator), int(context)), str(body))
            m.cursor = int(seq)

    def _reload(self) -> None:
        """Rebuild the copy from the tables; the caller holds a transaction that sees one
        state of them."""
        m = self._mirror
        d = self._driver
        rows = d.fetchall(f"SELECT {_COLUMNS} FROM reservations ORDER BY channel_id")
        holds = d.fetchall("SELECT body FROM holds")
        marks = dict(d.fetchall("SELECT key, value FROM meta WHERE key IN (?, ?)", (NEXT_ID, _PRUNED)))
        last = d.fetchone("SELECT MAX(seq) FROM journal")
        m.clear()
        for row in rows:
            m.add_reservation(_row(row), in_ledger=False)
        for (body,) in holds:
            hold = hold_from_json(str(body))
            if hold.key not in m.reservations:
                m.add_hold(hold, in_ledger=False)
        m.next_reservation_id = max(m.next_reservation_id, int(marks.get(NEXT_ID, 1)))
        seq = int(last[0]) if last is not None and last[0] is not None else 0
        m.cursor = max(seq, int(marks.get(_PRUNED, 0)))
        m.stale = False

    def _check_fence(self, fence: Fence) -> None:
        lease = self._read_lease()
        if lease is None or not lease.valid or (lease.holder, lease.term) != (fence.replica, fence.term):
            held = "nobody" if lease is None else f"{lease.holder} (term {lease.term})"
            raise NotPrimary(f"{fence.replica} (term {fence.term}) is not primary: the lease names {held}")

    def prune_journal(self, older_than_s: float) -> int:
        """Drop journal entries older than this (a replica further behind reloads from the
        tables instead). Returns how many were dropped."""
        with self._lock, self._driver.locked():
            row = self._driver.fetchone(
                "SELECT MAX(seq), COUNT(*) FROM journal WHERE written_at < ?", (time.time() - older_than_s,)
            )
            if row is None or row[0] is None:
                return 0
            through = int(row[0])
            self._driver.execute("DELETE FROM journal WHERE seq <= ?", (through,))
            self._set_meta(_PRUNED, through)
            return int(row[1])

    def _set_meta(self, key: str, value: int) -> None:
        self._driver.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # ---- the primary's lease (LeaseTable) -----------------------------------------------------

    def lease_table(self, own_connection: bool = False) -> LeaseTable:
        """The lease, on this store's connection or (`own_connection`) a connection of its own,
        for a renewal that must not wait behind this replica's transactions."""
        if own_connection and self._location not in (None, ":memory:"):
            return LeaseTable(open_driver(self._location, self._application_name + " (lease)"))
        return LeaseTable(self._driver, self._lock)

    def lease(self) -> Lease | None:
        return self._leases.read()

    def claim_lease(self, holder: str, url: str, seconds: float, term: int | None) -> Lease | None:
        return self._leases.claim(holder, url, seconds, term)

    def release_lease(self, holder: str, term: int) -> None:
        self._leases.release(holder, term)

    def _read_lease(self) -> Lease | None:
        return self._leases.read()

    # ---- one-step changes (tests, tools): each its own transaction ----------------------------

    def add(
        self,
        allocation: Allocation,
        selector: ChannelSelector,
        origin: str,
        demote_excess: bool,
        state: str = INSTALLING,
    ) -> Reservation:
        with self.transaction() as txn:
            return txn.reserve(allocation, selector, origin, demote_excess, state)

    def remove(self, key: ChannelKey) -> bool:
        with self.transaction() as txn:
            return isinstance(txn.release(key), Reservation)

    def set_state(self, key: ChannelKey, state: str) -> None:
        with self.transaction() as txn:
            txn.set_state(key, state)


class GroupCommit:
    """Changes of several concurrent requests in one transaction (group commit), run off the
    event loop.

    Each commit waits for the log to reach the disk (PostgreSQL's synchronous commit) while it
    holds the admission lock: one transaction per change would bound set-ups by the disk's
    flush rate, and a transaction run on the event loop would stop it for every round trip (on
    the development VM the primary's loop spent a fifth of its time waiting on PostgreSQL).
    So `await run(work)` queues `work(txn)`, and one worker thread at a time runs everything
    queued so far, in order, in one `ReservationStore.transaction()`, while the loop goes on
    accepting requests that queue for the next. Each caller gets its own result; the store's
    exceptions (StoreUnavailable, CommitUnknown, NotPrimary) go to every caller of the batch:
    none of its changes happened (or, for CommitUnknown, all may have).

    The work runs in the worker thread: it may read and change the store only through `txn`,
    and the ledger (which locks itself). Readers on the event loop see the store's copy as it
    changes, one whole dictionary operation at a time."""

    def __init__(self, store: ReservationStore, fence: Callable[[], Fence | None]) -> None:
        self._store = store
        self._fence = fence
        self._queue: list[tuple[Callable[[Transaction], Any], asyncio.Future[Any]]] = []
        self._draining = False
        self._drainer: asyncio.Task[None] | None = None
        self.batches = 0  # transactions run (for the figures: changes per transaction)
        self.changes = 0

    async def run(self, work: Callable[[Transaction], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.append((work, future))
        if not self._draining:
            self._draining = True
            self._drainer = loop.create_task(self._drain(), name="group-commit")
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                live = [(work, future) for work, future in batch if not future.cancelled()]
                if not live:
                    continue
                fence = self._fence()  # read on the loop, where the lease's term changes
                try:
                    results = await asyncio.to_thread(self._commit, [work for work, _ in live], fence)
                except BaseException as exc:  # the whole batch failed, and nothing of it happened
                    for _work, future in live:
                        if not future.done():
                            future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_work, future), result in zip(live, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._draining = False

    def _commit(self, works: list[Callable[[Transaction], Any]], fence: Fence | None) -> list[Any]:
        with self._store.transaction(fence) as txn:
            results = [work(txn) for work in works]
        self.batches += 1
        self.changes += len(works)
        return results


class LeaseTable:
    """The lease row: who should be primary. Each step is one statement, so two replicas
    claiming at once cannot both win; every time is the database's clock."""

    def __init__(self, driver: Driver, lock: threading.RLock | None = None) -> None:
        self._driver = driver
        self._owned = lock is None  # a connection of its own, closed with it
        self._lock = lock or threading.RLock()
        self._now = _NOW[driver.dialect]

    def read(self) -> Lease | None:
        with self._lock:
            row = self._driver.fetchone(
                f"SELECT holder, url, term, expires_at, {self._now} FROM lease WHERE name = ?", (LEASE,)
            )
        if row is None:
            return None
        return Lease(str(row[0]), str(row[1]), int(row[2]), float(row[3]), float(row[4]))

    def claim(self, holder: str, url: str, seconds: float, term: int | None) -> Lease | None:
        """Renew the lease if `term` is this holder's and nobody took it since; else take it if
        it is free or expired. Returns the lease as it stands afterwards (None if none exists)."""
        now = self._now
        with self._lock:
            if term is not None:
                self._driver.execute(
                    f"UPDATE lease SET expires_at = {now} + ?, url = ? "
                    "WHERE name = ? AND holder = ? AND term = ?",
                    (seconds, url, LEASE, holder, term),
                )
            else:
                self._driver.execute(
                    f"UPDATE lease SET holder = ?, url = ?, term = term + 1, expires_at = {now} + ? "
                    f"WHERE name = ? AND expires_at <= {now}",
                    (holder, url, seconds, LEASE),
                )
                self._driver.execute(
                    f"INSERT INTO lease VALUES (?, ?, ?, 1, {now} + ?) ON CONFLICT (name) DO NOTHING",
                    (LEASE, holder, url, seconds),
                )
            return self.read()

    def release(self, holder: str, term: int) -> None:
        """Give the lease up now (a clean stop), so a backup need not wait for it to expire."""
        with self._lock:
            self._driver.execute(
                f"UPDATE lease SET expires_at = {self._now} WHERE name = ? AND holder = ? AND term = ?",
                (LEASE, holder, term),
            )

    def close(self) -> None:
        if self._owned:
            self._driver.close()


# The database's clock in seconds since the epoch, so every replica's lease is judged by one clock.
_NOW = {
    "postgres": "EXTRACT(EPOCH FROM clock_timestamp())::double precision",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}


def _row(row: tuple[Any, ...]) -> Reservation:
    (
        cid,
        initiator,
        context,
        src,
        dst,
        protocol,
        flow_key,
        origin,
        state,
        demote,
        alloc,
        at,
        rid,
        note,
        close,
    ) = row
    return Reservation(
        channel_id=int(cid),
        key=ChannelKey(str(initiator), int(context)),
        selector=ChannelSelector(str(src), str(dst), int(protocol), int(flow_key)),
        origin=str(origin),
        state=str(state),
        demote_excess=bool(demote),
        allocation=allocation_from_json(str(alloc)),
        created_at=float(at),
        reservation_id=int(rid),
        note=str(note),
        close_when_down=bool(close),
    )
