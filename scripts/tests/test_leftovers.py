"""make test's leftover check (scripts/leftovers.py): only what the suites create is judged,
and namespaces coming and going beside the run are never reported."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from leftovers import PREFIXES, Footprint, is_test_switch, leftovers, link_names, namespace_names, ours  # noqa: E402


def footprint(namespaces: str = "", links: str = "", switches: frozenset[int] = frozenset()) -> Footprint:
    return Footprint(ours(namespace_names(namespaces)), ours(link_names(links)), switches)


def test_a_namespace_that_disappears_during_the_run_is_not_a_leftover() -> None:
    # the defect: `ip netns add tzzprobe` before make test, deleted during it → a blank leftover
    before = footprint("tzzprobe\ntrptdev123x1 (id: 4)\n")
    after = footprint("")
    assert leftovers(before, after) == []


def test_namespaces_that_are_not_the_suites_are_never_judged() -> None:
    before = footprint("")
    after = footprint("tzzprobe\nmn-foo\ntdev77x1\ntctl-h1\n")
    assert leftovers(before, after) == []


def test_what_the_suites_left_is_named() -> None:
    before = footprint("trptdev1x1\n", "1: lo: <LOOPBACK>\n")
    after = footprint(
        "trptdev1x1\ntrptctl-h1 (id: 2)\n",
        "1: lo: <LOOPBACK>\n7: trptptf1s@trptptf1t: <BROADCAST> mtu 1500\n9: eth0: <BROADCAST>\n"
        "11: fptf2t@fptf2s: <BROADCAST> mtu 1500\n",
        frozenset({4242}),
    )
    assert leftovers(before, after) == [
        "namespace trptctl-h1",
        "link fptf2t",
        "link trptptf1s",
        "switch process 4242",
    ]


def test_a_footprint_survives_its_file() -> None:
    f = footprint("trptdev1x1\n", "3: trptmn1p2@if4: <UP>\n", frozenset({1, 2}))
    assert Footprint.from_json(f.to_json()) == f


@pytest.mark.parametrize(
    ("cmdline", "namespace", "judged"),
    [
        (["/r/build/bin/terrapin-switch", "-i", "1@trptptf1s", "--no-p4"], None, True),
        (["simple_switch_grpc", "-i", "2@trptctl12", "--"], None, True),
        (["/r/build/oracle/bin/simple_switch_grpc", "--device-id", "1", "-i", "1@fptf1s"], None, True),
        (["/tmp/x/terrapin-switch", "--no-p4", "--device-id", "0"], "trptp4rt99", True),
        # make run's own switch, or anyone else's, is not the suites'
        (["/r/build/bin/terrapin-switch", "-i", "1@terrapin-eth1"], None, False),
        (["/r/build/bin/terrapin-switch", "-i", "1@terrapin-eth1"], "tzzprobe", False),
        (["/usr/bin/python3", "-i", "1@trptptf1s"], None, False),
        ([], None, False),
    ],
)
def test_switch_processes_are_judged_by_what_they_attach_to(
    cmdline: list[str], namespace: str | None, judged: bool
) -> None:
    assert is_test_switch(cmdline, namespace) is judged


# Where test code creates namespaces or links on the host, the names it uses.
CREATES = re.compile(r"""netns["',\s]+add|link["',\s]+add|ip link add|addLink\(|running\(""")
SOURCES = [
    *sorted((REPO / "toolchain").rglob("*_test.go")),
    *sorted((REPO / "toolchain" / "stf" / "viap4rt").glob("*.go")),
    *sorted((REPO / "controller" / "tests").glob("*.py")),
    *sorted((REPO / "topo" / "tests").glob("*.py")),
    REPO / "ptf-tests" / "run.sh",
    REPO / "fabric-ptf" / "run.sh",
]


def test_test_code_that_creates_host_objects_uses_the_prefix() -> None:
    creators = [p for p in SOURCES if CREATES.search(p.read_text())]
    names = {p.name for p in creators}
    # the creators this check is for are found (else it would pass by finding nothing)
    assert {
        "netns_test.go",
        "shell_test.go",
        "netns.go",
        "netlab.py",
        "run.sh",
        "test_christie_e2e.py",
    } <= names
    assert REPO / "fabric-ptf" / "run.sh" in creators
    without = [
        str(p.relative_to(REPO)) for p in creators if not any(prefix in p.read_text() for prefix in PREFIXES)
    ]
    assert without == [], f"these create namespaces or links without a prefix of {PREFIXES}"
