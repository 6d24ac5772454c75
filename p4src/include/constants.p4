// Numbers shared by the data plane, the controller and the tests.
//
// This file is the single source of truth: the controller's Python constants are
// tested against it (controller tests parse the `const` lines below), and docs/dataplane.md
// quotes it. Keep one `const <type> NAME = VALUE;` per line so that parse stays trivial.

#ifndef TERRAPIN_CONSTANTS_P4
#define TERRAPIN_CONSTANTS_P4

// ---- Ports (9-bit v1model port numbers) -------------------------------------------------
// simple_switch_grpc --cpu-port 255: PacketOut arrives from, and PacketIn leaves to, this port.
const bit<9> CPU_PORT = 255;
// Where a channel's packet came from, as the `channels` table matches it (meta.channel_in): the
// trunk port it arrived on, or one of these two, beyond any 9-bit port number. A packet from a
// port the controller did not name as a trunk (`trunk_ports`) comes from the host side; a copy
// the last switch's sequence recovery kept comes from recovery, whichever trunk brought it.
const bit<10> CHANNEL_IN_HOST = 512;
const bit<10> CHANNEL_IN_RECOVERED = 513;

// ---- Priorities: v1model standard_metadata.priority selects one of 8 strict-priority
// queues per port (simple_switch --priority-queues 8); 0 is served last.
const bit<3> PRIORITY_BEST_EFFORT = 0;
// Admitted channels use levels 1..6 (the controller's admission tests allocate them).
const bit<3> PRIORITY_CHANNEL_MIN = 1;
const bit<3> PRIORITY_CHANNEL_MAX = 6;
// The reservation protocol (seed 000 §4.1.2) and the switch's own ARP answers ride the top.
const bit<3> PRIORITY_RESERVATION = 7;
const bit<32> QUEUES_PER_PORT = 8;

// ---- EtherTypes and IP protocols ---------------------------------------------------------
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP = 0x0806;
const bit<16> ETHERTYPE_VLAN = 0x8100;
// The controller's link probes (IEEE 802's local experimental EtherType 1): sent out of every
// trunk port by PacketOut and handed back to the controller by the switch at the other end,
// which is how it knows the trunk carries traffic (docs/controller.md, "Trunks").
const bit<16> ETHERTYPE_LINK_PROBE = 0x88B5;
// IEEE 802.1CB's redundancy tag (R-TAG): a protected channel's frames between its first and
// last switch carry one (docs/dataplane.md, "Protection").
const bit<16> ETHERTYPE_RTAG = 0xF1C1;
const bit<8> IP_PROTO_ICMP = 1;
const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;
// XTP 4.0 rides directly on IPv4 (seed 000 §3.2; IANA protocol 36).
const bit<8> IP_PROTO_XTP = 36;

// ---- ARP (RFC 826, Ethernet/IPv4 only) -----------------------------------------------------
const bit<16> ARP_HW_ETHERNET = 1;
const bit<16> ARP_OP_REQUEST = 1;
const bit<16> ARP_OP_REPLY = 2;

// ---- Reservation protocol: ICMP type 253 (RFC 4727 experimental), docs/protocol.md -------
const bit<8> ICMP_TYPE_RESERVATION = 253;
const bit<8> RESERVATION_VERSION = 1;
const bit<8> RESV_REQUEST_ADMIT = 1;
const bit<8> RESV_REQUEST_ACCEPT = 2;
const bit<8> RESV_REQUEST_DENIED = 3;
const bit<8> RESV_REQUEST_STATUS = 4;
const bit<8> RESV_REPORT_STATUS = 5;
const bit<8> RESV_NOTIFY_CLOSE = 6;
const bit<8> RESV_RECVD_CLOSE = 7;

// ---- PacketOut modes (packet_out.through_pipeline) -----------------------------------------
const bit<1> PACKET_OUT_DIRECT = 0;
const bit<1> PACKET_OUT_PIPELINE = 1;

// ---- What an admitted channel's entry does with traffic beyond its envelope ---------------
const bit<1> EXCESS_DROP = 0;
const bit<1> EXCESS_DEMOTE = 1;

