"""What a switch's tables hold, and every write that changes them: a channel's entry installed
and removed (through the switch's WriteGate and SwitchBatcher, batcher.py), the queue bounds
the monitor stages ahead of it, and the reconciliation that makes a switch's entries equal the
desired state (forwarding, aggregates and every channel the store lists) when it becomes ready.
The protobufs come from encoding.py.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import finsy as fy
from finsy.proto import p4r

from terrapin.config import AggregateConfig
from terrapin.p4program import T_CHANNEL_PATHS
from terrapin.paths import ChannelEntry, ChannelSelector, Topology
from terrapin.switches.batcher import SwitchBatcher, SwitchWriteError, WriteGate, already_done
from terrapin.switches.connection import (
    SwitchConnections,
    SwitchUnavailable,
    lost_stream_is_unavailable,
    read_entities,
    read_raw,
)
from terrapin.switches.encoding import (
    ChannelCodec,
    ChannelCodecs,
    EncodedEntry,
    EntryKey,
    QueueBound,
    aggregate_entries,
    aggregate_meter_writes,
    channel_read_request,
    entry_key,
    entry_payload,
    forwarding_entries,
    key_only,
    pin_entry,
    queue_bound_of,
    queue_bounds_read_request,
    reconcile_read_request,
    selector_of_match,
)
from terrapin.switches.protected import group_replicas, group_update, protection_entries, replication_group

DesiredChannels = Callable[[str], Sequence[ChannelEntry]]


@dataclass(frozen=True)
class ReconcileReport:
    switch: str
    inserted: int
    modified: int
    deleted: int
    kept: int
    meters: int = 0  # aggregate meters written (all of them, at every reconciliation)
    # Wall-clock end of this reconciliation: tells a restored switch's report from its predecessor's.
    finished_at: float = field(default_factory=time.time)


class SwitchEntries:
    """The entries of every switch of `connections`, and the writes that change them."""

    def __init__(
        self,
        connections: SwitchConnections,
        codecs: ChannelCodecs,
        topology: Topology,
        desired_channels: DesiredChannels,
        aggregates: Sequence[AggregateConfig],
    ) -> None:
        self._connections = connections
        self._codec = codecs
        self._topology = topology
        self._desired = desired_channels
        self._aggregates = tuple(aggregates)
        names = connections.switches
        self._gates = {name: WriteGate() for name in names}
        self._batchers = {name: SwitchBatcher(functools.partial(connections.switch, name)) for name in names}
        # Channel entries as protobufs, with their key and payload: what a reconciliation
        # compares (precompute()).
        self._encoded: dict[ChannelEntry, EncodedEntry] = {}

    @lost_stream_is_unavailable
    async def reconcile(self, name: str) -> ReconcileReport:
        """Make the switch's entries equal the desired state: insert what is missing, modify
        what differs (in place, so an admitted channel never disappears), delete the rest.
        No channel is written to the switch meanwhile (WriteGate)."""
        async with self._gate(name).exclusive():
            return await self._reconcile(name)

    async def _reconcile(self, name: str) -> ReconcileReport:
        sw = self._connections.switch(name)
        schema = sw.p4info
        codec = self._codec(sw)
        desired = self._desired(name)
        others = forwarding_entries(self._topology.forwarding(name)) + aggregate_entries(self._aggregates)
        others += [pin_entry(e) for e in desired if e.pin is not None]
        others += [pe for e in desired for pe in protection_entries(e)]
        want = {entry_key(pb): pb for pb in (e.encode(schema).table_entry for e in others)}
        payloads = {k: entry_payload(pb) for k, pb in want.items()}
        # A channel entry read back exactly as written (the same bytes) is as it should be;
        # only the others are taken apart by key and payload. Comparing whole serialized
        # entries is one call each, and a takeover compares tens of thousands.
        exact: dict[bytes, EntryKey] = {}
        for entry in desired:
            if entry.relay is not None:
                continue  # a protected channel's copy in transit: no `channels` entry here
            encoded = self._encoded_entry(codec, entry)
            want[encoded.key], payloads[encoded.key] = encoded.pb, encoded.payload
            exact[encoded.whole] = encoded.key
        same: set[EntryKey] = set()
        have: dict[tuple[int, int, bytes], p4r.TableEntry] = {}
        groups: dict[int, tuple[tuple[int, int], ...]] = {}
        async for reply in read_raw(sw, reconcile_read_request(schema, sw.device_id, codec)):
            for entity in reply.entities:
                if entity.HasField("packet_replication_engine_entry"):
                    group = entity.packet_replication_engine_entry.multicast_group_entry
                    groups[group.multicast_group_id] = group_replicas(group)
                    continue
                found = exact.get(entity.table_entry.SerializeToString(deterministic=True))
                if found is not None and found not in same:
                    same.add(found)
                else:
                    have[entry_key(entity.table_entry)] = entity.table_entry
        inserts = [pb for k, pb in want.items() if k not in have and k not in same]
        modifies = [pb for k, pb in want.items() if k in have and payloads[k] != entry_payload(have[k])]
        deletes = [key_only(pb) for k, pb in have.items() if k not in want]
        # A channel whose path now enters this switch another way has a new key here: its new
        # entry goes in before the old one goes (make before break), so none of its packets
        # meets neither.
        left = [pb for pb in deletes if pb.table_id == codec.table_id]
        deletes = [pb for pb in deletes if pb.table_id != codec.table_id]
        # A channel's pin goes in before the route it departs from moves (make before break:
        # its packets never follow a route its path has left).
        pins_table = schema.tables[T_CHANNEL_PATHS].id
        pins = [pb for pb in inserts if pb.table_id == pins_table]
        await write_raw(sw, p4r.Update.DELETE, deletes)
        # The protected channels' multicast groups: no longer named by a `protections` entry
        # (deleted above), and needed by those inserted below.
        synced = await _sync_groups(sw, groups, [g for g in map(replication_group, desired) if g is not None])
        await write_raw(sw, p4r.Update.INSERT, pins)
        inserts = [pb for pb in inserts if pb.table_id != pins_table]
        await write_raw(sw, p4r.Update.MODIFY, modifies)
        # Meters before entries, so no aggregate packet meets an unconfigured meter (which
        # colours everything green). A meter config cannot be inserted or deleted, only set;
        # setting an unchanged one is harmless, so all are written.
        meters = aggregate_meter_writes(self._aggregates)
        if meters:
            await sw.write(meters)
        await write_raw(sw, p4r.Update.INSERT, inserts)
        await write_raw(sw, p4r.Update.DELETE, left)
        return ReconcileReport(
            name,
            len(inserts) + len(pins) + synced[0],
            len(modifies) + synced[1],
            len(deletes) + len(left) + synced[2],
            len(want) - len(inserts) - len(pins),
            len(meters),
        )

    def _encoded_entry(self, codec: ChannelCodec, entry: ChannelEntry) -> EncodedEntry:
        hit = self._encoded.get(entry)
        if hit is None:
            pb = codec.entry(entry)
            hit = self._encoded[entry] = EncodedEntry(
                entry_key(pb), entry_payload(pb), pb, pb.SerializeToString(deterministic=True)
            )
        return hit

    def precompute(self, desired: Mapping[str, Sequence[ChannelEntry]], encode: bool = True) -> int:
        """Encode the channel entries each switch should hold, ahead of a reconciliation (a
        backup does this as it follows the primary, so that taking over only reads and
        compares); entries no longer desired are forgotten. Returns how many were new.
        encode=False only forgets (the primary: encoding every new channel a second time, after
        its set-up wrote it, cost it a fourteenth of its time during a burst of set-ups, and a
        reconciliation encodes what it misses anyway)."""
        fresh = 0
        keep: dict[ChannelEntry, EncodedEntry] = {}
        for name, entries in desired.items():
            sw = self._connections.switches.get(name)
            if sw is None or not sw.p4info.exists:
                continue
            codec = self._codec(sw)
            for entry in entries:
                if entry.relay is not None:
                    continue
                hit = self._encoded.get(entry)
                if hit is not None:
                    keep[entry] = hit
                elif encode:
                    fresh += 1
                    keep[entry] = self._encoded_entry(codec, entry)
        self._encoded = keep
        return fresh

    # ---- channels (paths.ChannelProgrammer) -----------------------------------------------

    async def install_channel(self, entry: ChannelEntry) -> None:
        async with self._gate(entry.switch).write():
            if not self._connections.is_ready(entry.switch):
                raise SwitchUnavailable(f"switch {entry.switch} is not ready")
            sw = self._connections.switch(entry.switch)
            codec = self._codec(sw)
            updates: list[p4r.Update] = []
            if entry.relay is None:
                # The channel id's yellow and red counters start from zero with the entry: an id
                # is reused, and its first window (the monitor's, the REST counters') is its own.
                updates += codec.zero_colours(entry.channel_id)
                if entry.pin is not None:  # before the entry whose hit applies it
                    pin = pin_entry(entry).encode(sw.p4info).table_entry
                    updates.append(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=pin)))
            group = replication_group(entry)
            if group is not None:
                updates.append(group_update(p4r.Update.INSERT, group))
            for extra in protection_entries(entry):  # before the entry whose hit uses them
                pb = extra.encode(sw.p4info).table_entry
                updates.append(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=pb)))
            if entry.relay is None:
                insert = p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=codec.entry(entry)))
                updates.append(insert)
            try:
                await self._batchers[entry.switch].write(updates)
            except SwitchWriteError as exc:
                if not exc.codes or any(c != fy.GRPCStatusCode.ALREADY_EXISTS for c in exc.codes):
                    raise
                # A reconciliation ran between this set-up's "installing" record and its writes
                # (a restoration's, a switch's return: it makes the switch hold every stored
                # channel, this one too) and wrote these entries first. The store gives this
                # channel's keys to this channel alone, so they are made what it writes.
                await self._batchers[entry.switch].write([as_modify(u) for u in updates])

    async def remove_channel(self, entry: ChannelEntry) -> None:
        async with self._gate(entry.switch).write():
            sw = self._connections.switch(entry.switch)
            updates = []
            if entry.relay is None:
                key = self._codec(sw).key_only(entry.selector, entry.in_port)
                updates.append(p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=key)))
                if entry.pin is not None:
                    pin = pin_entry(entry).encode(sw.p4info).table_entry
                    updates.append(p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=pin)))
            for extra in reversed(protection_entries(entry)):
                pb = key_only(extra.encode(sw.p4info).table_entry)
                updates.append(p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=pb)))
            group = replication_group(entry)
            if group is not None:
                updates.append(group_update(p4r.Update.DELETE, group))
            # Not strict: an entry already gone (a switch restarted empty) is not an error.
            await self._batchers[entry.switch].write(updates, strict=False)

    def _gate(self, name: str) -> WriteGate:
        gate = self._gates.get(name)
        if gate is None:
            raise SwitchUnavailable(f"switch {name} is not configured")
        return gate

    @lost_stream_is_unavailable
    async def read_channels(self, name: str) -> list[tuple[ChannelSelector, dict[str, Any]]]:
        """Channel entries as the switch has them, with action parameters and meter."""
        sw = self._connections.switch(name)
        found = []
        async for entry in read_entities(sw, channel_read_request()):
            selector = selector_of_match(entry.match)
            info: dict[str, Any] = {}
            if isinstance(entry.action, fy.P4TableAction):
                info.update({k: int(v) for k, v in (entry.action.args or {}).items()})
            if entry.meter_config is not None:
                m = entry.meter_config
                info.update(cir=m.cir, cburst=m.cburst, pir=m.pir, pburst=m.pburst)
            found.append((selector, info))
        return found

    # ---- the queue bounds the guarantee monitor keeps (terrapin.monitor) ----------------------

    @lost_stream_is_unavailable
    async def sync_queue_bounds(self, name: str, bounds: Sequence[QueueBound]) -> int:
        """Make `queue_bounds` hold exactly `bounds`; returns how many entries were written.
        Read first, so a switch that restarted empty (or a controller that restarted) is
        corrected by the same call."""
        # Bounds staged for set-ups may still be on their way: the table is read after them.
        await self._batchers[name].drained()
        sw = self._connections.switch(name)
        have: dict[tuple[int, int], int] = {}
        async for entry in read_entities(sw, queue_bounds_read_request()):
            cell, bound_us = queue_bound_of(entry)
            have[cell] = bound_us
        updates = self._codec(sw).bound_updates(have, bounds)
        if updates:
            await sw.write(updates)
        return len(updates)

    def stage_bounds(
        self,
        name: str,
        bounds: Sequence[QueueBound],
        installed: Mapping[tuple[int, int], int],
    ) -> asyncio.Future[None]:
        """The queue bounds that change ahead of a channel's entry (from `installed`, what the
        monitor last wrote; a bound entry that is not as it says makes the write fail), queued
        now: before the entry's own write, so in the same WriteRequest under load, or the one
        before. Nothing is read: concurrent set-ups share the switch's writes."""
        updates = self._codec(self._connections.switch(name)).bound_updates(installed, bounds)
        return self._batchers[name].submit(updates) if updates else already_done()


