// Test program for P4Runtime idle timeouts: table hosts ages its entries
// (support_timeout), keyed by source MAC as a learning switch's would be;
// table routes does not.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t ethernet;
}

struct metadata_t { }

parser AgeingParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control AgeingVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control AgeingIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table hosts {
        key = { hdr.ethernet.src: exact; }
        actions = { forward; drop; }
        default_action = drop();
        support_timeout = true;
    }
    table routes {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; NoAction; }
        default_action = NoAction();
    }
    apply {
        hosts.apply();
        routes.apply();
    }
}

control AgeingEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t sm) {
    apply { }
}

control AgeingCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control AgeingDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); }
}

V1Switch(AgeingParser(), AgeingVerify(), AgeingIngress(), AgeingEgress(),
         AgeingCompute(), AgeingDeparser()) main;
