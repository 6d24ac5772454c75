"""terrapin-host on loopback (no switch): request/serve/close against each other over real raw
ICMP sockets, the destination's accept policy, and a timeout when nobody answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

if os.geteuid() != 0:
    pytest.skip("raw ICMP sockets need root", allow_module_level=True)

AGENT = [sys.executable, "-m", "terrapin.host_agent"]


def run(*args: str) -> tuple[int, dict[str, object]]:
    proc = subprocess.run([*AGENT, *args], capture_output=True, text=True, timeout=30)
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def server() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [
            *AGENT,
            "serve",
            "--address",
            "127.0.0.1",
            "--max-rate",
            "50000",
            "--deny-priority",
            "3",
            "--idle-timeout",
            "20",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    yield proc
    proc.terminate()
    proc.wait(5)


def request(*extra: str) -> tuple[int, dict[str, object]]:
    return run(
        "request",
        "--dst",
        "127.0.0.1",
        "--sport",
        "1",
        "--dport",
        "2",
        "--burst",
        "3000",
        "--timeout",
        "0.5",
        "--retries",
        "2",
        *extra,
    )


def test_serve_accepts_denies_and_closes(server: subprocess.Popen[bytes]) -> None:
    code, out = request("--priority", "6", "--rate", "10000", "--context", "1")
    assert code == 0 and out["outcome"] == "ACCEPTED" and out["context"] == 1
    code, out = request("--priority", "6", "--rate", "60000", "--context", "2")
    assert code == 1 and out["outcome"] == "DENIED" and out["reason_name"] == "DESTINATION_DENIED"
    code, out = request("--priority", "3", "--rate", "10000", "--context", "3")
    assert code == 1 and out["outcome"] == "DENIED"
    # a retransmitted request gets the same answer
    code, out = request("--priority", "6", "--rate", "10000", "--context", "1")
    assert code == 0 and out["outcome"] == "ACCEPTED"
    code, out = run("close", "--dst", "127.0.0.1", "--context", "1", "--timeout", "0.5")
    assert code == 0 and out["outcome"] == "CLOSED"


def test_nobody_answers_is_a_timeout() -> None:
    code, out = request("--priority", "6", "--rate", "10000", "--context", "9", "--retries", "1")
    assert code == 2 and out["outcome"] == "TIMEOUT"


def test_bad_arguments_are_reported() -> None:
    code, out = run("request", "--dst", "not-an-address", "--priority", "6", "--rate", "1", "--burst", "1500")
    assert code == 2 and out["outcome"] == "ERROR"


def test_watch_prints_the_routers_notices_and_answers_them(server: subprocess.Popen[bytes]) -> None:
    """After its ACCEPT, `request --watch` prints a router's PATH_DOWN close and its new ACCEPT,
    answers the close with RECVD_CLOSE, and stops at a close for good."""
    from terrapin.constants import DenialReason, MessageCode
    from terrapin.host_agent import Endpoint
    from terrapin.protocol.messages import ReservationMessage

    watcher = subprocess.Popen(
        [*AGENT, "request", "--dst", "127.0.0.1", "--sport", "1", "--dport", "2", "--burst", "3000",
         "--priority", "6", "--rate", "10000", "--context", "11", "--timeout", "0.5", "--watch", "15"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert watcher.stdout is not None
    first = json.loads(watcher.stdout.readline())
    assert first["outcome"] == "ACCEPTED"
    router = Endpoint()
    try:
        channel = ReservationMessage(
            MessageCode.NOTIFY_CLOSE, 11, "127.0.0.1", "127.0.0.1", protocol=17, priority=6,
            flow_key=1 << 16 | 2, reason=DenialReason.PATH_DOWN,
        )  # fmt: skip
        router.send("127.0.0.1", channel)
        down = json.loads(watcher.stdout.readline())
        assert down["notice"] == "NOTIFY_CLOSE" and down["reason_name"] == "PATH_DOWN"
        deadline = time.monotonic() + 5
        answered = False
        while not answered and time.monotonic() < deadline:
            got = router.receive(1.0)
            answered = got is not None and got[1].code == MessageCode.RECVD_CLOSE and got[1].context == 11
        assert answered
        router.send("127.0.0.1", channel.with_code(MessageCode.REQUEST_ACCEPT, reason=0, delay_us=42_000))
        up = json.loads(watcher.stdout.readline())
        assert up["notice"] == "REQUEST_ACCEPT" and up["delay_us"] == 42_000
        router.send("127.0.0.1", channel.with_code(MessageCode.NOTIFY_CLOSE, reason=0))
        closed = json.loads(watcher.stdout.readline())
        assert closed["notice"] == "NOTIFY_CLOSE" and "reason_name" not in closed
        assert watcher.wait(5) == 0
    finally:
        router.close()
        watcher.kill()
        watcher.wait()
