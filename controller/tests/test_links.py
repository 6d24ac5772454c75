"""The link watch (terrapin/links.py, docs/controller.md "Trunks") on a ring whose trunks carry the
probes unless cut, on a clock the test moves: a cut trunk is down after down_after_ms, back
after up_after_ms of probes; a switch that goes away takes its trunks at once; a trunk that
flaps stays down; a probe from where no trunk ends is counted and ignored; a controller that
just started (or took over) judges nothing before it has had time to hear, and a switch still
connecting then takes its trunks down only after the grace for connecting."""

from __future__ import annotations

import asyncio
import contextlib
import time

from fakes import ring_config

from terrapin.admission.model import PortId
from terrapin.config import LinksConfig
from terrapin.links import LinkWatch, Probe, port_macs
from terrapin.paths import Topology, Trunk

CONFIG = LinksConfig(probe_interval_ms=10, down_after_ms=35, up_after_ms=100, connect_grace_ms=1000)


class Ring:
    def __init__(self) -> None:
        config = ring_config()
        self.topology = Topology(config)
        self.now = 0.0
        self.cut: set[Trunk] = set()
        self.away: set[str] = set()
        self.dark: set[PortId] = set()  # ports their switch reports without carrier (gNMI)
        # switches cut off from the controller: their PacketOuts wait in the connection and a
        # round trip to them gets no answer
        self.held: set[str] = set()
        # switches whose stream or pipeline stalls: probes to them come to nothing meanwhile
        self.stalled: set[str] = set()
        self.watch = LinkWatch(
            self.topology,
            port_macs(config),
            self.send,
            lambda name: name not in self.away,
            CONFIG,
            lambda: self.now,
            carrier=self.carrier,
            reach=self.reach,
        )

    def carrier(self, switch: str, port: int) -> bool | None:
        if switch in self.away:
            return None
        return PortId(switch, port) not in self.dark

    async def reach(self, switch: str) -> None:
        if switch in self.held or switch in self.away:
            raise ConnectionError(f"{switch} does not answer")

    async def send(self, switch: str, frame: bytes, port: int) -> None:
        if switch in self.held:
            return
        here = PortId(switch, port)
        trunk = self.topology.trunk_at(here)
        assert trunk is not None, "probes leave by trunk ports only"
        if trunk in self.cut or {e.switch for e in trunk.ends} & self.away:
            return
        there = trunk.b if trunk.a == here else trunk.a
        if there.switch in self.stalled:
            return
        assert self.watch.on_probe(there.switch, there.port, frame)

    def run_for(self, ms: float) -> list[frozenset[Trunk]]:
        """Rounds every 10 ms for `ms`; the changes the watch reported."""
        changes = []
        for _ in range(round(ms / 10)):
            self.now += 0.010
            asyncio.run(self.watch.probe_all())
            down = self.watch.evaluate()
            if down is not None:
                changes.append(down)
        return changes

    def trunk(self, a: str, b: str) -> Trunk:
        return next(t for t in self.topology.trunks if {t.a.switch, t.b.switch} == {a, b})


def test_a_cut_trunk_is_down_within_down_after_and_back_after_up_after() -> None:
    ring = Ring()
    assert ring.run_for(200) == [] and ring.watch.down == frozenset()
    cut = ring.trunk("s1", "s2")
    ring.cut.add(cut)
    changes = ring.run_for(50)
    assert changes == [frozenset({cut})]
    (status,) = [s for s in ring.watch.statuses() if s.trunk == cut]
    assert not status.up and "no probe has reached" in status.why
    ring.cut.clear()
    assert ring.run_for(90) == []  # not yet up_after of probes
    assert ring.run_for(30) == [frozenset()]


def test_the_cut_is_seen_between_down_after_and_one_round_later() -> None:
    ring = Ring()
    ring.run_for(100)
    ring.cut.add(ring.trunk("s3", "s4"))
    ticks = 0
    while not ring.watch.down:
        ring.run_for(10)
        ticks += 1
    assert 3 <= ticks <= 5  # 35 ms without a probe, judged every 10 ms


