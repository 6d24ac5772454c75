"""make shell: p4runtime-shell (PyPI) attached to a switch of the running `make run` network,
beside its controller. Runs in build/venv-p4rtshell, which scripts/p4rt-shell.sh makes.

Which switch: while `make run` is up, build/run/network.json lists its switches with the
P4Runtime address and device id of the run's configuration. `--device NAME|ID` picks one; a
network of one switch needs no choice, and with several and none chosen the list is printed.
`--addr` and `--device-id` name any other P4Runtime server instead (one started by hand).

Arbitration. The shell's election id is (0, 0): below every id the controller bids (a single
controller bids 10, replicas bid their index + 1 as backups and term << 32 as primary), so the
controller stays primary and the shell is a backup. A backup reads everything (Read and
GetForwardingPipelineConfig need no primacy) and writes nothing. Before the shell starts, one
arbitration on a stream of its own asks the switch who is primary, so that an unreachable
switch, a wrong device id or an election id in use is reported in words, and `--push` (which
replaces the pipeline and needs the primary role) is refused while another client is primary:
that client is the run's controller, whose pipeline and entries a push would wipe. With no
primary, the push takes the highest id the switch has seen (a controller that comes back with
it is primary again once the shell has left).

TLS: a run started with `make run TLS=1` records its CA and the client certificate (topo/run_tls.py)
beside each switch; the arbitration and p4runtime-shell (`--ssl --cacert --cert --private-key`)
then speak TLS with it. `--cacert`, `--cert` and `--private-key` do the same for `--addr`.

p4runtime-shell 0.0.6 has no register entity; `register_entry["name"]` is added here.
p4lang's simple_switch_grpc answers register reads UNIMPLEMENTED; the shell says so and how
to read them through its Thrift CLI instead (docs/bmv2.md, 3).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

REPO = Path(__file__).resolve().parent.parent
SHELL_ELECTION_ID = (0, 0)
# Status codes of an arbitration answer (google.rpc.Code).
OK, NOT_FOUND, ALREADY_EXISTS = 0, 5, 6


class ShellError(Exception):
    """Something the person asking for a shell must be told; the message says what to do."""


@dataclass(frozen=True)
class TlsFiles:
    ca: str
    cert: str | None = None  # the client certificate a switch asking for one gets
    key: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None, what: str) -> bytes | None:
            if path is None:
                return None
            try:
                return Path(path).read_bytes()
            except OSError as error:
                raise ShellError(f"the {what} {path} cannot be read: {error.strerror}") from None

        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca, "CA certificate"),
            private_key=read(self.key, "private key"),
            certificate_chain=read(self.cert, "certificate"),
        )

    def shell_flags(self) -> list[str]:
        """p4runtime-shell's own TLS flags."""
        flags = ["--ssl", "--cacert", self.ca]
        if self.cert and self.key:
            flags += ["--cert", self.cert, "--private-key", self.key]
        return flags


@dataclass(frozen=True)
class Target:
    name: str
    address: str
    device_id: int
    kind: str = "terrapin"  # terrapin | bmv2 (simple_switch_grpc)
    thrift_port: int | None = None
    bmv2_cli: str | None = None  # simple_switch_CLI, for what BMv2's P4Runtime server cannot read
    topology: str | None = None  # None: named by --addr, not a make run network
    tls: TlsFiles | None = None  # the switch speaks P4Runtime over TLS

    def describe(self) -> str:
        where = f"device {self.device_id}, P4Runtime {self.address}"
        if self.topology is None:
            return f"the P4Runtime server at {self.address} (device {self.device_id})"
        return f"{self.name} ({where}) of the running {self.topology!r} network"


# ---- which switch ----------------------------------------------------------------------------


