"""terrapin.pgserver against Debian's real PostgreSQL: durability across restart and crash, clean
shutdown, the command line, and the fixtures the store's tests use."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from terrapin import pgserver
from terrapin.pgserver import PostgresError, PostgresServer, cluster_processes

# The fixtures postgres, pg_dsn and own_postgres.
pytest_plugins = ["pg"]


def _rows(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM reservation ORDER BY id")]


def _postgres_children() -> list[int]:
    """This process's children that are PostgreSQL processes, live or unreaped."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, _, rest = stat.partition(" (")[2].rpartition(")")
        if name == "postgres" and int(rest.split()[1]) == os.getpid():
            found.append(int(entry.name))
    return found


def _processes_naming(text: str) -> list[int]:
    """Processes whose command line mentions `text` (pgrep -f)."""
    done = subprocess.run(["pgrep", "-f", text], capture_output=True, text=True, check=False)
    return [int(p) for p in done.stdout.split()]


def test_committed_rows_survive_restart_and_crash(own_postgres: PostgresServer) -> None:
    server = own_postgres
    port = server.port
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("terrapin", "terrapin")
        conn.execute("CREATE TABLE reservation (id int PRIMARY KEY)")
        conn.execute("INSERT INTO reservation VALUES (1)")

    server.restart()
    assert server.port == port
    assert _rows(server.dsn) == [1]

    # One row committed, one still in an open transaction when the server dies.
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO reservation VALUES (2)")
    open_txn = psycopg.connect(server.dsn)
    open_txn.execute("INSERT INTO reservation VALUES (3)")
    server.kill()
    assert not server.running
    assert cluster_processes(server.data_dir) == []
    assert _postgres_children() == [], "kill() left unreaped PostgreSQL processes"
    open_txn.close()

    server.start()
    assert server.port == port
    assert _rows(server.dsn) == [1, 2]

    pid = server.pid
    assert pid is not None
    server.stop()
    assert not server.running
    assert cluster_processes(server.data_dir) == []
    assert _processes_naming(str(server.data_dir)) == []
    assert _postgres_children() == []
    server.stop()  # stopping a stopped server is a no-op


def test_temporary_directory_is_removed() -> None:
    with PostgresServer() as server:
        data_dir = server.data_dir
        assert (data_dir / "PG_VERSION").is_file()
        assert server.running
    assert not data_dir.exists()
    assert _processes_naming(str(data_dir)) == []


def test_command_line_start_status_stop() -> None:
    base = Path(tempfile.mkdtemp(prefix="terrapin-pgcli-"))
    base.chmod(0o755)  # under root the server runs as `postgres`, which must reach base/postgres
    data_dir = base / "postgres"
    port = pgserver.free_port()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "terrapin.pgserver", "--dir", str(data_dir), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    try:
        assert cli("status").returncode == 3
        started = cli("--port", str(port), "start")
        assert started.returncode == 0, started.stderr
        dsn = started.stdout.strip()
        assert dsn == f"postgresql://terrapin@127.0.0.1:{port}/terrapin"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE reservation (id int PRIMARY KEY)")
            conn.execute("INSERT INTO reservation VALUES (7)")

        status = cli("status")
        assert (status.returncode, status.stdout.strip()) == (0, dsn)
        again = cli("start")  # already running: only the DSN
        assert (again.returncode, again.stdout.strip()) == (0, dsn)

        assert cli("stop").returncode == 0
        assert cli("status").returncode == 3
        assert cluster_processes(data_dir) == []
        assert cli("stop").returncode == 0

        # The cluster and its port are kept: a later start serves the same data.
        restarted = cli("start")
        assert (restarted.returncode, restarted.stdout.strip()) == (0, dsn)
        assert _rows(dsn) == [7]
    finally:
        cli("stop")
        subprocess.run(["rm", "-rf", str(base)], check=False)
    assert cluster_processes(data_dir) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the data directory to `postgres`")
def test_directory_postgres_cannot_reach_is_refused(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(PostgresError, match="cannot enter"):
        PostgresServer(closed / "postgres").start()


def test_missing_postgresql_says_to_run_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgserver.shutil, "which", lambda _name: None)
    monkeypatch.setattr(pgserver.glob, "glob", lambda _pattern: [])
    with pytest.raises(PostgresError, match="make setup"):
        pgserver.find_bindir()


def test_each_test_gets_a_fresh_database(pg_dsn: str, postgres: PostgresServer) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("terrapin",)
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        assert tables == (0,)
        # Left behind on purpose: the next test's database must not have it.
        conn.execute("CREATE TABLE reservation (id int PRIMARY KEY)")
    assert pg_dsn.startswith(f"postgresql://terrapin@127.0.0.1:{postgres.port}/t_")


def test_each_test_gets_a_fresh_database_again(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        assert tables == (0,)
