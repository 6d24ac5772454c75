"""Set-ups the store lost track of mid-way: a commit whose answer never came (CommitUnknown)
may have happened, and the client was told nothing was reserved, so the controller must remove
what it wrote once the store answers again (the database drill of test_failover found one left
"installing" after a PostgreSQL restart)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from fakes import FakeFabric, chain_config

from terrapin import reservations
from terrapin.admission import AdmissionLedger, ChannelEnvelope, ChannelKey
from terrapin.channel_requests import ChannelRequest
from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.reservations import ReservationService
from terrapin.store import ACTIVE, CommitUnknown, Reservation, ReservationStore, StoreUnavailable
from terrapin.store.drivers import SqliteDriver

CONFIG = chain_config(2)


class LosesCommitAnswers(SqliteDriver):
    """SQLite whose next `lose` commits happen but answer as if the connection broke."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.lose = 0

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with super().locked():
            yield
        if self.lose:
            self.lose -= 1
            raise CommitUnknown("the connection broke during COMMIT (injected)")


def service() -> tuple[ReservationService, LosesCommitAnswers, FakeFabric]:
    driver = LosesCommitAnswers()
    store = ReservationStore(driver, AdmissionLedger(CONFIG.port_models()))
    fabric = FakeFabric(["s1", "s2"])
    assert store.ledger is not None
    return ReservationService(store.ledger, Topology(CONFIG), store, fabric), driver, fabric


def request(context: int) -> ChannelRequest:
    return ChannelRequest(
        ChannelKey("10.0.1.2", context),
        ChannelSelector("10.0.1.2", "10.0.2.2", 17, (5000 + context) << 16 | 6000),
        ChannelEnvelope(6, 100_000, 6000, 1500),
    )


def test_a_recording_whose_commit_answer_was_lost_is_rolled_back() -> None:
    svc, driver, fabric = service()

    async def run() -> None:
        driver.lose = 1
        with pytest.raises(CommitUnknown):
            await svc.create(request(1))
        # It did commit: the next transaction's copy has it, still "installing".
        assert await svc.retry_unfinished() == 1
        assert svc.store.get(ChannelKey("10.0.1.2", 1)) is None
        assert [r for r in svc.store.all()] == []
        # Nothing of it was written to a switch, and its capacity is free again.
        assert fabric.writes == 0
        made = await svc.create(request(2))
        assert isinstance(made, Reservation) and made.state == ACTIVE

    asyncio.run(run())


def test_an_activation_whose_commit_answer_was_lost_stays_if_it_happened() -> None:
    svc, driver, fabric = service()
    install = fabric.install_channel

    async def install_then_lose_the_next_answer(entry: ChannelEntry) -> None:
        await install(entry)
        driver.lose = 1  # the confirmation that follows commits, and its answer is lost

    fabric.install_channel = install_then_lose_the_next_answer  # type: ignore[method-assign]

    async def run() -> None:
        made = await svc.create(request(1))
        # The service asked again after the lost answer and found it active: a promise kept.
        assert isinstance(made, Reservation) and made.state == ACTIVE
        assert driver.lose == 0
        assert await svc.retry_unfinished() == 0
        stored = svc.store.get(ChannelKey("10.0.1.2", 1))
        assert stored is not None and stored.state == ACTIVE

    asyncio.run(run())


class GoesAway(SqliteDriver):
    """SQLite that answers StoreUnavailable while `away` is set."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.away = False

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        if self.away:
            raise StoreUnavailable("the database restarts (injected)")
        with super().locked():
            yield


def test_hops_written_before_a_takeovers_rollback_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The database drill of test_failover left a channel on a switch: its hops were written,
    the store went away before the activation, and the replica that took the lease again rolled
    the record back at its promotion (reconciling its switches, perhaps before the hops landed).
    The set-up's own controller removes the hops it wrote when the store answers, whoever
    released the record."""
    monkeypatch.setattr(reservations, "ACTIVATION_PATIENCE_S", 0.3)
    driver = GoesAway()
    store = ReservationStore(driver, AdmissionLedger(CONFIG.port_models()))
    fabric = FakeFabric(["s1", "s2"])
    assert store.ledger is not None
    svc = ReservationService(store.ledger, Topology(CONFIG), store, fabric)
    install = fabric.install_channel

    async def install_then_the_store_goes(entry: ChannelEntry) -> None:
        await install(entry)
        driver.away = True

    fabric.install_channel = install_then_the_store_goes  # type: ignore[method-assign]
    wanted = request(1)

    async def run() -> None:
        refused = await svc.create(wanted)
        assert not isinstance(refused, Reservation)  # not confirmed: the client is told so
        assert {name for name, held in fabric.entries.items() if wanted.selector in held} == {"s1", "s2"}
        driver.away = False
        assert svc.rollback_unfinished() == 1  # the takeover: the record is released
        assert svc.store.get(wanted.key) is None
        await svc.retry_unfinished()
        assert all(wanted.selector not in held for held in fabric.entries.values())

    asyncio.run(run())


def test_a_rolled_back_flow_reserved_again_is_not_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The removal is by the flow's match: if a new reservation holds the flow by then (the
    takeover's reconciliation removed the old hops, and the flow was reserved again), its
    entries stay."""
    monkeypatch.setattr(reservations, "ACTIVATION_PATIENCE_S", 0.3)
    driver = GoesAway()
    store = ReservationStore(driver, AdmissionLedger(CONFIG.port_models()))
    fabric = FakeFabric(["s1", "s2"])
    assert store.ledger is not None
    svc = ReservationService(store.ledger, Topology(CONFIG), store, fabric)
    install = fabric.install_channel
    first = True

    async def install_then_the_store_goes(entry: ChannelEntry) -> None:
        await install(entry)
        if first:
            driver.away = True

    fabric.install_channel = install_then_the_store_goes  # type: ignore[method-assign]

    async def run() -> None:
        nonlocal first
        lost = request(1)
        assert not isinstance(await svc.create(lost), Reservation)
        driver.away, first = False, False
        svc.rollback_unfinished()
        for held in fabric.entries.values():  # the takeover's reconciliation removed its hops
            held.pop(lost.selector, None)
        again = ChannelRequest(ChannelKey("10.0.1.2", 2), lost.selector, lost.envelope)
        made = await svc.create(again)
        assert isinstance(made, Reservation) and made.state == ACTIVE
        await svc.retry_unfinished()
        assert {name for name, held in fabric.entries.items() if lost.selector in held} == {"s1", "s2"}

    asyncio.run(run())
