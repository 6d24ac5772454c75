// Test program for the P4Runtime server's action profiles, action
// selectors and parser value sets. A frame whose EtherType is in the
// parser value set custom_types gets its custom header parsed. Then:
// table by_dst (action profile dst_profile) sets the egress port by
// destination MAC, through a member; table by_src (action selector
// src_selector, hashing the custom header's flow id) rewrites the source
// MAC through a member of a group; a frame without the custom header
// keeps its source MAC.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header custom_t {
    bit<16> flow;
    bit<8>  tag;
}

struct headers_t {
    ethernet_t ethernet;
    custom_t   custom;
}

struct vs_key_t {
    bit<16> ether_type;
}

struct metadata_t { }

parser ProfParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    value_set<vs_key_t>(4) custom_types;
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            custom_types: parse_custom;
            default: accept;
        }
    }
    state parse_custom {
        pkt.extract(hdr.custom);
        transition accept;
    }
}

control ProfVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ProfIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    action_profile(4) dst_profile;
    action_selector(HashAlgorithm.crc16, 8, 16) src_selector;

    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action set_src(bit<48> mac) { hdr.ethernet.src = mac; }
    action set_tag(bit<8> tag) { hdr.custom.tag = tag; }

    table by_dst {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; drop; }
        implementation = dst_profile;
        size = 16;
    }
    table by_src {
        key = {
            hdr.custom.tag: exact;
            hdr.custom.flow: selector;
        }
        actions = { set_src; set_tag; NoAction; }
        implementation = src_selector;
        size = 16;
    }

    apply {
        by_dst.apply();
        if (hdr.custom.isValid()) {
            by_src.apply();
        }
    }
}

control ProfEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    apply { }
}

control ProfCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ProfDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.custom);
    }
}

V1Switch(ProfParser(), ProfVerify(), ProfIngress(), ProfEgress(),
         ProfCompute(), ProfDeparser()) main;
