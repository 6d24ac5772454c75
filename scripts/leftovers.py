"""What the test suites leave behind on the machine, judged by make test (scripts/test-all.sh).

Everything the suites create on the host carries the prefix PREFIX ("trpt", Terrapin test):
the Go device tests' namespaces (trptdev…, trptperf…), the STF-through-P4Runtime and p4rt
tests' namespaces (trptp4rt…), the PTF veths (trptptf…), the controller's integration lab
(trptctl…), the topology tests' switch interfaces (trptmn…) and the experiments' (trptex…);
SD-Fabric's PTF suite (fabric-ptf/run.sh) names its veths fptf…, apart from the rest, so that it
can run beside another suite or network without touching their interfaces. PREFIXES are both.
Only those are judged, so a namespace or switch that someone else creates or deletes beside
the run (another experiment, `ip netns add tzzprobe`, Mininet's own) is never taken for a
leftover, and one that disappears during the run is never reported either.

    python scripts/leftovers.py snapshot > before.json
    ... run the suites ...
    python scripts/leftovers.py check before.json   # prints the leftovers, exit 1 if any

A leftover is a prefixed network namespace or root-namespace link that was not there before,
or a switch process (terrapin-switch, simple_switch_grpc) that was not running before and is
attached to prefixed interfaces or runs in a prefixed namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PREFIX = "trpt"
PREFIXES = (PREFIX, "fptf")
SWITCH_PROGRAMS = ("terrapin-switch", "simple_switch_grpc", "simple_switch")
NETNS_DIR = Path("/run/netns")


@dataclass(frozen=True)
class Footprint:
    namespaces: frozenset[str]
    links: frozenset[str]
    switches: frozenset[int]  # pids

    def to_json(self) -> str:
        return json.dumps(
            {
                "namespaces": sorted(self.namespaces),
                "links": sorted(self.links),
                "switches": sorted(self.switches),
            }
        )

    @staticmethod
    def from_json(text: str) -> Footprint:
        data = json.loads(text)
        return Footprint(frozenset(data["namespaces"]), frozenset(data["links"]), frozenset(data["switches"]))


def namespace_names(ip_netns_list: str) -> set[str]:
    """Names from `ip netns list` ("name" or "name (id: 3)" per line; blank lines ignored)."""
    return {line.split()[0] for line in ip_netns_list.splitlines() if line.strip()}


def link_names(ip_o_link: str) -> set[str]:
    """Names from `ip -o link show` ("2: name@peer: <...> ..." per line)."""
    names = set()
    for line in ip_o_link.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            names.add(parts[1].strip().split("@")[0])
    return names


def ours(names: Iterable[str], prefix: str | tuple[str, ...] = PREFIXES) -> frozenset[str]:
    return frozenset(n for n in names if n.startswith(prefix))


def is_test_switch(
    cmdline: list[str], namespace: str | None, prefix: str | tuple[str, ...] = PREFIXES
) -> bool:
    """A switch process the suites started: one of the switch programs, on prefixed interfaces
    (`-i 1@trptptf1s`) or inside a prefixed namespace."""
    if not cmdline or os.path.basename(cmdline[0]) not in SWITCH_PROGRAMS:
        return False
    if namespace is not None and namespace.startswith(prefix):
        return True
    return any(
        arg.partition("@")[2].startswith(prefix) for arg in cmdline if "@" in arg and not arg.startswith("-")
    )


def leftovers(before: Footprint, after: Footprint) -> list[str]:
    """What `after` has of ours that `before` did not, as sorted descriptions."""
    found = [f"namespace {n}" for n in sorted(after.namespaces - before.namespaces)]
    found += [f"link {n}" for n in sorted(after.links - before.links)]
    found += [f"switch process {pid}" for pid in sorted(after.switches - before.switches)]
    return found


# ---- reading the machine --------------------------------------------------------------------


def _run(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _namespace_of(pid: int, by_inode: dict[int, str]) -> str | None:
    try:
        return by_inode.get(os.stat(f"/proc/{pid}/ns/net").st_ino)
    except OSError:
        return None


def snapshot() -> Footprint:
    namespaces = ours(namespace_names(_run("ip", "netns", "list")))
    by_inode = {}
    for name in namespaces:
        try:
            by_inode[(NETNS_DIR / name).stat().st_ino] = name
        except OSError:
            continue  # deleted meanwhile
    switches = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        if is_test_switch([a for a in cmdline if a], _namespace_of(pid, by_inode)):
            switches.add(pid)
    return Footprint(namespaces, ours(link_names(_run("ip", "-o", "link", "show"))), frozenset(switches))


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[1] == "snapshot":
        print(snapshot().to_json())
        return 0
    if len(argv) == 3 and argv[1] == "check":
        found = leftovers(Footprint.from_json(Path(argv[2]).read_text()), snapshot())
        print(", ".join(found))
        return 1 if found else 0
    print("usage: leftovers.py snapshot | check BEFORE.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
