"""The Sequoia 2000 WAN of topo/sequoia.py with every pair of sites on two link-disjoint paths:
the line of T1s ucb - ucsb - ucla - ucsd closed into a ring by a fifth T1, ucsd - ucb (seed 001's
sites were joined by more lines than its experiment used: the San Diego sites sat on FDDI rings,
and the network was built to survive a line's loss). Same sites, hosts and addresses as sequoia:
a trunk can be cut and every channel still has somewhere to go.

    ucb ---- ucsb
     |         |
    ucsd ---- ucla
"""

from __future__ import annotations

from topo import sequoia
from topo.plan import NetworkPlan


def plan(t1_bps: int = sequoia.T1_RATE_BPS, lan_mbps: float = 100.0, queue_capacity: int = 64) -> NetworkPlan:
    net = sequoia.plan(t1_bps, lan_mbps, queue_capacity)
    net.name = "sequoia-ring"
    net.add_trunk("ucsd", "ucb", t1_bps)
    return net
