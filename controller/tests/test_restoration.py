"""Restoration (terrapin/restoration.py, docs/controller.md "Trunks") on a ring of four switches
with the switches faked: a channel whose trunk goes down is admitted again on the other way
round, or marked down when nothing admits it; down channels come back with the trunk; a moved
channel stays where it is and is pinned; nothing is ever over-admitted; the switches are written
new hops first. And a property test over random meshes, loads and cuts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fakes import FakeFabric, chain_config, ring_config
from hypothesis import given, settings
from hypothesis import strategies as st

from terrapin.admission import AdmissionLedger, Allocation, ChannelEnvelope, ChannelKey, Denial, PortId
from terrapin.channel_requests import ChannelRequest
from terrapin.config import Config
from terrapin.constants import CHANNEL_IN_HOST
from terrapin.main import Controller
from terrapin.monitor.checks import CHANNEL_DOWN, PATH_DOWN
from terrapin.monitor.trunks import path_findings
from terrapin.paths import ChannelSelector, Topology, Trunk
from terrapin.reservations import ReservationService
from terrapin.restoration import Restoration
from terrapin.store import ACTIVE, DOWN, Reservation, ReservationStore

MBIT = 125_000  # bytes/s


class Lab:
    """A ring's controller side: the store, the service, the faked switches, the restoration."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.topology = Topology(config)
        self.store = ReservationStore(":memory:", AdmissionLedger(config.port_models()))
        assert self.store.ledger is not None
        self.ledger = self.store.ledger
        self.fabric = FakeFabric(self.topology.switch_names)
        self.service = ReservationService(self.ledger, self.topology, self.store, self.fabric)
        self.fabric.desired = self.service.desired_entries
        self.told: list[tuple[int, bool]] = []
        self.restoration = Restoration(self.service, self.topology, self.fabric, notify=self.notify)

    async def notify(self, record: Reservation, up: bool) -> None:
        self.told.append((record.reservation_id, up))

    async def reserve(
        self, src: int, dst: int, rate: int, *, context: int, origin: str = "rest", close: bool = False
    ) -> Reservation:
        request = ChannelRequest(
            ChannelKey(f"10.0.{src}.2", context),
            ChannelSelector(f"10.0.{src}.2", f"10.0.{dst}.2", 17, context),
            ChannelEnvelope(5, rate, 6000, 1500),
            origin=origin,
            close_when_down=close,
        )
        made = await self.service.create(request)
        assert isinstance(made, Reservation), made
        return made

    def trunk(self, a: str, b: str) -> Trunk:
        return next(t for t in self.topology.trunks if {t.a.switch, t.b.switch} == {a, b})

    def record(self, made: Reservation) -> Reservation:
        got = self.store.get(made.key)
        assert got is not None
        return got


def ports(record: Reservation) -> list[str]:
    return [str(hop.port) for hop in record.allocation.hops]


def on_switches(lab: Lab, made: Reservation) -> set[str]:
    return {name for name, held in lab.fabric.entries.items() if made.selector in held}


def test_a_channel_whose_trunk_goes_down_moves_the_other_way_round() -> None:
    """h1 → h3 goes s1 > s2 > s3; with s1-s2 down, s1 > s4 > s3: admitted there, written there
    (s4 first: the new path's own switch before the ones it shares), gone from s2."""
    lab = Lab(ring_config())

    async def run() -> None:
        made = await lab.reserve(1, 3, 10 * MBIT, context=1)
        assert ports(made) == ["s1:2", "s2:2", "s3:1"] and on_switches(lab, made) == {"s1", "s2", "s3"}
        assert [e.in_port for e in lab.service.entries(made)] == [CHANNEL_IN_HOST, 3, 3]
        report = await lab.restoration.restore(frozenset({lab.trunk("s1", "s2")}))
        moved = lab.record(made)
        assert moved.state == ACTIVE and ports(moved) == ["s1:3", "s4:3", "s3:1"]
        assert [c.kind for c in report.changes] == ["moved"]
        assert on_switches(lab, made) == {"s1", "s4", "s3"}
        # its entries are keyed by where it enters each switch now: at s3 from s4 (port 2),
        # no longer from s2 (port 3), so what s2's route change sends s3 another way is not
        # admitted there
        assert [(e.switch, e.in_port) for e in lab.service.entries(moved)] == [
            ("s1", CHANNEL_IN_HOST),
            ("s4", 2),
            ("s3", 2),
        ]
        assert lab.fabric.reconciliations[0] == "s4"
        assert set(lab.fabric.reconciliations) == {"s1", "s2", "s3", "s4"}
        # the ledger holds it on the new path only, once
        loads = lab.ledger.loads()
        assert loads[PortId("s1", 2)].admitted_rate == 0 and loads[PortId("s1", 3)].admitted_rate > 0
        assert loads[PortId("s3", 1)].levels[5].channels == 1
        assert lab.told == []  # a REST channel: its owner sees it in the store and /events

    asyncio.run(run())


