"""The chaos run's hands (`make chaos`, issue 37): each fault of the nemesis's plan done to the
running network and undone, with the Unix times it took effect, for the report and the checker.

A kill is healed by the run's supervisor (topo/supervise.py), which starts the process again
after its back-off; a pause by SIGCONT; a trunk cut by mending it. "primary" and "backup" are
resolved when the fault fires, from the replicas' own /health.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from topo import faults
from topo.chaos.nemesis import Fault
from topo.chaos.workload import ask
from topo.network import ControllerProcess, RunningNetwork
from topo.p4switch import REPO

PARTITION_BIN = REPO / "build" / "bin" / "terrapin-partition"


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside
    v1's), None without one."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def store_port(dsn: str) -> int:
    """The TCP port of a PostgreSQL URL (postgresql://user@127.0.0.1:PORT/db)."""
    found = re.search(r"@[^:/]+:(\d+)", dsn) or re.search(r"port=(\d+)", dsn)
    if found is None:
        raise ValueError(f"no port in the store's address {dsn!r}")
    return int(found.group(1))


@dataclass
class Applied:
    """A fault as it happened: what it hit and when (Unix seconds)."""

    fault: Fault
    target: str  # the replica (c0, c1), switch or trunk it hit; "" for the store
    began: float
    ended: float | None = None  # healed (a kill: when the supervisor had started it again)
    error: str = ""  # why it could not be applied


class Actuators:
    def __init__(self, run: RunningNetwork) -> None:
        self.run = run
        self._paused: dict[Fault, int] = {}
        self._partitions: dict[Fault, subprocess.Popen[str]] = {}

    def apply(self, fault: Fault) -> Applied:
        kind = fault.kind
        if kind in ("partition_store", "partition_switches"):
            return self._partition(fault)
        if kind in ("kill_primary", "kill_backup", "pause_primary", "pause_backup"):
            controller = self._replica(fault.target)
            if controller is None:
                return Applied(fault, "", time.time(), time.time(), f"no replica is {fault.target} now")
            process = self.run.process(controller)
            if process is None or process.poll() is not None:
                return Applied(fault, controller.replica or "", time.time(), time.time(), "not running")
            if kind.startswith("pause"):
                os.kill(process.pid, signal.SIGSTOP)
                self._paused[fault] = process.pid
            else:
                os.kill(process.pid, signal.SIGKILL)
            return Applied(fault, controller.replica or "", time.time())
        if kind == "kill_switch":
            return Applied(fault, fault.target, faults.kill_switch(self.run, fault.target))
        if kind == "kill_store":
            assert self.run.supervisor is not None
            postmaster = self.run.supervisor.process("postgres")
            if postmaster is None or postmaster.poll() is not None:
                return Applied(fault, "", time.time(), time.time(), "PostgreSQL is not running")
            os.kill(postmaster.pid, signal.SIGKILL)
            return Applied(fault, "", time.time())
        if kind == "cut_trunk":
            a, b = fault.target.split("-")
            # BMv2 stops handing every port's frames to its controller while one of its
            # interfaces is down (docs/bmv2.md): its trunks are cut silently, as E11 does.
            silent = self.run.switch_kind == "bmv2"
            return Applied(fault, fault.target, faults.set_trunk(self.run, a, b, up=False, silent=silent))
        raise ValueError(f"unknown fault kind {kind}")

    def heal(self, applied: Applied) -> None:
        """Undoes what apply did (a kill needs nothing: the supervisor restarts the process)."""
        fault = applied.fault
        if applied.error:
            return
        if fault.kind.startswith("partition"):
            cut = self._partitions.pop(fault)
            cut.terminate()
            cut.wait(10)
        elif fault.kind.startswith("pause"):
            pid = self._paused.pop(fault)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        elif fault.kind == "cut_trunk":
            a, b = fault.target.split("-")
            faults.set_trunk(self.run, a, b, up=True, silent=self.run.switch_kind == "bmv2")
        applied.ended = time.time()

    def heal_everything(self, applied: list[Applied]) -> None:
        """At the end, or after an error: nothing left paused or cut."""
        for a in applied:
            if a.ended is None and a.fault.heal_after:  # a kill: the supervisor restarted it
                with contextlib.suppress(OSError, subprocess.CalledProcessError, RuntimeError, KeyError):
                    self.heal(a)

    def _partition(self, fault: Fault) -> Applied:
        """Replica `fault.target` cut off from the store or from every switch: their packets
        dropped both ways, no reset (terrapin-partition on the replica's cgroup)."""
        controller = next((c for c in self.run.controllers if c.replica == fault.target), None)
        if controller is None or controller.cgroup is None:
            return Applied(
                fault, fault.target, time.time(), time.time(), "the replica has no cgroup of its own"
            )
        if fault.kind == "partition_store":
            ports = [store_port(self.run.store)]
        else:
            ports = [self.run.net.get(name).grpc_port for name in self.run.plan.switches]
        command = [str(PARTITION_BIN), "--cgroup", str(controller.cgroup)]
        for port in ports:
            command += ["--port", str(port)]
        cut = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert cut.stdout is not None
        if cut.stdout.readline().strip() != "partitioned":
            cut.kill()
            return Applied(
                fault, fault.target, time.time(), time.time(), f"terrapin-partition failed ({cut.wait()})"
            )
        self._partitions[fault] = cut
        return Applied(fault, fault.target, time.time())

    def _replica(self, role: str) -> ControllerProcess | None:
        """The replica whose /health says it is `role` now (a paused one does not answer)."""
        for controller in self.run.controllers:
            status, body, _ = ask(
                controller.rest_url, self.run.token, "GET", "/health", context=self.run.https, timeout=1.0
            )
            if status and isinstance(body, dict) and (body.get("replication") or {}).get("role") == role:
                return controller
        return None
