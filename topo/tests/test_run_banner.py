"""What `make run` prints agrees with what the README tells a new user to do, and the switch
metrics endpoint is where the README and docs/switch.md say it is."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from topo import chain, christie, sequoia
from topo.examples import NoExample
from topo.network import RunningNetwork, plan_controllers, store_problem
from topo.p4switch import REPO, metrics_port
from topo.run import describe, example_pair
from topo.tests.configs import example_for


def banner(plan: Any, switch_kind: str = "terrapin") -> str:
    run = RunningNetwork(plan, None, None, "http://127.0.0.1:8080", "terrapin", Path(), None, switch_kind)
    return describe(run, example_for(plan, switch_kind))


def reservation_body(text: str) -> dict[str, Any]:
    """The JSON body of the first `curl ... -d '{...}'` in a text (README or banner)."""
    found = re.search(r"-d '(\{.*?\})'", text, flags=re.S)
    assert found, text
    body: dict[str, Any] = json.loads(found.group(1))
    return body


def test_the_banner_reserves_what_the_readme_reserves() -> None:
    readme = (REPO / "README.md").read_text()
    text = banner(christie.plan())
    assert reservation_body(text) == reservation_body(readme)
    request = next(line.strip() for line in text.splitlines() if " terrapin-host request " in line)
    assert f"mininet> {request}\n" in readme


def test_the_example_crosses_the_router_between_subnets() -> None:
    for plan in (christie.plan(), sequoia.plan(), chain.plan()):
        src, dst = example_pair(plan)
        assert src.ip.split(".")[:3] != dst.address.split(".")[:3], (plan.name, src, dst)
    src, dst = example_pair(christie.plan())
    assert (src.name, dst.name) == ("a1", "b1")


def test_the_metrics_endpoint_is_printed_and_documented_where_it_is() -> None:
    plan = christie.plan()
    device = plan.switches["terrapin"].device_id
    url = f"http://127.0.0.1:{metrics_port(device)}/metrics"
    assert url in banner(plan)
    assert url in (REPO / "README.md").read_text()
    switch_md = (REPO / "docs" / "switch.md").read_text()
    metrics = switch_md[switch_md.index("## Metrics") :]
    assert url in metrics and f"127.0.0.1:({metrics_port(0)} + its device id)" in metrics
    assert "(terrapin-switch only)" in banner(plan, "bmv2")


def test_the_dashboard_and_the_controllers_metrics_are_printed() -> None:
    text = banner(christie.plan())
    assert "dashboard: http://127.0.0.1:8080/ " in text
    assert "http://127.0.0.1:8080/metrics" in text and "http://127.0.0.1:8080/monitor" in text


def test_the_replicas_banner_names_the_primary_and_every_port() -> None:
    plan = christie.plan()
    controllers = plan_controllers(plan, 8080, 2, "postgres", None)
    run = RunningNetwork(
        plan,
        None,
        None,
        "http://127.0.0.1:8080",
        "terrapin",
        Path(),
        controllers=controllers,
        store="postgresql://x",
    )
    text = describe(run, example_for(plan), {"c0": "backup", "c1": "primary"})
    assert "c0 http://127.0.0.1:8080 (backup), c1 http://127.0.0.1:8081 (primary)" in text
    assert "c1 is primary" in text and "any replica's" in text
    assert [c.flags() for c in controllers] == [
        ["--replica", "c0", "--replica-index", "0", "--port", "8080"],
        ["--replica", "c1", "--replica-index", "1", "--port", "8081"],
    ]
    assert "replicas:" not in banner(plan)


def test_replicas_need_the_postgresql_store() -> None:
    assert store_problem("sqlite", 1) is None and store_problem("postgres", 3) is None
    assert "needs STORE=postgres" in (store_problem("sqlite", 2) or "")


def test_a_network_too_slow_for_any_example_says_so_instead() -> None:
    plan = christie.plan(rate_mbps=0.001)
    with pytest.raises(NoExample) as none:
        example_for(plan)
    run = RunningNetwork(plan, None, None, "http://127.0.0.1:8080", "terrapin", Path())
    text = describe(run, none.value)
    assert "No example reservation is printed: no example fits between a1 and b1: " in text
    assert "curl -s -X POST" not in text and "terrapin-host request" not in text