def test_a_channel_no_path_admits_is_down_holds_nothing_and_comes_back_with_its_trunk() -> None:
    """Three channels h1 → h2 (40, 10 and 20 Mbit/s, s1 > s2) and one h4 → h3 of 30 on s4:3; with
    s1-s2 down the other way round, s1 > s4 > s3 > s2, has room on s4:3 for the two older only
    (90 Mbit/s reservable of 100). They move; the newest is down, its in-band initiator told
    (NOTIFY_CLOSE), its capacity free. With the trunk back it is admitted again and told
    (REQUEST_ACCEPT), and the moved ones stay where they are (no flapping), pinned where their
    path now leaves their destination's route."""
    lab = Lab(ring_config())

    async def run() -> None:
        first = await lab.reserve(1, 2, 40 * MBIT, context=1)
        second = await lab.reserve(1, 2, 10 * MBIT, context=2, origin="inband")
        third = await lab.reserve(1, 2, 20 * MBIT, context=3, origin="inband")
        await lab.reserve(4, 3, 30 * MBIT, context=4)
        cut = lab.trunk("s1", "s2")
        report = await lab.restoration.restore(frozenset({cut}))
        states = {r.key.context: r.state for r in (lab.record(first), lab.record(second), lab.record(third))}
        assert states == {1: ACTIVE, 2: ACTIVE, 3: DOWN}  # in priority, then age: the newest waits
        down = lab.record(third)
        assert "no path admits it" in down.note and "s4:3" in down.note
        assert lab.ledger.get(down.key) is None and on_switches(lab, down) == set()
        assert report.count("moved") == 2 and report.count("down") == 1
        assert lab.told == [(third.reservation_id, False)]
        findings = path_findings(lab.service.list(), lab.topology)
        assert [(f.kind, f.reservation_id) for f in findings] == [(CHANNEL_DOWN, third.reservation_id)]

        report = await lab.restoration.restore(frozenset())
        back = lab.record(third)
        assert back.state == ACTIVE and ports(back) == ["s1:2", "s2:1"] and back.note == ""
        assert [c.kind for c in report.changes] == ["restored"]
        assert lab.told[-1] == (third.reservation_id, True)
        stayed = lab.record(first)
        assert ports(stayed) == ["s1:3", "s4:3", "s3:3", "s2:1"]  # no flapping
        pins = {e.switch: e.pin for e in lab.service.entries(stayed) if e.pin is not None}
        # h2's route is s1:2 at s1 again, and s4:2 (by s1) at s4: the channel is pinned at both
        assert pins == {"s1": (3, "02:00:00:00:04:02"), "s4": (3, "02:00:00:00:03:02")}
        assert lab.fabric.entries["s4"][stayed.selector].pin == (3, "02:00:00:00:03:02")
        assert path_findings(lab.service.list(), lab.topology) == []

    asyncio.run(run())


