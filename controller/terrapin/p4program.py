"""Every name and number of the P4 program (p4src/) that the controller uses, in one place.

Table, action, counter, meter and register names are P4Info names (docs/dataplane.md,
"Controller-facing names"); the numbers are p4src/include/constants.p4's. tests/test_p4program.py
checks each against the compiled P4Info and constants.p4, so a renamed table or a reordered
drop reason fails a test instead of a switch write. Only terrapin/switches/ speaks P4Runtime (its
encoding.py turns these names into the bytes p4src gets); it and the modules that interpret what
it reads (metrics, monitor) take the names from here.
"""

from __future__ import annotations

from terrapin.constants import QUEUES_PER_PORT

# ---- tables, with the key fields and actions the controller writes -----------------------------
T_ROUTES = "TerrapinIngress.routes"
T_ARP = "TerrapinIngress.arp_replies"
T_CHANNELS = "TerrapinIngress.channels"
T_PORT_MACS = "TerrapinEgress.port_macs"
T_QUEUE_BOUNDS = "TerrapinEgress.queue_bounds"
T_AGGREGATES = "TerrapinIngress.aggregates"
T_CHANNEL_PATHS = "TerrapinIngress.channel_paths"
A_ROUTE = "TerrapinIngress.route"
A_ANSWER_ARP = "TerrapinIngress.answer_arp"
A_ADMIT = "TerrapinIngress.admit"
A_ADMIT_JUMPING = "TerrapinIngress.admit_jumping_window"
A_ADMIT_MOVING = "TerrapinIngress.admit_moving_window"
A_SET_SOURCE_MAC = "TerrapinEgress.set_source_mac"
A_SET_DELAY_BOUND = "TerrapinEgress.set_delay_bound"
A_SET_AGGREGATE = "TerrapinIngress.set_aggregate"
A_PIN = "TerrapinIngress.pin"
# The key of T_CHANNELS, field by field (ChannelSelector's src, dst, protocol, flow_key).
CHANNEL_KEY = ("src_addr", "dst_addr", "protocol", "flow_key")
# The key of T_AGGREGATES (all ternary), field by field with its width in bits.
AGGREGATE_KEY = {"dscp": 6, "protocol": 8, "l4_dst_port": 16}

# ---- counters and registers --------------------------------------------------------------------
C_CHANNEL_YELLOW = "TerrapinIngress.channel_yellow"
C_CHANNEL_RED = "TerrapinIngress.channel_red"
C_DROPS = "TerrapinIngress.drops"
C_QUEUE_TRAFFIC = "TerrapinEgress.queue_traffic"
C_QUEUE_DELAY_BANDS = "TerrapinEgress.queue_delay_bands"
R_MAX_DEPTH = "TerrapinEgress.max_queue_depth"
R_MAX_DELAY = "TerrapinEgress.max_queue_delay"
# Indexed by aggregate id: the meter every entry of that aggregate shares.
M_AGGREGATE_METERS = "TerrapinIngress.aggregate_meters"

# ---- numbers (constants.p4) --------------------------------------------------------------------
# queue_delay_bands: cell (port * QUEUES_PER_PORT + priority) * DELAY_BANDS + band.
DELAY_BANDS = 4
DELAY_BAND_NAMES = ("quarter", "half", "within", "over")
PACKET_OUT_DIRECT = 0
PACKET_OUT_PIPELINE = 1
ETHERTYPE_LINK_PROBE = 0x88B5
EXCESS_DROP = 0
EXCESS_DEMOTE = 1
# Entries of T_AGGREGATES and ids of M_AGGREGATE_METERS.
MAX_AGGREGATES = 64
# Entries of T_CHANNELS, and the channel ids (network-wide) that index the per-channel counters.
MAX_CHANNELS = 16384
# The `drops` counter's indices, in constants.p4's DROP_* order.
DROP_REASONS = (
    "malformed",
    "bad_checksum",
    "unsupported",
    "no_route",
    "ttl_expired",
    "arp_unanswered",
    "policed",
)

__all__ = [
    "AGGREGATE_KEY",
    "A_ADMIT",
    "A_ADMIT_JUMPING",
    "A_ADMIT_MOVING",
    "A_ANSWER_ARP",
    "A_PIN",
    "A_ROUTE",
    "A_SET_AGGREGATE",
    "A_SET_DELAY_BOUND",
    "A_SET_SOURCE_MAC",
    "CHANNEL_KEY",
    "C_CHANNEL_RED",
    "C_CHANNEL_YELLOW",
    "C_DROPS",
    "C_QUEUE_DELAY_BANDS",
    "C_QUEUE_TRAFFIC",
    "DELAY_BANDS",
    "DELAY_BAND_NAMES",
    "DROP_REASONS",
    "ETHERTYPE_LINK_PROBE",
    "EXCESS_DEMOTE",
    "EXCESS_DROP",
    "MAX_AGGREGATES",
    "MAX_CHANNELS",
    "M_AGGREGATE_METERS",
    "PACKET_OUT_DIRECT",
    "PACKET_OUT_PIPELINE",
    "QUEUES_PER_PORT",
    "R_MAX_DELAY",
    "R_MAX_DEPTH",
    "T_AGGREGATES",
    "T_ARP",
    "T_CHANNELS",
    "T_CHANNEL_PATHS",
    "T_PORT_MACS",
    "T_QUEUE_BOUNDS",
    "T_ROUTES",
    "queue_cell",
]


def queue_cell(port: int, priority: int) -> int:
    """The index of (port, priority) in the per-queue counters and registers (QUEUE_CELLS)."""
    return port * QUEUES_PER_PORT + priority
