"""Saves a switch's state dump (BMv2's bm_serialize_state) to a file, for --restore-state.

    python3 scripts/thrift-cli/serialize_state.py [--thrift-ip ADDR] [--thrift-port N] FILE

simple_switch_CLI's own serialize_state command cannot save it: the dump holds the md5 of the
program's JSON as 16 raw bytes, which the Python Thrift library fails to decode as text
(UnicodeDecodeError), on BMv2 as on terrapin-switch. This speaks the Thrift call itself (the
multiplexed binary protocol, nothing to install) and writes the answer's bytes as they are.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
from pathlib import Path


def _string(s: bytes) -> bytes:
    return struct.pack(">i", len(s)) + s


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the switch closed the connection")
        buf += chunk
    return buf


def serialize_state(port: int, host: str = "127.0.0.1") -> bytes:
    """bm_serialize_state of the switch's Thrift runtime at host:port, the answer as raw bytes."""
    with socket.create_connection((host, port), timeout=30) as s:
        # CALL "standard:bm_serialize_state", seqid 1, an empty argument struct
        call = struct.pack(">I", 0x80010001) + _string(b"standard:bm_serialize_state")
        s.sendall(call + struct.pack(">i", 1) + b"\x00")
        (version,) = struct.unpack(">I", _recv(s, 4))
        if version & 0xFFFF0000 != 0x80010000:
            raise RuntimeError(f"bm_serialize_state: not a Thrift binary message ({version:#x})")
        (name_len,) = struct.unpack(">i", _recv(s, 4))
        _recv(s, name_len + 4)  # name, seqid
        if version & 0xFF != 2:  # REPLY; EXCEPTION is 3
            raise RuntimeError(f"bm_serialize_state: the switch answered with message type {version & 0xFF}")
        ftype, fid = struct.unpack(">bh", _recv(s, 3))
        if (ftype, fid) != (11, 0):  # field 0 "success", a string
            raise RuntimeError(f"bm_serialize_state: field {fid} of type {ftype} in the answer")
        (n,) = struct.unpack(">i", _recv(s, 4))
        return _recv(s, n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thrift-ip", default="127.0.0.1")
    ap.add_argument("--thrift-port", type=int, default=9090)
    ap.add_argument("file", type=Path)
    args = ap.parse_args()
    try:
        dump = serialize_state(args.thrift_port, args.thrift_ip)
    except (OSError, RuntimeError, EOFError) as e:
        print(f"serialize_state: {e}", file=sys.stderr)
        return 1
    args.file.write_bytes(dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
