"""Reservations in SQLite: what survives a controller restart.

A row is written before any switch is programmed (state "installing") and marked "active"
once every hop is written, so after a crash the controller knows every channel that may exist
on a switch and can reconcile instead of guessing.

Two numbers name a reservation. `channel_id` is the data plane's counter index (0..8191, the
lowest free one, so it is reused). `reservation_id` is what clients hold (the REST `id`): it
is never reused, also across restarts, so a client holding the id of a deleted reservation can
never delete someone else's channel with it. The next one is kept in the `meta` table.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from terrapin.admission.model import (
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    HopAllocation,
    Policer,
    PortId,
    Rounding,
)
from terrapin.paths import ChannelSelector

INSTALLING = "installing"
ACTIVE = "active"
MAX_CHANNEL_ID = 8192  # p4src MAX_CHANNELS: channel_id indexes the yellow/red counters

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reservations (
    channel_id  INTEGER PRIMARY KEY,
    initiator   TEXT NOT NULL,
    context     INTEGER NOT NULL,
    src         TEXT NOT NULL,
    dst         TEXT NOT NULL,
    protocol    INTEGER NOT NULL,
    flow_key    TEXT NOT NULL,
    origin      TEXT NOT NULL,
    state       TEXT NOT NULL,
    demote      INTEGER NOT NULL,
    allocation  TEXT NOT NULL,
    created_at  REAL NOT NULL,
    reservation_id INTEGER,
    UNIQUE (initiator, context)
);
CREATE INDEX IF NOT EXISTS reservations_selector ON reservations (src, dst, protocol, flow_key);
CREATE TABLE IF NOT EXISTS meta (
    key    TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
);
"""
# A store written before reservation ids existed: its rows keep their channel id as their id.
_ADD_RESERVATION_ID = """
ALTER TABLE reservations ADD COLUMN reservation_id INTEGER;
UPDATE reservations SET reservation_id = channel_id;
"""
_NEXT_ID = "next_reservation_id"
FIRST_RESERVATION_ID = 1


class StoreFull(Exception):
    """All channel ids (the data plane's MAX_CHANNELS) are in use."""


@dataclass(frozen=True)
class Reservation:
    channel_id: int
    key: ChannelKey
    selector: ChannelSelector
    origin: str  # "rest" or "inband"
    state: str
    demote_excess: bool
    allocation: Allocation
    created_at: float
    reservation_id: int  # the REST id: never reused (channel_id is the data plane's, and is)


def _fields(obj: Any) -> dict[str, Any]:
    # Field by field: dataclasses.asdict deep-copies and was a measurable share of a set-up.
    return {f.name: getattr(obj, f.name) for f in dataclass_fields(obj)}


def allocation_to_json(a: Allocation) -> str:
    return json.dumps(
        {
            "key": [a.key.initiator, a.key.context],
            "requested": {**_fields(a.requested), "policer": _fields(a.requested.policer)},
            "rate": a.rate,
            "burst": a.burst,
            "rounding": _fields(a.rounding),
            "hops": [{**_fields(h), "port": [h.port.switch, h.port.port]} for h in a.hops],
        },
        sort_keys=True,
    )


def allocation_from_json(text: str) -> Allocation:
    d: dict[str, Any] = json.loads(text)
    return Allocation(
        key=ChannelKey(d["key"][0], int(d["key"][1])),
        # Rows written before window policers have no "policer": they are meter channels.
        requested=ChannelEnvelope(
            **{**d["requested"], "policer": Policer(**d["requested"].get("policer", {}))}
        ),
        rate=int(d["rate"]),
        burst=int(d["burst"]),
        rounding=Rounding(**d["rounding"]),
        hops=tuple(
            HopAllocation(**{**h, "port": PortId(h["port"][0], int(h["port"][1]))}) for h in d["hops"]
        ),
    )