// ---- Window policers (seed 000 §2.2.2; docs/dataplane.md "Window policers") ---------------
// An admitted channel's entry picks its policer by its action: admit (the trTCM meter, the
// default), admit_jumping_window or admit_moving_window. The moving window keeps a ring of
// MOVING_SLOTS timestamps per channel, cell = channel_id * MOVING_SLOTS + slot.
const bit<32> MOVING_SLOTS = 32;
const bit<32> MOVING_RING_CELLS = 524288;
// admit_jumping_window's count_packets: what the window's limit counts.
const bit<1> WINDOW_COUNTS_BYTES = 0;
const bit<1> WINDOW_COUNTS_PACKETS = 1;

// ---- Protection: 802.1CB frame replication and elimination (docs/dataplane.md "Protection")
// A protected channel's two copies travel as member streams 2 * channel_id + 1 and + 2 (the
// R-TAG's member field, the egress_rid of their replicas at the first switch); its first switch
// replicates through multicast group channel_id + 1. The last switch's sequence recovery keeps
// a history of at most FRER_HISTORY_MAX numbers per channel.
const bit<32> FRER_HISTORY_MAX = 64;

// ---- Meter colours, as v1model's meter externs report them (RFC 2698) ---------------------
const bit<2> METER_GREEN = 0;
const bit<2> METER_YELLOW = 1;
const bit<2> METER_RED = 2;

// ---- Indices of the `drops` counter: why the switch discarded a packet -------------------
const bit<32> DROP_MALFORMED = 0;
const bit<32> DROP_BAD_CHECKSUM = 1;
const bit<32> DROP_UNSUPPORTED = 2;
const bit<32> DROP_NO_ROUTE = 3;
const bit<32> DROP_TTL_EXPIRED = 4;
const bit<32> DROP_ARP_UNANSWERED = 5;
const bit<32> DROP_POLICED = 6;
// A protected channel's copy its last switch's sequence recovery discarded: a duplicate, or a
// number outside the history window (802.1CB's rogue packet).
const bit<32> DROP_ELIMINATED = 7;
// A tagged frame whose member stream this switch has no entry for.
const bit<32> DROP_NO_MEMBER = 8;
const bit<32> DROP_REASONS = 10;

// ---- Indices of the `demoted_claims` counter: priority claims ignored for lack of an
// admission (seed 000: only admitted traffic may leave best effort).
const bit<32> CLAIM_XTP_SORT = 0;
const bit<32> CLAIM_DSCP = 1;
const bit<32> CLAIM_KINDS = 2;

// ---- Sizes ---------------------------------------------------------------------------------
const bit<32> MAX_CHANNELS = 16384;
// Two per protected channel: its copies at its first switch, its member streams at its last.
const bit<32> MAX_MEMBER_STREAMS = 32768;
const bit<32> MAX_AGGREGATES = 64;
const bit<32> MAX_ROUTES = 4096;
const bit<32> MAX_ARP_ANSWERS = 1024;
const bit<32> MAX_PORTS = 512;
// One telemetry cell per (port, queue): index = port * 8 + priority.
const bit<32> QUEUE_CELLS = 4096;

// ---- Queueing delay against the admitted bound (docs/dataplane.md, "Delay bands") ----------
// The controller gives each (port, queue) that carries admitted channels the delay bound its
// admission test computed; egress counts every packet of that queue in one of four bands of
// its wait: up to a quarter of the bound, up to half, up to the bound, over it.
// queue_delay_bands index = (port * 8 + priority) * DELAY_BANDS + band.
const bit<32> DELAY_BAND_QUARTER = 0;
const bit<32> DELAY_BAND_HALF = 1;
const bit<32> DELAY_BAND_WITHIN = 2;
const bit<32> DELAY_BAND_OVER = 3;
const bit<32> DELAY_BANDS = 4;
const bit<32> DELAY_BAND_CELLS = 16384;

#endif  // TERRAPIN_CONSTANTS_P4
