"""The write side of the reservation store: a Transaction is what may change inside
`ReservationStore.transaction()` (admit, reserve, hold, refresh, release, set_state, move), each change
made to this replica's copy at once and to the tables and the journal in the open database
transaction, the rows batched until flush() (a group commit carries dozens of changes). It owns
the tables' row layout and the multi-row INSERT both databases take (insert_rows).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from terrapin.admission import AdmissionLedger, Allocation, ChannelEnvelope, Decision
from terrapin.admission.model import ChannelKey, PortId
from terrapin.p4program import MAX_CHANNELS
from terrapin.paths import ChannelSelector
from terrapin.store.drivers import Driver
from terrapin.store.mirror import HOLD, MOVE, REFRESH, RELEASE, RESERVE, STATE
from terrapin.store.records import (
    ACTIVE,
    DOWN,
    INSTALLING,
    Hold,
    Reservation,
    allocation_to_json,
    hold_to_json,
    reservation_to_json,
)

if TYPE_CHECKING:
    from terrapin.store.store import ReservationStore

LOG = logging.getLogger("terrapin.store")

MAX_CHANNEL_ID = MAX_CHANNELS  # channel_id indexes the data plane's per-channel counters
NEXT_ID = "next_reservation_id"
# SQLite takes at most 32,766 parameters a statement (5 a journal row).
JOURNAL_ROWS_PER_INSERT = 1000
RESERVATION_ROWS_PER_INSERT = 500  # 13 a row
KEYS_PER_UPDATE = 1000  # 2 a key

# A table's columns as the rows written to it carry them, with their SQL types (insert_rows).
Columns = tuple[tuple[str, str], ...]
RESERVATION_COLUMNS: Columns = (
    ("channel_id", "integer"),
    ("initiator", "text"),
    ("context", "bigint"),
    ("src", "text"),
    ("dst", "text"),
    ("protocol", "integer"),
    ("flow_key", "text"),
    ("origin", "text"),
    ("state", "text"),
    ("demote", "integer"),
    ("allocation", "text"),
    ("created_at", "double precision"),
    ("reservation_id", "bigint"),
    ("note", "text"),
    ("close_when_down", "integer"),
)
_JOURNAL_COLUMNS: Columns = (
    ("kind", "text"),
    ("initiator", "text"),
    ("context", "bigint"),
    ("body", "text"),
    ("written_at", "double precision"),
)


def insert_rows(
    driver: Driver, table: str, columns: Columns, rows: Sequence[tuple[Any, ...]], returning: str = ""
) -> list[tuple[Any, ...]]:
    """One INSERT of many rows (at most as many as the caller's chunk; SQLite takes at most
    32,766 parameters a statement). On PostgreSQL the rows go as one array per column, unnested:
    a statement of a parameter per column is parsed once and cached by psycopg, whereas a VALUES
    list of thousands of parameters is parsed in Python at every commit (a ninth of the
    primary's time in a burst of set-ups). The arrays are sent in binary (psycopg's %b): as text,
    every element is escaped by a regular expression, which costs twice the VALUES list."""
    names = ", ".join(name for name, _type in columns)
    tail = f" RETURNING {returning}" if returning else ""
    if driver.dialect == "postgres":
        arrays = ", ".join(f"{_BINARY}::{sql_type}[]" for _name, sql_type in columns)
        by_column = tuple(list(values) for values in zip(*rows, strict=True))
        sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays}){tail}"
        return driver.fetchall(sql, by_column) if returning else _executed(driver, sql, by_column)
    one = "(" + ", ".join(["?"] * len(columns)) + ")"
    sql = f"INSERT INTO {table} ({names}) VALUES " + ", ".join([one] * len(rows)) + tail
    flat = tuple(value for row in rows for value in row)
    return driver.fetchall(sql, flat) if returning else _executed(driver, sql, flat)


# psycopg's binary placeholder, written as it is: the driver turns only "?" into psycopg's "%s".
_BINARY = "%b"


def _executed(driver: Driver, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    driver.execute(sql, params)
    return []


class StoreFull(Exception):
    """All channel ids (the data plane's MAX_CHANNELS) are in use."""


class DuplicateReservation(Exception):
    """A reservation with this (initiator, context) exists already."""


class Transaction:
    """What may change inside `ReservationStore.transaction()`: each call changes this
    replica's copy and writes the tables and the journal in the open transaction."""

    def __init__(self, store: ReservationStore) -> None:
        self._store = store
        self._mirror = store._mirror
        self._driver = store._driver
        self.changed = False  # the copy was changed (so a rollback must rebuild it)
        self.last_seq = 0
        self.expired: list[Hold] = []  # holds this transaction found past their deadline
        self._undo: list[Callable[[], object]] = []  # how to put the copy back, newest last
        # Written once, at the end (flush): a group commit carries dozens of changes, and a
        # statement each for the journal and the next id was most of the store's time.
        self._journal_rows: list[tuple[str, str, int, str, float]] = []
        self._next_reservation_id: int | None = None
        # So are new reservations' rows and state changes (a set-up's two changes), until a
        # statement that might touch the same rows comes (_write_deferred keeps the order).
        self._new_rows: list[tuple[Any, ...]] = []
        self._new_states: dict[ChannelKey, str] = {}

    def undo(self) -> None:
        for step in reversed(self._undo):
            try:
                step()
            except Exception:  # the copy is rebuilt from the tables anyway
                LOG.exception("undoing a failed transaction's change to the copy")
        self._undo.clear()

    @property
    def ledger(self) -> AdmissionLedger | None:
        return self._mirror.ledger

    def admit(
        self,
        key: ChannelKey,
        path: Sequence[PortId],
        envelope: ChannelEnvelope,
        hold_seconds: float | None = None,
        second: Sequence[PortId] | None = None,
    ) -> Decision:
        """The admission test against the current copy (on both paths, with `second`: a
        protected channel); an allocation is entered in the ledger (and must then be recorded
        with reserve() or hold(), or released)."""
        ledger = self.ledger
        assert ledger is not None, "admission needs a store with a ledger"
        decision = ledger.admit(key, path, envelope, hold_seconds=hold_seconds, second=second)
        if isinstance(decision, Allocation):
            self.changed = True
            self._undo.append(lambda: ledger.release(key))
        return decision

    def unadmit(self, key: ChannelKey) -> None:
        """Take a reservation's allocation out of the ledger (it is going down, or being
        admitted again: readmit); the reservation stays."""
        ledger = self.ledger
        assert ledger is not None, "admission needs a store with a ledger"
        old = ledger.release(key)
        if old is not None:
            self.changed = True
            self._undo.append(lambda: ledger.restore(old))

    def readmit(
        self,
        key: ChannelKey,
        path: Sequence[PortId],
        envelope: ChannelEnvelope,
        second: Sequence[PortId] | None = None,
    ) -> Decision:
        """The admission test of a reservation on a new path, its own allocation released first,
        so its capacity counts once on the hops the paths share. Admitted, the new allocation is
        in the ledger; denied, none is (record either with move())."""
        self.unadmit(key)
        ledger = self.ledger
        assert ledger is not None
        decision = ledger.admit(key, path, envelope, second=second)
        if isinstance(decision, Allocation):
            self.changed = True
            self._undo.append(lambda: ledger.release(key))
        return decision

    def reinstate(self, allocation: Allocation) -> None:
        """Put back an allocation a failed readmit() took out of the ledger, untested (the
        reservation keeps what it held: admitted once, it is not tested again)."""
        ledger = self.ledger
        assert ledger is not None
        ledger.restore(allocation)
        key = allocation.key
        self._undo.append(lambda: ledger.release(key))

    def reserve(
        self,
        allocation: Allocation,
        selector: ChannelSelector,
        origin: str,
        demote_excess: bool,
        state: str = INSTALLING,
        close_when_down: bool = False,
    ) -> Reservation:
        """Record an admitted allocation (or a hold becoming one) as a reservation, with the
        lowest free channel id and the next reservation id."""
        m = self._mirror
        key = allocation.key
        if key in m.reservations:
            raise DuplicateReservation(f"{key} is reserved already")
        channel_id = m.free_channel_id(MAX_CHANNEL_ID)
        if channel_id is None:
            raise StoreFull(f"all {MAX_CHANNEL_ID} channel ids are in use")
        record = Reservation(
            channel_id=channel_id,
            key=key,
            selector=selector,
            origin=origin,
            state=state,
            demote_excess=demote_excess,
            allocation=allocation,
            created_at=time.time(),
            reservation_id=m.next_reservation_id,
            close_when_down=close_when_down,
        )
        held = m.holds.get(key)
        was_held = held is not None
        in_ledger = m.ledger is not None and m.ledger.get(key) is not None
        self.changed = True
        next_id = m.next_reservation_id
        m.add_reservation(record, in_ledger=in_ledger)

        def undo() -> None:
            m.remove(key)
            m.next_reservation_id = next_id
            if held is not None:
                m.add_hold(held, in_ledger=False)
            elif in_ledger and m.ledger is not None:
                # the allocation the caller admitted stays admitted, as before this call
                m.ledger.restore(allocation)

        self._undo.append(undo)
        if was_held:
            self._execute(
                "DELETE FROM holds WHERE initiator = ? AND context = ?", (key.initiator, key.context)
            )
        allocation_json = allocation_to_json(allocation)
        self._new_rows.append(
            (
                record.channel_id,
                key.initiator,
                key.context,
                selector.src,
                selector.dst,
                selector.protocol,
                str(selector.flow_key),
                origin,
                state,
                int(demote_excess),
                allocation_json,
                record.created_at,
                record.reservation_id,
                record.note,
                int(record.close_when_down),
            )
        )
        self._next_reservation_id = record.reservation_id + 1
        self._journal(RESERVE, key, reservation_to_json(record, allocation_json))
        return record

    def hold(
        self,
        allocation: Allocation,
        selector: ChannelSelector,
        close_when_down: bool = False,
        protected: bool = False,
        protection_optional: bool = False,
    ) -> Hold:
        """Record a tentative hold the ledger has just admitted (its deadline is the ledger's),
        with what its request asked beyond the allocation."""
        m = self._mirror
        ledger = m.ledger
        assert ledger is not None
        deadline = ledger.deadline(allocation.key)
        assert deadline is not None, "hold() records a tentative admission"
        held = Hold(
            allocation.key, selector, allocation, deadline, close_when_down, protected, protection_optional
        )
        self.changed = True
        m.add_hold(held, in_ledger=True)
        self._undo.append(lambda: m.remove(held.key))
        body = hold_to_json(held)
        self._execute(
            "INSERT INTO holds VALUES (?, ?, ?, ?)",
            (held.key.initiator, held.key.context, body, held.expires_at),
        )
        self._journal(HOLD, held.key, body)
        return held

    def refresh(self, key: ChannelKey, hold_seconds: float) -> bool:
        """Extend a tentative hold (a retransmitted REQUEST_ADMIT); False if it is gone."""
        m = self._mirror
        hold = m.holds.get(key)
        if hold is None or m.ledger is None:
            return False
        deadline = m.ledger.clock() + hold_seconds
        self.changed = True
        m.refresh(key, deadline)
        self._undo.append(lambda: m.refresh(key, hold.expires_at))
        body = hold_to_json(m.holds[key])
        self._execute(
            "UPDATE holds SET expires_at = ?, body = ? WHERE initiator = ? AND context = ?",
            (deadline, body, key.initiator, key.context),
        )
        self._journal(REFRESH, key, json.dumps({"expires_at": deadline}))
        return True

    def release(self, key: ChannelKey) -> Reservation | Hold | None:
        """Remove the reservation or hold of `key` (and its ledger entry)."""
        self.changed = True
        m = self._mirror
        removed = m.remove(key)
        if removed is None:
            return None
        if isinstance(removed, Reservation):
            self._undo.append(lambda: m.add_reservation(removed, in_ledger=False))
        else:
            self._undo.append(lambda: m.add_hold(removed, in_ledger=False))
        table = "reservations" if isinstance(removed, Reservation) else "holds"
        self._execute(
            f"DELETE FROM {table} WHERE initiator = ? AND context = ?", (key.initiator, key.context)
        )
        self._journal(RELEASE, key, "")
        return removed

    def set_state(self, key: ChannelKey, state: str) -> Reservation | None:
        """The reservation with its new state, or None if it is gone (another replica's
        transaction removed it)."""
        self.changed = True
        m = self._mirror
        before = m.reservations.get(key)
        record = m.set_state(key, state)
        if record is None or before is None:
            return None
        self._undo.append(lambda: m.set_state(key, before.state))
        self._new_states[key] = state
        self._journal(STATE, key, json.dumps({"state": state}))
        return record

    def move(self, key: ChannelKey, allocation: Allocation | None, note: str = "") -> Reservation | None:
        """A reservation's new allocation, admitted by this transaction (the old one released
        first: its capacity counted once), or with None its going DOWN, holding nothing, `note`
        saying why; it keeps its ids and its last allocation to be admitted again with. The
        reservation as it is now, or None if it is gone."""
        m = self._mirror
        before = m.reservations.get(key)
        if before is None:
            return None
        state, kept = (ACTIVE, allocation) if allocation is not None else (DOWN, before.allocation)
        record = replace(before, allocation=kept, state=state, note=note)
        self.changed = True
        m.replace(record)
        self._undo.append(lambda: m.replace(before))
        allocation_json = allocation_to_json(kept)
        self._execute(
            "UPDATE reservations SET allocation = ?, state = ?, note = ? WHERE initiator = ? AND context = ?",
            (allocation_json, state, note, key.initiator, key.context),
        )
        self._journal(MOVE, key, reservation_to_json(record, allocation_json))
        return record

    def expire_holds(self) -> list[Hold]:
        """Holds whose deadline has passed (by the ledger's clock) are released."""
        m = self._mirror
        ledger = m.ledger
        if ledger is None or not m.holds:
            return []
        ledger.expire()
        now = ledger.clock()
        gone = [h for h in m.holds.values() if h.expires_at <= now or ledger.get(h.key) is None]
        for hold in gone:
            LOG.info("tentative hold %s expired", hold.key)
            self.release(hold.key)
        return gone

    def _journal(self, kind: str, key: ChannelKey, body: str) -> None:
        self._journal_rows.append((kind, key.initiator, key.context, body, time.time()))

    def _execute(self, sql: str, params: tuple[Any, ...]) -> None:
        """A statement now, after the deferred writes it might depend on or undo."""
        self._write_deferred()
        self._driver.execute(sql, params)

    def _write_deferred(self) -> None:
        """The new reservations' rows, a multi-row INSERT per chunk, then their state changes,
        an UPDATE per state (a state change is of a row inserted before it, or already there;
        a key changed twice has only its last state kept)."""
        rows, self._new_rows = self._new_rows, []
        for start in range(0, len(rows), RESERVATION_ROWS_PER_INSERT):
            insert_rows(
                self._driver,
                "reservations",
                RESERVATION_COLUMNS,
                rows[start : start + RESERVATION_ROWS_PER_INSERT],
            )
        states, self._new_states = self._new_states, {}
        by_state: dict[str, list[ChannelKey]] = {}
        for key, state in states.items():
            by_state.setdefault(state, []).append(key)
        for state, keys in by_state.items():
            for start in range(0, len(keys), KEYS_PER_UPDATE):
                self._set_states(state, keys[start : start + KEYS_PER_UPDATE])

    def _set_states(self, state: str, keys: Sequence[ChannelKey]) -> None:
        # A list of keys, not unnest'ed arrays as in insert_rows: on PostgreSQL that UPDATE
        # made the server's CPU over 10,000 set-ups sent one per request go from 14 to 21 s (a
        # plan for one key looks the same; why it costs more under load was not found).
        self._driver.execute(
            "UPDATE reservations SET state = ? WHERE (initiator, context) IN ("
            + ",".join(["(?, ?)"] * len(keys))
            + ")",
            (state, *(value for key in keys for value in (key.initiator, key.context))),
        )

    def flush(self) -> None:
        """Write what the changes left for the end: the next reservation id, and the journal
        entries in one statement (in the order of the changes, which is the order of their
        sequence numbers), and the deferred rows."""
        self._write_deferred()
        if self._next_reservation_id is not None:
            self._store._set_meta(NEXT_ID, self._next_reservation_id)
            self._next_reservation_id = None
        rows, self._journal_rows = self._journal_rows, []
        for start in range(0, len(rows), JOURNAL_ROWS_PER_INSERT):
            chunk = rows[start : start + JOURNAL_ROWS_PER_INSERT]
            seqs = insert_rows(self._driver, "journal", _JOURNAL_COLUMNS, chunk, returning="seq")
            self.last_seq = max(self.last_seq, *(int(row[0]) for row in seqs))
