"""One controller replica among several on one PostgreSQL store (docs/deployment.md).

The lease row in the store says who should be primary. Every `renew_seconds` the primary
renews it; a backup takes it once it has gone unrenewed for `lease_seconds` (its term grows by
one). The new primary then rolls back what the old one left unfinished, bids its term on every
switch (terrapin.arbitration: its P4Runtime election id is above every earlier term's, so the
switches refuse the old primary from then on), and reconciles each switch as it becomes primary
there. A backup follows the journal, so its ledger and reservations are current for reads and
for the moment it takes over.

Three fences keep a replica that lost its lease (and does not know yet) from doing harm: the
store refuses its transactions (the lease no longer names its term), the switches refuse its
writes (a higher election id is primary), and it steps down itself at its next renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from terrapin.store import Fence, Lease, LeaseTable, NotPrimary, ReservationStore, StoreUnavailable

LOG = logging.getLogger("terrapin.replication")

PRIMARY = "primary"
BACKUP = "backup"


@dataclass(frozen=True)
class ReplicaIdentity:
    name: str
    index: int  # distinct per replica: its P4Runtime backup election id
    url: str  # where the others forward writes while this one is primary
    lease_seconds: float
    renew_seconds: float


class Replication:
    """The lease loop of one replica. `promote(term)` runs when this replica takes the lease,
    `demote()` when it loses it; both are the controller's (main.py), on its event loop.

    The lease is claimed and renewed from a thread of its own, on a database connection of its
    own: a primary whose event loop is busy (thousands of set-ups queued) is not a dead one, and
    must not lose its lease for being slow to get round to renewing it. The event loop learns
    of a change of role from that thread and acts on it."""

    def __init__(
        self,
        identity: ReplicaIdentity,
        store: ReservationStore,
        promote: Callable[[int], Awaitable[None]],
        demote: Callable[[], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.identity = identity
        self._store = store
        self._promote = promote
        self._demote = demote
        self._clock = clock
        # Who holds the lease is this process, not just this name: a replica restarted under the
        # same name must not adopt the term its predecessor held (were that one still running,
        # both would act with one election id). It waits for the lease to expire instead.
        self.holder = f"{identity.name}#{os.getpid()}-{secrets.token_hex(3)}"
        self.term: int | None = None  # the lease term this replica acts as primary in (event loop)
        self._held: int | None = None  # the lease term the claims hold (claiming thread)
        self.lease: Lease | None = None  # as last read
        self._lease_read_at = 0.0  # when (clock) it was read
        # When (clock) the claim that last renewed this replica's own lease began: the store
        # dated the renewal no earlier, so the lease runs out no earlier than lease_seconds after.
        self._renewed_from: float | None = None
        self.promoted_at: float | None = None  # when this replica last became primary (clock)
        self.last_error: str | None = None
        self._changing = asyncio.Lock()
        self._leases: LeaseTable | None = None
        self._stop = threading.Event()

    @property
    def role(self) -> str:
        return PRIMARY if self.term is not None else BACKUP

    @property
    def is_primary(self) -> bool:
        return self.term is not None

    def fence(self) -> Fence:
        """What the store checks before any change: this replica's term (0 while a backup,
        which no lease ever has, so a backup's transaction is refused)."""
        return Fence(self.holder, self.term or 0)

    def _valid_lease(self) -> Lease | None:
        """The lease as last read, while it is still valid by this replica's own clock (a
        replica cut off from the store does not go on trusting what it read long ago)."""
        lease = self.lease
        if lease is None:
            return None
        left = lease.expires_at - lease.now - (self._clock() - self._lease_read_at)
        return lease if left > 0 else None

    @property
    def primary_url(self) -> str | None:
        """Where writes go: the primary's URL, or None when no valid lease names one."""
        lease = self._valid_lease()
        return None if lease is None else lease.url

    @property
    def primary_name(self) -> str | None:
        lease = self._valid_lease()
        return None if lease is None else replica_name(lease.holder)

    def lease_problem(self) -> str | None:
        """What keeps the replicas from serving, by the lease as the store holds it now (not as
        last read): the store cannot be reached, no replica holds a valid lease, or this replica
        acts as primary in a term the lease no longer names. None when none of these. A round
        trip on the lease's own connection: call it off the event loop."""
        leases = self._leases or self._store.lease_table()
        try:
            lease = leases.read()
        except StoreUnavailable as exc:
            return f"the store cannot be reached: {exc}"
        if lease is None or not lease.valid:
            return "no replica holds the lease"
        term = self.term
        if term is not None and (lease.holder, lease.term) != (self.holder, term):
            return (
                f"this replica acts in term {term}, but the lease names "
                f"{replica_name(lease.holder)} in term {lease.term}"
            )
        return None

    # ---- running ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Claims in a thread; here, acting on what it found and following the journal."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        self._leases = self._store.lease_table(own_connection=True)
        self._stop.clear()
        claims = threading.Thread(target=self._claim_forever, args=(loop, changed), name="lease", daemon=True)
        claims.start()
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), self.identity.renew_seconds)
                changed.clear()
                try:
                    await self._act()
                except Exception:  # the lease loop must outlive any one failure
                    LOG.exception("replica %s: acting on the lease failed", self.identity.name)
        finally:
            self._stop.set()
            await asyncio.to_thread(claims.join, 5)
            self._leases.close()

    def _claim_forever(self, loop: asyncio.AbstractEventLoop, changed: asyncio.Event) -> None:
        while not self._stop.is_set():
            before = self._held
            try:
                self._claim()
            except Exception:  # the thread must outlive any one failure
                LOG.exception("replica %s: lease claim failed", self.identity.name)
            if self._held != before:
                loop.call_soon_threadsafe(changed.set)
            self._stop.wait(self.identity.renew_seconds)

    def _claim(self) -> None:
        """One renewal (while held) or one look at the lease (else)."""
        me = self.identity
        leases = self._leases or self._store.lease_table()
        began = self._clock()
        try:
            lease = leases.claim(self.holder, me.url, me.lease_seconds, self._held)
        except StoreUnavailable as exc:
            # Nobody else can take the lease while the store is away from everyone, and the
            # store refuses every change meanwhile: the primary stays the switches' primary
            # while its lease would still be valid. Past that, another replica that still
            # reaches the store may hold a new term: it steps down rather than act on a lease
            # it cannot prove.
            self.last_error = str(exc)
            LOG.warning("replica %s: lease not claimed: %s", me.name, exc)
            if self._held is not None and self._clock() - self._lease_read_at > me.lease_seconds:
                LOG.warning("replica %s: lease of term %d unrenewed too long", me.name, self._held)
                self._held = None
            return
        self.lease, self._lease_read_at, self.last_error = lease, self._clock(), None
        mine = lease is not None and lease.holder == self.holder and lease.valid
        if mine:
            self._renewed_from = began
        if self._held is not None and not (mine and lease is not None and lease.term == self._held):
            LOG.warning(
                "replica %s: lost the lease of term %d (now %s)",
                me.name,
                self._held,
                "nobody's" if lease is None else f"{replica_name(lease.holder)}'s term {lease.term}",
            )
            self._held = None
        elif self._held is None and mine and lease is not None:
            self._held = lease.term

    async def step(self) -> None:
        """One claim and what follows from it, in the caller's task (tests step by hand)."""
        self._claim()
        await self._act()

    def holds_lease(self) -> bool:
        """Whether this replica holds the lease by its own clock: primary, and its last renewal
        began less than lease_seconds ago. A claim that hangs (the store cut off) leaves `term`
        set until the claiming thread gives up; the switches' writes are fenced by this."""
        renewed = self._renewed_from
        return (
            self.term is not None
            and renewed is not None
            and self._clock() - renewed < self.identity.lease_seconds
        )

    async def _act(self) -> None:
        if self.term is not None and not self.holds_lease():
            # The claiming thread may be stuck in a call to a store that does not answer: the
            # lease ran out by this replica's own clock, and another may hold it by now.
            LOG.warning(
                "replica %s: lease of term %d ran out by this replica's clock", self.identity.name, self.term
            )
            self._held = None
        held = self._held
        if self.term is not None and held != self.term:
            await self._step_down()
        if held is not None and self.term is None:
            await self._take(held)
        if self.term is None:
            # A backup: follow the primary's changes, so reads and a takeover start current.
            try:
                self._store.sync()
            except StoreUnavailable as exc:
                self.last_error = str(exc)

    async def _take(self, term: int) -> None:
        async with self._changing:
            LOG.info("replica %s: took the lease, term %d", self.identity.name, term)
            self.term = term
            self.promoted_at = self._clock()
            try:
                await self._promote(term)
            except (StoreUnavailable, NotPrimary) as exc:
                LOG.warning("replica %s: could not take over in term %d: %s", self.identity.name, term, exc)
                self.term = None
                await self._demote()

    async def _step_down(self) -> None:
        async with self._changing:
            LOG.warning("replica %s: stepping down from term %s", self.identity.name, self.term)
            self.term = None
            await self._demote()

    async def resign(self) -> None:
        """A clean stop: give the lease up so a backup need not wait for it to expire."""
        self._stop.set()
        term = self._held if self._held is not None else self.term
        self.term = self._held = None
        if term is None:
            return
        try:
            self._store.release_lease(self.holder, term)
        except StoreUnavailable as exc:
            LOG.warning("replica %s: lease of term %d not released: %s", self.identity.name, term, exc)


def replica_name(holder: str) -> str:
    """The replica's name in a lease holder (name#incarnation)."""
    return holder.partition("#")[0]