def runner_alive(pid: int) -> bool:
    """Whether pid is a live make run runner (a PID left by a killed run may be anyone's now)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return "topo.run" in command and state != "Z"


def running_network(run_dir: Path) -> dict[str, Any]:
    record = run_dir / "network.json"
    if record.is_relative_to(Path.cwd()):
        record = record.relative_to(Path.cwd())
    how = "start one with `make run` (TOPO=christie|sequoia|chain, SWITCH=terrapin|bmv2) in another terminal"
    try:
        network: dict[str, Any] = json.loads(record.read_text())
    except FileNotFoundError:
        raise ShellError(f"no network is running ({record} is absent): {how}, then `make shell`") from None
    except (OSError, ValueError) as error:
        raise ShellError(f"{record} cannot be read ({error}): {how}") from None
    if not runner_alive(int(network.get("runner_pid", 0))):
        raise ShellError(f"no network is running (the run that wrote {record} has ended): {how}")
    return network


def choose(network: dict[str, Any], wanted: str | None) -> Target:
    """The switch `wanted` names (its name or device id), or the only one."""
    switches = [
        Target(
            s["name"],
            s["address"],
            int(s["device_id"]),
            s.get("kind", "terrapin"),
            s.get("thrift_port"),
            s.get("bmv2_cli"),
            network.get("topology", "?"),
            TlsFiles(**s["tls"]) if s.get("tls") else None,
        )
        for s in network["switches"]
    ]
    listing = "\n".join(
        f"  make shell DEVICE={t.name:<10} # device {t.device_id}, P4Runtime {t.address}" for t in switches
    )
    if wanted:
        for target in switches:
            if wanted in (target.name, str(target.device_id)):
                return target
        topology = network.get("topology")
        raise ShellError(f"the running {topology!r} network has no switch {wanted!r}; it has:\n{listing}")
    if len(switches) == 1:
        return switches[0]
    raise ShellError(
        f"the running {network.get('topology')!r} network has {len(switches)} switches; "
        f"name one (by name or device id):\n{listing}"
    )


# ---- who is primary --------------------------------------------------------------------------


class Arbitration(NamedTuple):
    code: int  # OK: this stream would be primary; ALREADY_EXISTS: another is; NOT_FOUND: none is
    election_id: tuple[int, int] | None  # the primary's (or the highest seen), as the switch says


def arbitrate(target: Target, election_id: tuple[int, int], timeout: float = 5.0) -> Arbitration:
    """One arbitration on a stream of its own, closed (and seen closed by the switch) before it
    returns, so the shell's own stream may bid the same id right after."""
    channel = (
        grpc.insecure_channel(target.address)
        if target.tls is None
        else grpc.secure_channel(target.address, target.tls.credentials())
    )
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        channel.close()
        raise ShellError(
            f"{target.describe()} does not answer: if make run is up, the switch may be restarting "
            "(its supervisor.log under build/run/<topology>/ says so); try again in a few seconds"
        ) from None
    answered = threading.Event()

    def requests() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = target.device_id
        request.arbitration.election_id.high, request.arbitration.election_id.low = election_id
        yield request
        answered.wait(timeout)  # then end the stream: the switch forgets this client

    stream = p4runtime_pb2_grpc.P4RuntimeStub(channel).StreamChannel(requests(), timeout=timeout)
    found: Arbitration | None = None
    try:
        for reply in stream:
            if reply.HasField("arbitration") and found is None:
                update = reply.arbitration
                elected = (
                    (update.election_id.high, update.election_id.low)
                    if update.HasField("election_id")
                    else None
                )
                found = Arbitration(update.status.code, elected)
                answered.set()
    except grpc.RpcError as error:
        if found is None:
            raise ShellError(_refusal(target, error)) from None
    finally:
        answered.set()
        channel.close()
    if found is None:
        raise ShellError(f"{target.describe()} never answered the arbitration")
    return found


def _refusal(target: Target, error: grpc.RpcError) -> str:
    code, details = error.code(), error.details()  # type: ignore[attr-defined]
    if code == grpc.StatusCode.NOT_FOUND and "device" in details:
        return f"{target.describe()}: {details}; give the switch's device id (DEVICE_ID=N)"
    if code == grpc.StatusCode.INVALID_ARGUMENT and "lection id" in details:
        return (
            f"{target.describe()}: {details}. Another shell is attached with election id 0 (one shell "
            "per switch at a time): leave it first"
        )
    return f"{target.describe()} refused the session: {code.name} {details}"


