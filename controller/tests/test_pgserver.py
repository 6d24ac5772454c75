"""terrapin_tools.pgserver against Debian's real PostgreSQL: durability across restart and crash, clean
shutdown, the command line, starting over a server that died (its postmaster dead, a zombie, or
its PID given to another program) but never beside a live one, and the fixtures the store's
tests use."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from terrapin_tools import pgserver
from terrapin_tools.pgserver import PostgresError, PostgresServer, cluster_processes

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


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m terrapin_tools.pgserver --dir DATA_DIR ARGS...`, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "terrapin_tools.pgserver", "--dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _reachable_base(prefix: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)  # under root the server runs as `postgres`, which must reach base/postgres
    return base


def test_command_line_start_status_stop() -> None:
    base = _reachable_base("terrapin-pgcli-")
    data_dir = base / "postgres"
    port = pgserver.free_port()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(data_dir, *args)

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


# ---- starting where the last server died (issue 28) ------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Path]:
    """A data directory holding one committed row, its server stopped; each test leaves it so."""
    base = _reachable_base("terrapin-pgstale-")
    data_dir = base / "postgres"
    server = PostgresServer(data_dir).start()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE reservation (id int PRIMARY KEY)")
        conn.execute("INSERT INTO reservation VALUES (1)")
    server.stop()
    try:
        yield data_dir
    finally:
        PostgresServer(data_dir).stop()  # a no-op unless a test failed with its server running
        shutil.rmtree(base, ignore_errors=True)


def _start_by_hand(data_dir: Path) -> tuple[int, str]:
    """`pgserver start` from another process, as an operator would: the new postmaster's PID
    and the DSN it printed; the server serves the cluster's row."""
    started = _cli(data_dir, "start")
    assert started.returncode == 0, started.stderr
    dsn = started.stdout.strip()
    assert _rows(dsn) == [1]
    pid = PostgresServer(data_dir).pid
    assert pid is not None
    return pid, dsn


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, Z...), None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


def _postmasters(data_dir: Path) -> list[int]:
    """The cluster's processes whose parent is none of them."""
    processes = cluster_processes(data_dir)
    parents = {pid: Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1] for pid in processes}
    return [pid for pid, parent in parents.items() if int(parent) not in processes]


def _wait(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_start_after_the_postmaster_died_starts_a_new_one(cluster: Path) -> None:
    server = PostgresServer(cluster).start()
    dead = server.pid
    assert dead is not None
    server.kill()  # SIGKILL, reaped: postmaster.pid and the socket's lock still name it
    assert (cluster / "postmaster.pid").read_text().split()[0] == str(dead)
    assert _state(dead) is None
    pid, _ = _start_by_hand(cluster)
    assert pid != dead
    assert _cli(cluster, "stop").returncode == 0


def test_start_after_the_postmaster_became_a_zombie_starts_a_new_one(cluster: Path) -> None:
    """Issue 28's case: the postmaster was killed and its parent (here this test, under make
    run the runner) has not waited for it. PostgreSQL takes a zombie's PID for a live server."""
    server = PostgresServer(cluster).start()
    postmaster = server.postmaster
    assert postmaster is not None and postmaster.pid == server.pid
    zombie = postmaster.pid
    os.kill(zombie, signal.SIGKILL)
    _wait(lambda: _state(zombie) == "Z" and not cluster_processes(cluster))
    assert not server.running and server.postmaster is None
    try:
        pid, _ = _start_by_hand(cluster)
        assert pid != zombie
        assert _state(zombie) == "Z", "the zombie was still there when the new server started"
    finally:
        postmaster.wait()  # reaped at last
    assert _cli(cluster, "stop").returncode == 0


def test_start_on_a_live_server_starts_no_second_one(cluster: Path) -> None:
    pid, dsn = _start_by_hand(cluster)
    again = _cli(cluster, "start")
    assert (again.returncode, again.stdout.strip()) == (0, dsn)
    same = PostgresServer(cluster)
    same.start()
    assert same.postmaster is None, "start() started a postmaster beside the live one"
    assert PostgresServer(cluster).pid == pid
    assert _postmasters(cluster) == [pid]
    assert _cli(cluster, "stop").returncode == 0


def test_start_after_the_postmasters_pid_went_to_another_program_starts_a_new_one(cluster: Path) -> None:
    """The server died and the kernel gave its PID to an unrelated program: PostgreSQL would
    take that program for the server the lock files name."""
    server = PostgresServer(cluster).start()
    dead = server.pid
    server.kill()
    other = subprocess.Popen(["sleep", "60"], cwd="/")
    try:
        for lock in [cluster / "postmaster.pid", *cluster.glob(".s.PGSQL.*.lock")]:
            lines = lock.read_text().splitlines()
            assert lines[0] == str(dead)
            lock.write_text("\n".join([str(other.pid), *lines[1:]]) + "\n")
        assert not PostgresServer(cluster).running
        status = _cli(cluster, "status")
        assert status.returncode == 3, status.stdout
        pid, _ = _start_by_hand(cluster)
        assert pid != other.pid
        assert other.poll() is None, "the unrelated program was touched"
    finally:
        other.kill()
        other.wait()
    assert _cli(cluster, "stop").returncode == 0


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
