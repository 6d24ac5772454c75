"""The only package that speaks P4Runtime. The names and numbers of p4src it uses are in
p4program.py; encoding.py turns them into every byte the controller sends.

Built on finsy (asyncio P4Runtime client: one gRPC stream per switch, arbitration, P4Info-aware
entities, packet I/O, reconnection). Only standard P4Runtime is used, so the same code drives
terrapin-switch and p4lang's simple_switch_grpc. docs/controller.md explains the choice. The one
exception: simple_switch_grpc does not implement P4Runtime register reads and writes, so for a
`kind: bmv2` switch the telemetry registers go through BMv2's Thrift CLI (terrapin/bmv2.py).

  fabric.py      SwitchFabric, the facade the services use
  connection.py  one finsy stream per switch: readiness, arbitration, SwitchUnavailable
  entries.py     channel writes, queue bounds, reconciliation (SwitchEntries)
  batcher.py     WriteGate and SwitchBatcher: concurrent writes to one switch, batched
  telemetry.py   queue, channel and drop counters, registers, the monitor's sample
  packetio.py    PacketIn to the protocol handler, PacketOut
  encoding.py    ChannelCodec, entries, bounds, meters, packet-out metadata (the bytes p4src gets)

Names and units come from docs/dataplane.md ("Controller-facing names"), by way of
terrapin/p4program.py, which is tested against the compiled P4Info and constants.p4.
"""

from terrapin.switches.batcher import not_primary
from terrapin.switches.connection import SwitchUnavailable, unanswered
from terrapin.switches.encoding import QueueBound, entry_for_hop
from terrapin.switches.entries import DesiredChannels, ReconcileReport
from terrapin.switches.fabric import SwitchFabric
from terrapin.switches.packetio import PacketHandler
from terrapin.switches.telemetry import ChannelCounters, MonitorSample, QueueTelemetry, RecoveryCounters

__all__ = [
    "ChannelCounters",
    "DesiredChannels",
    "MonitorSample",
    "PacketHandler",
    "QueueBound",
    "QueueTelemetry",
    "ReconcileReport",
    "RecoveryCounters",
    "SwitchFabric",
    "SwitchUnavailable",
    "entry_for_hop",
    "not_primary",
    "unanswered",
]
