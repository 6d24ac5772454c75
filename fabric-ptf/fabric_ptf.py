"""What fabric-ptf/run.sh reads from upstream's files and from excluded.txt, and how it counts.

    python fabric-ptf/fabric_ptf.py flags PROFILE        the profile's -D flags (upstream-Makefile)
    python fabric-ptf/fabric_ptf.py selection PROFILE    its PTF test selection (Makefile.profiles)
    python fabric-ptf/fabric_ptf.py exclude SWITCH PROFILE   "^test.Name" per excluded test
    python fabric-ptf/fabric_ptf.py report --label L --xunit DIR --expected FILE --switch S --profile P

Everything is read from the files as upstream wrote them, so a profile's flags and tests are
upstream's own; nothing here knows a test by name.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_FABRIC = HERE.parent.parent / "shared" / "realworld" / "fabric-tna"
EXCLUDED = HERE / "excluded.txt"
PROFILES = ("fabric", "fabric-int", "fabric-upf", "fabric-upf-int")
SWITCHES = ("terrapin", "bmv2")


def profile_flags(upstream_makefile: str, profile: str) -> list[str]:
    """The preprocessor flags upstream compiles PROFILE's v1model build with: the second argument
    of its `p4src/v1model/build.sh PROFILE "FLAGS"` line."""
    pattern = re.compile(r'p4src/v1model/build\.sh\s+(\S+)\s+"([^"]*)"')
    for line in upstream_makefile.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = pattern.search(line)
        if m and m.group(1) == profile:
            return m.group(2).split()
    raise KeyError(f"upstream-Makefile has no v1model build of profile {profile!r}")


def profile_selection(makefile_profiles: str, profile: str) -> list[str]:
    """PROFILE's default PTF test specs in Makefile.profiles (its `$(eval TEST = ...)` line),
    without the user's $(PTF_FILTER)."""
    in_target = False
    for line in makefile_profiles.splitlines():
        target = re.match(r"^([A-Za-z0-9_-]+):", line)
        if target:
            in_target = target.group(1) == profile
            continue
        m = re.search(r"\$\(eval TEST = (.*)\)\s*$", line)
        if in_target and m:
            return [spec for spec in m.group(1).split() if not spec.startswith("$(")]
    raise KeyError(f"Makefile.profiles has no test selection for profile {profile!r}")


@dataclass(frozen=True)
class Exclusion:
    test: str  # PTF's name for it: module.Class
    switches: frozenset[str]
    profiles: frozenset[str]  # empty: every profile
    reason: str

    def applies(self, switch: str, profile: str) -> bool:
        return switch in self.switches and (not self.profiles or profile in self.profiles)


