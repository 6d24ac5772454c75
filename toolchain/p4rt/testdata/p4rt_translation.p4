// Test program for P4Runtime type translation (translate_test.go). Every
// place P4Runtime translates holds a 9-bit port: table keys of each match
// kind (one table declares an entry), action parameters of a direct table
// (whose default action has one), of an action selector and of a digest,
// a parser value set, the controller headers. The P4 uses plain bit<9>,
// so that the BMv2 JSON is the device's whatever the compiler does with
// @p4runtime_translation; the tests give the P4Info what p4c writes for a
// translated type (spec §8.3: a type_name, the controller's bitwidth).
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
    bit<9> port;
    bit<8> trusted;
}

struct learn_t {
    bit<9>  port;
    bit<48> src;
}

struct trusted_t {
    bit<9> port;
}

parser TrParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t sm) {
    value_set<trusted_t>(4) trusted_ports;
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
        transition select(sm.ingress_port) {
            trusted_ports: mark_trusted;
            default: accept;
        }
    }
    state mark_trusted {
        meta.trusted = 1;
        transition accept;
    }
}

control TrVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TrIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    action_selector(HashAlgorithm.crc16, 8, 16) port_selector;

    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action to_cpu() { sm.egress_spec = CPU_PORT; }
    action mark(bit<16> t) { hdr.ethernet.ether_type = t; }

    table port_fwd {
        key = { sm.ingress_port: exact; }
        actions = { forward; to_cpu; drop; }
        default_action = forward(7);
    }
    table port_acl {
        key = {
            sm.ingress_port: ternary;
            hdr.ethernet.ether_type: ternary;
        }
        actions = { forward; drop; NoAction; }
        default_action = NoAction();
    }
    table port_lpm {
        key = { meta.port: lpm; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    table port_range {
        key = { meta.port: range; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    table port_opt {
        key = {
            meta.port: optional;
            hdr.ethernet.dst: exact;
        }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    table port_fixed {
        key = { meta.port: exact; }
        actions = { forward; NoAction; }
        default_action = NoAction();
        const entries = {
            3 : forward(4);
        }
    }
    table ecmp {
        key = {
            hdr.ethernet.dst: exact;
            hdr.ethernet.src: selector;
        }
        actions = { forward; NoAction; }
        implementation = port_selector;
        size = 16;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        meta.port = sm.ingress_port;
        digest<learn_t>(1, { sm.ingress_port, hdr.ethernet.src });
        port_fwd.apply();
        port_acl.apply();
        port_lpm.apply();
        port_range.apply();
        port_opt.apply();
        port_fixed.apply();
        ecmp.apply();
        if (sm.egress_spec == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
        }
    }
}

control TrEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t sm) {
    apply { }
}

control TrCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TrDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(TrParser(), TrVerify(), TrIngress(), TrEgress(), TrCompute(),
         TrDeparser()) main;
