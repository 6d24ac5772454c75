"""A protected channel's entries besides its `channels` entry (docs/dataplane.md "Protection"):
the member streams of its copies, its replication group at its first switch, its recovery at its
last, the relay of a copy at a transit switch."""

from __future__ import annotations

from typing import Any

import finsy as fy
from finsy.proto import p4r

from terrapin.p4program import (
    A_RECOVER_COPY,
    A_RELAY_COPY,
    A_REPLICATE,
    A_SEND_COPY,
    EXCESS_DEMOTE,
    EXCESS_DROP,
    T_COPIES,
    T_MEMBER_STREAMS,
    T_PROTECTIONS,
    multicast_group,
)
from terrapin.paths import ChannelEntry


def protection_entries(entry: ChannelEntry) -> list[fy.P4TableEntry]:
    """The table entries a protected channel's hop needs besides its `channels` entry, in the
    order they are written (what an entry's hit uses before the entry): at its first switch each
    copy's member stream then the replication; at its last the recovery of both member streams;
    at a transit switch the relay of its copy (its only entry there). Empty for a channel
    without protection."""
    found = []
    excess = EXCESS_DEMOTE if entry.demote_excess else EXCESS_DROP
    if entry.relay is not None:
        copy = entry.relay
        action = fy.P4TableAction(
            A_RELAY_COPY,
            port=copy.port,
            next_hop_mac=copy.next_hop_mac,
            channel_id=entry.channel_id,
            priority=entry.priority,
            on_yellow=excess,
            on_red=excess,
        )
        meter = fy.P4MeterConfig(cir=entry.cir, cburst=entry.cburst, pir=entry.pir, pburst=entry.pburst)
        found.append(
            fy.P4TableEntry(T_MEMBER_STREAMS, match=_member(copy.member), action=action, meter_config=meter)
        )
    for copy in entry.replicas:
        action = fy.P4TableAction(A_SEND_COPY, next_hop_mac=copy.next_hop_mac)
        found.append(fy.P4TableEntry(T_COPIES, match=_member(copy.member), action=action))
    if entry.replicas:
        action = fy.P4TableAction(A_REPLICATE, group=multicast_group(entry.channel_id))
        match = fy.P4TableMatch(channel_id=entry.channel_id)
        found.append(fy.P4TableEntry(T_PROTECTIONS, match=match, action=action))
    if entry.recovery is not None:
        r = entry.recovery
        for member in r.members:
            action = fy.P4TableAction(
                A_RECOVER_COPY,
                channel_id=entry.channel_id,
                history_length=r.history_length,
                reset_us=r.reset_us,
                tag=r.tag,
            )
            found.append(fy.P4TableEntry(T_MEMBER_STREAMS, match=_member(member), action=action))
    return found


def _member(member: int) -> fy.P4TableMatch:
    return fy.P4TableMatch(member=member)


def replication_group(entry: ChannelEntry) -> p4r.MulticastGroupEntry | None:
    """The multicast group a protected channel's first switch replicates it through: one replica
    per copy, its instance (egress_rid) the copy's member stream. Ports by the deprecated
    `egress_port` number, which every P4Runtime server of v1model reads (PI's too)."""
    if not entry.replicas:
        return None
    replicas = [p4r.Replica(egress_port=c.port, instance=c.member) for c in entry.replicas]
    return p4r.MulticastGroupEntry(multicast_group_id=multicast_group(entry.channel_id), replicas=replicas)


def group_update(kind: Any, group: p4r.MulticastGroupEntry) -> p4r.Update:
    pre = p4r.PacketReplicationEngineEntry(multicast_group_entry=group)
    return p4r.Update(type=kind, entity=p4r.Entity(packet_replication_engine_entry=pre))


def group_replicas(group: p4r.MulticastGroupEntry) -> tuple[tuple[int, int], ...]:
    """A group's replicas as (port, instance), in order, however the switch named the ports."""
    found = []
    for r in group.replicas:
        port = int.from_bytes(r.port, "big") if r.WhichOneof("port_kind") == "port" else r.egress_port
        found.append((port, r.instance))
    return tuple(sorted(found))
