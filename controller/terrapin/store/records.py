"""What the store keeps, as values: a reservation, a tentative hold, and their JSON forms.

The JSON forms are what the journal carries between replicas and what the `allocation` column
holds, so one codec serves both (a replica rebuilt from the tables and one that followed the
journal hold equal values).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from terrapin.admission.model import (
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    HopAllocation,
    Policer,
    PortId,
    Rounding,
)
from terrapin.paths import ChannelSelector

INSTALLING = "installing"  # admitted and being written to the switches: not yet promised
ACTIVE = "active"  # every hop written and the client told so
# No path carries it: a trunk (or a switch) on its path is down and no other path admits it.
# Kept, holding no capacity and written to no switch, and admitted again when a path does.
DOWN = "down"


@dataclass(frozen=True)
class Reservation:
    channel_id: int
    key: ChannelKey
    selector: ChannelSelector
    origin: str  # "rest" or "inband"
    state: str
    demote_excess: bool
    allocation: Allocation
    created_at: float
    reservation_id: int  # the REST id: never reused (channel_id is the data plane's, and is)
    note: str = ""  # why it is down (DOWN), or empty
    # What its request asked for when no path carries it: closed at once, rather than kept down
    # and set up again when a path does (docs/controller.md, "Trunks").
    close_when_down: bool = False


@dataclass(frozen=True)
class Hold:
    """A tentative reservation of the in-band protocol (seed 000 Figure 15): admitted on every
    hop, written nowhere, gone at `expires_at` (seconds since the epoch, so every replica reads
    the same deadline) unless the destination's REQUEST_ACCEPT installs it first."""

    key: ChannelKey
    selector: ChannelSelector
    allocation: Allocation
    expires_at: float
    close_when_down: bool = False  # the request's, for the reservation it becomes
    # The request's protection flags: the allocation says what was admitted, these what was asked,
    # for admitting it again if the hold lapses before the destination's REQUEST_ACCEPT arrives.
    protected: bool = False
    protection_optional: bool = False


def _fields(obj: Any) -> dict[str, Any]:
    # Field by field: dataclasses.asdict deep-copies and was a measurable share of a set-up.
    return {f.name: getattr(obj, f.name) for f in dataclass_fields(obj)}


def allocation_to_dict(a: Allocation) -> dict[str, Any]:
    return {
        "key": [a.key.initiator, a.key.context],
        "requested": {**_fields(a.requested), "policer": _fields(a.requested.policer)},
        "rate": a.rate,
        "burst": a.burst,
        "rounding": _fields(a.rounding),
        "hops": [_hop_to_dict(h) for h in a.hops],
        "tolerance_us": a.tolerance_us,
        **(
            {"protection": [_hop_to_dict(h) for h in a.protection], "disjoint": a.disjoint}
            if a.protection
            else {}
        ),
    }


def _hop_to_dict(h: HopAllocation) -> dict[str, Any]:
    return {**_fields(h), "port": [h.port.switch, h.port.port]}


def _hop_from_dict(h: dict[str, Any]) -> HopAllocation:
    return HopAllocation(**{**h, "port": PortId(h["port"][0], int(h["port"][1]))})


def allocation_from_dict(d: dict[str, Any]) -> Allocation:
    return Allocation(
        key=ChannelKey(d["key"][0], int(d["key"][1])),
        # Rows written before window policers have no "policer": they are meter channels.
        requested=ChannelEnvelope(
            **{**d["requested"], "policer": Policer(**d["requested"].get("policer", {}))}
        ),
        rate=int(d["rate"]),
        burst=int(d["burst"]),
        rounding=Rounding(**d["rounding"]),
        hops=tuple(_hop_from_dict(h) for h in d["hops"]),
        # Rows written before switches had a jitter: their policers had no tolerance.
        tolerance_us=int(d.get("tolerance_us", 0)),
        # Rows of unprotected channels (and all written before protection) have no second path.
        protection=tuple(_hop_from_dict(h) for h in d.get("protection", ())),
        disjoint=str(d.get("disjoint", "")),
    )


def allocation_to_json(a: Allocation) -> str:
    return json.dumps(allocation_to_dict(a), sort_keys=True)


def allocation_from_json(text: str) -> Allocation:
    return allocation_from_dict(json.loads(text))


def selector_to_list(s: ChannelSelector) -> list[Any]:
    # The flow key is up to 64 bits: kept as text so no JSON reader rounds it.
    return [s.src, s.dst, s.protocol, str(s.flow_key)]


def selector_from_list(v: list[Any]) -> ChannelSelector:
    return ChannelSelector(str(v[0]), str(v[1]), int(v[2]), int(v[3]))


def reservation_to_json(r: Reservation, allocation_json: str | None = None) -> str:
    """`allocation_json`: allocation_to_json(r.allocation) if the caller has it already (a
    reservation's row and its journal entry both carry the allocation: it is encoded once)."""
    rest = json.dumps(
        {
            "channel_id": r.channel_id,
            "selector": selector_to_list(r.selector),
            "origin": r.origin,
            "state": r.state,
            "demote_excess": r.demote_excess,
            "created_at": r.created_at,
            "reservation_id": r.reservation_id,
            "note": r.note,
            "close_when_down": r.close_when_down,
        }
    )
    allocation = allocation_json if allocation_json is not None else allocation_to_json(r.allocation)
    return f'{rest[:-1]}, "allocation": {allocation}}}'


def reservation_from_json(text: str) -> Reservation:
    d = json.loads(text)
    allocation = allocation_from_dict(d["allocation"])
    return Reservation(
        channel_id=int(d["channel_id"]),
        key=allocation.key,
        selector=selector_from_list(d["selector"]),
        origin=d["origin"],
        state=d["state"],
        demote_excess=bool(d["demote_excess"]),
        allocation=allocation,
        created_at=float(d["created_at"]),
        reservation_id=int(d["reservation_id"]),
        note=str(d.get("note", "")),
        close_when_down=bool(d.get("close_when_down", False)),
    )


def hold_to_json(h: Hold) -> str:
    return json.dumps(
        {
            "selector": selector_to_list(h.selector),
            "allocation": allocation_to_dict(h.allocation),
            "expires_at": h.expires_at,
            "close_when_down": h.close_when_down,
            "protected": h.protected,
            "protection_optional": h.protection_optional,
        }
    )


def hold_from_json(text: str) -> Hold:
    d = json.loads(text)
    allocation = allocation_from_dict(d["allocation"])
    return Hold(
        allocation.key,
        selector_from_list(d["selector"]),
        allocation,
        float(d["expires_at"]),
        bool(d.get("close_when_down", False)),
        bool(d.get("protected", False)),
        bool(d.get("protection_optional", False)),
    )
