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
# Protection (docs/dataplane.md "Protection"): the first switch's replication, each replica's
# member stream, and the member streams' relay and recovery.
T_PROTECTIONS = "TerrapinIngress.protections"
T_COPIES = "TerrapinEgress.copies"
T_MEMBER_STREAMS = "TerrapinIngress.member_streams"
A_REPLICATE = "TerrapinIngress.replicate"
A_SEND_COPY = "TerrapinEgress.send_copy"
A_RELAY_COPY = "TerrapinIngress.relay_copy"
A_RECOVER_COPY = "TerrapinIngress.recover_copy"
# A channel's selector as a key, field by field (ChannelSelector's src, dst, protocol,
# flow_key): T_CHANNEL_PATHS's key. T_CHANNELS's adds where the packet came from
# (ChannelEntry.in_port).
SELECTOR_KEY = ("src_addr", "dst_addr", "protocol", "flow_key")
CHANNEL_KEY = (*SELECTOR_KEY, "in_port")
# The trunk ports of a switch: a packet from one matches `channels` by its port.
T_TRUNK_PORTS = "TerrapinIngress.trunk_ports"
A_FROM_TRUNK = "TerrapinIngress.from_trunk"
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
# 802.1CB's recovery counters, per channel id at its last switch, by their names in the REST
# counters; the lost numbers are a register.
FRER_COUNTERS = {
    "passed": "TerrapinIngress.frer_passed",
    "discarded": "TerrapinIngress.frer_discarded",
    "out_of_order": "TerrapinIngress.frer_out_of_order",
    "rogue": "TerrapinIngress.frer_rogue",
    "resets": "TerrapinIngress.frer_resets",
}
R_FRER_LOST = "TerrapinIngress.frer_lost"
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
    "eliminated",
    "no_member",
)
# A protected channel's member streams and multicast group (constants.p4, "Protection").
FRER_HISTORY_MAX = 64

__all__ = [
    "AGGREGATE_KEY",
    "A_ADMIT",
    "A_ADMIT_JUMPING",
    "A_ADMIT_MOVING",
    "A_ANSWER_ARP",
    "A_FROM_TRUNK",
    "A_PIN",
    "A_RECOVER_COPY",
    "A_RELAY_COPY",
    "A_REPLICATE",
    "A_ROUTE",
    "A_SEND_COPY",
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
    "FRER_COUNTERS",
    "FRER_HISTORY_MAX",
    "MAX_AGGREGATES",
    "MAX_CHANNELS",
    "M_AGGREGATE_METERS",
    "PACKET_OUT_DIRECT",
    "PACKET_OUT_PIPELINE",
    "QUEUES_PER_PORT",
    "R_FRER_LOST",
    "R_MAX_DELAY",
    "R_MAX_DEPTH",
    "SELECTOR_KEY",
    "T_AGGREGATES",
    "T_ARP",
    "T_CHANNELS",
    "T_CHANNEL_PATHS",
    "T_COPIES",
    "T_MEMBER_STREAMS",
    "T_PORT_MACS",
    "T_PROTECTIONS",
    "T_QUEUE_BOUNDS",
    "T_ROUTES",
    "T_TRUNK_PORTS",
    "member_streams",
    "multicast_group",
    "queue_cell",
]


def member_streams(channel_id: int) -> tuple[int, int]:
    """The member streams of a protected channel's two paths (its R-TAG's member field)."""
    return 2 * channel_id + 1, 2 * channel_id + 2


def multicast_group(channel_id: int) -> int:
    """The multicast group a protected channel's first switch replicates it through."""
    return channel_id + 1


def queue_cell(port: int, priority: int) -> int:
    """The index of (port, priority) in the per-queue counters and registers (QUEUE_CELLS)."""
    return port * QUEUES_PER_PORT + priority
