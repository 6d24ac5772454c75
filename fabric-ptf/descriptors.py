"""Writes the FileDescriptorSet of PyPI's p4runtime modules (p4/v1/p4runtime.proto and what it
imports), for protoc's --descriptor_set_in.

upstream's testvectors proto (tv.proto) imports p4/v1/p4runtime.proto; the p4runtime wheel ships
only the generated modules, which carry each file's descriptor. Generating tv_pb2 against those
descriptors makes its messages the very ones the wheel's modules define.

    python fabric-ptf/descriptors.py OUT.pb     (run with build/venv-fabric-ptf's python)
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import descriptor_pb2  # type: ignore[import-untyped]
from google.protobuf.descriptor import FileDescriptor  # type: ignore[import-untyped]

# The roots: everything they import, transitively, is written too.
ROOTS = ("p4.v1.p4runtime_pb2", "p4.config.v1.p4info_pb2")


def descriptor_set(roots: tuple[str, ...] = ROOTS) -> descriptor_pb2.FileDescriptorSet:
    """The files the root modules define and import, each once, imports before importers."""
    out = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(fd: FileDescriptor) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        proto = out.file.add()
        fd.CopyToProto(proto)

    for name in roots:
        module = __import__(name, fromlist=["DESCRIPTOR"])
        add(module.DESCRIPTOR)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: descriptors.py OUT.pb", file=sys.stderr)
        return 2
    Path(argv[1]).write_bytes(descriptor_set().SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
