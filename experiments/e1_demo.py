"""E1 — seed 000 §4.3.2, the headline: `make demo` as an experiment (topo/demo.py says what it
runs). A video from a1 to b1 on christie while a2 and a3 flood b1 at the line rate: unreserved
(its priority claim demoted) it loses frames; reserved at 9 Mbit/s with a 27,000-byte burst it
loses nothing and every frame is within the controller's bound; and when the controller is made
to believe the port is ten times faster, its guarantee monitor raises the alarm within two polls.
Frames late while the machine itself stalled are left out and shown (docs/experiments.md).

    sudo build/venv/bin/python -m experiments.e1_demo [--short] [--switch bmv2]
"""

from __future__ import annotations

import sys

from experiments.harness import Experiment
from topo import christie, demo

EXPERIMENT = Experiment(
    1,
    "demo",
    title="reserved against unreserved video through a congested port (make demo)",
    seed_ref="seed 000 §4.3.2 (Figs 18-19's setting)",
    seed_numbers=[
        "the reserved video is delivered whole while the router is congested; no frame late",
        "the high-priority queue never deeper than the admitted bursts",
    ],
)


def main(argv: list[str] | None = None) -> int:
    experiment = EXPERIMENT
    experiment.parse(argv)
    seconds = 5.0 if experiment.short else 20.0
    rate = demo.DEFAULT_RATE_MBPS[experiment.switch]
    experiment.note_scale(f"{seconds:g} s of video per run (make demo: 20); christie at {rate:g} Mbit/s")
    with experiment.network(christie.plan(rate_mbps=rate)) as run:
        unreserved, reserved, broken = demo.three_runs(run, seconds, min(5.0, seconds), experiment.work)
    for result in (unreserved, reserved):
        key = result.label
        video = result.video
        experiment.figure(f"{key}.frames_whole", f"{video.frames_whole}/{video.frames_sent}")
        experiment.figure(f"{key}.packet_loss", video.packet_loss, seed="0" if key == "reserved" else None)
        experiment.figure(f"{key}.p99_ms", result.percentile(99))
        experiment.figure(
            f"{key}.frames_over_bound", result.over_bound, seed="0" if key == "reserved" else None
        )
    experiment.figure("reserved.bound_ms", reserved.bound_ms)
    experiment.figure("reserved.max_qdepth", reserved.max_qdepth, seed=f"<= {reserved.sum_bursts} (admitted)")
    if broken.monitor is not None:
        experiment.figure(
            "broken.alarm_s", broken.monitor.alarm_s, seed=f"<= {2 * broken.monitor.interval_s:g}"
        )
    late = reserved.video.frames_over(reserved.bound_ms)
    in_stalls = late - reserved.video.frames_over_outside_stalls(reserved.bound_ms, experiment.stalls)
    experiment.figure("reserved.frames_late_in_machine_stalls", in_stalls)
    demo.plot([unreserved, reserved], experiment.plot_path("latency"))
    return experiment.finish(demo.problems(reserved, broken, experiment.stalls))


if __name__ == "__main__":
    sys.exit(EXPERIMENT.run(main))
