"""What a person sees under `make run`, read in a pseudo-terminal as they would read it: the real
runner (`python -m topo.run`, what make run starts) with its Mininet CLI, and `make shell`
beside it, on every topology and, for christie, on p4lang's simple_switch_grpc too.

Per topology one runner serves every test here (tests of one topology run in file order). Each
example the banner prints is pasted as printed: the curl commands into bash, the in-band lines
into the CLI, and each must be admitted. The CLI must show a ping's replies, the host agent's
admitted line with its channel and bound, a denial naming the constraint, and `status`; the
shell must read the channels table, their meters, counters and registers beside the
controller, which stays primary, and refuse a pipeline push.

Needs root, build/p4 and build/venv (make setup) and build/venv-p4rtshell (scripts/p4rt-shell.sh
makes it); the `[christie-bmv2]` cases need BMv2 (make bmv2). Everything the runner creates is
named trptcli... (scripts/leftovers.py) and lives in a run directory of its own.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pexpect
import pytest

from topo.p4switch import REPO, switch_binary

REST_PORT = 18290
TOKEN = "terrapin"
INTF_PREFIX = "trptcli"
CLI_PROMPT = "mininet> "
# p4runtime-shell's prompt, with prompt_toolkit's escape sequences between its parts.
SHELL_PROMPT = r"P4Runtime sh\S* >>>"
TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
# A request no port of any topology can carry (the issue's own): denied by the rate test.
TOO_MUCH = 99_999_999

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build/p4/terrapin.json").exists(),
    reason="needs root and build/p4 (make setup)",
)


def readable(text: str | None) -> str:
    """What a terminal shows of `text` (pexpect's `before`): escape sequences and carriage
    returns removed."""
    return TERMINAL_CODES.sub("", text or "")


@dataclass
class Printed:
    """The examples of make run's banner, exactly as printed."""

    curl_post: str  # the POST, over two lines joined by a backslash
    curl_list: str
    cli: list[str]  # the in-band lines, each typed at the mininet> prompt


def printed_examples(banner: str) -> Printed:
    lines = banner.splitlines()
    post = next(i for i, line in enumerate(lines) if line.strip().startswith("curl -s -X POST"))
    listing = next(line.strip() for line in lines if re.match(r"\s*curl -s http\S+/reservations$", line))
    start = next(i for i, line in enumerate(lines) if line.startswith("Or in band")) + 1
    end = lines.index("", start)
    return Printed("\n".join(lines[post : post + 2]), listing, [line.strip() for line in lines[start:end]])


def last_json(output: str) -> dict[str, Any]:
    line = [x for x in output.splitlines() if x.startswith("{")][-1]
    found: dict[str, Any] = json.loads(line)
    return found


@dataclass
class Session:
    """make run's runner in a pseudo-terminal, and what it printed."""

    topology: str
    kind: str
    run_dir: Path
    child: pexpect.spawn[str] | None = None
    banner: str = ""
    typed: list[str] = field(default_factory=list)  # every command's output, as read

    def env(self) -> dict[str, str]:
        return os.environ | {
            "PATH": f"{REPO / 'build/venv/bin'}:{os.environ['PATH']}",
            "TERRAPIN_RUN_DIR": str(self.run_dir),
            "TERRAPIN_INTF_PREFIX": INTF_PREFIX,
        }

    def start(self) -> None:
        args = [
            "-m",
            "topo.run",
            "--topo",
            self.topology,
            "--switch",
            self.kind,
            "--rest-port",
            str(REST_PORT),
        ]
        self.child = pexpect.spawn(
            str(REPO / "build/venv/bin/python"),
            args,
            cwd=str(REPO),
            env=self.env(),
            encoding="utf-8",
            timeout=120,
            dimensions=(60, 250),
        )
        self.child.expect(CLI_PROMPT)
        self.banner = readable(self.child.before)

    def type(self, command: str, timeout: float = 30) -> str:
        """Type a command at the mininet> prompt; what the CLI printed back, without the echo."""
        assert self.child is not None
        self.child.sendline(command)
        self.child.expect(CLI_PROMPT, timeout=timeout)
        shown = readable(self.child.before).split("\n", 1)
        output = shown[1] if len(shown) > 1 else ""
        self.typed.append(output)
        return output

    def close(self) -> None:
        """`exit` at the prompt, as a person leaves; SIGTERM (make stop's) if that fails."""
        child = self.child
        if child is not None and child.isalive():
            try:
                child.sendline("exit")
                child.expect("Terrapin stopped", timeout=60)
                child.expect(pexpect.EOF, timeout=30)
            except pexpect.ExceptionPexpect:
                child.kill(signal.SIGTERM)
            child.close(force=True)
        # Anything the runner recorded and left (it was killed): make stop's way, by its PIDs.
        subprocess.run(["bash", "scripts/stop.sh", "--quiet"], cwd=REPO, env=self.env(), check=False)

    def rest(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{REST_PORT}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status, json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def shell(self, *make_args: str) -> pexpect.spawn[str]:
        """`make shell` in a pseudo-terminal of its own."""
        return pexpect.spawn(
            "make",
            ["--no-print-directory", "shell", *make_args],
            cwd=str(REPO),
            # pexpect answers no cursor-position request, which prompt_toolkit would await at
            # every prompt (a second each) where a real terminal answers at once.
            env=self.env() | {"PROMPT_TOOLKIT_NO_CPR": "1"},
            encoding="utf-8",
            timeout=60,
            dimensions=(60, 250),
        )


SESSIONS = [
    pytest.param(("christie", "terrapin"), id="christie"),
    pytest.param(("sequoia", "terrapin"), id="sequoia"),
    pytest.param(("chain", "terrapin"), id="chain"),
    pytest.param(("christie", "bmv2"), id="christie-bmv2", marks=pytest.mark.bmv2),
]


@pytest.fixture(scope="module", params=SESSIONS)
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    topology, kind = request.param
    try:
        switch_binary(kind)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    subprocess.run(["bash", "scripts/p4rt-shell.sh", "--setup-only"], cwd=REPO, check=True)
    running = Session(topology, kind, tmp_path_factory.mktemp(f"run-{topology}-{kind}"))
    try:
        running.start()
        yield running
    finally:
        running.close()
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert f": {INTF_PREFIX}" not in links, "the runner left veths behind"


def test_every_printed_example_is_admitted_when_pasted(session: Session) -> None:
    printed = printed_examples(session.banner)
    posted = subprocess.run(["bash", "-c", printed.curl_post], capture_output=True, text=True, timeout=30)
    made = json.loads(posted.stdout)
    assert "allocation" in made and made["allocation"]["worst_case_delay_us"] > 0, made

    serve, request, status = printed.cli
    assert serve.endswith("terrapin-host serve &") and " terrapin-host request " in request
    session.type(serve)
    admitted = last_json(session.type(request))
    assert admitted["outcome"] == "ACCEPTED", admitted
    assert admitted["context"] > 0 and admitted["delay_us"] > 0 and admitted["hops"] >= 1, admitted
    report = last_json(session.type(status))
    assert report["outcome"] == "REPORTED", report
    assert admitted["context"] in [r.get("context") for r in report["records"] if r["kind"] == "channel"], (
        report
    )

    listed = json.loads(
        subprocess.run(["bash", "-c", printed.curl_list], capture_output=True, text=True).stdout
    )
    assert sorted(r["origin"] for r in listed) == ["inband", "rest"], listed


def test_the_cli_shows_ping_replies(session: Session) -> None:
    src, dst = printed_examples(session.banner).cli[1].split()[0], _example_destination(session)
    output = session.type(f"{src} ping -c 2 -i 0.2 -W 2 {dst}")
    assert f"bytes from {dst}: icmp_seq=1" in output and "2 received" in output, output


def test_a_denial_names_the_constraint(session: Session) -> None:
    src = printed_examples(session.banner).cli[1].split()[0]
    output = session.type(
        f"{src} terrapin-host request --dst {_example_destination(session)} --protocol udp --sport 5100 "
        f"--dport 5100 --priority 6 --rate {TOO_MUCH} --burst 9000 --max-packet 1500"
    )
    denied = last_json(output)
    assert denied["outcome"] == "DENIED" and denied["reason_name"] == "RATE", denied
    assert denied["shortfall"] > 0, denied


def test_the_cli_shows_nothing_of_the_runners_own(session: Session) -> None:
    """Every command's output so far came from the command: no Mininet progress lines, no
    supervisor or controller log lines; and the banner is the first thing printed."""
    assert session.banner.lstrip().startswith("Terrapin is up"), session.banner
    assert session.typed
    for output in session.typed:
        assert "***" not in output and "supervisor" not in output and "INFO" not in output, output


def _example_destination(session: Session) -> str:
    return re.search(r"--dst (\S+)", printed_examples(session.banner).cli[1]).group(1)  # type: ignore[union-attr]


def hex_bytes(address: str) -> str:
    """An IPv4 address as p4runtime-shell prints a match value: "\\x0a\\x00\\x01\\x01"."""
    return "".join(f"\\\\x{b:02x}" for b in ipaddress.ip_address(address).packed)


def test_the_shell_reads_tables_meters_counters_and_registers_beside_the_controller(session: Session) -> None:
    network = json.loads((session.run_dir / "network.json").read_text())
    switches = [s["name"] for s in network["switches"]]
    _, reservations = session.rest("GET", "/reservations")
    assert reservations, "the pasted examples reserved nothing"
    first_hop = reservations[0]["allocation"]["hops"][0]["switch"]
    if len(switches) > 1:
        listing = session.shell()
        listing.expect(pexpect.EOF)
        text = readable(listing.before)
        assert f"has {len(switches)} switches" in text and all(
            f"DEVICE={name}" in text for name in switches
        ), text
        shell = session.shell(f"DEVICE={first_hop}")
    else:
        shell = session.shell()
    try:
        shell.expect(SHELL_PROMPT)
        greeting = readable(shell.before)
        assert f"attached to {first_hop} " in greeting and "controller, which stays primary" in greeting, (
            greeting
        )

        marks = iter(range(1, 100))

        def typed(line: str, block: bool = False) -> str:
            """Type a line; what the shell printed up to a mark printed after it (the mark is
            assembled by the statement, so the echoed input never matches it)."""
            mark = f"{next(marks)}-done"
            shell.sendline(line)
            if block:
                shell.sendline("")  # ends IPython's block
            shell.sendline(f'print("{mark[:1]}" + "{mark[1:]}")')
            shell.expect(mark)
            return readable(shell.before)

        channels = typed('for e in table_entry["TerrapinIngress.channels"].read(): print(e)', block=True)
        mine = reservations[0]
        assert '"TerrapinIngress.admit"' in channels and hex_bytes(mine["src"]) in channels, channels
        meters = typed(
            'for m in direct_meter_entry["TerrapinIngress.channel_meter"].read(): print(m)', block=True
        )
        rates = [int(x) for x in re.findall(r"cir: (\d+)", meters)]
        assert rates and min(rates) >= min(r["requested_rate"] for r in reservations), meters
        # The ping before crossed the first hop's port in its best-effort queue (cell port*8+0).
        cell = mine["allocation"]["hops"][0]["port"] * 8
        counters = typed(
            f'c = counter_entry["TerrapinEgress.queue_traffic"]; c.index = {cell}; print(*c.read())'
        )
        counted = re.search(r"packet_count: (\d+)", counters)
        assert counted and int(counted.group(1)) >= 2, counters
        registers = typed(
            'r = register_entry["TerrapinEgress.max_queue_depth"]; r.index = 0; print(*r.read())'
        )
        if session.kind == "bmv2":
            assert "does not read registers" in registers and "register_read" in registers, registers
        else:
            assert "TerrapinEgress.max_queue_depth[0] = " in registers, registers
        refused = typed(
            'te = table_entry["TerrapinIngress.routes"](action="TerrapinIngress.drop_packet"); '
            'te.match["dst_addr"] = "10.9.9.9/32"; te.insert()'
        )
        assert "PERMISSION_DENIED" in refused, refused
        shell.sendline("exit")
        shell.expect(pexpect.EOF)
    finally:
        shell.close(force=True)
    # The controller is still the switches' primary: it admits and programs as before.
    assert session.rest("GET", "/health")[0] == 200
    body = _rest_body(reservations[0]) | {"src_port": 5200, "dst_port": 5200}
    status, made = session.rest("POST", "/reservations", body)
    assert status == 201, made


def _rest_body(reservation: dict[str, Any]) -> dict[str, Any]:
    keys = ("src", "dst", "priority", "max_packet")
    return {k: reservation[k] for k in keys} | {
        "protocol": "udp",
        "rate": reservation["requested_rate"],
        "burst": reservation["requested_burst"],
    }


def test_a_pipeline_push_is_refused_while_the_controller_is_primary(session: Session) -> None:
    network = json.loads((session.run_dir / "network.json").read_text())
    pushed = session.shell(f"DEVICE={network['switches'][0]['name']}", "PUSH=1")
    pushed.expect(pexpect.EOF)
    pushed.close()
    text = readable(pushed.before)
    assert pushed.exitstatus != 0 and "PUSH=1 refused" in text and "primary controller" in text, text


def test_without_a_network_make_shell_says_how_to_start_one(tmp_path: Path) -> None:
    env = os.environ | {"TERRAPIN_RUN_DIR": str(tmp_path)}
    subprocess.run(["bash", "scripts/p4rt-shell.sh", "--setup-only"], cwd=REPO, check=True)
    for record in (None, {"runner_pid": 1, "switches": []}):  # none, and one a killed run left
        if record is not None:
            (tmp_path / "network.json").write_text(json.dumps(record))
        answer = subprocess.run(
            ["make", "--no-print-directory", "shell"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert answer.returncode != 0, answer
        assert "no network is running" in answer.stderr and "make run" in answer.stderr, answer.stderr
