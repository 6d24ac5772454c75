"""Property: two replicas' reservation services on one PostgreSQL store, with their admissions,
deletions and switch writes interleaved at random, never over-admit a port, never lose a
reservation they answered with, and leave the switches holding exactly what the store holds.

The switches are one shared FakeFabric whose writes yield to the event loop a random number of
times, so the two replicas' set-ups and tear-downs interleave wherever an await allows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from fakes import FakeFabric, chain_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from terrapin.admission import AdmissionLedger, Allocation, ChannelEnvelope, ChannelKey
from terrapin.channel_requests import ChannelRequest, Conflict
from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.reservations import ReservationService
from terrapin.store import Reservation, ReservationStore
from terrapin_tools.pgserver import PostgresServer

pytest_plugins = ["pg"]

CONFIG = chain_config(3, rate_bps=10_000_000)  # 1,125,000 B/s reservable per port
H1, H2, H3 = "10.0.1.2", "10.0.2.2", "10.0.3.2"


@dataclass
class YieldingSwitches(FakeFabric):
    """The shared switches; each write first yields `pauses()` times."""

    pauses: list[int] | None = None

    async def _pause(self) -> None:
        for _ in range(self.pauses.pop() if self.pauses else 0):
            await asyncio.sleep(0)

    async def install_channel(self, entry: ChannelEntry) -> None:
        await self._pause()
        await super().install_channel(entry)

    async def remove_channel(self, entry: ChannelEntry) -> None:
        await self._pause()
        await super().remove_channel(entry)


@pytest.fixture(scope="module")
def shared_db(postgres: PostgresServer) -> Iterator[str]:
    dsn = postgres.create_database("replica_properties")
    ReservationStore(dsn).close()  # the schema
    yield dsn
    postgres.drop_database("replica_properties")


def empty(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("reservations", "holds", "journal", "meta", "lease"):
            conn.execute(f"DELETE FROM {table}")  # a fresh store per example, without a new database


# An admission: which replica, a flow, a rate and a burst (some too big for what is left).
admissions = st.tuples(
    st.integers(0, 1),
    st.sampled_from([(H1, H2), (H3, H2), (H1, H3), (H2, H1)]),
    st.integers(0, 30),
    st.sampled_from([50_000, 150_000, 300_000, 600_000]),
    st.sampled_from([3_000, 12_000, 40_000]),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), admissions),
        st.tuples(st.just("delete"), st.tuples(st.integers(0, 1), st.integers(0, 40))),
    ),
    min_size=1,
    max_size=24,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(operations, min_size=1, max_size=3),
    pauses=st.lists(st.integers(0, 3), max_size=200),
)
def test_two_replicas_interleaved(
    shared_db: str, batches: list[list[tuple[str, tuple]]], pauses: list[int]
) -> None:
    empty(shared_db)
    switches = YieldingSwitches(["s1", "s2", "s3"], pauses=list(pauses))
    stores = [
        ReservationStore(shared_db, AdmissionLedger(CONFIG.port_models(), clock=time.time)) for _ in (0, 1)
    ]
    services = [
        ReservationService(s.ledger, Topology(CONFIG), s, switches)
        for s in stores  # type: ignore[arg-type]
    ]
    answered: dict[ChannelKey, Reservation] = {}  # what a client was told it has (201)
    deleted: set[ChannelKey] = set()
    refused: set[ChannelKey] = set()
    made: list[ChannelKey] = []
    contexts: list[int] = []

    async def admit(op: tuple[int, tuple[str, str], int, int, int]) -> None:
        replica, (src, dst), port, rate, burst = op
        service = services[replica]
        contexts.append(len(contexts) + 1)  # a key of its own: refused and stored never share one
        key = ChannelKey(src, contexts[-1])
        request = ChannelRequest(
            key,
            ChannelSelector(src, dst, 17, (5000 + port) << 16 | 6000),
            ChannelEnvelope(6, rate, burst, 1500),
        )
        try:
            result = await service.create(request)
        except Conflict:
            return
        if isinstance(result, Reservation):
            answered[key] = result
            made.append(key)
        else:
            refused.add(key)

    async def delete(op: tuple[int, int]) -> None:
        replica, index = op
        if not made:
            return
        key = made[index % len(made)]
        if await services[replica].close(key) is not None:
            deleted.add(key)

    async def run() -> None:
        for batch in batches:
            await asyncio.gather(*(admit(arg) if kind == "admit" else delete(arg) for kind, arg in batch))

    try:
        asyncio.run(run())
        fresh = ReservationStore(shared_db, AdmissionLedger(CONFIG.port_models(), clock=time.time))
        stored = {r.key: r for r in fresh.all()}
        # nothing answered 201 is lost (unless deleted), nothing refused is installed
        assert set(answered) - deleted == set(stored)
        assert not refused & set(stored)
        # no port over-admitted: every stored channel is admitted again, in the order it was
        # first admitted, on an empty ledger (each was admitted beside a superset of the ones
        # before it that still stand, and the tests are monotone in the load)
        check = AdmissionLedger(CONFIG.port_models())
        topology = Topology(CONFIG)
        for record in sorted(stored.values(), key=lambda r: r.reservation_id):
            path = topology.path(record.selector.src, record.selector.dst)
            again = check.admit(record.key, path, record.allocation.requested)
            assert isinstance(again, Allocation), f"{record.key} over-admits: {again}"
        # every replica's copy agrees with the tables, and the switches hold exactly the store's
        for store in stores:
            store.sync()
            assert {r.key for r in store.all()} == set(stored)
            for port in CONFIG.port_models():
                assert store.ledger is not None and fresh.ledger is not None
                assert store.ledger.load(port.port) == fresh.ledger.load(port.port)
        for name in ("s1", "s2", "s3"):
            want = {e.selector: e for e in services[0].desired_entries(name)}
            assert switches.entries[name] == want
        fresh.close()
    finally:
        for store in stores:
            store.close()
