"""A PostgreSQL cluster of Terrapin's own, for the reservation store's tests, make run and the benchmark.

Each user starts the server it needs, in a directory of its own (a fresh temporary one by
default), listening on 127.0.0.1 only with trust authentication, and stops it after: nothing
depends on a system-wide cluster or on /var/run/postgresql. The binaries are Debian's
(`postgresql` in scripts/setup.sh).

PostgreSQL refuses to run as root, so under root (CI, make run) every server command runs as the
`postgres` system user the package creates, and the data directory belongs to that user.

The server keeps fsync on: the drills restart it and kill it mid-run, and committed reservations
must survive both. `kill()` is SIGKILL of the postmaster, which is what a crashed server leaves
behind; the next `start()` runs PostgreSQL's crash recovery.

The postmaster is started as a child of this process, not through `pg_ctl start`: pg_ctl's
postmaster is orphaned at once, and an init that does not reap orphans keeps it as a zombie. A
child is reaped here, and `postmaster` hands it to whoever watches it (make run's supervisor).

PostgreSQL judges its lock files (postmaster.pid, and .s.PGSQL.<port>.lock beside the socket) by
whether the PID they record is a process at all, so a zombie postmaster (dead, its parent never
waited for it) or a PID the kernel has since given to an unrelated program makes it refuse to
start. start() judges the record itself: a server runs only where the recorded PID is a live
process working in this data directory; otherwise, once no process of the old server is left,
the stale lock files go and a new server starts (with crash recovery where the old one died).

    python -m terrapin_tools.pgserver --dir build/run/postgres [--port 5432] start|stop|status

`start` leaves the server running in the background and prints its DSN; on a server already
running in that directory it only prints the DSN. `stop` is a fast shutdown (a no-op when stopped);
`status` prints the DSN and exits 0 when running, and exits 3 when not (as `pg_ctl status` does).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql

SUPERUSER = "postgres"
# The lines written into the data directory's postgresql.conf include this file, which start()
# rewrites each time (the port may change between runs of the CLI).
SETTINGS_FILE = "terrapin.conf"
LOG_FILE = "server.log"
# sun_path holds 108 bytes; PostgreSQL appends "/.s.PGSQL.<port>" to the socket directory.
_SUN_PATH_MAX = 107


class PostgresError(RuntimeError):
    """PostgreSQL is missing, or a server could not be set up, started or stopped."""


def installed() -> bool:
    """Whether a PostgreSQL server can be run here (tests skip without one)."""
    try:
        find_bindir()
    except PostgresError:
        return False
    return True


def find_bindir() -> Path:
    """The directory holding initdb and postgres: `pg_config --bindir` when it names one
    that has them (libpq-dev's pg_config may belong to another major version than the server),
    else the newest /usr/lib/postgresql/*/bin."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out:
                candidates.append(Path(out))

    def major(path: str) -> tuple[int, ...]:
        version = Path(path).parent.name
        return tuple(int(p) for p in version.split(".") if p.isdigit())

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=major, reverse=True)]
    for bindir in candidates:
        if all((bindir / tool).is_file() for tool in ("initdb", "postgres")):
            return bindir
    raise PostgresError(
        "PostgreSQL's server programs (initdb, postgres) are not installed: "
        "run `make setup` (it installs Debian's postgresql package)"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (another process may take it before
    the server binds it; start() retries with another when it chose the port itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _proc_stat(pid: int) -> tuple[str, str, int] | None:
    """(command name, state, parent pid) of `pid` from /proc; None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, _, rest = text.partition(" (")[2].rpartition(")")
    fields = rest.split()
    return name, fields[0], int(fields[1])


def _process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped, does not count)."""
    found = _proc_stat(pid)
    return found is not None and found[1] not in ("Z", "X")


def _works_in(pid: int, directory: Path, if_unreadable: bool = False) -> bool:
    """True while `pid` is a live process whose working directory is `directory` (every
    PostgreSQL server process works in its data directory; an unrelated program given a recycled
    PID does not). `if_unreadable`: the answer for a live process whose directory this user may
    not read (another user's)."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except PermissionError:
        return if_unreadable and _process_alive(pid)
    except OSError:  # gone, or a zombie
        return False
    return cwd == str(directory) and _process_alive(pid)


def _may_be_postmaster_of(pid: int, directory: Path) -> bool:
    """Whether the PID a lock file of `directory` records may be that cluster's server. A live
    process this user cannot look into counts, so that a server is never started beside one
    that might be running."""
    return _works_in(pid, directory, if_unreadable=True)


def _pids() -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]


def cluster_processes(data_dir: Path) -> list[int]:
    """The live processes of the cluster in `data_dir`: every PostgreSQL server process works in
    its data directory. (Each also makes itself a process group leader, so a group says nothing.)"""
    return [pid for pid in _pids() if _works_in(pid, data_dir)]


def _children(ppid: int) -> set[int]:
    """This process's children, live or not yet reaped."""
    return {pid for pid in _pids() if (found := _proc_stat(pid)) is not None and found[2] == ppid}


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _set_child_subreaper(on: bool) -> bool:
    """Makes this process the one that inherits its descendants' orphans (instead of init), so
    it can reap them; returns the previous setting. False, and nothing changed, off Linux."""
    libc = ctypes.CDLL(None, use_errno=True)
    previous = ctypes.c_int(0)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(previous), 0, 0, 0) != 0:
        return False
    libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    return bool(previous.value)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


def _first_line(path: Path) -> str:
    try:
        with path.open(errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def _conf_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class PostgresServer:
    """One PostgreSQL cluster in `directory` (its PGDATA), on `host`:`port` (127.0.0.1 unless
    told otherwise; `netns` runs it in a network namespace, as on a machine of its own).

    `directory` None makes a temporary one, removed again by close() (and on leaving the `with`);
    a given directory is kept, and reused when it already holds a cluster. `port` None keeps the
    port an existing cluster was last given, else picks a free one. start() creates the database
    `database` owned by the login role `user`; `dsn` connects as that role to that database.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        database: str = "terrapin",
        user: str = "terrapin",
        bindir: str | os.PathLike[str] | None = None,
        timeout: float = 60.0,
        ssl_files: tuple[Path, Path] | None = None,
        host: str = "127.0.0.1",
        netns: str | None = None,
    ) -> None:
        self.bindir = Path(bindir) if bindir is not None else find_bindir()
        self.database = database
        self.user = user
        self.timeout = timeout
        # (certificate, key) PEM files: the server then also speaks TLS with them (copied into
        # the data directory, owned by the server's account, as PostgreSQL wants its key).
        self.ssl_files = ssl_files
        # The address the server listens on and the DSNs name. Another than the loopback's
        # stands for a database host of its own (the drill across hosts, docs/deployment.md):
        # the server then trusts the hosts of that address's subnet, and only those.
        self.host = host
        # A network namespace (`ip netns add`) the server runs in, as on a machine of its own.
        self.netns = netns
        self._owns_directory = directory is None
        if directory is None:
            # mkdtemp's directory itself becomes PGDATA, so under root only its parent (the
            # system's temporary directory, world-searchable) must be reachable by `postgres`.
            directory = tempfile.mkdtemp(prefix="terrapin-pg-")
        self.data_dir = Path(directory).absolute()
        self._port_chosen = port is not None
        self._port = port if port is not None else (self._configured_port() or free_port())
        self._account = self._server_account()
        self._postmaster: subprocess.Popen[bytes] | None = None
        self._closed = False

    # --- what a caller reads --------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the running server listens on (its postmaster.pid), else the configured one."""
        running = self._pidfile_field(3)
        return int(running) if running is not None and self.running else self._port

    @property
    def dsn(self) -> str:
        """libpq URL for Terrapin's role and database on the server's address."""
        return self.dsn_for(self.database)

    @property
    def admin_dsn(self) -> str:
        """libpq URL for the superuser on the `postgres` database (to create and drop databases)."""
        return self.dsn_for("postgres", user=SUPERUSER)

    def dsn_for(self, database: str, *, user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@{self.host}:{self.port}/{database}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs: the PID postmaster.pid records, if that is a live
        process of this cluster (not a zombie, nor another program given the PID since)."""
        pid = self._recorded_pid()
        return pid if pid is not None and _may_be_postmaster_of(pid, self.data_dir) else None

    @property
    def postmaster(self) -> subprocess.Popen[bytes] | None:
        """The running server's postmaster when this object started it, a child of this process:
        a supervisor polls it (which also reaps it) and calls start() again once it has died.
        None while no server runs, or one started elsewhere does."""
        proc = self._postmaster
        return proc if proc is not None and proc.returncode is None and proc.pid == self.pid else None

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        """initdb when the directory holds no cluster yet, then start the server and wait until it
        accepts connections; a no-op when it already runs. Returns self."""
        if self._closed:
            raise PostgresError(f"{self.data_dir}: this server was closed")
        if self.running:
            return self
        if not self.initialized:
            self._initdb()
        self._clear_stale_locks()
        for attempt in range(3):
            self._write_settings()
            try:
                self._start_postmaster()
                break
            except PostgresError:
                # A port picked by free_port() can be taken before the server binds it.
                if self._port_chosen or attempt == 2 or "could not bind" not in _tail(self.log_path, 10):
                    raise
                self._port = free_port()
        self._ensure_role_and_database()
        return self

    def stop(self) -> None:
        """Fast shutdown (sessions are disconnected, committed data is checkpointed); waits until
        the postmaster has exited, which it does after all its processes. A no-op when stopped."""
        self._shut_down(signal.SIGINT)

    def _shut_down(self, how: signal.Signals) -> None:
        """SIGINT: PostgreSQL's fast shutdown; SIGQUIT: its immediate one (no checkpoint)."""
        pid = self.pid
        if pid is None:
            return
        os.kill(pid, how)
        deadline = time.monotonic() + self.timeout
        while _process_alive(pid):
            if time.monotonic() > deadline:
                raise PostgresError(
                    f"{self.data_dir}: the server (pid {pid}) did not stop within {self.timeout:.0f} s\n"
                    f"--- {self.log_path} (tail) ---\n{_tail(self.log_path)}"
                )
            time.sleep(0.02)
        self._reap_postmaster()

    def restart(self) -> None:
        """stop() then start(), on the same data and port."""
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash would, and wait for its processes to notice and exit
        (a new postmaster refuses to start while any still holds the old shared memory). The next
        start() recovers from the write-ahead log."""
        pid = self.pid
        if pid is None:
            raise PostgresError(f"{self.data_dir}: no server running to kill")
        # The postmaster's processes become orphans: inherit them (rather than init, which may
        # not reap them) so that none is left behind as a zombie.
        me = os.getpid()
        was_subreaper = _set_child_subreaper(True)
        try:
            ours_before = _children(me)
            os.kill(pid, signal.SIGKILL)
            self._reap_postmaster()
            while _process_alive(pid):
                time.sleep(0.01)
            deadline = time.monotonic() + 10.0
            while True:
                for orphan in _children(me) - ours_before:
                    found = _proc_stat(orphan)
                    if found is not None and found[0] == "postgres" and found[1] == "Z":
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(orphan, 0)
                left = cluster_processes(self.data_dir)
                if not left and not any(
                    (found := _proc_stat(o)) is not None and found[0] == "postgres"
                    for o in _children(me) - ours_before
                ):
                    break
                if time.monotonic() > deadline:
                    for straggler in left:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(straggler, signal.SIGKILL)
                time.sleep(0.01)
        finally:
            if not was_subreaper:
                _set_child_subreaper(False)

    def close(self) -> None:
        """stop(), and remove the directory when it was a temporary one made by this object."""
        if self._closed:
            return
        try:
            # A temporary cluster is deleted next: its shutdown checkpoint (seconds of fsync
            # after a test has created databases) would be wasted.
            self._shut_down(signal.SIGQUIT if self._owns_directory else signal.SIGINT)
        finally:
            if self._owns_directory:
                shutil.rmtree(self.data_dir, ignore_errors=True)
            self._closed = True

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- databases ------------------------------------------------------------------------------

    def create_database(self, name: str, *, owner: str | None = None) -> str:
        """A new, empty database owned by `owner` (Terrapin's role by default); its DSN."""
        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(owner or self.user)
                )
            )
        return self.dsn_for(name)

    def drop_database(self, name: str) -> None:
        """Drops the database, disconnecting whoever is still connected to it."""
        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    # --- inside ---------------------------------------------------------------------------------

    def _server_account(self) -> pwd.struct_passwd | None:
        """The account server commands run as: `postgres` under root, else None (this process's)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise PostgresError(
                "running as root, PostgreSQL's server must run as the `postgres` user, which does not "
                "exist: run `make setup` (Debian's postgresql package creates it)"
            ) from None

    def _check_reachable(self, account: pwd.struct_passwd) -> None:
        """Every directory above the data directory must be searchable by `postgres`."""
        groups = {account.pw_gid, *(g for g in os.getgrouplist(account.pw_name, account.pw_gid))}
        for parent in reversed(self.data_dir.parents):
            st = parent.stat()
            if st.st_uid == account.pw_uid:
                bit = stat.S_IXUSR
            elif st.st_gid in groups:
                bit = stat.S_IXGRP
            else:
                bit = stat.S_IXOTH
            if not st.st_mode & bit:
                raise PostgresError(
                    f"{self.data_dir}: the server runs as `{account.pw_name}`, which cannot enter "
                    f"{parent} (mode {stat.filemode(st.st_mode)}); use a directory it can reach"
                )

    def _initdb(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise PostgresError(f"{self.data_dir}: not empty and holds no PostgreSQL cluster (no PG_VERSION)")
        if self._account is not None:
            self._check_reachable(self._account)
            os.chown(self.data_dir, self._account.pw_uid, self._account.pw_gid)
        self.data_dir.chmod(0o700)
        # --no-sync: initdb's fsync of its ~1,000 new files is slow and guards only against the
        # machine losing power in the next seconds; the server itself runs with fsync on.
        self._run_tool(
            "initdb",
            "-D",
            str(self.data_dir),
            f"--username={SUPERUSER}",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            what="initialise the cluster",
        )
        # Trust, but only over the socket inside the data directory (mode 0700) and from
        # 127.0.0.1: initdb's --auth=trust would also admit ::1. A server on another address
        # trusts its own subnet ("samenet": the drill's private link between its hosts).
        # With ssl_files, a client from the network must speak TLS (hostssl).
        remote = "samenet" if self.host != "127.0.0.1" else "127.0.0.1/32"
        kind = "hostssl" if self.ssl_files is not None and self.host != "127.0.0.1" else "host"
        self._write_owned(
            "pg_hba.conf",
            f"# Written by terrapin_tools.pgserver.\nlocal all all trust\n{kind} all all {remote} trust\n",
        )
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"\n# terrapin_tools.pgserver's settings\ninclude_if_exists = '{SETTINGS_FILE}'\n")

    def _write_settings(self) -> None:
        socket_dir = str(self.data_dir)
        if len(socket_dir) + len("/.s.PGSQL.65535") > _SUN_PATH_MAX:
            socket_dir = ""  # too deep for a Unix socket: TCP only, which is all the DSNs use
        self._write_owned(
            SETTINGS_FILE,
            "# Rewritten by terrapin_tools.pgserver on each start.\n"
            f"listen_addresses = {_conf_quote(self.host)}\n"
            f"port = {self._port}\n"
            f"unix_socket_directories = {_conf_quote(socket_dir)}\n"
            # The drills restart and kill the server: committed data must be on disk.
            "fsync = on\n"
            "synchronous_commit = on\n"
            "full_page_writes = on\n"
            "shared_buffers = 16MB\n"
            "max_connections = 100\n"
            # After a crash the server first syncs the whole data directory: one syncfs() took
            # ~1 s here where an fsync of each file (initdb --no-sync left them unsynced) took ~4 s.
            "recovery_init_sync_method = syncfs\n" + self._ssl_settings(),
        )

    def _ssl_settings(self) -> str:
        if self.ssl_files is None:
            return "ssl = off\n"
        cert, key = self.ssl_files
        self._write_owned("server.crt", cert.read_text())
        self._write_owned("server.key", key.read_text())
        return "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"

    def _write_owned(self, name: str, text: str) -> None:
        path = self.data_dir / name
        path.write_text(text)
        path.chmod(0o600)
        if self._account is not None:
            os.chown(path, self._account.pw_uid, self._account.pw_gid)

    def _configured_port(self) -> int | None:
        try:
            text = (self.data_dir / SETTINGS_FILE).read_text()
        except OSError:
            return None
        match = re.search(r"^port = (\d+)$", text, re.M)
        return int(match.group(1)) if match else None

    def _recorded_pid(self) -> int | None:
        first = self._pidfile_field(0)
        return int(first) if first is not None and first.isdigit() else None

    def _pidfile_field(self, index: int) -> str | None:
        """Line `index` of postmaster.pid: 0 the pid, 3 the port, 7 the status."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        return lines[index].strip() if index < len(lines) else None

    def _start_postmaster(self) -> None:
        """Starts the postmaster as this process's child, in a session of its own (a Ctrl-C to
        the caller's terminal does not reach it), and waits until it accepts connections."""
        log = self.log_path.open("ab")
        try:
            if self._account is not None:
                os.chown(self.log_path, self._account.pw_uid, self._account.pw_gid)
            self._postmaster = subprocess.Popen(
                self._in_netns([str(self.bindir / "postgres"), "-D", str(self.data_dir)]),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **self._as_server(in_netns=self.netns is not None),
            )
        except OSError as exc:
            raise PostgresError(f"{self.data_dir}: could not run {self.bindir / 'postgres'}: {exc}") from None
        finally:
            log.close()
        proc = self._postmaster
        # Ready as pg_ctl -w judges it: postmaster.pid names this process and says "ready",
        # which the postmaster writes once any crash recovery is done.
        deadline = time.monotonic() + self.timeout
        while not (self._pidfile_field(0) == str(proc.pid) and self._pidfile_field(7) == "ready"):
            failed = proc.poll() is not None
            if failed or time.monotonic() > deadline:
                if not failed:
                    proc.kill()
                self._reap_postmaster()
                why = f"exited {proc.returncode}" if failed else f"not ready within {self.timeout:.0f} s"
                raise PostgresError(
                    f"{self.data_dir}: could not start the server on {self.host}:{self._port}: "
                    f"postgres {why}\n--- {self.log_path} (tail) ---\n{_tail(self.log_path)}"
                )
            time.sleep(0.02)

    def _reap_postmaster(self) -> None:
        if self._postmaster is not None:
            self._postmaster.wait()
            self._postmaster = None

    def _clear_stale_locks(self) -> None:
        """Removes the lock files of a server that no longer runs (the caller found none
        running): postmaster.pid and the socket's lock, which PostgreSQL would take for a live
        server's while their PID is a zombie or a recycled one. A process of the old server still
        alive (a backend yet to notice its postmaster died) still holds the shared memory: it is
        waited for, and a new server is refused while it stays."""
        deadline = time.monotonic() + min(self.timeout, 10.0)
        while left := cluster_processes(self.data_dir):
            if time.monotonic() > deadline:
                raise PostgresError(
                    f"{self.data_dir}: no postmaster runs, but processes of the last server do "
                    f"({', '.join(map(str, left))}): stop them first"
                )
            time.sleep(0.05)
        (self.data_dir / "postmaster.pid").unlink(missing_ok=True)
        for lock in self.data_dir.glob(".s.PGSQL.*.lock"):
            first = _first_line(lock)
            if not (first.isdigit() and _may_be_postmaster_of(int(first), self.data_dir)):
                lock.unlink(missing_ok=True)

    def _server_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        if self._account is not None:
            env.update(HOME=self._account.pw_dir, USER=self._account.pw_name, LOGNAME=self._account.pw_name)
        return env

    def _in_netns(self, command: list[str]) -> list[str]:
        """`command` in the server's network namespace, if it has one: `ip netns exec` (root's
        to do) enters it, then setpriv becomes the server's account; both exec, so the process
        started is the postmaster itself."""
        if self.netns is None:
            return command
        prefix = ["ip", "netns", "exec", self.netns]
        if self._account is not None:
            prefix += ["setpriv", f"--reuid={self._account.pw_uid}", f"--regid={self._account.pw_gid}"]
            prefix += ["--clear-groups", "--"]
        return prefix + command

    def _as_server(self, in_netns: bool = False) -> dict[str, Any]:
        """subprocess arguments that run a program as the server's account, in the data directory
        (the caller's may be closed to `postgres`, and initdb looks its own directory up).
        `in_netns`: the command itself changes account (_in_netns), after entering the namespace."""
        kwargs: dict[str, Any] = {"env": self._server_env(), "cwd": self.data_dir}
        if self._account is not None and not in_netns:
            kwargs.update(user=self._account.pw_uid, group=self._account.pw_gid, extra_groups=[])
        return kwargs

    def _ensure_role_and_database(self) -> None:
        try:
            with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=10) as conn:
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (self.user,)).fetchone() is None:
                    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(self.user)))
                if (
                    conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone()
                    is None
                ):
                    conn.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            sql.Identifier(self.database), sql.Identifier(self.user)
                        )
                    )
        except psycopg.Error as exc:
            raise PostgresError(
                f"{self.data_dir}: the server started but {self.admin_dsn} failed: {exc}\n"
                f"--- {self.log_path} (tail) ---\n{_tail(self.log_path)}"
            ) from None

    def _run_tool(self, tool: str, *args: str, what: str) -> None:
        """Runs one of PostgreSQL's programs as the server's account; PostgresError with its
        output when it fails."""
        try:
            done = subprocess.run(
                [str(self.bindir / tool), *args],
                capture_output=True,
                text=True,
                timeout=self.timeout + 30,
                check=False,
                **self._as_server(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PostgresError(f"{self.data_dir}: could not {what}: {tool}: {exc}") from None
        if done.returncode != 0:
            out = (done.stdout + done.stderr).strip()
            raise PostgresError(f"{self.data_dir}: could not {what}: {tool} exited {done.returncode}\n{out}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m terrapin_tools.pgserver",
        description="A PostgreSQL cluster of Terrapin's own in DIR, on 127.0.0.1.",
    )
    parser.add_argument("--dir", required=True, help="the cluster's data directory (made on first start)")
    parser.add_argument("--port", type=int, help="TCP port (default: the cluster's last, else a free one)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for start/stop")
    parser.add_argument("command", choices=["start", "stop", "status"])
    args = parser.parse_args(argv)
    try:
        server = PostgresServer(args.dir, port=args.port, timeout=args.timeout)
        if args.command == "start":
            if server.running and args.port is not None and server.port != args.port:
                print(
                    f"pgserver: {args.dir} already runs on port {server.port}, not {args.port}",
                    file=sys.stderr,
                )
            server.start()
            print(server.dsn)
        elif args.command == "stop":
            server.stop()
        elif server.running:
            print(server.dsn)
        else:
            print(f"pgserver: no server running in {args.dir}", file=sys.stderr)
            return 3
    except PostgresError as exc:
        print(f"pgserver: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
