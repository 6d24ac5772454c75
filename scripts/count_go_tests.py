"""Counts `go test -json` results for make test: one result per top-level test.

Reads the JSON event stream on stdin, echoes failures (with their output) for the log, and ends
with the line `N passed, M failed`. A package that fails to build counts as one failure, since no
test event ever reports it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="append", default=[], help="NAME=pass|fail")
    args = parser.parse_args()

    results: dict[tuple[str, str], str] = {}
    broken_packages: set[str] = set()
    output: dict[tuple[str, str], list[str]] = defaultdict(list)
    for raw in sys.stdin:
        try:
            event = json.loads(raw)
        except json.JSONDecodeError:
            print(raw, end="")  # build errors arrive as plain text
            continue
        pkg, test, action = event.get("Package", ""), event.get("Test", ""), event.get("Action")
        if action == "output":
            # A subtest's output goes with its top-level test, which is what is counted and
            # echoed: a failing subtest's own message would otherwise be lost.
            output[(pkg, test.split("/", 1)[0])].append(event.get("Output", ""))
        if not test:
            if action == "fail" and not any(p == pkg for p, _ in results):
                broken_packages.add(pkg)
            continue
        if "/" in test:
            continue
        if action in ("pass", "fail", "skip"):
            results[(pkg, test)] = action

    failed = [key for key, action in results.items() if action == "fail"]
    for pkg, test in failed:
        print(f"FAIL {pkg} {test}")
        print("".join(output[(pkg, test)][-40:]))
    for pkg in sorted(broken_packages):
        print(f"FAIL {pkg} (build failed or no test ran)")
        print("".join(output[(pkg, "")][-40:]))
    passed = sum(1 for action in results.values() if action == "pass")
    n_failed = len(failed) + len(broken_packages)
    for check in args.check:
        name, _, verdict = check.partition("=")
        if verdict == "pass":
            passed += 1
        else:
            n_failed += 1
            print(f"FAIL {name}")
    print(f"{passed} passed, {n_failed} failed")
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
