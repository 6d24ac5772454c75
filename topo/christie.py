"""Seed 000's testbed (Christie 1995, Figure 16): the router "terrapin" joins subnet A, three
hosts, and subnet B, two hosts, over FDDI rings (100 Mbit/s, MTU 4,500).

Each host gets its own router port, so the router's egress port towards a host is the bottleneck
the seed's experiments congest. In the seed's roles, a1 is Gluttony (the video transmitter) and b1
is Lust (the receiver); a2, a3 and b2 carry background traffic.
"""

from __future__ import annotations

from topo.plan import NetworkPlan, subnet_hosts

FDDI_RATE_BPS = 100_000_000
FDDI_MTU = 4500


def plan(rate_mbps: float = 100.0, mtu: int = FDDI_MTU, queue_capacity: int = 64) -> NetworkPlan:
    rate = int(rate_mbps * 1_000_000)
    net = NetworkPlan("christie", mtu=mtu, queue_capacity=queue_capacity)
    net.add_switch("terrapin")
    for subnet, names in (("10.0.1.0/24", ("a1", "a2", "a3")), ("10.0.2.0/24", ("b1", "b2"))):
        addresses, gateway = subnet_hosts(subnet)
        for name, ip in zip(names, addresses, strict=False):
            net.add_host(name, "terrapin", ip, gateway, rate)
    return net