class ReservationStore:
    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {str(r[1]) for r in self._db.execute("PRAGMA table_info(reservations)")}
        if "reservation_id" not in columns:
            self._db.executescript(_ADD_RESERVATION_ID)
        self._db.execute("CREATE UNIQUE INDEX IF NOT EXISTS reservations_id ON reservations (reservation_id)")
        self._lock = threading.Lock()
        # Channel ids in use, so the lowest free one is found without scanning the table.
        self._used = {int(r[0]) for r in self._db.execute("SELECT channel_id FROM reservations")}
        self._lowest_free = 0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(
        self,
        allocation: Allocation,
        selector: ChannelSelector,
        origin: str,
        demote_excess: bool,
        state: str = INSTALLING,
    ) -> Reservation:
        """Insert with the lowest free channel id and the next reservation id, in one
        transaction (the id's high-water mark moves with the row, so a crash cannot hand the same
        id out twice)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                channel_id = self._free_id()
                reservation_id = self._next_reservation_id()
                now = time.time()
                self._db.execute(
                    "INSERT INTO reservations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        channel_id,
                        allocation.key.initiator,
                        allocation.key.context,
                        selector.src,
                        selector.dst,
                        selector.protocol,
                        str(selector.flow_key),
                        origin,
                        state,
                        int(demote_excess),
                        allocation_to_json(allocation),
                        now,
                        reservation_id,
                    ),
                )
                self._db.execute(
                    "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (_NEXT_ID, reservation_id + 1),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._used.add(channel_id)
        return Reservation(
            channel_id,
            allocation.key,
            selector,
            origin,
            state,
            demote_excess,
            allocation,
            now,
            reservation_id,
        )

    def _next_reservation_id(self) -> int:
        # The high-water mark, or past the largest id in use (a store from before the mark).
        mark = self._db.execute("SELECT value FROM meta WHERE key=?", (_NEXT_ID,)).fetchone()
        largest = self._db.execute("SELECT MAX(reservation_id) FROM reservations").fetchone()
        candidates = [FIRST_RESERVATION_ID]
        if mark is not None:
            candidates.append(int(mark[0]))
        if largest is not None and largest[0] is not None:
            candidates.append(int(largest[0]) + 1)
        return max(candidates)

    def _free_id(self) -> int:
        candidate = self._lowest_free
        while candidate in self._used:
            candidate += 1
        if candidate >= MAX_CHANNEL_ID:
            raise StoreFull(f"all {MAX_CHANNEL_ID} channel ids are in use")
        self._lowest_free = candidate
        return candidate

    def set_state(self, key: ChannelKey, state: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE reservations SET state=? WHERE initiator=? AND context=?",
                (state, key.initiator, key.context),
            )

    def remove(self, key: ChannelKey) -> bool:
        with self._lock:
            row = self._db.execute(
                "DELETE FROM reservations WHERE initiator=? AND context=? RETURNING channel_id",
                (key.initiator, key.context),
            ).fetchone()
            if row is None:
                return False
            self._used.discard(int(row[0]))
            self._lowest_free = min(self._lowest_free, int(row[0]))
            return True

    def get(self, key: ChannelKey) -> Reservation | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM reservations WHERE initiator=? AND context=?",
                (key.initiator, key.context),
            ).fetchone()
        return None if row is None else _row(row)

    def find_selector(self, selector: ChannelSelector) -> ChannelKey | None:
        """The channel already using this match, if any (the data plane allows one entry)."""
        with self._lock:
            row = self._db.execute(
                "SELECT initiator, context FROM reservations "
                "WHERE src=? AND dst=? AND protocol=? AND flow_key=?",
                (selector.src, selector.dst, selector.protocol, str(selector.flow_key)),
            ).fetchone()
        return None if row is None else ChannelKey(row[0], int(row[1]))

    def get_by_reservation_id(self, reservation_id: int) -> Reservation | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM reservations WHERE reservation_id=?", (reservation_id,)
            ).fetchone()
        return None if row is None else _row(row)

    def get_by_id(self, channel_id: int) -> Reservation | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM reservations WHERE channel_id=?", (channel_id,)).fetchone()
        return None if row is None else _row(row)

    def all(self) -> list[Reservation]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM reservations ORDER BY channel_id").fetchall()
        return [_row(r) for r in rows]

    def largest_context(self, initiator: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(context) FROM reservations WHERE initiator=?", (initiator,)
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else -1


def _row(row: tuple[Any, ...]) -> Reservation:
    (cid, initiator, context, src, dst, protocol, flow_key, origin, state, demote, alloc, at, rid) = row
    return Reservation(
        channel_id=int(cid),
        key=ChannelKey(initiator, int(context)),
        selector=ChannelSelector(src, dst, int(protocol), int(flow_key)),
        origin=origin,
        state=state,
        demote_excess=bool(demote),
        allocation=allocation_from_json(alloc),
        created_at=float(at),
        reservation_id=int(rid),
    )