def test_a_switch_that_goes_away_takes_its_trunks_at_once() -> None:
    ring = Ring()
    ring.run_for(100)
    ring.away.add("s2")
    assert ring.run_for(10) == [frozenset({ring.trunk("s1", "s2"), ring.trunk("s2", "s3")})]
    (why,) = {s.why for s in ring.watch.statuses() if not s.up}
    assert why == "switch s2 not connected"


def test_a_trunk_that_flaps_stays_down_until_it_holds() -> None:
    ring = Ring()
    ring.run_for(100)
    cut = ring.trunk("s1", "s2")
    ring.cut.add(cut)
    ring.run_for(50)
    for _ in range(5):  # up for 60 ms, down for 40: never up_after of probes in a row
        ring.cut.clear()
        assert ring.run_for(60) == []
        ring.cut.add(cut)
        ring.run_for(40)
    assert ring.watch.down == frozenset({cut})


def test_a_probe_from_where_no_trunk_ends_is_counted_and_ignored() -> None:
    ring = Ring()
    ring.run_for(100)
    forged = Probe("s3", 2, 1, 0).frame(b"\x02" * 6)  # s3:2 is s4's neighbour, not s1's
    assert ring.watch.on_probe("s1", 2, forged)
    assert ring.watch.on_probe("s1", 1, forged)  # a host's port
    assert ring.watch.on_probe("s1", 2, forged[:20])  # cut short
    assert ring.watch.strays == 3
    assert not ring.watch.on_probe("s1", 2, b"\x00" * 12 + b"\x08\x00" + b"\x45" * 20)  # IPv4: not ours


def test_nothing_is_judged_before_the_switches_have_been_heard() -> None:
    """A controller that just started, or took over (reset), has heard nothing: a trunk is not
    judged down before both its switches have been ready for down_after_ms."""
    ring = Ring()
    ring.cut.add(ring.trunk("s1", "s2"))
    assert ring.run_for(30) == []
    assert ring.run_for(20) == [frozenset({ring.trunk("s1", "s2")})]
    ring.watch.reset()
    assert ring.watch.down == frozenset() and ring.run_for(30) == []


def test_a_switch_still_connecting_after_a_start_takes_nothing_down_before_the_grace() -> None:
    """At a start every switch is still connecting: its trunks are not judged (they count as up)
    until it is ready, and a switch that never comes takes its trunks down after the grace."""
    ring = Ring()
    ring.away |= {"s2", "s3"}
    assert ring.run_for(500) == [] and not ring.watch.connected_once()
    ring.away.discard("s2")  # connects in time: judged by its probes from then on
    assert ring.run_for(490) == []
    assert ring.run_for(20) == [frozenset({ring.trunk("s2", "s3"), ring.trunk("s3", "s4")})]
    assert ring.watch.connected_once()
    (why,) = {s.why for s in ring.watch.statuses() if not s.up}
    assert why == "switch s3 not connected"
    ring.watch.reset()  # a takeover: the grace again
    assert ring.watch.down == frozenset() and ring.run_for(500) == []


def test_a_port_without_carrier_takes_its_trunk_down_at_once_and_probes_bring_it_back() -> None:
    """A switch's gNMI report beats the probes: the trunk is down at the next round, long before
    down_after_ms of silence; back, the carrier alone is not enough, up_after_ms of probes are."""
    ring = Ring()
    ring.run_for(200)
    cut = ring.trunk("s1", "s2")
    ring.cut.add(cut)
    ring.dark |= {PortId("s1", 2), PortId("s1", 1)}  # s1:1 is a host's port: no trunk
    assert ring.run_for(10) == [frozenset({cut})]
    (status,) = [s for s in ring.watch.statuses() if s.trunk == cut]
    assert status.why == "switch s1 reports no carrier on port 2"
    assert ring.run_for(200) == []
    ring.dark.clear()
    ring.cut.clear()
    assert ring.run_for(90) == []  # probes for less than up_after since the carrier's return
    assert ring.run_for(30) == [frozenset()]


def test_a_carrier_report_holds_only_while_its_switch_is_connected() -> None:
    """A switch that is gone says nothing of its ports: a loss it reported before is forgotten
    when it is back without one, and the probes judge the trunk."""
    ring = Ring()
    ring.run_for(200)
    ring.dark.add(PortId("s2", 3))  # s2's port to s1
    assert ring.run_for(10) == [frozenset({ring.trunk("s1", "s2")})]
    ring.away.add("s2")
    ring.run_for(20)
    ring.away.discard("s2")
    ring.dark.clear()
    changes = ring.run_for(300)
    assert changes[-1] == frozenset() and ring.watch.down == frozenset()


