"""Mininet topologies for Terrapin, modelled on the testbeds of the seed papers.

- `christie`: seed 000's video distribution testbed (Figure 16), one router joining two subnets.
- `sequoia`: a small Sequoia 2000 WAN after seed 001 (Figures 2 and 3): routers on T1 links.
- `chain`: four switches in a line with a source at each and a common sink (seed 003, Figure 2).
"""

TOPOLOGIES = ("christie", "sequoia", "chain")
