package compiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/stf"
)

// behaviourSkeleton is a v1model program whose header h has four bytes;
// the parser runs PARSER after extracting h, ingress runs INGRESS and
// sends the packet back out of port 0.
const behaviourSkeleton = `#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
header u_t { bit<8> v; }
struct headers { h_t h; u_t u; }
struct meta { bit<8> x; }
DECLS
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); PARSER transition select(hdr.h.a) { 0xff: more; default: accept; } }
    state more { p.extract(hdr.u); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action sb(bit<8> v) { hdr.h.b = v; }
    action sc(bit<8> v) { hdr.h.c = v; }
    LOCALS
    apply { sm.egress_spec = 0; INGRESS }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`

// TestProgramBehaviour compiles small programs, runs them on the engine and
// checks their packets with STF scripts: language features whose meaning
// is more than a successful compilation.
func TestProgramBehaviour(t *testing.T) {
	tests := []struct {
		name, decls, parser, ingress, script string
		locals                               string
	}{
		{"return in a function called from a parser",
			`bit<8> clamp(in bit<8> v) { if (v > 100) { return 100; } if (v == 7) { return 70; } return v + 1; }`,
			`hdr.h.b = clamp(hdr.h.a); m.x = clamp(hdr.h.c);`, `hdr.h.d = m.x;`,
			"packet 0 c8000500\nexpect 0 c8640506$\npacket 0 07000700\nexpect 0 07460746$\npacket 0 01006400\nexpect 0 01026465$", ``},
		{"return from both branches in a parser",
			`bit<8> pick(in bit<8> v) { if (v == 0) { return 1; } else { return 2; } }`,
			`hdr.h.b = pick(hdr.h.a);`, ``,
			"packet 0 00000000\nexpect 0 00010000$\npacket 0 ff000000 33\nexpect 0 ff020000 33$", ``},
		{"invalid header assignment and comparison", ``, ``,
			`if (hdr.u == {#}) { hdr.h.b = 1; } else { hdr.u = {#}; }`,
			"packet 0 00000000\nexpect 0 00010000$\npacket 0 ff000000 33\nexpect 0 ff000000$", ``},
		{"initializer with default values", ``, ``,
			`hdr.u = { v = 9, ... }; hdr.h = { a = hdr.h.a, ... };`,
			"packet 0 05060708\nexpect 0 05000000 09$", ``},
		{"generic struct", `struct pair_t<T> { T l; T r; }`, ``,
			`pair_t<bit<8>> p = { l = hdr.h.c, r = hdr.h.d }; hdr.h.c = p.r; hdr.h.d = p.l;`,
			"packet 0 01020304\nexpect 0 01020403$", ``},
		{"static_assert", `const bool ok = static_assert(V1MODEL_VERSION >= 20180101, "old v1model");`, ``,
			`if (ok) { hdr.h.a = 0x55; }`,
			"packet 0 01020304\nexpect 0 55020304$", ``},
		// P4_16 §15.1: each call site gets its own instance, so the two
		// applications of Bump each add one
		{"direct invocation of a control and a parser",
			`control Bump(inout bit<8> x) { apply { x = x + 1; } }
			 parser Sub(packet_in p, inout bit<8> v) { state start { v = v + 2; transition accept; } }`,
			`Sub.apply(p, hdr.h.c);`, `Bump.apply(hdr.h.b); Bump.apply(hdr.h.b);`,
			"packet 0 01020304\nexpect 0 01040504$", ``},
		// P4_16 §8.18: stack.last is the element at lastIndex, also as a
		// whole header (p4c's issue1607-bmv2)
		{"a header assigned from stack.last", ``,
			`u_t[2] st; p.extract(st.next); p.extract(st.next); u_t x; x = st.last; hdr.h.b = x.v; hdr.h.c = x.isValid() ? 8w1 : 8w0;`, ``,
			"packet 0 01020304 aabbcc\nexpect 0 01bb0104 cc$", ``},
		// a lookahead of a struct holding a header stack fills the stack's
		// headers in order and makes them valid (p4c's issue2465-bmv2)
		{"lookahead of a struct with a header stack",
			`struct la_t { u_t[2] s; bit<8> z; }`,
			`la_t l = p.lookahead<la_t>(); hdr.h.b = l.s[1].v; hdr.h.c = l.z; hdr.h.d = l.s[0].isValid() ? l.s[0].v : 8w0;`, ``,
			"packet 0 01020304 aabbcc\nexpect 0 01bbccaa aabbcc$", ``},
		// one table node serves applies that continue the same way (p4c's
		// issue986-1-bmv2); a computed key is computed again before each
		{"a table applied in both branches of an if", ``, ``,
			`if (hdr.h.c == 0) { twice.apply(); } else { hdr.h.d = 0; twice.apply(); } hdr.h.c = hdr.h.b + 1;`,
			"packet 0 01000000\nexpect 0 01111200$\npacket 0 01000501\nexpect 0 01111200$\npacket 0 02000000\nexpect 0 02333400$\npacket 0 05000000\nexpect 0 05222300$",
			`table twice { key = { hdr.h.a + hdr.h.d : exact; } actions = { sb; }
			   const entries = { 1 : sb(0x11); 2 : sb(0x33); } default_action = sb(0x22); }`},
		// the return type names a type parameter declared after it
		{"generic function returning its type parameter",
			`T pick<T>(in bool c, in T a, in T b) { if (c) { return a; } return b; }`, ``,
			`hdr.h.b = pick(hdr.h.a == 1, hdr.h.c, hdr.h.d);`,
			"packet 0 01000304\nexpect 0 01030304$\npacket 0 02000304\nexpect 0 02040304$", ``},
		// named arguments bind by name, whatever their order
		{"named arguments in entries and default actions", ``, ``, `named.apply();`,
			"packet 0 01000000\nexpect 0 01020300$\npacket 0 07000000\nexpect 0 07040500$",
			`action sbc(bit<8> b, bit<8> c) { hdr.h.b = b; hdr.h.c = c; }
			 table named { key = { hdr.h.a : exact; } actions = { sbc; }
			   const entries = { 0x01 : sbc(c = 3, b = 2); } const default_action = sbc(c = 5, b = 4); }`},
		// left-out action arguments take the parameters' default values
		{"default values of action parameters in entries", ``, ``, `defaults.apply();`,
			"packet 0 01000000\nexpect 0 01070900$\npacket 0 02000000\nexpect 0 02070300$\npacket 0 03000000\nexpect 0 03050900$\npacket 0 04000000\nexpect 0 04010200$",
			`action dflt(bit<8> v = 7, bit<8> w = 9) { hdr.h.b = v; hdr.h.c = w; }
			 table defaults { key = { hdr.h.a : exact; } actions = { dflt; }
			   const entries = { 0x01 : dflt(); 0x02 : dflt(w = 3); 0x03 : dflt(5); } default_action = dflt(1, 2); }`},
		// constructor arguments bind by name, left-out ones to defaults
		{"named and default constructor arguments of a control",
			`control Sub(inout bit<8> x)(bit<8> a, bit<8> b = 1) { apply { x = x + a - b; } }`, ``,
			`s1.apply(hdr.h.b); s2.apply(hdr.h.c);`,
			"packet 0 00101010\nexpect 0 00141910$",
			`Sub(b = 2, a = 6) s1; Sub(10) s2;`},
		{"named constructor arguments of an extern", ``, ``,
			`named_cnt.count((bit<32>)hdr.h.a);`,
			"packet 0 03000000\nexpect 0 03000000$\ncheck_counter named_cnt(3) packets == 1",
			`counter(type = CounterType.packets, size = 32w4) named_cnt;`},
		// every element in index order, as a copy; continue skips to the next
		{"for-in over a header stack", `header e_t { bit<8> v; }`, ``,
			`e_t[3] st; st[0].setValid(); st[0].v = hdr.h.a; st[2].setValid(); st[2].v = hdr.h.c;
			 bit<8> acc = 0; bit<8> n = 0;
			 for (e_t e in st) { n = n + 1; if (!e.isValid()) { continue; } acc = acc + e.v; e.v = 0; }
			 hdr.h.b = acc + st[0].v; hdr.h.d = n;`,
			"packet 0 01000500\nexpect 0 01070503$", ``},
		// an instance created in a constructor argument, and one type
		// passed to an instance of itself (not recursion)
		{"controls as constructor arguments",
			`control ct(inout bit<8> x);
			 control Inc(inout bit<8> x) { apply { x = x + 1; } }
			 control Dbl(inout bit<8> x)(ct c) { apply { x = x << 1; c.apply(x); } }`, ``,
			`d3.apply(hdr.h.b); d4.apply(hdr.h.c);`,
			"packet 0 00010100\nexpect 0 00050300$",
			`Inc() i1; Dbl(i1) d2; Dbl(d2) d3; Dbl(Inc()) d4;`},
		// P4_16 §8.18: an element chosen by a run-time index past the
		// stack's end is not written (and BMv2 must not be asked to
		// dereference it: it aborts); a condition on it takes the else
		// branch (p4c's gauntlet_index_10-bmv2)
		{"stack elements chosen at run time, in range and not", ``, ``,
			`st[0].setValid(); st[0].v = 1; st[1].setValid(); st[1].v = 2;
			 st[hdr.h.a].v = hdr.h.b;
			 if (st[hdr.h.a].v == 9) { hdr.h.b = 0xaa; } else { hdr.h.b = 0xbb; }
			 hdr.h.c = st[0].v; hdr.h.d = st[st[0].v].v;`,
			"packet 0 00010000\nexpect 0 00bb0102$\npacket 0 01090000\nexpect 0 01aa0109$\npacket 0 05090000\nexpect 0 05bb0102$",
			`u_t[2] st;`},
		{"stack elements chosen by an action parameter", ``, ``,
			`st[0].setValid(); st[0].v = 1; st[1].setValid(); st[1].v = 2; at.apply(); hdr.h.c = st[0].v; hdr.h.d = st[1].v;`,
			"packet 0 00000000\nexpect 0 00010702$\npacket 0 01000000\nexpect 0 01010107$\npacket 0 02000000\nexpect 0 02020102$",
			`u_t[2] st;
			 action put(bit<8> i) { st[i].v = 7; if (st[i].isValid() && st[i].v == 7) { hdr.h.b = 1; } else { hdr.h.b = 2; } }
			 table at { key = { hdr.h.a : exact; } actions = { put; }
			   const entries = { 0x00 : put(0); 0x01 : put(1); 0x02 : put(9); } }`},
		{"entry priorities", ``, ``, `small.apply(); large.apply();`,
			"packet 0 01000000\nexpect 0 01024000$\npacket 0 11000000\nexpect 0 11011000$\npacket 0 21000000\nexpect 0 21013000$",
			// smallest wins in small, largest (the default) in large;
			// an entry without a priority continues from the previous one
			`table small { key = { hdr.h.a : ternary; } actions = { sb; } largest_priority_wins = false;
			   entries = { priority = 10: 0x00 &&& 0x00 : sb(1); priority = 5: 0x01 &&& 0xff : sb(2); } }
			 table large { key = { hdr.h.a : ternary; } actions = { sc; } priority_delta = 2;
			   entries = { priority = 10: 0x01 &&& 0xff : sc(0x20); 0x21 &&& 0xff : sc(0x30); priority = 5: 0x00 &&& 0x00 : sc(0x10);
			               priority = 20: 0x01 &&& 0xff : sc(0x40); } }`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runBehaviour(t, tc.decls, tc.parser, tc.ingress, tc.locals, tc.script)
		})
	}
}

