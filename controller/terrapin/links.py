"""Which trunks carry traffic, learnt by the controller on its own (docs/controller.md, "Trunks").

Every `probe_interval_ms` the primary sends a probe frame out of every trunk port of every ready
switch (P4Runtime PacketOut, straight to the port) and expects it back as a PacketIn at the
switch on the other end, which hands every frame of EtherType ETHERTYPE_LINK_PROBE to the
controller (p4src: ONOS and SD-Fabric discover their links the same way). A trunk is **down**
when either direction has carried no probe for `down_after_ms` while both its switches were
ready, or at once when one of its switches is no longer connected (a switch that dies takes its
trunks with it; one not yet connected since this controller began acting, after
`connect_grace_ms`: a controller that starts must not move every channel while it connects); it
is **up** again once both directions have carried probes for `up_after_ms`
without a gap, so that a trunk that flaps does not move channels back and forth. A direction
counts only while its receiving switch is heard at all (some probe reached it within
`down_after_ms`): when no probe reaches a switch from any trunk, the silence is as likely the
controller's own (a partition between it and the switch, found by `make chaos`, took every
channel down) as the trunks', and a real cut is seen from its other end.

A switch that follows its ports' links says so faster than any probe can (terrapin-switch serves
each port's oper-status over gNMI, as Stratum does, and finsy keeps it): a trunk whose port a
switch reports without carrier is down at the next round, and up again only once its probes have
come for `up_after_ms` after the carrier returned. The probes alone find what a carrier
does not show (a switch that stops forwarding, a link that drops frames but keeps its light),
and the cuts of switches without gNMI (BMv2).

The probe names its sender (switch, port) and carries a sequence number and the send time; one
arriving on a port that is not the far end of that sender's trunk (a host posing as a switch, a
cable plugged elsewhere) is counted and ignored.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from terrapin.admission.model import PortId
from terrapin.config import LINK_PROBE_HEADER_BYTES, LINK_PROBE_MIN_BYTES, Config, LinksConfig
from terrapin.p4program import ETHERTYPE_LINK_PROBE
from terrapin.paths import Topology, Trunk

LOG = logging.getLogger("terrapin.links")

MAGIC = b"TRPR"
# After the Ethernet header: magic, sender port, sequence, send time (ns), then the sender
# switch's name (length-prefixed).
PROBE = struct.Struct("!4sHIQB")
ETHERNET = struct.Struct("!6s6sH")
# LLDP's nearest-bridge group address: no bridge forwards it, and the far switch's program hands
# the frame to its controller by its EtherType whatever the address.
PROBE_DESTINATION = bytes.fromhex("0180c200000e")
assert ETHERNET.size + PROBE.size == LINK_PROBE_HEADER_BYTES  # admission charges the probes by it


@dataclass(frozen=True)
class Probe:
    switch: str  # the sender
    port: int
    seq: int
    sent_ns: int

    def frame(self, source_mac: bytes) -> bytes:
        name = self.switch.encode()
        head = ETHERNET.pack(PROBE_DESTINATION, source_mac, ETHERTYPE_LINK_PROBE)
        frame = head + PROBE.pack(MAGIC, self.port, self.seq, self.sent_ns, len(name)) + name
        return frame.ljust(LINK_PROBE_MIN_BYTES, b"\0")

    @staticmethod
    def parse(frame: bytes) -> Probe | None:
        """The probe a frame carries, or None if it is not one (or is malformed)."""
        if len(frame) < ETHERNET.size + PROBE.size:
            return None
        _dst, _src, ether_type = ETHERNET.unpack_from(frame)
        if ether_type != ETHERTYPE_LINK_PROBE:
            return None
        magic, port, seq, sent_ns, length = PROBE.unpack_from(frame, ETHERNET.size)
        start = ETHERNET.size + PROBE.size
        if magic != MAGIC or len(frame) < start + length:
            return None
        try:
            name = frame[start : start + length].decode()
        except UnicodeDecodeError:
            return None
        return Probe(name, port, seq, sent_ns)


def port_macs(config: Config) -> dict[PortId, bytes]:
    """Each switch port's MAC, the source of the probes it sends."""
    return {
        PortId(s.name, p.number): bytes.fromhex(p.mac.replace(":", ""))
        for s in config.switches
        for p in s.ports
    }


def is_probe(frame: bytes) -> bool:
    return len(frame) >= ETHERNET.size and ETHERNET.unpack_from(frame)[2] == ETHERTYPE_LINK_PROBE


@dataclass
class _Direction:
    """Probes arriving at one end of a trunk (sent from the other)."""

    last_seen: float | None = None  # monotonic
    steady_since: float | None = None  # since when probes came without a gap of down_after


