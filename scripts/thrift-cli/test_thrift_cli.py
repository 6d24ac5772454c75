"""The thrift-cli suite: BMv2's Thrift runtime on terrapin-switch, driven by p4lang's own CLI.

1. BMv2's CLI tests (targets/simple_switch/tests/CLI_tests in BMv2's source tree, as `make bmv2`
   unpacks it), unmodified: each starts a switch on the test's JSON, feeds `testdata/NAME.in` to
   `runtime_CLI.py --thrift-port N [extra args]` and compares the output, split at each
   `RuntimeCmd: ` prompt, with `testdata/NAME.out` split at its `????` lines, as their
   run_one_test.py does. Run against terrapin-switch and, as the reference, BMv2's simple_switch.
2. The comparison: `cli_compare.p4` (compiled by terrapin-p4c) on simple_switch_grpc and on
   terrapin-switch, each command file of commands/ fed to `simple_switch_CLI` against both, the
   two outputs compared after the normalizations in DIFFERENCES, which name every known
   difference and why (docs/bmv2.md, "BMv2's Thrift runtime").

`python scripts/thrift-cli/test_thrift_cli.py` prints both switches' outputs side by side instead.
"""

from __future__ import annotations

import contextlib
import difflib
import glob
import os
import re
import shlex
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = ROOT / "build" / "bin"
BMV2_SRC = ROOT / "build" / "oracle" / "src" / "behavioral-model"
CLI_TESTS = BMV2_SRC / "targets" / "simple_switch" / "tests" / "CLI_tests"
COMMANDS = sorted((HERE / "commands").glob("*.txt"))

# Device ids of this suite's switches. Their ports (loopback only) are free ones the kernel picks
# (free_port), fresh for each switch: a fixed port in the ephemeral range can be taken by any
# client connection of the machine.
DEVICE_ID = {"terrapin": 91, "bmv2": 92}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Known differences between the two switches' outputs, each (pattern, replacement, why); applied
# to both outputs before they are compared.
DIFFERENCES: list[tuple[str, str, str]] = [
    (r"(?m)(device_id\s*: )\d+$", r"\1N", "each switch of the comparison has its own device id"),
    (r"(?m)(thrift_port\s*: )\d+$", r"\1N", "and its own Thrift port"),
    (
        r"(?m)^(Life: )\d+(ms since hit)",
        r"\1N\2",
        "an ageing entry's time since its last hit (or its timeout being set) is the run's own",
    ),
]


def bmv2_bin(command: str) -> Path:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "bmv2-bin.sh"), command], capture_output=True, text=True
    )
    if out.returncode != 0:
        pytest.fail(out.stderr.strip() or f"{command} not found (make bmv2)")
    return Path(out.stdout.strip())


def runtime_cli() -> tuple[Path, Path]:
    """runtime_CLI.py and the directory of its Python modules (BMv2's install)."""
    cli = bmv2_bin("simple_switch_CLI")
    m = re.search(r'sys\.path\.append\("([^"]+)"\)', cli.read_text(errors="replace"))
    if m and (Path(m.group(1)) / "runtime_CLI.py").exists():
        return Path(m.group(1)) / "runtime_CLI.py", Path(m.group(1))
    for d in glob.glob(str(ROOT / "build" / "oracle" / "prefix" / "lib" / "python3*" / "site-packages")):
        if (Path(d) / "runtime_CLI.py").exists():
            return Path(d) / "runtime_CLI.py", Path(d)
    pytest.fail("runtime_CLI.py not found in BMv2's install (make bmv2)")


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"switch exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"nothing listens on Thrift port {port} after {timeout} s")


@contextmanager
def switch(
    kind: str, json_path: Path, logdir: Path, command: str = "", extra: Sequence[str] = ()
) -> Iterator[int]:
    """Runs a switch of `kind` ("terrapin", "bmv2", or "simple_switch": BMv2 without P4Runtime) on
    json_path, with the options `extra` (BMv2's general options, such as --restore-state); yields its
    Thrift port."""
    key = "bmv2" if kind == "simple_switch" else kind
    port = free_port()
    if kind == "terrapin":
        argv = [str(BIN / "terrapin-switch"), str(json_path)]
    elif kind == "bmv2":
        argv = [str(bmv2_bin("simple_switch_grpc")), str(json_path)]
    else:
        argv = [str(bmv2_bin("simple_switch")), str(json_path)]
    argv += ["--device-id", str(DEVICE_ID[key]), "--thrift-port", str(port), *extra]
    if kind != "simple_switch":
        argv += ["--", "--grpc-server-addr", f"127.0.0.1:{free_port()}"]
    log = logdir / f"{kind}-{command or json_path.stem}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, proc, log)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()  # simple_switch ignores SIGTERM while busy: as its own tests do
            proc.wait()
        for ipc in glob.glob(f"/tmp/bmv2-{DEVICE_ID[key]}-notifications.ipc"):
            os.remove(ipc)


