"""The pure parts of the experiments (no network): make experiments' selection and report, the
envelope check E8 and E10 judge by, E3's receiver buffer and delay verdict, and how flow logs are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.e3_allocated_rate import RateRun, buffer_occupancy, judge_delay
from experiments.harness import most_over_envelope
from experiments.run import section, select
from terrapin.admission.model import ChannelEnvelope
from topo.experiment import FrameTiming, MonitorVerdict, VideoRun, percentile, read_flow_logs


def test_select_names_experiments_in_the_order_given_and_refuses_unknown_ones() -> None:
    assert [e.tag for e in select("")] == [f"E{n}" for n in range(1, 11)]
    assert [e.tag for e in select("e5, E3")] == ["E5", "E3"]
    with pytest.raises(SystemExit, match="no experiment E11"):
        select("E3,E11")


def test_the_report_section_shows_verdict_seed_figures_plot_and_command() -> None:
    record = {
        "experiment": "E4",
        "name": "queue-depth",
        "title": "t",
        "seed_ref": "seed 000 Fig. 19",
        "seed_numbers": ["max depth 13 > 8"],
        "scale": ["5 s per test"],
        "figures": [{"key": "bg128.max_queue_depth", "value": 9, "seed": "13"}],
        "plots": ["E4-depth.png"],
        "verdict": "FAIL",
        "problems": ["bg128: queue depth 9 > 8 admitted"],
        "make_command": "make experiments ONLY=E4",
        "command": "sudo build/venv/bin/python -m experiments.e4_queue_depth",
        "switch": "terrapin",
        "elapsed_s": 40,
    }
    page = section(record)
    for text in ("seed 000 Fig. 19", "max depth 13 &gt; 8", "bg128.max_queue_depth", "E4-depth.png",
                 "class=\"fail\"", "queue depth 9 &gt; 8", "make experiments ONLY=E4"):  # fmt: skip
        assert text in page, text


@pytest.mark.parametrize(
    ("gaps_us", "over"),
    [
        ([1000] * 20, False),  # 1 packet of 1,000 B per ms = 1,000,000 B/s: the rate itself
        ([100] * 20, True),  # ten times the rate: past the 2,000-byte burst at once
    ],
)
def test_most_over_envelope_finds_traffic_above_a_meters_bound(gaps_us: list[int], over: bool) -> None:
    envelope = ChannelEnvelope(6, 1_000_000, 2_000, 1000)
    arrivals, t = [], 0
    for gap in gaps_us:
        arrivals.append(t)
        t += gap
    assert (most_over_envelope(arrivals, 1000, envelope, 0) > 0) == over


def timings(latencies_ms: list[float]) -> VideoRun:
    frames = [FrameTiming(i, i / 30, ms, 0.0, ms) for i, ms in enumerate(latencies_ms)]
    return VideoRun(len(frames), len(frames), len(frames), frames, [])


def test_the_receiver_buffer_holds_fewer_frames_the_later_they_arrive() -> None:
    fast, slow = buffer_occupancy(timings([5.0] * 60)), buffer_occupancy(timings([25.0] * 60))
    # a frame stays from its arrival until four periods after its capture: 4 frames queued for
    # the part of each period after the newest one arrived, 3 before it
    assert fast[4] == pytest.approx(1 - 5 / (1000 / 30), abs=0.02)
    assert slow[4] == pytest.approx(1 - 25 / (1000 / 30), abs=0.02)
    assert fast[4] > slow[4] and sum(fast.values()) == pytest.approx(1)
    late = buffer_occupancy(timings([5.0] * 30 + [200.0] + [5.0] * 29))  # one frame too late to show
    assert late[3] > fast[3]


def rate_run(network_ms: list[float], switch_wait_ms: float, over_packets: int = 0) -> RateRun:
    monitor = MonitorVerdict(polls=10, network=0, source=0, bands={"within": 500, "over": over_packets})
    return RateRun(6.0, 2.5, timings(network_ms), switch_wait_ms, monitor)


@pytest.mark.parametrize(
    ("network_ms", "switch_wait_ms", "over_packets", "fails", "remarks"),
    [
        ([1.0] * 200, 0.5, 0, 0, False),  # all within
        ([1.0] * 199 + [10.0], 0.5, 0, 0, True),  # one frame late by the hosts only: remarked
        ([1.0] * 197 + [10.0] * 3, 0.5, 0, 1, False),  # 3 of 200 is above the 1% share
        ([1.0] * 199 + [10.0], 3.0, 0, 2, False),  # the switch's queue itself held it too long
        ([1.0] * 200, 0.5, 1, 1, False),  # the monitor counted a packet past the bound
        ([1.0] * 199 + [10.0], 0.5, 1, 2, False),  # late frame and the switch saw one: no excuse
    ],
)
def test_e3_judges_delay_by_the_switch_and_allows_hosts_little(
    network_ms: list[float], switch_wait_ms: float, over_packets: int, fails: int, remarks: bool
) -> None:
    failed, remark = judge_delay(rate_run(network_ms, switch_wait_ms, over_packets))
    assert len(failed) == fails
    assert (remark is not None) == remarks


def test_flow_logs_pair_each_sent_packet_with_its_arrival(tmp_path: Path) -> None:
    sender, receiver = tmp_path / "sender.json", tmp_path / "receiver.json"
    frames = [{"frame": n, "bytes": 100, "packets": 1, "start_ns": n * 1000} for n in range(3)]
    sender.write_text(json.dumps({"flows": [{"port": 5010, "packet_bytes": 200, "frames": frames}]}))
    got = [{"port": 5010, "frame": n, "packet_times": [[0, n * 1000 + 5, n * 1000 + 2005]]} for n in (0, 2)]
    receiver.write_text(json.dumps({"frames": got}))
    flow = read_flow_logs(sender, receiver)[5010]
    assert (flow.sent, flow.received) == (3, 2)
    assert flow.delays_ms() == [0.002, 0.002]
    assert flow.loss == pytest.approx(1 / 3)
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([1.0, 2.0], 100) == 2.0
