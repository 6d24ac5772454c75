"""The two databases the store runs on, behind one small synchronous interface.

- SQLite (the default): one file, one controller process. The write lock is SQLite's own
  (BEGIN IMMEDIATE).
- PostgreSQL (psycopg 3): any number of controller replicas on one database. The write lock
  is one transaction-scoped advisory lock, taken by every transaction that changes
  reservations or holds, so those transactions run one at a time across all replicas and the
  journal's sequence numbers come out in commit order (docs/deployment.md, "The store").

Calls are synchronous: each is a round trip of a fraction of a millisecond on loopback, and a
transaction never waits on anything but the database, so the controller's event loop is held
only that long. Timeouts bound the worst case (a lock another replica holds, a database that
went away). A connection that breaks is replaced on the next call; the call that saw it break
raises StoreUnavailable and nothing of it is committed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

# pg_advisory_xact_lock's key: "terrapin" in ASCII, so an operator reading pg_locks can tell it.
ADMISSION_LOCK = 0x7465727261706E
LOCK_TIMEOUT_MS = 3000  # a replica that holds the lock longer than this is stuck, not busy
STATEMENT_TIMEOUT_MS = 10_000


class StoreUnavailable(Exception):
    """The database could not be reached or did not answer in time; nothing was changed."""


class CommitUnknown(StoreUnavailable):
    """The connection broke while a COMMIT was on its way: the transaction may or may not have
    happened. The caller finds out once the store answers again."""


Params = Sequence[Any]


class Driver(Protocol):
    dialect: str  # "sqlite" or "postgres"

    def execute(self, sql: str, params: Params = ()) -> None: ...

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None: ...

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]: ...

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """A write transaction holding the admission lock; committed on exit, rolled back on an
        exception."""
        ...

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """A read-only transaction that sees one consistent state of every table."""
        ...

    def has_table(self, name: str) -> bool: ...

    def columns(self, table: str) -> set[str]: ...

    def close(self) -> None: ...


class SqliteDriver:
    dialect = "sqlite"

    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=5.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.RLock()

    def execute(self, sql: str, params: Params = ()) -> None:
        with self._lock, _unavailable(sqlite3.OperationalError):
            self._db.execute(sql, params)

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        with self._lock, _unavailable(sqlite3.OperationalError):
            row = self._db.execute(sql, params).fetchone()
        return None if row is None else tuple(row)

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._lock, _unavailable(sqlite3.OperationalError):
            return [tuple(r) for r in self._db.execute(sql, params).fetchall()]

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            with _unavailable(sqlite3.OperationalError):
                self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                raise CommitUnknown(f"SQLite: {exc}") from exc

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield
            finally:
                self._db.execute("COMMIT")

    def has_table(self, name: str) -> bool:
        row = self.fetchone("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,))
        return row is not None

    def columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self.fetchall(f"PRAGMA table_info({table})")}

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresDriver:
    dialect = "postgres"

    def __init__(self, dsn: str, application_name: str = "terrapin-controller") -> None:
        import psycopg  # only a PostgreSQL store needs it

        self._psycopg = psycopg
        self._dsn = dsn
        self._application_name = application_name
        self._conn: Any = None
        self._lock = threading.RLock()
        self._connect()

    def _connect(self) -> Any:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        psycopg = self._psycopg
        try:
            conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=3,
                application_name=self._application_name,
                # A replica that dies mid-transaction must not hold the admission lock: the
                # server notices the dead peer, and never lets a transaction idle long.
                keepalives=1,
                keepalives_idle=2,
                keepalives_interval=1,
                keepalives_count=2,
            )
            conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
            conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            conn.execute("SET idle_in_transaction_session_timeout = 10000")
        except psycopg.Error as exc:
            raise StoreUnavailable(f"PostgreSQL at {_where(self._dsn)}: {_first_line(exc)}") from exc
        self._conn = conn
        return conn

    def _run(self, sql: str, params: Params) -> Any:
        conn = self._connect()
        try:
            return conn.execute(sql.replace("?", "%s"), params)
        except self._psycopg.errors.LockNotAvailable as exc:
            raise StoreUnavailable(f"the admission lock was busy for {LOCK_TIMEOUT_MS} ms") from exc
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            self._drop()
            raise StoreUnavailable(f"PostgreSQL at {_where(self._dsn)}: {_first_line(exc)}") from exc

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def execute(self, sql: str, params: Params = ()) -> None:
        with self._lock:
            self._run(sql, params)

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        with self._lock:
            row = self._run(sql, params).fetchone()
        return None if row is None else tuple(row)

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return [tuple(r) for r in self._run(sql, params).fetchall()]

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            self._run("BEGIN", ())
            try:
                self._run("SELECT pg_advisory_xact_lock(?)", (ADMISSION_LOCK,))
                yield
            except BaseException:
                self._rollback()
                raise
            try:
                self._run("COMMIT", ())
            except StoreUnavailable as exc:
                raise CommitUnknown(str(exc)) from exc

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        with self._lock:
            self._run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", ())
            try:
                yield
            except BaseException:
                self._rollback()
                raise
            self._run("COMMIT", ())

    def _rollback(self) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            conn.execute("ROLLBACK")
        except Exception:
            self._drop()

    def has_table(self, name: str) -> bool:
        row = self.fetchone("SELECT to_regclass(?) IS NOT NULL", (name,))
        return bool(row and row[0])

    def columns(self, table: str) -> set[str]:
        rows = self.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", (table,)
        )
        return {str(r[0]) for r in rows}

    def close(self) -> None:
        with self._lock:
            self._drop()


@contextlib.contextmanager
def _unavailable(*errors: type[BaseException]) -> Iterator[None]:
    try:
        yield
    except errors as exc:
        raise StoreUnavailable(f"SQLite: {exc}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _where(dsn: str) -> str:
    """host:port/db of a DSN, without a password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(dsn)
    except Exception:
        return "the configured DSN"
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
