"""A partition as the chaos run makes one (build/bin/terrapin-partition): a process in a cgroup of
its own is cut off from a TCP service on the loopback, both ways and without a reset, while the
rest of the machine still reaches it; once the partition ends, the same connection carries on.

Needs root, the cgroup v2 hierarchy and build/bin/terrapin-partition (make toolchain)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from topo.chaos.actuators import PARTITION_BIN, cgroup2_root, store_port

CGROUP = "terrapin-test-partition"

# A client in the cgroup that keeps one connection and, for each line it reads, echoes a byte
# through it ("echo") or opens a new one ("new"), printing "ok" or the exception's name.
CLIENT = """
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=2)
for command in iter(sys.stdin.readline, ""):
    try:
        if command.strip() == "echo":
            s.settimeout(1.0); s.sendall(b"x"); s.recv(10)
        else:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        print("ok", flush=True)
    except OSError as e:
        print(type(e).__name__, flush=True)
"""


class Client:
    def __init__(self, cgroup: Path, port: int) -> None:
        joined = f'echo $$ > {cgroup / "cgroup.procs"} && exec "$@"'
        self.process = subprocess.Popen(
            ["sh", "-c", joined, "--", sys.executable, "-c", CLIENT, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(30)


@pytest.mark.parametrize(
    ("dsn", "port"),
    [("postgresql://terrapin@127.0.0.1:54329/sequoia-ring", 54329), ("host=127.0.0.1 port=5433", 5433)],
)
def test_the_stores_port_is_read_from_its_address(dsn: str, port: int) -> None:
    assert store_port(dsn) == port


def bound(low_byte_high: bool) -> socket.socket:
    """A listening socket on a free port whose low byte is 128 or more, or below: the program
    compares a 32-bit word whose top bit is that byte's (a 64-bit comparison missed the first
    kind, so a partition of such a port cut nothing)."""
    for port in range(47_000, 48_000):
        if (port & 0xFF >= 128) != low_byte_high:
            continue
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("127.0.0.1", port))
        except OSError:
            server.close()
            continue
        return server
    raise RuntimeError("no free port in 47000-47999")


@pytest.fixture(params=[True, False], ids=["port-low-byte-128-up", "port-low-byte-below-128"])
def echo(request: pytest.FixtureRequest) -> Iterator[int]:
    server = bound(bool(request.param))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(
                target=lambda c=conn: [c.sendall(d) for d in iter(lambda: c.recv(100), b"")], daemon=True
            ).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def cgroup() -> Iterator[Path]:
    root = cgroup2_root()
    if os.geteuid() != 0 or root is None or not PARTITION_BIN.exists():
        pytest.skip("needs root, the cgroup v2 hierarchy and build/bin/terrapin-partition")
    path = root / CGROUP
    path.mkdir(exist_ok=True)
    yield path
    for _ in range(50):  # the client has exited; the kernel empties the cgroup a moment later
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def test_a_partition_cuts_off_the_cgroup_only_and_heals(echo: int, cgroup: Path) -> None:
    client = Client(cgroup, echo)
    assert [client.ask("echo"), client.ask("new")] == ["ok", "ok"]
    cut = subprocess.Popen(
        [str(PARTITION_BIN), "--cgroup", str(cgroup), "--port", str(echo)], stdout=subprocess.PIPE, text=True
    )
    assert cut.stdout is not None
    try:
        assert cut.stdout.readline().strip() == "partitioned"
        # no reply and no reset: the packets are gone, both on the connection and to a new one
        assert [client.ask("echo"), client.ask("echo"), client.ask("new")] == ["TimeoutError"] * 3
        # the rest of the machine is not cut off
        with socket.create_connection(("127.0.0.1", echo), timeout=2) as outsider:
            outsider.sendall(b"y")
            assert outsider.recv(10) == b"y"
    finally:
        cut.terminate()
        cut.wait(10)
    # healed: TCP retransmits what was lost, and the connection carries on
    assert client.ask("new") == "ok"
    replies = [client.ask("echo") for _ in range(8)]
    assert "ok" in replies, replies
    assert client.close() == 0
