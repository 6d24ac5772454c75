"""Reservations end to end: admission → store → switches, and back out. REST and the in-band
protocol both come through here, so they share one ledger and one truth.

Order of effects (so a crash at any point leaves something reconcilable):
 1. one store transaction runs the admission test against the ledger and records the channel
    as "installing" (it gets its channel id here), or records an in-band hold;
 2. every hop is written (concurrently), or every written hop is removed again;
 3. a second transaction marks it "active": only then is it promised (REST answers 201).
A reservation still "installing" when its controller stopped was never promised: the next
primary (or the same controller restarting) rolls it back, and reconciliation removes any hop
it had written (docs/deployment.md, "Failure cases and what each guarantees").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from terrapin.admission import AdmissionLedger, Allocation, Denial
from terrapin.admission.model import ChannelKey, PortId
from terrapin.channel_requests import (
    OUTCOME_UNKNOWN,
    STORE_UNAVAILABLE,
    SWITCH_REFUSED,
    SWITCH_UNAVAILABLE,
    ChannelRequest,
    Conflict,
    describe_flow,
    simple_denial,
)
from terrapin.constants import DenialReason
from terrapin.p4program import FRER_HISTORY_MAX
from terrapin.paths import (
    ChannelEntry,
    ChannelProgrammer,
    ChannelSelector,
    NoRoute,
    PathSetupError,
    Topology,
    install_path,
    remove_path,
)
from terrapin.protection import protected_entries, readmit_protected
from terrapin.request_routes import request_route
from terrapin.store import (
    ACTIVE,
    DOWN,
    INSTALLING,
    CommitUnknown,
    Fence,
    GroupCommit,
    Hold,
    NotPrimary,
    Reservation,
    ReservationStore,
    StoreFull,
    StoreUnavailable,
    Transaction,
)
from terrapin.switches import entry_for_hop, not_primary, unanswered

LOG = logging.getLogger("terrapin.reservations")


ACTIVATION_PATIENCE_S = 5.0


def installation_tag(record: Reservation) -> int:
    """32 bits that tell this channel apart from any other that had its channel id: the data
    plane's window ignores state written under another tag, so a reused id starts fresh with
    no register write (docs/dataplane.md "Window policers"). It is derived from what the store
    keeps, so it is the same after a restart and reconciliation leaves the entry alone."""
    identity = f"{record.key.initiator}/{record.key.context}/{record.created_at.hex()}"
    return zlib.crc32(identity.encode())


@dataclass(eq=False)  # one service per controller: equal only to itself
class ReservationService:
    ledger: AdmissionLedger
    topology: Topology
    store: ReservationStore
    programmer: ChannelProgrammer
    demote_excess: bool = True
    # Who may write the store: None for the one controller of a SQLite store; a replica's
    # lease (term) otherwise, so a replica that lost it changes nothing.
    fence: Callable[[], Fence | None] = lambda: None
    # A protected channel's sequence recovery window, in numbers (docs/controller.md
    # "Protection"): a copy that arrives this many numbers late is dropped as rogue.
    history_length: int = FRER_HISTORY_MAX
    # Called when a channel or a hold gave its capacity back (closed, released, expired): the
    # restoration tries the down channels again (restoration.py, Restoration.capacity_freed).
    capacity_freed: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        # Reservations whose rollback or activation could not be written (the store was away):
        # rolled back when it can be (retry_unfinished), each with the record whose hops this
        # controller may have written (None: it wrote none).
        self._unfinished: dict[ChannelKey, Reservation | None] = {}
        # Set-ups, confirmations and removals of concurrent requests share transactions.
        self._group = GroupCommit(self.store, lambda: self.fence())
        self._handed: dict[str, int] = {}  # the last context next_context gave each initiator
        # see entries(): per reservation, (its id, the routes' version), its allocation, its entries
        self._entries: dict[ChannelKey, tuple[tuple[int, int], Allocation, list[ChannelEntry]]] = {}

    # ---- start-up and upkeep -----------------------------------------------------------------

    def rollback_unfinished(self) -> int:
        """Release every reservation still "installing": none was promised, and whichever
        controller was installing it is gone (at start-up, or when this replica becomes primary).
        Reconciliation then removes any hop it had written, and retry_unfinished any this
        controller's own unfinished set-ups write after it. Returns how many."""
        with self.store.transaction(self.fence()) as txn:
            stale = [r.key for r in self.store.all() if r.state == INSTALLING]
            for key in stale:
                txn.release(key)
        for key in stale:
            LOG.warning("reservation %s was never finished; rolled back", key)
        return len(stale)

    async def retry_unfinished(self) -> int:
        """Roll back what an earlier failure left "installing" in the store, and remove the
        hops this controller wrote for it; returns how many."""
        done = 0
        for key, written in list(self._unfinished.items()):
            try:
                with self.store.transaction(self.fence()) as txn:
                    # Looked up inside the transaction, whose copy has caught up with the
                    # tables: a set-up whose recording commit lost its answer (CommitUnknown)
                    # is in the copy only from then on, and it must go as well.
                    record = self.store.get(key)
                    if record is not None and record.state == INSTALLING:
                        txn.release(key)
            except (StoreUnavailable, NotPrimary):
                return done
            del self._unfinished[key]
            if record is not None and record.state != INSTALLING:
                continue  # it became active after all: promised, kept
            # Gone from the store, here or by a rollback at a takeover whose reconciliation may
            # have come before these hops were written: they go too, unless the flow is another
            # reservation's by now (a removal is by the flow's match).
            gone = record or written
            if gone is None or self.store.find_selector(gone.selector) is not None:
                continue
            failed = await remove_path(self.programmer, self.entries(gone))
            if failed:
                LOG.warning("channel %s: removal deferred on %s", key, ", ".join(failed))
            done += 1
        return done

    def expire_holds(self) -> int:
        """Release the tentative holds whose deadline has passed (a transaction does it as it
        starts); returns how many."""
        if not self.store.holds():
            return 0
        with self.store.transaction(self.fence()) as txn:
            expired = len(txn.expired)
        if expired:
            self.capacity_freed()
        return expired

    def desired_entries(self, switch: str) -> list[ChannelEntry]:
        """Every stored channel's entry on `switch` (what its reconciliation makes it hold)."""
        return [e for record in self.store.all() for e in self.entries(record, switch)]

    def desired_by_switch(self) -> dict[str, list[ChannelEntry]]:
        """desired_entries of every switch, in one pass over the reservations."""
        found: dict[str, list[ChannelEntry]] = {}
        for record in self.store.all():
            for entry in self.entries(record):
                found.setdefault(entry.switch, []).append(entry)
        return found

    def entries(self, record: Reservation, switch: str | None = None) -> list[ChannelEntry]:
        """Every hop's entry (on `switch` only, if given); the first hop polices with the
        channel's own policer, and a hop where the admitted path leaves the destination's route
        is pinned to it. None for a reservation that is down. Kept per reservation, its
        allocation and the routes: a reconciliation asks for every one."""
        if record.state == DOWN:
            return []
        version = (record.reservation_id, self.topology.version)
        cached = self._entries.get(record.key)
        if (
            cached is None
            or cached[0] != version
            or (cached[1] is not record.allocation and cached[1] != record.allocation)
        ):
            tag = installation_tag(record)
            dst = record.selector.dst
            if record.allocation.protected:
                made = protected_entries(record, self.topology, self.history_length, tag)
            else:
                in_ports = self.topology.in_ports([hop.port for hop in record.allocation.hops])
                made = [
                    entry_for_hop(
                        hop.port.switch,
                        record.selector,
                        record.channel_id,
                        hop,
                        record.demote_excess,
                        edge=record.allocation if index == 0 else None,
                        tag=tag,
                        pin=self.topology.pin(hop.port, dst),
                        in_port=in_ports[index],
                    )
                    for index, hop in enumerate(record.allocation.hops)
                ]
            cached = self._entries[record.key] = (version, record.allocation, made)
        return cached[2] if switch is None else [e for e in cached[2] if e.switch == switch]

    def forget_entries(self) -> None:
        """Drop the kept entries of reservations that are gone."""
        for key in [k for k in self._entries if self.store.get(k) is None]:
            del self._entries[key]

    # ---- admission ----------------------------------------------------------------------------

    def hold(
        self, request: ChannelRequest, hold_seconds: float | None, first_switch: str | None = None
    ) -> Allocation | Denial:
        """Admission only: resources held (tentatively with `hold_seconds`: recorded in the
        store as a hold, so a replica taking over finds it), nothing written to a switch.
        Without `hold_seconds` the allocation stays in the ledger only until install()."""
        route = request_route(self.topology, self.programmer, request, first_switch)
        if isinstance(route, Denial):
            return route
        with self.store.transaction(self.fence()) as txn:
            conflict = self._conflict(request)
            if conflict is not None:
                decision: Allocation | Denial | None = None
                took = 0.0
            else:
                started = time.perf_counter()
                path, second = route
                decision = txn.admit(request.key, path, request.envelope, hold_seconds, second=second)
                took = time.perf_counter() - started
                if isinstance(decision, Allocation) and hold_seconds is not None:
                    txn.hold(
                        decision,
                        request.selector,
                        request.close_when_down,
                        request.protected,
                        request.protection_optional,
                    )
        self.decided(conflict or decision, took)
        if conflict is not None:
            raise conflict
        assert decision is not None
        return decision

    def decided(self, outcome: Allocation | Denial | Conflict | None, seconds: float) -> None:
        """Called after every admission decision (metrics.py counts and times them)."""

    def set_up(self, origin: str, result: Reservation | Denial, seconds: float) -> None:
        """Called after every attempt to write a channel's hops (metrics.py times them)."""

    def _conflict(self, request: ChannelRequest) -> Conflict | None:
        key = request.key
        stored = self.store.get(key)
        if stored is not None:
            return Conflict(
                "context",
                f"context {key.context} of {key.initiator} already names reservation "
                f"{stored.reservation_id} ({describe_flow(stored.selector)})",
                stored,
            )
        if self.ledger.get(key) is not None:
            return Conflict(
                "context",
                f"context {key.context} of {key.initiator} is held by an in-band request in progress",
                None,
            )
        owner_key = self.store.find_selector(request.selector)
        owner = self.store.get(owner_key) if owner_key is not None else None
        if owner is not None:
            return Conflict(
                "flow",
                f"this flow ({describe_flow(request.selector)}) is already reserved by reservation "
                f"{owner.reservation_id} (initiator {owner.key.initiator}, context {owner.key.context})",
                owner,
            )
        return None

    async def create(self, request: ChannelRequest) -> Reservation | Denial:
        """REST: admit and record in one transaction, then write every hop."""
        route = request_route(self.topology, self.programmer, request, None)
        if isinstance(route, Denial):
            return route
        took = 0.0  # the admission test's own time (the metric), without the store's

        def admit_and_record(
            txn: Transaction,
        ) -> tuple[Allocation | Denial | Conflict, Reservation | Denial | None]:
            nonlocal took
            conflict = self._conflict(request)
            if conflict is not None:
                return conflict, None
            started = time.perf_counter()
            decision = txn.admit(request.key, route[0], request.envelope, second=route[1])
            took = time.perf_counter() - started
            if isinstance(decision, Denial):
                return decision, decision
            return decision, self._record(txn, request, decision)

        with self._recorded(request.key):
            decided, outcome = await self._group.run(admit_and_record)
        self.decided(decided, took)
        if isinstance(decided, Conflict):
            raise decided
        assert outcome is not None
        if isinstance(outcome, Denial):
            return outcome
        return await self._install(outcome)

    async def install(self, request: ChannelRequest) -> Reservation | Denial:
        """In band: the destination accepted, so the hold becomes a reservation and every hop
        is written, all or nothing."""

        def record(txn: Transaction) -> Reservation | Denial:
            held = self.store.hold(request.key)
            if held is None:
                return simple_denial(
                    request.key, DenialReason.SWITCH_ERROR, "hold_expired", "tentative hold expired"
                )
            return self._record(txn, replace(request, close_when_down=held.close_when_down), held.allocation)

        with self._recorded(request.key):
            outcome = await self._group.run(record)
        if isinstance(outcome, Denial):
            return outcome
        return await self._install(outcome)

    @contextlib.contextmanager
    def _recorded(self, key: ChannelKey) -> Iterator[None]:
        """Around the transaction that records a reservation as installing: if its commit may
        have happened unseen, the reservation is rolled back once the store answers (it was
        never written to a switch, and the client is told nothing was reserved)."""
        try:
            yield
        except CommitUnknown:
            self._unfinished.setdefault(key, None)
            raise

    def _record(
        self, txn: Transaction, request: ChannelRequest, allocation: Allocation
    ) -> Reservation | Denial:
        demote = self.demote_excess if request.demote_excess is None else request.demote_excess
        try:
            return txn.reserve(
                allocation, request.selector, request.origin, demote, close_when_down=request.close_when_down
            )
        except StoreFull as exc:
            txn.release(request.key)
            return simple_denial(request.key, DenialReason.SWITCH_ERROR, "channel_ids", str(exc))

    async def _install(self, record: Reservation) -> Reservation | Denial:
        started = time.perf_counter()
        result = await self._write_hops(record)
        self.set_up(record.origin, result, time.perf_counter() - started)
        return result

    async def _write_hops(self, record: Reservation) -> Reservation | Denial:
        key = record.key
        allocation = record.allocation
        try:
            await install_path(self.programmer, self.entries(record))
        except PathSetupError as exc:
            await self._roll_back(key)
            await remove_path(self.programmer, self.entries(record))
            LOG.warning("path setup for %s failed and was rolled back: %s", key, exc)
            port = next(h.port for h in allocation.hops if h.port.switch == exc.switch)
            outage = unanswered(exc.cause) or not self.programmer.is_ready(exc.switch)
            cause = str(exc.cause) or type(exc.cause).__name__
            if not_primary(exc.cause):
                # The switch has another primary: the lease is changing hands (this replica's
                # ran out, or another took it). Not a refusal of the write: retry (503), as
                # for a store that fences this replica out (`make chaos SWITCH=bmv2` saw a 502).
                return simple_denial(
                    key,
                    DenialReason.SWITCH_ERROR,
                    STORE_UNAVAILABLE,
                    f"{exc.switch} has another primary controller ({cause}); every hop was rolled back",
                )
            return simple_denial(
                key,
                DenialReason.SWITCH_ERROR,
                SWITCH_UNAVAILABLE if outage else SWITCH_REFUSED,
                f"programming {exc.switch} failed ({cause}); every hop was rolled back",
                port=port,
            )
        active = await self._activate(record)
        if isinstance(active, Denial):
            return active
        if active is None:
            # Rolled back meanwhile by a primary that took over (perhaps this replica, taking the
            # lease again after a database restart): never promised. That primary reconciled its
            # switches before these hops were written, so they are removed here; the store no
            # longer lists the channel, so no reconciliation can give it back. A replica that is
            # no longer primary is refused by the switch, whose new primary reconciles.
            await remove_path(self.programmer, self.entries(record))
            return simple_denial(
                key, DenialReason.SWITCH_ERROR, STORE_UNAVAILABLE, "another controller took over; rolled back"
            )
        return active

    async def _activate(self, record: Reservation) -> Reservation | Denial | None:
        """Mark the written reservation active: the promise. A store that is away is waited
        for (a database restart takes about a second), so that the answer is an answer."""
        key = record.key
        uncertain = False
        error: Exception | None = None
        deadline = time.monotonic() + ACTIVATION_PATIENCE_S
        while True:
            try:
                return await self._group.run(lambda txn: txn.set_state(key, ACTIVE))
            except CommitUnknown as exc:
                uncertain, error = True, exc  # it may be active already: the retry finds out
            except (StoreUnavailable, NotPrimary) as exc:
                error = exc
                if isinstance(exc, NotPrimary):
                    break  # fenced: only the new primary decides now (it rolls back)
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.25)
        self._unfinished[key] = record
        if uncertain:
            return simple_denial(
                key,
                DenialReason.SWITCH_ERROR,
                OUTCOME_UNKNOWN,
                f"the store went away while confirming the reservation ({error}): it is either "
                "active or will be rolled back; GET /reservations tells which",
            )
        return simple_denial(
            key,
            DenialReason.SWITCH_ERROR,
            STORE_UNAVAILABLE,
            f"the reservation could not be confirmed ({error}); it will be rolled back",
        )

    async def _roll_back(self, key: ChannelKey) -> None:
        try:
            await self._group.run(lambda txn: txn.release(key))
        except (StoreUnavailable, NotPrimary) as exc:
            LOG.warning("rollback of %s not recorded yet (%s); retried later", key, exc)
            self._unfinished[key] = self.store.get(key)

    async def reroute(self, key: ChannelKey) -> tuple[Reservation, Reservation | None] | None:
        """Admit an active or down reservation again on the path its destination's route takes
        now (after a trunk changed: the restoration, restoration.py), its own capacity counted
        once where the paths share hops, and record it moved there, or down with why, or closed
        if no path admits it and its request asked for that: (before, after or None when
        closed), or None if it is gone or the path is the one it has. Nothing is written to a
        switch here."""

        def down(txn: Transaction, before: Reservation, why: str) -> tuple[Reservation, Reservation | None]:
            if before.close_when_down:
                txn.release(key)
                return before, None
            after = txn.move(key, None, why)
            assert after is not None
            return before, after

        def move(txn: Transaction) -> tuple[Reservation, Reservation | None] | None:
            before = self.store.get(key)
            if before is None or before.state not in (ACTIVE, DOWN):
                return None
            if before.allocation.protected:
                return move_protected(txn, before)
            try:
                path = self.path_for_selector(before.selector)
            except NoRoute as exc:
                txn.unadmit(key)
                return down(txn, before, f"no path: {exc}")
            if before.state == ACTIVE and [h.port for h in before.allocation.hops] == path:
                return None
            decision = txn.readmit(key, path, before.allocation.requested)
            if isinstance(decision, Denial):
                return down(txn, before, f"no path admits it: {decision.primary.describe()}")
            after = txn.move(key, decision)
            return (before, after) if after is not None else None

        def move_protected(
            txn: Transaction, before: Reservation
        ) -> tuple[Reservation, Reservation | None] | None:
            outcome = readmit_protected(txn, before, self.topology)
            if outcome is None:
                return None
            if isinstance(outcome, str):
                return down(txn, before, outcome)
            after = txn.move(key, outcome)
            return (before, after) if after is not None else None

        return await self._group.run(move)

    def path_for_selector(self, selector: ChannelSelector) -> list[PortId]:
        """The path a channel's packets take now (its destination's route from its source)."""
        return self.topology.path(selector.src, selector.dst)

    async def close(self, key: ChannelKey) -> Reservation | None:
        """Remove a channel everywhere. Switches that cannot be reached now are corrected by
        reconciliation when they reconnect (the store no longer lists the channel)."""
        removed = await self._group.run(lambda txn: txn.release(key))
        if not isinstance(removed, Reservation):
            return None  # nothing, or a tentative hold
        self._unfinished.pop(key, None)
        if removed.state != DOWN:
            self.capacity_freed()
        failed = await remove_path(self.programmer, self.entries(removed))
        if failed:
            LOG.warning("channel %s: removal deferred on %s", key, ", ".join(failed))
        return removed

    def release_hold(self, key: ChannelKey) -> bool:
        """Drop a tentative hold (never an installed channel)."""
        if self.store.get(key) is not None or self.store.hold(key) is None:
            return False
        with self.store.transaction(self.fence()) as txn:
            if self.store.get(key) is not None:
                return False
            released = isinstance(txn.release(key), Hold)
        if released:
            self.capacity_freed()
        return released

    def refresh_hold(self, key: ChannelKey, hold_seconds: float) -> bool:
        """Extend a tentative hold (a retransmitted REQUEST_ADMIT); False if it is gone."""
        with self.store.transaction(self.fence()) as txn:
            return txn.refresh(key, hold_seconds)

    def get(self, key: ChannelKey) -> Reservation | None:
        return self.store.get(key)

    def lapsed_hold(self, key: ChannelKey) -> Hold | None:
        """The hold `key` had, if it lapsed (its deadline passed, or it was released) without
        becoming a reservation: what its request asked, for admitting it again when the
        destination's REQUEST_ACCEPT comes late. Found in the store until the next transaction
        releases it, then in the store's journal (store.lapsed_hold)."""
        held = self.store.hold(key)
        if held is not None:
            return held if held.expires_at <= self.ledger.clock() else None
        return self.store.lapsed_hold(key)

    def get_hold(self, key: ChannelKey) -> Hold | None:
        """The tentative hold of `key`, unless its deadline has passed (the next transaction
        releases it)."""
        held = self.store.hold(key)
        return held if held is not None and held.expires_at > self.ledger.clock() else None

    def holds_of(self, initiator: str) -> int:
        now = self.ledger.clock()
        return sum(1 for h in self.store.holds() if h.key.initiator == initiator and h.expires_at > now)

    def list(self) -> Sequence[Reservation]:
        return self.store.all()

    def by_reservation_id(self, reservation_id: int) -> Reservation | None:
        return self.store.get_by_reservation_id(reservation_id)

    def count(self) -> int:
        return self.store.count()

    def next_context(self, initiator: str) -> int:
        """A context for a REST request that names none: from 2^31 up, so it never collides
        with a host's own. Each is handed out once, also to concurrent requests whose
        reservations are not recorded yet (they share a later transaction)."""
        context = max(self.store.largest_context(initiator) + 1, 1 << 31, self._handed.get(initiator, 0) + 1)
        self._handed[initiator] = context
        return context
