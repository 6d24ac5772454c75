"""make setup (scripts/setup.sh) tells what it is doing while it does it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_python_install_shows_each_step_while_pip_runs() -> None:
    # Without its stamp, setup reinstalls the Python packages (quick in a built venv: pip finds
    # everything installed and rebuilds only the editable controller).
    (REPO / "build" / ".python-deps").unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["bash", "scripts/setup.sh"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = [(time.monotonic(), line.rstrip()) for line in proc.stdout]
    assert proc.wait(timeout=600) == 0, "\n".join(line for _, line in lines)
    text = [line for _, line in lines]
    assert any("installing Python packages: the controller" in line for line in text), text
    pip = [(at, line) for at, line in lines if line.lstrip().startswith("pip: ")]
    assert any("Successfully installed terrapin" in line for _, line in pip), text
    # Shown as pip goes, not all at the end: the editable build (seconds) lies between its
    # first line and its last.
    assert pip[-1][0] - pip[0][0] > 0.5, pip
    assert (REPO / "build" / ".python-deps").exists()
