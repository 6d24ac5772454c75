"""Mininet topologies for Terrapin, modelled on the testbeds of the seed papers.

- `christie`: seed 000's video distribution testbed (Figure 16), one router joining two subnets.
- `sequoia`: a small Sequoia 2000 WAN after seed 001 (Figures 2 and 3): routers on T1 links.
- `sequoia-ring`: the same WAN with its line of T1s closed into a ring, so that every pair of
  sites has two link-disjoint paths (a cut trunk leaves somewhere to go).
- `chain`: four switches in a line with a source at each and a common sink (seed 003, Figure 2).
"""

TOPOLOGIES = ("christie", "sequoia", "sequoia-ring", "chain")


def module_name(topology: str) -> str:
    """The module of a topology's plan: topo/<name>.py, a dash in the name an underscore there."""
    return topology.replace("-", "_")
