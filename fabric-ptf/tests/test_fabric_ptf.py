"""fabric-ptf's helper (fabric-ptf/fabric_ptf.py): what it reads from upstream's files and from
excluded.txt, and how it counts PTF's results; the TRex stand-in."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "stubs"))

from fabric_ptf import (  # noqa: E402
    DEFAULT_FABRIC,
    EXCLUDED,
    PROFILES,
    Exclusion,
    excluded_for,
    parse_exclusions,
    profile_flags,
    profile_selection,
    read_xunit,
    report,
    tally,
)

needs_fabric = pytest.mark.skipif(
    not (DEFAULT_FABRIC / "ptf").is_dir(), reason="../shared/realworld/fabric-tna is not there"
)


# ---- upstream's files -----------------------------------------------------------------------


def test_profile_flags_are_the_second_argument_of_the_v1model_build_line() -> None:
    makefile = (
        "fabric-v1model:\n"
        '\t@${DIR}/p4src/v1model/build.sh fabric ""\n'
        "fabric-int-tna:\n"
        '\t@$(DIR)/p4src/tna/build.sh fabric-int "-DWITH_INT"\n'
        "fabric-upf-int-v1model:\n"
        '\t@$(DIR)/p4src/v1model/build.sh fabric-upf-int "-DWITH_UPF -DWITH_INT"\n'
        '# fabric-bng:\n# \t@$(DIR)/p4src/v1model/build.sh fabric-bng "-DWITH_BNG"\n'
    )
    assert profile_flags(makefile, "fabric") == []
    assert profile_flags(makefile, "fabric-upf-int") == ["-DWITH_UPF", "-DWITH_INT"]
    with pytest.raises(KeyError):
        profile_flags(makefile, "fabric-int")  # only its TNA build is there
    with pytest.raises(KeyError):
        profile_flags(makefile, "fabric-bng")  # commented out upstream


def test_profile_selection_is_the_eval_line_of_the_profiles_target() -> None:
    profiles = (
        "fabric: _checkenv\n"
        "ifndef TEST\n"
        "\t$(eval TEST = all ^upf ^int $(PTF_FILTER))\n"
        "endif\n"
        "\t$(call run_tests,fabric,$(TEST))\n"
        "\n"
        "fabric-int: _checkenv\n"
        "ifndef TEST\n"
        "\t$(eval TEST = all ^upf $(PTF_FILTER))\n"
        "endif\n"
    )
    assert profile_selection(profiles, "fabric") == ["all", "^upf", "^int"]
    assert profile_selection(profiles, "fabric-int") == ["all", "^upf"]
    with pytest.raises(KeyError):
        profile_selection(profiles, "fabric-upf")


@needs_fabric
def test_upstreams_own_files_give_each_profile_its_flags_and_selection() -> None:
    makefile = (DEFAULT_FABRIC / "upstream-Makefile").read_text()
    profiles = (DEFAULT_FABRIC / "ptf" / "tests" / "common" / "Makefile.profiles").read_text()
    assert {p: profile_flags(makefile, p) for p in PROFILES} == {
        "fabric": [],
        "fabric-int": ["-DWITH_INT"],
        "fabric-upf": ["-DWITH_UPF"],
        "fabric-upf-int": ["-DWITH_UPF", "-DWITH_INT"],
    }
    for p in PROFILES:
        selection = profile_selection(profiles, p)
        assert selection[0] == "all" and "^p4rt" in selection and "^int-dod" in selection
    assert "^upf" in profile_selection(profiles, "fabric-int")
    assert "^int" in profile_selection(profiles, "fabric-upf")


# ---- the exclusion list ---------------------------------------------------------------------


def test_exclusions_are_scoped_by_switch_and_profile() -> None:
    text = (
        "# comment\n"
        "\n"
        "test.FabricA   bmv2            BMv2 cannot do A   # trailing comment\n"
        "test.FabricB   terrapin,bmv2@fabric-int   B needs a Tofino\n"
    )
    excl = parse_exclusions(text)
    assert excl[0] == Exclusion("test.FabricA", frozenset({"bmv2"}), frozenset(), "BMv2 cannot do A")
    assert [e.test for e in excluded_for(excl, "bmv2", "fabric")] == ["test.FabricA"]
    assert [e.test for e in excluded_for(excl, "terrapin", "fabric")] == []
    assert [e.test for e in excluded_for(excl, "terrapin", "fabric-int")] == ["test.FabricB"]
    assert [e.test for e in excluded_for(excl, "bmv2", "fabric-int")] == ["test.FabricA", "test.FabricB"]


@pytest.mark.parametrize(
    "line",
    [
        "test.FabricA bmv2",  # no reason
        "FabricA bmv2 no module",
        "test.FabricA stratum why",
        "test.FabricA bmv2@fabric-bng why",
        "test.FabricA* bmv2 a pattern",
    ],
)
def test_a_malformed_exclusion_is_an_error_naming_its_line(line: str) -> None:
    with pytest.raises(ValueError, match=r"excluded.txt:2"):
        parse_exclusions("# first\n" + line + "\n")


@needs_fabric
def test_every_excluded_test_exists_upstream_and_has_a_reason() -> None:
    exclusions = parse_exclusions(EXCLUDED.read_text())
    tests_dir = DEFAULT_FABRIC / "ptf" / "tests" / "unary"
    for e in exclusions:
        module, cls = e.test.split(".")
        source = (tests_dir / f"{module}.py").read_text()
        assert re.search(rf"^class {cls}\(", source, re.M), f"{e.test} is not a test upstream"
        assert len(e.reason) > 20, f"{e.test}: say why it is excluded"
    pairs = [(e.test, s, p) for e in exclusions for s in e.switches for p in e.profiles or PROFILES]
    assert len(set(pairs)) == len(pairs), "a test is listed twice for the same switch and profile"


# ---- counting -------------------------------------------------------------------------------


def xunit(tmp: Path, name: str, body: str = "") -> None:
    (tmp / f"TEST-{name}.xml").write_text(
        f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="{name}" tests="1">'
        f'<testcase classname="{name}" name="runTest" time="0.1">{body}</testcase>'
        "</testsuite></testsuites>\n"
    )


def test_results_come_from_the_xunit_files_and_a_test_without_one_counts_failed(tmp_path: Path) -> None:
    xunit(tmp_path, "test.Passes")
    xunit(tmp_path, "test.Fails", '<failure type="AssertionError" message="Did not receive&#10;more"/>')
    xunit(tmp_path, "test.Errs", '<error type="RpcError" message="UNAVAILABLE"/>')
    xunit(tmp_path, "test.Skips", '<skipped type="skip" message="Deprecated"/>')
    (tmp_path / "TEST-test.Broken.xml").write_text("<testsuites><testsuite")
    outcomes = read_xunit(tmp_path)
    results = tally(outcomes, ["test.Passes", "test.Fails", "test.Errs", "test.Skips", "test.Hung"])
    assert results.passed == ["test.Passes"]
    assert sorted(results.failed) == ["TEST-test.Broken", "test.Errs", "test.Fails"]
    assert results.skipped == ["test.Skips"]
    assert results.missing == ["test.Hung"]
    assert results.messages["test.Fails"] == "Did not receive"
    lines = report("fabric/terrapin", results, [], 12.4)
    assert lines[0] == "fabric-ptf[fabric/terrapin]: 1 passed, 4 failed, 1 skipped, 0 excluded (12 s)"
    assert "  FAILED  test.Hung: no result (PTF stopped before it, or it hung)" in lines


def test_no_xunit_files_at_all_fail_every_expected_test(tmp_path: Path) -> None:
    results = tally(read_xunit(tmp_path), ["test.A", "test.B"])
    assert results.missing == ["test.A", "test.B"]
    assert report("x", results, [])[0] == "fabric-ptf[x]: 0 passed, 2 failed, 0 skipped, 0 excluded"


# ---- the TRex stand-in ----------------------------------------------------------------------


def test_the_trex_stand_in_imports_and_refuses_every_use() -> None:
    from trex_stf_lib.trex_client import CTRexClient, TRexUnavailableError

    with pytest.raises(TRexUnavailableError, match="TRex is not available here"):
        CTRexClient("10.0.0.1", trex_args=None)
    with pytest.raises(ImportError, match="CTRexResult"):
        from trex_stf_lib.trex_client import CTRexResult  # noqa: F401