def test_a_probe_round_trips() -> None:
    frame = Probe("ucsb", 4, 77, 123456789).frame(bytes.fromhex("020000000204"))
    assert Probe.parse(frame) == Probe("ucsb", 4, 77, 123456789)
    assert frame[12:14] == b"\x88\xb5"


def test_a_controller_that_was_late_does_not_blame_the_trunks() -> None:
    """The controller's loop stalls for 80 ms (no probe sent, none read): the silence is its own,
    so no trunk goes down; a trunk cut meanwhile is found down_after after it runs again."""
    ring = Ring()
    ring.run_for(100)
    before = ring.now
    ring.now += 0.080
    ring.watch.excuse(before)
    assert ring.run_for(10) == [] and ring.watch.down == frozenset()

    before = ring.now
    cut = ring.trunk("s2", "s3")
    ring.cut.add(cut)
    ring.now += 0.080
    ring.watch.excuse(before)
    assert ring.run_for(30) == []
    assert ring.run_for(20) == [frozenset({cut})]


def test_a_switch_that_stalls_blames_none_of_its_trunks() -> None:
    """Found by `make chaos` (seed 4, --duration 120, 2026-12-02 18:22, terrapin-switch): no
    fault was in force when ucsd's PacketIns stopped for about 106 ms; the probes of its one
    trunk stopped a round before those of its other, which kept ucsd "heard" a little longer, so
    the first trunk's silence was blamed on the trunk and 21 channels moved. A switch whose
    stream stalls silences all its directions, each at a slightly different moment; a trunk is
    judged only by how long its probes were missing while its switches were otherwise heard."""
    ring = Ring()
    ring.run_for(100)
    blocked = ring.trunk("s1", "s2")

    async def s1_to_s2_first(switch: str, frame: bytes, port: int) -> None:
        if switch == "s1" and ring.topology.trunk_at(PortId(switch, port)) == blocked:
            return
        await Ring.send(ring, switch, frame, port)

    ring.watch._send = s1_to_s2_first
    assert ring.run_for(10) == []  # s2 hears s3 once more, s1 no longer
    ring.watch._send = ring.send
    ring.stalled.add("s2")
    assert ring.run_for(60) == [] and ring.watch.down == frozenset()
    ring.stalled.clear()
    assert ring.run_for(100) == [] and ring.watch.down == frozenset()
    # and a trunk really cut while its switches are heard is still found
    ring.cut.add(blocked)
    ticks = 0
    while not ring.watch.down:
        ring.run_for(10)
        ticks += 1
    assert ring.watch.down == frozenset({blocked}) and 3 <= ticks <= 5


def test_a_trunk_already_silent_is_not_excused() -> None:
    ring = Ring()
    ring.run_for(100)
    cut = ring.trunk("s1", "s4")
    ring.cut.add(cut)
    ring.run_for(50)
    assert ring.watch.down == frozenset({cut})
    ring.cut.clear()
    ring.watch.excuse(ring.now)  # heard from before the cut only, so nothing to excuse
    ring.now += 0.001
    assert ring.watch.evaluate() is None and ring.watch.down == frozenset({cut})


def test_a_controller_cut_off_from_every_switch_blames_no_trunk() -> None:
    """Found by `make chaos` (seed 4, --duration 120: partition_switches of the primary at 97 s):
    the primary, cut off from the switches' P4Runtime ports, heard no probe from anywhere, took
    all four trunks down and every channel with them. Silence from every switch is the
    controller's; a trunk cut meanwhile is found once it hears the switches again."""
    ring = Ring()
    ring.run_for(100)
    partitioned = ring.send

    async def nothing_arrives(switch: str, frame: bytes, port: int) -> None:
        return None

    ring.send = nothing_arrives  # type: ignore[method-assign]
    ring.watch._send = nothing_arrives
    ring.held = {"s1", "s2", "s3", "s4", "s5"}  # nor does any round trip
    assert ring.run_for(200) == [] and ring.watch.down == frozenset()
    cut = ring.trunk("s2", "s3")
    ring.cut.add(cut)
    ring.held.clear()
    ring.watch._send = partitioned
    assert ring.run_for(30) == []
    # heard again at the next round that probes the silent switches (one in every down_after),
    # then judged down_after from then
    assert ring.run_for(60) == [frozenset({cut})]


