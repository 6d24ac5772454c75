"""What every experiment script shares (docs/experiments.md): its command line, its network, the
`key: value` figures it prints beside the seed's, the phases `make experiments` shows as
progress, its plots, build/results/E<n>.json and the last line, `E<n> <name>: pass` or
`E<n> <name>: FAIL <reason>`.

    experiment = Experiment(5, "sequoia", title=..., seed_ref=..., seed_numbers=[...])
    args = experiment.parse(argv)                 # --switch, --short, --intf-prefix (+ its own)
    with experiment.network(plan) as run:         # REST on 127.0.0.1:(18080 + n)
        experiment.phase("reserved video under load")
        ...
    experiment.figure("reserved.loss", 0.0, seed="0 (Fig. 5b)")
    return experiment.finish(problems)            # the exit code

    if __name__ == "__main__":
        sys.exit(EXPERIMENT.run(main))            # an unplanned answer is a FAIL verdict too

An answer the script did not plan for — a denial, a 422, a switch's error, any exception — ends
the experiment with `E<n> <name>: FAIL stopped during <phase>: <what was refused and why>`, the
figures printed so far and what it `keep`s (its measurements as they accumulate) in the JSON;
`make experiments` goes on to the next.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from terrapin_tools.policers import PolicerModel, first_hop_policer
from topo.network import PID_DIR, RestError, RunningNetwork, running, wait_ready
from topo.p4switch import REPO, switch_waits
from topo.plan import NetworkPlan
from topo.rtwire import wire_first
from topo.stalls import Stalls, witnessed
from topo.supervise import write_pid

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

RESULTS = REPO / "build" / "results"
_T = TypeVar("_T")


def results_dir(short: bool, switch: str = "terrapin") -> Path:
    """Where a run's results go: build/results, or build/results/short for the shortened runs
    (make test's), so that these never overwrite a full run's figures and report; a run on
    simple_switch_grpc in bmv2/ below that, so that the report can show both switches."""
    base = RESULTS / "short" if short else RESULTS
    return base if switch == "terrapin" else base / switch


PHASE = "phase: "  # the progress lines make experiments reads
REST_PORT_BASE = 18080
SWITCHES = ("terrapin", "bmv2")


@dataclass
class Figure:
    key: str
    value: Any
    seed: str | None = None  # the seed's figure for the same quantity, as the seed gives it


@dataclass
class Experiment:
    number: int
    name: str
    title: str
    seed_ref: str  # the seed's section and figure
    seed_numbers: list[str]  # what the seed reports, quoted
    figures: list[Figure] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    scale: list[str] = field(default_factory=list)  # how this run was scaled, and why
    args: argparse.Namespace = field(default_factory=argparse.Namespace)
    started: float = field(default_factory=time.time)
    _witnessed: list[list[Stalls]] = field(default_factory=list)  # each network's, once it ended
    # what the experiment measured so far (keep), reported if it stops before its verdict
    gathered: dict[str, Any] = field(default_factory=dict)
    current_phase: str = ""
    _verdict_given: bool = False

    @property
    def tag(self) -> str:
        return f"E{self.number}"

    @property
    def work(self) -> Path:
        """Logs and state of this experiment's runs."""
        path = results_dir(self.short, self.switch) / self.tag
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ---- command line --------------------------------------------------------------------------

    def parse(
        self, argv: list[str] | None, add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    ) -> argparse.Namespace:
        parser = argparse.ArgumentParser(description=f"{self.tag}: {self.title} ({self.seed_ref})")
        parser.add_argument("--switch", choices=SWITCHES, default=os.environ.get("SWITCH") or "terrapin")
        parser.add_argument(
            "--short",
            action="store_true",
            default=os.environ.get("SHORT", "") not in ("", "0"),
            help="the shortened run (make test): fewer or shorter runs, the same verdict",
        )
        parser.add_argument(
            "--intf-prefix",
            default=os.environ.get("TERRAPIN_INTF_PREFIX") or None,
            help="name the switches' veths <prefix><device>p<port> (make test judges its leftovers by it)",
        )
        if add_arguments is not None:
            add_arguments(parser)
        self.args = parser.parse_args(argv)
        self._argv = list(sys.argv[1:] if argv is None else argv)
        print(f"{self.tag} {self.name}: {self.title}; {self.seed_ref}", flush=True)
        print(f"switch: {self.args.switch}{' (short run)' if self.args.short else ''}", flush=True)
        return self.args

    @property
    def switch(self) -> str:
        return str(self.args.switch)

    @property
    def short(self) -> bool:
        return bool(self.args.short)

    def command(self) -> str:
        """This run, as a command to repeat it."""
        return shlex.join(["sudo", "build/venv/bin/python", "-m", f"experiments.{self.module}", *self._argv])

    @property
    def module(self) -> str:
        return Path(sys.modules["__main__"].__file__ or f"e{self.number}").stem

    # ---- the network ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def network(
        self,
        plan: NetworkPlan,
        *,
        admission: dict[str, Any] | None = None,
        controller_extra: dict[str, Any] | None = None,
    ) -> Iterator[RunningNetwork]:
        """The plan running with the controller (REST on 127.0.0.1:(18080 + n)), ready; torn down
        on leaving. `make stop` ends it as it ends `make run`: by the PIDs in build/run/pids."""
        self.phase(f"starting {plan.name} on {self.switch}")
        signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
        runner_pid = PID_DIR / "runner.pid"
        write_pid(runner_pid, os.getpid())
        # Each run starts from an empty store: a run that was killed leaves its reservations
        # there, and the controller would restore them into this one (409 "already reserved").
        shutil.rmtree(self.work / "state", ignore_errors=True)
        try:
            with (
                wire_first(),
                witnessed(self.work / "stalls") as found,
                running(
                    plan,
                    switch_kind=self.switch,
                    rest_port=REST_PORT_BASE + self.number,
                    state_dir=self.work / "state",
                    intf_prefix=self.args.intf_prefix,
                    pid_dir=PID_DIR,
                    admission=admission,
                    controller_extra=controller_extra,
                ) as run,
            ):
                self._witnessed.append(found)
                wait_ready(run)
                yield run
                self._switch_waits(run)
        finally:
            runner_pid.unlink(missing_ok=True)

    def _switch_waits(self, run: RunningNetwork) -> None:
        """Each terrapin-switch's longest waits (topo/p4switch.py switch_waits) as figures, so
        that a packet late with no stall of the machine can be placed in a switch afterwards."""
        for name, waits in switch_waits(run.net.switches).items():
            self.figure(f"switch_waits.{name}", waits)

    @property
    def stalls(self) -> Stalls | None:
        """When the machine stalled during this experiment's networks so far (topo/stalls.py);
        None if the probes could not run."""
        found = [s for each in self._witnessed for s in each]
        if not found:
            return None
        return Stalls.merged([list(s.intervals) for s in found])

    # ---- reporting -------------------------------------------------------------------------------

    def phase(self, what: str) -> None:
        self.current_phase = what
        print(f"{PHASE}{what}", flush=True)

    def keep(self, name: str, measurements: _T) -> _T:
        """Registers `measurements` (a list or dict the experiment fills as it goes) under `name`:
        if the experiment stops on an answer it did not plan for, what they hold by then is
        printed and written with the FAIL verdict (run)."""
        self.gathered[name] = measurements
        return measurements

    def run(self, main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
        """`main(argv)`'s exit code; an exception from it (a denial it did not plan for, a 422, a
        switch's error, a sender that failed) is a FAIL verdict naming what was refused and why,
        with the figures printed so far and what was kept, so that a run of all ten still
        reports this one and goes on (issue 22). The network has been torn down by then: the
        exception left its `with` block."""
        try:
            return main(argv)
        except Exception as error:
            if self._verdict_given or not hasattr(self.args, "switch"):
                raise  # before parse() nothing is known to report; after finish() it is reported
            traceback.print_exc(file=sys.stdout)  # where it happened, in E<n>.log
            what = refusal(error)
            for name, measurements in self.gathered.items():
                text = json.dumps(jsonable(measurements), default=str)
                self.figure(f"so_far.{name}", text if len(text) <= 2000 else text[:2000] + " ...")
            during = f" during {self.current_phase!r}" if self.current_phase else ""
            stopped = {"phase": self.current_phase, "error": what, "exception": type(error).__name__}
            return self.finish(
                [f"stopped{during}: {what}"], {"stopped": stopped, "so_far": jsonable(self.gathered)}
            )

    def note_scale(self, text: str) -> None:
        """How this run departs from the seed's setting, and why; printed and reported."""
        self.scale.append(text)
        print(f"scale: {text}", flush=True)

    def figure(self, key: str, value: Any, seed: str | None = None) -> Any:
        """Prints `key: value` (and the seed's figure beside it) and keeps it for the report."""
        if isinstance(value, float):
            value = round(value, 4)
        self.figures.append(Figure(key, value, seed))
        print(f"{key}: {value}" + (f"    seed: {seed}" if seed is not None else ""), flush=True)
        return value

    def plot_path(self, what: str) -> Path:
        path = results_dir(self.short, self.switch) / f"{self.tag}-{what}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.plots.append(path.name)
        print(f"plot: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)
        return path

    def save_plot(self, fig: PlotFigure, what: str) -> None:
        """Lays the figure out, writes it as build/results/E<n>-<what>.png and lets pyplot forget it."""
        import matplotlib.pyplot as plt  # only experiments that plot pay for pyplot

        fig.tight_layout()
        fig.savefig(self.plot_path(what), dpi=110)
        plt.close(fig)

    def finish(self, problems: list[str], data: dict[str, Any] | None = None) -> int:
        """Writes build/results/E<n>.json, prints the verdict line; the exit code."""
        verdict = "pass" if not problems else "FAIL"
        stalls = self.stalls
        self.figure("machine_stalls", stalls.summary() if stalls else "not witnessed (needs root)")
        record = {
            "experiment": self.tag,
            "name": self.name,
            "title": self.title,
            "seed_ref": self.seed_ref,
            "seed_numbers": self.seed_numbers,
            "switch": self.switch,
            "short": self.short,
            "scale": self.scale,
            "command": self.command(),
            "make_command": " ".join(
                ["make experiments", f"ONLY={self.tag}"]
                + (["SHORT=1"] if self.short else [])
                + ([f"SWITCH={self.switch}"] if self.switch != "terrapin" else [])
            ),
            "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "elapsed_s": round(time.time() - self.started, 1),
            "figures": [asdict(f) for f in self.figures],
            "plots": self.plots,
            "verdict": verdict,
            "problems": problems,
            "data": data or {},
        }
        self._verdict_given = True
        results = results_dir(self.short, self.switch)
        results.mkdir(parents=True, exist_ok=True)  # a run stopped early made none
        (results / f"{self.tag}.json").write_text(json.dumps(record, indent=1, default=str))
        line = f"{self.tag} {self.name}: {verdict}"
        print(line if not problems else f"{line} {'; '.join(problems)}", flush=True)
        return 0 if not problems else 1


def refusal(error: BaseException) -> str:
    """What an answer nobody planned for refused, and why, in one line: the call and its status
    with the controller's own words (each violated constraint of a denial, each invalid field
    of a 422, the switch and its message of a 502/503), or the exception's type and text."""
    if isinstance(error, RestError):
        body = error.body
        label = str(body.get("error", "")) if isinstance(body, dict) else ""
        call = f"{error.method} {error.path} refused ({error.status}{' ' + label if label else ''})"
        return f"{call}: {_why(body)}"
    if isinstance(error, subprocess.CalledProcessError):
        output = error.stderr or error.output or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        tail = " ".join(text.strip().splitlines()[-3:])
        command = error.cmd if isinstance(error.cmd, str) else shlex.join(str(c) for c in error.cmd)
        return f"`{command}` failed with exit status {error.returncode}" + (f": {tail}" if tail else "")
    return f"{type(error).__name__}: {error}"


def _why(body: Any) -> str:
    if not isinstance(body, dict):
        return str(body)
    if body.get("error") == "admission denied":
        # The message names the first constraint; the others that failed too are listed by name.
        named = {str(v.get("constraint")) for v in body.get("violations", [])}
        others = sorted(named - {str(body.get("constraint"))})
        return str(body.get("message")) + (f" (also {', '.join(others)})" if others else "")
    detail = body.get("detail")
    if isinstance(detail, list) and all(isinstance(d, dict) and "field" in d for d in detail):
        return "; ".join(f"{d['field']}: {d.get('message')}" for d in detail)
    if "switch" in body and "message" in body:
        return f"{body['switch']}: {body['message']}"
    for key in ("message", "detail"):
        if body.get(key):
            return str(body[key])
    return json.dumps(body)


# A kept measurement's per-packet lists (thousands of timestamps) are cut to this many items in a
# stopped experiment's record: it says what was measured, the logs keep the rest.
LIST_ITEMS_KEPT = 20


def jsonable(value: Any) -> Any:
    """`value` with its dataclasses as dicts and its long lists cut, for the record of an
    experiment that stopped (anything else as str)."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable({f.name: getattr(value, f.name) for f in fields(value)})
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) > LIST_ITEMS_KEPT:
            return {"items": len(value), "first": [jsonable(v) for v in value[:LIST_ITEMS_KEPT]]}
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def pyplot() -> Any:
    """matplotlib's pyplot without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# How far before a packet's arrival a stall may have held it (topo/stalls.py): longer than any
# stall seen on these VMs (~3 ms) plus the path's own delay.
STALL_LOOKBACK_NS = 10_000_000


def stall_slack(stalls: Stalls | None, t0_ns: int) -> Callable[[int], int]:
    """For most_over_envelope: how much of the time just before an arrival at `start_us` (µs after
    `t0_ns`) the machine was stalled, in µs. A packet held in a stalled host or switch between
    the policer and the receiver's timestamp arrives that much later, and the packets after it
    less far apart than the policer passed them."""
    if stalls is None:
        return lambda _start_us: 0

    def slack(start_us: int) -> int:
        at = t0_ns + start_us * 1000
        return stalls.overlap(at - STALL_LOOKBACK_NS, at) // 1000

    return slack


def sending_stall_slack(stalls: Stalls | None, t0_ns: int) -> Callable[[int], int]:
    """For a check by send times: how much of the time around a packet sent at `start_us` (µs
    after `t0_ns`) the machine was stalled, in µs. A stall then stamps the packet that much
    later than the switch's jitter allows, so the policer judged it that much later."""
    if stalls is None:
        return lambda _start_us: 0

    def slack(start_us: int) -> int:
        at = t0_ns + start_us * 1000
        return stalls.overlap(at - STALL_LOOKBACK_NS, at + STALL_LOOKBACK_NS) // 1000

    return slack


@dataclass(frozen=True)
class Promise:
    """What a reservation promises about the arrivals its receiver sees (docs/controller.md
    "Jitter"): its first switch's policer passes what keeps the envelope over t + k·τ (τ its
    tolerance, k 2 for a jumping window, 1 otherwise), and the path then delays each packet by
    its fixed latency plus at most the end-to-end bound. So the arrivals keep α(t + J) with
    J = k·τ + the bound: network calculus's output bound of a variable delay, with J taken
    from the admitted bounds rather than a constant."""

    tolerance_us: int
    delay_us: int
    burst: int = 0  # the allocation's: what the first switch's meter holds, its tolerance in it

    @classmethod
    def of(cls, reservation: dict[str, Any]) -> Promise:
        """From a POST /reservations answer."""
        allocation = reservation["allocation"]
        return cls(
            int(allocation["tolerance_us"]), int(allocation["worst_case_delay_us"]), int(allocation["burst"])
        )

    def policer(self, envelope: Any) -> Callable[[], PolicerModel]:
        """The channel's first-hop policer as a model to replay a run through (FlowRun.
        lost_outside_stalls), for a ChannelEnvelope as requested."""
        return functools.partial(first_hop_policer, envelope, self.burst, self.tolerance_us)

    def shift_us(self, envelope: Any) -> int:
        """J for a ChannelEnvelope: how much earlier than its envelope allows the receiver may see
        a packet."""
        from terrapin.admission.policers import tolerance_spans

        return tolerance_spans(envelope.policer) * self.tolerance_us + self.delay_us


def most_over_envelope(
    arrivals_us: list[int],
    packet_bytes: int,
    envelope: Any,
    promise: Promise,
    slack_us: Callable[[int], int] = lambda _start_us: 0,
) -> int:
    """The most that packets of `packet_bytes` arriving at `arrivals_us` (sorted) exceed the
    policer's A*(t) (terrapin.admission.policers.arrival_bytes of `envelope`, a ChannelEnvelope)
    over any interval, in bytes (≤ 0: kept). Each interval is allowed the promise's J longer
    (α(t + J)), and `slack_us(start)` more for the machine's stalls just before its first
    arrival (stall_slack)."""
    from terrapin.admission.policers import arrival_bytes

    worst = -(10**12)
    for i, start in enumerate(arrivals_us):
        allowed = promise.delay_us + slack_us(start)
        for j in range(i, len(arrivals_us)):
            reach = arrival_bytes(envelope, arrivals_us[j] - start + allowed, promise.tolerance_us)
            worst = max(worst, (j - i + 1) * packet_bytes - reach)
    return worst
