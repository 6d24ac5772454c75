"""A reservation request, as REST and the in-band protocol both put it to ReservationService,
and the answers that are not an admission decision: a conflict with an existing channel, or a
denial in words (no route, a switch or the store away)."""

from __future__ import annotations

from dataclasses import dataclass

from terrapin.admission import Denial, Violation
from terrapin.admission.model import ChannelEnvelope, ChannelKey, PortId
from terrapin.constants import IP_PROTO_TCP, IP_PROTO_UDP, IP_PROTO_XTP, DenialReason
from terrapin.paths import ChannelSelector
from terrapin.protocol.messages import ports_from_flow_key
from terrapin.store import Reservation


@dataclass(frozen=True)
class ChannelRequest:
    key: ChannelKey
    selector: ChannelSelector
    envelope: ChannelEnvelope
    origin: str = "rest"
    demote_excess: bool | None = None  # None: the configured default
    close_when_down: bool = False  # closed, not kept down, when no path carries it
    # 1+1 protection (docs/controller.md "Protection"): admitted on two disjoint paths, or refused
    # (NO_DISJOINT_PATHS); with protection_optional, admitted on one path instead and told.
    protected: bool = False
    protection_optional: bool = False


# A switch that cannot be written is not an admission decision. These two constraints say which
# kind of trouble it was (REST answers 503 and 502 for them, docs/controller.md; the in-band
# protocol has only REQUEST_DENIED with SWITCH_ERROR). The violation's port names the switch.
SWITCH_UNAVAILABLE = "switch_unavailable"  # not connected, or the connection broke mid-write
SWITCH_REFUSED = "switch_error"  # connected, but it rejected the write
# Nor is a store that cannot be written (REST 503): the database is away, or this replica lost the
# primary's lease while the request ran.
STORE_UNAVAILABLE = "store_unavailable"
# The store went away while a reservation's promise was being committed: the client must look
# (REST 504). Only the confirmation of an installed reservation can end this way.
OUTCOME_UNKNOWN = "outcome_unknown"


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


class Conflict(Exception):
    """The request names a channel that already exists: by its (initiator, context), or by its
    flow (the data plane matches one entry per flow). `existing` is the stored reservation, or
    None for a tentative in-band hold that has no reservation yet."""

    def __init__(self, kind: str, message: str, existing: Reservation | None) -> None:
        super().__init__(message)
        self.kind = kind  # "context" or "flow"
        self.existing = existing