def test_a_switch_left_with_no_trunk_is_seen_from_its_neighbours() -> None:
    """Every trunk of s2 cut: no probe reaches s2, so its own directions say nothing, and none of
    its probes arrive anywhere, which a partition between the controller and s2 would do too.
    s2 answers a round trip, so its PacketOuts do reach it: from then s1 and s3, which still
    hear their other trunks, miss its probes (down_after to notice the silence, down_after
    more after the answer)."""
    ring = Ring()
    ring.run_for(100)
    ring.cut |= {ring.trunk("s1", "s2"), ring.trunk("s2", "s3")}
    assert ring.run_for(50) == []
    assert ring.run_for(50) == [frozenset({ring.trunk("s1", "s2"), ring.trunk("s2", "s3")})]


def test_a_switch_whose_packet_outs_are_held_takes_no_trunk_down() -> None:
    """Found by `make chaos` (seed 7, --duration 1800: partition_switches of the primary c1,
    healed at 187.4 s; and six more heals in that run): when a partition between the primary
    and the switches heals, each TCP connection resumes at its own retransmission. The other
    switches' PacketIns came back first, while the probes written to ucb still waited in its
    connection: the watch missed ucb's probes at ucsb and ucsd for 104 ms, took both trunks
    down and moved or downed every channel on them, and the measured channels lost 1-2.5 s of
    packets. A switch none of whose probes arrive anywhere is judged only once it answers."""
    ring = Ring()
    ring.run_for(100)
    ring.held.add("s1")  # everything else heard as before
    assert ring.run_for(500) == [] and ring.watch.down == frozenset()
    ring.held.clear()
    assert ring.run_for(200) == [] and ring.watch.down == frozenset()
    # and a trunk of s1 cut once it answers again is found as any other
    cut = ring.trunk("s1", "s2")
    ring.cut.add(cut)
    assert ring.run_for(50) == [frozenset({cut})]


def test_a_silent_switch_is_probed_once_per_down_after() -> None:
    """Cut off from every switch (its PacketOuts wait in the stream and reach the switches all at
    once when the partition heals), the controller probes each silent switch one round in every
    down_after instead of every round; heard again, every round."""
    ring = Ring()
    ring.run_for(100)
    partitioned = ring.watch._send
    written: list[str] = []

    async def held(switch: str, frame: bytes, port: int) -> None:
        written.append(switch)

    ring.watch._send = held
    ring.run_for(400)  # 40 rounds: the first ~3 at full rate, then one per 35 ms
    per_switch = written.count("s1") // 2  # two trunk ports each
    assert 10 <= per_switch <= 16, per_switch
    ring.watch._send = partitioned
    ring.run_for(60)  # heard again at the next round that probes them
    before = ring.watch.sent
    ring.run_for(50)
    assert ring.watch.sent - before == 5 * 2 * len(ring.topology.trunks)  # every round again


def test_a_primary_that_steps_down_during_a_round_announces_nothing() -> None:
    """Found by `make chaos` (seed 7, --duration 1800, at 14:46:13 of its log): c0 lost the lease
    while a round was under way; its switches turned backup (not ready) before the round judged,
    so it took every trunk down ("switch ucb, ucsb not connected") and began a restoration
    around all four, which the store refused. A round whose controller no longer acts at its
    end announces nothing."""
    ring = Ring()
    ring.watch._clock = time.monotonic
    state = {"acting": True, "stepping": False}

    def ready(name: str) -> bool:
        if state["stepping"]:
            state["acting"] = False  # the lease went while the round ran
            return False
        return True

    ring.watch._ready = ready
    changes: list[frozenset[Trunk]] = []

    async def on_change(down: frozenset[Trunk]) -> None:
        changes.append(down)

    async def scenario() -> None:
        task = asyncio.create_task(ring.watch.run(on_change, acting=lambda: state["acting"]))
        while not changes:  # settled after taking over: it announces what it found
            await asyncio.sleep(0.01)
        assert changes == [frozenset()]
        state["stepping"] = True
        await asyncio.sleep(0.2)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert changes == [frozenset()] and not state["acting"]


