"""A P4Runtime client in the shape of p4lang tutorials' p4runtime_lib, run against a switch.

p4lang's tutorials drive simple_switch_grpc with their own small library
(utils/p4runtime_lib: SwitchConnection, Bmv2SwitchConnection, P4InfoHelper),
which is on no package registry. This is a faithful stand-in written for
these tests, built on the official p4runtime protos (PyPI's p4runtime): the
same calls in the same order, and above all the same pipeline push, the
device config wrapped in PI's p4.tmp.P4DeviceConfig with device_data = the
BMv2 JSON and reassign = true. A switch that only took the bare JSON refused
these clients.

Run by devconfig_switch_test.go inside the test's network namespace, with the
venv scripts/p4rt-shell.sh creates. Each check prints PASS/FAIL; the last line
is "N passed, M failed", and the exit code is 1 if anything failed.
"""
from __future__ import annotations

import argparse
import queue
import select
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

ETH_P_ALL = 0x0003


def p4_device_config_class() -> Any:
    """PI's p4.tmp.P4DeviceConfig (p4/tmp/p4config.proto), which PyPI's p4runtime lacks.

    Declared here field for field: reassign = 1, extras = 2 (a map<string,
    string> kv = 1), device_data = 3.
    """
    f = descriptor_pb2.FileDescriptorProto(name="terrapin_test/p4config.proto", package="p4.tmp",
                                           syntax="proto3")
    m = f.message_type.add(name="P4DeviceConfig")
    extras = m.nested_type.add(name="Extras")
    entry = extras.nested_type.add(name="KvEntry")
    entry.options.map_entry = True
    label, string, bytes_, boolean, message = (
        descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
        descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    )
    entry.field.add(name="key", number=1, label=label, type=string)
    entry.field.add(name="value", number=2, label=label, type=string)
    extras.field.add(name="kv", number=1, label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                     type=message, type_name=".p4.tmp.P4DeviceConfig.Extras.KvEntry")
    m.field.add(name="reassign", number=1, label=label, type=boolean)
    m.field.add(name="extras", number=2, label=label, type=message, type_name=".p4.tmp.P4DeviceConfig.Extras")
    m.field.add(name="device_data", number=3, label=label, type=bytes_)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    desc = pool.FindMessageTypeByName("p4.tmp.P4DeviceConfig")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


class P4InfoHelper:
    """Names to ids, as the tutorials' P4InfoHelper does."""

    def __init__(self, p4info_path: str) -> None:
        self.p4info = p4info_pb2.P4Info()
        with open(p4info_path) as f:
            text_format.Merge(f.read(), self.p4info)

    def table(self, name: str) -> Any:
        for t in self.p4info.tables:
            if name in (t.preamble.name, t.preamble.alias):
                return t
        raise KeyError(f"no table {name}")

    def action(self, name: str) -> Any:
        for a in self.p4info.actions:
            if name in (a.preamble.name, a.preamble.alias):
                return a
        raise KeyError(f"no action {name}")

    def build_table_entry(self, table: str, match: dict[str, bytes], action: str,
                          params: dict[str, bytes]) -> Any:
        t, a = self.table(table), self.action(action)
        entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id)
        for mf in t.match_fields:
            if mf.name in match:
                fm = entry.match.add(field_id=mf.id)
                fm.exact.value = match[mf.name]
        entry.action.action.action_id = a.preamble.id
        for p in a.params:
            entry.action.action.params.add(param_id=p.id, value=params[p.name])
        return entry


class Bmv2SwitchConnection:
    """One switch: its stream (arbitration first) and the unary calls."""

    def __init__(self, address: str, device_id: int) -> None:
        self.device_id = device_id
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests: queue.Queue[Any] = queue.Queue()
        self.stream = self.stub.StreamChannel(self._requests())
        self.election = p4runtime_pb2.Uint128(high=0, low=1)

    def _requests(self) -> Iterator[Any]:
        while True:
            req = self.requests.get()
            if req is None:
                return
            yield req

    def master_arbitration_update(self) -> Any:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(self.election)
        self.requests.put(req)
        for reply in self.stream:
            return reply
        raise RuntimeError("the stream closed before the arbitration answer")

    def build_device_config(self, bmv2_json_path: str) -> Any:
        config = p4_device_config_class()()
        config.reassign = True
        with open(bmv2_json_path, "rb") as f:
            config.device_data = f.read()
        return config

    def set_forwarding_pipeline_config(self, p4info: Any, bmv2_json_path: str) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = self.build_device_config(bmv2_json_path).SerializeToString()
        self.stub.SetForwardingPipelineConfig(req)

    def write_table_entry(self, entry: Any) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id, election_id=self.election)
        update = req.updates.add(type=p4runtime_pb2.Update.INSERT)
        update.entity.table_entry.CopyFrom(entry)
        self.stub.Write(req)

    def read_table_entries(self, table_id: int) -> list[Any]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.add().table_entry.table_id = table_id
        return [e.table_entry for r in self.stub.Read(req) for e in r.entities]

    def shutdown(self) -> None:
        self.requests.put(None)
        self.channel.close()


def numbers(entry: Any) -> tuple[Any, ...]:
    """A table entry's ids and values, byte strings as numbers."""
    n = int.from_bytes
    a = entry.action.action
    return (entry.table_id, [(m.field_id, n(m.exact.value, "big")) for m in entry.match],
            a.action_id, [(p.param_id, n(p.value, "big")) for p in a.params])


class Port:
    def __init__(self, iface: str) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((iface, 0))
        self.sock.setblocking(False)

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def drain(self, seconds: float) -> list[bytes]:
        frames, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if not select.select([self.sock], [], [], left)[0]:
                break
            data, addr = self.sock.recvfrom(65535)
            if addr[2] != socket.PACKET_OUTGOING:
                frames.append(data)
        return frames


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--ports", required=True, help="host ends of switch ports 1 and 2, comma-separated")
    args = ap.parse_args()
    results: list[bool] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)

    helper = P4InfoHelper(args.p4info)
    sw = Bmv2SwitchConnection(args.addr, args.device_id)
    try:
        reply = sw.master_arbitration_update()
        check("MasterArbitrationUpdate makes us primary", reply.arbitration.status.code == 0, str(reply))
        try:
            sw.set_forwarding_pipeline_config(helper.p4info, args.json)
            check("SetForwardingPipelineConfig with a P4DeviceConfig", True)
        except grpc.RpcError as e:
            check("SetForwardingPipelineConfig with a P4DeviceConfig", False, f"{e.code()}: {e.details()}")
            return 1
        mac2 = bytes([0, 0, 0, 0, 0, 2])
        entry = helper.build_table_entry("TestIngress.l2", {"hdr.ethernet.dst": mac2}, "TestIngress.forward",
                                         {"port": b"\x02"})
        sw.write_table_entry(entry)
        got = sw.read_table_entries(entry.table_id)
        # Values read back are canonical (P4Runtime 1.4 section 8.4: no
        # leading zero bytes), so compare them as numbers.
        check("the entry written reads back", len(got) == 1 and numbers(got[0]) == numbers(entry), str(got))
        p1, p2 = (Port(i) for i in args.ports.split(","))
        p2.drain(0.2)
        frame = mac2 + bytes([0, 0, 0, 0, 0, 1, 0x88, 0xB5]) + bytes(50)
        p1.send(frame)
        out = p2.drain(1.0)
        check("the frame leaves on port 2", out == [frame], f"{len(out)} frames: {[f.hex() for f in out]}")
    finally:
        sw.shutdown()
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
