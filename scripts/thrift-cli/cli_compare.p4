// The thrift-cli suite's program (docs/switch.md, "BMv2's Thrift runtime"):
// one object of every kind simple_switch_CLI drives on v1model — tables of
// each match kind runtime_CLI.py reads (exact, lpm, ternary, range), a
// table with const entries, a table whose entries may age (support_timeout),
// direct and indexed counters and meters, a register, an action profile, an
// action selector, a parser value set, and two custom CRCs (crc16_custom,
// crc32_custom) whose results a register keeps.
// Compiled by terrapin-p4c and loaded into both switches; the commands in
// commands/*.txt are run against each and their outputs compared.
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

struct metadata_t {
    bit<8>  color;
    bit<8>  dcolor;
    bit<16> h16;
    bit<32> h32;
}

parser CliParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
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

control CliVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control CliIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) acl_counter;
    direct_meter<bit<8>>(MeterType.bytes) flow_meter;
    counter(16, CounterType.packets_and_bytes) port_counter;
    meter(16, MeterType.packets) port_meter;
    register<bit<32>>(16) last_length;
    register<bit<32>>(2) hashes;  // the custom CRCs of the last packet's addresses
    action_profile(4) dst_profile;
    action_selector(HashAlgorithm.crc16, 8, 16) src_selector;

    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action set_mcast(bit<16> group) { sm.mcast_grp = group; }
    action acl_permit() { acl_counter.count(); }
    action acl_deny() { acl_counter.count(); mark_to_drop(sm); }
    action policed_forward(bit<9> port) {
        flow_meter.read(meta.dcolor);
        sm.egress_spec = port;
    }
    action set_src(bit<48> mac) { hdr.ethernet.src = mac; }
    action mark_type(bit<16> t) { hdr.ethernet.ether_type = t; }
    action set_tag(bit<8> tag) { hdr.custom.tag = tag; }

    table l2 {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; set_mcast; drop; }
        default_action = drop();
        size = 64;
    }
    table acl {
        key = { hdr.ethernet.ether_type: ternary; }
        actions = { acl_permit; acl_deny; }
        default_action = acl_permit();
        counters = acl_counter;
    }
    table flows {
        key = { hdr.ethernet.src: exact; }
        actions = { policed_forward; NoAction; }
        default_action = NoAction();
        meters = flow_meter;
    }
    table src_rewrite {
        key = { hdr.ethernet.src: lpm; }
        actions = { set_src; NoAction; }
        default_action = NoAction();
    }
    table type_range {
        key = { hdr.ethernet.ether_type: range; }
        actions = { mark_type; NoAction; }
        default_action = NoAction();
    }
    table fixed {
        key = { hdr.ethernet.ether_type: exact; }
        actions = { mark_type; NoAction; }
        const default_action = NoAction();
        const entries = {
            0x0800 : mark_type(0x0801);
        }
    }
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

    table aged {
        key = { hdr.custom.flow: exact; }
        actions = { set_tag; NoAction; }
        default_action = NoAction();
        support_timeout = true;
        size = 8;
    }

    apply {
        port_counter.count((bit<32>)sm.ingress_port);
        port_meter.execute_meter((bit<32>)sm.ingress_port, meta.color);
        last_length.write((bit<32>)sm.ingress_port, sm.packet_length);
        hash(meta.h16, HashAlgorithm.crc16_custom, (bit<16>)0,
             { hdr.ethernet.dst, hdr.ethernet.src }, (bit<32>)65536);
        hash(meta.h32, HashAlgorithm.crc32_custom, (bit<32>)0,
             { hdr.ethernet.dst, hdr.ethernet.src }, (bit<64>)4294967296);
        hashes.write(0, (bit<32>)meta.h16);
        hashes.write(1, meta.h32);
        l2.apply();
        acl.apply();
        flows.apply();
        src_rewrite.apply();
        type_range.apply();
        fixed.apply();
        by_dst.apply();
        if (hdr.custom.isValid()) {
            by_src.apply();
            aged.apply();
        }
    }
}

control CliEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    apply { }
}

control CliCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control CliDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.custom);
    }
}

V1Switch(CliParser(), CliVerify(), CliIngress(), CliEgress(),
         CliCompute(), CliDeparser()) main;
