"""A small Sequoia 2000 WAN after seed 001 (Figures 2 and 3): campus routers joined by
1.5 Mbit/s T1 leased lines, end hosts on fast campus LANs.

Routers ucb - ucsb - ucla - ucsd in a line. The seed's experiment sends vic video from
faith.berkeley to paola.ucsd while blizzard.ucla loads the T1 links towards grayling.berkeley, so
the UCB-side T1 is the congestion point.
"""

from __future__ import annotations

import itertools

from topo.plan import NetworkPlan, subnet_hosts

T1_RATE_BPS = 1_544_000
SITES = (
    ("ucb", "10.1.1.0/24", ("faith", "propaganda", "grayling")),
    ("ucsb", "10.1.2.0/24", ("ucsbhost",)),
    ("ucla", "10.1.3.0/24", ("blizzard",)),
    ("ucsd", "10.1.4.0/24", ("paola", "venezia")),
)


def plan(t1_bps: int = T1_RATE_BPS, lan_mbps: float = 100.0, queue_capacity: int = 64) -> NetworkPlan:
    net = NetworkPlan("sequoia", mtu=1500, queue_capacity=queue_capacity)
    lan = int(lan_mbps * 1_000_000)
    for site, subnet, names in SITES:
        net.add_switch(site)
        addresses, gateway = subnet_hosts(subnet)
        for name, ip in zip(names, addresses, strict=False):
            net.add_host(name, site, ip, gateway, lan)
    for (a, _, _), (b, _, _) in itertools.pairwise(SITES):
        net.add_trunk(a, b, t1_bps)
    return net
