// Test program for the device's arrival-time tests (TestMeterJudgesArrivals):
// frames of EtherType 0x88b5 from a port listed in `police` go to the port the
// entry names, through the entry's direct meter (bytes); the frame carries back
// the colour and standard_metadata.ingress_global_timestamp.
//
// Regenerate the JSON after editing (from toolchain/device/testdata):
//   ../../../build/bin/terrapin-p4c --target bmv2 --arch v1model -o arrival_meter.json arrival_meter.p4
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

// The device tests' frame layout: a sequence number, then what the
// switch writes back.
header probe_t {
    bit<32> seq;
    bit<8>  color;
    bit<48> ingressTs;
}

struct headers_t {
    ethernet_t ethernet;
    probe_t    probe;
}

struct metadata_t {
    bit<2> color;
}

parser P(packet_in pkt, out headers_t hdr, inout metadata_t meta,
         inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88b5: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control V(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control I(inout headers_t hdr, inout metadata_t meta,
          inout standard_metadata_t std) {
    direct_meter<bit<2>>(MeterType.bytes) envelope;

    action forward(bit<9> port) {
        std.egress_spec = port;
        envelope.read(meta.color);
    }
    action drop() {
        envelope.read(meta.color);
        mark_to_drop(std);
    }
    table police {
        key = { std.ingress_port: exact; }
        actions = { forward; drop; }
        meters = envelope;
        default_action = drop();
    }
    apply {
        if (hdr.probe.isValid()) {
            police.apply();
            hdr.probe.color = (bit<8>)meta.color;
            hdr.probe.ingressTs = std.ingress_global_timestamp;
        } else {
            mark_to_drop(std);
        }
    }
}

control E(inout headers_t hdr, inout metadata_t meta,
          inout standard_metadata_t std) {
    apply {}
}

control C(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
