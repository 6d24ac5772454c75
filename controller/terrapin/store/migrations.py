"""The store's schema, as numbered migrations applied in order, each recorded in
`schema_migrations`, so a store written by an older controller is brought forward on open and a
newer one is refused rather than misread.

The SQL is written once for both back ends where the two dialects agree (BIGINT, DOUBLE
PRECISION and TEXT mean the same to both); where they do not, a migration gives one text per
dialect. Replicas opening a PostgreSQL store together migrate it once: the first takes the
migration lock, the others find the work done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from terrapin.store.drivers import Driver


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: Callable[[str], list[str]]  # dialect → statements


def _base(_dialect: str) -> list[str]:
    return [
        """CREATE TABLE IF NOT EXISTS reservations (
            channel_id  INTEGER PRIMARY KEY,
            initiator   TEXT NOT NULL,
            context     BIGINT NOT NULL,
            src         TEXT NOT NULL,
            dst         TEXT NOT NULL,
            protocol    INTEGER NOT NULL,
            flow_key    TEXT NOT NULL,
            origin      TEXT NOT NULL,
            state       TEXT NOT NULL,
            demote      INTEGER NOT NULL,
            allocation  TEXT NOT NULL,
            created_at  DOUBLE PRECISION NOT NULL,
            reservation_id BIGINT,
            UNIQUE (initiator, context)
        )""",
        "CREATE INDEX IF NOT EXISTS reservations_selector ON reservations (src, dst, protocol, flow_key)",
        "CREATE UNIQUE INDEX IF NOT EXISTS reservations_id ON reservations (reservation_id)",
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    ]


def _replication(dialect: str) -> list[str]:
    serial = "BIGSERIAL PRIMARY KEY" if dialect == "postgres" else "INTEGER PRIMARY KEY AUTOINCREMENT"
    return [
        # Tentative in-band holds, so a replica taking over finds them (and their deadlines).
        """CREATE TABLE holds (
            initiator   TEXT NOT NULL,
            context     BIGINT NOT NULL,
            body        TEXT NOT NULL,
            expires_at  DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (initiator, context)
        )""",
        # Every change to reservations and holds, in commit order (written under the admission
        # lock, so sequence order is commit order): replicas follow it to keep their ledgers.
        f"""CREATE TABLE journal (
            seq         {serial},
            kind        TEXT NOT NULL,
            initiator   TEXT NOT NULL,
            context     BIGINT NOT NULL,
            body        TEXT NOT NULL,
            written_at  DOUBLE PRECISION NOT NULL
        )""",
        # Who should be primary: one row, renewed by its holder; `term` grows at every change of
        # holder and is the P4Runtime election id's high part.
        """CREATE TABLE lease (
            name        TEXT PRIMARY KEY,
            holder      TEXT NOT NULL,
            url         TEXT NOT NULL,
            term        BIGINT NOT NULL,
            expires_at  DOUBLE PRECISION NOT NULL
        )""",
    ]


def _path_down(_dialect: str) -> list[str]:
    # Why a reservation is down (no path carries it), and whether its request asked to be closed
    # then instead: kept across restarts and takeovers.
    return [
        "ALTER TABLE reservations ADD COLUMN note TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE reservations ADD COLUMN close_when_down INTEGER NOT NULL DEFAULT 0",
    ]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "reservations and the reservation-id mark", _base),
    Migration(2, "holds, the change journal and the primary's lease", _replication),
    Migration(3, "a reservation's path-down note and wish", _path_down),
)
LATEST = MIGRATIONS[-1].version


class SchemaTooNew(Exception):
    """The store was written by a newer controller: reading it could lose what it added."""


def migrate(driver: Driver) -> int:
    """Bring the store to LATEST; returns the version it was at."""
    with driver.locked():
        driver.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        row = driver.fetchone("SELECT MAX(version) FROM schema_migrations")
        current = int(row[0]) if row is not None and row[0] is not None else 0
        if current == 0 and driver.has_table("reservations"):
            _adopt_unversioned(driver)
            current = 1
            driver.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", (1, MIGRATIONS[0].description, time.time())
            )
        if current > LATEST:
            raise SchemaTooNew(
                f"the store is at schema version {current}; this controller knows up to {LATEST}"
            )
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            for statement in migration.sql(driver.dialect):
                driver.execute(statement)
            driver.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                (migration.version, migration.description, time.time()),
            )
        return current


def _adopt_unversioned(driver: Driver) -> None:
    """A store from before versioned migrations is version 1, once it has reservation ids (the
    first stores did not: their rows keep their channel id as their id)."""
    if "reservation_id" not in driver.columns("reservations"):
        driver.execute("ALTER TABLE reservations ADD COLUMN reservation_id BIGINT")
        driver.execute("UPDATE reservations SET reservation_id = channel_id")
    for statement in _base(driver.dialect):
        driver.execute(statement)
