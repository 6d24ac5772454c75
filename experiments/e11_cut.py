"""E11 — the cut: a trunk of `TOPO=sequoia-ring` cut mid-stream under two channels and a flood,
later mended (seed 001's promise, "this delay bound will remain fixed and guaranteed throughout
the lifetime of the connection", held across a fibre cut; docs/controller.md "Trunks").

On the ring of T1s ucb - ucsb - ucla - ucsd - ucb (topo/sequoia_ring.py):

- **video**: faith (ucb) to paola (ucsd), reserved through the REST API at level 5: a vic-like
  video paced at its reservation, across the ucb-ucsd T1.
- **second**: propaganda (ucb) to venezia (ucsd), reserved in band by its initiator
  (`terrapin-host request --watch`, which prints what the routers tell it) at level 4, the same
  shape, across the same T1.
- **blocker**: ucsbhost (ucsb) to blizzard (ucla), reserved at level 6 so that the ucsb-ucla T1,
  on the only other path, has room for one of the two (the first in priority order), not both.
- best effort: grayling (ucb) to venezia (ucsd) at twice the T1's rate throughout.

The ucb-ucsd trunk is cut (both ends' interfaces down, as a fibre is cut) a third of the way in
and mended two thirds in. Expected, and judged: the link watch finds the cut (within 50 ms on
terrapin-switch) and the video is moved to ucb > ucsb > ucla > ucsd with its bound proved again
for that path, its outage (from the cut to the first packet sent after the last one lost that
arrived; the video is paced a packet at a time, so this is measured to a packet) within
100 ms on terrapin-switch, every frame after the move within the new bound; the second channel
has no path that admits it, so it is down, its initiator is told (NOTIFY_CLOSE, PATH_DOWN),
and once the trunk is back it is set up again and its initiator told (REQUEST_ACCEPT); the
monitor records the video's broken promise from the cut's detection to the move, and the second
channel's while it is down; the video stays where it was moved (no flapping).

Then a second phase: a **protected** channel, faith to paola with `"protection": "1+1"` (IEEE
802.1CB replication and elimination, docs/controller.md "Protection"), on ucb > ucsd and ucb >
ucsb > ucla > ucsd at once, under the flood; each trunk of its paths is cut and mended in turn.
Judged: 0 frames lost across the cuts and no frame over its bound; reported: the duplicates the
last switch discarded and the frames each path carried.

    sudo build/venv/bin/python -m experiments.e11_cut [--short] [--switch bmv2]
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.harness import Experiment, pyplot
from topo import sequoia, sequoia_ring
from topo.experiment import (
    PYTHON,
    FrameTiming,
    Traffic,
    VideoRun,
    channel,
    largest_admitted,
    read_video_logs,
    release,
    reserve,
)
from topo.faults import set_trunk
from topo.network import RestError, RunningNetwork, call, rest
from topo.p4switch import REPO
from topo.video import VideoShape

VIDEO = VideoShape(fps=20, smallest=2_000, peak=4_000, max_packet=1_000)
# The senders shape to one whole frame at the video's 80 kB/s peak; the reservations allow two, as
# E5's do: with a bucket no deeper than the sender's, two packets the hosts' or the switch's timing
# brought closer than its tolerance (the switch's jitter) were marked red at the first hop and
# demoted into the flood (2 of 391 packets, in 2 of 5 runs).
RATE, BURST, SENDER_BURST = 80_000, 8_000, 4_000
# The video and the second channel are paced a packet at a time (a bucket of one packet): with
# a frame's worth of bucket every frame left whole, one every 50 ms, and the outage was measured
# to the frame: the restoration's time plus up to 50 ms of waiting for the next frame (done
# 63 ms after the cut, the first packet sent after it that arrived left at 106 ms).
PACKET_PACED_BURST = VIDEO.max_packet
PRIORITIES = {"video": 5, "second": 4, "blocker": 6, "protected": 5}
PORTS = {"video": 5004, "second": 5005, "blocker": 5006, "protected": 5007}
CUT = ("ucb", "ucsd")
# The protected channel's second phase: every trunk of its two paths cut in turn, each mended
# before the next is cut (ucb-ucsd is its direct path's; the others, the way round's).
PROTECTED_CUTS = (CUT, ("ucb", "ucsb"), ("ucsb", "ucla"), ("ucla", "ucsd"))
DETOUR = ["ucb", "ucsb", "ucla", "ucsd"]
# BMv2 shapes its ports in packets: its T1s run at twice the rate, as in E5 (docs/bmv2.md).
T1_BPS = {"terrapin": sequoia.T1_RATE_BPS, "bmv2": 2 * sequoia.T1_RATE_BPS}
# terrapin-switch's trunk is cut as a fibre is (both interfaces down: its ports lose carrier and
# say so over gNMI); BMv2's silently (topo/faults.py set_trunk): see the scale note.
SILENT_CUT = {"terrapin": False, "bmv2": True}
QUEUE_PACKETS = {"terrapin": 64, "bmv2": 128}
DETECTION_MS = 50  # terrapin-switch: the promise, kept by its carrier report (gNMI)
OUTAGE_MS = 100
RESTORATION_WAIT_S = 10  # how long the experiment waits for a restoration to be reported

EXPERIMENT = Experiment(
    11,
    "cut",
    title="a trunk cut under two channels and a flood: one moved, one down and back",
    seed_ref="seed 001 §3 (the bound holds for the connection's lifetime), Fig. 6 (inter-frame times)",
    seed_numbers=[
        "a real-time channel's delay bound is fixed and guaranteed throughout its lifetime (§3)",
        "vic over RTIP under load: inter-frame times steady at the frame interval (Fig. 6b)",
        "RFC 4090 fast reroute: traffic on a detour within 50 ms of a failure (the anchor)",
    ],
)


@dataclass
class Channel:
    name: str
    reservation_id: int
    path_before: list[str]
    video: VideoRun | None = None
    sender_log: Path | None = None
    receiver_log: Path | None = None
    path_during: list[str] = field(default_factory=list)  # [] while down
    state_during: str = ""
    note_during: str = ""
    bound_ms: float = 0.0  # its bound on the path it had during the cut (if any)
    path_after: list[str] = field(default_factory=list)
    state_after: str = ""
    bound_after_ms: float = 0.0
    up_again_at: float | None = None  # Unix time it was active again after the mend
    counters: list[dict[str, Any]] = field(default_factory=list)  # per hop, at the end


def ports(reservation: dict[str, Any]) -> list[str]:
    return [f"{h['switch']}:{h['port']}" for h in reservation["allocation"]["hops"]]


def switches(reservation: dict[str, Any]) -> list[str]:
    return [h["switch"] for h in reservation["allocation"]["hops"]]


def by_id(run: RunningNetwork, reservation_id: int) -> dict[str, Any]:
    found: dict[str, Any] = rest(run, "GET", f"/reservations/{reservation_id}")
    return found


def blocker_rate(run: RunningNetwork, body: dict[str, Any]) -> dict[str, Any]:
    """The blocker at what the ucsb-ucla T1 admits less one and a half channels: room for the
    first channel the restoration tries, not for the second."""
    largest = largest_admitted(run, body, asked=10 * RATE)
    release(run, largest)
    return reserve(run, {**body, "rate": int(largest["requested_rate"]) - RATE - RATE // 2})


def wait_for(what: str, predicate: Any, timeout: float, every: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every)
    raise RuntimeError(f"{what} not within {timeout:g} s")


def health_of(run: RunningNetwork) -> dict[str, Any]:
    """GET /health, degraded (503) or not: while a channel is down it is, and says why."""
    status, reply = call(run, "GET", "/health")
    if status not in (200, 503):
        raise RestError("GET", "/health", status, reply)
    found: dict[str, Any] = reply
    return found


def restoration_after(run: RunningNetwork, at: float) -> dict[str, Any] | None:
    """The controller's last restoration, if it started after `at` (GET /health)."""
    health = health_of(run)
    last = health.get("restoration")
    return last if last and last["started_at"] >= at else None


