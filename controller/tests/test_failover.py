"""Failover drills (issue 11; docs/deployment.md "Failure cases"): two controller replicas on a
real PostgreSQL and three real terrapin-switch processes, a burst of concurrent reservations and
deletions from clients talking to both replicas, and in the middle of it one failure:

- the primary replica is killed (SIGKILL), and later restarted;
- a switch is killed and restarted empty;
- the database is restarted.

After each: no reservation answered 201 is lost, none answered with a failure is installed, no
port is over-admitted, and every switch holds exactly the store's channels (ReplicaLab.check).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hostlab import HOSTS, HostLab, missing_host_prerequisites, tcp_peers
from replicalab import ReplicaLab, missing_prerequisites

pytestmark = pytest.mark.integration

BURST_S = 8.0
CLIENTS = 4


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ReplicaLab]:
    yield from _lab(tmp_path, "terrapin")


@pytest.fixture
def bmv2_lab(tmp_path: Path) -> Iterator[ReplicaLab]:
    yield from _lab(tmp_path, "bmv2")


@pytest.fixture
def hosts_lab(tmp_path: Path) -> Iterator[ReplicaLab]:
    yield from _lab(tmp_path, "terrapin", across_hosts=True)


def _lab(tmp_path: Path, kind: str, across_hosts: bool = False) -> Iterator[ReplicaLab]:
    missing = missing_prerequisites(kind) or (missing_host_prerequisites() if across_hosts else None)
    if missing:
        pytest.skip(missing)
    lab = HostLab(tmp_path, kind) if across_hosts else ReplicaLab(tmp_path, kind)
    try:
        lab.up()
        yield lab
    finally:
        lab.close()


def settle(lab: ReplicaLab, r: int) -> None:
    """Wait until replica r is primary with every switch reconciled, and a backup is back."""
    lab.wait_role(r, "primary", 30)


def test_killing_the_primary_mid_burst_loses_nothing(lab: ReplicaLab) -> None:
    kill_the_primary_mid_burst(lab)


def test_killing_the_primary_mid_burst_loses_nothing_on_bmv2(bmv2_lab: ReplicaLab) -> None:
    """The same on p4lang's simple_switch_grpc, whose PI makes the highest *live* election id
    primary: when the primary dies a backup is primary at once on every switch, before it holds
    the lease; it must not act on that (terrapin/arbitration.py)."""
    kill_the_primary_mid_burst(bmv2_lab)


def test_killing_the_primary_mid_burst_across_hosts_loses_nothing(hosts_lab: ReplicaLab) -> None:
    """The operator's rehearsal (docs/deployment.md): switches, replicas and PostgreSQL on three
    "machines" (network namespaces) joined only by their veths, TLS on every channel."""
    kill_the_primary_mid_burst(hosts_lab)
    controllers, database = HOSTS["controllers"][1], HOSTS["database"][1]
    # The replicas hold their P4Runtime streams to the switches' address, from theirs (the
    # checks' reads, from the operator's, are over by now).
    grpc_ports = set(hosts_lab.grpc_ports)
    into_switches = {peer for peer, port in tcp_peers("switches") if port in grpc_ports}
    assert into_switches == {controllers}, tcp_peers("switches")
    # The store's sessions come from the controllers' host over TLS, none in plaintext.
    assert hosts_lab.postgres is not None
    with psycopg.connect(hosts_lab.postgres.admin_dsn, connect_timeout=10) as conn:
        sessions = conn.execute(
            "SELECT host(a.client_addr), s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)"
            " WHERE a.datname = 'terrapin'"
        ).fetchall()
    assert sessions and all(ssl for _, ssl in sessions), sessions
    assert {addr for addr, _ in sessions} == {controllers}, sessions
    assert hosts_lab.postgres.dsn.startswith(f"postgresql://terrapin@{database}:")


def kill_the_primary_mid_burst(lab: ReplicaLab) -> None:
    burst = lab.burst(CLIENTS, BURST_S, seed=1)
    next(burst)
    time.sleep(2.0)
    assert lab.primary() == 0
    lab.kill("c0")
    killed = time.monotonic()
    took = lab.wait_role(1, "primary", 30)
    failover = time.monotonic() - killed
    lab.start_replica(0)  # as a supervisor would: it comes back as a backup
    outcomes = next(burst)
    lab.wait_role(0, "backup", 30)
    settle(lab, 1)
    stored = lab.check(outcomes)
    print(f"failover {failover:.2f} s (health seen after {took:.2f} s); answers {outcomes.answers}")
    assert outcomes.answers.get(201, 0) > 10 and outcomes.deleted, outcomes.answers
    assert len(stored) > 0
    assert failover < 10


def test_a_switch_killed_and_restarted_mid_burst_is_made_whole(lab: ReplicaLab) -> None:
    burst = lab.burst(CLIENTS, BURST_S, seed=2)
    next(burst)
    time.sleep(2.0)
    lab.kill("s2")
    time.sleep(1.0)
    lab.start_switch(2)  # empty: no pipeline, no entries
    outcomes = next(burst)
    settle(lab, 0)
    stored = lab.check(outcomes)
    print(f"switch drill: {len(stored)} reservations; answers {outcomes.answers}")
    # while s2 was away, reservations through it were refused at once (503), never half made
    assert outcomes.answers.get(503, 0) > 0, outcomes.answers


def test_restarting_the_database_mid_burst_loses_nothing(lab: ReplicaLab) -> None:
    burst = lab.burst(CLIENTS, BURST_S, seed=3)
    next(burst)
    time.sleep(2.0)
    assert lab.postgres is not None
    lab.postgres.restart()
    outcomes = next(burst)
    settle(lab, lab.primary())
    stored = lab.check(outcomes)
    print(f"database drill: {len(stored)} reservations; answers {outcomes.answers}")
    assert outcomes.answers.get(201, 0) > 10, outcomes.answers
