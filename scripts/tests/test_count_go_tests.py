"""scripts/count_go_tests.py: what make test counts and shows of `go test -json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "count_go_tests.py"
PKG = "example.org/device"


def events(*rows: tuple[str, str, str]) -> str:
    out = []
    for test, action, text in rows:
        event = {"Package": PKG, "Test": test, "Action": action}
        if text:
            event["Output"] = text
        out.append(json.dumps(event))
    return "\n".join(out) + "\n"


def count(stream: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT)], input=stream, capture_output=True, text=True, check=False
    )


def test_a_failing_subtests_message_is_shown_with_its_top_level_test() -> None:
    done = count(
        events(
            ("TestPacing", "run", ""),
            ("TestPacing/10Mbit", "output", "    device_test.go:441: pacing off by +3.10% (limit 1%)\n"),
            ("TestPacing/10Mbit", "fail", ""),
            ("TestPacing", "fail", ""),
            ("TestQueues", "pass", ""),
        )
    )
    assert done.returncode == 1
    assert f"FAIL {PKG} TestPacing" in done.stdout
    assert "pacing off by +3.10% (limit 1%)" in done.stdout
    assert done.stdout.rstrip().endswith("1 passed, 1 failed")


def test_subtests_are_not_counted_apart() -> None:
    done = count(
        events(
            ("TestPacing/1.5Mbit", "pass", ""),
            ("TestPacing/10Mbit", "pass", ""),
            ("TestPacing", "pass", ""),
        )
    )
    assert done.returncode == 0
    assert done.stdout.rstrip().endswith("1 passed, 0 failed")
