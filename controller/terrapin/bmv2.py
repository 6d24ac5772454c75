"""BMv2's own management client, for what p4lang's P4Runtime server leaves out.

p4lang's simple_switch_grpc serves P4Runtime through PI, whose device manager answers every
register read or write with UNIMPLEMENTED ("Register reads are not supported yet"). The telemetry
registers (max_queue_depth, max_queue_delay) are therefore read and reset through
`simple_switch_CLI`, BMv2's Thrift runtime client, on the switch's `--thrift-port`. The same client
sets what simple_switch has no command-line flag for: the rate (packets/s) and depth (packets) of
each port's egress queues. docs/bmv2.md lists every such difference.

A thin wrapper over the command rather than a Thrift client of our own: the CLI is part of the
switch's installation, speaks the switch's own Thrift schema, and keeps this package free of it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass


class Bmv2CliError(Exception):
    """simple_switch_CLI failed or answered something other than what was asked."""


@dataclass(frozen=True)
class Bmv2Cli:
    """simple_switch_CLI for the switch whose Thrift runtime server listens on `thrift_port`."""

    command: str
    thrift_port: int
    timeout: float = 30.0

    def run(self, commands: list[str]) -> str:
        """Runs the commands in one CLI session (one connection, one JSON fetch); its stdout."""
        try:
            done = subprocess.run(
                [self.command, "--thrift-port", str(self.thrift_port)],
                input="".join(f"{c}\n" for c in commands),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Bmv2CliError(f"{self.command}: {exc}") from None
        if done.returncode != 0:
            # The CLI exits non-zero only when it cannot reach the switch or load its JSON.
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise Bmv2CliError(
                f"{self.command} --thrift-port {self.thrift_port} exited {done.returncode}: {tail[0]}"
            )
        # Bad arguments are reported on stdout with exit status 0: catch the CLI's wording.
        for line in done.stdout.splitlines():
            if re.search(r"\b(Invalid|Error)\b", line):
                raise Bmv2CliError(f"{self.command}: {line.removeprefix('RuntimeCmd: ').strip()}")
        return done.stdout

    def read_registers(self, names: list[str]) -> dict[str, list[int]]:
        """Whole register arrays by name (P4Info/JSON full names), in one session."""
        out = self.run([f"register_read {name}" for name in names])
        found: dict[str, list[int]] = {}
        for name in names:
            # `register_read NAME` prints "NAME= v0, v1, ..." (after the prompt when piped).
            match = re.search(rf"(?:^|\s){re.escape(name)}=\s*([0-9, ]*)$", out, re.M)
            if match is None:
                raise Bmv2CliError(f"register_read {name}: no values in the CLI's answer {out[-200:]!r}")
            found[name] = [int(v) for v in match.group(1).replace(",", " ").split()]
        return found

    def read_register_cell(self, name: str, index: int) -> int:
        """One cell of a register array (`register_read NAME INDEX` prints `NAME[INDEX]= v`)."""
        out = self.run([f"register_read {name} {index}"])
        match = re.search(rf"{re.escape(name)}\[{index}\]=\s*(\d+)", out)
        if match is None:
            raise Bmv2CliError(f"register_read {name} {index}: no value in the CLI's answer {out[-200:]!r}")
        return int(match.group(1))

    def reset_registers(self, names: list[str]) -> None:
        self.run([f"register_reset {name}" for name in names])

    def shape_ports(self, rates_pps: dict[int, int], depth_packets: int | None = None) -> None:
        """Every priority queue of each port served at most `rates_pps[port]` packets/s, and
        holding `depth_packets` packets (BMv2's default is 64)."""
        commands = []
        for port, pps in sorted(rates_pps.items()):
            if pps <= 0:
                raise ValueError(f"port {port}: a queue rate must be positive packets/s, not {pps}")
            commands.append(f"set_queue_rate {pps} {port}")
            if depth_packets is not None:
                commands.append(f"set_queue_depth {depth_packets} {port}")
        self.run(commands)


def queue_rate_pps(rate_bps: int, packet_bytes: int) -> int:
    """The packets/s at which a port of `rate_bps` sends `packet_bytes`-byte packets: what BMv2's
    per-queue packet-rate limiter is set to for that port (at least 1; 0 would mean unlimited)."""
    if rate_bps <= 0 or packet_bytes <= 0:
        raise ValueError(f"rate {rate_bps} bit/s and packet {packet_bytes} B must be positive")
    return max(1, rate_bps // (8 * packet_bytes))
