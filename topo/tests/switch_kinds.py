"""Marks the tests that need p4lang's BMv2 (`make bmv2`) with `bmv2`: those run on the switch
kind "bmv2" (a fixture parametrized with SWITCH_KINDS) or ask for a BMv2 lab. scripts/test-all.sh
runs them in its *-bmv2 suites and the rest without BMv2 (`-m bmv2`, `-m "not bmv2"`). A name
filter (`-k bmv2`) would also catch tests that only mention BMv2, such as a config check."""

from __future__ import annotations

import pytest

BMV2_FIXTURES = {"bmv2_lab"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "bmv2: runs on p4lang's simple_switch_grpc (make bmv2 builds it)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_bmv2 = callspec is not None and "bmv2" in callspec.params.values()
        if on_bmv2 or BMV2_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.bmv2)