def test_a_down_channel_comes_back_when_a_close_frees_capacity_on_its_way_round() -> None:
    """Found by `make chaos SWITCH=bmv2` (seed 7, --duration 1800): a 1+1 channel that a switch's
    one-second kill took down stayed down for the last 400 s of the run, tried again only when a
    trunk changed while the workload's closes freed capacity a hundred times. Here the third
    h1 → h2 channel is down (s1-s2 cut, no room on s4:3); h4 → h3 closes and, with s1-s2 still
    down, the third is admitted the other way round, its initiator told, its new hops written."""
    lab = Lab(ring_config())

    async def run() -> None:
        await lab.reserve(1, 2, 40 * MBIT, context=1)
        await lab.reserve(1, 2, 10 * MBIT, context=2)
        third = await lab.reserve(1, 2, 20 * MBIT, context=3, origin="inband")
        blocker = await lab.reserve(4, 3, 30 * MBIT, context=4)
        lab.service.capacity_freed = lab.restoration.capacity_freed
        cut = lab.trunk("s1", "s2")
        lab.restoration.trunks_changed(frozenset({cut}))
        await lab.restoration.idle.wait()
        await asyncio.sleep(0)
        assert lab.record(third).state == DOWN and lab.restoration.waiting == 1
        lab.fabric.reconciliations.clear()
        await lab.service.close(blocker.key)  # frees 30 Mbit/s on s4:3
        await asyncio.sleep(0)
        await lab.restoration.idle.wait()
        back = lab.record(third)
        assert back.state == ACTIVE and ports(back) == ["s1:3", "s4:3", "s3:3", "s2:1"]
        assert lab.told == [(third.reservation_id, False), (third.reservation_id, True)]
        assert lab.restoration.waiting == 0 and lab.topology.down == frozenset({cut})
        assert sorted(lab.fabric.reconciliations) == ["s1", "s2", "s3", "s4"]  # its new path's
        assert lab.restoration.last is not None
        assert [c.kind for c in lab.restoration.last.changes] == ["restored"]

    asyncio.run(run())


def test_the_monitor_names_a_channel_on_a_dead_trunk_until_it_is_moved() -> None:
    lab = Lab(ring_config())

    async def run() -> None:
        made = await lab.reserve(1, 3, 10 * MBIT, context=1)
        lab.topology.set_down({lab.trunk("s2", "s3")})  # detected, not yet restored
        (finding,) = path_findings(lab.service.list(), lab.topology)
        assert (finding.kind, finding.switch, finding.port) == (PATH_DOWN, "s2", 2)
        assert "s2:2-s3:3" in finding.message
        await lab.restoration.restore(frozenset({lab.trunk("s2", "s3")}))
        assert path_findings(lab.service.list(), lab.topology) == []
        assert lab.record(made).state == ACTIVE

    asyncio.run(run())


def test_a_switch_that_dies_takes_its_trunks_and_its_hosts_channels_with_it() -> None:
    """s2 dead: both its trunks down. h1 → h3 moves round by s4; h1 → h2 has no path (h2 sits on
    s2): down."""
    lab = Lab(ring_config())

    async def run() -> None:
        across = await lab.reserve(1, 3, 10 * MBIT, context=1)
        to_dead = await lab.reserve(1, 2, 10 * MBIT, context=2)
        lab.fabric.down.add("s2")
        report = await lab.restoration.restore(frozenset({lab.trunk("s1", "s2"), lab.trunk("s2", "s3")}))
        assert ports(lab.record(across)) == ["s1:3", "s4:3", "s3:1"]
        gone = lab.record(to_dead)
        assert gone.state == DOWN and gone.note.startswith("no path")
        assert "s2" not in report.switches  # not connected: reconciled when it is back

    asyncio.run(run())


def test_a_restoration_leaves_what_a_path_shares_counted_once() -> None:
    """A channel that fills 85 of 90 reservable Mbit/s of s1:3 (its own path's first hop in the
    other direction) still moves when s1-s2 goes down: the capacity it held on s3:1 is released
    before it is admitted again, where its new path shares the port."""
    lab = Lab(ring_config())

    async def run() -> None:
        big = await lab.reserve(1, 3, 85 * MBIT, context=1)
        await lab.restoration.restore(frozenset({lab.trunk("s1", "s2")}))
        assert lab.record(big).state == ACTIVE and ports(lab.record(big))[-1] == "s3:1"

    asyncio.run(run())


