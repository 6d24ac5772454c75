package types

import (
	"math/big"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/parser"
)

// prelude declares what the test programs use, without the preprocessor.
const prelude = `
error { NoError, PacketTooShort }
match_kind { exact, ternary, lpm, range }
extern packet_in { void extract<T>(out T hdr); T lookahead<T>(); }
extern packet_out { void emit<T>(in T hdr); }
extern reg<T> { reg(bit<32> n); void read(out T r, in bit<32> i); }
extern void random<T>(out T r, in T lo, in T hi);
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);
action NoAction() {}
header h_t { bit<8> a; bit<16> b; int<8> s; }
struct st { h_t h; bool f; bit<4> n; }
enum bit<8> E { X = 1, Y = 7 }
enum P { A, B }
typedef bit<9> port_t;
type bit<32> addr_t;
parser Prs(packet_in p, out st s);
package Pkg(Prs p);
`

// check parses and checks a program whose text follows the prelude, with
// positions counted from the first line after it.
func check(t *testing.T, src string) (*Info, []string) {
	t.Helper()
	full := prelude + "#line 1 \"t.p4\"\n" + src + "\nparser PP(packet_in p, out st s) { state start { transition accept; } }\nPkg(PP()) main;\n"
	prog, perrs := parser.Parse("prelude.p4", full)
	if len(perrs) > 0 {
		t.Fatalf("parse: %v", perrs)
	}
	info, errs := Check(prog)
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return info, out
}

