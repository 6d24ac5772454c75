"""Keeps `make run`'s switches, controllers and PostgreSQL server running: a process that dies
is logged with why (its exit status or the signal that killed it) and started again after a
back-off.

The processes are children of the topology runner; nothing else waited for them, so one that
died stayed a zombie (<defunct>) and nothing noticed. The supervisor polls them (which also reaps
them), restarts each with the command line it was first started with, and records every PID in
build/run/pids/ so `make stop` can stop what is running now, not what ran first.

Back-off: 1 s after the first exit, doubling up to 30 s while a process keeps dying, and back to
1 s once one has stayed up for a minute. It never gives up: a network whose switch stays down is
what the supervisor is for, and each attempt is logged.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from terrapin_tools.pgserver import PostgresServer

Launch = Callable[[], "subprocess.Popen[bytes]"]


def describe_exit(returncode: int) -> str:
    """`with status 3`, or `killed by signal 9 (SIGKILL)` (Popen's negative return codes)."""
    if returncode >= 0:
        return f"with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f"killed by signal {-returncode}"
    return f"killed by signal {-returncode} ({name})"


def write_pid(path: Path | None, pid: int) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{pid}\n")


@dataclass
class Supervised:
    """One process: how to start it again, and where its PID is recorded."""

    name: str
    launch: Launch
    process: subprocess.Popen[bytes]
    pid_file: Path | None = None
    started_at: float = field(default_factory=time.monotonic)
    delay: float = 0.0  # the next back-off; 0 until the process first dies
    restart_at: float | None = None  # when a dead process is due to start again
    restarts: int = 0


class Supervisor:
    def __init__(
        self,
        log_path: Path | None = None,
        echo: Callable[[str], None] | None = print,
        first_delay: float = 1.0,
        max_delay: float = 30.0,
        stable_after: float = 60.0,
        poll_interval: float = 0.25,
    ) -> None:
        self.log_path = log_path
        self._echo = echo
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.stable_after = stable_after
        self.poll_interval = poll_interval
        self._children: list[Supervised] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def log(self, message: str) -> None:
        line = f"{datetime.now().isoformat(timespec='seconds')} supervisor: {message}"
        if self._echo is not None:
            self._echo(line)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "a") as log:
                log.write(line + "\n")

    def watch(
        self, name: str, process: subprocess.Popen[bytes], launch: Launch, pid_file: Path | None = None
    ) -> None:
        """Watch a running process; `launch` starts it again, `pid_file` records each new PID."""
        with self._lock:
            self._children.append(Supervised(name, launch, process, pid_file))
        self.log(f"watching {name} (pid {process.pid})")

    def process(self, name: str) -> subprocess.Popen[bytes] | None:
        """The process running (or last run) as `name` now."""
        with self._lock:
            return next((c.process for c in self._children if c.name == name), None)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (before the processes are stopped on purpose)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval):
            with self._lock:
                children = list(self._children)
            for child in children:
                self.check(child, time.monotonic())

    def check(self, child: Supervised, now: float) -> None:
        """One look at one process: note its death, or start it again when it is due."""
        if child.restart_at is None:
            returncode = child.process.poll()  # also reaps it: no <defunct> left behind
            if returncode is None:
                if now - child.started_at >= self.stable_after:
                    child.delay = 0.0  # it has settled: the next death starts the back-off over
                return
            child.delay = self.first_delay if child.delay == 0 else min(child.delay * 2, self.max_delay)
            child.restart_at = now + child.delay
            self.log(
                f"{child.name} (pid {child.process.pid}) exited {describe_exit(returncode)} after "
                f"{now - child.started_at:.1f} s; restarting it in {child.delay:g} s"
            )
            return
        if now < child.restart_at or self._stop.is_set():
            return
        try:
            process = child.launch()
        except Exception as exc:  # a missing binary, a port still taken: log it and try again
            child.delay = min(child.delay * 2, self.max_delay)
            child.restart_at = now + child.delay
            self.log(f"{child.name} could not be started ({exc}); trying again in {child.delay:g} s")
            return
        with self._lock:
            child.process = process
        child.started_at = now
        child.restart_at = None
        child.restarts += 1
        write_pid(child.pid_file, process.pid)
        self.log(f"{child.name} restarted (pid {process.pid}, restart {child.restarts})")


def watch_postgres(supervisor: Supervisor, server: PostgresServer, name: str = "postgres") -> None:
    """Watch the PostgreSQL server `server` started, as a switch or a controller is watched: once
    its postmaster has died it is started again on the same data directory, where PostgreSQL's
    crash recovery brings back every committed transaction (the replicas reconnect and take the
    lease again by themselves; docs/deployment.md)."""
    postmaster: subprocess.Popen[bytes] | None = server.postmaster
    if postmaster is None:  # it ran before this runner started (make stop had not stopped it)
        supervisor.log(
            f"{name}: {server.data_dir} is served by pid {server.pid}, not started here; not watched"
        )
        return

    def launch() -> subprocess.Popen[bytes]:
        server.start()
        restarted: subprocess.Popen[bytes] | None = server.postmaster
        if restarted is None:  # started meanwhile from elsewhere (pgserver start, by hand)
            raise RuntimeError(f"{server.data_dir} is served by pid {server.pid}, not started here")
        return restarted

    supervisor.watch(name, postmaster, launch)
