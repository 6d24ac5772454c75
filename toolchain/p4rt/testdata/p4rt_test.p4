// Test program for the P4Runtime server: one object of every kind the
// server exposes (tables of each match kind, direct and indexed counters
// and meters, a register, a digest, controller headers for packet I/O).
// Forwarding: a PacketOut goes to the port its header names; other frames
// are forwarded by destination MAC (table l2), may be sent to the CPU
// (to_cpu, with the ingress port in the packet_in header) or multicast.
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    packet_in_t  packet_in;
    packet_out_t packet_out;
    ethernet_t   ethernet;
}

struct metadata_t {
    bit<8> color;
    bit<8> dcolor;
}

struct learn_t {
    bit<48> src;
    bit<9>  port;
}

parser TestParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control TestVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TestIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) acl_counter;
    direct_meter<bit<8>>(MeterType.bytes) flow_meter;
    counter(16, CounterType.packets_and_bytes) port_counter;
    meter(16, MeterType.packets) port_meter;
    register<bit<32>>(16) last_length;

    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action to_cpu() { sm.egress_spec = CPU_PORT; }
    action set_mcast(bit<16> group) { sm.mcast_grp = group; }
    action acl_permit() { acl_counter.count(); }
    action acl_deny() { acl_counter.count(); mark_to_drop(sm); }
    action policed_forward(bit<9> port) {
        flow_meter.read(meta.dcolor);
        sm.egress_spec = port;
    }
    action set_src(bit<48> mac) { hdr.ethernet.src = mac; }
    action mark_type(bit<16> t) { hdr.ethernet.ether_type = t; }

    table l2 {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; to_cpu; set_mcast; drop; }
        default_action = drop();
        size = 64;
    }
    table acl {
        key = {
            hdr.ethernet.ether_type: ternary;
            sm.ingress_port: optional;
        }
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

    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        port_counter.count((bit<32>)sm.ingress_port);
        port_meter.execute_meter((bit<32>)sm.ingress_port, meta.color);
        last_length.write((bit<32>)sm.ingress_port, sm.packet_length);
        digest<learn_t>(1, { hdr.ethernet.src, sm.ingress_port });
        if (meta.color == 2) {
            mark_to_drop(sm);
            return;
        }
        l2.apply();
        acl.apply();
        flows.apply();
        if (meta.dcolor == 2) {
            mark_to_drop(sm);
        }
        src_rewrite.apply();
        type_range.apply();
        fixed.apply();
    }
}

control TestEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
        }
    }
}

control TestCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TestDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(TestParser(), TestVerify(), TestIngress(), TestEgress(),
         TestCompute(), TestDeparser()) main;
