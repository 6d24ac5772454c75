"""SwitchFabric: the one object the rest of the controller uses to reach the switches (the
reservation service, the guarantee monitor, the REST API, main.py). It owns no P4Runtime call
itself: each concern is a module of its own, and this facade wires them together and forwards.

  connection.py  streams, readiness, arbitration     entries.py    writes, batching, reconcile
  telemetry.py   counters, registers, monitor reads  packetio.py   PacketIn / PacketOut
  encoding.py    every byte sent to p4src
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from terrapin.config import Config
from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.switches.connection import SwitchConnections
from terrapin.switches.encoding import ChannelCodecs, QueueBound
from terrapin.switches.entries import DesiredChannels, ReconcileReport, SwitchEntries
from terrapin.switches.packetio import PacketHandler, send_packet, serve_packets
from terrapin.switches.telemetry import (
    ChannelCounters,
    MonitorSample,
    QueueTelemetry,
    RecoveryCounters,
    SwitchTelemetry,
)


class SwitchFabric:
    """All switches of the configuration, each on its own finsy stream."""

    def __init__(
        self,
        config: Config,
        topology: Topology,
        on_packet: PacketHandler,
        desired_channels: DesiredChannels,
        config_dir: Path | None = None,
        replica_index: int | None = None,
    ) -> None:
        """With `replica_index` this is one replica of several: every switch starts as a backup
        and becomes primary only when the replica claims its lease term (claim())."""
        self._connections = SwitchConnections(
            config,
            reconcile=lambda name: self._entries.reconcile(name),
            serve_packets=lambda sw: serve_packets(sw, on_packet),
            config_dir=config_dir,
            replica_index=replica_index,
        )
        codecs = ChannelCodecs()
        self._entries = SwitchEntries(
            self._connections, codecs, topology, desired_channels, config.aggregates
        )
        self._telemetry = SwitchTelemetry(self._connections, codecs, config)
        # The connections' own dicts: /health reads them.
        self.reconciled: dict[str, ReconcileReport] = self._connections.reconciled
        self.last_error: dict[str, str] = self._connections.last_error
        # One PacketOut at a time per stream: gRPC's asyncio stream takes one write at a time, and a
        # second begun before the first finished broke the stream ("Internal error from Core"),
        # which the link watch's probes out of a switch's several trunk ports did at once.
        self._packet_out_locks: dict[str, asyncio.Lock] = {}

    # ---- connection, readiness and arbitration (connection.py) -------------------------------

    @property
    def names(self) -> list[str]:
        return self._connections.names

    def start(self) -> None:
        self._connections.start()

    async def stop(self) -> None:
        await self._connections.stop()

    def is_ready(self, name: str) -> bool:
        return self._connections.is_ready(name)

    def is_connected(self, name: str) -> bool:
        """Whether the P4Runtime stream is up (as primary or backup)."""
        return self._connections.is_connected(name)

    def why_not_ready(self, name: str) -> str | None:
        """None when ready; otherwise what a person needs to know (for /health)."""
        return self._connections.why_not_ready(name)

    def port_carrier(self, name: str, port: int) -> bool | None:
        """Whether the switch reports the port's link up (gNMI); None: unknown."""
        return self._connections.port_carrier(name, port)

    async def wait_ready(self, timeout: float) -> bool:
        return await self._connections.wait_ready(timeout)

    async def round_trip(self, name: str) -> None:
        """Returns once the switch answered a request (what was written to it before reached it)."""
        await self._connections.round_trip(name)

    async def claim(self, term: int) -> dict[str, bool]:
        return await self._connections.claim(term)

    def fence_writes(self, may_write: Callable[[], bool]) -> None:
        self._connections.fence_writes(may_write)

    async def step_down(self) -> None:
        await self._connections.step_down()

    # ---- entries: channels, reconciliation, queue bounds (entries.py) -------------------------

    async def reconcile(self, name: str) -> ReconcileReport:
        return await self._entries.reconcile(name)

    def precompute(self, desired: Mapping[str, Sequence[ChannelEntry]], encode: bool = True) -> int:
        return self._entries.precompute(desired, encode)

    async def install_channel(self, entry: ChannelEntry) -> None:
        await self._entries.install_channel(entry)

    async def remove_channel(self, entry: ChannelEntry) -> None:
        await self._entries.remove_channel(entry)

    async def read_channels(self, name: str) -> list[tuple[ChannelSelector, dict[str, Any]]]:
        return await self._entries.read_channels(name)

    async def sync_queue_bounds(self, name: str, bounds: Sequence[QueueBound]) -> int:
        return await self._entries.sync_queue_bounds(name, bounds)

    def stage_bounds(
        self, name: str, bounds: Sequence[QueueBound], installed: Mapping[tuple[int, int], int]
    ) -> asyncio.Future[None]:
        return self._entries.stage_bounds(name, bounds, installed)

    # ---- packet I/O (packetio.py) -------------------------------------------------------------

    async def packet_out(self, name: str, frame: bytes, egress_port: int | None = None) -> None:
        lock = self._packet_out_locks.setdefault(name, asyncio.Lock())
        async with lock:
            await send_packet(self._connections.switch(name), frame, egress_port)

    # ---- telemetry and the monitor's reads (telemetry.py) -------------------------------------

    async def queue_telemetry(self, name: str, ports: Iterable[int]) -> list[QueueTelemetry]:
        return await self._telemetry.queue_telemetry(name, ports)

    async def reset_queue_telemetry(self, name: str, ports: Iterable[int]) -> None:
        await self._telemetry.reset_queue_telemetry(name, ports)

    async def channel_counters(
        self, name: str, selector: ChannelSelector, in_port: int, channel_id: int
    ) -> ChannelCounters:
        return await self._telemetry.channel_counters(name, selector, in_port, channel_id)

    async def member_counters(self, name: str, member: int, channel_id: int) -> ChannelCounters:
        return await self._telemetry.member_counters(name, member, channel_id)

    async def recovery_counters(self, name: str, channel_ids: Sequence[int]) -> dict[int, RecoveryCounters]:
        return await self._telemetry.recovery_counters(name, channel_ids)

    async def drop_counters(self, name: str) -> dict[str, int]:
        return await self._telemetry.drop_counters(name)

    async def monitor_sample(
        self,
        name: str,
        cells: Sequence[tuple[int, int]],
        channel_ids: Sequence[int],
        recovering: Sequence[int] = (),
    ) -> MonitorSample:
        return await self._telemetry.monitor_sample(name, cells, channel_ids, recovering)

    def reads_registers(self, name: str) -> bool:
        return self._telemetry.reads_registers(name)
