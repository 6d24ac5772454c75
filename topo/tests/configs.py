"""The configuration and example `make run` would write and print for a plan, for tests that
run no switch (a BMv2 configuration then names simple_switch_CLI without looking for it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from terrapin.config import Config, parse_config
from topo.controller_config import controller_config
from topo.examples import Example, derive
from topo.plan import NetworkPlan
from topo.run import example_pair


def run_config(plan: NetworkPlan, switch_kind: str = "terrapin") -> Config:
    with mock.patch("topo.controller_config.bmv2_command", lambda name: name):
        data = controller_config(
            plan, Path("/nonexistent"), rest_port=8080, token="t", switch_kind=switch_kind
        )
    config: Config = parse_config(data)
    return config


def example_for(
    plan: NetworkPlan, switch_kind: str = "terrapin", stored: Sequence[Mapping[str, Any]] = ()
) -> Example:
    src, dst = example_pair(plan)
    return derive(run_config(plan, switch_kind), src.name, dst.name, stored)