def push_election_id(target: Target, seen: Arbitration) -> tuple[int, int]:
    """The id to push a pipeline with, or ShellError while another client is primary."""
    if seen.code == ALREADY_EXISTS:
        holder = f" (election id {_u128(seen.election_id)})" if seen.election_id else ""
        raise ShellError(
            f"PUSH=1 refused: {target.describe()} has a primary controller{holder}. It manages the "
            "switch's pipeline, and a push would replace it and wipe every entry the controller "
            "wrote (routes, channels). Run `make shell` without PUSH=1 to read beside it, or stop "
            "the controller first"
        )
    if seen.code == NOT_FOUND and seen.election_id is not None:
        return seen.election_id  # the highest the switch has seen: only an equal id is primary
    return SHELL_ELECTION_ID  # this stream was primary with it (OK)


def _u128(value: tuple[int, int] | None) -> int:
    return 0 if value is None else value[0] << 64 | value[1]


# ---- registers, which p4runtime-shell 0.0.6 lacks --------------------------------------------


class RegisterCell(NamedTuple):
    register: str
    index: int
    value: int

    def __str__(self) -> str:
        return f"{self.register}[{self.index}] = {self.value}"


class RegisterUnsupported(Exception):
    """The switch's P4Runtime server does not read registers."""

    def _render_traceback_(self) -> list[str]:  # IPython shows the advice, not a traceback
        return [str(self)]


class RegisterEntry:
    """register_entry["name"]: read every cell, or one after `.index = N`."""

    def __init__(self, name: str, register_id: int, target: Target) -> None:
        self.name, self.id, self.target = name, register_id, target
        self.index: int | None = None

    def read(self, function: Callable[[RegisterCell], object] | None = None) -> Iterator[RegisterCell] | None:
        cells = list(self._cells())
        if function is None:
            return iter(cells)
        for cell in cells:
            function(cell)
        return None

    def _cells(self) -> Iterator[RegisterCell]:
        import p4runtime_sh.shell as sh  # its `client` exists once the shell is set up

        request = p4runtime_pb2.ReadRequest(device_id=self.target.device_id)
        entry = request.entities.add().register_entry
        entry.register_id = self.id
        if self.index is not None:
            entry.index.index = self.index
        try:
            for reply in sh.client.stub.Read(request):
                for entity in reply.entities:
                    cell = entity.register_entry
                    yield RegisterCell(
                        self.name, cell.index.index, int.from_bytes(cell.data.bitstring, "big")
                    )
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
                raise RegisterUnsupported(bmv2_register_advice(self.target, self.name, error)) from None
            raise


def bmv2_register_advice(target: Target, register: str, error: grpc.RpcError) -> str:
    port = target.thrift_port or 9090
    cli = target.bmv2_cli or "simple_switch_CLI"
    return (
        f"this switch's P4Runtime server does not read registers ({error.details()}): p4lang's "  # type: ignore[attr-defined]
        f"simple_switch_grpc answers UNIMPLEMENTED (docs/bmv2.md, 3). Read them through its Thrift CLI:\n"
        f"  echo 'register_read {register}' | {cli} --thrift-port {port}"
    )


class RegisterEntries:
    def __init__(self, registers: dict[str, int], target: Target) -> None:
        self._registers, self._target = registers, target

    def __getitem__(self, name: str) -> RegisterEntry:
        if name not in self._registers:
            raise KeyError(f"no register {name!r}; the program's: {', '.join(sorted(self._registers))}")
        return RegisterEntry(name, self._registers[name], self._target)

    def _ipython_key_completions_(self) -> list[str]:
        return sorted(self._registers)

    def __repr__(self) -> str:
        return "register_entry[<name>]: " + ", ".join(sorted(self._registers))


# ---- the shell -------------------------------------------------------------------------------