@dataclass
class _TrunkState:
    up: bool = True
    changed_at: float = 0.0
    ready_since: float | None = None  # both switches ready since
    directions: dict[PortId, _Direction] = field(default_factory=dict)


@dataclass(frozen=True)
class TrunkStatus:
    trunk: Trunk
    up: bool
    changed_at: float  # Unix time of the last change (0: never)
    why: str  # why it is down, or empty


# How long a round trip to a switch (reach) may take before it says nothing of the switch.
REACH_TIMEOUT_S = 2.0
# How often the ports' carrier is read when the probes go out less often (a cut that darkens a
# port is found within about this).
CARRIER_TICK_S = 0.01


class LinkWatch:
    """The trunks' state, from probes and the switches' connections (see the module's doc).
    `send(switch, frame, port)` is a PacketOut to a port; `ready(switch)` whether its stream is
    up; `reach(switch)` a round trip on the switch's P4Runtime connection (returns once the
    switch answered: everything written to it before has reached it); `on_change(down)` is
    awaited with every new set of down trunks."""

    def __init__(
        self,
        topology: Topology,
        macs: dict[PortId, bytes],
        send: Callable[[str, bytes, int], Awaitable[None]],
        ready: Callable[[str], bool],
        config: LinksConfig,
        clock: Callable[[], float] = time.monotonic,
        carrier: Callable[[str, int], bool | None] = lambda switch, port: None,
        reach: Callable[[str], Awaitable[None]] | None = None,
        connected: Callable[[str], bool] | None = None,
    ) -> None:
        self._topology = topology
        self._macs = macs
        self._send = send
        self._ready = ready
        self._carrier = carrier
        self._reach = reach
        self._connected = connected or ready
        # Every switch this process has had a stream to (as primary or backup), kept across
        # takeovers: one gone at a takeover died, it is not still connecting.
        self._seen_connected: set[str] = set()
        self._config = config
        self._clock = clock
        self._states = {
            t: _TrunkState(directions={end: _Direction() for end in t.ends}) for t in topology.trunks
        }
        self._why: dict[Trunk, str] = {}
        # Since when this controller acts, and which switches it has seen ready since.
        self._acting_since = clock()
        self._seen_ready: set[str] = set()
        # Trunk ports a connected switch reports without carrier (gNMI).
        self._no_carrier: set[PortId] = set()
        # When a probe last reached each switch (any trunk): a switch the controller hears
        # nothing from at all says nothing of its trunks (evaluate).
        self._heard: dict[str, float] = {}
        self._heard_since: dict[str, float] = {}  # heard without a gap of down_after since
        self._quiet_probe: dict[str, float] = {}  # the last round that probed a silent switch
        # When a probe sent out of each switch last arrived anywhere: a switch none of whose
        # probes arrive may be cut off from this controller, its PacketOuts held in the
        # connection; its trunks are judged only from a round trip that shows it reachable.
        self._delivered: dict[str, float] = {}
        self._delivered_since: dict[str, float] = {}  # delivering without a gap of down_after
        self._reached_since: dict[str, float] = {}  # answered a round trip while not delivering
        self._reaching: dict[str, asyncio.Task[None]] = {}
        self._reach_tried: dict[str, float] = {}
        self._seq = 0
        self.strays = 0  # probes that came where no trunk of their sender ends
        self.sent = self.received = 0
        self.skipped = 0  # probes not sent: their switch's last ones were still being written
        self._sending: dict[str, asyncio.Task[None]] = {}
        self.late_rounds = 0  # rounds the controller itself was late for (excuse)

    def excuse(self, since: float) -> None:
        """This controller was late from `since` until now (its loop or its machine stalled):
        probes that came meanwhile may still be waiting to be read, so a direction heard from
        until then counts as heard now. A trunk cut meanwhile is found down_after later."""
        now = self._clock()
        down_after = self._config.down_after_ms / 1000
        for state in self._states.values():
            for seen in state.directions.values():
                if seen.last_seen is not None and since - seen.last_seen <= down_after:
                    seen.last_seen = now

    def reset(self) -> None:
        """Every trunk up, nothing heard yet, no switch seen ready: acting starts now."""
        self._acting_since = self._clock()
        self._seen_ready.clear()
        for state in self._states.values():
            state.up, state.ready_since = True, None
            for seen in state.directions.values():
                seen.last_seen = seen.steady_since = None
        self._why.clear()
        self._heard.clear()
        self._heard_since.clear()
        self._quiet_probe.clear()
        self._delivered.clear()
        self._delivered_since.clear()
        self._reached_since.clear()
        self._reach_tried.clear()

    def connected_once(self) -> bool:
        """Whether every switch has been ready since acting began, or the grace for connecting
        is over: until then a trunk is not judged by its switches' connections."""
        everyone = {end.switch for t in self._states for end in t.ends}
        grace = self._config.connect_grace_ms / 1000
        return everyone <= self._seen_ready or self._clock() - self._acting_since >= grace

    @property
    def down(self) -> frozenset[Trunk]:
        return frozenset(t for t, s in self._states.items() if not s.up)

    def statuses(self) -> list[TrunkStatus]:
        offset = time.time() - self._clock()
        return [
            TrunkStatus(t, s.up, s.changed_at + offset if s.changed_at else 0.0, self._why.get(t, ""))
            for t, s in sorted(self._states.items())
        ]

    def on_probe(self, switch: str, port: int, frame: bytes) -> bool:
        """A PacketIn: True if it was a probe (counted here, whatever it said)."""
        if not is_probe(frame):
            return False
        heard, last = self._clock(), self._heard.get(switch)
        if last is None or heard - last > self._config.down_after_ms / 1000:
            self._heard_since[switch] = heard
        self._heard[switch] = heard
        probe = Probe.parse(frame)
        here = PortId(switch, port)
        trunk = self._topology.trunk_at(here)
        there = PortId(probe.switch, probe.port) if probe is not None else None
        if probe is None or trunk is None or there is None or there not in trunk.ends or there == here:
            self.strays += 1
            return True
        self.received += 1
        now = self._clock()
        down_after = self._config.down_after_ms / 1000
        sent = self._delivered.get(there.switch)
        if sent is None or now - sent > down_after:
            self._delivered_since[there.switch] = now
        self._delivered[there.switch] = now
        self._reached_since.pop(there.switch, None)
        seen = self._states[trunk].directions[here]
        if seen.last_seen is None or now - seen.last_seen > down_after:
            seen.steady_since = now
        seen.last_seen = now
        return True

    def _read_carriers(self) -> None:
        """What the switches report of their trunk ports' links now. A port found without
        carrier forgets the probes that came before (they say nothing of the link after the
        loss); one back, or whose switch is gone or has not said, is left to the probes."""
        for trunk, state in self._states.items():
            for end in trunk.ends:
                lost = self._carrier(end.switch, end.port) is False
                if lost and end not in self._no_carrier:
                    self._no_carrier.add(end)
                    for seen in state.directions.values():
                        seen.last_seen = seen.steady_since = None
                    LOG.warning(
                        "switch %s reports no carrier on port %d (trunk %s)", end.switch, end.port, trunk
                    )
                elif not lost:
                    self._no_carrier.discard(end)

    async def probe_all(self) -> None:
        """One probe out of every trunk port of every ready switch. Each switch's probes go out
        in a task of their own: a switch whose stream stalls (one dying, one whose flow control
        holds the write) delays its own probes, never the watch, which judges on; its next
        round's are skipped while the last is still being written (`skipped`)."""
        self._seq = (self._seq + 1) & 0xFFFF_FFFF
        frames: dict[str, list[tuple[bytes, int]]] = {}
        now = self._clock()
        quiet = {name for name in self._heard if not self._may_probe(name, now)}
        for trunk in self._topology.trunks:
            for end in trunk.ends:
                if self._ready(end.switch) and end.switch not in quiet:
                    frame = Probe(end.switch, end.port, self._seq, time.time_ns()).frame(self._macs[end])
                    frames.setdefault(end.switch, []).append((frame, end.port))
        for switch, out in frames.items():
            pending = self._sending.get(switch)
            if pending is not None and not pending.done():
                self.skipped += len(out)
                continue
            self._sending[switch] = asyncio.create_task(self._send_all(switch, out))
        self._reach_silent(now)
        # Let the sends begin before the round judges (a send that completes at once has).
        await asyncio.sleep(0)

    def _is_heard(self, switch: str, now: float) -> bool:
        heard = self._heard.get(switch)
        return heard is not None and now - heard <= self._config.down_after_ms / 1000

    def _delivering(self, switch: str, now: float) -> bool:
        sent = self._delivered.get(switch)
        return sent is not None and now - sent <= self._config.down_after_ms / 1000

    def _reach_silent(self, now: float) -> None:
        """A round trip to each ready switch none of whose probes arrive anywhere (one at a
        time, at most one begun per down_after): whether it is cut off from this controller or
        from its neighbours (every trunk of it cut) only the switch's answer tells."""
        if self._reach is None:
            return
        down_after = self._config.down_after_ms / 1000
        for switch in sorted({end.switch for t in self._topology.trunks for end in t.ends}):
            if not self._ready(switch) or self._delivering(switch, now):
                continue
            pending = self._reaching.get(switch)
            if pending is not None and not pending.done():
                continue
            if now - self._reach_tried.get(switch, float("-inf")) < down_after:
                continue
            self._reach_tried[switch] = now
            self._reaching[switch] = asyncio.create_task(self._confirm(switch))

    async def _confirm(self, switch: str) -> None:
        assert self._reach is not None
        try:
            await asyncio.wait_for(self._reach(switch), REACH_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except Exception:  # unreachable (or going away): its silence stays unexplained
            self._reached_since.pop(switch, None)
            return
        now = self._clock()
        if not self._delivering(switch, now):
            # Its probes written before this answer have reached it: from now on, their
            # silence is its trunks'.
            self._reached_since.setdefault(switch, now)

    def _may_probe(self, switch: str, now: float) -> bool:
        """Whether this round probes out of `switch`'s ports: always while some probe reaches
        it; once none has for down_after, one round in every down_after. A controller cut off
        from a switch (a partition that drops without a reset) still writes its PacketOuts,
        which wait in its stream and its TCP send buffer and reach the switch all at once when
        the partition heals: 2.6 s of rounds were a burst of stale probes that held admitted
        packets on a T1 for up to 100 ms (`make chaos`). Throttled, the burst is a tenth of it."""
        heard = self._heard.get(switch)
        down_after = self._config.down_after_ms / 1000
        if heard is None or now - heard <= down_after:
            return True
        if now - self._quiet_probe.get(switch, float("-inf")) >= down_after:
            self._quiet_probe[switch] = now
            return True
        return False

    async def _send_all(self, switch: str, out: list[tuple[bytes, int]]) -> None:
        for frame, port in out:
            try:
                await self._send(switch, frame, port)
                self.sent += 1
            except Exception:  # the switch is going away: the watch sees it by its connection
                return

    def cancel_sends(self) -> None:
        for task in (*self._sending.values(), *self._reaching.values()):
            task.cancel()
        self._sending.clear()
        self._reaching.clear()

    def evaluate(self) -> frozenset[Trunk] | None:
        """The trunks down now, if that changed since the last evaluation (else None)."""
        now = self._clock()
        down_after = self._config.down_after_ms / 1000
        up_after = self._config.up_after_ms / 1000
        changed = False
        self._read_carriers()
        in_grace = now - self._acting_since < self._config.connect_grace_ms / 1000
        for trunk, state in self._states.items():
            switches = {end.switch for end in trunk.ends}
            ready = all(self._ready(name) for name in switches)
            self._seen_ready.update(name for name in switches if self._ready(name))
            dark = sorted(end for end in trunk.ends if end in self._no_carrier)
            self._seen_connected.update(name for name in switches if self._connected(name))
            lost = {n for n in switches if not self._connected(n) and n in self._seen_connected}
            if not ready and in_grace and not switches <= self._seen_ready and not lost:
                # A switch still connecting after this controller started, or still being made
                # this replica's after a takeover: nothing is known. One whose stream this
                # process had and lost is gone: a switch killed as the lease changed hands kept
                # its trunks up for the whole grace and no channel across it was moved.
                state.ready_since = None
                continue
            if not ready:
                state.ready_since = None
            elif state.ready_since is None:
                state.ready_since = now
            why = ""
            if not ready:
                gone = ", ".join(sorted(n for n in switches if not self._ready(n)))
                why = f"switch {gone} not connected"
            elif dark:
                why = f"switch {dark[0].switch} reports no carrier on port {dark[0].port}"
            else:
                for end, seen in state.directions.items():
                    heard = self._heard.get(end.switch)
                    if heard is None or now - heard > down_after:
                        # Nothing reached this switch from any trunk: a partition between this
                        # controller and the switch silences them all at once, and a trunk is
                        # not to blame for it. A cut is seen from its other end, which hears
                        # its other trunks (a switch left with no trunk at all: from both).
                        continue
                    sender = trunk.b if end == trunk.a else trunk.a
                    if self._delivering(sender.switch, now):
                        # judged from when its probes began to arrive again (a partition that
                        # heals frees each connection's held writes at its own retransmission)
                        sent_since = self._delivered_since[sender.switch]
                        sent_until = self._delivered[sender.switch]
                    elif self._is_heard(sender.switch, now):
                        # None of the sender's probes arrive anywhere, yet its neighbours'
                        # probes reach it: its trunks carry them, and what is missing is its
                        # PacketOuts, held between this controller and it. A round trip
                        # (reach) does not show them through: it goes on a gRPC stream of its
                        # own and overtakes them. Its trunks are judged from the directions
                        # into it, which a cut silences too.
                        continue
                    elif self._reach is None:
                        sent_since, sent_until = 0.0, now
                    elif sender.switch in self._reached_since:
                        sent_since, sent_until = self._reached_since[sender.switch], now
                    else:
                        # None of the sender's probes arrive anywhere and it has not been shown
                        # reachable: its PacketOuts may be waiting in its connection (a
                        # partition between this controller and it, or one healing).
                        continue
                    # and one heard again is judged from then: its probes come in one by one
                    since = max(
                        seen.last_seen or 0.0,
                        state.ready_since or 0.0,
                        self._heard_since[end.switch],
                        sent_since,
                    )
                    # Silent for as long as both its switches were otherwise heard: probes kept
                    # reaching the receiver on its other trunks, and the sender's kept reaching
                    # the others. A stall of one switch's stream (or its pipeline) silences all
                    # of its directions, each a few milliseconds after the last, and says
                    # nothing of a trunk (make chaos: 106 ms stalls at a switch took a trunk
                    # down while its other trunk's probes, last heard 6 ms later, kept it
                    # "heard"). A real cut costs a probe interval more than down_after.
                    silent = min(heard, sent_until) - since
                    if silent > down_after:
                        why = f"no probe has reached {end} for {round(silent * 1000)} ms"
                        break
            if state.up and why:
                # Not before both switches have been ready for down_after (a switch that just
                # connected, or this controller that just started, has had no time to hear probes).
                heard_long_enough = state.ready_since is not None and now - state.ready_since > down_after
                if not ready or dark or heard_long_enough:
                    state.up, state.changed_at, changed = False, now, True
                    self._why[trunk] = why
                    LOG.warning("trunk %s is down: %s", trunk, why)
            elif (
                not state.up
                and ready
                and not dark
                and all(
                    seen.steady_since is not None
                    and seen.last_seen is not None
                    and now - seen.last_seen <= down_after
                    and now - seen.steady_since >= up_after
                    for seen in state.directions.values()
                )
            ):
                state.up, state.changed_at, changed = True, now, True
                self._why.pop(trunk, None)
                LOG.warning("trunk %s is up again", trunk)
        return self.down if changed else None

    async def run(
        self,
        on_change: Callable[[frozenset[Trunk]], Awaitable[None]],
        acting: Callable[[], bool] = lambda: True,
    ) -> None:
        """Probe and judge every probe_interval_ms while `acting` (the primary), until cancelled.
        A controller that starts acting (a takeover) starts from every trunk up and judges them
        after down_after_ms of its own probes."""
        interval = self._config.probe_interval_ms / 1000
        # The carrier is read (and the trunks judged) at least every CARRIER_TICK_S, the probes
        # sent every interval: a cut the ports report is found as soon without the CPU that
        # probing that often costs.
        tick = min(interval, CARRIER_TICK_S)
        settle = 2 * self._config.down_after_ms / 1000
        # A round this much later than due means the controller, not a trunk, fell silent.
        late = tick + self._config.down_after_ms / 2000
        was_acting = announced = False
        since = 0.0
        previous: float | None = None
        probed: float | None = None
        try:
            while True:
                started = self._clock()
                if previous is not None and started - previous > late:
                    self.late_rounds += 1
                    self.excuse(previous)
                previous = started
                try:
                    if not acting():
                        was_acting = False
                    elif not was_acting:
                        was_acting, announced, since, probed = True, False, started, None
                        self.reset()
                    else:
                        # due within half a tick: a tick's own lateness must not skip a round
                        if probed is None or started - probed >= interval - tick / 2:
                            probed = started
                            await self.probe_all()
                        down = self.evaluate()
                        settled = started - since >= settle and self.connected_once()
                        if not acting():
                            # It stepped down during the round: its switches went from ready to
                            # backup, which says nothing of the trunks, and it acts no more.
                            was_acting, down = False, None
                        elif down is None and not announced and settled:
                            # Once settled after starting, or taking over, whatever it found: the
                            # down channels of the store are tried again, and a restoration the
                            # last primary left half done is finished.
                            down = self.down
                        if down is not None:
                            announced = True
                            await on_change(down)
                except asyncio.CancelledError:
                    raise
                except Exception:  # the watch must outlive one bad round
                    LOG.exception("link watch round failed")
                await asyncio.sleep(max(0.0, tick - (self._clock() - started)))
        finally:
            self.cancel_sends()
