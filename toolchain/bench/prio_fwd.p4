// Forwarding for the priority-latency benchmark (prio-latency.sh): the
// destination MAC picks the port (const entries, so no controller is
// needed) and an IPv4 packet marked DSCP EF (46) goes to priority queue 6,
// as an admitted channel does in p4src/terrapin.p4; everything else is best
// effort (queue 0).
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct metadata_t {}

parser PrioParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control PrioVerify(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control PrioIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std) {
    action drop() {
        mark_to_drop(std);
    }
    action to_port(bit<9> port) {
        std.egress_spec = port;
    }
    table l2 {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { to_port; drop; }
        default_action = drop();
        const entries = {
            0x027700000001: to_port(1);
            0x027700000002: to_port(2);
            0x027700000003: to_port(3);
            0x027700000010: to_port(4);
        }
    }
    apply {
        l2.apply();
        if (hdr.ipv4.isValid() && hdr.ipv4.dscp == 46) {
            std.priority = 6;
        }
    }
}

control PrioEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t std) {
    apply {}
}

control PrioCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control PrioDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(PrioParser(), PrioVerify(), PrioIngress(), PrioEgress(),
         PrioCompute(), PrioDeparser()) main;