def hints(target: Target, role: str, names: set[str]) -> str:
    """What the shell prints above its first prompt: where it is, and what to type."""
    lines = [f"make shell: attached to {target.describe()}, {role}."]
    examples = [
        (
            "TerrapinIngress.channels",
            'for e in table_entry["TerrapinIngress.channels"].read(): print(e)',
            "the admitted channels",
        ),
        (
            "TerrapinIngress.channel_meter",
            'for m in direct_meter_entry["TerrapinIngress.channel_meter"].read(): print(m)',
            "their meters' (rate, burst)",
        ),
        (
            "TerrapinEgress.queue_traffic",
            'for c in counter_entry["TerrapinEgress.queue_traffic"].read(): c.packet_count and print(c)',
            "packets per queue (index port*8+priority)",
        ),
        (
            "TerrapinEgress.max_queue_depth",
            'for r in register_entry["TerrapinEgress.max_queue_depth"].read(): r.value and print(r)',
            "the deepest each queue got",
        ),
    ]
    shown = [(code, why) for name, code, why in examples if name in names]
    if shown:
        lines.append("Try:")
        lines += [f"  {code:<84} # {why}" for code, why in shown]
    if target.kind == "bmv2":
        lines.append(
            "  (simple_switch_grpc does not read registers over P4Runtime: register_entry says how "
            "to read them with simple_switch_CLI)"
        )
    lines.append("exit (or Ctrl-D) leaves; the network stays up.")
    return "\n".join(lines)


def run_shell(
    target: Target, election_id: tuple[int, int], role: str, config: tuple[str, str] | None, extra: list[str]
) -> None:
    import p4runtime_sh.shell as sh

    real_start = sh.start_ipython

    def start_ipython(user_ns: dict[str, Any], config: Any, argv: list[str]) -> Any:
        p4info = sh.context.p4info
        registers = {r.preamble.name: r.preamble.id for r in p4info.registers}
        user_ns["register_entry"] = RegisterEntries(registers, target)
        names = {
            o.preamble.name
            for kind in ("tables", "direct_meters", "counters", "registers")
            for o in getattr(p4info, kind)
        }
        config.TerminalInteractiveShell.banner1 = hints(target, role, names)
        return real_start(user_ns=user_ns, config=config, argv=argv)

    sh.start_ipython = start_ipython
    sys.argv = [
        "p4runtime-shell",
        "--grpc-addr",
        target.address,
        "--device-id",
        str(target.device_id),
        "--election-id",
        f"{election_id[0]},{election_id[1]}",
    ]
    if target.tls is not None:
        sys.argv += target.tls.shell_flags()
    if config is not None:
        sys.argv += ["--config", ",".join(config)]
    sys.argv += extra
    sh.main()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make shell", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run-dir", type=Path, default=REPO / os.environ.get("TERRAPIN_RUN_DIR", "build/run")
    )
    parser.add_argument("--device", help="the switch of the running network: its name or device id")
    parser.add_argument("--addr", help="a P4Runtime server of your own instead (host:port)")
    parser.add_argument("--device-id", type=int, default=0, help="with --addr: its device id")
    parser.add_argument("--cacert", help="with --addr: the server speaks TLS; the CA to check it by")
    parser.add_argument("--cert", help="with --addr and --cacert: a client certificate to present")
    parser.add_argument("--private-key", help="with --cert: its key")
    parser.add_argument("--push", action="store_true", help="push build/p4's pipeline first")
    parser.add_argument("--p4info", default=str(REPO / "build/p4/terrapin.p4info.txtpb"))
    parser.add_argument("--json", default=str(REPO / "build/p4/terrapin.json"))
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="after --: p4runtime-shell's own flags")
    args = parser.parse_args(argv)
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    try:
        if args.addr:
            tls = TlsFiles(args.cacert, args.cert, args.private_key) if args.cacert else None
            target = Target(args.addr, args.addr, args.device_id, tls=tls)
        else:
            network = running_network(args.run_dir)
            target = choose(network, args.device)
            args.p4info, args.json = network.get("p4info", args.p4info), network.get("json", args.json)
        seen = arbitrate(target, SHELL_ELECTION_ID)
        config = None
        election_id = SHELL_ELECTION_ID
        if args.push:
            election_id = push_election_id(target, seen)
            for path in (args.p4info, args.json):
                if not Path(path).is_file():
                    raise ShellError(f"PUSH=1: {path} is missing (make p4 compiles it)")
            config = (args.p4info, args.json)
            role = "primary, pushing build/p4's pipeline"
        elif seen.code == ALREADY_EXISTS:
            role = "a backup beside the primary controller, which stays primary: reads only"
        else:
            role = "no controller is primary on it now"
    except ShellError as error:
        print(f"make shell: {error}", file=sys.stderr)
        return 2
    run_shell(target, election_id, role, config, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
