"""Processes that `make bench-controller` and the failover drills start beside the controller:
terrapin-switch with no interfaces (its P4Runtime server alone, for measuring and exercising the
control path), and stopping a process the way each caller needs."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SWITCH = REPO / "build" / "bin" / "terrapin-switch"


def start_bare_switch(
    device_id: int,
    address: str,
    log: Path,
    binary: str | Path = SWITCH,
    options: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """A switch with no ports serving P4Runtime at `address` (host:port), its output appended to
    `log`. `options` go before the target options (e.g. BMv2's --thrift-port)."""
    args = [str(binary), "--no-p4", "--device-id", str(device_id), *options]
    args += ["--", "--grpc-server-addr", address, "--cpu-port", "255"]
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, and SIGKILL if it has not ended within `timeout` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_all(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM to all at once (they stop side by side), then as stop() each."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        stop(proc, timeout)
