"""switches.SwitchBatcher without a switch: what concurrent callers submit goes out together,
in order, and drained() waits for what was submitted before it only."""

from __future__ import annotations

import asyncio
from typing import Any

from finsy.proto import p4r

from terrapin.switches import SwitchBatcher


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


def test_writes_submitted_together_or_while_one_is_in_flight_share_a_request() -> None:
    async def scenario() -> None:
        switch = HeldSwitch()
        batcher = SwitchBatcher(lambda: switch)  # type: ignore[arg-type, return-value]
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

    run(scenario)


def test_drained_waits_for_what_was_submitted_before_it_only() -> None:
    async def scenario() -> None:
        switch = HeldSwitch()
        batcher = SwitchBatcher(lambda: switch)  # type: ignore[arg-type, return-value]
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

    run(scenario)


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
