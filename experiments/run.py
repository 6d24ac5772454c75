"""`make experiments`: runs the seeds' experiments one after another, shows which one is running,
its phase, the time spent and an estimate of the time left, and writes build/results/report.html
from what each wrote to build/results/E<n>.json.

    make experiments [ONLY=E3,E5] [SHORT=1] [SWITCH=bmv2] [ATTEMPTS=3] [RUNS=10]

Each experiment is its own process (experiments/e<n>_*.py, started as a module from the
repository root), so one that crashes or hangs is reported as FAIL and the rest still run. Its
whole output goes to build/results/E<n>.log. With SHORT=1 all of it goes to build/results/short/
instead, so make test never overwrites a full run's figures. The last line printed is `N passed,
M failed` (make test counts it).

ATTEMPTS=n runs a failed experiment again, up to n runs in all; make test uses 2, for a load
spike on a shared machine. A verdict on a guarantee is judged on the first run: every
experiment's line says how many runs it took and what the machine did meanwhile (the CPU time
its host took, the stalls it saw), and the whole run fails if more than one experiment needed a
second run without a measured load spike (docs/experiments.md). Each failed run's verdict stays
in the output and its log in E<n>.attempt<k>.log. RUNS=n runs the whole set n times in a row and
appends every run's verdicts to series.txt beside the results (issue 33 asks for 10 in a row).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.harness import PHASE, SWITCHES, results_dir
from topo.p4switch import REPO


@dataclass(frozen=True)
class Entry:
    tag: str
    module: str
    seconds: dict[bool, float]  # the expected run time, full and short (for the estimate)
    bmv2: bool = True  # runs on BMv2 as well (docs/experiments.md says why not)


EXPERIMENTS = (  # the estimates: one run of each on the 2-core VM
    Entry("E1", "e1_demo", {False: 70, True: 40}),
    Entry("E2", "e2_priority_throughput", {False: 105, True: 45}),
    Entry("E3", "e3_allocated_rate", {False: 100, True: 45}),
    Entry("E4", "e4_queue_depth", {False: 75, True: 35}),
    Entry("E5", "e5_sequoia", {False: 90, True: 50}),
    Entry("E6", "e6_setup_latency", {False: 35, True: 20}),
    Entry("E7", "e7_classes", {False: 50, True: 35}),
    Entry("E8", "e8_rate_control", {False: 45, True: 30}),
    Entry("E9", "e9_best_effort", {False: 60, True: 40}),
    Entry("E10", "e10_policers", {False: 45, True: 30}),
    Entry("E11", "e11_cut", {False: 75, True: 45}),
)
TIMEOUT_FACTOR = 4  # an experiment taking this many times its estimate (+ 2 min) is stopped


def select(only: str) -> list[Entry]:
    if not only.strip():
        return list(EXPERIMENTS)
    wanted = [w.strip().upper() for w in only.replace(" ", ",").split(",") if w.strip()]
    known = {e.tag: e for e in EXPERIMENTS}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"ONLY: no experiment {', '.join(unknown)} (known: {', '.join(known)})")
    return [known[w] for w in wanted]


class Progress:
    """One status line: experiment i/n, its phase, elapsed and estimated time left."""

    def __init__(self, entries: list[Entry], short: bool, series: str = "") -> None:
        self.entries, self.short, self.series = entries, short, series
        self.started = time.monotonic()
        self.index, self.phase, self.entry_started = 0, "", self.started
        self.tty = sys.stderr.isatty()
        self._lock = threading.Lock()

    def remaining(self) -> float:
        now = time.monotonic()
        current = self.entries[self.index].seconds[self.short]
        left = max(0.0, current - (now - self.entry_started))
        return left + sum(e.seconds[self.short] for e in self.entries[self.index + 1 :])

    def show(self, phase: str | None = None) -> None:
        with self._lock:
            if phase is not None:
                self.phase = phase
            entry = self.entries[self.index]
            elapsed = time.monotonic() - self.started
            line = (
                f"[{self.series}{entry.tag} {self.index + 1}/{len(self.entries)}] {self.phase}"
                f"  elapsed {clock(elapsed)}, about {clock(self.remaining())} left"
            )
            if self.tty:
                sys.stderr.write("\r\033[K" + line[:150])
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def tick(self, stop: threading.Event) -> None:
        while not stop.wait(5 if self.tty else 60):
            self.show()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def run_one(entry: Entry, progress: Progress, extra: list[str], results: Path) -> tuple[str, str]:
    """(verdict line, log path) of one experiment."""
    log = results / f"{entry.tag}.log"
    stale = results / f"{entry.tag}.json"
    stale.unlink(missing_ok=True)  # a crash must not leave the last run's verdict standing
    command = [sys.executable, "-u", "-m", f"experiments.{entry.module}", *extra]
    progress.show(f"starting {entry.module}")
    verdict = ""
    timeout = entry.seconds[False] * TIMEOUT_FACTOR + 120
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        timer = threading.Timer(timeout, process.terminate)
        timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                out.write(line)
                text = line.rstrip("\n")
                if text.startswith(PHASE):
                    progress.show(text[len(PHASE) :])
                elif text.startswith(f"{entry.tag} ") and (": pass" in text or ": FAIL" in text):
                    verdict = text
            code = process.wait()
        finally:
            timer.cancel()
    if not verdict or (code != 0 and ": pass" in verdict):
        verdict = (
            f"{entry.tag}: FAIL exited with status {code} before its verdict (log {log.relative_to(REPO)})"
        )
    return verdict, str(log.relative_to(REPO))


# A failed run during which the hypervisor took at least this share of the machine's CPU time
# (steal) is a load spike: a retry it needed does not count against the run. Quiet runs on the
# 2-vCPU VMs: 0.0-0.3% per experiment (2026-12-03, 22 runs on both switches); a busy host gives
# several %.
LOAD_SPIKE_STEAL_PCT = 1.0


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) of the machine's CPU time so far, in clock ticks (/proc/stat's first line);
    None where there is no /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
    return ticks[7], sum(ticks)


@dataclass(frozen=True)
class Machine:
    """What the machine did during one run: the share of its CPU time the hypervisor gave to
    others (steal, %) and the stalls the experiment's witness saw (its `machine_stalls` figure,
    topo/stalls.py). CI keeps only the verdict lines, so they carry it."""

    steal_pct: float | None
    stalls: str = ""

    @property
    def load_spike(self) -> bool:
        return self.steal_pct is not None and self.steal_pct >= LOAD_SPIKE_STEAL_PCT

    def __str__(self) -> str:
        parts = []
        if self.steal_pct is not None:
            spike = f" (a load spike: {LOAD_SPIKE_STEAL_PCT:g}% or more)" if self.load_spike else ""
            parts.append(f"the host took {self.steal_pct:.1f}% of the CPU{spike}")
        if self.stalls:
            parts.append(self.stalls)
        return "; ".join(parts) or "the machine not measured"


def machine_during(before: tuple[int, int] | None, log: Path) -> Machine:
    after = cpu_ticks()
    steal = None
    if before is not None and after is not None and after[1] > before[1]:
        steal = 100 * (after[0] - before[0]) / (after[1] - before[1])
    stalls = ""
    with contextlib.suppress(OSError):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("machine_stalls:"):
                stalls = line.removeprefix("machine_stalls:").strip()
    return Machine(steal, stalls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", default=os.environ.get("ONLY", ""))
    parser.add_argument("--short", action="store_true", default=os.environ.get("SHORT", "") not in ("", "0"))
    parser.add_argument("--switch", choices=SWITCHES, default=os.environ.get("SWITCH") or "terrapin")
    parser.add_argument(
        "--attempts",
        type=int,
        default=int(os.environ.get("ATTEMPTS") or 1),
        help="run a failed experiment again, up to this many runs in all (make test: 2); every"
        " failed run's verdict is printed and its log kept as E<n>.attempt<k>.log",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=int(os.environ.get("RUNS") or 1),
        help="run the whole set this many times in a row (a series): each run's verdicts are"
        " appended to series.txt in the results folder, and the series fails if any run did",
    )
    args = parser.parse_args(argv)
    entries = select(args.only)
    if args.switch == "bmv2":
        skipped = [e.tag for e in entries if not e.bmv2]
        if skipped:
            print(f"not on BMv2 (docs/experiments.md says why): {', '.join(skipped)}", flush=True)
        entries = [e for e in entries if e.bmv2]
    results = results_dir(args.short, args.switch)
    results.mkdir(parents=True, exist_ok=True)
    if args.runs <= 1:
        _passed, failed, _lines = run_set(entries, args, results)
        return 0 if failed == 0 else 1
    return run_series(entries, args, results)


def run_series(entries: list[Entry], args: argparse.Namespace, results: Path) -> int:
    """`RUNS=n`: the whole set n times in a row, each run judged as a single one is. Every run's
    lines are appended to series.txt as they come, so a series stopped part-way keeps what it
    showed; the last lines say which runs passed."""
    record = results / "series.txt"
    command = f"make experiments SWITCH={args.switch} ATTEMPTS={args.attempts}" + (
        " SHORT=1" if args.short else ""
    )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with record.open("a") as out:
        out.write(f"\n# series of {args.runs}: {command} ({stamp})\n")
    outcomes = []
    for run in range(1, args.runs + 1):
        print(f"== run {run} of {args.runs} ==", flush=True)
        started = time.strftime("%H:%M", time.gmtime())
        passed, failed, lines = run_set(entries, args, results, series=f"run {run}/{args.runs} ")
        outcome = f"run {run} ({started} UTC): {passed} passed, {failed} failed"
        outcomes.append((outcome, failed == 0))
        with record.open("a") as out:
            out.write(f"## {outcome}\n" + "".join(f"{line}\n" for line in lines))
    good = sum(1 for _outcome, ok in outcomes if ok)
    summary = f"series: {good} of {args.runs} runs passed"
    with record.open("a") as out:
        out.write(f"{summary}\n")
    shown = record.relative_to(REPO) if record.is_relative_to(REPO) else record
    print("\n".join(outcome for outcome, _ok in outcomes))
    print(f"{summary} (every run's verdicts: {shown})")
    return 0 if good == args.runs else 1


def run_set(
    entries: list[Entry], args: argparse.Namespace, results: Path, series: str = ""
) -> tuple[int, int, list[str]]:
    """Runs each experiment (again, up to ATTEMPTS runs, when it fails); (passed, failed, the
    verdict lines and the run's last lines as printed)."""
    extra = [f"--switch={args.switch}", *(["--short"] if args.short else [])]
    progress = Progress(entries, args.short, series)
    stop = threading.Event()
    threading.Thread(target=progress.tick, args=(stop,), daemon=True).start()
    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    verdicts = []
    attempts: dict[str, int] = {}  # tag: runs it took
    spikes: list[str] = []  # a tag for each failed run during a load spike
    unexplained: list[str] = []  # tags that needed a run again without a load spike
    started_at = time.time()
    for index, entry in enumerate(entries):
        progress.index, progress.entry_started = index, time.monotonic()
        failed_runs: list[str] = []
        spiked = 0  # of the failed runs, those during a load spike
        for attempt in range(1, max(1, args.attempts) + 1):
            before = cpu_ticks()
            verdict, log = run_one(entry, progress, extra, results)
            machine = machine_during(before, REPO / log)
            progress.done()
            if ": pass" in verdict or attempt >= args.attempts:
                break
            kept = results / f"{entry.tag}.attempt{attempt}.log"
            (REPO / log).replace(kept)
            kept = kept.relative_to(REPO) if kept.is_relative_to(REPO) else kept
            say(f"{verdict}  [run {attempt} of up to {args.attempts}; log {kept}; {machine}]")
            failed_runs.append(verdict)
            if machine.load_spike:
                spiked += 1
                spikes.append(entry.tag)
        runs = len(failed_runs) + 1
        verdict += f"  [{runs} run{'s' if runs > 1 else ''}"
        verdict += f"; {len(failed_runs)} failed before it, printed above" if failed_runs else ""
        verdict += f"; {machine}]"
        say(verdict)
        verdicts.append(verdict)
        attempts[entry.tag] = runs
        if len(failed_runs) > spiked:
            unexplained.append(entry.tag)
    stop.set()
    report = write_report([e.tag for e in entries], args, started_at, results_dir(args.short))
    print(f"report: {report.relative_to(REPO)}")
    say("runs: " + ", ".join(f"{tag} {runs}" for tag, runs in attempts.items()))
    passed = sum(1 for v in verdicts if ": pass" in v)
    failed = len(verdicts) - passed
    if spikes:
        say(
            f"load spikes (the host took {LOAD_SPIKE_STEAL_PCT:g}% of the CPU or more during a failed"
            f" run, not counted below): {', '.join(spikes)}"
        )
    if len(unexplained) > 1:
        # One retry the machine does not explain may be a spike it did not measure; two are a
        # guarantee judged by luck, which a run must not pass on.
        needed = ", ".join(unexplained)
        say(
            f"FAIL {len(unexplained)} experiments needed more than one run with no load spike"
            f" ({needed}): at most one may"
        )
        failed += 1
    say(f"{passed} passed, {failed} failed")
    return passed, failed, printed


# ---- the report ----------------------------------------------------------------------------------


def write_report(tags: list[str], args: argparse.Namespace, started_at: float, results: Path) -> Path:
    """build/results/report.html (results: the terrapin-switch runs' folder; simple_switch_grpc's
    are in its bmv2/): one section per experiment, E1-E10, each switch's run side by side where
    both have run, beside the seed's figures. Results this run (`tags` on `args.switch`) did not
    make keep those of their last run, if any, marked with its time (so that `ONLY=E2` after a
    full run updates E2 in the full report)."""
    sections = []
    for entry in EXPERIMENTS:
        tag = entry.tag
        runs: dict[str, tuple[dict[str, object], bool]] = {}
        for switch in SWITCHES:
            where = results if switch == "terrapin" else results / switch
            path = where / f"{tag}.json"
            this_run = tag in tags and switch == args.switch
            if not path.exists():
                if this_run:
                    log = where / f"{tag}.log"
                    shown = log.relative_to(REPO) if log.is_relative_to(REPO) else log
                    missing = f"<h2>{tag} on {SWITCH_NAMES[switch]}</h2>"
                    sections.append(f"{missing}<p class=fail>no result: see {shown}</p>")
                continue
            earlier = not this_run or path.stat().st_mtime < started_at
            runs[switch] = (json.loads(path.read_text()), earlier)
        if runs:
            sections.append(section(runs))
    title = "Terrapin: the seeds' experiments"
    command = "make experiments" + "".join(
        f" {k}={v}"
        for k, v in (("ONLY", args.only), ("SHORT", "1" if args.short else ""), ("SWITCH", args.switch))
        if v and not (k == "SWITCH" and v == "terrapin")
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: sans-serif; max-width: 90em; margin: 2em auto; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 2px 8px; text-align: left; }}
.pass {{ color: #070; font-weight: bold; }} .fail {{ color: #b00; font-weight: bold; }}
.plots {{ display: flex; gap: 1em; }} .plots div {{ flex: 1; }}
img {{ max-width: 100%; border: 1px solid #ddd; }} code {{ background: #f4f4f4; }}
</style></head><body><h1>{title}</h1>
<p>{html.escape(command)} — {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}.
docs/experiments.md says how each was scaled to a 2-core machine, and to simple_switch_grpc.</p>
{"".join(sections)}</body></html>"""
    report = results / "report.html"
    report.write_text(page)
    return report


SWITCH_NAMES = {"terrapin": "terrapin-switch", "bmv2": "simple_switch_grpc"}


def section(runs: dict[str, tuple[dict[str, object], bool]]) -> str:
    """One experiment: each switch's verdict, scaling, figures (a column each, the seed's last)
    and plots. `runs`: switch → (its E<n>.json record, whether it is from an earlier run)."""

    def esc(value: object) -> str:
        return html.escape(str(value))

    switches = [s for s in SWITCHES if s in runs]
    first = runs[switches[0]][0]
    verdicts, scales, commands = [], [], []
    values: dict[str, dict[str, object]] = {}
    seeds: dict[str, str] = {}
    order: list[str] = []
    plots = []
    for switch in switches:
        record, earlier = runs[switch]
        name = SWITCH_NAMES[switch]
        verdict = str(record["verdict"])
        problems = record.get("problems") or []
        scale = record.get("scale") or []
        figures = record.get("figures") or []
        shown = record.get("plots") or []
        assert isinstance(problems, list) and isinstance(scale, list)
        assert isinstance(figures, list) and isinstance(shown, list)
        when = f" (from an earlier run, {esc(record.get('finished'))})" if earlier else ""
        css = "pass" if verdict == "pass" else "fail"
        verdicts.append(
            f'<li>{name}: <span class="{css}">{esc(verdict)}</span>{when} '
            f"{esc('; '.join(str(p) for p in problems))}</li>"
        )
        scales.append(f"<li>{name}: {esc('; '.join(str(s) for s in scale)) or 'as the seed'}</li>")
        alone = f"(alone: <code>{esc(record['command'])}</code>)"
        commands.append(
            f"<li>{name}: <code>{esc(record['make_command'])}</code> {alone}"
            f"{', short run' if record.get('short') else ''}, {esc(record['elapsed_s'])} s</li>"
        )
        for f in figures:
            key = str(f["key"])
            if key not in values:
                values[key] = {}
                order.append(key)
            values[key][switch] = f["value"]
            if f.get("seed"):
                seeds.setdefault(key, str(f["seed"]))
        prefix = "" if switch == "terrapin" else f"{switch}/"
        plots += [f'<div><p>{name}</p><img src="{esc(prefix + str(p))}" alt="{esc(p)}"></div>' for p in shown]
    head = "".join(f"<th>{SWITCH_NAMES[s]}</th>" for s in switches)
    rows = "".join(
        f"<tr><td>{esc(key)}</td>"
        + "".join(f"<td>{esc(values[key].get(s, ''))}</td>" for s in switches)
        + f"<td>{esc(seeds.get(key, ''))}</td></tr>"
        for key in order
    )
    seed_numbers = first.get("seed_numbers") or []
    assert isinstance(seed_numbers, list)
    return f"""<h2>{esc(first["experiment"])} {esc(first["name"])}: {esc(first["title"])}</h2>
<p>Seed: {esc(first["seed_ref"])}. Verdicts:</p><ul>{"".join(verdicts)}</ul>
<p>The seed reports:</p><ul>{"".join(f"<li>{esc(n)}</li>" for n in seed_numbers)}</ul>
<p>How each run was scaled:</p><ul>{"".join(scales)}</ul>
<table><tr><th>figure</th>{head}<th>the seed's</th></tr>{rows}</table>
<div class="plots">{"".join(plots)}</div>
<p>Commands:</p><ul>{"".join(commands)}</ul>
"""


if __name__ == "__main__":
    sys.exit(main())
