"""The reservation routes: POST /reservations (and its batch), GET and DELETE of one, the list,
and a reservation's counters per hop. Each turns a REST body into a ChannelRequest for the
ReservationService (terrapin/reservations.py, shared with the in-band protocol) and its answer
into a body of reservation_bodies.py or an error of errors.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response

from terrapin.admission import Denial
from terrapin.admission.model import ChannelKey, PortId
from terrapin.api.auth import require_token
from terrapin.api.context import Api, ApiContext
from terrapin.api.errors import (
    ErrorOut,
    InvalidOut,
    OutcomeUnknownOut,
    StoreErrorOut,
    SwitchErrorOut,
    raise_switch_trouble,
    store_error,
)
from terrapin.api.reservation_bodies import (
    PROTOCOLS,
    U32,
    BatchItemOut,
    ConflictOut,
    DenialOut,
    HopCountersOut,
    RecoveryCountersOut,
    ReservationBatchIn,
    ReservationBatchOut,
    ReservationIn,
    ReservationOut,
    denial_out,
    reservation_out,
)
from terrapin.channel_requests import ChannelRequest, Conflict
from terrapin.constants import CHANNEL_IN_HOST, IP_PROTO_XTP
from terrapin.p4program import member_streams
from terrapin.paths import ChannelSelector
from terrapin.protection import disjoint_pair
from terrapin.protocol.messages import flow_key_from_ports
from terrapin.store import NotPrimary, Reservation, StoreUnavailable

router = APIRouter()

# The answers of every call that takes a JSON body and the token, before it looks at the body.
_BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the body is not JSON"},
    401: {"model": ErrorOut, "description": "no valid bearer token"},
    415: {"model": ErrorOut, "description": "the body is not sent as application/json"},
}


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


async def require_json(request: Request) -> None:
    """A body sent as anything but JSON (curl -d sends form encoding) is refused as such, rather
    than failing validation with a message that does not say why."""
    if not await request.body():
        return  # validation says the body is missing
    content_type = request.headers.get("content-type", "")
    if not _is_json(content_type):
        raise HTTPException(
            415,
            detail={
                "error": "unsupported content type",
                "detail": "send the body as application/json (it came as "
                + (content_type or "no Content-Type")
                + ")",
            },
        )


@router.post(
    "/reservations",
    status_code=201,
    tags=["reservations"],
    responses={
        **_BODY_ERRORS,
        409: {
            "model": DenialOut | ConflictOut,
            "description": "admission denied (DenialOut), or the flow or context is taken (ConflictOut)",
        },
        422: {"model": InvalidOut, "description": "a field is invalid; each is named"},
        502: {"model": SwitchErrorOut, "description": "a switch refused the write; all rolled back"},
        504: {
            "model": OutcomeUnknownOut,
            "description": "the store or the primary went away while the reservation was being "
            "confirmed: it may or may not exist",
        },
        503: {
            "model": SwitchErrorOut | StoreErrorOut,
            "description": "a switch on the path is not connected, or the store cannot be written;"
            " nothing reserved (Retry-After)",
        },
    },
    dependencies=[Depends(require_token), Depends(require_json)],
)
async def create_reservation(api: Api, body: ReservationIn) -> ReservationOut:
    """Admit a simplex channel and set it up on every switch of its path, all or nothing.

    201 with the allocation (rate and burst after rounding, per hop the burst there and the
    worst-case delay now and promised); 409 naming the constraint that failed and by how
    much, or the reservation already holding this flow or context."""
    return await create(api, body)


@router.post(
    "/reservations/batch",
    tags=["reservations"],
    responses={
        **_BODY_ERRORS,
        422: {
            "model": InvalidOut,
            "description": "a field of some reservation is invalid (each is named, e.g. "
            "`reservations.3.rate`); none of the batch was tried",
        },
        503: {"model": StoreErrorOut, "description": "the store cannot be read; nothing reserved"},
    },
    dependencies=[Depends(require_token), Depends(require_json)],
)
async def create_reservations(api: Api, body: ReservationBatchIn) -> ReservationBatchOut:
    """Make many reservations in one request: each is admitted and set up exactly as by
    POST /reservations, all or nothing for itself and independently of the others, and
    they go through admission side by side, as many concurrent POSTs would (so two that
    compete for one port are admitted in no stated order).

    200 with one result per reservation, in order: its status (201, 409, 502, 503, 504) and
    the reservation made or the error body POST /reservations would have answered. One
    request instead of many costs the controller far less per reservation (docs/controller.md)."""
    results = await asyncio.gather(*(_batch_item(api, item) for item in body.reservations))
    return ReservationBatchOut(created=sum(r.status == 201 for r in results), results=list(results))


async def _batch_item(api: ApiContext, body: ReservationIn) -> BatchItemOut:
    try:
        made = await create(api, body)
    except HTTPException as exc:
        detail = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
        return BatchItemOut(status=exc.status_code, error=detail)
    except (StoreUnavailable, NotPrimary) as exc:
        return BatchItemOut(status=503, error=store_error(str(exc)).model_dump())
    return BatchItemOut(status=201, reservation=made)


async def create(api: ApiContext, body: ReservationIn) -> ReservationOut:
    """One reservation of a POST: the body as a ChannelRequest, the service's answer as a body
    (or an HTTPException: 409, or the switch's or store's trouble)."""
    protocol = PROTOCOLS[body.protocol]
    flow_key = body.xtp_key if protocol == IP_PROTO_XTP else flow_key_from_ports(body.src_port, body.dst_port)
    initiator = str(body.src)
    context = body.context if body.context is not None else api.service.next_context(initiator)
    if context > U32:
        raise HTTPException(409, detail={"error": "no free context for this initiator"})
    request = ChannelRequest(
        key=ChannelKey(initiator, context),
        selector=ChannelSelector(initiator, str(body.dst), protocol, flow_key),
        envelope=body.envelope(),
        origin="rest",
        demote_excess=None if body.excess is None else body.excess == "demote",
        close_when_down=body.on_path_down == "close",
        protected=body.protection == "1+1",
        protection_optional=body.unprotected_ok,
    )
    try:
        result = await api.service.create(request)
    except Conflict as exc:
        flow = exc.kind == "flow"
        raise HTTPException(
            409,
            detail=ConflictOut(
                error="already reserved" if flow else "context in use",
                constraint="flow_reserved" if flow else "context_conflict",
                message=str(exc),
                reservation=exc.existing.reservation_id if exc.existing else None,
            ).model_dump(),
        ) from None
    if isinstance(result, Denial):
        raise_switch_trouble(result, api.telemetry)
        raise HTTPException(409, detail=denial_out(result).model_dump())
    made = reservation_out(result)
    if request.protected and not result.allocation.protected:
        why = disjoint_pair(api.service.topology, request.selector)
        made.protection_note = f"admitted without protection: {why}"
    return made


@router.get("/reservations", tags=["reservations"])
async def list_reservations(api: Api) -> list[ReservationOut]:
    """Every reservation, REST and in-band, in the order they were made."""
    return [reservation_out(r) for r in sorted(api.service.list(), key=lambda r: r.reservation_id)]


def _find(api: ApiContext, reservation_id: int) -> Reservation:
    record = api.service.by_reservation_id(reservation_id)
    if record is None:
        raise HTTPException(404, detail={"error": f"no reservation {reservation_id}"})
    return record


@router.get(
    "/reservations/{reservation_id}",
    tags=["reservations"],
    responses={404: {"model": ErrorOut}},
)
async def get_reservation(api: Api, reservation_id: int) -> ReservationOut:
    """One reservation by its id."""
    return reservation_out(_find(api, reservation_id))


@router.delete(
    "/reservations/{reservation_id}",
    status_code=204,
    tags=["reservations"],
    responses={404: {"model": ErrorOut}, 401: {"model": ErrorOut}},
    dependencies=[Depends(require_token)],
)
async def delete_reservation(api: Api, reservation_id: int) -> Response:
    """Release the channel and remove it from every switch of its path; a switch that is
    down then is corrected when it reconnects. The id is never given out again."""
    record = _find(api, reservation_id)
    await api.service.close(record.key)
    return Response(status_code=204)


@router.get(
    "/reservations/{reservation_id}/counters",
    tags=["reservations"],
    responses={404: {"model": ErrorOut}},
    response_model_exclude_unset=True,
)
async def reservation_counters(api: Api, reservation_id: int) -> list[HopCountersOut]:
    """Per hop: packets and bytes the channel's entry matched, and packets its meter
    marked yellow and red. A switch that cannot be read says so in `telemetry_error`.

    A protected channel (1+1): its first hop (the policer, before replication), each transit
    hop of each path (`path` 1 or 2: the copies that reached it), and its last hop with the
    sequence recovery's counters (`recovery`)."""
    record = _find(api, reservation_id)
    alloc = record.allocation
    if not alloc.protected:
        return [await _hop_counters(api, record, hop.port) for hop in alloc.hops]
    members = member_streams(record.channel_id)
    out = [await _hop_counters(api, record, alloc.hops[0].port)]
    for index, path in enumerate(alloc.paths):
        for hop in path[1:-1]:
            out.append(await _hop_counters(api, record, hop.port, path=index + 1, member=members[index]))
    last = await _hop_counters(api, record, alloc.hops[-1].port)
    if last.telemetry_error is None:
        switch = alloc.hops[-1].port.switch
        try:
            found = await api.telemetry.recovery_counters(switch, [record.channel_id])
            arrived = [
                (await api.telemetry.member_counters(switch, m, record.channel_id)).packets for m in members
            ]
            last.recovery = RecoveryCountersOut(**asdict(found[record.channel_id]), arrived_by_path=arrived)
        except Exception as exc:  # a disconnected switch: say so, do not fail the call
            last.telemetry_error = str(exc) or type(exc).__name__
    out.append(last)
    return out


async def _hop_counters(
    api: ApiContext, record: Reservation, port: PortId, path: int | None = None, member: int | None = None
) -> HopCountersOut:
    """A hop's counters: its `channels` entry's, or at a protected channel's transit hop its copy's
    member stream entry's (and the channel id's colours at that switch)."""
    try:
        if member is None:
            # The hop's `channels` entry is keyed by where the channel enters the switch too.
            here = [e for e in api.service.entries(record, port.switch) if e.relay is None]
            in_port = here[0].in_port if here else CHANNEL_IN_HOST
            c = await api.telemetry.channel_counters(port.switch, record.selector, in_port, record.channel_id)
        else:
            c = await api.telemetry.member_counters(port.switch, member, record.channel_id)
        read: dict[str, Any] = asdict(c)  # packets, bytes, yellow_packets, red_packets
    except Exception as exc:  # a disconnected switch: say so, do not fail the call
        read = {"telemetry_error": str(exc) or type(exc).__name__}
    if path is not None:
        read["path"] = path
    return HopCountersOut(switch=port.switch, port=port.port, **read)
