package lower

import (
	"os"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/parser"
	"github.com/terrapin/terrapin/toolchain/p4/preproc"
	"github.com/terrapin/terrapin/toolchain/p4/types"
	"github.com/terrapin/terrapin/toolchain/p4include"
)

const skeleton = `#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; }
header_union u_t { h_t x; h_t y; }
struct headers { h_t h; h_t[3] hs; u_t u; }
struct meta { bit<8> m; bool flag; }
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition select(hdr.h.a) { 1: more; default: accept; } }
    state more { p.extract(hdr.hs.next); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    INGRESS
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`

func lowerSrc(t *testing.T, ingress string) (*ir.Program, []string) {
	t.Helper()
	return lowerProgram(t, strings.Replace(skeleton, "INGRESS", ingress, 1))
}

// lowerProgram lowers a whole program.
func lowerProgram(t *testing.T, src string) (*ir.Program, []string) {
	t.Helper()
	text, errs := preproc.Run("t.p4", preproc.Config{Builtin: p4include.Files,
		ReadFile: func(path string) ([]byte, error) {
			if path == "t.p4" {
				return []byte(src), nil
			}
			return nil, os.ErrNotExist
		}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	prog, errs := parser.Parse("t.p4", text)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	info, errs := types.Check(prog)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	res, errs := Lower(info, Options{SourceFile: "t.p4"})
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return res.Program, msgs
}

func table(p *ir.Program, name string) *ir.Table {
	for _, pl := range p.Pipelines {
		for _, t := range pl.Tables {
			if t.Name == name {
				return t
			}
		}
	}
	return nil
}

func TestTables(t *testing.T) {
	p, errs := lowerSrc(t, `
    action set(bit<8> v) { hdr.h.b = v; }
    @name("renamed") table t {
        key = { hdr.h.a : exact; hdr.h.c & 0xff0 : ternary @name("masked"); hdr.h.a + hdr.h.b : exact @name("sum"); hdr.h.isValid() : exact; }
        actions = { set; }
        const entries = { (1, 0x10 &&& 0xf0, 3, true) : set(4); (_, _, 5, false) : set(6) @priority(9); }
    }
    apply { t.apply(); }`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tb := table(p, "I.renamed")
	if tb == nil {
		t.Fatal("table I.renamed (its @name, qualified by the control) not found")
	}
	if len(tb.Actions) != 2 || tb.Actions[1].Action.Name != "NoAction" || !tb.Actions[1].DefaultOnly {
		t.Errorf("without default_action, NoAction must be added as the default-only default: %+v", tb.Actions)
	}
	if tb.Default == nil || tb.Default.Action.Name != "NoAction" {
		t.Errorf("default: %+v", tb.Default)
	}
	names := []string{}
	for _, k := range tb.Key {
		names = append(names, k.Name)
	}
	if strings.Join(names, ",") != "hdr.h.a,masked,sum,hdr.h.$valid$" {
		t.Errorf("key names: %v", names)
	}
	if tb.Key[1].Mask == nil || tb.Key[1].Mask.Int64() != 0xff0 {
		t.Errorf("a field under a constant mask should match with a mask: %+v", tb.Key[1])
	}
	if f, ok := tb.Key[2].Expr.(*ir.FieldRef); !ok || f.Header != "scalars" {
		t.Errorf("a computed key goes through a scalar field: %+v", tb.Key[2].Expr)
	}
	if _, ok := tb.Key[3].Expr.(*ir.Valid); !ok {
		t.Errorf("isValid() keys match the validity bit: %+v", tb.Key[3].Expr)
	}
	if len(tb.Entries) != 2 || tb.Entries[0].Priority != 1 || tb.Entries[1].Priority != 9 {
		t.Errorf("entry priorities: first entry 1, @priority(9) kept")
	}
	if k := tb.Entries[1].Keys[0]; !k.Wildcard {
		t.Errorf("_ in an exact... key should be a wildcard: %+v", k)
	}
	// the key temporary is computed before the table runs
	pl := p.Pipelines[0]
	init, ok := pl.Init.(*ir.Table)
	if !ok || !init.Hidden || init.BaseNext != ir.Node(tb) {
		t.Errorf("a generated table computing the key must precede the apply")
	}
}

func TestControlFlow(t *testing.T) {
	p, errs := lowerSrc(t, `
    action a() { hdr.h.b = 1; }
    action b() { hdr.h.b = 2; }
    table t { key = { hdr.h.a : exact; } actions = { a; b; } }
    table u { key = { hdr.h.b : exact; } actions = { NoAction; } }
    apply {
        switch (t.apply().action_run) {
            a: { if (u.apply().hit) { exit; } }
            default: { return; }
        }
        hdr.h.c = 3;
    }`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tb, ub := table(p, "I.t"), table(p, "I.u")
	var aAct, bAct *ir.Action
	for _, r := range tb.Actions {
		switch r.Action.Name {
		case "I.a":
			aAct = r.Action
		case "I.b":
			bAct = r.Action
		}
	}
	if tb.NextByAction[aAct] != ir.Node(ub) {
		t.Errorf("action a must lead to table u")
	}
	if !ub.UseHitMiss {
		t.Fatalf("u's hit/miss must choose the next node")
	}
	hit, ok := ub.HitNext.(*ir.Table)
	if !ok || !hit.Hidden || len(hit.Default.Action.Body) == 0 {
		t.Fatalf("hit must run a generated table with exit")
	}
	hasExit := false
	for _, s := range flatten(hit.Default.Action.Body) {
		if _, ok := s.(*ir.Exit); ok {
			hasExit = true
		}
	}
	if !hasExit {
		t.Errorf("the hit branch must run the exit primitive: %+v", hit.Default.Action.Body)
	}
	rest, ok := ub.MissNext.(*ir.Table)
	if !ok || !rest.Hidden {
		t.Fatalf("miss continues with the statement after the switch")
	}
	if tb.NextByAction[bAct] != nil {
		t.Errorf("return in the default case ends the control")
	}
}

// TestUnnamedInoutNotCopied: an inout parameter the body never names is
// neither copied in nor out (BMv2 aborts on the out-of-range stack index
// the copies would access; p4c drops them too), but the argument's own
// side effects stay; a named one keeps both copies, and so does an unnamed
// one whose argument the body writes (its copy-out undoes the write).
func TestUnnamedInoutNotCopied(t *testing.T) {
	tests := []struct {
		name    string
		ingress string
		want    []string // destinations of the assignments, in order
	}{
		{"unnamed, stack index",
			`action none(inout bit<8> d) { }
			 apply { none(hdr.hs[hdr.h.a].b); }`,
			[]string{"scalars."}},
		{"unnamed, plain field",
			`action none(inout bit<8> d) { hdr.h.b = 1; }
			 apply { none(hdr.h.a); }`,
			[]string{"h.b"}},
		{"unnamed, the body writes the argument: copies kept",
			`action w(inout bit<8> d) { hdr.h.a = 1; }
			 apply { w(hdr.h.a); }`,
			[]string{"scalars.", "h.a", "h.a"}},
		{"unnamed, a later parameter's copy-out writes it: copies dropped",
			`action w(inout bit<8> d, inout bit<8> e) { e = 1; }
			 apply { w(hdr.h.a, hdr.h.a); }`,
			[]string{"scalars.", "scalars.", "h.a"}},
		{"named: read only",
			`action peek(inout bit<8> d) { hdr.h.b = d; }
			 apply { peek(hdr.h.a); }`,
			[]string{"scalars.", "h.b", "h.a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := lowerSrc(t, tc.ingress)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			init, ok := p.Pipelines[0].Init.(*ir.Table)
			if !ok {
				t.Fatalf("the call should run as one generated table")
			}
			var got []string
			for _, s := range flatten(init.Default.Action.Body) {
				if as, ok := s.(*ir.Assign); ok {
					if d, ok := as.Dst.(*ir.FieldRef); ok {
						got = append(got, d.Header+"."+d.Field)
					} else {
						got = append(got, "?")
					}
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("assignments to %v, want %v", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Fatalf("assignments to %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestCopyInCopyOut(t *testing.T) {
	p, errs := lowerSrc(t, `
    action twice(inout bit<8> x) { x = x + 1; hdr.h.a = x; }
    apply { twice(hdr.h.a); }`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// the generated action: copy in, body, copy out (in that order)
	init, ok := p.Pipelines[0].Init.(*ir.Table)
	if !ok || !init.Hidden {
		t.Fatalf("the call should run as one generated table")
	}
	body := flatten(init.Default.Action.Body)
	var order []string
	for _, s := range body {
		if as, ok := s.(*ir.Assign); ok {
			d := as.Dst.(*ir.FieldRef)
			order = append(order, d.Header+"."+d.Field)
		}
	}
	if len(order) != 4 || order[0] != order[1] || order[3] != "h.a" || order[2] != "h.a" || !strings.HasPrefix(order[0], "scalars.") {
		t.Errorf("copy-in to a temporary, update it, write h.a, copy out to h.a: %v", order)
	}
	found := false
	for _, a := range p.ControlActions {
		if a.Name == "I.twice" && len(a.Params) == 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("a directly called action is still a control-plane action (without parameters)")
	}
}

func flatten(ss []ir.Stmt) []ir.Stmt {
	var out []ir.Stmt
	for _, s := range ss {
		if b, ok := s.(*ir.Block); ok {
			out = append(out, flatten(b.Body)...)
			continue
		}
		out = append(out, s)
	}
	return out
}

func TestStorage(t *testing.T) {
	p, errs := lowerSrc(t, `apply { m.flag = hdr.hs[m.m].isValid(); hdr.u.y.a = 1; }`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	names := map[string]bool{}
	for _, h := range p.Headers {
		names[h.Name] = true
	}
	for _, want := range []string{"scalars", "standard_metadata", "h", "hs[0]", "hs[2]", "u_x", "u_y"} {
		if !names[want] {
			t.Errorf("no header instance %s (have %v)", want, names)
		}
	}
	if len(p.Stacks) != 1 || len(p.Stacks[0].Headers) != 3 || len(p.Unions) != 1 {
		t.Errorf("stacks %d, unions %d", len(p.Stacks), len(p.Unions))
	}
	w := 0
	for _, f := range p.HeaderTypes[0].Fields {
		w += f.Width
	}
	if p.HeaderTypes[0].Name != "scalars_0" || w%8 != 0 {
		t.Errorf("scalars must be padded to whole bytes: %d bits", w)
	}
	if len(p.FieldAliases) == 0 || p.FieldAliases[0].Header != "standard_metadata" {
		t.Errorf("standard metadata aliases missing")
	}
}

func TestUnsupported(t *testing.T) {
	tests := []struct{ body, msg string }{
		{`table t { actions = { NoAction; } } apply { t.apply(); t.apply(); }`, "applied more than once"},
		{`table t { actions = { NoAction; } } apply { if (hdr.h.a == 1) { t.apply(); hdr.h.b = 1; } else { t.apply(); } }`, "applies go on to different code"},
		{`apply { verify(true, error.NoError); }`, "verify can only be called in a parser"},
		{`apply { update_checksum(true, { hdr.h.a }, hdr.h.c, HashAlgorithm.csum16); }`, "only be called in the checksum controls"},
		{`table t { key = { hdr.h.a : ternary; } actions = { NoAction; } const entries = { priority = 2: 1 &&& 1 : NoAction(); } } apply { t.apply(); }`, "const entries cannot have priorities"},
		{`table t { key = { hdr.h.a : ternary; } actions = { NoAction; } entries = { 1 &&& 1 : NoAction(); priority = 2: 2 &&& 2 : NoAction(); } } apply { t.apply(); }`, "first entry must have a priority"},
		{`table t { key = { hdr.h.a : ternary; } actions = { NoAction; } priority_delta = 5; entries = { priority = 2: 1 &&& 1 : NoAction(); 2 &&& 2 : NoAction(); } } apply { t.apply(); }`, "overflow in the priorities"},
	}
	for _, tc := range tests {
		_, errs := lowerSrc(t, tc.body)
		if len(errs) == 0 || !strings.Contains(errs[0], tc.msg) || !strings.HasPrefix(errs[0], "t.p4:") {
			t.Errorf("%s: got %v, want an error with a position saying %q", tc.body, errs, tc.msg)
		}
	}
}

// TestInvalidAndDefaultInitializers checks {#} (P4_16 §8.26) and
// initializers ending in `...` (§8.13): they set headers and union members
// invalid, or valid with default field values.
func TestInvalidAndDefaultInitializers(t *testing.T) {
	tests := []struct {
		name, ingress string
		// validity the program must set, per header instance
		want map[string]bool
	}{
		{"header", `apply { hdr.h = {#}; }`, map[string]bool{"h": false}},
		{"typed", `apply { hdr.h = (h_t){#}; }`, map[string]bool{"h": false}},
		{"stack element", `apply { hdr.hs[1] = {#}; }`, map[string]bool{"hs[1]": false}},
		{"union", `apply { hdr.u = {#}; }`, map[string]bool{"u_x": false, "u_y": false}},
		{"header with dots", `apply { hdr.h = { b = 2, ... }; }`, map[string]bool{"h": true}},
		{"struct with dots", `apply { hdr = { h = { a = 1, ... }, ... }; }`,
			map[string]bool{"h": true, "hs[0]": false, "hs[2]": false, "u_x": false, "u_y": false}},
		{"local with dots", `apply { headers x = { ... }; m.flag = x.h.isValid(); }`, map[string]bool{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := lowerSrc(t, tc.ingress)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := map[string]bool{}
			var walk func([]ir.Stmt)
			walk = func(body []ir.Stmt) {
				for _, s := range body {
					switch x := s.(type) {
					case *ir.Block:
						walk(x.Body)
					case *ir.SetValid:
						got[x.Header.Header] = x.Valid
					}
				}
			}
			for _, a := range p.Actions {
				walk(a.Body)
			}
			for h, v := range tc.want {
				if gv, ok := got[h]; !ok || gv != v {
					t.Errorf("%s: valid set to %v (set: %v), want %v", h, gv, ok, v)
				}
			}
		})
	}
}

// TestControllerHeaderAnnotations: p4c lists a controller header's
// annotations, @controller_header itself included, in its P4Info preamble.
func TestControllerHeaderAnnotations(t *testing.T) {
	tests := []struct {
		name, decl string
		want       []string
	}{
		{"plain", `@controller_header("packet_in") header pin_t { bit<9> port; bit<7> pad; }`,
			[]string{`@controller_header("packet_in")`}},
		{"with others", `@name("pin") @controller_header("packet_out") @my_note(1) header pin_t { bit<9> port; bit<7> pad; }`,
			[]string{`@controller_header("packet_out")`, "@my_note(1)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(skeleton, "INGRESS", "apply { }", 1)
			src = strings.Replace(src, "struct headers {", tc.decl+"\nstruct headers { pin_t pin;", 1)
			p, errs := lowerProgram(t, src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if len(p.ControllerHeaders) != 1 {
				t.Fatalf("%d controller headers", len(p.ControllerHeaders))
			}
			got := p.ControllerHeaders[0].Annotations
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("annotations %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInlineTableInstances: externs created inside a table property are
// named by the property's @name (unqualified, as p4c's P4Info has them),
// else after the table and the property, so two tables never share one.
func TestInlineTableInstances(t *testing.T) {
	p, errs := lowerSrc(t, `action a() { }
    table t1 { key = { hdr.h.a : exact; } actions = { a; } @name("ap") implementation = action_profile(32w128); }
    table t2 { key = { hdr.h.a : exact; hdr.h.b : selector; } actions = { a; } @name(".sel") implementation = action_selector(HashAlgorithm.crc16, 32w64, 32w8); }
    table t3 { key = { hdr.h.a : exact; } actions = { a; } implementation = action_profile(32w4); counters = direct_counter(CounterType.packets); }
    table t4 { key = { hdr.h.a : exact; } actions = { a; } implementation = action_profile(32w4); @name("dm") meters = direct_meter<bit<2>>(MeterType.bytes); }
    apply { t1.apply(); t2.apply(); t3.apply(); t4.apply(); }`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tests := []struct{ table, profile, counter, meter string }{
		{"I.t1", "ap", "", ""},
		{"I.t2", "sel", "", ""},
		{"I.t3", "I.t3_implementation", "I.t3_counters", ""},
		{"I.t4", "I.t4_implementation", "", "dm"},
	}
	for _, tc := range tests {
		tb := table(p, tc.table)
		if tb == nil {
			t.Fatalf("no table %s", tc.table)
		}
		if tb.Implementation == nil || tb.Implementation.Name != tc.profile {
			t.Errorf("%s: implementation %+v, want %s", tc.table, tb.Implementation, tc.profile)
		}
		if got := ""; tb.DirectCounter != nil {
			got = tb.DirectCounter.Name
			if got != tc.counter {
				t.Errorf("%s: direct counter %s, want %s", tc.table, got, tc.counter)
			}
		} else if tc.counter != "" {
			t.Errorf("%s: no direct counter", tc.table)
		}
		if tb.DirectMeter != nil {
			if tb.DirectMeter.Name != tc.meter {
				t.Errorf("%s: direct meter %s, want %s", tc.table, tb.DirectMeter.Name, tc.meter)
			}
		} else if tc.meter != "" {
			t.Errorf("%s: no direct meter", tc.table)
		}
	}
}

// TestTypeInfoEnumsAndErrors: a digest naming an error and an enum without
// representation makes type_info list every error member in declaration
// order and the enum's members, as p4c's P4Info has them.
func TestTypeInfoEnumsAndErrors(t *testing.T) {
	src := strings.Replace(skeleton, "INGRESS", `apply { digest<dg_t>(1, { sm.parser_error, Color.Green }); }`, 1)
	src = strings.Replace(src, "struct headers {", "error { Mine }\nenum Color { Red, Green }\nstruct dg_t { error e; Color c; }\nstruct headers {", 1)
	p, errs := lowerProgram(t, src)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ti := p.TypeInfo
	if ti == nil {
		t.Fatal("no type_info")
	}
	wantErrs := "NoError PacketTooShort NoMatch StackOutOfBounds HeaderTooShort ParserTimeout ParserInvalidArgument Mine"
	if !ti.HasError || strings.Join(ti.Errors, " ") != wantErrs {
		t.Errorf("errors %v (present %v), want %s", ti.Errors, ti.HasError, wantErrs)
	}
	if len(ti.PlainEnums) != 1 || ti.PlainEnums[0].Name != "Color" || strings.Join(ti.PlainEnums[0].Members, " ") != "Red Green" {
		t.Errorf("plain enums %+v", ti.PlainEnums)
	}
}

// TestTypeInfoHeaderWithStruct: type_info flattens a header's struct-typed
// fields into members named "s.f", as p4c does.
func TestTypeInfoHeaderWithStruct(t *testing.T) {
	src := strings.Replace(skeleton, "INGRESS", `apply { ns_h x; digest<dg2_t>(1, { x }); }`, 1)
	src = strings.Replace(src, "struct headers {", "struct in_t { bit<8> f8; bit<16> f16; }\nheader ns_h { in_t s; bit<32> f32; }\nstruct dg2_t { ns_h n; }\nstruct headers {", 1)
	p, errs := lowerProgram(t, src)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var names []string
	for _, h := range p.TypeInfo.Headers {
		if h.Name == "ns_h" {
			for _, m := range h.Members {
				names = append(names, m.Name)
			}
		}
	}
	if got := strings.Join(names, " "); got != "s.f8 s.f16 f32" {
		t.Errorf("ns_h members %q, want s.f8 s.f16 f32", got)
	}
	for _, s := range p.TypeInfo.Structs {
		if s.Name == "in_t" {
			t.Errorf("the flattened struct must not be listed itself")
		}
	}
}

// TestRecursiveInstantiation checks that a parser or control that
// instantiates itself, directly or through an instance it declares, is an
// error with a position (P4_16 forbids recursion; lowering it never ended).
func TestRecursiveInstantiation(t *testing.T) {
	tests := []struct{ decls, ingress string }{
		{`control X(inout bit<8> v) { apply { v = v + 1; X.apply(v); } }`, `apply { X.apply(hdr.h.a); }`},
		{`control X(inout bit<8> v) { X() inner; apply { inner.apply(v); } }`, `X() x; apply { x.apply(hdr.h.a); }`},
	}
	for _, tc := range tests {
		src := strings.Replace(skeleton, "control I(", tc.decls+"\ncontrol I(", 1)
		src = strings.Replace(src, "INGRESS", tc.ingress, 1)
		_, errs := lowerProgram(t, src)
		if len(errs) == 0 || !strings.Contains(errs[0], "X instantiates itself") || !strings.HasPrefix(errs[0], "t.p4:") {
			t.Errorf("%s: got %v, want a positioned error saying X instantiates itself", tc.decls, errs)
		}
	}
	src := strings.Replace(skeleton, "state start { p.extract(hdr.h);", "state start { S.apply(p, hdr.h); p.extract(hdr.h);", 1)
	src = strings.Replace(src, "parser P(", "parser S(packet_in p, out h_t h) { state start { S.apply(p, h); transition accept; } }\nparser P(", 1)
	src = strings.Replace(src, "INGRESS", "apply { }", 1)
	if _, errs := lowerProgram(t, src); len(errs) == 0 || !strings.Contains(errs[0], "S instantiates itself") {
		t.Errorf("parser recursion: got %v", errs)
	}
}

// TestRecursiveCalls checks that a function or action calling itself is an
// error with a position (P4_16 forbids recursion; inlining it never ended),
// while a call in the argument of a call of the same function is fine.
func TestRecursiveCalls(t *testing.T) {
	tests := []struct{ decls, ingress, msg string }{
		{`bit<8> f(in bit<8> x) { if (x == 0) { return 0; } return f(x - 1); }`, `apply { hdr.h.a = f(hdr.h.a); }`, "f calls itself"},
		{``, `action a() { hdr.h.a = 1; a(); } apply { a(); }`, "a calls itself"},
		{`bit<8> g(in bit<8> x) { return x + 1; }`, `apply { hdr.h.a = g(g(hdr.h.a)); }`, ""},
	}
	for _, tc := range tests {
		src := strings.Replace(skeleton, "control I(", tc.decls+"\ncontrol I(", 1)
		src = strings.Replace(src, "INGRESS", tc.ingress, 1)
		_, errs := lowerProgram(t, src)
		if tc.msg == "" {
			if len(errs) > 0 {
				t.Errorf("%s: %v", tc.ingress, errs)
			}
			continue
		}
		if len(errs) == 0 || !strings.Contains(errs[0], tc.msg) || !strings.HasPrefix(errs[0], "t.p4:") {
			t.Errorf("%s: got %v, want a positioned error saying %q", tc.ingress, errs, tc.msg)
		}
	}
}

// TestHeaderUnionInDigest: a union in a digest's field list is refused
// with a message that says so and where (it was an "internal:" error).
func TestHeaderUnionInDigest(t *testing.T) {
	src := `#include <core.p4>
#include <v1model.p4>
header a_t { bit<8> x; }
header b_t { bit<16> y; }
header_union u_t { a_t a; b_t b; }
struct H { u_t u; }
struct M { }
struct D { u_t u; }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) { state start { p.extract(h.u.a); transition accept; } }
control VC(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t s) { apply { digest<D>(1, { h.u }); } }
control E(inout H h, inout M m, inout standard_metadata_t s) { apply { } }
control CC(inout H h, inout M m) { apply { } }
control Dp(packet_out p, in H h) { apply { p.emit(h.u); } }
V1Switch(P(), VC(), I(), E(), CC(), Dp()) main;
`
	_, errs := lowerProgram(t, src)
	if len(errs) == 0 || !strings.Contains(errs[0], "header union in a digest") || strings.Contains(errs[0], "internal") || !strings.HasPrefix(errs[0], "t.p4:11:") {
		t.Errorf("got %v, want a positioned error about the union", errs)
	}
}