def trunk_status(run: RunningNetwork) -> dict[str, Any]:
    health = health_of(run)
    for status in health.get("trunks", []):
        ends = {end.rpartition(":")[0] for end in status["trunk"].split("-")}
        if ends == set(CUT):
            found: dict[str, Any] = status
            return found
    raise RuntimeError(f"/health names no {'-'.join(CUT)} trunk")


def notices(log: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip().startswith("{")]
    return [line for line in lines if "notice" in line]


def wire_fates(sender_log: Path, receiver_log: Path) -> list[tuple[int, bool]]:
    """Every packet the sender sent: (when it went on the wire, whether it arrived), in time
    order; a packet its kernel gave no transmit stamp for counts from its frame's start."""
    got = {
        f["frame"]: {index for index, _, _ in f["packet_times"]}
        for f in json.loads(receiver_log.read_text())["frames"]
    }
    fates = []
    for frame in json.loads(sender_log.read_text())["frames"]:
        wire = frame.get("wire_ns") or []
        arrived = got.get(frame["frame"], set())
        for index in range(frame["packets"]):
            at = wire[index] if index < len(wire) and wire[index] else frame["start_ns"]
            fates.append((at, index in arrived))
    return sorted(fates)


def outage_ms(fates: Sequence[tuple[int, bool]], cut_ns: int) -> float | None:
    """From the cut to the first packet sent after the last one lost that arrived (0: none sent
    after the cut was lost; None: none arrived after the loss). Packets that got through in
    the moment the cut took to darken both ends do not end it: the last loss does."""
    after = [(at, arrived) for at, arrived in fates if at >= cut_ns]
    lost = [at for at, arrived in after if not arrived]
    if not lost:
        return 0.0
    back = [at for at, arrived in after if arrived and at > lost[-1]]
    return (back[0] - cut_ns) / 1e6 if back else None


