"""Reservations, tentative holds and the primary's lease, kept where a controller restart (or a
replica taking over) finds them: SQLite by default, PostgreSQL for replicated controllers.

- records.py: the values kept (Reservation, Hold) and their JSON forms
- drivers.py: the two databases behind one small interface
- migrations.py: the schema as numbered migrations
- mirror.py: a replica's copy in memory, and the journal that keeps it current
- store.py: the store itself and its one way to change anything, `transaction()`; the lease
- transaction.py: what may change inside a transaction, and how it reaches the tables
"""

from terrapin.store.drivers import CommitUnknown, StoreUnavailable
from terrapin.store.migrations import SchemaTooNew
from terrapin.store.records import ACTIVE, DOWN, INSTALLING, Hold, Reservation
from terrapin.store.store import (
    Fence,
    GroupCommit,
    Lease,
    LeaseTable,
    NotPrimary,
    ReservationStore,
    is_postgres,
)
from terrapin.store.transaction import MAX_CHANNEL_ID, DuplicateReservation, StoreFull, Transaction

__all__ = [
    "ACTIVE",
    "DOWN",
    "INSTALLING",
    "MAX_CHANNEL_ID",
    "CommitUnknown",
    "DuplicateReservation",
    "Fence",
    "GroupCommit",
    "Hold",
    "Lease",
    "LeaseTable",
    "NotPrimary",
    "Reservation",
    "ReservationStore",
    "SchemaTooNew",
    "StoreFull",
    "StoreUnavailable",
    "Transaction",
    "is_postgres",
]
