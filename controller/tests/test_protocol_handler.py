"""Figure 15 over the 4-switch chain, with the switches layer faked (PacketOut recorded and
delivered to the next switch by hand). The real data plane is exercised by the integration
tests; here the point is the protocol logic, its losses, duplicates and faults."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeFabric, chain_config, ring_config

from terrapin.admission.model import MOVING_WINDOW, ChannelKey, Policer
from terrapin.config import Config
from terrapin.constants import DenialReason, MessageCode
from terrapin.main import Controller
from terrapin.paths import MovingWindowEntry
from terrapin.protocol.messages import (
    FLAG_CLOSE_WHEN_DOWN,
    FLAG_PROTECTION,
    FLAG_PROTECTION_OPTIONAL,
    FLAG_RETRANSMISSION,
    ReservationMessage,
    decode,
)
from terrapin.protocol.packets import build_frame, parse_frame
from terrapin.protocol.status import ChannelRecord, QueueRecord, decode_status
from terrapin.reservations import installation_tag

H1, H2, H3 = "10.0.1.2", "10.0.2.2", "10.0.3.2"
pytest_plugins = ["pg"]
FORWARD = ["s1", "s2", "s3", "s4"]


class Net:
    def __init__(self, config: Config | None = None, store: str | None = None) -> None:
        cfg = config or chain_config(4, rate_bps=8_000_000)  # 1,000,000 B/s per port
        if store is not None:
            cfg = cfg.model_copy(update={"store": store})
        self.fabric: FakeFabric | None = None

        def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
            self.fabric = FakeFabric(topo.switch_names)
            return self.fabric

        self.ctl = Controller(cfg, fabric_factory=factory)
        assert self.fabric is not None
        self.fab: FakeFabric = self.fabric

    async def send(
        self, switches: list[str], src: str, dst: str, msg: ReservationMessage, port: int = 1
    ) -> list[tuple[str, str, ReservationMessage]]:
        """Deliver a message from a host through `switches`; returns every packet the
        controller emitted as (switch, ip dst, message)."""
        frame = build_frame(src, dst, msg.encode())
        emitted = []
        for switch in switches:
            before = len(self.fab.sent)
            await self.ctl.handler.handle_packet_in(switch, port, frame)
            out = self.fab.sent[before:]
            for name, f in out:
                d = parse_frame(f)
                emitted.append((name, d.dst, decode(d.icmp)))
            forwarded = [f for name, f in out if parse_frame(f).dst == dst]
            if not forwarded:
                break
            frame = forwarded[0]
        return emitted

    def installed(self) -> dict[str, int]:
        return {name: len(t) for name, t in self.fab.entries.items()}


def admit(context: int = 7, rate: int = 100_000, burst: int = 6000, **kw: Any) -> ReservationMessage:
    # each context its own UDP source port: the data plane allows one entry per selector
    return ReservationMessage(
        code=MessageCode.REQUEST_ADMIT,
        context=context,
        initiator=H1,
        destination=H2,
        protocol=17,
        priority=6,
        flow_key=(5000 + context) << 16 | 6000,
        rate=rate,
        burst=burst,
        max_packet=1500,
        **kw,
    )


async def establish(net: Net, msg: ReservationMessage) -> ReservationMessage:
    out = await net.send(FORWARD, H1, H2, msg)
    assert [m.code for _, _, m in out] == [MessageCode.REQUEST_ADMIT] * 4
    assert out[-1][2].hops == 4
    back = await net.send(FORWARD[::-1], H2, H1, msg.with_code(MessageCode.REQUEST_ACCEPT, hops=0), port=2)
    assert [m.code for _, _, m in back] == [MessageCode.REQUEST_ACCEPT] * 4
    return back[-1][2]


def test_admit_accept_installs_every_hop() -> None:
    async def run() -> None:
        net = Net()
        accepted = await establish(net, admit())
        assert net.installed() == {"s1": 1, "s2": 1, "s3": 1, "s4": 1}
        rec = net.ctl.service.get(ChannelKey(H1, 7))
        assert rec is not None and rec.origin == "inband"
        assert accepted.delay_us == rec.allocation.worst_case_delay_us > 0
        assert accepted.rate == rec.allocation.rate and accepted.hops == 4
        entry = net.fab.entries["s3"][rec.selector]
        assert entry.priority == 6 and entry.cir >= 100_000

    asyncio.run(run())


def test_close_when_down_travels_with_the_hold_to_the_reservation() -> None:
    async def run() -> None:
        net = Net()
        await establish(net, admit(context=3, flags=FLAG_CLOSE_WHEN_DOWN))
        await establish(net, admit(context=4))
        closing, waiting = (net.ctl.service.get(ChannelKey(H1, c)) for c in (3, 4))
        assert closing is not None and closing.close_when_down
        assert waiting is not None and not waiting.close_when_down

    asyncio.run(run())


def test_protection_in_band_is_refused_on_a_line_or_admitted_on_one_path_if_optional() -> None:
    """A line has no two disjoint paths: flag bit 4 alone is denied NO_DISJOINT_PATHS by the
    first router, holding nothing; with bit 5 the channel is set up on the line, unprotected."""

    async def run() -> None:
        net = Net()
        out = await net.send(FORWARD, H1, H2, admit(context=5, flags=FLAG_PROTECTION))
        assert [(s, d, m.code, m.reason) for s, d, m in out] == [
            ("s1", H1, MessageCode.REQUEST_DENIED, DenialReason.NO_DISJOINT_PATHS)
        ]
        assert net.ctl.service.get_hold(ChannelKey(H1, 5)) is None
        await establish(net, admit(context=6, flags=FLAG_PROTECTION | FLAG_PROTECTION_OPTIONAL))
        record = net.ctl.service.get(ChannelKey(H1, 6))
        assert record is not None and not record.allocation.protected
        assert net.installed() == {"s1": 1, "s2": 1, "s3": 1, "s4": 1}

    asyncio.run(run())


def test_router_denies_when_capacity_is_exhausted() -> None:
    async def run() -> None:
        net = Net()
        await establish(net, admit(context=1, rate=800_000))
        out = await net.send(FORWARD, H1, H2, admit(context=2, rate=200_000))
        assert len(out) == 1
        switch, dst, denied = out[0]
        assert (switch, dst, denied.code) == ("s1", H1, MessageCode.REQUEST_DENIED)
        assert denied.reason == DenialReason.RATE
        # reservable 900,000 B/s: 800,000 + 200,000 must come down to 899,999
        assert denied.shortfall == 100_001
        assert net.ctl.ledger.get(ChannelKey(H1, 2)) is None

    asyncio.run(run())


def test_destination_denial_releases_the_hold() -> None:
    async def run() -> None:
        net = Net()
        await net.send(FORWARD, H1, H2, admit())
        assert net.ctl.ledger.get(ChannelKey(H1, 7)) is not None
        no = admit().with_code(MessageCode.REQUEST_DENIED, reason=DenialReason.DESTINATION_DENIED)
        back = await net.send(FORWARD[::-1], H2, H1, no, port=2)
        assert [m.code for _, _, m in back] == [MessageCode.REQUEST_DENIED] * 4
        assert net.ctl.ledger.get(ChannelKey(H1, 7)) is None
        assert net.installed() == {"s1": 0, "s2": 0, "s3": 0, "s4": 0}

    asyncio.run(run())


def test_duplicates_and_retransmissions_are_idempotent() -> None:
    async def run() -> None:
        net = Net()
        await net.send(FORWARD, H1, H2, admit())
        await net.send(FORWARD, H1, H2, admit(flags=FLAG_RETRANSMISSION))  # a lost answer
        assert len(net.ctl.ledger.channels()) == 1
        await establish(net, admit(flags=FLAG_RETRANSMISSION))
        # the ACCEPT is lost on its way to h1: h1 retransmits; nothing is installed twice
        writes = net.fab.writes
        again = await establish(net, admit(flags=FLAG_RETRANSMISSION))
        assert again.code == MessageCode.REQUEST_ACCEPT
        assert net.fab.writes == writes and net.installed()["s2"] == 1

    asyncio.run(run())


def test_expired_hold_is_readmitted_on_accept(tmp_path: Path) -> None:
    async def run() -> None:
        cfg = chain_config(4, rate_bps=8_000_000)
        cfg = cfg.model_copy(update={"protocol": cfg.protocol.model_copy(update={"hold_seconds": 0.05})})
        net = Net(cfg)
        await net.send(FORWARD, H1, H2, admit())
        await asyncio.sleep(0.1)
        net.ctl.ledger.expire()
        assert net.ctl.ledger.get(ChannelKey(H1, 7)) is None
        back = await net.send(FORWARD[::-1], H2, H1, admit().with_code(MessageCode.REQUEST_ACCEPT), port=2)
        assert back[-1][2].code == MessageCode.REQUEST_ACCEPT
        assert net.installed()["s1"] == 1

    asyncio.run(run())


def test_a_lapsed_hold_is_admitted_again_as_its_request_asked() -> None:
    """The flags only a REQUEST_ADMIT carries (close when down, protection) outlive its hold: a
    REQUEST_ACCEPT that comes after the hold lapsed admits the channel again with them, whether
    the hold is still in the store past its deadline or already released."""

    async def run() -> None:
        cfg = ring_config(4, rate_bps=8_000_000)
        cfg = cfg.model_copy(update={"protocol": cfg.protocol.model_copy(update={"hold_seconds": 0.05})})
        net = Net(cfg)
        flags = FLAG_PROTECTION | FLAG_CLOSE_WHEN_DOWN
        for context, release in ((1, True), (2, False)):
            request = admit(context=context, flags=flags)
            out = await net.send(["s1", "s2"], H1, H2, request)
            assert [m.code for _, _, m in out] == [MessageCode.REQUEST_ADMIT] * 2
            await asyncio.sleep(0.1)
            if release:
                net.ctl.ledger.expire()
            accept = request.with_code(MessageCode.REQUEST_ACCEPT, hops=0)
            back = await net.send(["s2", "s1"], H2, H1, accept)
            assert back[-1][2].code == MessageCode.REQUEST_ACCEPT
            record = net.ctl.service.get(ChannelKey(H1, context))
            assert record is not None and record.allocation.protected and record.close_when_down
        # a different flow under the same context is admitted as its ACCEPT says, nothing more
        await net.send(["s1", "s2"], H1, H2, admit(context=3, flags=flags))
        await asyncio.sleep(0.1)
        other = admit(context=3, rate=50_000).with_code(MessageCode.REQUEST_ACCEPT, hops=0)
        assert (await net.send(["s2", "s1"], H2, H1, other))[-1][2].code == MessageCode.REQUEST_ACCEPT
        record = net.ctl.service.get(ChannelKey(H1, 3))
        assert record is not None and not record.allocation.protected and not record.close_when_down

    asyncio.run(run())


def test_switch_fault_rolls_back_every_hop_and_tells_both_ends() -> None:
    async def run() -> None:
        net = Net()
        await net.send(FORWARD, H1, H2, admit())
        net.fab.fail_install_on.add("s3")
        out = await net.send(["s4"], H2, H1, admit().with_code(MessageCode.REQUEST_ACCEPT), port=2)
        codes = {(dst, m.code) for _, dst, m in out}
        assert (H1, MessageCode.REQUEST_DENIED) in codes
        assert (H2, MessageCode.NOTIFY_CLOSE) in codes
        denied = next(m for _, _, m in out if m.code == MessageCode.REQUEST_DENIED)
        assert denied.reason == DenialReason.SWITCH_ERROR
        assert net.installed() == {"s1": 0, "s2": 0, "s3": 0, "s4": 0}
        assert net.ctl.ledger.channels() == [] and net.ctl.store.all() == []

    asyncio.run(run())


def test_a_switch_that_is_down_denies_at_once_and_holds_nothing() -> None:
    async def run() -> None:
        net = Net()
        net.fab.down.add("s3")
        out = await net.send(FORWARD, H1, H2, admit())
        assert [(switch, dst, m.code) for switch, dst, m in out] == [("s1", H1, MessageCode.REQUEST_DENIED)]
        assert out[0][2].reason == DenialReason.SWITCH_ERROR
        assert net.ctl.ledger.get(ChannelKey(H1, 7)) is None and net.fab.writes == 0

    asyncio.run(run())


def test_a_request_to_itself_is_invalid() -> None:
    async def run() -> None:
        net = Net()
        to_itself = replace(admit(), destination=H1)
        out = await net.send(["s1"], H1, H1, to_itself)
        assert [(dst, m.code) for _, dst, m in out] == [(H1, MessageCode.REQUEST_DENIED)]
        assert out[0][2].reason == DenialReason.INVALID_REQUEST
        assert net.ctl.ledger.get(ChannelKey(H1, 7)) is None

    asyncio.run(run())


def test_notify_close_tears_down_only_from_an_end() -> None:
    async def run() -> None:
        net = Net()
        await establish(net, admit())
        close = admit().with_code(MessageCode.NOTIFY_CLOSE)
        await net.send(["s1"], H3, H2, close)  # h3 is not an end of the channel
        assert net.installed()["s2"] == 1
        out = await net.send(FORWARD, H1, H2, close)
        assert [m.code for _, _, m in out] == [MessageCode.NOTIFY_CLOSE] * 4
        assert net.installed() == {"s1": 0, "s2": 0, "s3": 0, "s4": 0}
        assert net.ctl.store.all() == []
        # RECVD_CLOSE travels back untouched
        back = await net.send(FORWARD[::-1], H2, H1, close.with_code(MessageCode.RECVD_CLOSE), port=2)
        assert len(back) == 4

    asyncio.run(run())


def test_request_status_gets_a_report_with_records() -> None:
    async def run() -> None:
        net = Net()
        await establish(net, admit())
        ask = ReservationMessage(MessageCode.REQUEST_STATUS, 0, H1, "0.0.0.0")
        out = await net.send(["s2"], H1, "10.0.1.1", ask)
        assert len(out) == 1
        switch, dst, report = out[0]
        assert (switch, dst, report.code) == ("s2", H1, MessageCode.REPORT_STATUS)
        status = decode_status(report.payload)
        assert status.device_id == 2
        queues = [r for r in status.records if isinstance(r, QueueRecord)]
        chans = [r for r in status.records if isinstance(r, ChannelRecord)]
        assert queues[0].port == 2 and queues[0].priority == 6 and queues[0].channels == 1
        assert queues[0].max_depth_packets == 3  # from the (fake) telemetry registers
        assert chans[0].context == 7 and chans[0].destination == H2

    asyncio.run(run())


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00" * 13,
        build_frame(H1, H2, b"\xfd\x01" + b"\x00" * 20),
        build_frame(H1, H2, admit().encode()[:-1] + b"\x01"),  # bad checksum
        build_frame(H1, H2, admit().encode(), ttl=1),
    ],
)
def test_malformed_packet_in_is_counted_and_dropped(frame: bytes) -> None:
    async def run() -> None:
        net = Net()
        await net.ctl.handler.handle_packet_in("s1", 1, frame)
        assert net.fab.sent == []
        assert net.ctl.handler.counters["malformed"] + net.ctl.handler.counters["ttl_expired"] == 1
        await establish(net, admit())  # and the controller carries on

    asyncio.run(run())


def test_an_initiator_cannot_hold_without_limit() -> None:
    async def run() -> None:
        net = Net()
        for context in range(16):
            out = await net.send(["s1"], H1, H2, admit(context=context, rate=1000, burst=1500))
            assert out[0][2].code == MessageCode.REQUEST_ADMIT
        out = await net.send(["s1"], H1, H2, admit(context=99, rate=1000, burst=1500))
        assert out[0][2].code == MessageCode.REQUEST_DENIED
        assert out[0][2].reason == DenialReason.HOLD_LIMIT
        # a denial from the destination frees one
        no = admit(context=3, rate=1000, burst=1500).with_code(MessageCode.REQUEST_DENIED)
        await net.send(["s4"], H2, H1, no, port=2)
        out = await net.send(["s1"], H1, H2, admit(context=99, rate=1000, burst=1500))
        assert out[0][2].code == MessageCode.REQUEST_ADMIT

    asyncio.run(run())


def moving_window(context: int = 30, **changes: int) -> ReservationMessage:
    """Tenet's (Xmin, Xave, I, Smax): 1,500-byte packets at least 2 ms apart, one per 12 ms on
    average over any 120 ms (125,000 B/s)."""
    policer = Policer(MOVING_WINDOW, xmin_us=2000, xave_us=12_000, interval_us=120_000)
    return replace(admit(context=context, rate=0, burst=0), policer=replace(policer, **changes))


def test_moving_window_in_band_polices_at_the_first_hop() -> None:
    """The request carries its policer in the trailer; admission takes the window's arrival
    envelope (ρ = 10·1,500 B / 120 ms, σ = 10·Smax − ρ·9·Xmin = 12,750); the first hop
    gets the window, the later hops a meter of that envelope with the burst grown."""

    async def run() -> None:
        net = Net()
        accepted = await establish(net, moving_window())
        assert accepted.policer == moving_window().policer  # echoed with the allocation
        assert (accepted.rate, accepted.burst) == (125_000, 12_750)
        rec = net.ctl.service.get(ChannelKey(H1, 30))
        assert rec is not None and rec.allocation.requested.policer.kind == MOVING_WINDOW
        first = net.fab.entries["s1"][rec.selector]
        assert first.window == MovingWindowEntry(
            2000, 120_000, last_slot=9, quantum=1, smax=1514, tolerance_us=0, tag=installation_tag(rec)
        )
        later = net.fab.entries["s2"][rec.selector]
        assert later.window is None and later.cir == -(-125_000 * 1514 // 1500)
        assert later.cburst > -(-12_750 * 1514 // 1500)  # grown by ρ·d over s1

    asyncio.run(run())


def test_misconfigured_window_is_denied_as_invalid() -> None:
    async def run() -> None:
        net = Net()
        out = await net.send(FORWARD, H1, H2, moving_window(xmin_us=20_000))  # Xmin > Xave
        assert len(out) == 1
        assert out[0][2].code == MessageCode.REQUEST_DENIED
        assert out[0][2].reason == DenialReason.INVALID_REQUEST
        assert out[0][2].policer.xmin_us == 20_000  # the denial echoes the request
        assert net.ctl.ledger.channels() == []

    asyncio.run(run())


@pytest.mark.parametrize(
    ("established", "again"),
    [
        (admit(), admit(rate=5_000)),
        (moving_window(), moving_window(xave_us=6000)),
    ],
    ids=["another-envelope", "another-policer"],
)
def test_same_context_for_a_different_channel_is_a_conflict(
    established: ReservationMessage, again: ReservationMessage
) -> None:
    async def run() -> None:
        net = Net()
        await establish(net, established)
        out = await net.send(FORWARD, H1, H2, again)
        assert out[0][2].code == MessageCode.REQUEST_DENIED
        assert out[0][2].reason == DenialReason.CONTEXT_CONFLICT

    asyncio.run(run())


# ---- across a change of controller (issue 11): holds live in the store ------------------------


def test_a_hold_survives_its_controller_and_the_next_installs_it(pg_dsn: str) -> None:
    """A REQUEST_ADMIT held by one controller (which then goes away) is accepted through the
    next one, which installs exactly what was held: the hold is in the store, not in a process."""

    async def run() -> None:
        first = Net(store=pg_dsn)
        out = await first.send(FORWARD, H1, H2, admit())
        assert [m.code for _, _, m in out] == [MessageCode.REQUEST_ADMIT] * 4
        held = first.ctl.store.hold(ChannelKey(H1, 7))
        assert held is not None
        second = Net(store=pg_dsn)  # the next primary: it read the hold from the store
        assert second.ctl.service.get_hold(ChannelKey(H1, 7)) == held
        back = await second.send(
            FORWARD[::-1], H2, H1, admit().with_code(MessageCode.REQUEST_ACCEPT, hops=0), port=2
        )
        assert [m.code for _, _, m in back] == [MessageCode.REQUEST_ACCEPT] * 4
        record = second.ctl.service.get(ChannelKey(H1, 7))
        assert record is not None and record.allocation == held.allocation
        assert second.installed() == {"s1": 1, "s2": 1, "s3": 1, "s4": 1}
        assert second.ctl.store.hold(ChannelKey(H1, 7)) is None

    asyncio.run(run())


def test_a_hold_that_expired_with_its_controller_frees_its_capacity(pg_dsn: str) -> None:
    """A hold whose deadline passed while its controller was gone is released by the next one:
    its capacity goes to another channel, and its late REQUEST_ACCEPT is then refused."""

    async def run() -> None:
        cfg = chain_config(4, rate_bps=8_000_000)  # 900,000 B/s reservable per port
        short = cfg.model_copy(update={"protocol": cfg.protocol.model_copy(update={"hold_seconds": 0.3})})
        first = Net(short, store=pg_dsn)
        await first.send(FORWARD, H1, H2, admit(rate=800_000))
        assert first.ctl.store.hold(ChannelKey(H1, 7)) is not None
        await asyncio.sleep(0.4)
        second = Net(short, store=pg_dsn)
        # the capacity the expired hold had is admitted to a channel of its own
        other = await second.send(FORWARD, H1, H2, admit(context=8, rate=800_000))
        assert other[-1][2].code == MessageCode.REQUEST_ADMIT
        assert second.ctl.store.hold(ChannelKey(H1, 7)) is None
        back = await second.send(
            FORWARD[::-1], H2, H1, admit(rate=800_000).with_code(MessageCode.REQUEST_ACCEPT, hops=0), port=2
        )
        assert back[0][2].code == MessageCode.REQUEST_DENIED
        assert second.ctl.service.get(ChannelKey(H1, 7)) is None and second.installed()["s1"] == 0

    asyncio.run(run())


def test_the_initiator_is_told_when_its_channel_is_down_and_up_again() -> None:
    """A restoration's word to an in-band initiator (restoration.py): NOTIFY_CLOSE with
    PATH_DOWN from its first router, REQUEST_ACCEPT with the bound when a path carries the
    channel again; the initiator's RECVD_CLOSE to that router ends there."""

    async def run() -> None:
        net = Net()
        await establish(net, admit())
        record = net.ctl.service.get(ChannelKey(H1, 7))
        assert record is not None
        router = net.ctl.topology.router_ip("s1")
        assert router is not None
        for up, code in ((False, MessageCode.NOTIFY_CLOSE), (True, MessageCode.REQUEST_ACCEPT)):
            before = len(net.fab.sent)
            await net.ctl.handler.tell_initiator(record, up)
            ((switch, frame),) = net.fab.sent[before:]
            told = parse_frame(frame)
            msg = decode(told.icmp)
            assert (switch, told.src, told.dst, msg.code, msg.context) == ("s1", router, H1, code, 7)
            assert msg.reason == (0 if up else DenialReason.PATH_DOWN)
            assert msg.delay_us == (record.allocation.worst_case_delay_us if up else 0)
        answer = admit().with_code(MessageCode.RECVD_CLOSE)
        assert await net.send(["s1"], H1, router, answer) == []
        assert net.ctl.handler.counters["recvd_close_here"] == 1

    asyncio.run(run())
