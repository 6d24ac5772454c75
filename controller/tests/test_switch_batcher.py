"""switches.SwitchBatcher without a switch: what concurrent callers submit goes out together,
in order, and drained() waits for what was submitted before it only; every caller is answered
even when the switch's connection closes under a request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
from finsy.proto import p4r
from grpc import aio

from terrapin.switches.batcher import SwitchBatcher, WriteGate
from terrapin.switches.connection import SwitchUnavailable


class HeldSwitch:
    """Records each WriteRequest's updates and answers each only when released."""

    def __init__(self) -> None:
        self.requests: list[list[int]] = []
        self.release: list[asyncio.Event] = []

    async def write(self, updates: list[p4r.Update], strict: bool = True) -> None:
        self.requests.append([u.entity.counter_entry.index.index for u in updates])
        released = asyncio.Event()
        self.release.append(released)
        await released.wait()


def update(n: int) -> p4r.Update:
    """An update named by n (the counter index it carries)."""
    entry = p4r.CounterEntry(counter_id=1, index=p4r.Index(index=n))
    return p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(counter_entry=entry))


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def run(scenario: Any) -> None:
    asyncio.run(scenario())


def run_held(scenario: Callable[[HeldSwitch, SwitchBatcher], Awaitable[None]]) -> None:
    """Runs a scenario against a batcher whose switch answers each request only when released."""

    async def held() -> None:
        switch = HeldSwitch()
        await scenario(switch, SwitchBatcher(lambda: switch))  # type: ignore[arg-type, return-value]

    asyncio.run(held())


def test_writes_submitted_together_or_while_one_is_in_flight_share_a_request() -> None:
    async def scenario(switch: HeldSwitch, batcher: SwitchBatcher) -> None:
        first = [batcher.submit([update(1)]), batcher.submit([update(2), update(3)])]
        await turns()
        assert switch.requests == [[1, 2, 3]]  # one turn of the loop: one WriteRequest
        later = [batcher.submit([update(4)]), batcher.submit([update(5)])]
        await turns()
        assert switch.requests == [[1, 2, 3]]  # held behind the one in flight
        switch.release[0].set()
        await asyncio.wait_for(asyncio.gather(*first), 1)
        await turns()
        assert switch.requests == [[1, 2, 3], [4, 5]]
        assert not any(f.done() for f in later)
        switch.release[1].set()
        await asyncio.wait_for(asyncio.gather(*later), 1)

    run_held(scenario)


def test_drained_waits_for_what_was_submitted_before_it_only() -> None:
    async def scenario(switch: HeldSwitch, batcher: SwitchBatcher) -> None:
        early = batcher.submit([update(1)])
        await turns()
        drained = asyncio.ensure_future(batcher.drained())
        await asyncio.sleep(0)  # drained() has looked at what is pending
        late = batcher.submit([update(2)])  # after drained() was asked: not waited for
        await turns()
        assert not drained.done()
        switch.release[0].set()
        await asyncio.wait_for(drained, 1)
        assert early.done() and not late.done()
        await turns()
        switch.release[1].set()
        await asyncio.wait_for(late, 1)
        await asyncio.wait_for(batcher.drained(), 1)  # nothing pending: at once

    run_held(scenario)


def test_a_switch_gone_mid_write_fails_every_caller_of_the_batch() -> None:
    class GoneSwitch:
        async def write(self, updates: list[p4r.Update], strict: bool = True) -> None:
            raise ConnectionError("stream closed")

    async def scenario() -> None:
        batcher = SwitchBatcher(lambda: GoneSwitch())  # type: ignore[arg-type, return-value]
        futures = [batcher.submit([update(1)]), batcher.submit([update(2)])]
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results), results

    run(scenario)


class ClosingChannelSwitch:
    """Each write is a real grpc.aio call to a server that never answers in time; close() closes
    the client channel under it, as finsy does when a switch's stream ends. grpc.aio then ends the
    call with CancelledError, although nobody cancelled the caller's task."""

    def __init__(self, channel: aio.Channel) -> None:
        self._call = channel.unary_unary("/test.Slow/Write")
        self.calls = 0

    async def write(self, updates: list[p4r.Update], strict: bool = True) -> None:
        self.calls += 1
        await self._call(b"", timeout=30)

    @property
    def device_id(self) -> int:
        return 1


