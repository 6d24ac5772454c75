"""make run's supervisor with real processes (no network needed): a process that dies is reaped,
logged with why, and started again after a back-off."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topo.supervise import Supervised, Supervisor, describe_exit


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def exits(status: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"raise SystemExit({status})"])


def is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # gone: reaped
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_until(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize(
    ("returncode", "said"),
    [
        (0, "with status 0"),
        (3, "with status 3"),
        (-9, "killed by signal 9 (SIGKILL)"),
        (-15, "killed by signal 15 (SIGTERM)"),
        (-200, "killed by signal 200"),
    ],
)
def test_an_exit_is_described(returncode: int, said: str) -> None:
    assert describe_exit(returncode) == said


def test_a_dead_process_is_reaped_logged_and_restarted(tmp_path: Path) -> None:
    lines: list[str] = []
    supervisor = Supervisor(
        tmp_path / "supervisor.log", echo=lines.append, first_delay=0.05, poll_interval=0.02
    )
    first = exits(3)
    pid_file = tmp_path / "pids" / "thing.pid"
    started: list[subprocess.Popen[bytes]] = []

    def launch() -> subprocess.Popen[bytes]:
        started.append(sleeper())
        return started[-1]

    supervisor.watch("thing", first, launch, pid_file)
    supervisor.start()
    try:
        assert wait_until(lambda: started and pid_file.exists()), lines
        again = started[0]
        assert supervisor.process("thing") is again
        assert pid_file.read_text().strip() == str(again.pid)
        assert not is_zombie(first.pid)
        log = (tmp_path / "supervisor.log").read_text()
        assert f"thing (pid {first.pid}) exited with status 3 after" in log
        assert "restarting it in 0.05 s" in log
        assert f"thing restarted (pid {again.pid}, restart 1)" in log
        # killed from outside, as by `kill -9`: said so, and started once more
        os.kill(again.pid, signal.SIGKILL)
        assert wait_until(lambda: len(started) == 2), lines
        assert f"thing (pid {again.pid}) exited killed by signal 9 (SIGKILL)" in "\n".join(lines)
        assert not is_zombie(again.pid)
    finally:
        supervisor.stop()
        for process in started:
            process.kill()
            process.wait()


def test_the_back_off_doubles_to_its_cap_and_starts_over_once_stable() -> None:
    lines: list[str] = []
    supervisor = Supervisor(echo=lines.append, first_delay=1.0, max_delay=4.0, stable_after=60.0)
    child = Supervised("flaky", lambda: exits(1), exits(1), started_at=0.0)
    child.process.wait()
    delays = []
    now = 0.0
    for _ in range(5):
        supervisor.check(child, now)  # sees it dead: schedules the restart
        assert child.restart_at is not None
        delays.append(child.restart_at - now)
        now = child.restart_at
        supervisor.check(child, now)  # due: starts it (it dies again at once)
        child.process.wait()
    assert delays == [1.0, 2.0, 4.0, 4.0, 4.0]
    # a process that stays up a minute has settled: the next death waits the first delay again
    child.process = sleeper()
    try:
        supervisor.check(child, now + 61)
        assert child.delay == 0
    finally:
        child.process.kill()
        child.process.wait()
    supervisor.check(child, now + 62)
    assert child.restart_at == now + 62 + 1.0


def test_a_restart_that_fails_is_logged_and_tried_again() -> None:
    lines: list[str] = []
    supervisor = Supervisor(echo=lines.append, first_delay=1.0, max_delay=30.0)

    def launch() -> subprocess.Popen[bytes]:
        raise FileNotFoundError("build/bin/terrapin-switch is missing")

    child = Supervised("switch s1", launch, exits(2), started_at=0.0)
    child.process.wait()
    supervisor.check(child, 0.0)
    supervisor.check(child, 1.0)
    assert (
        "switch s1 could not be started (build/bin/terrapin-switch is missing); trying again in 2 s"
        in lines[-1]
    )
    assert child.restart_at == 3.0
