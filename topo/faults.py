"""Faults an experiment or a test injects into a running network: a trunk cut as a fibre is cut
(both ends' interfaces down, so neither switch's port has a carrier) or cut silently (both
ends keep their carrier and drop every frame they would send: a failed transceiver, a
misbehaving middlebox), and mended; and a switch killed outright. Each returns the Unix time it
took effect, for measuring what followed."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import time

from topo.network import RunningNetwork
from topo.p4switch import REPO

CUT_BIN = REPO / "build" / "bin" / "terrapin-cut"


def trunk_interfaces(run: RunningNetwork, a: str, b: str) -> tuple[str, str]:
    """The two interfaces of the trunk between switches `a` and `b` (a's end first)."""
    for sa, port_a, sb, port_b, _rate in run.plan.trunks():
        if (sa, sb) in ((a, b), (b, a)):
            ends = {sa: port_a, sb: port_b}
            return run.net.get(a).intfs[ends[a]].name, run.net.get(b).intfs[ends[b]].name
    raise ValueError(f"no trunk between {a} and {b} in {run.plan.name}")


# The silent cuts in force: terrapin-cut processes, by trunk; each undone when it is stopped.
_SILENT_CUTS: dict[tuple[str, str], subprocess.Popen[str]] = {}


def set_trunk(run: RunningNetwork, a: str, b: str, up: bool, silent: bool = False) -> float:
    """Both ends of the a-b trunk down (cut) or up (mended), one after the other; when the
    first began to change (a cut stops the trunk's traffic from then). `silent` keeps both
    interfaces up, with their carrier, and drops every frame that reaches either
    (build/bin/terrapin-cut): no switch sees its port change, only probes can tell. That is how
    E11 cuts BMv2's trunks: simple_switch_grpc stops handing frames to its controller on every
    port while one of its own interfaces is down (docs/bmv2.md)."""
    began = time.time()
    ends = trunk_interfaces(run, a, b)
    key = (min(a, b), max(a, b))
    if not silent:
        for name in ends:
            state = "up" if up else "down"
            subprocess.run(["ip", "link", "set", "dev", name, state], check=True, capture_output=True)
    elif not up:
        if key in _SILENT_CUTS:
            raise RuntimeError(f"the {a}-{b} trunk is already cut")
        cut = subprocess.Popen([str(CUT_BIN), *ends], stdout=subprocess.PIPE, text=True)
        assert cut.stdout is not None
        if cut.stdout.readline().strip() != "cut":
            cut.kill()
            raise RuntimeError(f"terrapin-cut could not cut {' and '.join(ends)} (exit {cut.wait()})")
        _SILENT_CUTS[key] = cut
        began = time.time()  # the program loads and attaches first: the cut holds from now
    else:
        cut = _SILENT_CUTS.pop(key)
        cut.terminate()
        cut.wait(10)
    return began


@atexit.register
def _mend_all() -> None:
    """A run that stopped mid-cut leaves no process behind."""
    for cut in _SILENT_CUTS.values():
        cut.kill()
    _SILENT_CUTS.clear()


def kill_switch(run: RunningNetwork, name: str) -> float:
    """SIGKILL to switch `name`'s process (a supervised network starts it again); when it was
    sent."""
    process = run.net.get(name).process
    if process is None or process.poll() is not None:
        raise RuntimeError(f"switch {name} is not running")
    os.kill(process.pid, signal.SIGKILL)
    return time.time()