def test_a_channel_that_asked_to_be_closed_is_closed_not_kept_down() -> None:
    """s2 dead, h1 → h2 has no path: the one that asked to be closed then is gone from the store,
    the ledger and every switch, its in-band initiator told; the one that did not is down."""
    lab = Lab(ring_config())

    async def run() -> None:
        closing = await lab.reserve(1, 2, 10 * MBIT, context=1, origin="inband", close=True)
        waiting = await lab.reserve(1, 2, 10 * MBIT, context=2, origin="inband")
        assert lab.record(closing).close_when_down and not lab.record(waiting).close_when_down
        lab.fabric.down.add("s2")
        report = await lab.restoration.restore(frozenset({lab.trunk("s1", "s2"), lab.trunk("s2", "s3")}))
        assert sorted(c.kind for c in report.changes) == ["closed", "down"]
        assert lab.store.get(closing.key) is None and lab.ledger.get(closing.key) is None
        assert lab.record(waiting).state == DOWN
        assert on_switches(lab, closing) == on_switches(lab, waiting) == {"s2"}  # dead: written when back
        assert sorted(lab.told) == [(closing.reservation_id, False), (waiting.reservation_id, False)]

    asyncio.run(run())


def test_a_replica_that_takes_over_mid_restoration_finishes_it(tmp_path: Path) -> None:
    """The primary moves one of three channels off a dead trunk, records it, and dies before
    writing a switch or moving the others. The replica that takes over reads the store (each move
    one transaction: every channel on one path, old or new), reconciles every switch from it, and
    restores around the trunk it finds down: every channel ends on one path, in the store and on
    the switches, or down, and nothing is over-admitted."""
    config = ring_config()
    store_file = tmp_path / "store.sqlite"
    fabric = FakeFabric(Topology(config).switch_names)
    cut = frozenset({next(t for t in Topology(config).trunks if {t.a.switch, t.b.switch} == {"s1", "s2"})})

    def replica() -> tuple[ReservationService, Topology, ReservationStore]:
        topology = Topology(config)
        store = ReservationStore(store_file, AdmissionLedger(config.port_models()))
        assert store.ledger is not None
        service = ReservationService(store.ledger, topology, store, fabric)
        fabric.desired = service.desired_entries
        return service, topology, store

    async def run() -> None:
        first, first_topology, first_store = replica()
        made = []
        for context, (src, dst) in enumerate([(1, 3), (1, 2), (2, 1)], start=1):
            request = ChannelRequest(
                ChannelKey(f"10.0.{src}.2", context),
                ChannelSelector(f"10.0.{src}.2", f"10.0.{dst}.2", 17, context),
                ChannelEnvelope(5, 10 * MBIT, 6000, 1500),
            )
            result = await first.create(request)
            assert isinstance(result, Reservation)
            made.append(result)
        first_topology.set_down(cut)
        moved = await first.reroute(made[0].key)  # recorded; no switch written; then it dies
        assert moved is not None and moved[1] is not None and moved[1].state == ACTIVE
        first_store.close()

        second, second_topology, second_store = replica()
        found = second_store.get(made[0].key)
        assert found is not None and str(found.allocation.hops[0].port) == "s1:3"  # the move, read back
        for name in second_topology.switch_names:  # every takeover reconciles every switch
            await fabric.reconcile(name)
        await Restoration(second, second_topology, fabric).restore(cut)
        records = second_store.all()
        assert len(records) == 3
        dead = {end for t in cut for end in t.ends}
        for record in records:
            where = {hop.port.switch for hop in record.allocation.hops} if record.state == ACTIVE else set()
            assert record.state == DOWN or not {h.port for h in record.allocation.hops} & dead
            assert on_switches_of(fabric, record) == where, record.key
        _recheck(config, list(records), second_topology)

    asyncio.run(run())


def on_switches_of(fabric: FakeFabric, record: Reservation) -> set[str]:
    return {name for name, held in fabric.entries.items() if record.selector in held}


# ---- the property: never over-admitted, never a channel lost that a path could carry ----------


