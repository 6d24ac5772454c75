"""1+1 protection, the controller's side (docs/controller.md "Protection"; the data plane's is
IEEE 802.1CB frame replication and elimination, docs/dataplane.md "Protection").

A protected channel is admitted on two paths that share no trunk (Topology.disjoint_paths; the
admission ledger tests and holds both, AdmissionLedger._decide_pair). This module says what each
switch of the two paths holds for it, and how a restoration treats it: it keeps running while
either path is whole, so it is moved only onto a pair that is whole again, and down only when
neither path is whole and no pair admits it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from terrapin.admission import Allocation
from terrapin.admission.model import PortId
from terrapin.constants import CHANNEL_IN_RECOVERED
from terrapin.p4program import member_streams
from terrapin.paths import (
    ChannelEntry,
    ChannelSelector,
    Copy,
    NoDisjointPaths,
    NoRoute,
    PathPair,
    Recovery,
    Topology,
)
from terrapin.store import ACTIVE, Reservation, Transaction
from terrapin.switches import entry_for_hop

# Sequence recovery resets after this much silence at least: a new copy is then taken whatever
# its number. Twice the slower path's bound, so that no copy still on its way is mistaken.
MIN_RESET_US = 20_000


def disjoint_pair(
    topology: Topology, selector: ChannelSelector, first_switch: str | None = None
) -> PathPair | NoDisjointPaths:
    """The two disjoint paths a protected channel would be admitted on now, or why none (a pair
    starts at the source's own switch: an in-band request admitted further on has none)."""
    try:
        if first_switch is not None and first_switch != topology.host(selector.src).switch:
            raise NoDisjointPaths(f"protection starts at the source's switch, not at {first_switch}")
        return topology.disjoint_paths(selector.src, selector.dst)
    except NoDisjointPaths as exc:
        return exc


def protected_entries(
    record: Reservation, topology: Topology, history_length: int, tag: int
) -> list[ChannelEntry]:
    """A protected channel's entries: at its first switch the channel's policer and both copies
    (member streams 2c+1 and 2c+2, each to its path's first next hop); at each transit switch of
    either path the relay of that path's copy; at its last switch the recovery of both and the
    hop to the destination."""
    alloc = record.allocation
    dst = record.selector.dst
    members = member_streams(record.channel_id)
    copies: list[Copy] = []
    relays: list[ChannelEntry] = []
    for member, path in zip(members, alloc.paths, strict=True):
        for index, hop in enumerate(path[:-1]):
            copy = Copy(member, hop.port.port, topology.next_hop_mac(hop.port.switch, hop.port.port, dst))
            if index == 0:
                copies.append(copy)
                continue
            entry = entry_for_hop(
                hop.port.switch, record.selector, record.channel_id, hop, record.demote_excess, tagged=True
            )
            relays.append(replace(entry, relay=copy))
    first, last = alloc.hops[0], alloc.hops[-1]
    head = entry_for_hop(
        first.port.switch,
        record.selector,
        record.channel_id,
        first,
        record.demote_excess,
        edge=alloc,
        tag=tag,
    )
    # What reaches the last switch's `channels` entry is what its sequence recovery kept.
    tail = entry_for_hop(
        last.port.switch,
        record.selector,
        record.channel_id,
        last,
        record.demote_excess,
        in_port=CHANNEL_IN_RECOVERED,
    )
    skew_us = alloc.protected_delay_us or alloc.worst_case_delay_us
    recovery = Recovery(members, history_length, max(2 * skew_us, MIN_RESET_US), tag)
    return [replace(head, replicas=tuple(copies)), *relays, replace(tail, recovery=recovery)]


def whole_paths(allocation: Allocation, dead: Collection[PortId]) -> list[list[PortId]]:
    """The paths of `allocation` (each its egress ports) that leave by no port in `dead`."""
    paths = [[hop.port for hop in path] for path in allocation.paths]
    return [p for p in paths if not any(port in dead for port in p)]


def readmit_protected(txn: Transaction, before: Reservation, topology: Topology) -> Allocation | str | None:
    """A protected reservation after the trunks changed: None if it stays as it is (both paths
    whole; or one, and no pair admits it: its whole path carries it, unprotected until the other
    is back), its new allocation on a pair whole again (keeping the whole path if there is one,
    so that its frames on that path never stop), or why it is down (taken out of the ledger)."""
    key = before.key
    dead = {end for trunk in topology.down for end in trunk.ends}
    whole = whole_paths(before.allocation, dead)
    if before.state == ACTIVE and len(whole) == len(before.allocation.paths):
        return None
    why = "no two disjoint paths"
    for keep in [whole[0], None] if whole else [None]:
        try:
            pair = topology.disjoint_paths(before.selector.src, before.selector.dst, keep=keep)
        except (NoDisjointPaths, NoRoute) as exc:
            why = str(exc)
            continue
        decision = txn.readmit(key, pair.first, before.allocation.requested, second=pair.second)
        if isinstance(decision, Allocation):
            return decision
        why = f"no pair admits it: {decision.primary.describe()}"
        if before.state == ACTIVE:
            txn.reinstate(before.allocation)  # readmit took it out
    if before.state == ACTIVE and whole:
        return None
    txn.unadmit(key)
    return why