WRITE_BATCH = 2000  # updates per WriteRequest: a few hundred kB, well below gRPC's 4 MB


async def write_raw(sw: fy.Switch, kind: Any, entries: Sequence[p4r.TableEntry], strict: bool = True) -> None:
    for start in range(0, len(entries), WRITE_BATCH):
        chunk = entries[start : start + WRITE_BATCH]
        await sw.write(
            [p4r.Update(type=kind, entity=p4r.Entity(table_entry=pb)) for pb in chunk], strict=strict
        )


async def _sync_groups(
    sw: fy.Switch, have: Mapping[int, tuple[tuple[int, int], ...]], desired: Sequence[p4r.MulticastGroupEntry]
) -> tuple[int, int, int]:
    """Make the switch's multicast groups (`have`, as read) the desired ones; (inserted,
    modified, deleted)."""
    want = {g.multicast_group_id: g for g in desired}
    updates = [
        group_update(p4r.Update.DELETE, p4r.MulticastGroupEntry(multicast_group_id=gid))
        for gid in sorted(have.keys() - want.keys())
    ]
    changed = [g for gid, g in want.items() if gid in have and group_replicas(g) != have[gid]]
    added = [g for gid, g in want.items() if gid not in have]
    updates += [group_update(p4r.Update.MODIFY, g) for g in changed]
    updates += [group_update(p4r.Update.INSERT, g) for g in added]
    if updates:
        await sw.write(updates)
    return len(added), len(changed), len(updates) - len(added) - len(changed)


def as_modify(update: p4r.Update) -> p4r.Update:
    """The same write as a MODIFY where it was an INSERT (an entry or a multicast group made to
    hold what the update says, whether or not it was there)."""
    if update.type != p4r.Update.INSERT:
        return update
    return p4r.Update(type=p4r.Update.MODIFY, entity=update.entity)