def test_a_switch_gone_at_a_takeover_takes_its_trunks_down_at_once() -> None:
    """Found by `make chaos` (seed 7, --duration 1800, at 846 s): ucsd was killed as c1 took the
    lease; the new primary gave every switch it had not yet seen ready the grace for connecting
    (10 s), so ucsd's trunks stayed up, no channel across it was moved or marked down, and the
    2.9 s outage of faith→paola raised no monitor episode. A switch whose stream this process
    had, and lost, is gone, not connecting; one still connecting after a start keeps its grace."""
    ring = Ring()
    ring.run_for(100)
    ring.watch.reset()  # a takeover
    ring.away.add("s2")  # killed meanwhile: no stream, as primary or backup
    assert ring.run_for(10) == [frozenset({ring.trunk("s1", "s2"), ring.trunk("s2", "s3")})]


def test_a_switch_whose_packet_outs_lag_behind_an_answered_round_trip_takes_no_trunk_down() -> None:
    """Found by `make chaos` (seed 7, --duration 1800, terrapin-switch, 2026-12-03 at 600 s):
    0.3 s after a partition between the primary c0 and the switches healed, ucb answered a round
    trip (a CapabilitiesRequest, on a gRPC stream of its own) while the probes written to it
    still waited behind the partition's backlog on its StreamChannel; both of ucb's trunks were
    judged down, every channel from ucb downed, and the three measured channels lost 2.5 s of
    packets. Probes from the neighbours kept reaching ucb: its trunks carried them."""
    ring = Ring()
    ring.run_for(100)

    async def s1_held_but_answering(switch: str, frame: bytes, port: int) -> None:
        if switch == "s1":
            return  # waiting in the stream, though s1 answers round trips
        await Ring.send(ring, switch, frame, port)

    ring.watch._send = s1_held_but_answering
    assert ring.run_for(500) == [] and ring.watch.down == frozenset()
    # a trunk of s1 cut meanwhile is found from the direction into s1
    cut = ring.trunk("s1", "s2")
    ring.cut.add(cut)
    assert ring.run_for(60) == [frozenset({cut})]
    ring.watch._send = ring.send
    ring.cut.clear()
    assert ring.run_for(300) == [frozenset()]


def test_the_carrier_is_read_every_tick_though_the_probes_go_out_once_an_interval() -> None:
    """Probing every 10 ms cost the controller enough CPU on two cores to slow its restorations
    (E11: done 43-177 ms after the cut) and to hold a probe past down_after (a trunk nobody cut
    went down and the video flapped back); probing less often must not slow what the ports
    report. With probes a second apart, a port that loses its carrier takes its trunk down
    within a few carrier ticks, and meanwhile one round of probes has gone out."""
    ring = Ring()
    ring.watch._clock = time.monotonic
    ring.watch._config = LinksConfig(
        probe_interval_ms=1000, down_after_ms=3000, up_after_ms=100, connect_grace_ms=1000
    )
    sent: list[float] = []
    deliver = ring.send

    async def counted(switch: str, frame: bytes, port: int) -> None:
        sent.append(time.monotonic())
        await deliver(switch, frame, port)

    ring.watch._send = counted
    changes: list[tuple[float, frozenset[Trunk]]] = []

    async def on_change(down: frozenset[Trunk]) -> None:
        changes.append((time.monotonic(), down))

    async def scenario() -> float:
        task = asyncio.create_task(ring.watch.run(on_change))
        await asyncio.sleep(0.3)
        darkened = time.monotonic()
        ring.dark.add(PortId("s1", 2))
        while not changes and time.monotonic() - darkened < 0.6:
            await asyncio.sleep(0.005)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return darkened

    darkened = asyncio.run(scenario())
    trunk_ports = 2 * len(ring.topology.trunks)
    assert changes, "the dark port was not seen before the next probe round"
    at, down = changes[0]
    assert down == frozenset({ring.topology.trunk_at(PortId("s1", 2))})
    assert at - darkened < 0.5
    assert len(sent) == trunk_ports  # one round: the next is not due for a second