def run_cli(argv: list[str], commands: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, input=commands.encode(), capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, (
        f"{shlex.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
    )
    return done.stdout.decode()


# ---- 1. BMv2's CLI tests ----


def cli_tests() -> list[tuple[str, str, list[str]]]:
    """(name, json, extra CLI args) of each CLI test, read from its .test script as BMv2 runs it."""
    tests = []
    for script in sorted(CLI_TESTS.glob("*.test")):
        for line in script.read_text().splitlines():
            if line.startswith("./run_one_test.py"):
                words = line.split()
                tests.append((words[2], words[3], words[4:]))
    return tests


def parse_data(s: str, pattern: str) -> list[str]:
    # run_one_test.py's own split
    return re.findall(f"{pattern}(.*?)(?={pattern})", s, re.DOTALL)


def run_cli_test(
    kind: str, name: str, json_name: str, extra: list[str], logdir: Path
) -> tuple[list[str], list[str]]:
    data = CLI_TESTS / "testdata"
    script, pydir = runtime_cli()
    env = dict(os.environ, PYTHONPATH=str(pydir))
    with switch(kind, data / json_name, logdir, name) as port:
        out = run_cli(
            ["/usr/bin/python3", str(script), "--thrift-port", str(port), *extra],
            (data / f"{name}.in").read_text(),
            env,
        )
    out = out[out.find("RuntimeCmd: ") :]
    expected = parse_data((data / f"{name}.out").read_text(), r"\?\?\?\?\n")
    return parse_data(out, "RuntimeCmd: "), expected


def cli_test_ids() -> list[tuple[str, str, list[str]]]:
    return cli_tests() if CLI_TESTS.is_dir() else []


@pytest.fixture(scope="module")
def logdir() -> Path:
    d = ROOT / "build" / "thrift-cli"
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_cli_tests_found() -> None:
    assert CLI_TESTS.is_dir(), f"{CLI_TESTS} is missing: `make bmv2` unpacks BMv2's sources there"
    assert len(cli_tests()) == 5, cli_tests()


@pytest.mark.parametrize("kind", ["terrapin", "simple_switch"])
@pytest.mark.parametrize("name,json_name,extra", cli_test_ids(), ids=[t[0] for t in cli_test_ids()])
def test_bmv2_cli_test(kind: str, name: str, json_name: str, extra: list[str], logdir: Path) -> None:
    got, expected = run_cli_test(kind, name, json_name, extra, logdir)
    assert got == expected, "\n".join(
        difflib.unified_diff(
            "".join(f"{e}????\n" for e in expected).splitlines(),
            "".join(f"{g}????\n" for g in got).splitlines(),
            "expected",
            kind,
            lineterm="",
        )
    )


# ---- 2. the comparison ----


@pytest.fixture(scope="module")
def program(logdir: Path) -> Path:
    out = logdir / "cli_compare.json"
    subprocess.run(
        [
            str(BIN / "terrapin-p4c"),
            "--target",
            "bmv2",
            "--arch",
            "v1model",
            "-o",
            str(out),
            str(HERE / "cli_compare.p4"),
        ],
        check=True,
    )
    return out


def sort_mgrps(out: str) -> str:
    """mc_dump lists BMv2's groups in the order of its unordered_map (most recently created first
    while it has not rehashed), terrapin-switch's by group id: both sorted by id here. And the CLI
    prints, for every LAG, the ports of the last node it printed rather than the LAG's (a bug of
    runtime_CLI.py's do_mc_dump), so which ports follow `lag(N) ->` depends on that order: blanked."""

    def sort_block(m: re.Match[str]) -> str:
        blocks = m.group(1).split("**********\n")[1:]
        blocks.sort(key=lambda b: int(re.match(r"mgrp\((\d+)\)", b).group(1)))  # type: ignore[union-attr]
        return "MC ENTRIES\n" + "".join("**********\n" + b for b in blocks) + "=========="

    out = re.sub(r"MC ENTRIES\n(.*?)==========", sort_block, out, flags=re.DOTALL)
    return re.sub(r"(?m)^(lag\(\d+\) -> ports=)\[.*\]$", r"\1[...]", out)


def normalize(out: str) -> str:
    for pattern, repl, _why in DIFFERENCES:
        out = re.sub(pattern, repl, out)
    return sort_mgrps(out)


def commands_of(path: Path, program: Path) -> str:
    return path.read_text().replace("@JSON@", str(program))


def outputs(path: Path, program: Path, logdir: Path) -> dict[str, str]:
    cli = str(bmv2_bin("simple_switch_CLI"))
    got = {}
    for kind in ("bmv2", "terrapin"):
        with switch(kind, program, logdir, path.stem) as port:
            got[kind] = run_cli([cli, "--thrift-port", str(port)], commands_of(path, program))
        (logdir / f"{path.stem}.{kind}.out").write_text(got[kind])
    return got


@pytest.mark.parametrize("path", COMMANDS, ids=[p.stem for p in COMMANDS])
def test_same_output(path: Path, program: Path, logdir: Path) -> None:
    got = outputs(path, program, logdir)
    b, t = normalize(got["bmv2"]), normalize(got["terrapin"])
    assert t == b, "\n".join(
        difflib.unified_diff(
            b.splitlines(), t.splitlines(), "simple_switch_grpc", "terrapin-switch", lineterm=""
        )
    )


# The queue calls' return codes, which simple_switch_CLI does not print: each form of
# set_queue_rate and set_queue_depth, on a port with an interface-less number and on the CPU port.
QUEUE_CALLS = """
import sys
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport
from sswitch_runtime import SimpleSwitch
t = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", int(sys.argv[1])))
t.open()
c = SimpleSwitch.Client(TMultiplexedProtocol.TMultiplexedProtocol(
    TBinaryProtocol.TBinaryProtocol(t), "simple_switch"))
for call, args in [
    ("set_all_egress_queue_rates", (1000,)),
    ("set_egress_queue_rate", (3, 500)),
    ("set_egress_priority_queue_rate", (3, 0, 200)),
    ("set_egress_queue_rate", (64, 100)),
    ("set_all_egress_queue_rates", (0,)),
    ("set_all_egress_queue_depths", (100,)),
    ("set_egress_queue_depth", (3, 50)),
    ("set_egress_priority_queue_depth", (3, 0, 20)),
]:
    print(call, args, getattr(c, call)(*args))
"""


def test_queue_call_codes(program: Path, logdir: Path) -> None:
    """set_queue_rate / set_queue_depth answer what BMv2 answers (0), which the CLI hides."""
    _script, pydir = runtime_cli()
    env = dict(os.environ, PYTHONPATH=str(pydir))
    got = {}
    for kind in ("bmv2", "terrapin"):
        with switch(kind, program, logdir, "queue-codes") as port:
            got[kind] = run_cli(["/usr/bin/python3", "-c", QUEUE_CALLS, str(port)], "", env)
    assert got["terrapin"] == got["bmv2"], got
    assert got["bmv2"].count(" 0\n") == 8, got["bmv2"]


def test_time_elapsed(program: Path, logdir: Path) -> None:
    """get_time_elapsed: microseconds since the switch started, growing; get_time_since_epoch:
    the wall clock in microseconds (values differ between runs, so compared to bounds, not to BMv2)."""
    cli = str(bmv2_bin("simple_switch_CLI"))
    with switch("terrapin", program, logdir, "time") as port:
        before = time.time()
        out = run_cli(
            [cli, "--thrift-port", str(port)], "get_time_elapsed\nget_time_elapsed\nget_time_since_epoch\n"
        )
    vals = [int(v) for v in re.findall(r"RuntimeCmd: (\d+)", out)]
    assert len(vals) == 3, out
    assert 0 < vals[0] <= vals[1] < 60e6, vals
    assert abs(vals[2] / 1e6 - before) < 30, vals


def ageing_notifications(kind: str, program: Path, logdir: Path) -> list[tuple[int, list[int]]]:
    """(table id, entry handles) of each AGE| message `kind`'s switch publishes within 2.5 s of an
    entry of `aged` being given a 100 ms timeout, read as BMv2's listeners read them. BMv2's
    simple_switch publishes at its default address; terrapin-switch where it is told to."""
    import pynng  # only this test needs it

    cli = str(bmv2_bin("simple_switch_CLI"))
    key = "bmv2" if kind == "simple_switch" else kind
    addr = f"ipc:///tmp/bmv2-{DEVICE_ID[key]}-notifications.ipc"
    extra = ["--notifications-addr", addr] if kind == "terrapin" else []
    got = []
    with switch(kind, program, logdir, "ageing", extra) as port:
        info = run_cli([cli, "--thrift-port", str(port)], "switch_info\n")
        assert re.search(rf"(?m)^notifications_socket\s*: {re.escape(addr)}$", info), info
        with pynng.Sub0(dial=addr, topics=b"AGE|", recv_timeout=200) as sub:
            time.sleep(0.3)  # subscribed before the entry can age
            run_cli(
                [cli, "--thrift-port", str(port)],
                "table_add aged set_tag 0x0001 => 5\ntable_set_timeout aged 0 100\n",
            )
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                try:
                    m = sub.recv()
                except pynng.Timeout:
                    continue
                _topic, _switch, cxt, _buffer, table, n = struct.unpack_from("<4sQIQiI", m)
                assert cxt == 0 and len(m) == 32 + 4 * n, m
                got.append((table, list(struct.unpack_from(f"<{n}I", m, 32))))
    return got


def test_ageing_notifications(program: Path, logdir: Path) -> None:
    """An entry idle past the timeout table_set_timeout gave it is published on the notifications
    socket switch_info names (nanomsg PUB, subscribed to with NNG), as BMv2's simple_switch
    publishes it. (simple_switch_grpc publishes none: switch_info's socket is empty on both
    switches without --notifications-addr, commands/sswitch.txt.)"""
    got = {kind: ageing_notifications(kind, program, logdir) for kind in ("simple_switch", "terrapin")}
    assert got["simple_switch"], "simple_switch published no ageing notification"
    assert got["terrapin"][:1] == got["simple_switch"][:1], got


# port_add / port_remove need interfaces: both switches run in a namespace of their own with two
# veth pairs (trpt*: make test's leftover check knows the prefix), the CLI beside them.
PORT_COMMANDS = """show_ports
port_add trptp0 3
show_ports
port_add trptp1 3
port_add trptnosuch0 5
port_add trptp1 4
show_ports
port_remove 3
port_remove 7
show_ports
port_add trptp0 3
show_ports
"""

PORT_SCRIPT = """
ip link set lo up
"$@" > "$LOG" 2>&1 &
pid=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/9090) 2>/dev/null && break; sleep 0.05; done
"$CLI" --thrift-port 9090
kill $pid
# simple_switch may ignore SIGTERM while busy (as switch() above knows)
for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -9 $pid 2>/dev/null
wait $pid
"""


@contextmanager
def namespace() -> Iterator[str]:
    name = f"trpttcli{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for i in range(2):
            subprocess.run(
                ["ip", "-n", name, "link", "add", f"trptp{i}", "type", "veth", "peer", "name", f"trptq{i}"],
                check=True,
            )
            for side in (f"trptp{i}", f"trptq{i}"):
                subprocess.run(["ip", "-n", name, "link", "set", side, "up"], check=True)
        yield name
    finally:
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_port_add_and_remove(program: Path, logdir: Path) -> None:
    """port_add opens an interface as a port while the switch runs, port_remove closes it; a number
    in use, an interface that does not exist and a number without a port are refused; show_ports
    lists what is there. The same output on both switches. (BMv2 also takes an interface already
    a port as a second one; terrapin-switch refuses it, as it refuses it on its command line:
    toolchain/device's TestAddAndRemovePorts.)"""
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace)")
    cli = str(bmv2_bin("simple_switch_CLI"))
    got = {}
    with namespace() as ns:
        for kind in ("bmv2", "terrapin"):
            binary = BIN / "terrapin-switch" if kind == "terrapin" else bmv2_bin("simple_switch_grpc")
            argv = [str(binary), str(program), "--device-id", str(DEVICE_ID[kind]), "--thrift-port", "9090"]
            argv += ["--", "--grpc-server-addr", "127.0.0.1:9559"]
            env = dict(os.environ, LOG=str(logdir / f"{kind}-ports.log"), CLI=cli)
            done = subprocess.run(
                ["ip", "netns", "exec", ns, "bash", "-c", PORT_SCRIPT, "ports", *argv],
                input=PORT_COMMANDS.encode(),
                capture_output=True,
                env=env,
                timeout=60,
            )
            got[kind] = done.stdout.decode()
            (logdir / f"ports.{kind}.out").write_text(got[kind])
            for ipc in glob.glob(f"/tmp/bmv2-{DEVICE_ID[kind]}-notifications.ipc"):
                os.remove(ipc)
    b, t = normalize(got["bmv2"]), normalize(got["terrapin"])
    assert "trptp1" in b and b.count("Invalid device manager operation") == 3, b
    assert t == b, "\n".join(
        difflib.unified_diff(
            b.splitlines(), t.splitlines(), "simple_switch_grpc", "terrapin-switch", lineterm=""
        )
    )


if __name__ == "__main__":
    logs = ROOT / "build" / "thrift-cli"
    logs.mkdir(parents=True, exist_ok=True)
    prog = logs / "cli_compare.json"
    subprocess.run(
        [
            str(BIN / "terrapin-p4c"),
            "--target",
            "bmv2",
            "--arch",
            "v1model",
            "-o",
            str(prog),
            str(HERE / "cli_compare.p4"),
        ],
        check=True,
    )
    for p in [Path(a) for a in sys.argv[1:]] or COMMANDS:
        o = outputs(p, prog, logs)
        print(f"===== {p.name}")
        print(
            "\n".join(
                difflib.unified_diff(
                    normalize(o["bmv2"]).splitlines(),
                    normalize(o["terrapin"]).splitlines(),
                    "simple_switch_grpc",
                    "terrapin-switch",
                    lineterm="",
                )
            )
        )