def interframe_gap_ms(video: VideoRun, cut_ns: int) -> float | None:
    """The receiver's view (seed 001 Fig. 6): from the last whole frame's arrival before the cut to
    the first's after it."""
    arrivals = sorted(max(a for _, a in t.packets) for t in video.timings if t.packets)
    before = [a for a in arrivals if a < cut_ns]
    after = [a for a in arrivals if a >= cut_ns]
    return (after[0] - before[-1]) / 1e6 if before and after else None


def frames_from(video: VideoRun, sender_log: Path, from_ns: int) -> tuple[int, list[FrameTiming]]:
    """Of the frames captured from `from_ns` on (all their packets sent after it): how many did
    not arrive whole, and the timings of those that did."""
    started = {f["frame"]: f["start_ns"] for f in json.loads(sender_log.read_text())["frames"]}
    due = {frame for frame, at in started.items() if at >= from_ns}
    whole = [t for t in video.timings if t.frame in due]
    return len(due) - len(whole), whole


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT
    experiment.parse(argv)
    seconds = 16.0 if experiment.short else 40.0
    cut_s, mend_s = seconds / 3, 2 * seconds / 3
    switch = experiment.switch
    experiment.note_scale(
        f"{seconds:g} s of video, the cut at {cut_s:g} s, mended at {mend_s:g} s; the video is"
        f" synthetic, vic-like ({VIDEO.fps:g} frames/s of {VIDEO.smallest:,}-{VIDEO.peak:,} B in"
        f" {VIDEO.max_packet:,} B packets, topo/video.py), paced at its reservation so that the"
        " outage is measured to a packet, not a frame"
    )
    if T1_BPS[switch] != sequoia.T1_RATE_BPS:
        experiment.note_scale(
            f"BMv2: T1s at {T1_BPS[switch] / 1e6:g} Mbit/s and queues of {QUEUE_PACKETS[switch]} packets,"
            " as in E5 (its ports are shaped in packets/s); its trunk is cut silently (both ports keep"
            " their carrier and drop all: it stops handing any frame to its controller while one"
            " of its own interfaces is down, docs/bmv2.md); it serves no gNMI, and its link watch"
            " probes every 100 ms and finds a cut after a second of silence (topo/p4switch.py"
            " SWITCH_LINK_WATCH), so its detection and outage are reported, not held to"
            " terrapin-switch's 50 and 100 ms"
        )
    plan = sequoia_ring.plan(t1_bps=T1_BPS[switch], queue_capacity=QUEUE_PACKETS[switch])
    channels: dict[str, Channel] = experiment.keep("channels", {})
    timeline: dict[str, Any] = experiment.keep("timeline", {})
    with experiment.network(plan) as run:
        experiment.phase("reservations: the video (REST), the second (in band), the blocker")
        video = reserve(run, channel(run, "faith", "paola", PORTS["video"], PRIORITIES["video"],
                                     VIDEO.max_packet, rate=RATE, burst=BURST))  # fmt: skip
        channels["video"] = Channel("video", video["id"], ports(video))
        work = experiment.work
        server = run.host("venezia").popen(
            [PYTHON, "-m", "terrapin.host_agent", "serve", "--address", run.plan.hosts["venezia"].address],
            cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        agent_log = work / "second-initiator.jsonl"
        agent = None
        try:
            time.sleep(0.5)
            request = [
                PYTHON,
                "-m",
                "terrapin.host_agent",
                "request",
                "--dst",
                run.plan.hosts["venezia"].address,
            ]
            request += ["--protocol", "udp", "--sport", str(PORTS["second"]), "--dport", str(PORTS["second"])]
            request += ["--priority", str(PRIORITIES["second"]), "--rate", str(RATE), "--burst", str(BURST)]
            request += ["--max-packet", str(VIDEO.max_packet), "--watch", str(seconds + 60)]
            with agent_log.open("w") as out:
                agent = run.host("propaganda").popen(
                    request, cwd=str(REPO), stdout=out, stderr=subprocess.STDOUT
                )
            accepted = wait_for("the second channel's ACCEPT", lambda: agent_log.read_text().strip(), 15)
            first = json.loads(accepted.splitlines()[0])
            if first.get("outcome") != "ACCEPTED":
                raise RuntimeError(f"the second channel was not set up: {first}")
            second = next(
                r for r in rest(run, "GET", "/reservations")
                if r["src"] == run.plan.hosts["propaganda"].address and r["origin"] == "inband"
            )  # fmt: skip
            channels["second"] = Channel("second", second["id"], ports(second))
            body = channel(
                run,
                "ucsbhost",
                "blizzard",
                PORTS["blocker"],
                PRIORITIES["blocker"],
                VIDEO.max_packet,
                burst=BURST,
            )
            blocker = blocker_rate(run, body)
            timeline["blocker_rate"] = blocker["requested_rate"]
            for c in channels.values():
                if switches(by_id(run, c.reservation_id))[:2] != list(CUT):
                    raise RuntimeError(
                        f"the {c.name} channel does not cross {'-'.join(CUT)}: {c.path_before}"
                    )
            experiment.phase("video, second and flood; the cut")
            with Traffic(run, work / "run") as traffic:
                received = {sink: traffic.receiver(sink, [PORTS[name]], name=f"receiver-{name}")
                            for name, sink in (("video", "paola"), ("second", "venezia"))}  # fmt: skip
                ends = {"video": ("faith", "paola"), "second": ("propaganda", "venezia")}
                sent = {
                    name: traffic.video(source, sink, seconds=seconds, port=PORTS[name], video=VIDEO,
                                        shape=(RATE, PACKET_PACED_BURST), pace=True, seed=PORTS[name],
                                        name=name)
                    for name, (source, sink) in ends.items()
                }  # fmt: skip
                started = time.time()
                traffic.flood("grayling", "venezia", rate_bps=2 * T1_BPS[switch], packet_bytes=plan.mtu,
                              seconds=seconds)  # fmt: skip
                time.sleep(max(0.0, started + cut_s - time.time()))
                timeline["cut_at"] = cut_at = set_trunk(run, *CUT, up=False, silent=SILENT_CUT[switch])
                experiment.phase("cut: waiting for the restoration")
                report = wait_for("a restoration", lambda: restoration_after(run, cut_at), RESTORATION_WAIT_S)
                timeline["restoration"] = report
                timeline["trunk_down"] = trunk_status(run)
                for c in channels.values():
                    now = by_id(run, c.reservation_id)
                    c.state_during, c.note_during = now["state"], now.get("note") or ""
                    if now["state"] == "active":
                        c.path_during = ports(now)
                        c.bound_ms = now["allocation"]["worst_case_delay_us"] / 1000
                time.sleep(max(0.0, started + mend_s - time.time()))
                timeline["mend_at"] = mend_at = set_trunk(run, *CUT, up=True, silent=SILENT_CUT[switch])
                experiment.phase("mended: waiting for the second channel")
                second_back = channels["second"]
                wait_for(
                    "the second channel set up again",
                    lambda: by_id(run, second_back.reservation_id)["state"] == "active",
                    RESTORATION_WAIT_S + 5,
                )
                # Its record is active once the restoration's store transaction is done; its
                # entries are on the switches when the restoration ends, which is when it is up.
                after_mend = wait_for(
                    "the restoration after the mend",
                    lambda: restoration_after(run, mend_at),
                    RESTORATION_WAIT_S,
                )
                second_back.up_again_at = max(time.time(), after_mend["finished_at"])
                timeline["restoration_after_mend"] = after_mend
                timeline["trunk_up"] = trunk_status(run)
                traffic.wait(seconds + 60)
            time.sleep(1.5)  # the monitor's next poll sees the second channel up again
            for c in channels.values():
                now = by_id(run, c.reservation_id)
                c.state_after, c.path_after = now["state"], ports(now)
                # What each hop's entry matched and its policer marked since it was installed.
                c.counters = rest(run, "GET", f"/reservations/{c.reservation_id}/counters")
                c.bound_after_ms = now["allocation"]["worst_case_delay_us"] / 1000
                c.sender_log = sent[c.name]
                c.receiver_log = received["paola" if c.name == "video" else "venezia"]
                c.video = read_video_logs(c.sender_log, c.receiver_log)
            release(run, blocker)
            release(run, video)
            experiment.phase("protected: a 1+1 channel through a cut of each of its paths in turn")
            channels["protected"] = protected_phase(experiment, run, seconds, timeline)
            timeline["events"] = rest(run, "GET", "/events?limit=1000")
        finally:
            for process in (agent, server):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(10)
    return verdict(experiment, channels, timeline, agent_log)


def protected_phase(
    experiment: Experiment, run: RunningNetwork, seconds: float, timeline: dict[str, Any]
) -> Channel:
    """The protected channel under the flood for `seconds`, cut into 2n + 1 slots for the n
    trunks of PROTECTED_CUTS: trunk k cut at the start of slot 2k + 1, mended at the start of
    slot 2k + 2."""
    body = channel(run, "faith", "paola", PORTS["protected"], PRIORITIES["protected"], VIDEO.max_packet,
                   rate=RATE, burst=BURST, protection="1+1")  # fmt: skip
    made = reserve(run, body)
    if made["protection"] != "1+1":
        raise RuntimeError(
            f"the protected channel was admitted without protection: {made.get('protection_note')}"
        )
    kept = Channel("protected", made["id"], ports(made))
    kept.path_during = [f"{h['switch']}:{h['port']}" for h in made["allocation"]["second_path"]]
    kept.bound_ms = made["allocation"]["worst_case_delay_us"] / 1000
    silent = SILENT_CUT[experiment.switch]
    cuts: list[dict[str, Any]] = []
    with Traffic(run, experiment.work / "protected") as traffic:
        received = traffic.receiver("paola", [PORTS["protected"]], name="receiver-protected")
        port = PORTS["protected"]
        sent = traffic.video("faith", "paola", seconds=seconds, port=port, video=VIDEO,
                             shape=(RATE, SENDER_BURST), pace=True, seed=port, name="protected")  # fmt: skip
        started = time.time()
        flood_bps = 2 * T1_BPS[experiment.switch]
        traffic.flood("grayling", "venezia", rate_bps=flood_bps, packet_bytes=run.plan.mtu, seconds=seconds)
        slot = seconds / (2 * len(PROTECTED_CUTS) + 1)
        for index, (a, b) in enumerate(PROTECTED_CUTS):
            time.sleep(max(0.0, started + (2 * index + 1) * slot - time.time()))
            cut_at = set_trunk(run, a, b, up=False, silent=silent)
            time.sleep(max(0.0, started + (2 * index + 2) * slot - time.time()))
            cuts.append(
                {
                    "trunk": f"{a}-{b}",
                    "cut_at": cut_at,
                    "mend_at": set_trunk(run, a, b, up=True, silent=silent),
                }
            )
        traffic.wait(seconds + 60)
    now = by_id(run, kept.reservation_id)
    kept.state_after, kept.path_after = now["state"], ports(now)
    kept.counters = rest(run, "GET", f"/reservations/{kept.reservation_id}/counters")
    kept.sender_log = sent
    kept.video = read_video_logs(sent, received)
    timeline["protected_cuts"] = cuts
    release(run, made)
    return kept


def verdict(
    experiment: Experiment, channels: dict[str, Channel], timeline: dict[str, Any], agent_log: Path
) -> int:
    problems: list[str] = []
    on_terrapin = experiment.switch == "terrapin"
    stalls = experiment.stalls
    cut_at, mend_at = timeline["cut_at"], timeline["mend_at"]
    cut_ns = round(cut_at * 1e9)
    report = timeline["restoration"]
    detection_ms = (
        (timeline["trunk_down"]["changed_at"] - cut_at) * 1000
        if timeline["trunk_down"]["changed_at"]
        else None
    )
    experiment.figure("cut.detection_ms", detection_ms, seed="RFC 4090: < 50 ms to the detour")
    experiment.figure("cut.why", timeline["trunk_down"]["why"])
    experiment.figure("restoration.store_ms", report["store_ms"])
    experiment.figure("restoration.switches_ms", report["switches_ms"])
    experiment.figure("restoration.done_after_cut_ms", (report["finished_at"] - cut_at) * 1000)
    experiment.figure("restoration.changes", "; ".join(c["what"] for c in report["changes"]))
    experiment.figure("blocker.rate", timeline["blocker_rate"])
    stalled_ms = (stalls.overlap(cut_ns, round(report["finished_at"] * 1e9)) / 1e6) if stalls else 0.0
    experiment.figure("cut.machine_stalled_ms", stalled_ms)
    if detection_ms is None:
        problems.append("the cut trunk was never reported down")
    elif on_terrapin and detection_ms - stalled_ms > DETECTION_MS:
        problems.append(f"the cut was found after {detection_ms:.0f} ms (> {DETECTION_MS})")
    if on_terrapin and "no carrier" not in (timeline["trunk_down"]["why"] or ""):
        # A fibre cut darkens both ends: the switch says so before the probes can.
        problems.append(f"the cut was found by {timeline['trunk_down']['why']!r}, not by the ports' carrier")

    events = timeline["events"]
    video, second = channels["video"], channels["second"]
    protected = channels.pop("protected", None)
    for c in channels.values():
        assert c.video is not None
        key = c.name
        experiment.figure(f"{key}.path_before", " > ".join(c.path_before))
        experiment.figure(
            f"{key}.marked_since_installed",
            "; ".join(
                f"{h.get('switch')}:{h.get('port')} {h.get('packets')} packets, yellow"
                f" {h.get('yellow_packets')}, red {h.get('red_packets')}"
                for h in c.counters
            ),
        )
        experiment.figure(
            f"{key}.during_cut", f"{c.state_during}: " + (" > ".join(c.path_during) or c.note_during)
        )
        experiment.figure(f"{key}.path_after_mend", " > ".join(c.path_after))
        lost = c.video.frames_sent - c.video.frames_whole
        experiment.figure(f"{key}.frames", f"{c.video.frames_whole}/{c.video.frames_sent}")
        experiment.figure(f"{key}.frames_lost", lost)
        experiment.figure(
            f"{key}.outage_ms",
            outage_ms(wire_fates(c.sender_log, c.receiver_log), cut_ns)
            if c.sender_log and c.receiver_log
            else None,
            seed="< 50 ms (RFC 4090)" if key == "video" else None,
        )
        experiment.figure(
            f"{key}.interframe_gap_ms",
            interframe_gap_ms(c.video, cut_ns),
            seed=f"{1000 / VIDEO.fps:g} (Fig. 6b)",
        )
        mine = [e for e in events if e.get("reservation_id") == c.reservation_id]
        for e in mine:
            span = (e["cleared_at"] - e["raised_at"]) * 1000 if e["cleared_at"] else None
            cleared = f"cleared after {span:.0f} ms" if span is not None else "still active"
            raised = f"raised {e['raised_at'] - cut_at:+.3f} s after the cut"
            experiment.figure(f"{key}.alarm.{e['kind']}", f"{raised}, {cleared}")
        if not any(e["kind"] in ("path_down", "channel_down") and e["cleared_at"] for e in mine):
            problems.append(f"{key}: no path_down/channel_down alarm raised and cleared")

    # The video: moved, its bound proved again, its outage, every frame after the move in bound.
    detour = [p.rpartition(":")[0] for p in video.path_during]
    if video.state_during != "active" or detour != DETOUR:
        where = video.path_during or video.note_during
        problems.append(f"video: {video.state_during} on {where}, not moved to the detour")
    else:
        experiment.figure("video.bound_after_move_ms", video.bound_ms)
        assert video.video is not None
        assert video.sender_log is not None and video.receiver_log is not None
        outage = outage_ms(wire_fates(video.sender_log, video.receiver_log), cut_ns)
        outage_stalls = (stalls.overlap(cut_ns, cut_ns + round((outage or 0) * 1e6)) / 1e6) if stalls else 0.0
        if outage is None:
            problems.append("video: nothing arrived after the cut")
        elif on_terrapin and outage - outage_stalls > OUTAGE_MS:
            problems.append(
                f"video: outage {outage:.0f} ms (> {OUTAGE_MS}, {outage_stalls:.0f} of it stalls)"
            )
        assert video.sender_log is not None
        lost_after, whole = frames_from(video.video, video.sender_log, round(report["finished_at"] * 1e9))
        late = [t for t in whole if t.late_outside_stalls(video.bound_ms, stalls)]
        experiment.figure("video.frames_lost_after_move", lost_after, seed="0")
        experiment.figure("video.max_network_ms_after_move", max((t.network_ms for t in whole), default=None))
        experiment.figure("video.frames_over_bound_after_move", len(late), seed="0")
        if lost_after or late:
            over = f"{len(late)} over the {video.bound_ms:.1f} ms bound"
            problems.append(f"video: after the move {lost_after} frames lost, {over}")
        if video.path_after != video.path_during:
            problems.append(
                f"video: moved again when the trunk came back ({' > '.join(video.path_after)}): flapping"
            )

    # The second: down with the initiator told, up again when the trunk is mended, told again.
    told = notices(agent_log)
    said = [
        f"{n['notice']} {n.get('reason_name', '')} at {n['at'] - cut_at:+.3f} s".replace("  ", " ")
        for n in told
    ]
    experiment.figure("second.initiator_told", ", ".join(said) or "nothing")
    if second.state_during != "down":
        problems.append(
            f"second: {second.state_during} during the cut, not down (the blocker left it no room)"
        )
    if not any(n["notice"] == "NOTIFY_CLOSE" and n.get("reason_name") == "PATH_DOWN" for n in told):
        problems.append("second: its initiator was not told it is down (NOTIFY_CLOSE PATH_DOWN)")
    if not any(n["notice"] == "REQUEST_ACCEPT" and n["at"] > mend_at for n in told):
        problems.append("second: its initiator was not told it is up again (REQUEST_ACCEPT)")
    if second.state_after != "active" or second.path_after != second.path_before:
        problems.append(
            f"second: {second.state_after} on {second.path_after} after the mend, not back on its path"
        )
    if second.up_again_at is not None:
        experiment.figure("second.up_again_after_mend_s", second.up_again_at - mend_at)
        assert second.video is not None and second.sender_log is not None
        lost_after, whole = frames_from(second.video, second.sender_log, round(second.up_again_at * 1e9))
        late = [t for t in whole if t.late_outside_stalls(second.bound_after_ms, stalls)]
        experiment.figure("second.frames_lost_once_back", lost_after, seed="0")
        experiment.figure("second.frames_over_bound_once_back", len(late), seed="0")
        if lost_after or late:
            problems.append(f"second: once set up again {lost_after} frames lost, {len(late)} over its bound")
    if protected is not None:
        problems += judge_protected(experiment, protected, timeline["protected_cuts"])
    plot(experiment, channels, cut_at, mend_at)
    return experiment.finish(problems, {"timeline": timeline})


def judge_protected(experiment: Experiment, c: Channel, cuts: list[dict[str, Any]]) -> list[str]:
    """0 frames lost and none over the bound across a cut of each trunk; the recovery's figures."""
    assert c.video is not None
    problems = []
    experiment.figure("protected.paths", f"{' > '.join(c.path_before)} and {' > '.join(c.path_during)}")
    experiment.figure(
        "protected.cuts", "; ".join(f"{k['trunk']} for {k['mend_at'] - k['cut_at']:.1f} s" for k in cuts)
    )
    lost = c.video.frames_sent - c.video.frames_whole
    late = [t for t in c.video.timings if t.late_outside_stalls(c.bound_ms, experiment.stalls)]
    experiment.figure("protected.frames", f"{c.video.frames_whole}/{c.video.frames_sent}")
    experiment.figure("protected.frames_lost", lost, seed="0 (IEEE 802.1CB: seamless)")
    experiment.figure("protected.packets", f"{c.video.packets_received}/{c.video.packets_sent}")
    experiment.figure("protected.bound_ms", c.bound_ms)
    experiment.figure("protected.max_network_ms", max((t.network_ms for t in c.video.timings), default=None))
    experiment.figure("protected.frames_over_bound", len(late), seed="0")
    last = c.counters[-1] if c.counters else {}
    recovery = last.get("recovery") or {}
    experiment.figure("protected.duplicates_discarded", recovery.get("discarded"))
    experiment.figure("protected.frames_by_path", recovery.get("arrived_by_path"))
    for name in ("passed", "out_of_order", "rogue", "lost"):
        experiment.figure(f"protected.recovery_{name}", recovery.get(name))
    if lost:
        problems.append(f"protected: {lost} of {c.video.frames_sent} frames lost across the cuts")
    if late:
        problems.append(f"protected: {len(late)} frames over its {c.bound_ms:.1f} ms bound")
    if c.state_after != "active" or c.path_after != c.path_before:
        problems.append(
            f"protected: {c.state_after} on {' > '.join(c.path_after)} after the cuts, not where it was"
        )
    if not recovery.get("discarded"):
        problems.append("protected: the last switch discarded no duplicates (was it replicated at all?)")
    return problems


def plot(experiment: Experiment, channels: dict[str, Channel], cut_at: float, mend_at: float) -> None:
    """The receivers' inter-frame times through the cut (seed 001 Figure 6)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 5))
    for c in channels.values():
        assert c.video is not None
        arrivals = sorted(max(a for _, a in t.packets) / 1e9 - cut_at for t in c.video.timings if t.packets)
        gaps = [(b, (b - a) * 1000) for a, b in itertools.pairwise(arrivals)]
        ax.plot(
            [t for t, _ in gaps], [g for _, g in gaps], ".", ms=3, label=f"{c.name} ({c.path_before[0]} ...)"
        )
    ax.axvline(0, color="red", lw=1, label="trunk cut")
    ax.axvline(mend_at - cut_at, color="green", lw=1, label="trunk mended")
    ax.set_yscale("log")
    ax.set_xlabel("time from the cut (s)")
    ax.set_ylabel("receive inter-frame time (ms)")
    ax.set_title(f"E11 the cut on {experiment.switch} (after seed 001 Fig. 6)")
    ax.legend(fontsize=8)
    experiment.save_plot(fig, "interframe")


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
