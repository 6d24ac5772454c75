"""`make run REPLICAS=2 STORE=postgres` survives kill -9 of the primary: christie under Mininet on
terrapin-switch, a PostgreSQL cluster of the test's own, and two supervised replicas, as
topo/run.py brings them up (docs/deployment.md).

Needs root, build/p4, the controller in build/venv and Debian's PostgreSQL (`make setup`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from terrapin.pgserver import PostgresError, find_bindir
from topo import christie
from topo.experiment import VIDEO_PORT
from topo.network import ControllerProcess, RunningNetwork, call, roles, running
from topo.p4switch import REPO
from topo.tests.test_christie_e2e import reservation_body, wait_until

# Its own prefix (scripts/leftovers.py judges every trpt one), apart from test_christie_e2e's.
INTF_PREFIX = "trptrp"
# A backup takes an expired lease: lease_seconds (1.5) after the last renewal, at its next look
# (renew_seconds, 0.25), then claims and reconciles the switch. 5 s leaves a loaded 2-core machine
# room; the figure is printed.
TAKEOVER_LIMIT_S = 5.0


def _postgres_installed() -> bool:
    try:
        find_bindir()
    except PostgresError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build/p4/terrapin.json").exists() or not _postgres_installed(),
    reason="needs root, build/p4 and PostgreSQL (make setup)",
)


def health(run: RunningNetwork, controller: ControllerProcess) -> tuple[int, str | None]:
    """(HTTP status, role) of a replica's /health; (0, None) while it does not answer."""
    try:
        status, body = call(run, "GET", "/health", url=controller.rest_url)
    except OSError:
        return 0, None
    return status, body["replication"]["role"]


def reserve(run: RunningNetwork, controller: ControllerProcess, src: str, dst: str) -> int:
    # 2 Mbit/s each: four channels fit the 20 Mbit/s ports towards b1 and b2.
    body = {**reservation_body(run, src, dst), "rate": 250_000}
    status, granted = call(run, "POST", "/reservations", body, url=controller.rest_url)
    assert status == 201, (controller.replica, granted)
    return int(granted["id"])


def listed(run: RunningNetwork, controller: ControllerProcess) -> list[int]:
    status, reservations = call(run, "GET", "/reservations", url=controller.rest_url)
    assert status == 200, reservations
    return sorted(r["id"] for r in reservations)


def packets_counted(run: RunningNetwork, controller: ControllerProcess, reservation: int) -> int:
    """What the channel's entry on the switch has matched (its direct counter), read by `controller`."""
    status, hops = call(run, "GET", f"/reservations/{reservation}/counters", url=controller.rest_url)
    assert status == 200 and "telemetry_error" not in hops[0], hops
    return int(hops[0]["packets"])


def send_udp(run: RunningNetwork, src: str, dst: str, count: int) -> None:
    """`count` datagrams on the reserved flow (UDP VIDEO_PORT -> VIDEO_PORT)."""
    address = run.plan.hosts[dst].address
    run.host(src).cmd(
        "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        f's.bind(("", {VIDEO_PORT})); '
        f'[s.sendto(bytes(200), ("{address}", {VIDEO_PORT})) for _ in range({count})]\''
    )


def test_killing_the_primary_loses_nothing_and_it_comes_back_as_a_backup(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    os.environ["PATH"] = f"{REPO / 'build' / 'venv' / 'bin'}:{os.environ['PATH']}"
    state = tmp_path_factory.mktemp("replicas")
    with running(
        christie.plan(rate_mbps=20),
        rest_port=18281,
        token="e2e-token",
        state_dir=state,
        intf_prefix=INTF_PREFIX,
        supervise=True,
        pid_dir=state / "pids",
        store="postgres",  # a temporary cluster: no postgres_dir
        replicas=2,
    ) as run:
        c0, c1 = run.controllers
        assert roles(run) == {"c0": "primary", "c1": "backup"}
        # One through the primary, one through the backup, which forwards it and reads it back.
        before = [reserve(run, c0, "a1", "b1"), reserve(run, c1, "a2", "b2")]
        assert listed(run, c1) == before

        primary = run.process(c0)
        assert primary is not None
        killed_at, killed_at_wall = time.monotonic(), time.time()
        os.kill(primary.pid, signal.SIGKILL)
        assert wait_until(lambda: health(run, c1) == (200, "primary"), timeout=30), health(run, c1)
        takeover = time.monotonic() - killed_at
        print(f"takeover_s: {takeover:.2f}")
        assert takeover < TAKEOVER_LIMIT_S

        # c1 reconciled the switch and found it equal to the store: nothing to add or remove.
        report = call(run, "GET", "/health", url=c1.rest_url)[1]["reconciled"]["terrapin"]
        assert report["finished_at"] > killed_at_wall and report["inserted"] == report["deleted"] == 0, report
        assert listed(run, c1) == before
        # Each channel's entry is on the switch: it matches the flow's packets.
        for reservation, (src, dst) in zip(before, (("a1", "b1"), ("a2", "b2")), strict=True):
            counted = packets_counted(run, c1, reservation)
            send_udp(run, src, dst, 10)
            assert wait_until(lambda r=reservation, c=counted: packets_counted(run, c1, r) >= c + 10, 10)

        after = [reserve(run, c1, "a3", "b1")]
        # The supervisor restarts c0, which comes back as a backup and forwards to c1.
        assert wait_until(lambda: health(run, c0) == (200, "backup"), timeout=60), health(run, c0)
        assert (restarted := run.process(c0)) is not None and restarted.pid != primary.pid
        after.append(reserve(run, c0, "a3", "b2"))
        assert listed(run, c0) == listed(run, c1) == before + after
        assert roles(run) == {"c0": "backup", "c1": "primary"}
        store_port = int(run.store.rsplit(":", 1)[1].split("/")[0])

    # Torn down: no veth, and the temporary PostgreSQL is gone.
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f": {INTF_PREFIX}" not in links
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", store_port), timeout=2):
        pass