def parse_exclusions(text: str, source: str = "excluded.txt") -> list[Exclusion]:
    """One exclusion a line: `module.Class  SWITCHES  reason...`, where SWITCHES is terrapin,
    bmv2 or both joined by a comma, optionally followed by `@profile[,profile]` to limit it to
    those profiles. `#` starts a comment; blank lines are skipped. A malformed line is an error,
    so a typo can never silently exclude nothing (or everything)."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        where = f"{source}:{n}"
        if len(parts) < 3:
            raise ValueError(f"{where}: want 'module.Class SWITCHES reason', got {raw!r}")
        test, scope, reason = parts
        if not re.fullmatch(r"[A-Za-z_]\w*\.[A-Za-z_]\w*", test):
            raise ValueError(f"{where}: {test!r} is not a PTF test name (module.Class)")
        switch_part, _, profile_part = scope.partition("@")
        switches = frozenset(switch_part.split(","))
        profiles = frozenset(profile_part.split(",")) if profile_part else frozenset()
        if not switches <= set(SWITCHES):
            raise ValueError(f"{where}: switches {switch_part!r} not among {', '.join(SWITCHES)}")
        if not profiles <= set(PROFILES):
            raise ValueError(f"{where}: profiles {profile_part!r} not among {', '.join(PROFILES)}")
        out.append(Exclusion(test, switches, profiles, reason.strip()))
    return out


def excluded_for(exclusions: Iterable[Exclusion], switch: str, profile: str) -> list[Exclusion]:
    return [e for e in exclusions if e.applies(switch, profile)]


@dataclass
class Results:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # failures and errors
    skipped: list[str] = field(default_factory=list)  # skipped by the test itself (unittest skip)
    missing: list[str] = field(default_factory=list)  # selected but never reported: counted failed
    messages: dict[str, str] = field(default_factory=dict)  # failed test -> first line of its error


def read_xunit(xunit_dir: Path) -> dict[str, tuple[str, str]]:
    """Each test's outcome from PTF's --xunit files: name -> (passed|failed|skipped, message)."""
    outcomes: dict[str, tuple[str, str]] = {}
    for path in sorted(xunit_dir.glob("*.xml")):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            outcomes[path.stem] = ("failed", f"unreadable xunit file: {e}")
            continue
        for case in root.iter("testcase"):
            name = case.get("classname") or case.get("name") or path.stem
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                    message = (child.get("message") or child.get("type") or child.tag).strip()
                    break
                if child.tag == "skipped":
                    outcome, message = "skipped", (child.get("message") or "").strip()
            prev = outcomes.get(name)
            if prev is None or prev[0] != "failed":
                outcomes[name] = (outcome, message)
    return outcomes


def tally(outcomes: dict[str, tuple[str, str]], expected: Iterable[str]) -> Results:
    results = Results()
    expected = list(expected)
    for name in expected:
        if name not in outcomes:
            results.missing.append(name)
            continue
        outcome, message = outcomes[name]
        getattr(results, outcome).append(name)
        if outcome == "failed":
            results.messages[name] = message.splitlines()[0] if message else ""
    # Something reported that was not expected (it should not happen) still counts.
    for name, (outcome, message) in outcomes.items():
        if name not in expected:
            getattr(results, outcome).append(name)
            if outcome == "failed":
                results.messages[name] = message.splitlines()[0] if message else ""
    return results


def report(
    label: str, results: Results, excluded: list[Exclusion], seconds: float | None = None
) -> list[str]:
    failed = len(results.failed) + len(results.missing)
    head = (
        f"fabric-ptf[{label}]: {len(results.passed)} passed, {failed} failed, "
        f"{len(results.skipped)} skipped, {len(excluded)} excluded"
    )
    if seconds is not None:
        head += f" ({seconds:.0f} s)"
    lines = [head]
    for name in results.failed:
        lines.append(f"  FAILED  {name}: {results.messages.get(name, '')[:200]}")
    for name in results.missing:
        lines.append(f"  FAILED  {name}: no result (PTF stopped before it, or it hung)")
    return lines


def _fabric(args: argparse.Namespace) -> Path:
    return Path(args.fabric) if args.fabric else DEFAULT_FABRIC


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--fabric", help="the fabric-tna directory (default ../shared/realworld/fabric-tna)")
    parser.add_argument("--excluded", default=str(EXCLUDED), help="the exclusion list")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("flags").add_argument("profile", choices=PROFILES)
    sub.add_parser("selection").add_argument("profile", choices=PROFILES)
    ex = sub.add_parser("exclude")
    ex.add_argument("switch", choices=SWITCHES)
    ex.add_argument("profile", choices=PROFILES)
    rep = sub.add_parser("report")
    rep.add_argument("--label", required=True)
    rep.add_argument("--xunit", required=True, type=Path)
    rep.add_argument("--expected", required=True, type=Path, help="file: one test name a line")
    rep.add_argument("--switch", required=True, choices=SWITCHES)
    rep.add_argument("--profile", required=True, choices=PROFILES)
    rep.add_argument("--seconds", type=float)
    args = parser.parse_args(argv)

    fabric = _fabric(args)
    if args.cmd == "flags":
        print(" ".join(profile_flags((fabric / "upstream-Makefile").read_text(), args.profile)))
        return 0
    if args.cmd == "selection":
        text = (fabric / "ptf" / "tests" / "common" / "Makefile.profiles").read_text()
        print(" ".join(profile_selection(text, args.profile)))
        return 0
    exclusions = parse_exclusions(Path(args.excluded).read_text(), args.excluded)
    if args.cmd == "exclude":
        for e in excluded_for(exclusions, args.switch, args.profile):
            print(f"^{e.test}")
        return 0
    # report
    expected = [line.strip() for line in args.expected.read_text().splitlines() if line.strip()]
    excluded = excluded_for(exclusions, args.switch, args.profile)
    results = tally(read_xunit(args.xunit) if args.xunit.is_dir() else {}, expected)
    for line in report(args.label, results, excluded, args.seconds):
        print(line)
    return 0 if not (results.failed or results.missing) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
