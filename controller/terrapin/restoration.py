"""Restoration: keeping channels' promises across a trunk or a switch that goes down
(docs/controller.md, "Trunks").

When the set of down trunks changes (links.py says so), the routes are recomputed around them
(Topology.set_down), and then, in priority order and age within a priority:

- every active channel whose path crosses a dead trunk is admitted again on the path its
  destination's route takes now, with the full admission test and its own capacity counted once
  where the two paths share hops (ReservationService.reroute), and moved there; or, if no path
  admits it, marked **down**, holding nothing, its in-band initiator told (NOTIFY_CLOSE,
  PATH_DOWN);
- a channel whose request asked to be closed rather than kept down (REST `on_path_down: close`,
  the protocol's flag bit 3) is closed instead, its in-band initiator told the same;
- every down channel is tried again the same way (a trunk came back), and its in-band initiator
  told when it is up (REQUEST_ACCEPT with its new bound).

A down channel holds nothing, so the capacity it needs may be taken by new channels before its
path comes back. It is also tried again whenever capacity is given back (a channel closed, a hold
released or expired: capacity_freed), at most once per RETRY_DOWN_EVERY_S: found by `make chaos`
(seed 7, 30 minutes on BMv2), a 1+1 channel downed by a switch's one-second kill stayed down the
last 400 s of the run while the workload's closes freed capacity a hundred times, because it was
tried again only when a trunk changed, and new requests took what each close freed.

Each move is one store transaction, so the ledger never holds more than a port can keep and a
replica that takes over mid-way finds every channel on one path. Then the switches are made to
match the store (their reconciliation: routes, channel entries and pins), the switches of the
new paths first, those the moved channels left last: make before break. A channel that stays
where it is when a trunk comes back (its path is admitted and carries it: no flapping) is
pinned where its path now leaves its destination's route, which returns to the shortest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, overload

from terrapin.admission.model import ChannelKey, PortId
from terrapin.paths import Topology, Trunk
from terrapin.protection import whole_paths
from terrapin.reservations import ReservationService
from terrapin.store import ACTIVE, DOWN, Reservation

LOG = logging.getLogger("terrapin.restoration")


class Switches(Protocol):
    def is_ready(self, name: str) -> bool: ...

    async def reconcile(self, name: str) -> object: ...


@dataclass(frozen=True)
class Change:
    """What one restoration did to one reservation."""

    reservation_id: int
    channel: str
    before: tuple[str, ...]  # its path's ports (empty: it was down)
    after: tuple[str, ...]  # (empty: it is down, or closed)
    note: str  # why it is down or closed, or empty
    priority: int
    closed: bool = False  # no path admits it, and its request asked to be closed then
    # 1+1: it ran on its whole path meanwhile (docs/controller.md "Protection"), lost nothing.
    protected: bool = False

    @property
    def kind(self) -> Literal["moved", "down", "restored", "closed"]:
        if self.closed:
            return "closed"
        if not self.after:
            return "down"
        return "restored" if not self.before else "moved"

    def describe(self) -> str:
        if self.kind in ("down", "closed"):
            return f"{self.kind}: {self.note}"
        was = " > ".join(self.before) or "down"
        return f"{self.kind}: {was} => {' > '.join(self.after)}"


@dataclass
class Report:
    """One restoration: the trunks down, what moved, and how long it took."""

    down: list[str]
    started_at: float  # Unix time
    changes: list[Change] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)  # reconciled, in order
    errors: dict[str, str] = field(default_factory=dict)  # switch: why its reconciliation failed
    store_s: float = 0.0  # admitting and recording
    switches_s: float = 0.0  # writing the switches

    @property
    def finished_at(self) -> float:
        return self.started_at + self.store_s + self.switches_s

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)


Notify = Callable[[Reservation, bool], Awaitable[None]]  # (the reservation, up): its initiator told

# Down channels are tried again after capacity was freed at most this often (each try is a store
# transaction per down channel).
RETRY_DOWN_EVERY_S = 1.0


class Restoration:
    """Restores channels whenever the down trunks change. trunks_changed() returns at once: the
    work is done by one task, on the newest set of down trunks (changes that come meanwhile are
    taken together), so the link watch goes on probing."""

    def __init__(
        self,
        service: ReservationService,
        topology: Topology,
        switches: Switches,
        notify: Notify | None = None,
        on_report: Callable[[Report], None] | None = None,
    ) -> None:
        self._service = service
        self._topology = topology
        self._switches = switches
        self._notify = notify
        self._on_report = on_report
        self._wanted: frozenset[Trunk] | None = None
        self._retry_down = False  # capacity was freed since the down channels were last tried
        self._last_retry = float("-inf")
        self.waiting = 0  # channels down after the last restoration (found at start: unknown)
        self._task: asyncio.Task[None] | None = None
        self.last: Report | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    def trunks_changed(self, down: frozenset[Trunk]) -> None:
        self._wanted = down
        self._start()

    def capacity_freed(self) -> None:
        """Capacity was given back: the down channels are tried again (module doc), unless none
        was down after the last restoration."""
        if self.waiting:
            self._retry_down = True
            self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self.idle.clear()
            self._task = asyncio.create_task(self._work(), name="restoration")

    async def _work(self) -> None:
        try:
            while self._wanted is not None or self._retry_down:
                if self._wanted is not None:
                    down, self._wanted = self._wanted, None
                    self._retry_down = False  # a restoration tries every down channel
                    work: Awaitable[Report | None] = self.restore(down)
                else:
                    wait = self._last_retry + RETRY_DOWN_EVERY_S - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                        continue  # a trunk change meanwhile comes first
                    self._retry_down = False
                    self._last_retry = time.monotonic()
                    work = self.restore(self._topology.down, only_down=True)
                try:
                    report = await work
                except asyncio.CancelledError:
                    raise
                except Exception:  # the next change, or the next takeover, tries again
                    trunks = ", ".join(map(str, sorted(self._topology.down))) or "nothing"
                    LOG.exception("restoration around %s failed", trunks)
                    continue
                if report is None:
                    continue
                self.last = report
                if self._on_report is not None:
                    self._on_report(report)
        finally:
            self.idle.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @staticmethod
    def _kept_a_path(before: Reservation, dead: set[PortId]) -> bool:
        """A protected channel one of whose paths had no dead port: it lost nothing meanwhile."""
        if before.state != ACTIVE or not before.allocation.protected:
            return False
        return bool(whole_paths(before.allocation, dead))

    @overload
    async def restore(self, down: frozenset[Trunk]) -> Report: ...
    @overload
    async def restore(self, down: frozenset[Trunk], only_down: bool) -> Report | None: ...

    async def restore(self, down: frozenset[Trunk], only_down: bool = False) -> Report | None:
        """Route around `down`, move or down every channel that must, retry every down one, and
        make the switches match (see the module's doc). `only_down`: the trunks are as they
        were, only the down channels are tried (capacity was freed), and the switches are
        written only if one came back (None if none did)."""
        report = Report(sorted(map(str, down)), time.time())
        started = time.monotonic()
        if not only_down:
            self._topology.set_down(down)
        dead = {end for trunk in down for end in trunk.ends}

        def crosses_dead(r: Reservation) -> bool:
            return any(hop.port in dead for hop in r.allocation.all_hops)

        due = [
            r
            for r in self._service.list()
            if r.state == DOWN or (not only_down and r.state == ACTIVE and crosses_dead(r))
        ]
        # Age within a priority, the older first: by id where the clock gave two the same instant.
        due.sort(key=lambda r: (-r.allocation.requested.priority, r.created_at, r.reservation_id))
        changed: dict[ChannelKey, tuple[Reservation, Reservation | None]] = {}
        while due:
            # A channel that left a path (moved, down or closed) may have freed what an earlier
            # one was refused for: the down ones are tried again until a round frees nothing.
            freed = False
            for record in due:
                result = await self._service.reroute(record.key)
                if result is None:
                    continue
                before, after = result
                freed = freed or before.state == ACTIVE
                first = changed.get(record.key, result)[0]
                changed[record.key] = (first, after)
            due = [a for _, a in changed.values() if a is not None and a.state == DOWN] if freed else []
        moved = [
            (b, a) for b, a in changed.values() if a is None or b.state != a.state or _ports(b) != _ports(a)
        ]
        report.changes = [_change(before, after, self._kept_a_path(before, dead)) for before, after in moved]
        report.store_s = time.monotonic() - started
        self.waiting = sum(1 for r in self._service.list() if r.state == DOWN)
        if only_down and not moved:
            return None
        written = time.monotonic()
        await self._reconcile(moved, report, everyone=not only_down)
        report.switches_s = time.monotonic() - written
        for before, after in moved:
            LOG.warning(
                "reservation %d (%s): %s",
                before.reservation_id,
                before.key,
                _change(before, after, False).describe(),
            )
            up = after is not None and after.state != DOWN
            if self._notify is not None and before.origin == "inband" and up == (before.state == DOWN):
                try:
                    await self._notify(after or before, up)
                except Exception:  # a host not told now is told by its status requests
                    LOG.exception("telling the initiator of %s", before.key)
        return report

    async def _reconcile(
        self, moved: Sequence[tuple[Reservation, Reservation | None]], report: Report, everyone: bool = True
    ) -> None:
        """Every ready switch made to match the store: the switches only the new paths cross
        first, then those both cross, then the rest (the old paths' own last); the switches of
        one group at once. Not `everyone`: only the switches the new paths cross (down channels
        restored, no trunk changed: nothing else has to change)."""
        new: set[str] = set()
        both: set[str] = set()
        for before, after in moved:
            old = _switches(before)
            for name in _switches(after):
                (both if name in old else new).add(name)
        rest = set(self._topology.switch_names) - new - both
        # Each group's switches at once (their writes are independent), the groups in order.
        for group in (new - both, both, rest) if everyone else (new - both, both):
            names = sorted(n for n in group if self._switches.is_ready(n))
            results = await asyncio.gather(
                *(self._switches.reconcile(n) for n in names), return_exceptions=True
            )
            for name, result in zip(names, results, strict=True):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                if isinstance(result, BaseException):  # reconciled again when it reconnects
                    report.errors[name] = str(result) or type(result).__name__
                    LOG.warning("restoration: switch %s not reconciled: %s", name, report.errors[name])
                else:
                    report.switches.append(name)


def _switches(record: Reservation | None) -> Collection[str]:
    if record is None or record.state == DOWN:
        return ()
    return {hop.port.switch for hop in record.allocation.all_hops}


def _ports(record: Reservation | None) -> tuple[str, ...]:
    return (
        ()
        if record is None or record.state == DOWN
        else tuple(str(hop.port) for hop in record.allocation.all_hops)
    )


def _change(before: Reservation, after: Reservation | None, kept_a_path: bool) -> Change:
    note = after.note if after is not None else "no path admits it, and its request asked to be closed then"
    return Change(
        before.reservation_id,
        str(before.key),
        _ports(before),
        _ports(after),
        note,
        before.allocation.requested.priority,
        closed=after is None,
        protected=kept_a_path,
    )
