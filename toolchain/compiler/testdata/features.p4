// Test program: most of the P4_16 language features terrapin-p4c supports.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
header w_t { bit<16> x; }
struct inner_t { h_t ih; bit<4> n; bool f; }
struct headers { h_t h; h_t[4] hs; w_t w; }
struct pair_t { bit<8> l; bit<8> r; }
struct meta { pair_t p; error err; bit<8> idx; tuple<bit<8>, bool> tp; inner_t inner; }
enum Op { ADD, SUB, NOP }
const h_t CH = { 8w1, 8w2 };
const pair_t CP = { l = 3, r = 4 };

pair_t swap(in pair_t p) { return { p.r, p.l }; }
h_t mk(bit<8> a) { h_t r; r.setValid(); r.a = a; r.b = a + 1; return r; }
bool both(in h_t x, in h_t y) { return x == y; }

parser P(packet_in pk, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    value_set<pair_t>(4) vs;
    state start {
        pk.extract(hdr.h);
        m.err = error.NoError;
        transition select(hdr.h.a, hdr.h.b) {
            (1, 2): stack;
            vs: stack;
            (0 .. 7, _): inner;
            default: accept;
        }
    }
    state stack {
        pk.extract(hdr.hs.next);
        transition select(hdr.hs.last.a) { 0: stack; default: inner; }
    }
    state inner {
        pk.extract(m.inner.ih);
        verify(m.inner.ih.a != 0xFF, error.NoMatch);
        bit<16> look = pk.lookahead<w_t>().x;
        m.idx = look[7:0];
        transition accept;
    }
}
control V(inout headers hdr, inout meta m) { apply { } }
control Sub(inout h_t h, in bit<8> k)(bit<8> bias) {
    action add() { h.a = h.a + k + bias; }
    table st { key = { h.b : exact; } actions = { add; NoAction; } default_action = add(); }
    apply { if (h.isValid()) { st.apply(); } }
}
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    Sub(8w10) s1;
    action inner_act(bit<8> v) { hdr.h.b = v; }
    action outer_act() { inner_act(5); if (hdr.h.a == 0) { exit; } }
    apply {
        Op op = hdr.h.a == 1 ? Op.ADD : Op.NOP;
        switch (op) {
            Op.ADD:
            Op.SUB: { hdr.h.b = hdr.h.b + 1; }
            default: { }
        }
        m.p = swap(CP);
        m.p = swap(m.p);
        hdr.w = hdr.h.a > 3 ? (w_t){ 16w7 } : (w_t){ 16w9 };
        if (both(hdr.h, CH)) { hdr.h = mk(9); }
        hdr.hs[m.idx & 3] = hdr.h;
        hdr.hs[m.idx & 3].b = 4;
        hdr.hs.push_front(1);
        hdr.hs.pop_front(2);
        m.tp = { 8w1, true };
        if (m.tp[1]) { hdr.h.a = m.tp[0]; }
        hdr.h.a = hdr.h.a[7:4] ++ hdr.h.b[3:0];
        m.inner.n = (bit<4>)(bit<1>)m.inner.f;
        if (sm.parser_error == error.NoMatch || m.err != error.NoError) { outer_act(); }
        s1.apply(hdr.h, 8w2);
        hdr.h.b = (bit<8>)((int<8>)hdr.h.b >> 1);
        hdr.h.a = hdr.h.a |-| 8w200;
    }
}
struct gpair_t<T> { T l; T r; }
const bool v1model_ok = static_assert(V1MODEL_VERSION >= 20180101, "v1model too old");
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        gpair_t<bit<8>> g = { l = hdr.h.a, ... };
        hdr.h.b = g.r;
        if (hdr.w == {#} && v1model_ok) { hdr.w = { x = 1, ... }; } else { hdr.w = {#}; }
        m.inner = { n = 2, ... };
    }
}
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); p.emit(hdr.hs); p.emit(hdr.w); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
