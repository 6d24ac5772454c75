"""What the switches say about their traffic: per queue the largest depth and delay and the
packets counted, a channel's counters, the drop counters, and the guarantee monitor's whole
sample of a switch in one pass (monitor_sample). Reads only, but for resetting the queue
maxima. A `kind: bmv2` switch's registers are read through BMv2's Thrift CLI (terrapin/bmv2.py):
simple_switch_grpc does not implement P4Runtime register reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import finsy as fy
from finsy.proto import p4r

from terrapin.bmv2 import Bmv2Cli
from terrapin.config import Config
from terrapin.p4program import (
    C_CHANNEL_RED,
    C_CHANNEL_YELLOW,
    C_DROPS,
    C_QUEUE_DELAY_BANDS,
    C_QUEUE_TRAFFIC,
    DELAY_BANDS,
    DROP_REASONS,
    FRER_COUNTERS,
    QUEUES_PER_PORT,
    R_FRER_LOST,
    R_MAX_DELAY,
    R_MAX_DEPTH,
    T_CHANNELS,
    T_MEMBER_STREAMS,
    queue_cell,
)
from terrapin.paths import ChannelSelector
from terrapin.switches.connection import (
    SwitchConnections,
    lost_stream_is_unavailable,
    read_entities,
    read_raw,
)
from terrapin.switches.encoding import ChannelCodecs, channel_match, queue_maxima_resets

LOG = logging.getLogger("terrapin.switches")


@dataclass(frozen=True)
class QueueTelemetry:
    port: int
    priority: int
    max_depth_packets: int
    max_delay_us: int
    packets: int
    bytes: int


@dataclass(frozen=True)
class ChannelCounters:
    packets: int
    bytes: int
    yellow_packets: int
    red_packets: int


@dataclass(frozen=True)
class RecoveryCounters:
    """802.1CB's recovery counters of a protected channel at its last switch (packets), and the
    numbers lost on both paths (None where the switch's registers cannot be read)."""

    passed: int
    discarded: int
    out_of_order: int
    rogue: int
    resets: int
    lost: int | None


@dataclass(frozen=True)
class MonitorSample:
    """What one poll of the guarantee monitor read from one switch.

    `started`/`finished` are monotonic seconds around the reads, so a rate can be computed over
    a window that certainly contains every packet counted in it. The register maxima are None
    when the switch cannot read registers over P4Runtime (p4lang's PI server cannot).
    """

    switch: str
    started: float
    finished: float
    bands: dict[tuple[int, int], tuple[int, ...]]  # (port, priority) → packets per band
    queue_traffic: dict[tuple[int, int], tuple[int, int]]  # (port, priority) → packets, bytes
    max_delay_us: dict[tuple[int, int], int] | None
    max_depth_packets: dict[tuple[int, int], int] | None
    channels: dict[ChannelSelector, tuple[int, int]]  # direct counter: packets, bytes
    excess: dict[int, tuple[int, int, int, int]]  # channel id → yellow pkts, bytes, red pkts, bytes
    # Protected channels recovered at this switch: channel id → their recovery counters (lost
    # only where registers are read over P4Runtime).
    recovery: dict[int, RecoveryCounters] | None = None


class SwitchTelemetry:
    """The telemetry reads of every switch of `connections`."""

    def __init__(self, connections: SwitchConnections, codecs: ChannelCodecs, config: Config) -> None:
        self._connections = connections
        self._codec = codecs
        self._bmv2_cli = {
            s.name: Bmv2Cli(s.bmv2_cli, s.thrift_port)
            for s in config.switches
            if s.kind == "bmv2" and s.thrift_port is not None
        }
        self._no_registers: set[str] = set()  # switches whose P4Runtime server refuses registers

    @lost_stream_is_unavailable
    async def queue_telemetry(self, name: str, ports: Iterable[int]) -> list[QueueTelemetry]:
        sw = self._connections.switch(name)
        cells = [(port, prio) for port in ports for prio in range(QUEUES_PER_PORT)]
        indices = [queue_cell(port, prio) for port, prio in cells]
        cli = self._bmv2_cli.get(name)
        if cli is None:
            depth = await _read_registers(sw, R_MAX_DEPTH, indices)
            delay = await _read_registers(sw, R_MAX_DELAY, indices)
        else:
            arrays = await asyncio.to_thread(cli.read_registers, [R_MAX_DEPTH, R_MAX_DELAY])
            depth = {i: arrays[R_MAX_DEPTH][i] for i in indices if i < len(arrays[R_MAX_DEPTH])}
            delay = {i: arrays[R_MAX_DELAY][i] for i in indices if i < len(arrays[R_MAX_DELAY])}
        traffic = await _read_counters(sw, C_QUEUE_TRAFFIC, indices)
        return [
            QueueTelemetry(
                port=port,
                priority=prio,
                max_depth_packets=depth.get(i, 0),
                max_delay_us=delay.get(i, 0),
                packets=traffic.get(i, (0, 0))[0],
                bytes=traffic.get(i, (0, 0))[1],
            )
            for (port, prio), i in zip(cells, indices, strict=True)
        ]

    @lost_stream_is_unavailable
    async def reset_queue_telemetry(self, name: str, ports: Iterable[int]) -> None:
        sw = self._connections.switch(name)
        cli = self._bmv2_cli.get(name)
        if cli is not None:
            # BMv2's CLI resets a whole register array, every port's cells.
            await asyncio.to_thread(cli.reset_registers, [R_MAX_DEPTH, R_MAX_DELAY])
            return
        await sw.write(queue_maxima_resets(ports))

    @lost_stream_is_unavailable
    async def channel_counters(
        self, name: str, selector: ChannelSelector, in_port: int, channel_id: int
    ) -> ChannelCounters:
        entry = fy.P4TableEntry(T_CHANNELS, match=channel_match(selector, in_port))
        return await _entry_counters(self._connections.switch(name), entry, channel_id)

    @lost_stream_is_unavailable
    async def member_counters(self, name: str, member: int, channel_id: int) -> ChannelCounters:
        """A protected channel's copies of one member stream that reached this (transit) switch,
        and the channel id's yellow and red counts there."""
        entry = fy.P4TableEntry(T_MEMBER_STREAMS, match=fy.P4TableMatch(member=member))
        return await _entry_counters(self._connections.switch(name), entry, channel_id)

    @lost_stream_is_unavailable
    async def recovery_counters(
        self, name: str, channel_ids: Sequence[int], lost: bool = True
    ) -> dict[int, RecoveryCounters]:
        """The recovery counters of protected channels whose last switch this is; with `lost`,
        the lost numbers too (a register: through BMv2's CLI on a BMv2 switch)."""
        sw = self._connections.switch(name)
        ids = list(channel_ids)
        counts = {key: await _read_counters(sw, counter, ids) for key, counter in FRER_COUNTERS.items()}
        losses: dict[int, int] = {}
        if lost and ids:
            cli = self._bmv2_cli.get(name)
            if cli is not None:
                for cid in ids:
                    losses[cid] = await asyncio.to_thread(cli.read_register_cell, R_FRER_LOST, cid)
            elif name not in self._no_registers:
                try:
                    losses = await _read_registers(sw, R_FRER_LOST, ids)
                except fy.P4ClientError as exc:
                    if exc.code != fy.GRPCStatusCode.UNIMPLEMENTED:
                        raise
                    self._no_registers.add(name)
        return {
            cid: RecoveryCounters(
                **{key: counts[key].get(cid, (0, 0))[0] for key in FRER_COUNTERS},
                lost=losses.get(cid),
            )
            for cid in ids
        }

    @lost_stream_is_unavailable
    async def drop_counters(self, name: str) -> dict[str, int]:
        sw = self._connections.switch(name)
        counts = await _read_counters(sw, C_DROPS, list(range(len(DROP_REASONS))))
        return {reason: counts.get(i, (0, 0))[0] for i, reason in enumerate(DROP_REASONS)}

    @lost_stream_is_unavailable
    async def monitor_sample(
        self,
        name: str,
        cells: Sequence[tuple[int, int]],
        channel_ids: Sequence[int],
        recovering: Sequence[int] = (),
    ) -> MonitorSample:
        """One consistent-as-possible read of everything the monitor checks on a switch.

        Order matters: a channel's direct counter (every colour) is read before its yellow and
        red counters, so a packet arriving between the two reads can only make the green count
        look smaller, never larger."""
        sw = self._connections.switch(name)
        started = asyncio.get_running_loop().time()
        codec = self._codec(sw)
        channels: dict[ChannelSelector, tuple[int, int]] = {}
        # Protobufs straight, not finsy's entities: thousands of channels a switch, every poll.
        read_all = p4r.ReadRequest(device_id=sw.device_id)
        read_all.entities.add().direct_counter_entry.table_entry.table_id = codec.table_id
        async for reply in read_raw(sw, read_all):
            for entity in reply.entities:
                direct = entity.direct_counter_entry
                channels[codec.selector_of(direct.table_entry)] = (
                    direct.data.packet_count,
                    direct.data.byte_count,
                )
        yellow = await _read_counters(sw, C_CHANNEL_YELLOW, list(channel_ids))
        red = await _read_counters(sw, C_CHANNEL_RED, list(channel_ids))
        excess = {cid: (*yellow.get(cid, (0, 0)), *red.get(cid, (0, 0))) for cid in channel_ids}
        queue_index = [queue_cell(port, prio) for port, prio in cells]
        traffic = await _read_counters(sw, C_QUEUE_TRAFFIC, queue_index)
        band_index = [i * DELAY_BANDS + band for i in queue_index for band in range(DELAY_BANDS)]
        band_counts = await _read_counters(sw, C_QUEUE_DELAY_BANDS, band_index)
        bands = {
            cell: tuple(band_counts.get(i * DELAY_BANDS + b, (0, 0))[0] for b in range(DELAY_BANDS))
            for cell, i in zip(cells, queue_index, strict=True)
        }
        recovery = None
        if recovering:
            reads = name not in self._no_registers and name not in self._bmv2_cli
            recovery = await self.recovery_counters(name, recovering, lost=reads)
        depth = delay = None
        if name not in self._no_registers:
            try:
                raw_delay = await _read_registers(sw, R_MAX_DELAY, queue_index)
                raw_depth = await _read_registers(sw, R_MAX_DEPTH, queue_index)
            except fy.P4ClientError as exc:
                if exc.code != fy.GRPCStatusCode.UNIMPLEMENTED:
                    raise
                # p4lang's PI: "Register reads are not supported yet". The delay bands remain.
                self._no_registers.add(name)
                LOG.info("switch %s reads no registers over P4Runtime; delay from bands only", name)
            else:
                delay = {cell: raw_delay.get(i, 0) for cell, i in zip(cells, queue_index, strict=True)}
                depth = {cell: raw_depth.get(i, 0) for cell, i in zip(cells, queue_index, strict=True)}
        return MonitorSample(
            switch=name,
            started=started,
            finished=asyncio.get_running_loop().time(),
            bands=bands,
            queue_traffic={cell: traffic.get(i, (0, 0)) for cell, i in zip(cells, queue_index, strict=True)},
            max_delay_us=delay,
            max_depth_packets=depth,
            channels=channels,
            excess=excess,
            recovery=recovery,
        )

    def reads_registers(self, name: str) -> bool:
        return name not in self._no_registers


async def _entry_counters(sw: fy.Switch, entry: fy.P4TableEntry, channel_id: int) -> ChannelCounters:
    """A table entry's direct counter, and the channel id's yellow and red counters."""
    packets = byte_count = 0
    async for read in read_entities(sw, fy.P4DirectCounterEntry(table_entry=entry)):
        if read.data is not None:
            packets, byte_count = read.data.packet_count, read.data.byte_count
    yellow = await _read_counters(sw, C_CHANNEL_YELLOW, [channel_id])
    red = await _read_counters(sw, C_CHANNEL_RED, [channel_id])
    return ChannelCounters(
        packets=packets,
        bytes=byte_count,
        yellow_packets=yellow.get(channel_id, (0, 0))[0],
        red_packets=red.get(channel_id, (0, 0))[0],
    )


async def _read_registers(sw: fy.Switch, name: str, indices: list[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    if not indices:
        return found
    async for entry in read_entities(sw, [fy.P4RegisterEntry(name, index=i) for i in indices]):
        if entry.index is not None and entry.data is not None:
            found[entry.index] = int(entry.data)
    return found


async def _read_counters(sw: fy.Switch, name: str, indices: list[int]) -> dict[int, tuple[int, int]]:
    """Cells of an indirect counter, index → (packets, bytes); read as protobufs (a poll reads
    two cells for every channel of the switch)."""
    found: dict[int, tuple[int, int]] = {}
    if not indices:
        return found
    counter_id = sw.p4info.counters[name].id
    request = p4r.ReadRequest(device_id=sw.device_id)
    for index in indices:
        cell = request.entities.add().counter_entry
        cell.counter_id = counter_id
        cell.index.index = index
    async for reply in read_raw(sw, request):
        for entity in reply.entities:
            counter = entity.counter_entry
            if counter.HasField("index"):
                found[counter.index.index] = (counter.data.packet_count, counter.data.byte_count)
    return found
