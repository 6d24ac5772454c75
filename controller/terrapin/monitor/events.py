"""The monitor's violation history: one row per episode, in the controller's SQLite database.

An episode is a violation of one kind at one place (switch, port, level, channel) over
consecutive polls: it is raised (and logged) once, updated while it lasts, and cleared after a
poll that no longer shows it. The table keeps the newest `history` episodes, so a long-running
controller's history stays bounded and survives a restart.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from terrapin.monitor.checks import Finding

_SCHEMA = """
CREATE TABLE IF NOT EXISTS monitor_events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT NOT NULL,
    cause         TEXT NOT NULL,
    switch        TEXT NOT NULL,
    port          INTEGER,
    priority      INTEGER,
    reservation_id INTEGER,
    channel       TEXT,
    figure        INTEGER,
    bound         INTEGER NOT NULL,
    unit          TEXT NOT NULL,
    packets       INTEGER NOT NULL,
    polls         INTEGER NOT NULL,
    message       TEXT NOT NULL,
    raised_at     REAL NOT NULL,
    last_seen_at  REAL NOT NULL,
    cleared_at    REAL
);
CREATE INDEX IF NOT EXISTS monitor_events_place ON monitor_events (switch, port, reservation_id);
"""

@dataclass(frozen=True)
class Event:
    id: int
    kind: str
    cause: str
    switch: str
    port: int | None
    priority: int | None
    reservation_id: int | None
    channel: str | None
    figure: int | None  # the worst figure over the episode
    bound: int
    unit: str
    packets: int  # packets concerned over the episode
    polls: int  # polls that showed it
    message: str  # the first poll's description
    raised_at: float  # Unix time
    last_seen_at: float
    cleared_at: float | None

    @property
    def active(self) -> bool:
        return self.cleared_at is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"active": self.active}


# The table's columns are the Event's fields, in its order: a row is an Event's arguments.
_FIELDS = [f.name for f in fields(Event)]
_COLUMNS = ", ".join(_FIELDS)


class EventLog:
    def __init__(self, path: str | Path, history: int) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        columns = [str(r[1]) for r in self._db.execute("PRAGMA table_info(monitor_events)")]
        if columns and columns != _FIELDS:
            # A history written by an older layout: it is a log, not state, so it starts over
            # rather than making every episode fail to be recorded.
            self._db.execute("DROP TABLE monitor_events")
        self._db.executescript(_SCHEMA)
        self._history = history
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def raise_event(self, finding: Finding, at: float) -> Event:
        with self._lock:
            row = self._db.execute(
                f"INSERT INTO monitor_events ({_COLUMNS}) "
                "VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,1,?,?,?,NULL) RETURNING " + _COLUMNS,
                (
                    finding.kind,
                    finding.cause,
                    finding.switch,
                    finding.port,
                    finding.priority,
                    finding.reservation_id,
                    finding.channel,
                    finding.figure,
                    finding.bound,
                    finding.unit,
                    finding.packets,
                    finding.message,
                    at,
                    at,
                ),
            ).fetchone()
            # Bounded: the newest `history` episodes stay.
            self._db.execute("DELETE FROM monitor_events WHERE id <= ?", (int(row[0]) - self._history,))
        return _event(row)

    def extend(self, event_id: int, finding: Finding, at: float) -> Event | None:
        """Another poll of the same episode: add its packets, keep the worst figure."""
        with self._lock:
            row = self._db.execute(
                "UPDATE monitor_events SET packets = packets + ?, polls = polls + 1, "
                "last_seen_at = ?, figure = CASE WHEN figure IS NULL THEN ? "
                "WHEN ? IS NULL THEN figure ELSE MAX(figure, ?) END "
                f"WHERE id = ? RETURNING {_COLUMNS}",
                (finding.packets, at, finding.figure, finding.figure, finding.figure, event_id),
            ).fetchone()
        return None if row is None else _event(row)

    def clear(self, event_id: int, at: float) -> Event | None:
        with self._lock:
            row = self._db.execute(
                f"UPDATE monitor_events SET cleared_at = ? WHERE id = ? RETURNING {_COLUMNS}",
                (at, event_id),
            ).fetchone()
        return None if row is None else _event(row)

    def clear_all_active(self, at: float) -> int:
        """At start-up: episodes a previous run left open ended with it."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE monitor_events SET cleared_at = last_seen_at WHERE cleared_at IS NULL"
            )
            return cursor.rowcount

    def query(
        self,
        *,
        switch: str | None = None,
        port: int | None = None,
        reservation_id: int | None = None,
        kind: str | None = None,
        cause: str | None = None,
        active: bool | None = None,
        limit: int = 100,
    ) -> list[Event]:
        """Newest first."""
        where, args = [], []
        for column, value in (
            ("switch", switch),
            ("port", port),
            ("reservation_id", reservation_id),
            ("kind", kind),
            ("cause", cause),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if active is not None:
            where.append("cleared_at IS NULL" if active else "cleared_at IS NOT NULL")
        sql = f"SELECT {_COLUMNS} FROM monitor_events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (*args, limit)).fetchall()
        return [_event(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Episodes per cause over the kept history."""
        with self._lock:
            rows = self._db.execute("SELECT cause, COUNT(*) FROM monitor_events GROUP BY cause").fetchall()
        return {str(cause): int(n) for cause, n in rows}


def _event(row: tuple[Any, ...]) -> Event:
    # SQLite hands back the columns' own types: INTEGER as int, REAL as float, NULL as None.
    return Event(*row)
