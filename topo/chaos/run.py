"""`make chaos`: random faults under load, and every promise checked over the history (issue 37;
docs/deployment.md "Chaos").

    sudo build/venv/bin/python -m topo.chaos.run [--duration 300] [--seed 1] [--faults a,b]
        [--topo sequoia-ring] [--switch terrapin|bmv2] [--no-traffic] [--device-base N]

Brings up the testbed as `make run REPLICAS=2 STORE=postgres` does (two supervised controller
replicas, each in a cgroup of its own, on a PostgreSQL store of the run's own, the switches
supervised too), admits the measured channels and starts their traffic (traffic.py), starts the
REST clients and the in-band one (workload.py) and follows the nemesis's plan (nemesis.py), one
fault at a time with now and then a second joining it (actuators.py). Beside them it watches
each replica's /health, the measured channels' paths and the store's journal as it grows. After
the last heal it waits for the replicas to settle, reads the final state of the store and of
every switch (over P4Runtime, independently of the controllers) and the monitors' episodes, and
judges the history (checker.py, traffic.py, report.py):

- every answer was 2xx, 4xx or 503 with Retry-After; a request nobody answered was sent to a
  replica that was not answering then (in band: came near a fault);
- every reservation answered 201 (or accepted in band) and not closed is in the store and on
  every switch of its path; every one answered closed is gone; none vanished;
- no port was ever admitted beyond its capacity: the journal replayed, in commit order, against
  the admission tests;
- the switches hold exactly the store's channels;
- the measured channels lost nothing and kept their bounds outside the windows in which faults
  broke every path they have, and the monitor raised and cleared an episode for each long one.

The report (build/results/chaos/<switch>/: chaos.json, history.json, journal.json, the timeline
plot, a summary printed) gives the faults by kind, the requests by kind and answer, the
unavailability after each kind of fault (from the fault to the next write accepted), the
outages of the measured channels and every problem; the run fails if there is one.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terrapin.admission.model import ChannelKey
from terrapin.arbitration import primary_election_id
from terrapin.config import load_config
from terrapin.paths import ChannelSelector
from terrapin.store import Fence, NotPrimary, ReservationStore
from terrapin_tools import p4read
from terrapin_tools.processes import stop_all
from topo import sequoia, sequoia_ring
from topo.chaos import nemesis, report, traffic
from topo.chaos.actuators import Actuators, Applied, cgroup2_root
from topo.chaos.checker import JournalEntry
from topo.chaos.report import Outcome
from topo.chaos.workload import AGENT, InBand, Replica, Workload, ask
from topo.experiment import Traffic
from topo.network import PID_DIR, RunningNetwork, running, wait_primary
from topo.p4switch import JITTER_ENV, REPO, switch_waits
from topo.plan import GRPC_PORT_BASE, NetworkPlan
from topo.rtwire import SOFTIRQ_BELOW_SWITCH, wire_first
from topo.stalls import Stalls, witnessed

# How long the measured traffic goes on after the faults' time is up.
TRAFFIC_AFTER_S = 15.0
TOPOS = {"sequoia-ring": sequoia_ring.plan, "sequoia": sequoia.plan}
REST_PORT = 18600
INTF_PREFIX = "trptcx"  # its own (scripts/leftovers.py judges every trpt one)
TOKEN = "chaos"
CGROUP = "terrapin-chaos"  # under the cgroup v2 root: one cgroup per replica
# After the last heal: how long the system has to settle before its final state is read.
SETTLE_LIMIT_S = 90.0
WATCH_EVERY_S = 0.25


@dataclass(frozen=True)
class Seen:
    at: float
    replica: str
    status: int  # 0: no answer
    role: str | None


class Watchers:
    """Each replica's /health every WATCH_EVERY_S and the store's journal as it grows (which
    also says where the measured channels went when a restoration moved them)."""

    def __init__(self, run: RunningNetwork) -> None:
        self.run = run
        self.health: list[Seen] = []
        self.journal: dict[int, JournalEntry] = {}
        self.journal_errors = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch_health, daemon=True),
            threading.Thread(target=self._read_journal, daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.read_journal_once()

    def _watch_health(self) -> None:
        while not self._stop.is_set():
            for c in self.run.controllers:
                try:
                    status, body, _ = ask(c.rest_url, self.run.token, "GET", "/health", timeout=1.0)
                except Exception:  # whatever a dying replica answers, it did not answer
                    status, body = 0, None
                role = (body.get("replication") or {}).get("role") if isinstance(body, dict) else None
                self.health.append(Seen(time.time(), c.replica or "", status, role))
            self._stop.wait(WATCH_EVERY_S)

    def _read_journal(self) -> None:
        while not self._stop.wait(1.0):
            self.read_journal_once()

    def read_journal_once(self) -> None:
        import psycopg

        last = max(self.journal, default=0)
        try:
            with psycopg.connect(self.run.store, connect_timeout=2) as db:
                rows = db.execute(
                    "SELECT seq, kind, initiator, context, body, written_at FROM journal"
                    " WHERE seq > %s ORDER BY seq",
                    (last,),
                ).fetchall()
        except psycopg.Error:
            self.journal_errors += 1  # the store is down: read again later
            return
        for s, k, i, c, b, w in rows:
            self.journal[int(s)] = JournalEntry(int(s), str(k), ChannelKey(str(i), int(c)), str(b), float(w))

    def down_spans(self) -> dict[str, list[tuple[float, float]]]:
        """Per replica, the spans in which its /health got no answer (or, starting again, 503
        before it knew its role)."""
        spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
        opened: dict[str, float] = {}
        for seen in self.health:
            down = seen.status == 0
            if down and seen.replica not in opened:
                opened[seen.replica] = seen.at - WATCH_EVERY_S
            elif not down and seen.replica in opened:
                spans[seen.replica].append((opened.pop(seen.replica), seen.at))
        for replica, began in opened.items():
            spans[replica].append((began, time.time()))
        return spans


def settle(run: RunningNetwork) -> float:
    """Until every replica answers /health, exactly one says it is primary, and that one has
    every switch ready (its /health may still be 503 for channels left down: a channel that lost
    its path holds nothing, and others may have taken the capacity meanwhile; docs/controller.md
    "Trunks"); how long it took."""
    began = time.monotonic()
    seen: list[tuple[int, Any, str | None]] = []
    while time.monotonic() - began < SETTLE_LIMIT_S:
        seen = [ask(c.rest_url, run.token, "GET", "/health", timeout=2.0) for c in run.controllers]
        bodies = [b for s, b, _ in seen if s in (200, 503) and isinstance(b, dict)]
        primaries = [b for b in bodies if (b.get("replication") or {}).get("role") == "primary"]
        if len(bodies) == len(run.controllers) and len(primaries) == 1 and not primaries[0].get("degraded"):
            return time.monotonic() - began
        time.sleep(0.5)
    raise TimeoutError(
        f"the replicas did not settle within {SETTLE_LIMIT_S:.0f} s after the last heal: {seen}"
    )


def final_state(run: RunningNetwork) -> tuple[list[dict[str, Any]], dict[str, set[ChannelSelector]]]:
    """The store's reservations (through the primary) and each switch's channels (over P4Runtime)."""
    primary = wait_primary(run)
    status, stored, _ = ask(primary.rest_url, run.token, "GET", "/reservations")
    if status != 200 or not isinstance(stored, list):
        raise RuntimeError(f"GET /reservations answered {status}: {stored}")
    switches = {}
    for name in run.plan.switches:
        node = run.net.get(name)
        switches[name] = set(p4read.channel_selectors(f"127.0.0.1:{node.grpc_port}", node.device_id))
    return stored, switches


def deposed_writes(run: RunningNetwork) -> list[str]:
    """A deposed primary's writes, tried directly after the last heal: every switch must refuse
    a write made under the election id of an earlier lease term (P4Runtime arbitration), and the
    store a transaction fenced with an earlier term or another holder. The problems, if any."""
    status, health, _ = ask(wait_primary(run).rest_url, run.token, "GET", "/health")
    term = (health.get("replication") or {}).get("term") if isinstance(health, dict) else None
    if not isinstance(term, int):
        return [f"the primary's /health names no lease term ({status})"]
    problems = []
    for old in sorted({1, term - 1} - {term, 0}):
        for name in run.plan.switches:
            node = run.net.get(name)
            verdict = p4read.refuses_writes_of(
                f"127.0.0.1:{node.grpc_port}", node.device_id, primary_election_id(old)
            )
            if verdict != "refused":
                problems.append(f"switch {name}: a write under term {old}'s election id was {verdict}")
    store = ReservationStore(run.store, application_name="terrapin-chaos checker")
    try:
        lease = store.lease()
        if lease is None:
            return [*problems, "the store holds no lease after the last heal"]
        for fence in (Fence(lease.holder, lease.term - 1), Fence("deposed#0", lease.term)):
            try:
                with store.transaction(fence):
                    pass
            except NotPrimary:
                continue
            problems.append(f"the store accepted a transaction fenced {fence} in term {lease.term}")
    finally:
        store.close()
    return problems


def monitor_episodes(run: RunningNetwork, reservation_ids: Sequence[int]) -> list[dict[str, Any]]:
    """Every episode of these channels either replica's guarantee monitor recorded (each keeps
    its own, raised while it was primary)."""
    found = []
    for c, rid in itertools.product(run.controllers, reservation_ids):
        status, body, _ = ask(c.rest_url, run.token, "GET", f"/events?channel={rid}&limit=10000")
        if status == 200 and isinstance(body, list):
            found += body
    return found


# The in-band client: an initiator at one end of the ring, the responder at the other.
IN_BAND = ("grayling", "paola")


@contextlib.contextmanager
def in_band_client(run: RunningNetwork, workload: Workload, seed: int) -> Iterator[InBand | None]:
    """A host asking in band beside the REST clients (its destination serving the protocol),
    or None when the testbed lacks the two hosts."""
    source, sink = IN_BAND
    if source not in run.plan.hosts or sink not in run.plan.hosts:
        yield None
        return
    address = run.plan.hosts[sink].address
    server = run.host(sink).popen(
        [*AGENT, "serve", "--address", address],
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def run_on(command: list[str]) -> str:
        process = run.host(source).popen(
            command, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        try:
            out, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        return out.decode(errors="replace") if isinstance(out, bytes) else str(out)

    try:
        yield InBand(workload.history, workload.lock, run_on, run.plan.hosts[source].address, address, seed)
    finally:
        stop_all([server])


MONITOR_HISTORY = 10_000_000


@contextlib.contextmanager
def network(
    plan: NetworkPlan, switch_kind: str, work: Path, cgroups: Path | None
) -> Iterator[RunningNetwork]:
    """make run REPLICAS=2 STORE=postgres, supervised, each replica in a cgroup of its own under
    `cgroups` (the partitions cut one off by it)."""
    os.environ["PATH"] = f"{REPO / 'build' / 'venv' / 'bin'}:{os.environ['PATH']}"
    with running(
        plan,
        switch_kind=switch_kind,
        rest_port=REST_PORT,
        token=TOKEN,
        state_dir=work / "state",
        intf_prefix=INTF_PREFIX,
        supervise=True,
        pid_dir=PID_DIR,
        store="postgres",
        replicas=2,
        cgroups=None if cgroups is None else cgroups / CGROUP,
        # The checker reads every episode of the measured channels at the end: a replica's
        # history keeps the newest `history` (1000 by default), which 30 minutes of restorations
        # outgrow (each moves or downs dozens of channels), and the early ones were gone.
        controller_extra={"monitor": {"history": MONITOR_HISTORY}},
    ) as run:
        yield run


# terrapin-switch's delay variation outside its queues under chaos's load, µs (the jitter_us its
# controller is told, docs/controller.md "Jitter"): the replicas, PostgreSQL, four clients and a
# switch restarting keep both CPUs busy, and the VM itself was stalled 13-38% of the time (up
# to 129 ms at once). Outside those stalls measured packets still exceeded bounds that counted 2 ms
# a switch (the quiet figure) by up to 8.9 ms over two switches, in about half the two-minute
# runs (seed 4); 10 ms a switch covers that. BMv2 keeps its 6 ms (topo/p4switch.py).
CHAOS_JITTER_US = {"terrapin": 10_000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of faults and load")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--faults", default="", help=f"comma-separated kinds (default: all built; {', '.join(nemesis.KINDS)})"
    )
    parser.add_argument("--topo", choices=sorted(TOPOS), default="sequoia-ring")
    parser.add_argument("--switch", choices=["terrapin", "bmv2"], default="terrapin")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--traffic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measured channels carrying packets, judged against their bounds (--no-traffic: the"
        " control plane alone)",
    )
    parser.add_argument(
        "--device-base",
        type=int,
        default=1,
        help="the first switch's device id; its P4Runtime, Thrift and metrics ports follow from it"
        " (another base runs beside a network that uses the default ones)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "build" / "results" / "chaos")
    args = parser.parse_args(argv)
    kinds = [k for k in args.faults.split(",") if k] or list(nemesis.KINDS)
    cgroups = cgroup2_root()
    if cgroups is None and any(k.startswith("partition") for k in kinds):
        parser.error("the partitions need the cgroup v2 hierarchy mounted (see /proc/mounts)")
    # BMv2's ports are shaped in packets/s, each packet a whole MTU's slot: its T1s run at twice
    # the rate, as in E5, E11 and the ring's tests, so that the measured channels fit as on ours.
    t1_bps = 2 * sequoia.T1_RATE_BPS if args.switch == "bmv2" else sequoia.T1_RATE_BPS
    if args.switch in CHAOS_JITTER_US:
        # what the controller is told of each switch's delay variation under this load, unless
        # TERRAPIN_JITTER_US says otherwise (the network and its controllers inherit it)
        os.environ.setdefault(JITTER_ENV, str(CHAOS_JITTER_US[args.switch]))
    plan = TOPOS[args.topo](t1_bps=t1_bps, queue_capacity=128 if args.switch == "bmv2" else 64)
    for offset, switch in enumerate(plan.switches.values()):
        switch.device_id = args.device_base + offset
        switch.grpc_port = GRPC_PORT_BASE + switch.device_id - 1
    targets = nemesis.Targets(
        replicas=("c0", "c1"),
        switches=sorted(plan.switches),
        trunks=[f"{a}-{b}" for a, _, b, _, _ in plan.trunks()],
    )
    try:
        schedule = nemesis.schedule(args.seed, args.duration, targets, kinds)
    except ValueError as error:
        parser.error(str(error))
    out = args.out / args.switch
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"chaos: {args.duration:.0f} s on {args.topo} ({args.switch}), seed {args.seed},"
        f" {len(schedule)} faults:"
    )
    for fault in schedule:
        print(f"  {fault.describe()}")
    # Stopped (make stop, a CI timeout), it still tears the network down and heals what it did.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    started = time.time()
    applied: list[Applied] = []
    with contextlib.ExitStack() as stack:
        if cgroups is not None:  # last: its replicas' cgroups go with the network
            stack.callback(_rmdir, cgroups / CGROUP)
        run = stack.enter_context(network(plan, args.switch, out, cgroups))
        found: list[Stalls] = []
        if args.traffic:
            # the machine's own stalls witnessed, and the kernel's softirq threads lifted above
            # every normal-priority process but below the switch (topo/rtwire.py): the replicas,
            # PostgreSQL and the clients keep both CPUs busy, and at the normal priority
            # ksoftirqd/N waited its turn among them with packets in the veths' backlog (seed 4:
            # 3 packets 4-15 ms over their bounds, no stall witnessed)
            stack.enter_context(wire_first(SOFTIRQ_BELOW_SWITCH))
            found = stack.enter_context(witnessed(out / "stalls"))
        wait_primary(run)
        ports = load_config(run.config_path).port_models()
        hosts = {h.name: (h.address, h.switch) for h in plan.hosts.values()}
        replicas = [Replica(c.replica or "", c.rest_url) for c in run.controllers]
        channels = traffic.admit(run, list(plan.hosts)) if args.traffic else []
        watchers = Watchers(run)
        workload = Workload(replicas, run.token, hosts, args.seed, clients=args.clients)
        in_band = stack.enter_context(in_band_client(run, workload, args.seed))
        actuators = Actuators(run)
        with Traffic(run, out / "traffic") as carried:
            # the traffic outlasts the faults: the last one's outage ends inside it
            logs = traffic.start(carried, channels, args.duration + TRAFFIC_AFTER_S)
            watchers.start()
            workload.start()
            if in_band is not None:
                in_band.start()
            t0 = time.time()
            try:
                applied = follow(schedule, actuators, t0)
                time.sleep(max(0.0, t0 + args.duration - time.time()))
            finally:
                if in_band is not None:
                    in_band.stop()
                history = workload.stop()
                actuators.heal_everything(applied)
            settled_s = settle(run)
            carried.wait(TRAFFIC_AFTER_S + 60)
        time.sleep(3.0)  # the new primary's reconciliation of the switches
        stored, switches = final_state(run)
        waits = switch_waits(run.net.switches)
        deposed = deposed_writes(run)
        episodes = monitor_episodes(run, [int(c.reservation["id"]) for c in channels])
        watchers.stop()
    stalls = found[0] if found else None
    for c in channels:
        c.follow(sorted(watchers.journal.values(), key=lambda e: e.seq))
    judged = [
        traffic.judge(c, r, applied, stalls)
        for c, r in zip(channels, traffic.read(channels, logs).values(), strict=True)
    ]
    for c, j in zip(channels, judged, strict=True):
        j.problems += traffic.alarm_problems(j, int(c.reservation["id"]), episodes)
    outcome = Outcome(
        schedule,
        applied,
        history,
        watchers.journal,
        watchers.down_spans(),
        stored,
        switches,
        judged,
        settled_s,
        deposed,
        waits,
    )
    return report.write(args, out, started, t0, outcome, ports)


def _rmdir(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def follow(schedule: list[nemesis.Fault], actuators: Actuators, t0: float) -> list[Applied]:
    """Fires each fault at its time and heals it after its duration (a second fault joining the
    first is fired while the first lasts); every fault healed before returning."""
    events: list[tuple[float, int, nemesis.Fault]] = []  # (when, 0 fire / 1 heal, fault)
    for fault in schedule:
        events.append((t0 + fault.at, 0, fault))
        if fault.heal_after:  # a kill is healed by the supervisor, which starts it again
            events.append((t0 + fault.healed_at, 1, fault))
    events.sort(key=lambda e: (e[0], -e[1]))  # at one instant, what heals goes first
    applied: dict[nemesis.Fault, Applied] = {}
    for when, heal, fault in events:
        time.sleep(max(0.0, when - time.time()))
        if heal:
            if fault in applied:
                actuators.heal(applied[fault])
                print(f"  {time.time() - t0:7.1f} s  healed {fault.kind} {applied[fault].target}", flush=True)
        else:
            done = applied[fault] = actuators.apply(fault)
            note = f" (not applied: {done.error})" if done.error else ""
            print(f"  {time.time() - t0:7.1f} s  {fault.kind} {done.target}{note}", flush=True)
    return list(applied.values())


if __name__ == "__main__":
    sys.exit(main())
