"""One replica's copy of the store's state, in memory: every reservation and hold, indexed the
ways the controller looks them up, and the admission ledger they load.

It changes in two ways only: by this replica's own transactions (which hold the admission
lock, so the copy is current while they run), and by applying the journal, the changes other
replicas committed, in commit order. Both end in the same state, which is what lets any replica
take over from any other.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from terrapin.admission import AdmissionLedger, LedgerError
from terrapin.admission.model import Allocation, ChannelKey
from terrapin.paths import ChannelSelector
from terrapin.store.records import (
    DOWN,
    Hold,
    Reservation,
    hold_from_json,
    reservation_from_json,
)

LOG = logging.getLogger("terrapin.store")

# Journal entry kinds.
RESERVE = "reserve"  # body: the reservation (a hold of the same key, if any, became it)
HOLD = "hold"  # body: the hold
RELEASE = "release"  # a reservation or hold is gone
STATE = "state"  # body: {"state": ...}
REFRESH = "refresh"  # body: {"expires_at": ...}
MOVE = "move"  # body: the reservation with its new allocation, or down (restoration)


class Mirror:
    def __init__(self, ledger: AdmissionLedger | None) -> None:
        self.ledger = ledger
        self.reservations: dict[ChannelKey, Reservation] = {}
        self.by_reservation_id: dict[int, Reservation] = {}
        self.by_channel_id: dict[int, Reservation] = {}
        self.by_selector: dict[ChannelSelector, ChannelKey] = {}
        self.holds: dict[ChannelKey, Hold] = {}
        self.largest_context: dict[str, int] = {}
        self.next_reservation_id = 1
        self.lowest_free = 0  # no channel id below this is free
        self.cursor = 0  # the last journal entry this copy includes
        self.stale = True  # must be rebuilt from the tables before it is trusted

    def clear(self) -> None:
        self.reservations.clear()
        self.by_reservation_id.clear()
        self.by_channel_id.clear()
        self.by_selector.clear()
        self.holds.clear()
        self.largest_context.clear()
        self.next_reservation_id = 1
        self.lowest_free = 0
        self.cursor = 0
        if self.ledger is not None:
            self.ledger.reset()

    # ---- changes ----------------------------------------------------------------------------

    def add_reservation(self, record: Reservation, *, in_ledger: bool) -> None:
        """`in_ledger`: this replica's ledger already holds the allocation (it decided it, or
        it was this key's hold); otherwise it is restored there untested."""
        key = record.key
        self.holds.pop(key, None)
        if self.ledger is not None:
            if record.state == DOWN:
                self.ledger.release(key)  # a down reservation holds nothing
            elif in_ledger or self.ledger.get(key) is not None:
                self.ledger.commit(key)
            else:
                self._restore(record.allocation, None)
        self._index(record)
        self.next_reservation_id = max(self.next_reservation_id, record.reservation_id + 1)

    def _index(self, record: Reservation) -> None:
        self.reservations[record.key] = record
        self.by_reservation_id[record.reservation_id] = record
        self.by_channel_id[record.channel_id] = record
        self.by_selector[record.selector] = record.key
        initiator, context = record.key.initiator, record.key.context
        self.largest_context[initiator] = max(self.largest_context.get(initiator, -1), context)

    def add_hold(self, hold: Hold, *, in_ledger: bool) -> None:
        if self.ledger is not None and not in_ledger:
            if self.ledger.get(hold.key) is None:
                self._restore(hold.allocation, hold.expires_at)
            else:
                self.ledger.hold_until(hold.key, hold.expires_at)
        self.holds[hold.key] = hold

    def remove(self, key: ChannelKey) -> Reservation | Hold | None:
        """The reservation or hold of `key`, gone from the copy and the ledger."""
        if self.ledger is not None:
            self.ledger.release(key)
        record = self.reservations.pop(key, None)
        if record is None:
            return self.holds.pop(key, None)
        del self.by_reservation_id[record.reservation_id]
        del self.by_channel_id[record.channel_id]
        if self.by_selector.get(record.selector) == key:
            del self.by_selector[record.selector]
        self.lowest_free = min(self.lowest_free, record.channel_id)
        return record

    def replace(self, record: Reservation) -> None:
        """A reservation's new allocation or state (Transaction.move): the ledger holds the
        new allocation unless the record is down. This replica's own move admitted it already;
        another's is restored here untested."""
        if self.ledger is not None:
            held = self.ledger.get(record.key)
            if record.state == DOWN:
                self.ledger.release(record.key)
            elif held is None or held[0] != record.allocation:
                self.ledger.release(record.key)
                self._restore(record.allocation, None)
        self._index(record)

    def set_state(self, key: ChannelKey, state: str) -> Reservation | None:
        record = self.reservations.get(key)
        if record is None:
            return None
        changed = replace(record, state=state)
        self._index(changed)
        return changed

    def refresh(self, key: ChannelKey, expires_at: float) -> None:
        hold = self.holds.get(key)
        if hold is not None:
            self.holds[key] = replace(hold, expires_at=expires_at)
        if self.ledger is not None:
            self.ledger.hold_until(key, expires_at)

    def free_channel_id(self, limit: int) -> int | None:
        candidate = self.lowest_free
        while candidate in self.by_channel_id:
            candidate += 1
        if candidate >= limit:
            return None
        self.lowest_free = candidate
        return candidate

    def apply(self, kind: str, key: ChannelKey, body: str) -> None:
        """One journal entry another replica committed."""
        if kind == RESERVE:
            record = reservation_from_json(body)
            old = self.reservations.get(key)
            if old is not None:  # not expected; keep the copy whole rather than fail
                self.remove(key)
            self.add_reservation(record, in_ledger=False)
        elif kind == HOLD:
            self.add_hold(hold_from_json(body), in_ledger=False)
        elif kind == RELEASE:
            self.remove(key)
        elif kind == STATE:
            self.set_state(key, json.loads(body)["state"])
        elif kind == REFRESH:
            self.refresh(key, float(json.loads(body)["expires_at"]))
        elif kind == MOVE:
            if key in self.reservations:
                self.replace(reservation_from_json(body))
        else:
            LOG.error("journal entry of unknown kind %r for %s ignored", kind, key)

    def _restore(self, allocation: Allocation, held_until: float | None) -> None:
        assert self.ledger is not None
        try:
            self.ledger.restore(allocation, held_until)
        except LedgerError as exc:
            # A port the configuration no longer has: the channel is kept (and shown), but it
            # loads no port this controller admits on.
            LOG.error("stored channel cannot enter the ledger: %s", exc)
