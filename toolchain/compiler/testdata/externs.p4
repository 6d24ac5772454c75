// Test program: the v1model externs, annotations and P4Info objects.
#include <core.p4>
#include <v1model.p4>

typedef bit<9> port_t;
type bit<32> IPv4Addr_t;

enum bit<8> Color { RED = 1, GREEN = 2 }
enum Plain { A, B, C }

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> pad;
}

@controller_header("packet_out")
header packet_out_t {
    @id(7) bit<9> egress_port;
    bit<7> pad;
}

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id;
    bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum;
    bit<32> src; bit<32> dst;
    varbit<320> options;
}

header h8 { bit<8> v; }
header h16 { bit<16> v; }
header_union u_t { h8 a; h16 b; }

struct digest_t { bit<48> src; port_t port; }

struct meta_t {
    @field_list(1) bit<32> x;
    bit<32> y;
    bit<2> color;
    bit<16> hval;
    Color c;
    Plain p;
    bit<8> rnd;
}

struct headers_t {
    packet_in_t pin;
    packet_out_t pout;
    ethernet_t eth;
    ipv4_t ipv4;
    u_t u;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) vs;
    state start {
        transition select(sm.ingress_port) {
            255: parse_out;
            default: parse_eth;
        }
    }
    @name("parse_out") state parse_out {
        pkt.extract(hdr.pout);
        transition parse_eth;
    }
    state parse_eth {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x0800: parse_ipv4;
            vs: parse_u;
            0x9000 &&& 0xF000: parse_u;
            0x1000 .. 0x1003: accept;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4, (bit<32>)(((bit<16>)pkt.lookahead<bit<8>>()[3:0] - 5) * 32));
        transition accept;
    }
    state parse_u {
        pkt.extract(hdr.u.a);
        transition accept;
    }
}

control V(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(), { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len,
            hdr.ipv4.id, hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.proto, hdr.ipv4.src,
            hdr.ipv4.dst, hdr.ipv4.options }, hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) regs;
    counter(8, CounterType.packets) pkts;
    direct_counter(CounterType.bytes) dc;
    meter(4, MeterType.packets) mtr;
    direct_meter<bit<2>>(MeterType.bytes) dm;
    action_selector(HashAlgorithm.crc16, 32w64, 32w14) sel;

    action fwd(port_t port) { sm.egress_spec = port; dm.read(meta.color); }
    action fwd2(port_t port, @name("the_mac") bit<48> mac) { sm.egress_spec = port; hdr.eth.dst = mac; }
    action drop() { mark_to_drop(sm); }
    action to_cpu() {
        sm.egress_spec = 255;
        hdr.pin.setValid();
        hdr.pin.ingress_port = sm.ingress_port;
        digest<digest_t>(1, { hdr.eth.src, sm.ingress_port });
    }

    @id(0x02000042)
    table l2 {
        key = { hdr.eth.dst : exact; meta.c : exact; }
        actions = { fwd; drop; to_cpu; }
        counters = dc;
        meters = dm;
        size = 64;
        default_action = drop();
    }
    table ecmp {
        key = { hdr.ipv4.dst : lpm; hdr.ipv4.src : selector; hdr.ipv4.proto : selector; }
        actions = { fwd2; NoAction; }
        implementation = sel;
    }
    table opt {
        key = { hdr.eth.type : optional; hdr.eth.src : range; }
        actions = { NoAction; drop; }
        const entries = {
            (0x0800, 1 .. 10) : drop();
            (_, _) : NoAction();
        }
    }
    apply {
        bit<32> v;
        regs.read(v, 3);
        regs.write(3, v + 1);
        pkts.count((bit<32>)sm.ingress_port[2:0]);
        mtr.execute_meter(2, meta.color);
        hash(meta.hval, HashAlgorithm.crc32, 16w0, { hdr.eth.src, hdr.eth.dst }, 32w65536);
        random(meta.rnd, 1, 100);
        log_msg("port {}", { sm.ingress_port });
        assert(sm.ingress_port != 511);
        if (hdr.pout.isValid()) {
            sm.egress_spec = hdr.pout.egress_port;
            hdr.pout.setInvalid();
            exit;
        }
        meta.c = Color.GREEN;
        meta.p = Plain.B;
        switch (l2.apply().action_run) {
            drop: { return; }
            default: {}
        }

        opt.apply();
        if (meta.x == 7) { clone_preserving_field_list(CloneType.I2E, 5, 1); }
        if (meta.y == 8) { resubmit_preserving_field_list(1); }
        if (hdr.u.isValid()) { truncate(64); }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) { recirculate_preserving_field_list(1); }
    }
}

control C(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len,
            hdr.ipv4.id, hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.proto, hdr.ipv4.src,
            hdr.ipv4.dst, hdr.ipv4.options }, hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
