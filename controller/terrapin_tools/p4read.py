"""What a switch holds, read over P4Runtime independently of the controller: the tests and the
chaos run's checker (topo/chaos) compare it with what the controller and its store say (and, to
give a reconciliation something to correct, a write of their own while no controller is
connected). Reads need no arbitration (P4Runtime spec §6.3), so they never disturb the primary."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import grpc  # type: ignore[import-untyped]
from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r as p4runtime_pb2
from finsy.proto import p4r_grpc as p4runtime_pb2_grpc
from google.protobuf import text_format  # type: ignore[import-untyped]

from terrapin.paths import ChannelSelector

P4_INFO = Path(__file__).resolve().parents[2] / "build" / "p4" / "terrapin.p4info.txtpb"


@cache
def p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text_format.Parse(P4_INFO.read_text(), info)
    return info


def table(name: str) -> p4info_pb2.Table:
    found: p4info_pb2.Table = next(t for t in p4info().tables if t.preamble.name == name)
    return found


def field_names(name: str) -> dict[int, str]:
    """The match field names of table `name` by field id."""
    return {f.id: f.name for f in table(name).match_fields}


def exact_key(entry: p4runtime_pb2.TableEntry, fields: dict[int, str]) -> dict[str, int]:
    return {fields[m.field_id]: int.from_bytes(m.exact.value, "big") for m in entry.match}


def read(
    address: str,
    device_id: int,
    entity: p4runtime_pb2.Entity,
    timeout: float = 10,
    credentials: grpc.ChannelCredentials | None = None,
) -> list[p4runtime_pb2.Entity]:
    """`credentials`: TLS to a switch run with --grpc-server-ssl (plaintext without)."""
    channel = (
        grpc.insecure_channel(address) if credentials is None else grpc.secure_channel(address, credentials)
    )
    try:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        request = p4runtime_pb2.ReadRequest(device_id=device_id, entities=[entity])
        return [e for reply in stub.Read(request, timeout=timeout) for e in reply.entities]
    finally:
        channel.close()


def read_table(
    address: str,
    device_id: int,
    name: str,
    direct_resources: bool = False,
    credentials: grpc.ChannelCredentials | None = None,
) -> list[p4runtime_pb2.TableEntry]:
    """Every entry of table `name`; with `direct_resources`, their meter configs and counters too
    (an empty meter_config and counter_data in the request ask for them)."""
    entry = p4runtime_pb2.TableEntry(table_id=table(name).preamble.id)
    if direct_resources:
        entry.meter_config.SetInParent()
        entry.counter_data.SetInParent()
    wanted = p4runtime_pb2.Entity(table_entry=entry)
    return [e.table_entry for e in read(address, device_id, wanted, credentials=credentials)]


def channel_selectors(
    address: str, device_id: int, credentials: grpc.ChannelCredentials | None = None
) -> list[ChannelSelector]:
    """The channels a switch's `channels` table holds, as the controller's selectors."""
    fields = field_names("TerrapinIngress.channels")
    found = []
    for entry in read_table(address, device_id, "TerrapinIngress.channels", credentials=credentials):
        m = exact_key(entry, fields)
        src = ".".join(str(b) for b in m["src_addr"].to_bytes(4, "big"))
        dst = ".".join(str(b) for b in m["dst_addr"].to_bytes(4, "big"))
        found.append(ChannelSelector(src, dst, m["protocol"], m["flow_key"]))
    return found


def write_as_primary(address: str, device_id: int, updates: list[p4runtime_pb2.Update]) -> None:
    """Apply `updates` as a primary client of its own, for a switch no controller is connected
    to. The primary is the live client with the highest election id the switch has seen (spec
    §5), which its answer to any arbitration names: the write is made under that id, so a
    controller coming back with its own id is primary again."""
    done = threading.Event()

    def requests(election: p4runtime_pb2.Uint128) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        yield p4runtime_pb2.StreamMessageRequest(
            arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=device_id, election_id=election)
        )
        done.wait(10)  # the stream stays open (a client that ends it is gone) until the write

    channel = grpc.insecure_channel(address)
    try:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        election = p4runtime_pb2.Uint128(high=0, low=1)
        for _attempt in range(2):
            stream = stub.StreamChannel(requests(election), timeout=10)
            reply = next(stream).arbitration
            if reply.status.code == 0:  # primary
                break
            stream.cancel()
            election = reply.election_id  # the highest seen
        else:
            raise AssertionError(f"not made primary: {reply}")
        stub.Write(
            p4runtime_pb2.WriteRequest(device_id=device_id, election_id=election, updates=updates), timeout=10
        )
        done.set()
        stream.cancel()
    finally:
        done.set()
        channel.close()


def refuses_writes_of(address: str, device_id: int, election_id: int, timeout: float = 10) -> str:
    """Whether the switch refuses a write made under `election_id` (a deposed primary's: an
    older lease term's) while another client is primary: "refused" (PERMISSION_DENIED, spec
    §5.3), else what it answered instead. The write deletes a `channels` entry no controller
    writes (flow key 0 of 0.0.0.0 → 0.0.0.0), so a switch that wrongly accepted it answers
    NOT_FOUND and holds exactly what it held."""
    done = threading.Event()
    election = p4runtime_pb2.Uint128(high=election_id >> 64, low=election_id & (1 << 64) - 1)

    def requests() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        yield p4runtime_pb2.StreamMessageRequest(
            arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=device_id, election_id=election)
        )
        done.wait(timeout)  # the stream stays open until the write is answered

    nobody = table("TerrapinIngress.channels")
    entry = p4runtime_pb2.TableEntry(table_id=nobody.preamble.id)
    for f in nobody.match_fields:
        entry.match.add(field_id=f.id, exact=p4runtime_pb2.FieldMatch.Exact(value=b"\x00"))
    delete = p4runtime_pb2.Update(
        type=p4runtime_pb2.Update.DELETE, entity=p4runtime_pb2.Entity(table_entry=entry)
    )
    channel = grpc.insecure_channel(address)
    try:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        stream = stub.StreamChannel(requests(), timeout=timeout)
        reply = next(stream).arbitration
        if reply.status.code == 0:
            return f"made primary by its arbitration (the primary's id is {reply.election_id})"
        try:
            stub.Write(
                p4runtime_pb2.WriteRequest(device_id=device_id, election_id=election, updates=[delete]),
                timeout=timeout,
            )
        except grpc.RpcError as exc:
            code = exc.code()
            return "refused" if code == grpc.StatusCode.PERMISSION_DENIED else f"answered {code.name}"
        return "accepted"
    finally:
        done.set()
        channel.close()
