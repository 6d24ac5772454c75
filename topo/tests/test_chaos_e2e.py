"""`make chaos`, short, with a fixed seed (issue 37): two minutes of random faults of every kind
under the clients' load and the measured traffic, on each switch, and nothing wrong in the
history: every answer allowed, nothing acknowledged lost, no port over-admitted, the switches
equal to the store, the traffic within its bounds outside its own fault windows.

A run that fails leaves its report in the test's directory (chaos.json, history.json, the
timeline plot and every process's log): its command line replays the same schedule.

Needs root, build/p4, the controller in build/venv, PostgreSQL and the cgroup v2 hierarchy
(`make setup`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from terrapin_tools import pgserver
from topo.chaos.actuators import PARTITION_BIN, cgroup2_root
from topo.p4switch import REPO, SWITCH_KINDS, switch_binary

DURATION_S = 120
# the schedule and each fault as applied ("    45.4 s  kill_primary c0"): in the report already
FAULT_LINE = re.compile(r"^ {3,}")
SEED = 4  # its schedule has all nine kinds of fault in two minutes (12 faults)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or not (REPO / "build/p4/terrapin.json").exists()
    or not pgserver.installed()
    or cgroup2_root() is None
    or not PARTITION_BIN.exists(),
    reason="needs root, build/p4, PostgreSQL, the cgroup v2 hierarchy and build/bin (make setup)",
)


@pytest.mark.parametrize("kind", SWITCH_KINDS)
def test_two_minutes_of_chaos_lose_nothing(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        switch_binary(kind)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    command = [
        sys.executable,
        "-m",
        "topo.chaos.run",
        f"--duration={DURATION_S}",
        f"--seed={SEED}",
        f"--switch={kind}",
        f"--out={tmp_path}",
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=DURATION_S + 600)
    with capsys.disabled():  # the summary and every problem into make test's log, passed or not
        print("\n" + "\n".join(line for line in done.stdout.splitlines() if not FAULT_LINE.match(line)))
    report = json.loads((tmp_path / kind / "chaos.json").read_text())
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert report["verdict"] == "pass"
    # a fault whose target had no replica in that role at the time (both down) is not applied:
    # timing decides, so only the totals are held to
    injected = report["faults_by_kind"]
    assert sum(injected.values()) >= 6 and len(injected) >= 4, injected
    assert report["granted"] > 50 and report["closed"] > 10, report["requests"]
    assert all(t["received"] > 0.8 * t["sent"] for t in report["traffic"]), report["traffic"]
