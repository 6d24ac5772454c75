"""Run an STF corpus's packet-only scripts on p4lang's simple_switch, through pcap files.

    build/venv/bin/python scripts/stf_on_simple_switch.py P4C SIMPLE_SWITCH CORPUS_DIR

For every NAME.stf of CORPUS_DIR made only of `packet`/`expect` lines on port 0 (no table
commands: those need the Thrift CLI), NAME.p4 is compiled with P4C, the packets are written to a
pcap file that simple_switch reads (`--use-files`: no interfaces, no namespaces, so no network
lock; a random Thrift port), and the frames it writes for port 0 are compared with the expected
ones (hex, no wildcards). Prints a line per difference and `N passed, M failed, K skipped`.

Used for issue 23: `go test ./compiler -run 'TestCopyInCopyOut|TestProgramBehaviour'` with
BEHAVIOUR_CORPUS=DIR writes its cases as such a corpus (docs/toolchain.md).
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_pcap(path: Path, frames: list[bytes]) -> None:
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # Ethernet link type
        for fr in frames:
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)) + fr)


def read_pcap(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    data = path.read_bytes()
    out: list[bytes] = []
    i = 24
    while i + 16 <= len(data):
        _, _, n, _ = struct.unpack("<IIII", data[i : i + 16])
        i += 16
        out.append(data[i : i + n])
        i += n
    return out


def packet_script(stf: Path) -> tuple[list[bytes], list[str]] | None:
    """The packets sent and frames expected on port 0, or None for other scripts."""
    lines = [ln.split("#")[0].split() for ln in stf.read_text().splitlines()]
    lines = [ln for ln in lines if ln]
    if any(ln[0] not in ("packet", "expect") or ln[1] != "0" for ln in lines):
        return None
    sent = [bytes.fromhex("".join(ln[2:])) for ln in lines if ln[0] == "packet"]
    want = ["".join(ln[2:]).rstrip("$").lower() for ln in lines if ln[0] == "expect"]
    return sent, want


def run_one(p4c: str, switch: str, program: Path, sent: list[bytes], want: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        subprocess.run([p4c, "-o", str(d / "p.json"), str(program)], check=True)
        write_pcap(d / "0_in.pcap", sent)
        port = random.randint(20000, 60000)
        sw = subprocess.Popen(
            [switch, "--use-files", "0", "-i", f"0@{d / '0'}", "--thrift-port", str(port),
             "--device-id", str(port), str(d / "p.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(40):
                time.sleep(0.1)
                if len(read_pcap(d / "0_out.pcap")) >= want:
                    break
            time.sleep(0.2)  # a frame more than expected would show now
            return [f.hex() for f in read_pcap(d / "0_out.pcap")]
        finally:
            sw.terminate()
            sw.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    p4c, switch, corpus = argv[1], argv[2], Path(argv[3])
    passed = failed = skipped = 0
    for stf in sorted(corpus.glob("*.stf")):
        script = packet_script(stf)
        if script is None:
            skipped += 1
            continue
        sent, want = script
        got = run_one(p4c, switch, stf.with_suffix(".p4"), sent, len(want))
        if got == want:
            passed += 1
        else:
            failed += 1
            print(f"DIFF {stf.stem}: simple_switch sent {got}, the script expects {want}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
