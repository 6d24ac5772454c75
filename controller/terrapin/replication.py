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
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from terrapin.store import Fence, Lease, NotPrimary, ReservationStore, StoreUnavailable

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
    `demote()` when it loses it; both are the controller's (main.py)."""

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
        self.term: int | None = None  # the lease term this replica holds, while primary
        self.lease: Lease | None = None  # as last read
        self._lease_read_at = 0.0  # when (clock) it was read
        self.promoted_at: float | None = None  # when this replica last became primary (clock)
        self.last_error: str | None = None
        self._renewed_at = 0.0
        self._changing = asyncio.Lock()

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

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:  # the lease loop must outlive any one failure
                LOG.exception("replica %s: lease step failed", self.identity.name)
            await asyncio.sleep(self.identity.renew_seconds)

    async def step(self) -> None:
        """One renewal (primary) or one look at the lease (backup)."""
        me = self.identity
        try:
            lease = self._store.claim_lease(self.holder, me.url, me.lease_seconds, self.term)
            self._lease_read_at = self._clock()
            self.last_error = None
        except StoreUnavailable as exc:
            # Nobody can take the lease while the store is away, and the store refuses every
            # change meanwhile: the primary stays primary for the switches until it answers.
            self.last_error = str(exc)
            LOG.warning("replica %s: lease not renewed: %s", me.name, exc)
            return
        self.lease = lease
        mine = lease is not None and lease.holder == self.holder and lease.valid
        if self.term is not None:
            if mine and lease is not None and lease.term == self.term:
                self._renewed_at = self._clock()
                return
            LOG.warning(
                "replica %s: lost the lease of term %d (now %s); stepping down",
                me.name,
                self.term,
                "nobody's" if lease is None else f"{replica_name(lease.holder)}'s term {lease.term}",
            )
            await self._step_down()
            return
        if mine and lease is not None:
            await self._take(lease.term)
            return
        # A backup: follow the primary's changes, so reads and a takeover start current.
        try:
            self._store.sync()
        except StoreUnavailable as exc:
            self.last_error = str(exc)

    async def _take(self, term: int) -> None:
        async with self._changing:
            LOG.info("replica %s: took the lease, term %d", self.identity.name, term)
            self.term = term
            self._renewed_at = self._clock()
            self.promoted_at = self._clock()
            try:
                await self._promote(term)
            except (StoreUnavailable, NotPrimary) as exc:
                LOG.warning("replica %s: could not take over in term %d: %s", self.identity.name, term, exc)
                self.term = None
                await self._demote()

    async def _step_down(self) -> None:
        async with self._changing:
            self.term = None
            await self._demote()

    async def resign(self) -> None:
        """A clean stop: give the lease up so a backup need not wait for it to expire."""
        term = self.term
        if term is None:
            return
        self.term = None
        try:
            self._store.release_lease(self.holder, term)
        except StoreUnavailable as exc:
            LOG.warning("replica %s: lease of term %d not released: %s", self.identity.name, term, exc)


def replica_name(holder: str) -> str:
    """The replica's name in a lease holder (name#incarnation)."""
    return holder.partition("#")[0]