@pytest.fixture
def slow_server_port() -> Any:
    """A loopback gRPC server whose only method sleeps for a minute."""

    async def slow(_request: bytes, _context: Any) -> bytes:
        await asyncio.sleep(60)
        return b""

    async def start() -> tuple[aio.Server, int]:
        server = aio.server()
        handler = grpc.method_handlers_generic_handler(
            "test.Slow", {"Write": grpc.unary_unary_rpc_method_handler(slow)}
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    return start


def test_a_connection_closed_under_a_write_answers_its_callers_and_frees_the_gate(
    slow_server_port: Any,
) -> None:
    """The failover drill's hang (a switch killed mid-burst): the writers of the batch in flight
    held the switch's WriteGate, never answered, so its reconciliation on reconnect waited for
    ever."""

    async def scenario() -> None:
        server, port = await slow_server_port()
        channel = aio.insecure_channel(f"127.0.0.1:{port}")
        switch = ClosingChannelSwitch(channel)
        batcher = SwitchBatcher(lambda: switch)  # type: ignore[arg-type, return-value]
        gate = WriteGate()

        async def install(n: int) -> None:
            async with gate.write():
                await batcher.write([update(n)])

        writers = [asyncio.ensure_future(install(n)) for n in (1, 2)]
        try:
            while switch.calls == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # the call is on the wire
            await channel.close()
            results = await asyncio.wait_for(asyncio.gather(*writers, return_exceptions=True), 5)
            assert all(isinstance(r, SwitchUnavailable) for r in results), results
            async with asyncio.timeout(5):
                async with gate.exclusive():  # what a reconciliation takes
                    pass
        finally:
            for writer in writers:
                writer.cancel()
            await channel.close()
            await server.stop(0)

    run(scenario)


def test_a_cancelled_batcher_task_still_answers_its_callers() -> None:
    async def scenario(switch: HeldSwitch, batcher: SwitchBatcher) -> None:
        sent = batcher.submit([update(1)])
        await turns()
        queued = batcher.submit([update(2)])
        for task in list(batcher._tasks):
            task.cancel()
        results = await asyncio.wait_for(asyncio.gather(sent, queued, return_exceptions=True), 1)
        assert all(isinstance(r, SwitchUnavailable) for r in results), results
        after = batcher.submit([update(3)])  # the batcher still sends
        await turns()
        assert switch.requests[-1] == [3]
        switch.release[-1].set()
        await asyncio.wait_for(after, 1)

    run_held(scenario)


def test_reads_of_a_switch_that_is_not_connected_fail_rather_than_wait() -> None:
    def not_connected() -> Any:
        raise SwitchUnavailable("switch s1 is not connected")

    async def scenario() -> None:
        batcher = SwitchBatcher(not_connected)
        entity = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=1))
        results = await asyncio.wait_for(
            asyncio.gather(batcher.read([entity]), batcher.read([entity]), return_exceptions=True), 1
        )
        assert all(isinstance(r, SwitchUnavailable) for r in results), results

    run(scenario)


def test_a_connection_closed_under_a_read_fails_its_readers() -> None:
    class Client:
        def request_iter(self, _request: p4r.ReadRequest) -> AsyncIterator[p4r.ReadResponse]:
            async def replies() -> AsyncIterator[p4r.ReadResponse]:
                raise asyncio.CancelledError  # as grpc.aio ends a call whose channel closed
                yield p4r.ReadResponse()

            return replies()

    class Switch:
        name = "s1"
        device_id = 1
        _p4client = Client()

    async def scenario() -> None:
        batcher = SwitchBatcher(lambda: Switch())  # type: ignore[arg-type, return-value]
        entity = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=1))
        results = await asyncio.wait_for(asyncio.gather(batcher.read([entity]), return_exceptions=True), 1)
        assert isinstance(results[0], SwitchUnavailable), results

    run(scenario)


def test_the_fabrics_calls_tell_a_lost_stream_from_a_cancelled_caller() -> None:
    """What SwitchFabric's switch calls are wrapped in: the monitor's poll loop, for one, must not
    end because a switch's channel closed under its read; but cancelling a caller still cancels."""
    from terrapin.switches.connection import lost_stream_is_unavailable

    started = asyncio.Event()

    @lost_stream_is_unavailable
    async def read(closes: bool) -> int:
        started.set()
        if closes:
            raise asyncio.CancelledError  # grpc.aio, its channel closed
        await asyncio.sleep(60)
        return 0

    async def scenario() -> None:
        with pytest.raises(SwitchUnavailable):
            await read(True)
        waiting = asyncio.ensure_future(read(False))
        await started.wait()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    run(scenario)
