"""Stand-in for TRex's `trex_stf_lib` (Cisco TRex's stateful client library).

Upstream's ptf_runner.py imports `trex_stf_lib.trex_client.CTRexClient` at its top, but only its
line-rate mode (`--trex-address`, a TRex server on real hardware) uses it. This package lets
that import succeed; anything that actually uses it stops with TRexUnavailableError, which says
why. It is put on the fabric-ptf venv's path by fabric-ptf/setup.sh.
"""

from trex_stf_lib.trex_client import CTRexClient, TRexUnavailableError

__all__ = ["CTRexClient", "TRexUnavailableError"]
