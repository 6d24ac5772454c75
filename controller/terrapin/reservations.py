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
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from terrapin.admission import AdmissionLedger, Allocation, Denial, LedgerError, Violation
from terrapin.admission.model import ChannelEnvelope, ChannelKey, PortId
from terrapin.constants import IP_PROTO_TCP, IP_PROTO_UDP, IP_PROTO_XTP, DenialReason
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
from terrapin.protocol.messages import ports_from_flow_key
from terrapin.store import ACTIVE, INSTALLING, Reservation, ReservationStore, StoreFull
from terrapin.switches import SwitchUnavailable, entry_for_hop

LOG = logging.getLogger("terrapin.reservations")


@dataclass(frozen=True)
class ChannelRequest:
    key: ChannelKey
    selector: ChannelSelector
    envelope: ChannelEnvelope
    origin: str = "rest"
    demote_excess: bool | None = None  # None: the configured default


# A switch that cannot be written is not an admission decision. These two constraints say which
# kind of trouble it was (REST answers 503 and 502 for them, docs/controller.md; the in-band
# protocol has only REQUEST_DENIED with SWITCH_ERROR). The violation's port names the switch.
SWITCH_UNAVAILABLE = "switch_unavailable"  # not connected, or the connection broke mid-write
SWITCH_REFUSED = "switch_error"  # connected, but it rejected the write


def simple_denial(
    key: ChannelKey, reason: DenialReason, constraint: str, detail: str, port: PortId | None = None
) -> Denial:
    """A denial that is not a quantity: no unit, so it is described in words only."""
    return Denial(key, (Violation(reason, constraint, port, None, 0, 0, 0, "", detail),))


def describe_flow(selector: ChannelSelector) -> str:
    """The flow a selector matches, as a person writes it: `udp 10.0.1.2:5000 → 10.0.2.2:6000`."""
    if selector.protocol in (IP_PROTO_UDP, IP_PROTO_TCP):
        sport, dport = ports_from_flow_key(selector.flow_key)
        name = "udp" if selector.protocol == IP_PROTO_UDP else "tcp"
        return f"{name} {selector.src}:{sport} → {selector.dst}:{dport}"
    if selector.protocol == IP_PROTO_XTP:
        return f"xtp {selector.src} → {selector.dst} key {selector.flow_key:#x}"
    return f"protocol {selector.protocol} {selector.src} → {selector.dst} flow key {selector.flow_key}"


def installation_tag(record: Reservation) -> int:
    """32 bits that tell this channel apart from any other that had its channel id: the data
    plane's window ignores state written under another tag, so a reused id starts fresh with
    no register write (docs/dataplane.md "Window policers"). It is derived from what the store
    keeps, so it is the same after a restart and reconciliation leaves the entry alone."""
    identity = f"{record.key.initiator}/{record.key.context}/{record.created_at.hex()}"
    return zlib.crc32(identity.encode())


class Conflict(Exception):
    """The request names a channel that already exists: by its (initiator, context), or by its
    flow (the data plane matches one entry per flow). `existing` is the stored reservation, or
    None for a tentative in-band hold that has no reservation yet."""

    def __init__(self, kind: str, message: str, existing: Reservation | None) -> None:
        super().__init__(message)
        self.kind = kind  # "context" or "flow"
        self.existing = existing


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
        """Every hop's entry; the first hop polices with the channel's own policer."""
        return [
            entry_for_hop(
                hop.port.switch,
                record.selector,
                record.channel_id,
                hop,
                record.demote_excess,
                edge=record.allocation.requested if index == 0 else None,
                tag=installation_tag(record),
            )
            for index, hop in enumerate(record.allocation.hops)
        ]

    # ---- admission ----------------------------------------------------------------------------

    def path_for(self, request: ChannelRequest, first_switch: str | None = None) -> list[PortId]:
        return self.topology.path(request.selector.src, request.selector.dst, first_switch)

    def hold(
        self, request: ChannelRequest, hold_seconds: float | None, first_switch: str | None = None
    ) -> Allocation | Denial:
        """Admission only: resources held in the ledger, nothing written anywhere."""
        if request.selector.src == request.selector.dst:
            # The path would be the host's own port: capacity reserved for nothing.
            return simple_denial(
                request.key, DenialReason.INVALID_REQUEST, "invalid.dst", "destination is the source itself"
            )
        try:
            path = self.path_for(request, first_switch)
        except NoRoute as exc:
            return simple_denial(request.key, DenialReason.NO_ROUTE, "no_route", str(exc))
        self._check_conflicts(request)
        down = [hop for hop in path if not self.programmer.is_ready(hop.switch)]
        if down:
            # Checked before admission, so an outage answers at once and holds nothing.
            return simple_denial(
                request.key,
                DenialReason.SWITCH_ERROR,
                SWITCH_UNAVAILABLE,
                f"switch {down[0].switch} is not connected; nothing was reserved",
                port=down[0],
            )
        try:
            return self.ledger.admit(request.key, path, request.envelope, hold_seconds=hold_seconds)
        except LedgerError as exc:  # a concurrent request for the same key won the race
            raise Conflict("context", str(exc), self.store.get(request.key)) from None

    def _check_conflicts(self, request: ChannelRequest) -> None:
        key = request.key
        stored = self.store.get(key)
        if stored is not None:
            raise Conflict(
                "context",
                f"context {key.context} of {key.initiator} already names reservation "
                f"{stored.reservation_id} ({describe_flow(stored.selector)})",
                stored,
            )
        if self.ledger.get(key) is not None:
            raise Conflict(
                "context",
                f"context {key.context} of {key.initiator} is held by an in-band request in progress",
                None,
            )
        owner_key = self.store.find_selector(request.selector)
        owner = self.store.get(owner_key) if owner_key is not None else None
        if owner is not None:
            raise Conflict(
                "flow",
                f"this flow ({describe_flow(request.selector)}) is already reserved by reservation "
                f"{owner.reservation_id} (initiator {owner.key.initiator}, context {owner.key.context})",
                owner,
            )

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
            port = next(h.port for h in allocation.hops if h.port.switch == exc.switch)
            outage = isinstance(exc.cause, SwitchUnavailable) or not self.programmer.is_ready(exc.switch)
            cause = str(exc.cause) or type(exc.cause).__name__
            return simple_denial(
                request.key,
                DenialReason.SWITCH_ERROR,
                SWITCH_UNAVAILABLE if outage else SWITCH_REFUSED,
                f"programming {exc.switch} failed ({cause}); every hop was rolled back",
                port=port,
            )
        self.store.set_state(request.key, ACTIVE)
        return replace(record, state=ACTIVE)

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
