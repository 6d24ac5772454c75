"""Turns pytest's closing summary into make test's `N passed, M failed` line.

pytest ends with e.g. `3 failed, 40 passed, 2 skipped in 5.1s`; errors (collection or fixture
failures) count as failures, and a run that prints no summary at all counts as one failure.
"""

from __future__ import annotations

import re
import sys


def main() -> int:
    passed = failed = 0
    seen = False
    for line in sys.stdin:
        if re.search(r"\d+ (passed|failed|errors?)\b.* in [0-9.]+s", line) or "no tests ran" in line:
            seen = True
            passed = sum(int(n) for n in re.findall(r"(\d+) passed", line))
            failed = sum(int(n) for n in re.findall(r"(\d+) (?:failed|errors?)\b", line))
    if not seen:
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