def _recheck(config: Config, records: list[Reservation], topology: Topology) -> None:
    """Every active channel's path avoids the down trunks and fits: re-admitted one by one in
    the same order on a fresh ledger, every one is admitted (nothing is over-admitted); every
    down one has no path that admits it beside the active ones."""
    fresh = AdmissionLedger(config.port_models())
    dead = {end for t in topology.down for end in t.ends}
    active = sorted((r for r in records if r.state == ACTIVE), key=lambda r: r.reservation_id)
    for r in active:
        path = [hop.port for hop in r.allocation.hops]
        assert not set(path) & dead, (r.key, path)
        again = fresh.admit(r.key, path, r.allocation.requested)
        assert isinstance(again, Allocation), f"{r.key} over-admits: {again}"
    # The down ones against what the active ones hold as stored: admission is not commutative
    # (a channel's burst downstream grows with what was admitted ahead of it), so re-admitting
    # them in another order than the restoration's (priority, then age) may leave room the
    # stored allocations do not.
    held = AdmissionLedger(config.port_models())
    for r in active:
        held.restore(r.allocation)
    for r in records:
        if r.state != DOWN:
            continue
        try:
            path = topology.path(r.selector.src, r.selector.dst)
        except Exception:
            continue
        decision = held.evaluate(r.key, path, r.allocation.requested)
        assert isinstance(decision, Denial), f"{r.key} is down though its path admits it"


@given(
    switches=st.integers(3, 6),
    chords=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), max_size=4),
    channels=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 60), st.integers(1, 6)),
        min_size=1,
        max_size=12,
    ),
    cuts=st.lists(st.sets(st.integers(0, 9), max_size=3), min_size=1, max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_restoration_never_over_admits_and_never_strands_a_channel_a_path_could_carry(
    switches: int,
    chords: list[tuple[int, int]],
    channels: list[tuple[int, int, int, int]],
    cuts: list[set[int]],
) -> None:
    """Random meshes (a ring of 3-6 switches with up to four chords), loads and cuts."""
    config = ring_config(switches, chords=chords)
    lab = Lab(config)

    async def run() -> None:
        made = 0
        for context, (src, dst, mbit, priority) in enumerate(channels):
            a, b = src % switches + 1, dst % switches + 1
            if a == b:
                continue
            request = ChannelRequest(
                ChannelKey(f"10.0.{a}.2", context),
                ChannelSelector(f"10.0.{a}.2", f"10.0.{b}.2", 17, context),
                ChannelEnvelope(priority, mbit * MBIT, 6000, 1500),
            )
            if isinstance(await lab.service.create(request), Reservation):
                made += 1
        trunks = lab.topology.trunks
        for cut in cuts:
            down = frozenset(trunks[i % len(trunks)] for i in cut)
            await lab.restoration.restore(down)
            records = list(lab.service.list())
            assert len(records) == made  # none lost from the store
            _recheck(config, records, lab.topology)
            # the switches hold exactly the active channels' hops
            for name in lab.topology.switch_names:
                want = {
                    r.selector
                    for r in records
                    if r.state == ACTIVE and name in {h.port.switch for h in r.allocation.hops}
                }
                assert set(lab.fabric.entries[name]) == want

    asyncio.run(run())


def test_trunks_are_named_by_their_ends() -> None:
    topology = Topology(ring_config(3))
    names = sorted(map(str, topology.trunks))
    assert names == ["s1:2-s2:3", "s1:3-s3:2", "s2:2-s3:3"]
    assert topology.trunk_at(PortId("s2", 3)) == topology.trunk_at(PortId("s1", 2))
    assert topology.trunk_at(PortId("s1", 1)) is None  # a host's port

    assert Topology(chain_config(1)).trunks == ()  # one switch: nothing to watch


def test_a_replica_that_takes_over_routes_as_if_every_trunk_were_up() -> None:
    """Found by `make chaos` (seed 7, --duration 1800, at 1051 s): c0 took over with the routes
    of its own earlier term, which had ended with every trunk judged down; its reconciliation
    of the switches removed every route across a trunk, and the demoted packets of the channels
    then down were dropped for 0.3 s, until its link watch first announced. A takeover starts
    from every trunk up, as the watch does, until the watch says otherwise."""
    class ClaimingFabric(FakeFabric):
        async def claim(self, term: int) -> dict[str, bool]:
            return {name: True for name in self.entries}

    config = ring_config()

    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return ClaimingFabric(topo.switch_names)

    ctl = Controller(config, fabric_factory=factory)
    every = frozenset(ctl.topology.trunks)
    ctl.topology.set_down(every)
    routed_around = ctl.topology.version
    asyncio.run(ctl._promote(7))
    assert ctl.topology.down == frozenset() and ctl.topology.version > routed_around
