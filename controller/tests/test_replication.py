"""The lease loop of terrapin/replication.py against a real store: who takes the lease, when a
primary steps down, and what a backup believes when it cannot read the store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from terrapin.replication import PRIMARY, ReplicaIdentity, Replication, replica_name
from terrapin.store import ReservationStore, StoreUnavailable

LEASE_S = 0.4


class Roles:
    def __init__(self) -> None:
        self.events: list[str] = []

    async def promote(self, term: int) -> None:
        self.events.append(f"promote {term}")

    async def demote(self) -> None:
        self.events.append("demote")


def replica(store: ReservationStore, name: str, roles: Roles) -> Replication:
    identity = ReplicaIdentity(name, 0, f"http://{name}", LEASE_S, LEASE_S / 4)
    return Replication(identity, store, roles.promote, roles.demote)


def test_a_replica_restarted_under_its_name_waits_for_the_lease(tmp_path: Path) -> None:
    store = ReservationStore(tmp_path / "s.sqlite")
    first, again, other = Roles(), Roles(), Roles()

    async def run() -> None:
        a = replica(store, "c0", first)
        await a.step()
        assert a.role == PRIMARY and first.events == ["promote 1"] and a.primary_name == "c0"
        # c0 is restarted while its old process's lease is still valid (the old one may live)
        restarted = replica(store, "c0", again)
        b = replica(store, "c1", other)
        await restarted.step()
        await b.step()
        assert again.events == [] and other.events == []  # nobody adopts a live lease
        assert restarted.primary_url == "http://c0"
        time.sleep(LEASE_S + 0.05)  # the old c0 stopped renewing
        await restarted.step()
        await b.step()
        assert again.events == ["promote 2"] and other.events == []
        await a.step()  # the old process, were it alive, learns it lost the lease
        assert first.events == ["promote 1", "demote"] and not a.is_primary
        assert a.fence().term == 0

    asyncio.run(run())


def test_a_backup_cut_off_from_the_store_stops_trusting_the_lease(tmp_path: Path) -> None:
    store = ReservationStore(tmp_path / "s.sqlite")
    now = [100.0]
    primary = Replication(
        ReplicaIdentity("c0", 0, "http://c0", LEASE_S, LEASE_S / 4), store, Roles().promote, Roles().demote
    )
    backup = Replication(
        ReplicaIdentity("c1", 1, "http://c1", LEASE_S, LEASE_S / 4),
        store,
        Roles().promote,
        Roles().demote,
        clock=lambda: now[0],
    )

    async def run() -> None:
        await primary.step()
        await backup.step()
        assert backup.primary_url == "http://c0"

        class Away:
            def claim(self, *_args: object) -> None:
                raise StoreUnavailable("the database is away")

        backup._leases = Away()  # type: ignore[assignment]
        await backup.step()
        assert backup.last_error == "the database is away"
        now[0] += LEASE_S / 2
        assert backup.primary_url == "http://c0"  # still within what it read
        now[0] += LEASE_S
        assert backup.primary_url is None and backup.primary_name is None

    asyncio.run(run())


def test_holder_names() -> None:
    assert replica_name("c0#123-abcdef") == "c0"
    assert replica_name("c0") == "c0"


@pytest.mark.parametrize("lease_s, renew_s", [(1.0, 0.6), (1.0, 1.0)])
def test_renewing_too_rarely_is_refused(lease_s: float, renew_s: float) -> None:
    from fakes import chain_config

    from terrapin.config import ConfigError, parse_config

    data = chain_config(2).model_dump(by_alias=True)
    data.update(
        store="postgresql://x@127.0.0.1/x", replication={"lease_seconds": lease_s, "renew_seconds": renew_s}
    )
    with pytest.raises(ConfigError, match="at most half"):
        parse_config(data)
    data.update(store="build/x.sqlite", replication={})
    with pytest.raises(ConfigError, match="needs a PostgreSQL store"):
        parse_config(data)


def test_a_primary_that_cannot_renew_for_a_lease_period_steps_down(tmp_path: Path) -> None:
    store = ReservationStore(tmp_path / "s.sqlite")
    now = [100.0]
    roles = Roles()
    primary = Replication(
        ReplicaIdentity("c0", 0, "http://c0", LEASE_S, LEASE_S / 4),
        store,
        roles.promote,
        roles.demote,
        clock=lambda: now[0],
    )

    class Away:
        def claim(self, *_args: object) -> None:
            raise StoreUnavailable("the database is away")

    async def run() -> None:
        await primary.step()
        assert primary.is_primary and roles.events == ["promote 1"]
        primary._leases = Away()  # type: ignore[assignment]
        now[0] += LEASE_S / 2
        await primary.step()  # a short outage (a database restart): still primary
        assert primary.is_primary and roles.events == ["promote 1"]
        now[0] += LEASE_S
        await primary.step()  # longer than its lease: another replica may hold a new term
        assert not primary.is_primary and roles.events == ["promote 1", "demote"]

    asyncio.run(run())


def test_a_primary_whose_claim_hangs_stops_writing_and_steps_down_by_its_own_clock(tmp_path: Path) -> None:
    """Found by `make chaos SWITCH=bmv2` (seed 7, --duration 1800, at 733 s): c0, cut off from
    the store, hung in its claim (a call to a database that does not answer), so it never
    learnt that its lease had run out and acted in term 26 for 4 s more. When c1, primary in
    term 27, stepped down (the database killed), simple_switch_grpc made the highest live id,
    c0's, primary again, took c0's writes, and every measured channel lost 0.4 s of packets.
    The lease is now judged by the replica's own clock too: its writes are fenced the moment
    it runs out (holds_lease), and the lease loop steps it down, whatever the claim is doing."""
    store = ReservationStore(tmp_path / "s.sqlite")
    now = [100.0]
    roles = Roles()
    primary = Replication(
        ReplicaIdentity("c0", 0, "http://c0", LEASE_S, LEASE_S / 4),
        store,
        roles.promote,
        roles.demote,
        clock=lambda: now[0],
    )

    async def run() -> None:
        await primary.step()
        assert primary.is_primary and primary.holds_lease()
        # the claiming thread is stuck in the store: no claim returns, nothing is set
        now[0] += LEASE_S / 2
        await primary._act()
        assert primary.is_primary and primary.holds_lease()
        now[0] += LEASE_S / 2
        assert not primary.holds_lease()  # the switches' writes are fenced from now
        await primary._act()
        assert not primary.is_primary and roles.events == ["promote 1", "demote"]

    asyncio.run(run())


def test_what_keeps_the_replicas_from_serving_is_read_from_the_store_as_it_is_now(tmp_path: Path) -> None:
    """/health's view of the lease (issue 28): read now, not as last read by the lease loop."""
    store = ReservationStore(tmp_path / "s.sqlite")
    a, b = replica(store, "c0", Roles()), replica(store, "c1", Roles())

    async def run() -> None:
        assert a.lease_problem() == b.lease_problem() == "no replica holds the lease"
        await a.step()
        await b.step()
        assert a.is_primary and not b.is_primary
        assert a.lease_problem() is None and b.lease_problem() is None
        time.sleep(LEASE_S + 0.05)  # c0 stopped renewing: its lease has run out in the store
        assert b.lease_problem() == "no replica holds the lease"
        await b.step()  # c1 takes it; c0 has not looked yet and still acts in term 1
        assert b.is_primary and b.lease_problem() is None and a.is_primary
        assert a.lease_problem() == "this replica acts in term 1, but the lease names c1 in term 2"

        class Away:
            def read(self) -> None:
                raise StoreUnavailable("PostgreSQL at db:5432/terrapin: connection refused")

        b._leases = Away()  # type: ignore[assignment]
        assert b.lease_problem() == (
            "the store cannot be reached: PostgreSQL at db:5432/terrapin: connection refused"
        )

    asyncio.run(run())
