"""`trex_stf_lib.trex_client` as far as upstream's ptf_runner.py imports it: a CTRexClient that
refuses to be made (see the package's docstring)."""

from __future__ import annotations

from typing import NoReturn

MESSAGE = (
    "TRex is not available here: trex_stf_lib is Terrapin's stand-in (fabric-ptf/stubs), which "
    "only lets ptf_runner.py import it. The line-rate tests (--trex-address) need a TRex server "
    "and Cisco's client library; the unary tests that make fabric-ptf runs do not use it."
)


class TRexUnavailableError(RuntimeError):
    """Raised by every use of the stand-in."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: {MESSAGE}")


class CTRexClient:
    """Refuses construction, so a line-rate run fails at its first step, saying why."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TRexUnavailableError("CTRexClient()")


def __getattr__(name: str) -> NoReturn:
    # `from trex_stf_lib.trex_client import Other` fails naming what was asked for.
    if name.startswith("__"):
        raise AttributeError(name)
    raise ImportError(f"trex_stf_lib.trex_client.{name}: {MESSAGE}")
