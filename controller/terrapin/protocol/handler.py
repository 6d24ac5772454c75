"""The router's side of the reservation protocol (seed 000 §4.1.2, Figure 15).

Every reservation message crossing a switch reaches the controller as a PacketIn (the switch
punts ICMP 253 from any port); the controller acts for that switch and re-injects the message
through the pipeline (PacketOut), which routes it to its next hop, or answers it.

The controller sees the whole network, so the first switch a REQUEST_ADMIT reaches admits the
entire path at once (tentatively, atomically in the ledger); later switches find the hold and
only count the hop. The first REQUEST_ACCEPT to come back (at the destination's switch)
installs every hop, all or nothing; REQUEST_DENIED releases the hold. Everything is keyed by
(initiator, context) and idempotent, so lost and repeated messages are harmless: a host
retransmits REQUEST_ADMIT until it hears an answer, holds expire, duplicates are re-forwarded.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace

from terrapin.admission import Denial
from terrapin.admission.model import ChannelEnvelope, ChannelKey
from terrapin.channel_requests import ChannelRequest, Conflict, simple_denial
from terrapin.constants import DenialReason, MessageCode
from terrapin.paths import ChannelSelector
from terrapin.protocol.messages import (
    FLAG_CLOSE_WHEN_DOWN,
    FLAG_PROTECTION,
    FLAG_PROTECTION_OPTIONAL,
    FLAG_TRUNCATED,
    MalformedMessage,
    ReservationMessage,
    decode,
)
from terrapin.protocol.packets import IcmpDatagram, build_frame, parse_frame
from terrapin.protocol.status import StatusReport, encode_status
from terrapin.reservations import ReservationService
from terrapin.store import Hold, NotPrimary, Reservation, StoreUnavailable

LOG = logging.getLogger("terrapin.protocol")

PacketOut = Callable[[str, bytes], Awaitable[None]]
StatusSource = Callable[[str, ChannelKey | None], Awaitable[StatusReport]]

U32 = 0xFFFF_FFFF


def _envelope(msg: ReservationMessage) -> ChannelEnvelope:
    return ChannelEnvelope(
        priority=msg.priority,
        rate=msg.rate,
        burst=msg.burst,
        max_packet=msg.max_packet,
        delay_bound_us=msg.delay_us,
        avg_idle_us=msg.avg_idle_us,
        policer=msg.policer,
    )



def _as_held(request: ChannelRequest, lapsed: Hold | None) -> ChannelRequest:
    """`request` (what a REQUEST_ACCEPT says) with what the REQUEST_ADMIT of its lapsed hold asked
    beyond it, if that hold was for the same flow and envelope."""
    if lapsed is None:
        return request
    if (lapsed.selector, lapsed.allocation.requested) != (request.selector, request.envelope):
        return request
    return replace(
        request,
        close_when_down=lapsed.close_when_down,
        protected=lapsed.protected,
        protection_optional=lapsed.protection_optional,
    )

def _selector(msg: ReservationMessage) -> ChannelSelector:
    return ChannelSelector(msg.initiator, msg.destination, msg.protocol, msg.flow_key)


class ProtocolHandler:
    def __init__(
        self,
        service: ReservationService,
        send: PacketOut,
        status: StatusSource,
        hold_seconds: float,
        max_holds_per_initiator: int = 16,
    ) -> None:
        self._service = service
        self._send = send
        self._status = status
        self._hold_seconds = hold_seconds
        self._max_holds = max_holds_per_initiator
        self.counters: Counter[str] = Counter()

    async def handle_packet_in(self, switch: str, ingress_port: int, frame: bytes) -> None:
        try:
            datagram = parse_frame(frame)
            msg = decode(datagram.icmp)
        except MalformedMessage as exc:
            self.counters["malformed"] += 1
            LOG.warning(
                "switch %s port %d: malformed reservation message dropped: %s",
                switch,
                ingress_port,
                exc,
            )
            return
        self.counters[msg.code.name] += 1
        if datagram.ttl <= 1:
            self.counters["ttl_expired"] += 1
            LOG.warning("switch %s: %s with TTL %d dropped", switch, msg.code.name, datagram.ttl)
            return
        handler = {
            MessageCode.REQUEST_ADMIT: self._admit,
            MessageCode.REQUEST_ACCEPT: self._accept,
            MessageCode.REQUEST_DENIED: self._denied,
            MessageCode.REQUEST_STATUS: self._status_request,
            MessageCode.REPORT_STATUS: self._forward,
            MessageCode.NOTIFY_CLOSE: self._notify_close,
            MessageCode.RECVD_CLOSE: self._recvd_close,
        }[msg.code]
        try:
            await handler(switch, datagram, msg)
        except (StoreUnavailable, NotPrimary) as exc:
            # Not an answer the initiator should act on: it retransmits, and a replica that
            # can write the store (this one later, or the next primary) answers then.
            self.counters["store_unavailable"] += 1
            LOG.warning(
                "switch %s: %s not handled, the store cannot be written: %s", switch, msg.code.name, exc
            )

    # ---- sending --------------------------------------------------------------------------------

    async def _forward(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        counted = msg.with_code(msg.code, hops=min(msg.hops + 1, 0xFFFF))
        frame = build_frame(datagram.src, datagram.dst, counted.encode(), ttl=datagram.ttl)
        await self._send(switch, frame)

    async def _originate(self, switch: str, dst: str, msg: ReservationMessage) -> None:
        """A message this router generates (a denial, a status report, a close)."""
        src = self._service.topology.router_ip(switch) or msg.destination
        counted = msg.with_code(msg.code, hops=min(msg.hops + 1, 0xFFFF))
        await self._send(switch, build_frame(src, dst, counted.encode()))

    async def tell_initiator(self, record: Reservation, up: bool) -> None:
        """A router's word to an in-band channel's initiator after a restoration
        (terrapin/restoration.py): NOTIFY_CLOSE with PATH_DOWN when no path admits the channel,
        REQUEST_ACCEPT with its new bound when one does again (docs/protocol.md)."""
        env = record.allocation.requested
        alloc = record.allocation
        protected = alloc.protected_delay_us
        bound = protected if protected is not None else alloc.worst_case_delay_us
        msg = ReservationMessage(
            MessageCode.REQUEST_ACCEPT if up else MessageCode.NOTIFY_CLOSE,
            record.key.context,
            record.key.initiator,
            record.selector.dst,
            protocol=record.selector.protocol,
            priority=env.priority,
            flow_key=record.selector.flow_key,
            rate=min(alloc.rate, U32),
            burst=min(alloc.burst, U32),
            avg_idle_us=min(env.avg_idle_us, U32),
            max_packet=env.max_packet,
            delay_us=min(bound, U32) if up else 0,
            reason=0 if up else int(DenialReason.PATH_DOWN),
            policer=env.policer,
        )
        self.counters["restored_told" if up else "down_told"] += 1
        await self._originate(alloc.hops[0].port.switch, record.key.initiator, msg)

    async def _deny(self, switch: str, msg: ReservationMessage, denial: Denial) -> None:
        v = denial.primary
        self.counters["denied_here"] += 1
        LOG.info("deny %s/%d at %s: %s", msg.initiator, msg.context, switch, v.describe())
        reply = msg.with_code(
            MessageCode.REQUEST_DENIED,
            reason=int(v.reason),
            shortfall=min(max(v.excess, 0), U32),
            flags=0,
        )
        await self._originate(switch, msg.initiator, reply)

    # ---- Figure 15 ------------------------------------------------------------------------------

    async def _admit(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        key = ChannelKey(msg.initiator, msg.context)
        installed = self._service.get(key)
        if installed is not None:
            if installed.selector == _selector(msg) and installed.allocation.requested == _envelope(msg):
                # A retransmission after we committed: let the destination re-confirm.
                await self._forward(switch, datagram, msg)
            else:
                await self._deny(switch, msg, _conflict(key))
            return
        held = self._service.get_hold(key)
        if held is not None:
            if held.selector == _selector(msg) and held.allocation.requested == _envelope(msg):
                self._service.refresh_hold(key, self._hold_seconds)
                await self._forward(switch, datagram, msg)
            else:
                await self._deny(switch, msg, _conflict(key))
            return
        pending = self._service.holds_of(msg.initiator)
        if pending >= self._max_holds:
            limit = simple_denial(
                key,
                DenialReason.HOLD_LIMIT,
                "hold_limit",
                f"{msg.initiator} already has {pending} requests held",
            )
            await self._deny(switch, msg, limit)
            return
        request = ChannelRequest(
            key,
            _selector(msg),
            _envelope(msg),
            origin="inband",
            close_when_down=bool(msg.flags & FLAG_CLOSE_WHEN_DOWN),
            protected=bool(msg.flags & FLAG_PROTECTION),
            protection_optional=bool(msg.flags & FLAG_PROTECTION_OPTIONAL),
        )
        try:
            decision = self._service.hold(request, self._hold_seconds, first_switch=switch)
        except Conflict:
            await self._deny(switch, msg, _conflict(key))
            return
        if isinstance(decision, Denial):
            await self._deny(switch, msg, decision)
            return
        LOG.info("hold %s on %s", key, " ".join(str(h.port) for h in decision.hops))
        await self._forward(switch, datagram, msg)

    async def _accept(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        key = ChannelKey(msg.initiator, msg.context)
        record = self._service.get(key)
        if record is None:
            request = ChannelRequest(key, _selector(msg), _envelope(msg), origin="inband")
            if self._service.get_hold(key) is None:
                # The hold lapsed: admit again before installing, as its REQUEST_ADMIT asked (the
                # flags only a REQUEST_ADMIT carries are kept with the hold).
                request = _as_held(request, self._service.lapsed_hold(key))
                try:
                    decision = self._service.hold(request, self._hold_seconds, first_switch=None)
                except Conflict:
                    decision = _conflict(key)
                if isinstance(decision, Denial):
                    await self._refuse_after_accept(switch, msg, decision)
                    return
            result = await self._service.install(request)
            if isinstance(result, Denial):
                await self._refuse_after_accept(switch, msg, result)
                return
            record = result
            LOG.info("installed %s (channel %d)", key, record.channel_id)
        alloc = record.allocation
        bound = (
            alloc.protected_delay_us if alloc.protected_delay_us is not None else alloc.worst_case_delay_us
        )
        # The initiator learns what was allocated: the seed's re-factored rate and burst.
        confirmed = msg.with_code(
            MessageCode.REQUEST_ACCEPT,
            rate=min(alloc.rate, U32),
            burst=min(alloc.burst, U32),
            delay_us=min(bound, U32),
        )
        await self._forward(switch, datagram, confirmed)

    async def _refuse_after_accept(self, switch: str, msg: ReservationMessage, denial: Denial) -> None:
        """The destination accepted but the path could not be set up: tell the initiator, and
        tell the destination the channel is closed."""
        await self._deny(switch, msg, denial)
        close = msg.with_code(MessageCode.NOTIFY_CLOSE, reason=int(denial.primary.reason))
        await self._originate(switch, msg.destination, close)

    async def _denied(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        key = ChannelKey(msg.initiator, msg.context)
        if self._service.release_hold(key):
            LOG.info(
                "released hold %s: %s",
                key,
                DenialReason(msg.reason).name
                if msg.reason in DenialReason._value2member_map_
                else msg.reason,
            )
        await self._forward(switch, datagram, msg)

    async def _notify_close(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        key = ChannelKey(msg.initiator, msg.context)
        record = self._service.get(key)
        if record is not None:
            # Only an end of the channel, or a router, may close it.
            if datagram.src not in (msg.initiator, msg.destination) and not self._is_router(datagram.src):
                self.counters["close_refused"] += 1
                LOG.warning("NOTIFY_CLOSE for %s from %s ignored", key, datagram.src)
                return
            await self._service.close(key)
            LOG.info("closed %s", key)
        else:
            self._service.release_hold(key)
        await self._forward(switch, datagram, msg)

    async def _recvd_close(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        if self._is_router(datagram.dst):
            # An initiator's answer to a router's own NOTIFY_CLOSE (tell_initiator): it arrived.
            self.counters["recvd_close_here"] += 1
            return
        await self._forward(switch, datagram, msg)

    def _is_router(self, ip: str) -> bool:
        topo = self._service.topology
        return any(topo.router_ip(name) == ip for name in topo.switch_names)

    async def _status_request(self, switch: str, datagram: IcmpDatagram, msg: ReservationMessage) -> None:
        here = self._service.topology.router_ip(switch)
        if msg.destination not in ("0.0.0.0", here) and self._is_router(msg.destination):
            await self._forward(switch, datagram, msg)  # addressed to another router
            return
        key = ChannelKey(msg.initiator, msg.context) if msg.context else None
        report = await self._status(switch, key)
        payload, truncated = encode_status(report)
        reply = msg.with_code(
            MessageCode.REPORT_STATUS,
            payload=payload,
            flags=FLAG_TRUNCATED if truncated else 0,
        )
        await self._originate(switch, datagram.src, reply)


def _conflict(key: ChannelKey) -> Denial:
    return simple_denial(
        key,
        DenialReason.CONTEXT_CONFLICT,
        "context_conflict",
        f"{key} already names a different channel",
    )
