"""Reservations end to end: admission → store → switches, and back out. REST and the in-band
protocol both come through here, so they share one ledger and one truth.

Order of effects (so a crash at any point leaves something reconcilable):
 1. the ledger holds the resources (atomically over the whole path);
 2. the store records the channel as "installing" (it gets its channel id here);
 3. every hop is written (concurrently), or every written hop is removed again;
 4. the store marks it "active" and the ledger commits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from terrapin.admission import AdmissionLedger, Allocation, Denial, LedgerError, Violation
from terrapin.admission.model import ChannelEnvelope, ChannelKey, PortId
from terrapin.constants import DenialReason
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
from terrapin.store import ACTIVE, INSTALLING, Reservation, ReservationStore, StoreFull
from terrapin.switches import entry_for_hop

LOG = logging.getLogger("terrapin.reservations")


@dataclass(frozen=True)
class ChannelRequest:
    key: ChannelKey
    selector: ChannelSelector
    envelope: ChannelEnvelope
    origin: str = "rest"
    demote_excess: bool | None = None  # None: the configured default


def simple_denial(key: ChannelKey, reason: DenialReason, constraint: str, detail: str) -> Denial:
    return Denial(key, (Violation(reason, constraint, None, None, 0, 0, 0, "", detail),))


class Conflict(Exception):
    """(initiator, context) already names a channel (with different parameters)."""


class ReservationService:
    def __init__(
        self,
        ledger: AdmissionLedger,
        topology: Topology,
        store: ReservationStore,
        programmer: ChannelProgrammer,
        demote_excess: bool = True,
    ) -> None:
        self.ledger = ledger
        self.topology = topology
        self.store = store
        self.programmer = programmer
        self.demote_excess = demote_excess

    # ---- start-up ---------------------------------------------------------------------------

    def restore(self) -> int:
        """Put every stored channel back into the ledger (no re-test: an admitted channel is
        never dropped because the configuration changed). A channel caught mid-installation is
        completed: it passed admission, and reconciliation writes its missing hops."""
        count = 0
        for record in self.store.all():
            try:
                self.ledger.restore(record.allocation)
            except LedgerError as exc:
                LOG.error("stored channel %s cannot be restored: %s", record.key, exc)
                continue
            if record.state == INSTALLING:
                self.store.set_state(record.key, ACTIVE)
            count += 1
        return count

    def desired_entries(self, switch: str) -> list[ChannelEntry]:
        entries: list[ChannelEntry] = []
        for record in self.store.all():
            entries.extend(e for e in self.entries(record) if e.switch == switch)
        return entries

    def entries(self, record: Reservation) -> list[ChannelEntry]:
        return [
            entry_for_hop(hop.port.switch, record.selector, record.channel_id, hop, record.demote_excess)
            for hop in record.allocation.hops
        ]

    # ---- admission ----------------------------------------------------------------------------

    def path_for(self, request: ChannelRequest, first_switch: str | None = None) -> list[PortId]:
        return self.topology.path(request.selector.src, request.selector.dst, first_switch)

    def hold(
        self, request: ChannelRequest, hold_seconds: float | None, first_switch: str | None = None
    ) -> Allocation | Denial:
        """Admission only: resources held in the ledger, nothing written anywhere."""
        try:
            path = self.path_for(request, first_switch)
        except NoRoute as exc:
            return simple_denial(request.key, DenialReason.NO_ROUTE, "no_route", str(exc))
        if self.ledger.get(request.key) is not None or self.store.get(request.key) is not None:
            raise Conflict(f"channel {request.key} exists")
        owner = self.store.find_selector(request.selector)
        if owner is not None:
            raise Conflict(f"channel {owner} already matches {request.selector}")
        try:
            return self.ledger.admit(request.key, path, request.envelope, hold_seconds=hold_seconds)
        except LedgerError as exc:  # a concurrent request for the same key won the race
            raise Conflict(str(exc)) from None

    async def install(self, request: ChannelRequest) -> Reservation | Denial:
        """Write a held (or committed) allocation to every hop; all or nothing."""
        held = self.ledger.get(request.key)
        if held is None:
            return simple_denial(
                request.key, DenialReason.SWITCH_ERROR, "hold_expired", "tentative hold expired"
            )
        allocation = held[0]
        self.ledger.commit(request.key)  # stop the expiry clock while the switches are written
        demote = self.demote_excess if request.demote_excess is None else request.demote_excess
        try:
            record = self.store.add(allocation, request.selector, request.origin, demote)
        except StoreFull as exc:
            self.ledger.release(request.key)
            return simple_denial(request.key, DenialReason.SWITCH_ERROR, "channel_ids", str(exc))
        try:
            await install_path(self.programmer, self.entries(record))
        except PathSetupError as exc:
            self.store.remove(request.key)
            self.ledger.release(request.key)
            LOG.warning("path setup for %s failed and was rolled back: %s", request.key, exc)
            return simple_denial(
                request.key,
                DenialReason.SWITCH_ERROR,
                f"switch.{exc.switch}",
                f"programming {exc.switch} failed ({exc.cause}); every hop was rolled back",
            )
        self.store.set_state(request.key, ACTIVE)
        return Reservation(
            record.channel_id,
            record.key,
            record.selector,
            record.origin,
            ACTIVE,
            record.demote_excess,
            record.allocation,
            record.created_at,
        )

    async def create(self, request: ChannelRequest) -> Reservation | Denial:
        decision = self.hold(request, hold_seconds=None)
        if isinstance(decision, Denial):
            return decision
        return await self.install(request)

    async def close(self, key: ChannelKey) -> Reservation | None:
        """Remove a channel everywhere. Switches that cannot be reached now are corrected by
        reconciliation when they reconnect (the store no longer lists the channel)."""
        record = self.store.get(key)
        if record is None:
            self.ledger.release(key)  # a tentative hold, if any
            return None
        self.store.remove(key)
        self.ledger.release(key)
        failed = await remove_path(self.programmer, self.entries(record))
        if failed:
            LOG.warning("channel %s: removal deferred on %s", key, ", ".join(failed))
        return record

    def release_hold(self, key: ChannelKey) -> bool:
        """Drop a tentative hold (never an installed channel)."""
        if self.store.get(key) is not None:
            return False
        return self.ledger.release(key) is not None

    def get(self, key: ChannelKey) -> Reservation | None:
        return self.store.get(key)

    def list(self) -> Sequence[Reservation]:
        return self.store.all()

    def next_context(self, initiator: str) -> int:
        # REST channels use contexts from 2^31 up so they never collide with a host's own.
        return max(self.store.largest_context(initiator) + 1, 1 << 31)
