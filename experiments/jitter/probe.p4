// The jitter probe (experiments/jitter/measure.py): forwards every frame from ports 1 and 3 to
// port 2 and from port 2 to port 1, serves probe packets at priority 6 (as an admitted
// channel) and everything else at 0, and writes into each probe packet what the switch's clock
// said about it, so that the receiver can compare it with when the sender sent it:
//
//   ingress_global_timestamp   when the switch stamped the packet: the time its window
//                              policers and meters judge it by (BMv2: when its receive
//                              thread took the frame; terrapin-switch: the kernel's receive
//                              time)
//   egress_global_timestamp    when egress began
//   enq_timestamp, deq_timedelta   its time in the egress queue
//
// A probe packet is UDP to PROBE_PORT carrying topo/video.py's 32-byte packet header (magic
// "TVID", frame, index, ...) and then 24 bytes the switch fills in. The UDP checksum is zeroed
// (allowed over IPv4), since the payload changes. Everything else is forwarded untouched, so
// the background traffic costs the switch a parse and a forward, as a routed packet does.

#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> PROTO_UDP = 17;
const bit<16> PROBE_PORT = 5099;

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4> version;
    bit<4> ihl;
    bit<8> tos;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// topo/video.py's HEADER, "!4sIHHIQQ": left as the sender wrote it.
header sender_h {
    bit<32> magic;
    bit<32> frame;
    bit<16> index;
    bit<16> count;
    bit<32> frame_bytes;
    bit<64> frame_start_ns;
    bit<64> sent_ns;
}

// What the switch writes (µs of its own clock; deq_timedelta in µs).
header stamps_h {
    bit<64> ingress_us;
    bit<64> egress_us;
    bit<32> enq_us;
    bit<32> deq_delta_us;
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h ipv4;
    udp_h udp;
    sender_h sender;
    stamps_h stamps;
}

struct metadata_t {}

parser ProbeParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            PROBE_PORT: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.sender);
        packet.extract(hdr.stamps);
        transition accept;
    }
}

control ProbeVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control ProbeIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.ingress_port == 2) {
            standard_metadata.egress_spec = 1;
        } else {
            standard_metadata.egress_spec = 2;
        }
        if (hdr.stamps.isValid()) {
            hdr.stamps.ingress_us = (bit<64>)standard_metadata.ingress_global_timestamp;
            hdr.udp.checksum = 0;
            // As an admitted channel: above the background's best effort.
            standard_metadata.priority = 6;
        }
    }
}

control ProbeEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.stamps.isValid()) {
            hdr.stamps.egress_us = (bit<64>)standard_metadata.egress_global_timestamp;
            hdr.stamps.enq_us = standard_metadata.enq_timestamp;
            hdr.stamps.deq_delta_us = standard_metadata.deq_timedelta;
        }
    }
}

control ProbeComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control ProbeDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.sender);
        packet.emit(hdr.stamps);
    }
}

V1Switch(ProbeParser(), ProbeVerifyChecksum(), ProbeIngress(), ProbeEgress(),
         ProbeComputeChecksum(), ProbeDeparser()) main;
