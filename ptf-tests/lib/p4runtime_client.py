"""A small synchronous P4Runtime client for the PTF tests.

It speaks to one device as the primary controller and resolves every name through the
P4Info the pipeline was compiled with, so tests use the program's names
("TerrapinIngress.channels") or their P4Info aliases ("channels"), never numeric ids.
The protobuf modules are the ones finsy ships (the p4runtime wheel's generated code
predates the protobuf runtime in the venv).
"""

from __future__ import annotations

import ipaddress
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import grpc
from finsy.proto import p4d, p4i, p4r, p4r_grpc
from google.protobuf import text_format

MatchValue = int | str | bytes
# exact: value; lpm: (value, prefix_len); ternary: (value, mask)
MatchSpec = Mapping[str, MatchValue | tuple[MatchValue, int] | tuple[MatchValue, MatchValue]]


class P4RuntimeError(Exception):
    """A request the switch refused, with the gRPC status and any per-update errors."""


@dataclass(frozen=True)
class MeterEnvelope:
    """An RFC 2698 trTCM configuration; rates in bytes/s, bursts in bytes."""

    cir: int
    cburst: int
    pir: int
    pburst: int

    def proto(self) -> p4r.MeterConfig:
        return p4r.MeterConfig(cir=self.cir, cburst=self.cburst, pir=self.pir, pburst=self.pburst)


@dataclass(frozen=True)
class ReceivedPacket:
    payload: bytes
    metadata: dict[str, int]


def encode(value: MatchValue, width: int) -> bytes:
    """P4Runtime canonical bytestring (spec §8.4) for an int, a dotted IPv4 or a MAC."""
    if isinstance(value, bytes):
        number = int.from_bytes(value, "big")
    elif isinstance(value, str):
        if ":" in value:
            number = int(value.replace(":", ""), 16)
        else:
            number = int(ipaddress.IPv4Address(value))
    else:
        number = value
    if number < 0 or number >= 1 << width:
        raise ValueError(f"{value!r} does not fit in {width} bits")
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


