package compiler

import "testing"

// TestCopyInCopyOut runs calls whose in, inout and out arguments alias
// storage the callee also reaches another way, and checks the packet
// against P4_16's calling convention (§6.8): arguments are evaluated and
// in/inout ones copied in left to right before the body runs; out/inout
// ones are copied back left to right when it ends (also on exit); a body
// writing the argument's storage directly is overwritten by the copy-out;
// an in argument keeps the value it had at the call.
//
// Every packet enters as h = 01 02 03 04 and leaves on port 0 unless a
// case says otherwise.
func TestCopyInCopyOut(t *testing.T) {
	tests := []struct {
		name                         string
		decls, parser, locals, apply string
		want                         string // h after ingress, as STF expects it
	}{
		// actions called directly
		{name: "action: unnamed inout header, body writes it directly",
			locals: `action a(inout h_t x) { hdr.h.a = 9; }`, apply: `a(hdr.h);`,
			want: "01020304"},
		{name: "action: inout header written both ways",
			locals: `action a(inout h_t x) { hdr.h.a = 9; x.b = 8; hdr.h.c = 7; }`, apply: `a(hdr.h);`,
			want: "01080304"},
		{name: "action: inout field, direct write after the parameter's",
			locals: `action a(inout bit<8> x) { x = 5; hdr.h.a = 9; }`, apply: `a(hdr.h.a);`,
			want: "05020304"},
		{name: "action: inout field read back after a direct write",
			locals: `action a(inout bit<8> x) { hdr.h.a = 9; hdr.h.b = x; }`, apply: `a(hdr.h.a);`,
			want: "01010304"},
		{name: "action: in argument keeps its value at the call",
			locals: `action a(in bit<8> x) { hdr.h.a = 9; hdr.h.b = x; }`, apply: `a(hdr.h.a);`,
			want: "09010304"},
		{name: "action: in expression keeps its value at the call",
			locals: `action a(in bit<8> x) { hdr.h.a = 9; hdr.h.b = x; }`, apply: `a(hdr.h.a + 1);`,
			want: "09020304"},
		{name: "action: out field overwrites a direct write",
			locals: `action a(out bit<8> x) { x = 5; hdr.h.a = 9; }`, apply: `a(hdr.h.a);`,
			want: "05020304"},
		{name: "action: unwritten out header leaves it invalid",
			locals: `action a(out u_t x) { hdr.u.setValid(); hdr.u.v = 7; }`, apply: `a(hdr.u);`,
			want: "01020304"},
		{name: "action: two inout parameters, the later copy-out wins",
			locals: `action a(inout bit<8> x, inout bit<8> y) { y = 7; }`, apply: `a(hdr.h.a, hdr.h.a);`,
			want: "07020304"},
		{name: "action: two inout parameters, the unnamed one is copied out last",
			locals: `action a(inout bit<8> y, inout bit<8> x) { y = 7; }`, apply: `a(hdr.h.a, hdr.h.a);`,
			want: "01020304"},
		{name: "action: header and its field",
			locals: `action a(inout h_t x, inout bit<8> y) { x.a = 6; y = 7; x.b = y; }`, apply: `a(hdr.h, hdr.h.a);`,
			want: "07070304"},
		{name: "action: a nested call writes the argument directly",
			locals: `action inner() { hdr.h.a = 9; } action a(inout h_t x) { inner(); }`, apply: `a(hdr.h);`,
			want: "01020304"},
		{name: "action: copy-out on exit",
			locals: `action a(inout bit<8> x, inout h_t y) { x = 5; hdr.h.a = 9; hdr.h.b = 9; exit; }`, apply: `a(hdr.h.a, hdr.h);`,
			want: "01020304"},
		{name: "action: control local variable",
			locals: `bit<8> v = 3; action a(inout bit<8> x) { v = 9; }`, apply: `a(v); hdr.h.a = v;`,
			want: "03020304"},
		{name: "action: header validity through setInvalid",
			locals: `action a(inout h_t x) { hdr.h.setInvalid(); }`, apply: `a(hdr.h);`,
			want: "01020304"},
		{name: "action: standard metadata written directly",
			locals: `action a(inout standard_metadata_t s) { sm.egress_spec = 1; }`, apply: `a(sm);`,
			want: "01020304"},
		{name: "action: standard metadata named both ways",
			locals: `action a(inout standard_metadata_t s) { sm.egress_spec = 1; s.egress_spec = s.egress_spec; }`, apply: `a(sm);`,
			want: "01020304"},
		{name: "action: mark_to_drop on a copied standard metadata",
			locals: `action a(inout standard_metadata_t s) { sm.egress_spec = 1; mark_to_drop(s); }`,
			apply:  `a(sm); if (sm.egress_spec == 511) { sm.egress_spec = 0; hdr.h.a = 0x55; }`,
			want:   "55020304"},
		// functions (top-level: they reach the caller only through arguments)
		{name: "function: in argument aliasing an inout one",
			decls: `bit<8> f(in bit<8> x, inout bit<8> y) { y = 7; return x; }`, apply: `hdr.h.b = f(hdr.h.a, hdr.h.a);`,
			want: "07010304"},
		{name: "function: unnamed inout copied out after a written alias",
			decls: `void f(inout bit<8> y, inout bit<8> x) { y = 7; }`, apply: `f(hdr.h.a, hdr.h.a);`,
			want: "01020304"},
		{name: "function: out aliasing an in argument",
			decls: `void f(in bit<8> x, out bit<8> y) { y = x + 1; y = y + x; }`, apply: `f(hdr.h.b, hdr.h.b);`,
			want: "01050304"},
		// table actions with arguments bound in the actions list
		{name: "table action: unnamed inout header, body writes it directly",
			locals: `action a(inout h_t x) { hdr.h.a = 9; }
			         table t { actions = { a(hdr.h); } default_action = a(hdr.h); }`,
			apply: `t.apply();`, want: "01020304"},
		{name: "table action: in argument keeps its value",
			locals: `action a(in bit<8> x) { hdr.h.a = 9; hdr.h.b = x; }
			         table t { actions = { a(hdr.h.a); } default_action = a(hdr.h.a); }`,
			apply: `t.apply();`, want: "09010304"},
		// control apply calls
		{name: "control: in expression and an inout header it reads",
			decls:  `control Sub(inout h_t x, in bit<8> v) { apply { x.a = 9; x.b = v; } }`,
			locals: `Sub() c;`, apply: `c.apply(hdr.h, hdr.h.a + 1);`,
			want: "09020304"},
		{name: "control: in field and an inout header holding it",
			decls:  `control Sub(inout h_t x, in bit<8> v) { apply { x.a = 9; x.b = v; } }`,
			locals: `Sub() c;`, apply: `c.apply(hdr.h, hdr.h.a);`,
			want: "09010304"},
		{name: "control: two inout arguments, copy-out order",
			decls:  `control Sub(inout bit<8> y, inout bit<8> x) { apply { y = 7; } }`,
			locals: `Sub() c;`, apply: `c.apply(hdr.h.a, hdr.h.a);`,
			want: "01020304"},
		{name: "control: struct argument built from fields",
			decls: `struct s_t { bit<8> p; bit<8> q; }
			        control Sub(inout h_t x, in s_t s) { apply { x.a = 9; x.b = 9; x.c = s.p; x.d = s.q; } }`,
			locals: `Sub() c;`, apply: `c.apply(hdr.h, { hdr.h.a, hdr.h.b });`,
			want: "09090102"},
		// parser apply calls
		{name: "parser: in expression and an inout header it reads",
			decls:  `parser S(packet_in p, inout h_t x, in bit<8> v) { state start { x.a = 9; x.c = v; transition accept; } }`,
			parser: `S.apply(p, hdr.h, hdr.h.a + 1);`,
			want:   "09020204"},
		{name: "parser: two inout arguments, copy-out order",
			decls:  `parser S(packet_in p, inout bit<8> y, inout bit<8> x) { state start { y = 7; transition accept; } }`,
			parser: `S.apply(p, hdr.h.c, hdr.h.c);`,
			want:   "01020304"},
		// extern methods and functions: arguments are read before results are written
		{name: "extern: register read into the field holding its index",
			locals: `register<bit<8>>(8) r;`,
			apply:  `r.write(1, 0x44); r.read(hdr.h.a, (bit<32>)hdr.h.a); hdr.h.b = hdr.h.a;`,
			want:   "44440304"},
		{name: "extern: hash whose result is among its data",
			apply: `hash(hdr.h.a, HashAlgorithm.identity, 8w0, { hdr.h.a, hdr.h.b }, 16w0x100);`,
			want:  "02020304"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runBehaviour(t, tc.decls, tc.parser, tc.apply, tc.locals,
				"packet 0 01020304\nexpect 0 "+tc.want+"$")
		})
	}
}
