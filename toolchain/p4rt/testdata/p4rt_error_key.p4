// A table keyed on values of type error: the parser's error and one a
// control sets. p4c's P4Info gives such match fields no bitwidth.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct meta { error e; }

parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action set_b(bit<8> v) { hdr.h.b = v; }
    table by_error {
        key = { sm.parser_error : exact; m.e : ternary; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.a == 1) { m.e = error.NoMatch; } else { m.e = error.NoError; }
        by_error.apply();
    }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