func TestGoodPrograms(t *testing.T) {
	tests := []struct{ name, src string }{
		{"constants and widths", `const bit<8> W = 4; const bit<(W * 2)> x = 8w255; const int big = 1 << 70;`},
		{"implicit casts", `control c(inout st s) { apply { s.h.a = 5; s.h.b = s.h.b + 1; s.h.s = -1; s.n = s.n |+| 3; } }`},
		{"enum to underlying", `control c(inout st s) { apply { if (s.h.a == E.Y) { s.h.a = (bit<8>)E.X; } } }`},
		{"bool logic", `control c(inout st s) { apply { s.f = s.h.isValid() && !s.f || s.h.a > 3; } }`},
		{"slices and concat", `control c(inout st s) { apply { s.h.b = s.h.a ++ s.h.a[7:0]; s.h.a[3:0] = 4w2; } }`},
		{"casts", `control c(inout st s) { apply { s.h.s = (int<8>)s.h.a; s.n = (bit<4>)(bit<1>)s.f; s.f = (bool)1w1; } }`},
		{"functions", `bit<8> f(in bit<8> x, out bit<8> y) { y = x; return x + 1; }
			control c(inout st s) { apply { s.h.a = f(s.h.a, s.h.a); } }`},
		{"tables", `control c(inout st s) {
			action a(bit<8> v) { s.h.a = v; }
			table t { key = { s.h.a : exact; s.n : ternary; } actions = { a; NoAction; }
			          const entries = { (1, 2 &&& 3) : a(4); (_, _) : NoAction(); } default_action = a(1); size = 8; }
			apply { switch (t.apply().action_run) { a: { exit; } default: {} } if (t.apply().miss) { return; } } }`},
		{"externs", `control c(inout st s) { reg<bit<8>>(4) r;
			apply { r.read(s.h.a, 1); random(s.h.a, 1, 10); } }`},
		{"generic method", `parser q(packet_in p, out st s) { state start { p.extract(s.h);
			transition select(p.lookahead<bit<8>>()) { 1: accept; 2 .. 5: reject; default: accept; } } }`},
		{"struct init", `control c(inout st s) { apply { st v = { h = s.h, f = true, n = 1 }; s = v; h_t h = { 1, 2, -3 }; s.h = h; } }`},
		{"loops", `control c(inout st s) { action a() { for (bit<8> i = 0; i < 4; i = i + 1) { if (i == 2) { continue; } s.h.a = i; } } apply { a(); } }`},
		{"sets over a serializable enum key", `header eh { E e; } control c(inout eh x) {
			action a() {}
			table t { key = { x.e : ternary; } actions = { a; }
			          const entries = { E.X : a(); ((bit<8>)E.Y) &&& 0xf0 : a(); E.X &&& E.Y : a(); _ : a(); } }
			table r { key = { x.e : range; } actions = { a; } const entries = { 8w2 .. 8w3 : a(); E.X .. E.Y : a(); } }
			apply { t.apply(); r.apply(); } }`},
		{"invalid header and default initializers", `header_union hu { h_t a; h_t b; } struct two { h_t h; hu u; bit<4> n; }
			control c(inout st s) { apply { s.h = {#}; s.h = (h_t){#}; hu u = {#}; two t = { n = 1, ... }; s = { f = true, ... }; s.h = { a = 1, ... }; s.f = s.h == {#} || {#} != s.h; } }`},
		{"static_assert", `const bool ok = static_assert((bit<8>)E.Y == 7, "E.Y"); const bool ok2 = static_assert(ok);
			control c(inout st s) { apply { static_assert(true); if (ok2) { s.n = 1; } } }`},
		{"generic structs and headers", `struct Pair<T> { T a; T b; } header G<T, U> { T x; U y; }
			struct Outer<T> { Pair<T> p; bit<8> k; }
			control c(inout st s) { apply { Pair<bit<8>> v = { a = 1, b = s.h.a }; s.h.a = v.b; G<bit<4>, bit<4>> g;
				g.setValid(); g.x = 1; Pair<bit<8>> w = v; s.f = v == w; Pair<bool> pb; pb.a = true; } }`},
		{"new type casts", `control c(inout st s) { apply { addr_t x = (addr_t)32w1; bit<32> y = (bit<32>)x; port_t p = 9w3; } }`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := check(t, tc.src)
			if len(errs) > 0 {
				t.Errorf("unexpected errors:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
}

func TestBadPrograms(t *testing.T) {
	// at is the text the error must point at (its first occurrence).
	tests := []struct {
		name, src string
		at        string
		msg       string
	}{
		{"undeclared", "control c(inout st s) { apply { s.h.a = q; } }", "q;", "q: undeclared identifier"},
		{"no such field", "control c(inout st s) { apply { s.h.z = 1; } }", "z =", "has no field z"},
		{"bool to bits", "control c(inout st s) { apply { s.h.a = true; } }", "true", "cannot use a value of type bool where bit<8>"},
		{"width mismatch", "control c(inout st s) { apply { s.h.a = s.h.b; } }", "b;", "cannot use a value of type bit<16>"},
		{"mixed operands", "control c(inout st s) { apply { s.h.a = s.h.a + s.h.b; } }", "+", "cannot combine bit<8> and bit<16>"},
		{"signed shift amount", "control c(inout st s) { apply { s.h.a = s.h.a << s.h.s; } }", "<<", "shift amount must be unsigned"},
		{"bad slice", "control c(inout st s) { apply { s.h.a = s.h.a[9:2]; } }", "[9", "out of range"},
		{"assign to in param", "control c(in st s) { apply { s.n = 1; } }", "s.n", "read-only parameter"},
		{"wrong arity", "bit<8> f(in bit<8> x) { return x; } control c(inout st s) { apply { s.h.a = f(); } }", "f()", "no overload of f takes 0 arguments"},
		{"missing return", "bit<8> f(in bit<8> x) { if (x == 1) { return 2; } } /*end*/", "} /*end*/", "does not return a value on every path"},
		{"not a match kind", "control c(inout st s) { table t { key = { s.n : fuzzy; } actions = {} } apply { t.apply(); } }", "fuzzy", "fuzzy is not a match_kind"},
		{"entry arity", "control c(inout st s) { table t { key = { s.n : exact; } actions = { NoAction; } const entries = { (1, 2) : NoAction(); } } apply { t.apply(); } }", "(1, 2)", "entry has 2 keys"},
		{"default not in actions", "control c(inout st s) { action a() {} table t { actions = { NoAction; } default_action = a; } apply { t.apply(); } }", "a; }", "not in the actions of table t"},
		{"duplicate declaration", "control c(inout st s) { bit<8> x; bit<8> x; apply { } }", "bit<8> x; apply", "x: duplicate declaration"},
		{"switch label", "control c(inout st s) { table t { actions = { NoAction; } } apply { switch (t.apply().action_run) { nope: { } } } }", "nope", "nope is not an action of table t"},
		{"exit in parser", "parser q(packet_in p, out st s) { state start { exit; } }", "exit", "exit is not allowed in a parser"},
		{"unknown state", "parser q(packet_in p, out st s) { state start { transition nowhere; } }", "nowhere", "nowhere: no such parser state"},
		{"table apply in action", "control c(inout st s) { table t { actions = { NoAction; } } action a() { t.apply(); } apply { a(); } }", "t.apply(); } apply", "tables cannot be applied from an action"},
		{"break outside loop", "control c(inout st s) { apply { break; } }", "break", "break outside a loop"},
		{"bool arithmetic", "control c(inout st s) { apply { s.f = s.f + s.f; } }", "+", "cannot combine bool and bool"},
		{"ternary types", "control c(inout st s) { apply { s.h.a = s.f ? s.h.a : s.h.b; } }", "?", "different types bit<8> and bit<16>"},
		{"invalid into bits", "control c(inout st s) { apply { s.h.a = {#}; } }", "{#}", "cannot use a value of type {#} where bit<8>"},
		{"invalid into struct", "control c(inout st s) { apply { s = {#}; } }", "{#}", "cannot use a value of type {#} where st"},
		{"missing field without dots", "control c(inout st s) { apply { s = { f = true }; } }", "{ f", "has no value for field h"},
		{"static_assert false", `control c(inout st s) { apply { static_assert(1 == 2, "one is not two"); } }`, "static_assert(1", "static_assert failed: one is not two"},
		{"static_assert not constant", `control c(inout st s) { apply { static_assert(s.f); } }`, "f)", "not a compile-time constant"},
		{"generic without arguments", "struct Pair<T> { T a; } control c(inout st s) { apply { Pair v; } }", "Pair v", "Pair is generic: it needs type arguments"},
		{"generic arity", "struct Pair<T> { T a; } control c(inout st s) { apply { Pair<bit<8>, bit<8>> v; } }", "Pair<bit<8>,", "expects 1 type arguments, got 2"},
		{"generic header field", "header G<T> { T a; } control c(inout st s) { apply { G<h_t> v; } }", "T a", "headers cannot contain"},
		{"direct apply with constructor parameters", "control k(inout bit<8> x)(bit<8> n) { apply { x = n; } } control c(inout st s) { apply { k.apply(s.h.a); } }", "apply(s.h.a)", "k has constructor parameters"},
		{"direct apply in an action", "control k(inout bit<8> x) { apply { } } control c(inout st s) { action a() { k.apply(s.h.a); } apply { a(); } }", "apply(s.h.a)", "k can only be applied directly in a parser or control"},
		{"unknown named action argument", "control c(inout st s) { action a(bit<8> v) { s.h.a = v; } table t { actions = { a; } default_action = a(w = 1); } apply { t.apply(); } }", "w = 1", "action a has no parameter called w"},
		{"entry without a required argument", "control c(inout st s) { action a(bit<8> v, bit<8> w = 1) { s.h.a = v; } table t { key = { s.h.a : exact; } actions = { a; } const entries = { 1 : a(); } } apply { t.apply(); } }", "a(); }", "action a expects 2 arguments, got 0"},
		{"named entry argument missing", "control c(inout st s) { action a(bit<8> v, bit<8> w = 1) { s.h.a = v; } table t { key = { s.h.a : exact; } actions = { a; } const entries = { 1 : a(w = 2); } } apply { t.apply(); } }", "a(w = 2)", "missing argument for parameter v"},
		{"for-in element type", "header e_t { bit<8> v; } control c(inout st s) { e_t[2] es; apply { for (h_t x in es) { } } }", "for (h_t", "cannot iterate with a h_t over a stack of e_t"},
		{"for-in over a scalar", "control c(inout st s) { apply { for (bit<8> x in s.h.a) { } } }", "a) {", "for-in loops go over a range lo .. hi or a header stack"},
		{"struct containing itself", "struct R { bit<8> a; R r; } control c(inout st s) { apply { R v; } }", "R r;", "R cannot contain itself"},
		{"non-constant width", "control c(inout st s) { apply { bit<(s.h.a)> x; } }", "a)", "compile-time constant"},
		// issue 23: what p4c refuses, as P4_16 defines it
		{"instance in an apply block", "control c(inout st s) { apply { reg<bit<8>>(4) r; } }", "reg<bit<8>>(4) r; }", "r: instances cannot be declared in a control's apply block"},
		{"instance in an action", "control c(inout st s) { action a() { reg<bit<8>>(4) r; } apply { a(); } }", "reg<bit<8>>(4) r; }", "instances cannot be declared in an action"},
		{"instance in a parser state", "parser q(packet_in p, out st s) { state start { reg<bit<8>>(4) r; transition accept; } }", "reg<bit<8>>(4) r; transition", "instances cannot be declared in a parser state"},
		{"control at the top level", "control k(inout bit<8> x) { apply { } } k() top;", "k() top", "top: a control cannot be instantiated at the top level"},
		{"parser in a control", "parser q(packet_in p, out st s) { state start { transition accept; } } control c(inout st s) { q() qi; apply { } }", "q() qi", "a parser cannot be instantiated in a control"},
		{"value set in a control", "control c(inout st s) { value_set<bit<8>>(4) vs; apply { } }", "value_set", "value sets are instantiated in a parser or at the top level"},
		{"switch in an action", "control c(inout st s) { action a() { switch (s.h.a) { 1: { } } } apply { a(); } }", "switch", "switch statements are not allowed in actions"},
		{"two default labels", "control c(inout st s) { action a() { } table t { actions = { a; } } apply { switch (t.apply().action_run) { default: { } default: { } } } }", "switch", "switch has multiple default labels"},
		{"directional int parameter", "control c(inout st s) { action a(in int v) { s.h.a = (bit<8>)v; } apply { a(1); } }", "in int v", "v: parameters of type int must be directionless"},
		{"shift by a new type", "control c(inout st s) { apply { addr_t x = (addr_t)32w1; s.h.b = s.h.b << x; } }", "<< x", "shift amount must be a bit<S> value"},
		{"shift by an enum", "control c(inout st s) { apply { s.h.a = s.h.a << E.X; } }", "<< E", "shift amount must be a bit<S> value"},
		{"block type directions", "control k(in bit<8> x); package K(k c); control kc(inout bit<8> x) { apply { } } K(kc()) other;", "kc()) other", "parameter x is inout, the type's x is in"},
		{"block type parameter types", "control k(inout bit<8> x); package K(k c); control kc(inout bit<16> x) { apply { } } K(kc()) other;", "kc()) other", "parameter x has type bit<16>"},
		{"entries before the key", "control c(inout st s) { action a() { } table t { const entries = { 1 : a(); } key = { s.h.a : exact; } actions = { a; } } apply { t.apply(); } }", "const entries", "entries must come after the table's key"},
		{"defaultonly action in entries", "control c(inout st s) { action a() { } table t { key = { s.h.a : exact; } actions = { @defaultonly a; NoAction; } const entries = { 1 : a(); } } apply { t.apply(); } }", "1 : a()", "action a is @defaultonly in table t"},
		{"tableonly default action", "control c(inout st s) { action a() { } table t { key = { s.h.a : exact; } actions = { @tableonly a; NoAction; } default_action = a; } apply { t.apply(); } }", "default_action", "action a is @tableonly in table t"},
		{"conflicting action names", "control c(inout st s) { @name(\".x\") action a() { } @name(\".x\") action b() { } table t { actions = { a; b; } } apply { t.apply(); } }", "action b", ".x: conflicting control plane name"},
		{"conflicting table names", "control c(inout st s) { @name(\"t\") table t1 { actions = { NoAction; } } @name(\"t\") table t2 { actions = { NoAction; } } apply { t1.apply(); t2.apply(); } }", "table t2", "t: conflicting control plane name"},
		{"conflicting extern names", "control c(inout st s) { @name(\".r\") reg<bit<8>>(4) r1; @name(\".r\") reg<bit<8>>(4) r2; apply { } }", "reg<bit<8>>(4) r2", ".r: conflicting control plane name"},
		{"priorities on an exact key", "control c(inout st s) { action a() { } table t { key = { s.h.a : exact; } actions = { a; } entries = { priority = 1 : 1 : a(); } } apply { t.apply(); } }", "key =", "its key's match kinds (exact, lpm) take no priorities"},
		{"parser that loops forever", "parser q(packet_in p, out st s) { state start { s.n = s.n + 1; transition next; } state next { transition select(s.n) { 1: start; default: next; } } }", "parser q", "parser q never reaches accept or reject"},
		{"constructor parameter with a direction", "control k(inout bit<8> x)(in bit<8> n) { apply { x = n; } }", "in bit<8> n", "n: constructor parameters cannot have a direction"},
		{"exit in a function", "bit<8> f(in bit<8> x) { if (x == 0) { exit; } return x; }", "exit", "exit is not allowed in a function"},
		{"width from an integer", "extern void hm<M>(in M m); control c(inout st s) { apply { hm(8w1); hm(0xFF); } }", "0xFF", "could not infer a width for M from 0xFF"},
		{"negative v1model version", "const bit<32> __v1model_version = -1;", "-1", "expected v1model version to be a non-negative number"},
		{"missing action resolved first", "control c(inout st s) { table t { key = { s.h.a : exact; } actions = { NoAction; } const entries = { (1, 2) : NoAction(); 3 : missing(); } } apply { t.apply(); } }", "missing", "missing: undeclared action"},
		{"select case of another type", "parser q(packet_in p, out st s) { state start { transition select(1w0) { 0w0: accept; } } }", "select(1w0)", "select case at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := check(t, tc.src)
			if len(errs) == 0 {
				t.Fatal("no error reported")
			}
			col := strings.Index(tc.src, tc.at) + 1
			if col == 0 {
				t.Fatalf("test error: %q not in the source", tc.at)
			}
			want := "t.p4:1:" + itoa(col) + ": error: "
			if !strings.HasPrefix(errs[0], want) || !strings.Contains(errs[0], tc.msg) {
				t.Errorf("got  %s\nwant %s...%s", errs[0], want, tc.msg)
			}
		})
	}
}

// TestOneErrorPerMistake: an error does not bring others after it that the
// same mistake caused (the assignment to a field that does not exist is not
// also a value of the wrong type).
func TestOneErrorPerMistake(t *testing.T) {
	for _, src := range []string{
		"control c(inout st s) { apply { s.h.z = 1; } }",
		"control c(inout st s) { apply { s.h.z = s.h.a; } }",
		"control c(inout st s) { apply { s.h.a = s.h.z; } }",
	} {
		if _, errs := check(t, src); len(errs) != 1 {
			t.Errorf("%s: %d errors, want 1:\n%s", src, len(errs), strings.Join(errs, "\n"))
		}
	}
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }

// TestConstantFolding checks compile-time values with P4's wrap-around.
func TestConstantFolding(t *testing.T) {
	tests := []struct {
		expr string
		want int64
	}{
		{"8w200 + 8w100", 44},
		{"8w3 - 8w5", 254},
		{"(int<8>)8w200", -56},
		{"-8s128", -128},
		{"8s127 + 8s1", -128},
		{"8w250 |+| 8w10", 255},
		{"8w5 |-| 8w10", 0},
		{"8s120 |+| 8s10", 127},
		{"4w0xF ++ 4w0x1", 0xF1},
		{"16w0xABCD[11:4]", 0xBC},
		{"(bit<8>)(-1)", 255},
		{"1 << 10", 1024},
		{"(bit<4>)8w0x37", 7},
		{"~8w0x0F", 0xF0},
		{"16w7 / 2", 3},
		{"16w7 % 4", 3},
		{"(bit<8>)E.Y", 7},
	}
	for _, tc := range tests {
		info, errs := check(t, "control c(inout st s) { apply { s.h.b = (bit<16>)("+tc.expr+"); } }")
		if len(errs) > 0 {
			t.Errorf("%s: %v", tc.expr, errs)
			continue
		}
		// the value of the expression inside the outer (bit<16>) cast
		var got *big.Int
		for e := range info.Values {
			c, ok := e.(*ast.CastExpr)
			if !ok {
				continue
			}
			if bt, ok := c.Type.(*ast.BitType); ok {
				if lit, ok := bt.Width.(*ast.IntLit); ok && lit.Value.Int64() == 16 {
					got, _ = info.Values[c.X].(*big.Int)
				}
			}
		}
		if got == nil {
			t.Errorf("%s: not folded", tc.expr)
			continue
		}
		if got.Int64() != tc.want {
			t.Errorf("%s = %v, want %d", tc.expr, got, tc.want)
		}
	}
}

func TestInfoRecordsUses(t *testing.T) {
	info, errs := check(t, "control c(inout st s) { bit<8> v; apply { v = s.h.a; } }")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var sawVar, sawParam bool
	for id, d := range info.Uses {
		switch d.(type) {
		case *ast.VarDecl:
			sawVar = sawVar || id.Name == "v"
		case *ast.Param:
			sawParam = sawParam || id.Name == "s"
		}
	}
	if !sawVar || !sawParam {
		t.Errorf("uses not recorded: var %v, param %v", sawVar, sawParam)
	}
	if info.Main == nil || info.Main.Name != "main" {
		t.Errorf("main not found")
	}
}

// TestSpecializationNames: a generic struct's specializations are named as
// p4c names them (base, then "_" and each argument without <, >, spaces).
func TestSpecializationNames(t *testing.T) {
	info, errs := check(t, `struct Pair<T> { T a; T b; } header G<T, U> { T x; U y; } struct Outer<T> { Pair<T> p; bit<8> k; }
		control c(inout st s) { apply { Pair<bit<8>> v; Pair<bit<8>> w; G<bit<4>, int<4>> g; Pair<tuple<bit<8>, bool>> pt;
			Outer<bit<16>> o; o.p.a = 16w1; s.h.b = o.p.a; } }`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	count := map[string]int{}
	for _, st := range info.Structs {
		count[st.Name]++
	}
	for _, st := range info.Structs {
		if st.Name == "Outer_bit16" {
			if p, ok := st.Fields[0].Type.(*Struct); !ok || p.Name != "Pair_bit16" {
				t.Errorf("Outer<bit<16>>.p has type %v, want Pair_bit16", st.Fields[0].Type)
			}
		}
	}
	for _, want := range []string{"Pair_bit8", "G_bit4_int4", "Pair_tuplebit8_bool", "Outer_bit16", "Pair_bit16"} {
		if count[want] != 1 {
			t.Errorf("%s declared %d times (structs %v)", want, count[want], count)
		}
	}
	if count["Pair"] != 0 {
		t.Errorf("the generic template itself must not be a type of the program")
	}
}
