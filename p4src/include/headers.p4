// Header and metadata types. Field layouts are drawn in docs/dataplane.md.

#ifndef TERRAPIN_HEADERS_P4
#define TERRAPIN_HEADERS_P4

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9> port_t;

// Prepended by the switch to every packet it sends to the controller (P4Runtime PacketIn
// metadata). Padded to whole bytes because BMv2 moves headers in bytes.
@controller_header("packet_in")
header packet_in_h {
    port_t ingress_port;
    bit<7> _pad;
}

// Prepended by the controller to every packet it injects (P4Runtime PacketOut metadata).
// through_pipeline = PACKET_OUT_DIRECT: send unchanged out of egress_port;
// PACKET_OUT_PIPELINE: ignore egress_port and route the packet like one that arrived.
@controller_header("packet_out")
header packet_out_h {
    port_t egress_port;
    bit<1> through_pipeline;
    bit<6> _pad;
}

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16> ether_type;
}

// IEEE 802.1Q tag; ether_type is the type of what follows the tag.
header vlan_tag_h {
    bit<3> pcp;
    bit<1> dei;
    bit<12> vid;
    bit<16> ether_type;
}

// IEEE 802.1CB R-TAG (after EtherType ETHERTYPE_RTAG), 6 bytes. 802.1CB leaves the first 16
// bits reserved; here they name the member stream, the one of the channel's two paths this copy
// travels, which is what transit switches forward by. seq is the channel's sequence number,
// given by its first switch; ether_type is the type of what follows (IPv4).
header rtag_h {
    bit<16> member;
    bit<16> seq;
    bit<16> ether_type;
}

// RFC 826 for Ethernet hardware and IPv4 protocol addresses (28 bytes).
header arp_h {
    bit<16> hw_type;
    bit<16> proto_type;
    bit<8> hw_addr_len;
    bit<8> proto_addr_len;
    bit<16> opcode;
    mac_addr_t sender_hw_addr;
    ipv4_addr_t sender_proto_addr;
    mac_addr_t target_hw_addr;
    ipv4_addr_t target_proto_addr;
}

// RFC 791 fixed part (20 bytes); the options follow in ipv4_options_h.
header ipv4_h {
    bit<4> version;
    bit<4> ihl;
    bit<6> dscp;
    bit<2> ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// (ihl - 5) 32-bit words of IPv4 options: at most 40 bytes (ihl = 15).
header ipv4_options_h {
    varbit<320> data;
}

// XTP 4.0 common header, 32 bytes (DESIGN.md "Data plane"; seed 000 §3.2).
// sort is the sender's priority claim (larger = more urgent); key names the connection.
header xtp_h {
    bit<64> key;
    bit<32> cmd;
    bit<32> dlen;
    bit<16> check;
    bit<16> sort;
    bit<32> sync;
    bit<64> seq;
}

header tcp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4> data_offset;
    bit<4> reserved;
    bit<8> flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// The 4 bytes every ICMP message starts with (RFC 792).
header icmp_h {
    bit<8> type;
    bit<8> code;
    bit<16> checksum;
}

// The rest of a reservation protocol message: bytes 4..55 of the fixed 56-byte ICMP
// message of docs/protocol.md (the first 4 are icmp_h). REPORT_STATUS records follow as
// payload and are not parsed.
header reservation_h {
    bit<8> version;
    bit<8> flags;
    bit<16> hops;
    bit<32> context;
    ipv4_addr_t initiator;
    ipv4_addr_t destination;
    bit<8> protocol;
    bit<8> priority;
    bit<8> reason;
    bit<8> reserved;
    bit<64> flow_key;
    bit<32> rate;
    bit<32> burst;
    bit<32> avg_idle_us;
    bit<32> max_packet;
    bit<32> delay_us;
    bit<32> shortfall;
}

struct headers_t {
    packet_in_h packet_in;
    packet_out_h packet_out;
    ethernet_h ethernet;
    vlan_tag_h vlan;
    rtag_h rtag;
    arp_h arp;
    ipv4_h ipv4;
    ipv4_options_h ipv4_options;
    xtp_h xtp;
    tcp_h tcp;
    udp_h udp;
    icmp_h icmp;
    reservation_h reservation;
}

struct metadata_t {
    // Bytes in front of the IPv4 header (PacketOut header, Ethernet, 802.1Q), so that the
    // parser can check the IPv4 total length against what actually arrived.
    bit<32> l3_offset;
    // The channel selector of docs/protocol.md: the XTP key, or src_port << 16 | dst_port
    // for UDP and TCP, or 0.
    bit<64> flow_key;
    bit<16> l4_dst_port;
    // Set when ingress routed the packet, so egress rewrites its source MAC.
    bit<1> routed;
    // What the matching channel or aggregate entry said, and the colour its meter gave.
    bit<2> color;
    bit<16> channel_id;
    bit<3> channel_priority;
    // Where the packet came from, for `channels` (CHANNEL_IN_HOST, a trunk port, or
    // CHANNEL_IN_RECOVERED).
    bit<10> channel_in;
    bit<1> on_yellow;
    bit<1> on_red;
    bit<8> aggregate_id;
    bit<3> aggregate_priority;
    // The last switch's sequence recovery kept this copy (1) or eliminated it (0).
    bit<1> keep_copy;
}

// Parser errors of our own; any parser error drops the packet (ingress, DROP_MALFORMED).
error {
    Ipv4BadVersion,
    Ipv4BadHeaderLength,
    Ipv4BadTotalLength,
    ArpNotEthernetIpv4,
    ReservationBadVersion,
    ReservationBadCode
}

#endif  // TERRAPIN_HEADERS_P4
