"""1+1 protection (docs/controller.md "Protection"): the disjoint path pairs a protected channel
is admitted on, the admission of both paths together, the entries each switch gets, and the
refusals."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from fakes import chain_config, ring_config
from hypothesis import given, settings
from hypothesis import strategies as st
from test_restoration import Lab

from terrapin.admission import AdmissionLedger, ChannelEnvelope, ChannelKey, Denial
from terrapin.admission.model import PortId
from terrapin.channel_requests import ChannelRequest
from terrapin.constants import DenialReason
from terrapin.monitor.checks import PATH_DOWN
from terrapin.monitor.trunks import moved_findings, path_findings
from terrapin.paths import ChannelSelector, Copy, NoDisjointPaths, Topology
from terrapin.store import ACTIVE, DOWN, Reservation
from terrapin.store.records import allocation_from_json, allocation_to_json

# ---- path pairs -----------------------------------------------------------------------------


def switches_of(path: tuple[PortId, ...]) -> list[str]:
    return [hop.switch for hop in path]


def test_a_ring_gives_both_ways_round_sharing_only_the_ends() -> None:
    topology = Topology(ring_config(4))
    pair = topology.disjoint_paths("10.0.1.2", "10.0.3.2")
    assert pair.disjoint == "node"
    assert {tuple(switches_of(pair.first)), tuple(switches_of(pair.second))} == {
        ("s1", "s2", "s3"),
        ("s1", "s4", "s3"),
    }
    assert pair.first[-1] == pair.second[-1] == PortId("s3", 1)  # the destination's own port


def test_the_shorter_path_comes_first() -> None:
    topology = Topology(ring_config(5))
    pair = topology.disjoint_paths("10.0.1.2", "10.0.2.2")
    assert switches_of(pair.first) == ["s1", "s2"]
    assert switches_of(pair.second) == ["s1", "s5", "s4", "s3", "s2"]


def test_a_line_has_no_pair_and_says_so() -> None:
    topology = Topology(chain_config(4))
    with pytest.raises(NoDisjointPaths, match="no two paths from s1 to s4"):
        topology.disjoint_paths("10.0.1.2", "10.0.2.2")


def test_hosts_on_one_switch_have_one_path() -> None:
    topology = Topology(chain_config(4))
    with pytest.raises(NoDisjointPaths, match="one switch"):
        topology.disjoint_paths("10.0.1.2", "10.0.3.2")


def test_a_trunk_down_is_left_out_and_named() -> None:
    topology = Topology(ring_config(4))
    topology.set_down([next(t for t in topology.trunks if {t.a.switch, t.b.switch} == {"s1", "s2"})])
    with pytest.raises(NoDisjointPaths, match="while s1:2-s2:3 is down"):
        topology.disjoint_paths("10.0.1.2", "10.0.3.2")


def test_the_trap_topology_is_solved_where_shortest_first_fails() -> None:
    """Suurballe's trap: the shortest path s1 > s2 > s3 > s6 uses the middle trunk s2-s3 that
    both disjoint paths need to avoid; removing it first leaves no second path, while the
    minimum-cost pair s1 > s2 > s6 and s1 > s3 > s6 (each via a chord) exists."""
    # ring s1..s6 plus chords s1-s3, s2-s6, s2-s3 is already a ring edge
    topology = Topology(ring_config(6, chords=[(1, 3), (2, 6)]))
    pair = topology.disjoint_paths("10.0.1.2", "10.0.6.2")
    a, b = switches_of(pair.first), switches_of(pair.second)
    assert a[0] == b[0] == "s1" and a[-1] == b[-1] == "s6"
    assert not set(a[1:-1]) & set(b[1:-1])


def test_link_disjoint_when_no_node_disjoint_pair_exists() -> None:
    """Two rings that meet at s3 only (a figure of eight: s1-s2-s3-s1 and s3-s4-s5-s3): from s1 to
    s4 every pair crosses s3, but two paths that share no trunk exist."""
    config = ring_config(5, chords=[(1, 3), (3, 5)])
    topology = Topology(config)
    down = [t for t in topology.trunks if {t.a.switch, t.b.switch} in ({"s1", "s5"},)]
    topology.set_down(down)  # now: s1-s2, s2-s3, s3-s4, s4-s5, s1-s3, s3-s5
    pair = topology.disjoint_paths("10.0.1.2", "10.0.4.2")
    assert pair.disjoint == "link"
    trunks_a = {topology.trunk_at(hop) for hop in pair.first[:-1]}
    trunks_b = {topology.trunk_at(hop) for hop in pair.second[:-1]}
    assert not trunks_a & trunks_b


def test_a_partner_for_a_path_that_is_kept() -> None:
    topology = Topology(ring_config(4, chords=[(1, 3)]))
    keep = (PortId("s1", 4), PortId("s3", 1))  # the chord s1-s3, then h3's port
    pair = topology.disjoint_paths("10.0.1.2", "10.0.3.2", keep=keep)
    assert pair.first == keep
    assert switches_of(pair.second) in (["s1", "s2", "s3"], ["s1", "s4", "s3"])


def _connected_without(arcs: set[frozenset[str]], a: str, b: str, removed: frozenset[str] | None) -> bool:
    seen, todo = {a}, [a]
    while todo:
        here = todo.pop()
        for arc in arcs:
            if arc == removed or here not in arc:
                continue
            (there,) = arc - {here}
            if there not in seen:
                seen.add(there)
                todo.append(there)
    return b in seen


@given(
    switches=st.integers(3, 7),
    chords=st.lists(st.tuples(st.integers(1, 7), st.integers(1, 7)), max_size=5),
    cuts=st.sets(st.integers(0, 12), max_size=3),
)
@settings(max_examples=80, deadline=None)
def test_a_pair_is_found_exactly_when_no_single_trunk_separates_the_ends(
    switches: int, chords: list[tuple[int, int]], cuts: set[int]
) -> None:
    """Menger: two trunk-disjoint paths exist iff no one trunk's loss disconnects the ends. Every
    pair found is trunk-disjoint, loop-free, over trunks that are up, and node-disjoint whenever
    a node-disjoint pair exists (checked by brute force over the switches' removals)."""
    topology = Topology(ring_config(switches, chords=chords))
    trunks = topology.trunks
    topology.set_down({trunks[i % len(trunks)] for i in cuts})
    up = {frozenset((t.a.switch, t.b.switch)) for t in trunks if t not in topology.down}
    for a, b in itertools.permutations(range(1, switches + 1), 2):
        src, dst, sa, sb = f"10.0.{a}.2", f"10.0.{b}.2", f"s{a}", f"s{b}"
        separable = not _connected_without(up, sa, sb, None) or any(
            not _connected_without(up, sa, sb, arc) for arc in up
        )
        try:
            pair = topology.disjoint_paths(src, dst)
        except NoDisjointPaths:
            assert separable, (a, b)
            continue
        assert not separable, (a, b)
        used: list[object] = []
        for path in (pair.first, pair.second):
            names = switches_of(path)
            assert names[0] == sa and names[-1] == sb and len(set(names)) == len(names)
            for hop in path[:-1]:
                trunk = topology.trunk_at(hop)
                assert trunk is not None and trunk not in topology.down
                used.append(trunk)
            for here, there in itertools.pairwise(path):
                assert topology.peer_switch(here.switch, here.port) == there.switch
        assert len(used) == len(set(used))
        middle_a, middle_b = set(switches_of(pair.first)[1:-1]), set(switches_of(pair.second)[1:-1])
        assert (pair.disjoint == "node") == (not middle_a & middle_b)
        if pair.disjoint == "link":
            # no node-disjoint pair: some middle switch lies on every path between the ends
            cut_node = any(
                not _connected_without({arc for arc in up if f"s{m}" not in arc}, sa, sb, None)
                for m in range(1, switches + 1)
                if f"s{m}" not in (sa, sb)
            )
            assert cut_node, (a, b)


# ---- admission, entries, restoration ----------------------------------------------------------

MBIT = 125_000  # bytes/s


class ProtectedLab(Lab):
    """test_restoration's ring lab, its requests protected (or not) and with a delay bound."""

    def request(
        self, src: int, dst: int, mbit: int, context: int, *, protected: bool = True, optional: bool = False
    ) -> ChannelRequest:
        return ChannelRequest(
            ChannelKey(f"10.0.{src}.2", context),
            ChannelSelector(f"10.0.{src}.2", f"10.0.{dst}.2", 17, context),
            ChannelEnvelope(5, mbit * MBIT, 6000, 1500, delay_bound_us=20_000),
            protected=protected,
            protection_optional=optional,
        )

    async def reserve(self, *args: Any, **kwargs: Any) -> Reservation:  # type: ignore[override]
        made = await self.service.create(self.request(*args, **kwargs))
        assert isinstance(made, Reservation), made
        return made


def held(lab: ProtectedLab, switch: str, port: int) -> int:
    """The rate admitted at level 5 of a port."""
    return lab.ledger.load(PortId(switch, port)).levels[5].rate


def test_a_protected_channel_holds_both_paths_and_the_last_port_once() -> None:
    lab = ProtectedLab(ring_config(4))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        alloc = made.allocation
        assert alloc.protected and alloc.disjoint == "node"
        paths = {tuple(h.port.switch for h in p) for p in alloc.paths}
        assert paths == {("s1", "s2", "s3"), ("s1", "s4", "s3")}
        rate = alloc.rate
        for switch, port in (("s1", 2), ("s2", 2), ("s1", 3), ("s4", 3), ("s3", 1)):
            assert held(lab, switch, port) == rate, (switch, port)
        assert held(lab, "s2", 3) == held(lab, "s4", 2) == 0  # the reverse directions
        # the bound promised is the slower path's
        sums = [sum(h.worst_case_delay_us + h.jitter_us for h in p) for p in alloc.paths]
        assert alloc.worst_case_delay_us == max(sums)
        # closed, it holds nothing anywhere
        await lab.service.close(made.key)
        assert all(held(lab, s, p) == 0 for s, p in (("s1", 2), ("s1", 3), ("s3", 1), ("s4", 3)))

    asyncio.run(run())


def test_each_switch_gets_its_part() -> None:
    """s1 polices and replicates to both paths (members 2c+1 by port 2, 2c+2 by port 3, each to
    its next hop's MAC); s2 and s4 relay their path's copy; s3 recovers both and delivers."""
    lab = ProtectedLab(ring_config(4))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        cid = made.channel_id
        a, b = 2 * cid + 1, 2 * cid + 2
        head = lab.fabric.entries["s1"][made.selector]
        assert head.window is None and head.recovery is None and head.relay is None
        assert sorted((c.member, c.port, c.next_hop_mac) for c in head.replicas) == [
            (a, 2, "02:00:00:00:02:03"),
            (b, 3, "02:00:00:00:04:02"),
        ]
        (relay_a,) = lab.fabric.entries["s2"].values()
        (relay_b,) = lab.fabric.entries["s4"].values()
        assert relay_a.relay == Copy(a, 2, "02:00:00:00:03:03")
        # a copy is 6 bytes (the R-TAG) longer than the frame: the transit meter counts them
        hop = made.allocation.hops[1]
        assert relay_a.cir == -(-hop.rate * (1500 + 14 + 6) // 1500)
        assert relay_a.cburst == -(-hop.burst * (1500 + 14 + 6) // 1500)
        assert relay_b.relay == Copy(b, 3, "02:00:00:00:03:02")
        tail = lab.fabric.entries["s3"][made.selector]
        assert tail.recovery is not None and tail.recovery.members == (a, b)
        assert tail.recovery.history_length == 64
        assert tail.recovery.reset_us >= 2 * made.allocation.worst_case_delay_us
        assert tail.port == 1 and not tail.replicas

    asyncio.run(run())


def test_both_paths_must_pass_and_a_refusal_names_the_path_that_did_not() -> None:
    lab = ProtectedLab(ring_config(4, rate_bps=20_000_000))

    async def run() -> None:
        await lab.reserve(2, 3, 14, 1, protected=False)  # s2 > s3 nearly full
        # h1 > h4: s1 > s4 directly, or s1 > s2 > s3 > s4 through the full port
        denied = await lab.service.create(lab.request(1, 4, 10, 2))
        assert isinstance(denied, Denial)
        assert {v.port for v in denied.violations if v.port} == {PortId("s2", 2)}
        # nothing of it was held on the path that had room
        assert held(lab, "s1", 3) == held(lab, "s4", 1) == 0

    asyncio.run(run())


def test_no_pair_is_refused_with_its_own_reason_or_admitted_on_one_path_when_allowed() -> None:
    lab = ProtectedLab(chain_config(3))

    async def run() -> None:
        denied = await lab.service.create(lab.request(1, 2, 1, 1))
        assert isinstance(denied, Denial)
        assert denied.primary.reason == DenialReason.NO_DISJOINT_PATHS
        assert "no two paths from s1 to s3" in denied.primary.detail
        made = await lab.reserve(1, 2, 1, 2, optional=True)
        assert not made.allocation.protected
        assert [h.port.switch for h in made.allocation.hops] == ["s1", "s2", "s3"]

    asyncio.run(run())


def test_the_store_keeps_both_paths() -> None:
    lab = ProtectedLab(ring_config(4))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        again = allocation_from_json(allocation_to_json(made.allocation))
        assert again == made.allocation
        fresh = AdmissionLedger(ring_config(4).port_models())
        fresh.restore(again)
        assert fresh.load(PortId("s4", 3)).levels[5].rate == made.allocation.rate

    asyncio.run(run())


def test_a_cut_leaves_it_on_its_whole_path_when_no_partner_exists() -> None:
    """A plain ring: with s1-s2 cut, s1 > s4 > s3 has no partner. The channel stays as it is
    (its copies on s1 > s4 > s3 carry it), active, nothing moved; back, both paths carry it."""
    lab = ProtectedLab(ring_config(4))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        before = dict(lab.fabric.entries["s2"])
        report = await lab.restoration.restore(frozenset({lab.trunk("s1", "s2")}))
        assert report.changes == []
        record = lab.store.get(made.key)
        assert record is not None and record.state == ACTIVE and record.allocation == made.allocation
        assert lab.fabric.entries["s2"] == before
        await lab.restoration.restore(frozenset())
        assert lab.store.get(made.key) == record

    asyncio.run(run())


def test_a_cut_path_is_replaced_by_a_partner_of_the_whole_one() -> None:
    """A ring with the chord s1-s3: the pair is the chord and one way round. With the chord cut,
    the way round is kept and the other way round becomes its partner (make before break: the
    new path's switch first)."""
    lab = ProtectedLab(ring_config(4, chords=[(1, 3)]))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        kept = next(p for p in made.allocation.paths if len(p) == 3)
        report = await lab.restoration.restore(frozenset({lab.trunk("s1", "s3")}))
        assert [c.kind for c in report.changes] == ["moved"]
        record = lab.store.get(made.key)
        assert record is not None and record.state == ACTIVE and record.allocation.protected
        ways = {tuple(h.port.switch for h in p) for p in record.allocation.paths}
        assert ways == {("s1", "s2", "s3"), ("s1", "s4", "s3")}
        assert tuple(h.port for h in record.allocation.paths[0]) == tuple(h.port for h in kept)
        assert held(lab, "s1", 4) == 0  # the chord's port holds nothing now
        # the new path's transit switch was written before the switches it shares
        new_transit = ({"s2", "s4"} - {h.port.switch for h in kept}).pop()
        assert lab.fabric.reconciliations.index(new_transit) < lab.fabric.reconciliations.index("s1")

    asyncio.run(run())


def test_both_paths_cut_is_down_and_comes_back_protected() -> None:
    lab = ProtectedLab(ring_config(4))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        cut = frozenset({lab.trunk("s1", "s2"), lab.trunk("s3", "s4")})
        await lab.restoration.restore(cut)
        record = lab.store.get(made.key)
        assert record is not None and record.state == DOWN
        assert all(not held for held in lab.fabric.entries["s3"].values() if held.selector == made.selector)
        assert held(lab, "s1", 3) == 0
        await lab.restoration.restore(frozenset())
        record = lab.store.get(made.key)
        assert record is not None and record.state == ACTIVE and record.allocation.protected
        assert made.selector in lab.fabric.entries["s3"]

    asyncio.run(run())


def test_the_monitor_alarms_only_when_both_paths_are_cut() -> None:
    """One path cut leaves a protected channel whole (no path_down, and a move that keeps its
    whole path is no broken promise); both cut, it is."""
    lab = ProtectedLab(ring_config(4, chords=[(1, 3)]))

    async def run() -> None:
        made = await lab.reserve(1, 3, 10, 1)
        lab.topology.set_down({lab.trunk("s1", "s3")})
        record = lab.store.get(made.key)
        assert record is not None
        assert path_findings([record], lab.topology) == []
        report = await lab.restoration.restore(frozenset({lab.trunk("s1", "s3")}))
        assert [c.kind for c in report.changes] == ["moved"] and report.changes[0].protected
        assert moved_findings(report) == []
        moved = lab.store.get(made.key)
        assert moved is not None
        lab.topology.set_down({lab.trunk("s1", "s3"), lab.trunk("s1", "s2"), lab.trunk("s1", "s4")})
        (finding,) = path_findings([moved], lab.topology)
        assert finding.kind == PATH_DOWN and "other path is cut too" in finding.message

    asyncio.run(run())
