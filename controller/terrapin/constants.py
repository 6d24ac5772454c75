"""Numbers shared with the data plane and the host agents.

The single source of truth for the protocol numbers is docs/protocol.md; tests/test_docs_agree.py
parses that file and checks these values against it, so the two cannot drift apart.
"""

from __future__ import annotations

import enum

# BRIEF "Shared constants": simple_switch_grpc --cpu-port 255; v1model 9-bit ports.
CPU_PORT = 255
DROP_PORT = 511
# p4src CHANNEL_IN_*: where a channel's packet came from as `channels` matches it, beside the
# trunk ports (docs/dataplane.md "Channels").
CHANNEL_IN_HOST = 512
CHANNEL_IN_RECOVERED = 513

# v1model standard_metadata.priority, 0 lowest (BMv2 --priority-queues 8).
BEST_EFFORT_PRIORITY = 0
PROTOCOL_PRIORITY = 7
ADMITTED_PRIORITIES = range(1, 7)
QUEUES_PER_PORT = 8

# RFC 4727 reserves ICMP type 253 for experiments; seed 000 §4.1.2 extends ICMP the same way.
ICMP_TYPE_RESERVATION = 253
IP_PROTO_ICMP = 1
IP_PROTO_TCP = 6
IP_PROTO_UDP = 17
IP_PROTO_XTP = 36

PROTOCOL_VERSION = 1
MESSAGE_LENGTH = 56
# A message with a window policer carries its parameters in a trailer after the 56 bytes
# (flags bit 2; docs/protocol.md "Policer trailer").
POLICER_TRAILER_LENGTH = 16

# The data plane counts Ethernet frame bytes (14-byte header, no FCS); envelopes count IPv4 bytes.
ETHERNET_HEADER = 14
# A protected channel's copies carry an R-TAG between its first switch and its last (6 bytes:
# docs/dataplane.md "Protection"): the meters of its transit hops count them.
RTAG_BYTES = 6
# p4src MOVING_SLOTS: the moving window's ring of timestamps per channel.
MOVING_SLOTS = 32
# A message as a frame on the wire: Ethernet + IPv4 20 + the message (the protocol's envelope at
# level 7 is counted in these).
CONTROL_FRAME_BYTES = ETHERNET_HEADER + 20 + MESSAGE_LENGTH


class MessageCode(enum.IntEnum):
    """The seven messages of seed 000 §4.1.2 (Figure 15), as ICMP codes."""

    REQUEST_ADMIT = 1
    REQUEST_ACCEPT = 2
    REQUEST_DENIED = 3
    REQUEST_STATUS = 4
    REPORT_STATUS = 5
    NOTIFY_CLOSE = 6
    RECVD_CLOSE = 7


class DenialReason(enum.IntEnum):
    """The `reason` byte of REQUEST_DENIED: which constraint failed.

    The shortfall field carries by how much, in the unit named here.
    """

    NONE = 0
    BUFFER = 1  # Σσ + σ < B at the priority level (seed 000 §4.1.1.2); bytes
    RATE = 2  # Σρ + ρ < R, the port's reservable rate (seed 000 §4.1.1.2); bytes/s
    LEVEL_DELAY = 3  # a level's static-priority bound would exceed a promise (seeds 001/004); µs
    LINK_CAPACITY = 4  # Σρ < C, the line rate, for the static-priority bound to exist; bytes/s
    CLASS_SHARE = 5  # the class's share of the line rate (seed 003); bytes/s
    PEAK_POLICING = 6  # peak-policed class asks for a burst above one packet (seed 003); bytes
    BEST_EFFORT_FLOOR = 7  # best effort keeps its reserve (seed 002); bytes/s
    END_TO_END_DELAY = 8  # the requested end-to-end bound cannot be met; µs
    RATE_GRANULARITY = 9  # rate needs a credit period below the timer tick (seed 000); µs
    NO_ROUTE = 10  # no configured path to the destination
    DESTINATION_DENIED = 11  # the destination host refused (seed 000 Figure 15)
    CONTEXT_CONFLICT = 12  # (initiator, context) already names a different channel
    INVALID_REQUEST = 13  # a field is out of range (priority, zero rate, ...)
    SWITCH_ERROR = 14  # programming a switch failed; everything was rolled back
    PACKET_SIZE = 15  # max_packet above what the port carries; bytes
    HOLD_LIMIT = 16  # the initiator already has too many requests held; requests
    # NOTIFY_CLOSE from a router: the channel's path went down (a trunk or a switch) and no
    # other path admits it; it is down, and is set up again when a path does.
    PATH_DOWN = 17
    # A protected (1+1) channel needs two paths that share no trunk; there are none now.
    NO_DISJOINT_PATHS = 18
