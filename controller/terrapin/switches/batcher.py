"""How channel writes reach one switch: side by side, batched, and never during its
reconciliation. WriteGate lets writes run together and a reconciliation alone; SwitchBatcher
sends what concurrent set-ups and tear-downs queue for a switch in one WriteRequest (and reads
in one ReadRequest), answering each caller about its own updates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

import finsy as fy
from finsy.proto import p4r

from terrapin.switches.connection import SwitchUnavailable, lost_stream_is_unavailable, read_raw


class WriteGate:
    """Channel writes to one switch run side by side; its reconciliation runs alone.

    Reconciliation reads what the store wants and what the switch has, then writes the
    difference: a channel removed from the store and the switch meanwhile would be written back
    from its stale reading. So a reconciliation waits for the writes in flight and holds new
    ones until it is done; a removal that waited then finds (and removes) what it wrote."""

    def __init__(self) -> None:
        self._writers = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()
        self._alone = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        while not self._open.is_set():
            await self._open.wait()
        self._writers += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._writers -= 1
            if self._writers == 0:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._alone:
            self._open.clear()
            try:
                await self._idle.wait()
                yield
            finally:
                self._open.set()


class SwitchBatcher:
    """What concurrent set-ups and tear-downs send one switch, sent together.

    Every P4Runtime call costs the controller a few hundred microseconds of Python whatever it
    carries, and a set-up makes two or three per hop. So writes queued for a switch while one
    of its writes is in flight go out together in the next WriteRequest (and reads likewise in
    one ReadRequest). P4Runtime applies a batch's updates one by one and reports each one's
    failure (spec §12.3: CONTINUE_ON_ERROR), so each caller is answered about its own updates
    only. Under light load a batch is one caller's, sent at once."""

    def __init__(self, switch: Callable[[], fy.Switch]) -> None:
        self._switch = switch
        self._writes: list[tuple[list[p4r.Update], bool, asyncio.Future[None]]] = []
        self._reads: list[tuple[list[p4r.Entity], asyncio.Future[list[p4r.Entity]]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._writing = self._reading = False
        self._in_flight: list[tuple[list[p4r.Update], bool, asyncio.Future[None]]] = []

    async def write(self, updates: list[p4r.Update], strict: bool = True) -> None:
        """Apply `updates`; with `strict` False, one that finds nothing to modify or delete is
        no error (an entry already gone)."""
        await self.submit(updates, strict)

    def submit(self, updates: list[p4r.Update], strict: bool = True) -> asyncio.Future[None]:
        """As write(), but queued before this returns: what a caller submits before its next
        await goes out in order with what it submits after, in one batch or the next."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writes.append((updates, strict, future))
        if not self._writing:
            self._writing = True
            self._start(self._send_writes())
        return future

    async def drained(self) -> None:
        """Returns once every write submitted so far has been answered (not those submitted
        meanwhile: under a stream of set-ups the batcher is never idle)."""
        pending = [future for _u, _s, future in self._in_flight + self._writes]
        if pending:
            await asyncio.wait(pending)

    async def read(self, entities: list[p4r.Entity]) -> list[p4r.Entity]:
        """Read `entities`; the answer may also hold what other callers of the batch asked for."""
        future: asyncio.Future[list[p4r.Entity]] = asyncio.get_running_loop().create_future()
        self._reads.append((entities, future))
        if not self._reading:
            self._reading = True
            self._start(self._send_reads())
        return await future

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_writes(self) -> None:
        try:
            # One turn of the loop first: the other hops and set-ups submitted in this turn
            # join the first WriteRequest.
            await asyncio.sleep(0)
            while self._writes:
                batch, self._writes = self._writes, []
                self._in_flight = batch
                updates = [u for mine, _strict, _future in batch for u in mine]
                try:
                    await _write_updates(self._switch(), updates)
                except fy.P4ClientError as exc:
                    _answer_writes(batch, exc)
                except Exception as exc:  # the switch went away: nothing of the batch is known
                    for _mine, _strict, future in batch:
                        _fail(future, exc)
                else:
                    for _mine, _strict, future in batch:
                        if not future.done():
                            future.set_result(None)
        finally:
            self._writing = False
            # Callers left unanswered here (only when this task itself was cancelled) would
            # wait for ever, and hold the switch's WriteGate.
            for _mine, _strict, future in self._in_flight + self._writes:
                _fail(future, SwitchUnavailable("the switch's writes were abandoned"))
            self._in_flight, self._writes = [], []

    async def _send_reads(self) -> None:
        batch: list[tuple[list[p4r.Entity], asyncio.Future[list[p4r.Entity]]]] = []
        try:
            while self._reads:
                batch, self._reads = self._reads, []
                try:
                    sw = self._switch()
                    request = p4r.ReadRequest(device_id=sw.device_id)
                    for entities, _future in batch:
                        request.entities.extend(entities)
                    found = [e for reply in await _collect(read_raw(sw, request)) for e in reply.entities]
                except Exception as exc:
                    for _entities, future in batch:
                        _fail(future, exc)
                    continue
                for _entities, future in batch:
                    if not future.done():
                        future.set_result(found)
        finally:
            self._reading = False
            for _entities, future in batch + self._reads:  # as in _send_writes
                _fail(future, SwitchUnavailable("the switch's reads were abandoned"))
            self._reads = []


class SwitchWriteError(Exception):
    """Updates of a batch the switch refused (the others of the batch were applied); `codes`
    says why, one status per refused update."""

    def __init__(self, message: str, codes: Sequence[fy.GRPCStatusCode] = ()) -> None:
        super().__init__(message)
        self.codes = tuple(codes)


def _answer_writes(
    batch: list[tuple[list[p4r.Update], bool, asyncio.Future[None]]], exc: fy.P4ClientError
) -> None:
    details = exc.details
    if exc.code != fy.GRPCStatusCode.UNKNOWN or not details:
        for _mine, _strict, future in batch:  # the whole WriteRequest was refused
            _fail(future, exc)
        return
    start = 0
    for mine, strict, future in batch:
        failed = [details[i] for i in range(start, start + len(mine)) if i in details]
        start += len(mine)
        if not strict:
            failed = [e for e in failed if e.canonical_code != fy.GRPCStatusCode.NOT_FOUND]
        if failed:
            message = "; ".join(f"{e.canonical_code.name}: {e.message}" for e in failed)
            _fail(future, SwitchWriteError(message, [e.canonical_code for e in failed]))
        elif not future.done():
            future.set_result(None)


def already_done() -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


@lost_stream_is_unavailable
async def _write_updates(sw: fy.Switch, updates: list[p4r.Update]) -> None:
    await sw.write(updates, strict=True)


@lost_stream_is_unavailable
async def _collect(replies: AsyncIterator[p4r.ReadResponse]) -> list[p4r.ReadResponse]:
    return [reply async for reply in replies]


def not_primary(cause: BaseException | None) -> bool:
    """Whether a switch refused a write because this replica is not its primary (P4Runtime
    PERMISSION_DENIED, spec §5.3), for the whole request or for every update of it."""
    if isinstance(cause, fy.P4ClientError):
        return cause.code == fy.GRPCStatusCode.PERMISSION_DENIED
    if isinstance(cause, SwitchWriteError):
        return bool(cause.codes) and all(c == fy.GRPCStatusCode.PERMISSION_DENIED for c in cause.codes)
    return False