// runBehaviour fills behaviourSkeleton, compiles it, loads the JSON on the
// engine and runs the STF script on it.
func runBehaviour(t *testing.T, decls, parser, ingress, locals, script string) {
	t.Helper()
	src := strings.NewReplacer("DECLS", decls, "PARSER", parser, "INGRESS", ingress, "LOCALS", locals).Replace(behaviourSkeleton)
	if dir := os.Getenv("BEHAVIOUR_CORPUS"); dir != "" {
		// the case as an STF corpus program, to run the same script on
		// another switch: make conformance CORPUS=dir VIA=p4runtime SWITCH=bmv2
		name := strings.Map(func(r rune) rune {
			if ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') || r == '-' {
				return r
			}
			return '_'
		}, t.Name())
		if err := os.WriteFile(filepath.Join(dir, name+".p4"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".stf"), []byte(script+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": src}.read})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	pl, err := engine.Load(res.JSON, engine.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	cmds, err := stf.ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	prog := &stf.Program{Name: "main", JSON: res.JSON, Model: pl}
	b := stf.NewEngineBackend()
	if err := b.Start(prog); err != nil {
		t.Fatal(err)
	}
	if err := stf.Run(b, prog, cmds, nil); err != nil {
		t.Error(err)
	}
}

// TestRunTimeStackIndexesLeaveBMv2NoDereference: simple_switch aborts on a
// dereference_header_stack past the stack's end, so no statement or
// condition that names an element by a run-time index may reach the JSON
// as one: in a control, in an action, in its conditions, as a header
// assignment, as validity, and as an extern's argument.
func TestRunTimeStackIndexesLeaveBMv2NoDereference(t *testing.T) {
	locals := `u_t[3] st; u_t one; register<bit<8>>(4) r;
	  action put(bit<8> i) {
	    st[i].setValid(); st[i] = one; r.write(0, st[i].v);
	    if (st[i].isValid()) { st[i].v = 1; } else { st[i].setInvalid(); } }
	  table at { key = { hdr.h.a : exact; } actions = { put; } }`
	ingress := `at.apply(); st[hdr.h.b].v = st[hdr.h.c].v + st[st[0].v].v;
	  if (st[hdr.h.a].isValid() && st[hdr.h.d].v == 1) { hdr.h.b = 1; }`
	src := strings.NewReplacer("DECLS", "", "PARSER", "", "INGRESS", ingress, "LOCALS", locals).Replace(behaviourSkeleton)
	res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": src}.read})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	if n := strings.Count(string(res.JSON), "dereference_header_stack"); n != 0 {
		t.Errorf("the JSON dereferences a stack by a run-time index %d times", n)
	}
	if _, err := engine.Load(res.JSON, engine.Options{}); err != nil {
		t.Fatalf("load: %v", err)
	}
}
