"""PostgreSQL fixtures: one server for the session, a fresh empty database for each test, and a
server of a test's own for drills that restart or kill it.

A test file takes them by naming this module as a plugin (registered once, so every file that
does shares the one session server; importing the fixtures instead would start one per file):

    pytest_plugins = ["pg"]

    def test_reserve(pg_dsn: str) -> None:
        store = PostgresStore(pg_dsn)
        ...

Every server runs in a temporary directory of its own, on a free port of 127.0.0.1, and is
stopped and removed after; see terrapin_tools.pgserver.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from terrapin_tools.pgserver import PostgresServer


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The session's server. Tests share it: one that restarts or kills a server takes
    `own_postgres` instead."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def _pg_dropper(postgres: PostgresServer) -> Iterator[ThreadPoolExecutor]:
    """Drops the tests' databases in the background: each DROP DATABASE waits for a checkpoint
    (up to ~1 s of fsync here), which no test needs to wait for. Done before the server stops."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-drop") as dropper:
        yield dropper


@pytest.fixture
def pg_dsn(
    postgres: PostgresServer, _pg_dropper: ThreadPoolExecutor, request: pytest.FixtureRequest
) -> Iterator[str]:
    """DSN of a new, empty database on the session's server, owned by Terrapin's role; dropped
    after the test (its connections closed by force)."""
    # Named after the test, for whoever reads the server's log; 63 bytes is PostgreSQL's limit.
    stem = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower())[:40]
    name = f"t_{stem}_{uuid.uuid4().hex[:8]}"
    postgres.start()  # a no-op unless an earlier test stopped it
    dsn = postgres.create_database(name)
    yield dsn
    _pg_dropper.submit(postgres.drop_database, name)


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A running server for this test alone (about 3 s to set up), which it may restart(),
    kill() and start() again; `dsn` is its `terrapin` database."""
    with PostgresServer() as server:
        yield server
