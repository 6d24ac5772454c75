"""An experiment never dies on an answer (issue 22), and E2 finds its largest admitted rate on any
port without asking for an invalid one. No network: the controller is a stand-in HTTP server on
127.0.0.1 that answers POST /reservations the way the real one does (201, a 409 denial naming its
constraint and shortfall, a 422 naming the field), over one port of a given line rate, shaped in
bytes/s (terrapin-switch) or in packets/s (BMv2: every packet takes a slot of the line)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import experiments.harness
from experiments import e2_priority_throughput as e2
from experiments import e5_sequoia as e5
from experiments import e9_best_effort as e9
from experiments.harness import Experiment, refusal
from topo import christie
from topo.experiment import NothingAdmitted, channel, largest_admitted, reserve
from topo.network import RestError, RunningNetwork
from topo.plan import NetworkPlan


@dataclasses.dataclass
class Port:
    """The admission the stand-in applies: one port's capacity test, as static_priority.capacity
    words it (excess = total - (limit - 1), in the port's units)."""

    limit: int  # bytes/s of the line
    others: int = 0  # already admitted, in the port's units
    packet_slot: int = 0  # > 0: a packet-rate port, every packet charged this many bytes
    burst_limit: int | None = None  # a burst above it is refused by rate_buffer.buffer (bytes)
    asked: list[int] = dataclasses.field(default_factory=list)
    answer: tuple[int, dict[str, Any]] | None = None  # a fixed answer instead (a switch error)

    def charge(self, rate: int, max_packet: int) -> int:
        return math.ceil(rate * self.packet_slot / max_packet) if self.packet_slot else rate

    def largest(self, max_packet: int) -> int:
        """The largest rate this port admits (the answer largest_admitted should find)."""
        return max((r for r in range(1, self.limit + 1) if self.admits(r, max_packet)), default=0)

    def admits(self, rate: int, max_packet: int) -> bool:
        return self.others + self.charge(rate, max_packet) < self.limit

    def post(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.answer is not None:
            return self.answer
        rate = body.get("rate")
        if not isinstance(rate, int) or rate <= 0:
            return 422, {"error": "invalid request", "detail": [
                {"field": "rate", "message": "Input should be greater than 0"}]}  # fmt: skip
        self.asked.append(rate)
        if self.burst_limit is not None and body.get("burst", 0) >= self.burst_limit:
            return 409, denial("rate_buffer.buffer", body["burst"], self.burst_limit, "bytes")
        total = self.others + self.charge(rate, body["max_packet"])
        if total >= self.limit:
            return 409, denial("static_priority.capacity", total, self.limit, "bytes/s")
        return 201, {"id": len(self.asked), "allocation": {"rate": rate, "burst": body.get("burst", 0)}}


def denial(constraint: str, would_be: int, limit: int, unit: str) -> dict[str, Any]:
    excess = would_be - (limit - 1)
    message = f"{constraint} at terrapin:4 level 6: {would_be} {unit} against a limit of {limit}"
    violation = {"constraint": constraint, "switch": "terrapin", "port": 4, "priority": 6, "limit": limit,
                 "would_be": would_be, "excess": excess, "unit": unit}  # fmt: skip
    return {"error": "admission denied", "constraint": constraint, "message": message, "excess": excess,
            "unit": unit, "violations": [violation]}  # fmt: skip


@contextlib.contextmanager
def controller(port: Port, plan: NetworkPlan | None = None) -> Iterator[RunningNetwork]:
    """A RunningNetwork of `plan` (christie) whose REST API is the stand-in for `port` (no
    Mininet)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.reply(*port.post(body))

        def do_DELETE(self) -> None:
            self.reply(204, None)

        def reply(self, status: int, body: object) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RunningNetwork(
            plan=plan or christie.plan(rate_mbps=20),
            net=None,  # nothing here reaches the hosts
            controller=None,
            rest_url=f"http://127.0.0.1:{server.server_address[1]}",
            token="t",
            config_path=Path("/dev/null"),
        )
    finally:
        server.shutdown()
        server.server_close()


def body(run: RunningNetwork, max_packet: int) -> dict[str, Any]:
    return channel(run, "a1", "b1", 5020, 6, max_packet, burst=4 * max_packet)


# ---- largest_admitted ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("port", "max_packet", "most_requests"),
    [
        # bytes/s: the shortfall is the channel's own, exact after a second point
        (Port(2_500_000), 1024, 3),
        (Port(2_500_000, others=400_000), 4500, 3),
        (Port(2_500_000, others=10_000), 4500, 2),  # within 1% of the asked: the second is granted
        # packets/s, slot of the MTU: a 512 B channel costs 8.8x its bytes, 4,500 B ones less
        (Port(1_250_000, packet_slot=4500), 512, 6),
        (Port(1_250_000, packet_slot=1500), 4500, 6),
        (Port(1_250_000, others=1_000_000, packet_slot=1500), 1024, 6),
    ],
)
def test_the_largest_admitted_rate_is_found_on_byte_and_packet_rate_ports(
    port: Port, max_packet: int, most_requests: int
) -> None:
    with controller(port) as run:
        granted = largest_admitted(run, body(run, max_packet), port.limit)
    rate = granted["allocation"]["rate"]
    assert port.admits(rate, max_packet)
    assert rate >= 0.97 * port.largest(max_packet), (rate, port.largest(max_packet), port.asked)
    assert len(port.asked) <= most_requests, port.asked
    assert min(port.asked) >= 1


@pytest.mark.parametrize("slot", [0, 4500])
def test_nothing_admitted_is_said_after_asking_the_smallest_rate_never_below(slot: int) -> None:
    # The line is taken: every rate is short by more than itself (E2 on BMv2 asked for rate 0).
    port = Port(1_250_000, others=1_250_000, packet_slot=slot)
    with controller(port) as run, pytest.raises(NothingAdmitted) as caught:
        largest_admitted(run, body(run, 1024), 1_250_000)
    assert min(port.asked) == 1, port.asked
    text = str(caught.value)
    assert "nothing admitted" in text and "static_priority.capacity at terrapin:4" in text, text
    assert "asked 1250000 B/s, denied down to 1 B/s" in text, text


def test_a_denial_no_lower_rate_cures_is_nothing_admitted_at_once() -> None:
    port = Port(2_500_000, burst_limit=1000)  # the channel's burst (4 packets) is past the buffer
    with controller(port) as run, pytest.raises(NothingAdmitted, match=r"rate_buffer\.buffer"):
        largest_admitted(run, body(run, 1024), 2_500_000)
    assert port.asked == [2_500_000]


def test_an_answer_that_is_not_a_denial_is_raised_as_it_came() -> None:
    port = Port(2_500_000, answer=(502, {"error": "switch error", "switch": "terrapin", "message": "no"}))
    with controller(port) as run, pytest.raises(RestError) as caught:
        largest_admitted(run, body(run, 1024), 2_500_000)
    assert caught.value.status == 502


# ---- an unplanned answer is a verdict --------------------------------------------------------------


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(experiments.harness, "RESULTS", tmp_path)
    return tmp_path


def fresh(experiment: Experiment) -> Experiment:
    """A copy of a module's experiment with nothing recorded yet (each test runs main anew)."""
    return dataclasses.replace(experiment, figures=[], plots=[], scale=[], gathered={})


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            (409, denial("static_priority.capacity", 321000, 192000, "bytes/s")),
            "POST /reservations refused (409 admission denied): static_priority.capacity at terrapin:4"
            " level 6: 321000 bytes/s against a limit of 192000",
        ),
        (
            (422, {"error": "invalid request", "detail": [{"field": "rate", "message": "must be > 0"}]}),
            "POST /reservations refused (422 invalid request): rate: must be > 0",
        ),
        (
            (502, {"error": "switch error", "switch": "s1", "message": "INVALID_ARGUMENT: meter"}),
            "POST /reservations refused (502 switch error): s1: INVALID_ARGUMENT: meter",
        ),
    ],
)
def test_an_answer_the_experiment_did_not_plan_for_is_a_fail_verdict_with_what_it_had(
    answer: tuple[int, dict[str, Any]], said: str, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = Experiment(99, "demo", title="t", seed_ref="seed", seed_numbers=[])
    port = Port(2_500_000, answer=answer)

    def main(argv: list[str] | None) -> int:
        experiment.parse(argv)
        points = experiment.keep("points", [{"size": 512, "received": 100}])
        experiment.figure("first.loss", 0.0, seed="0")
        experiment.phase("the second point")
        with controller(port) as run:
            points.append({"size": 1024, "received": 7})
            reserve(run, body(run, 1024))
        return experiment.finish([])

    assert experiment.run(main, ["--short"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"E99 demo: FAIL stopped during 'the second point': {said}"
    record = json.loads((results / "short" / "E99.json").read_text())
    assert record["verdict"] == "FAIL"
    figures = {f["key"]: f["value"] for f in record["figures"]}
    assert figures["first.loss"] == 0.0  # printed before the answer
    assert json.loads(figures["so_far.points"])[1] == {"size": 1024, "received": 7}
    assert record["data"]["stopped"] == {"phase": "the second point", "error": said, "exception": "RestError"}


def test_any_exception_is_a_verdict_but_not_before_parse_nor_after_the_verdict(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = Experiment(98, "demo", title="t", seed_ref="seed", seed_numbers=[])

    def sender_failed(argv: list[str] | None) -> int:
        experiment.parse(argv)
        raise RuntimeError("sender video failed with exit code 1")

    assert experiment.run(sender_failed, []) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "E98 demo: FAIL stopped: RuntimeError: sender video failed with exit code 1"
    )

    def before_parse(_argv: list[str] | None) -> int:
        raise ValueError("no arguments yet")

    with pytest.raises(ValueError, match="no arguments yet"):
        Experiment(97, "demo", title="t", seed_ref="s", seed_numbers=[]).run(before_parse, [])

    after = Experiment(96, "demo", title="t", seed_ref="s", seed_numbers=[])

    def after_verdict(argv: list[str] | None) -> int:
        after.parse(argv)
        after.finish([])
        raise OSError("the plot's disk is full")

    with pytest.raises(OSError, match="disk is full"):
        after.run(after_verdict, [])


def test_refusal_names_a_failed_command_with_its_error_output() -> None:
    import subprocess

    command = ["simple_switch_CLI", "--thrift-port", "9090"]
    error = subprocess.CalledProcessError(1, command, stderr=b"x\nno such register\n")
    said = "`simple_switch_CLI --thrift-port 9090` failed with exit status 1: x no such register"
    assert refusal(error) == said


def run_main(module: Any, port: Port, monkeypatch: pytest.MonkeyPatch) -> int:
    """An experiment's own main on the stand-in controller, in place of its Mininet network."""
    experiment = fresh(module.EXPERIMENT)
    monkeypatch.setattr(module, "EXPERIMENT", experiment)

    @contextlib.contextmanager
    def network(plan: NetworkPlan, **_kwargs: object) -> Iterator[RunningNetwork]:
        with controller(port, plan) as run:
            yield run

    monkeypatch.setattr(experiment, "network", network)
    return int(experiment.run(module.main, ["--short", "--switch=bmv2"]))


def run_e2(port: Port, monkeypatch: pytest.MonkeyPatch) -> int:
    return run_main(e2, port, monkeypatch)


def test_e2_reports_nothing_admitted_as_its_verdict(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = Port(1_250_000, others=1_250_000, packet_slot=4500)
    assert run_e2(port, monkeypatch) == 1
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict.startswith("E2 priority: FAIL bg128.hp1024: nothing admitted for 10.0.1."), verdict
    assert verdict.count("nothing admitted") == len(e2.BACKGROUND_SIZES) * 2  # every point, each said
    assert "stopped" not in verdict and min(port.asked) == 1
    record = json.loads((results / "short" / "bmv2" / "E2.json").read_text())  # run as on BMv2
    assert all(p["admitted_Bps"] == 0 and p["nothing_admitted"] for p in record["data"]["points"])


def test_e2_stopped_by_a_switch_error_says_so_with_its_phase(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    down = {"error": "switch unavailable", "switch": "terrapin", "message": "down", "retry_after": 10}
    port = Port(1_250_000, answer=(503, down))
    assert run_e2(port, monkeypatch) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "E2 priority: FAIL stopped during 'background 128 B, high priority 1024 B':"
        " POST /reservations refused (503 switch unavailable): terrapin: down"
    )
    assert (results / "short" / "bmv2" / "E2.json").exists()


@pytest.mark.parametrize("module", [e5, e9])
def test_a_switch_error_where_a_refusal_is_planned_is_not_taken_for_one(
    module: Any, results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # E5 and E9 plan for a 409 naming a constraint; a 502 is the switch's trouble, said as such
    # (it was "channel 1 was refused by None, not the floor" on BMv2 when another controller held
    # the switch).
    message = "programming terrapin failed: Not primary"
    refused = {"error": "switch error", "switch": "terrapin", "message": message}
    assert run_main(module, Port(1_250_000, answer=(502, refused)), monkeypatch) == 1
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict.endswith(
        "POST /reservations refused (502 switch error): terrapin: programming terrapin failed: Not primary"
    ), verdict
    assert ": FAIL stopped during '" in verdict