class P4Info:
    """Name → object lookups over a P4Info message (full names and aliases)."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.info = info

        def index(objects: Sequence[object]) -> dict[str, object]:
            found: dict[str, object] = {}
            for obj in objects:
                pre = obj.preamble  # type: ignore[attr-defined]
                found[pre.name] = obj
                if pre.alias:
                    found.setdefault(pre.alias, obj)
            return found

        self.tables = index(info.tables)
        self.actions = index(info.actions)
        self.counters = index(info.counters)
        self.direct_counters = index(info.direct_counters)
        self.meters = index(info.meters)
        self.direct_meters = index(info.direct_meters)
        self.registers = index(info.registers)
        self.packet_metadata = index(info.controller_packet_metadata)

    @staticmethod
    def _get(kind: dict[str, object], name: str, what: str) -> object:
        try:
            return kind[name]
        except KeyError:
            raise KeyError(f"no {what} named {name!r} in the P4Info") from None

    def table(self, name: str) -> p4i.Table:
        return self._get(self.tables, name, "table")  # type: ignore[return-value]

    def action(self, name: str) -> p4i.Action:
        return self._get(self.actions, name, "action")  # type: ignore[return-value]

    def counter(self, name: str) -> p4i.Counter:
        return self._get(self.counters, name, "counter")  # type: ignore[return-value]

    def meter(self, name: str) -> p4i.Meter:
        return self._get(self.meters, name, "meter")  # type: ignore[return-value]

    def register(self, name: str) -> p4i.Register:
        return self._get(self.registers, name, "register")  # type: ignore[return-value]

    def controller_header(self, name: str) -> p4i.ControllerPacketMetadata:
        return self._get(self.packet_metadata, name, "controller header")  # type: ignore[return-value]


def _pre_entity(group: p4r.MulticastGroupEntry) -> p4r.Entity:
    pre = p4r.PacketReplicationEngineEntry(multicast_group_entry=group)
    return p4r.Entity(packet_replication_engine_entry=pre)


class P4RuntimeClient:
    """Primary controller of one device over one StreamChannel."""

    def __init__(self, address: str, device_id: int = 0, timeout: float = 10.0) -> None:
        self.device_id = device_id
        self.timeout = timeout
        # A fresh, growing election id lets a test become primary at once even while the
        # server is still tearing down the previous test's stream.
        self.election_id = p4r.Uint128(high=1, low=time.monotonic_ns())
        self._channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self._channel).result(timeout=timeout)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._arbitrations: queue.Queue[p4r.MasterArbitrationUpdate] = queue.Queue()
        self.packet_ins: queue.Queue[p4r.PacketIn] = queue.Queue()
        self.stream_errors: list[p4r.StreamError] = []
        self._stream = self._stub.StreamChannel(self._request_iterator())
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        self._requests.put(
            p4r.StreamMessageRequest(
                arbitration=p4r.MasterArbitrationUpdate(
                    device_id=device_id, election_id=self.election_id
                )
            )
        )
        try:
            reply = self._arbitrations.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise P4RuntimeError("no arbitration reply from the switch") from None
        if reply.status.code != 0:
            self.close()
            raise P4RuntimeError(f"not primary: {reply.status}")
        self.p4info: P4Info | None = None

    def _request_iterator(self) -> Iterator[p4r.StreamMessageRequest]:
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _read_stream(self) -> None:
        try:
            for response in self._stream:
                kind = response.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitrations.put(response.arbitration)
                elif kind == "packet":
                    self.packet_ins.put(response.packet)
                elif kind == "error":
                    self.stream_errors.append(response.error)
        except grpc.RpcError:
            pass  # the stream ends when the test closes the client

    def close(self) -> None:
        self._requests.put(None)
        self._stream.cancel()
        self._channel.close()

    # ---- pipeline --------------------------------------------------------------------

    def set_pipeline(self, p4info_path: str, device_config_path: str) -> None:
        info = p4i.P4Info()
        with open(p4info_path) as f:
            text_format.Parse(f.read(), info)
        with open(device_config_path, "rb") as f:
            device_config = f.read()
        request = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=self.election_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config),
        )
        self._call(self._stub.SetForwardingPipelineConfig, request)
        self.p4info = P4Info(info)

    @property
    def schema(self) -> P4Info:
        if self.p4info is None:
            raise P4RuntimeError("no pipeline set")
        return self.p4info

    # ---- writes ------------------------------------------------------------------------

    def _call(self, method: object, request: object) -> object:
        try:
            return method(request, timeout=self.timeout)  # type: ignore[operator]
        except grpc.RpcError as err:
            raise P4RuntimeError(f"{err.code()}: {err.details()}") from None

    def write(self, *updates: p4r.Update) -> None:
        request = p4r.WriteRequest(
            device_id=self.device_id,
            election_id=self.election_id,
            updates=list(updates),
            atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR,
        )
        self._call(self._stub.Write, request)

    def table_entry(
        self,
        table: str,
        match: MatchSpec,
        action: str | None = None,
        params: Mapping[str, MatchValue] | None = None,
        priority: int = 0,
        meter: MeterEnvelope | None = None,
        default: bool = False,
    ) -> p4r.TableEntry:
        t = self.schema.table(table)
        entry = p4r.TableEntry(table_id=t.preamble.id, priority=priority, is_default_action=default)
        fields = {f.name: f for f in t.match_fields}
        for name, spec in match.items():
            if name not in fields:
                raise KeyError(f"table {table} has no match field {name!r}: {sorted(fields)}")
            f = fields[name]
            fm = p4r.FieldMatch(field_id=f.id)
            kind = p4i.MatchField.MatchType.Name(f.match_type)
            if kind == "EXACT":
                fm.exact.value = encode(spec, f.bitwidth)  # type: ignore[arg-type]
            elif kind == "LPM":
                value, plen = spec  # type: ignore[misc]
                fm.lpm.value = encode(value, f.bitwidth)
                fm.lpm.prefix_len = plen
            elif kind == "TERNARY":
                value, mask = spec  # type: ignore[misc]
                fm.ternary.value = encode(value, f.bitwidth)
                fm.ternary.mask = encode(mask, f.bitwidth)
            else:
                raise ValueError(f"match kind {kind} not supported by this client")
            entry.match.append(fm)
        if action is not None:
            a = self.schema.action(action)
            call = entry.action.action
            call.action_id = a.preamble.id
            given = dict(params or {})
            for p in a.params:
                if p.name not in given:
                    raise KeyError(f"action {action} needs parameter {p.name!r}")
                call.params.append(
                    p4r.Action.Param(param_id=p.id, value=encode(given.pop(p.name), p.bitwidth))
                )
            if given:
                raise KeyError(f"action {action} has no parameters {sorted(given)}")
        if meter is not None:
            entry.meter_config.CopyFrom(meter.proto())
        return entry

    def insert(self, table: str, match: MatchSpec, action: str,
               params: Mapping[str, MatchValue] | None = None, priority: int = 0,
               meter: MeterEnvelope | None = None) -> p4r.TableEntry:
        entry = self.table_entry(table, match, action, params, priority, meter)
        self.write(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry)))
        return entry

    def delete(self, entry: p4r.TableEntry) -> None:
        self.write(p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=entry)))

    def set_direct_meter(self, entry: p4r.TableEntry, meter: MeterEnvelope) -> None:
        bare = p4r.TableEntry()
        bare.CopyFrom(entry)
        bare.ClearField("action")
        bare.ClearField("meter_config")
        update = p4r.DirectMeterEntry(table_entry=bare, config=meter.proto())
        self.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(direct_meter_entry=update)))

    def set_meter(self, meter: str, index: int, envelope: MeterEnvelope) -> None:
        m = self.schema.meter(meter)
        update = p4r.MeterEntry(
            meter_id=m.preamble.id, index=p4r.Index(index=index), config=envelope.proto()
        )
        self.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(meter_entry=update)))

    def set_register(self, name: str, index: int, value: int) -> None:
        r = self.schema.register(name)
        data = p4d.P4Data(bitstring=encode(value, r.type_spec.bitstring.bit.bitwidth))
        update = p4r.RegisterEntry(register_id=r.preamble.id, index=p4r.Index(index=index), data=data)
        self.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(register_entry=update)))

    def insert_multicast_group(self, group_id: int, replicas: Sequence[tuple[int, int]]) -> None:
        """A multicast group of (egress port, instance) replicas; instance is the replica's
        egress_rid."""
        group = p4r.MulticastGroupEntry(
            multicast_group_id=group_id,
            replicas=[p4r.Replica(egress_port=port, instance=instance) for port, instance in replicas],
        )
        self.write(p4r.Update(type=p4r.Update.INSERT, entity=_pre_entity(group)))

    def delete_multicast_group(self, group_id: int) -> None:
        group = p4r.MulticastGroupEntry(multicast_group_id=group_id)
        self.write(p4r.Update(type=p4r.Update.DELETE, entity=_pre_entity(group)))

    # ---- reads -------------------------------------------------------------------------

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        request = p4r.ReadRequest(device_id=self.device_id, entities=list(entities))
        found: list[p4r.Entity] = []
        try:
            for response in self._stub.Read(request, timeout=self.timeout):
                found.extend(response.entities)
        except grpc.RpcError as err:
            raise P4RuntimeError(f"{err.code()}: {err.details()}") from None
        return found

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one cell of an indexed counter."""
        c = self.schema.counter(name)
        want = p4r.CounterEntry(counter_id=c.preamble.id, index=p4r.Index(index=index))
        entities = self.read(p4r.Entity(counter_entry=want))
        if len(entities) != 1:
            raise P4RuntimeError(f"counter {name}[{index}]: {len(entities)} entities read back")
        data = entities[0].counter_entry.data
        return data.packet_count, data.byte_count

    def direct_counter(self, entry: p4r.TableEntry) -> tuple[int, int]:
        bare = p4r.TableEntry()
        bare.CopyFrom(entry)
        bare.ClearField("action")
        bare.ClearField("meter_config")
        entities = self.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=bare)))
        if len(entities) != 1:
            raise P4RuntimeError(f"direct counter: {len(entities)} entities read back")
        data = entities[0].direct_counter_entry.data
        return data.packet_count, data.byte_count

    def register(self, name: str, index: int) -> int:
        r = self.schema.register(name)
        want = p4r.RegisterEntry(register_id=r.preamble.id, index=p4r.Index(index=index))
        entities = self.read(p4r.Entity(register_entry=want))
        if len(entities) != 1:
            raise P4RuntimeError(f"register {name}[{index}]: {len(entities)} entities read back")
        data = entities[0].register_entry.data
        if data.WhichOneof("data") != "bitstring":
            raise P4RuntimeError(f"register {name}[{index}]: not a bitstring: {data}")
        return decode(data.bitstring)

    def table_entries(self, table: str) -> list[p4r.TableEntry]:
        t = self.schema.table(table)
        entities = self.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=t.preamble.id)))
        return [e.table_entry for e in entities]

    # ---- packet I/O --------------------------------------------------------------------

    def packet_out(self, payload: bytes, **metadata: int) -> None:
        header = self.schema.controller_header("packet_out")
        out = p4r.PacketOut(payload=payload)
        for m in header.metadata:
            value = metadata.pop(m.name, 0)
            out.metadata.append(p4r.PacketMetadata(metadata_id=m.id, value=encode(value, m.bitwidth)))
        if metadata:
            raise KeyError(f"packet_out has no fields {sorted(metadata)}")
        self._requests.put(p4r.StreamMessageRequest(packet=out))

    def packet_in(self, timeout: float) -> ReceivedPacket | None:
        try:
            message = self.packet_ins.get(timeout=timeout)
        except queue.Empty:
            return None
        header = self.schema.controller_header("packet_in")
        names = {m.id: m.name for m in header.metadata}
        fields = {names.get(m.metadata_id, str(m.metadata_id)): decode(m.value) for m in message.metadata}
        return ReceivedPacket(payload=message.payload, metadata=fields)
