"""make stop (scripts/stop.sh) stops what a run recorded in its pids directory, however it was
started, and nothing else. A run directory of the test's own stands in for build/run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from terrapin_tools.pgserver import PostgresError, PostgresServer, find_bindir

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = REPO / "build" / "venv" / "bin" / "terrapin-controller"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def controller_config(rest_port: int) -> dict[str, object]:
    # One switch nobody serves: the controller keeps trying to reach it and serves REST meanwhile.
    port = {"mac": "02:00:00:00:01:01", "rate_bps": 10_000_000}
    return {
        "p4": {
            "p4info": str(REPO / "build/p4/terrapin.p4info.txtpb"),
            "json": str(REPO / "build/p4/terrapin.json"),
        },
        "rest": {"host": "127.0.0.1", "port": rest_port, "token": "t"},
        "store": "state/reservations.sqlite",
        "switches": [
            {
                "name": "s1",
                "address": f"127.0.0.1:{free_port()}",
                "device_id": 1,
                "ports": [
                    port | {"number": 1, "peer": "h1", "gateway_ip": "10.0.1.1"},
                    port | {"number": 2, "mac": "02:00:00:00:01:02", "peer": "h2", "gateway_ip": "10.0.2.1"},
                ],
            }
        ],
        "hosts": [
            {"name": "h1", "ip": "10.0.1.2", "mac": "0a:00:00:00:00:01", "switch": "s1", "port": 1},
            {"name": "h2", "ip": "10.0.2.2", "mac": "0a:00:00:00:00:02", "switch": "s1", "port": 2},
        ],
    }


def stop(run_dir: Path) -> str:
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "stop.sh")],
        env=os.environ | {"TERRAPIN_RUN_DIR": str(run_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_controller_started_by_hand_with_a_relative_config_is_stopped(tmp_path: Path) -> None:
    (tmp_path / "ctl.yaml").write_text(yaml.safe_dump(controller_config(free_port())))
    # as docs/topologies.md shows: relative paths, from another directory than the repository
    pid_file = tmp_path / "run" / "pids" / "controller.pid"
    with open(tmp_path / "controller.log", "wb") as log:
        process = subprocess.Popen(
            [str(CONTROLLER), "--config", "ctl.yaml", "--pid-file", "run/pids/controller.pid"],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pid_file.read_text().strip() == str(process.pid), (tmp_path / "controller.log").read_text()
        said = stop(tmp_path / "run")
        assert process.wait(timeout=20) == 0  # SIGTERM: a clean shutdown
        assert f"stopping controller (pid {process.pid})" in said
        assert not pid_file.exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_recorded_pid_now_used_by_another_program_is_left_alone(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = tmp_path / "run" / "pids" / "switch-s1.pid"
        record.parent.mkdir(parents=True)
        record.write_text(f"{other.pid}\n")
        said = stop(tmp_path / "run")
        assert other.poll() is None, "stop.sh killed a process that was not the run's"
        assert said == "" and not record.exists()
    finally:
        other.kill()
        other.wait()


def test_the_postgresql_of_a_killed_runner_is_stopped() -> None:
    """make run STORE=postgres: the runner stops its cluster last; if the runner was killed,
    make stop stops the cluster in the run directory's postgres/."""
    try:
        find_bindir()
    except PostgresError as missing:
        pytest.skip(str(missing))
    # Not tmp_path: under root the server runs as `postgres`, which must enter the run directory.
    run_dir = Path(tempfile.mkdtemp(prefix="trpt-stop-"))
    run_dir.chmod(0o755)
    server = PostgresServer(run_dir / "postgres")
    try:
        postmaster = server.start().pid
        assert postmaster is not None
        said = stop(run_dir)
        assert f"stopping PostgreSQL in {run_dir}/postgres" in said
        assert os.waitpid(postmaster, 0)[0] == postmaster  # it exited (and is reaped: our child)
        assert stop(run_dir) == ""  # a second make stop finds nothing to stop
    finally:
        server.close()
        shutil.rmtree(run_dir, ignore_errors=True)
