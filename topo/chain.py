"""Four switches in a line, a source at each and a common sink at the end, after seed 003
(Xunet 2 simulations, Figure 2): cross traffic joins at every switch, so the trunk nearest the
sink carries the most and queues build there.

The seed's links run at 45 Mbit/s; the default here is scaled down to what the software switch
and a 2-core machine carry comfortably while still saturating links.
"""

from __future__ import annotations

import itertools

from topo.plan import NetworkPlan, subnet_hosts

SWITCHES = ("s1", "s2", "s3", "s4")


def plan(rate_mbps: float = 45.0, queue_capacity: int = 64) -> NetworkPlan:
    rate = int(rate_mbps * 1_000_000)
    net = NetworkPlan("chain", mtu=1500, queue_capacity=queue_capacity)
    for index, name in enumerate(SWITCHES, start=1):
        net.add_switch(name)
        addresses, gateway = subnet_hosts(f"10.2.{index}.0/24")
        net.add_host(f"src{index}", name, addresses[0], gateway, rate)
    addresses, gateway = subnet_hosts("10.2.5.0/24")
    net.add_host("sink", SWITCHES[-1], addresses[0], gateway, rate)
    for a, b in itertools.pairwise(SWITCHES):
        net.add_trunk(a, b, rate)
    return net
