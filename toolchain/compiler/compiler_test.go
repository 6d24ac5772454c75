package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/terrapin/terrapin/toolchain/p4info"
)

// corpusDir locates the shared conformance corpus: $TERRAPIN_CORPUS, or
// ../shared/conformance/p4c-stf beside the repository, as the Makefile
// expects it.
func corpusDir(t testing.TB) string {
	if d := os.Getenv("TERRAPIN_CORPUS"); d != "" {
		return d
	}
	d, err := filepath.Abs("../../../shared/conformance/p4c-stf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d); err != nil {
		t.Skipf("conformance corpus not found at %s (set TERRAPIN_CORPUS)", d)
	}
	return d
}

// TestCorpus compiles every corpus program and compares the P4Info with
// the one p4c produced: they must be identical, ids and aliases included.
func TestCorpus(t *testing.T) {
	dir := corpusDir(t)
	progs, _ := filepath.Glob(filepath.Join(dir, "*.p4"))
	if len(progs) < 100 {
		t.Fatalf("only %d programs in %s", len(progs), dir)
	}
	compiled, compared := 0, 0
	for _, prog := range progs {
		name := strings.TrimSuffix(filepath.Base(prog), ".p4")
		if _, err := os.Stat(filepath.Join(dir, name+".stf")); err != nil {
			continue // a helper file included by other programs
		}
		t.Run(name, func(t *testing.T) {
			res, errs := Compile(Options{Program: prog})
			if len(errs) > 0 {
				t.Fatalf("compile: %v", errs)
			}
			compiled++
			if !json.Valid(res.JSON) {
				t.Fatalf("invalid JSON")
			}
			var doc map[string]any
			if err := json.Unmarshal(res.JSON, &doc); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"header_types", "headers", "parsers", "deparsers", "actions", "pipelines", "__meta__"} {
				if _, ok := doc[k]; !ok {
					t.Errorf("JSON has no %q", k)
				}
			}
			want, err := os.ReadFile(filepath.Join(dir, name+".p4info.txtpb"))
			if err != nil {
				return // p4c stored no P4Info for this one
			}
			got, err := p4info.Marshal(res.P4Info, p4info.Text)
			if err != nil {
				t.Fatal(err)
			}
			compared++
			if !bytes.Equal(got, want) {
				t.Errorf("P4Info differs from p4c's:\n%s", firstDiff(string(got), string(want)))
			}
		})
	}
	t.Logf("%d programs compiled, %d P4Info files compared", compiled, compared)
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, gl, wl)
		}
	}
	return "(no difference)"
}

// memFS serves source files from memory.
type memFS map[string]string

func (m memFS) read(path string) ([]byte, error) {
	if s, ok := m[path]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

// minimal is a complete v1model program for tests that change one part.
const minimal = `#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct meta { bit<8> m; }
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action set(bit<8> v) { hdr.h.a = v; }
    table t { key = { hdr.h.b : exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply { BODY }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`

func withBody(body string) string { return strings.Replace(minimal, "BODY", body, 1) }

// withTable is minimal with table t's key replaced (and t applied).
func withTable(key string) string {
	return strings.Replace(withBody("t.apply();"), "key = { hdr.h.b : exact; }", key, 1)
}

// TestTargetAccepts compiles what the target checks must let through.
func TestTargetAccepts(t *testing.T) {
	for _, key := range []string{
		"key = { hdr.h.b : lpm; } const entries = { 0xF0 &&& 0xF0 : set(1); 0 &&& 0 : set(2); _ : set(3); 7 : set(4); }",
		"key = { hdr.h.b : ternary; hdr.h.a : lpm; } const entries = { (0x0F &&& 0x0F, _) : set(1); }",
		"key = { hdr.h.b : range; } const entries = { 1 .. 2 : set(1); _ : set(2); 5 : set(3); }",
		"key = { hdr.h.b : optional; } const entries = { 1 : set(1); _ : set(2); }",
		"key = { hdr.h.b : exact; } meters = dm;",
	} {
		src := withTable(key)
		if strings.Contains(key, "meters") {
			src = strings.Replace(src, "action set(bit<8> v) { hdr.h.a = v; }", "direct_meter<bit<8>>(MeterType.packets) dm; action set(bit<8> v) { dm.read(hdr.h.a); }", 1)
		}
		if _, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": src}.read}); len(errs) > 0 {
			t.Errorf("%s: %v", key, errs)
		}
	}
}

// TestFeaturePrograms compiles the programs in testdata, which use most
// of the language and of v1model's externs.
func TestFeaturePrograms(t *testing.T) {
	for _, name := range []string{"testdata/features.p4", "testdata/externs.p4"} {
		res, errs := Compile(Options{Program: name})
		if len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
			continue
		}
		if len(res.Warnings) > 0 {
			t.Errorf("%s: unexpected warnings %v", name, res.Warnings)
		}
		if len(res.P4Info.Tables) == 0 || len(res.IR.Pipelines) != 2 {
			t.Errorf("%s: no tables compiled", name)
		}
	}
}

// TestDiagnostics checks that errors from every phase come back with the
// position of their cause.
func TestDiagnostics(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{"preprocessor", "#include \"missing.p4\"\n", 1, "cannot find include file"},
		{"syntax", withBody("hdr.h.a = ;"), 13, "expected an expression"},
		{"undeclared", withBody("hdr.h.c = 1;"), 13, "has no field c"},
		{"type mismatch", withBody("hdr.h.a = true;"), 13, "cannot use a value of type bool"},
		{"width mismatch", withBody("hdr.h.a = 16w1;"), 13, "cannot use a value of type bit<16>"},
		{"read-only", withBody("t.apply(); sm = sm;"), 13, ""},
		{"unknown table", withBody("u.apply();"), 13, "undeclared identifier"},
		{"apply twice", withBody("t.apply(); t.apply();"), 13, "applied more than once"},
		{"no main", "header h_t { bit<8> a; }\n\nheader g_t { bit<8> b; }\n", 3, "no top-level package instance called main"},
		{"bad main", strings.Replace(withBody(""), "V1Switch(P(), V(), I(), E(), C(), D()) main;", "V1Switch(P(), V(), I(), E(), C()) main;", 1), 18, "missing argument"},
		// what BMv2 and v1model refuse in programs the language accepts
		{"header of 15 bits", strings.Replace(withBody(""), "bit<8> b; }", "bit<7> b; }", 1), 3, "header h_t is 15 bits long"},
		{"headers struct holding a struct of bits", strings.Replace(strings.Replace(withBody(""), "struct headers { h_t h; }", "struct wrap_t { h_t w; bit<8> b; } struct headers { h_t h; wrap_t x; }", 1), "p.emit(hdr);", "p.emit(hdr.h);", 1), 6, "field x.b is a bit<8>"},
		{"two lpm keys", withTable("key = { hdr.h.b : lpm; hdr.h.a : lpm; }"), 12, "table t has more than one lpm key"},
		{"mask on an exact key", withTable("key = { hdr.h.b : exact; } const entries = { 1 &&& 1 : set(1); }"), 12, "invalid key expression for the exact key"},
		{"range on a ternary key", withTable("key = { hdr.h.b : ternary; } const entries = { 1 .. 2 : set(1); }"), 12, "invalid key expression for the ternary key"},
		{"mask on an optional key", withTable("key = { hdr.h.b : optional; } const entries = { 1 &&& 1 : set(1); }"), 12, "invalid key expression for the optional key"},
		{"lpm mask not a prefix", withTable("key = { hdr.h.b : lpm; } const entries = { 0x0F &&& 0x0F : set(1); }"), 12, "not a prefix"},
		{"direct meter on no table", strings.Replace(withBody("t.apply();"), "action set(bit<8> v) { hdr.h.a = v; }", "direct_meter<bit<8>>(MeterType.packets) dm; action set(bit<8> v) { dm.read(hdr.h.a); }", 1), 11, "direct meter dm is read, but no table has it"},
		{"direct meter never read", strings.Replace(withTable("key = { hdr.h.b : exact; } meters = dm;"), "action set(", "direct_meter<bit<8>>(MeterType.packets) dm; action set(", 1), 11, "direct meter dm of table t is never read"},
		{"one table name twice in P4Info", strings.Replace(strings.Replace(withBody("s1.apply(hdr); s2.apply(hdr);"),
			"control V(inout headers hdr, inout meta m) { apply { } }",
			`control V(inout headers hdr, inout meta m) { apply { } } control S(inout headers hdr) { @name(".s") table s { actions = { NoAction; } } apply { s.apply(); } }`, 1),
			"action set(", "S() s1; S() s2; action set(", 1), 9, `name "s" is used for more than one table`},
		{"one counter name twice in P4Info", strings.Replace(strings.Replace(withBody("s1.apply(hdr); s2.apply(hdr);"),
			"control V(inout headers hdr, inout meta m) { apply { } }",
			`control V(inout headers hdr, inout meta m) { apply { } } control S(inout headers hdr) { @name(".c") counter(32w4, CounterType.packets) c; apply { c.count(0); } }`, 1),
			"action set(", "S() s1; S() s2; action set(", 1), 9, `name "c" is used for more than one counter`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": tc.src}.read})
			if tc.name == "read-only" {
				if len(errs) != 0 {
					t.Fatalf("assigning an inout parameter to itself is allowed, got %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			e := errs[0]
			if e.Pos.File != "main.p4" || e.Pos.Line != tc.line || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got %v, want main.p4:%d: ...%s...", e, tc.line, tc.msg)
			}
		})
	}
}

// FuzzCompile runs the whole compiler on mutated programs: whatever the
// input, it must return a result or errors, never panic.
func FuzzCompile(f *testing.F) {
	f.Add(withBody("t.apply();"))
	f.Add(withBody("if (hdr.h.isValid()) { hdr.h.a = hdr.h.b |+| 8w3; } else { exit; }"))
	f.Add(withBody("switch (t.apply().action_run) { set: { m.m = 1; } default: { return; } }"))
	f.Add(withBody("bit<16> x = hdr.h.a ++ hdr.h.b; hdr.h.a = x[11:4]; hdr.h.b = (bit<8>)(int<8>)hdr.h.a >> 2;"))
	f.Add(withBody("hash(m.m, HashAlgorithm.crc16, 8w0, { hdr.h.a }, 16w256); mark_to_drop(sm);"))
	// whole programs touching most of the language and of v1model
	for _, name := range []string{"testdata/features.p4", "testdata/externs.p4"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) || len(src) > 1<<14 {
			return
		}
		type out struct {
			res  *Result
			errs []string
		}
		done := make(chan out, 1)
		go func() {
			res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": src}.read})
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			done <- out{res, msgs}
		}()
		var o out
		select {
		case o = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("compilation did not finish in 10s")
		}
		res, nerrs := o.res, len(o.errs)
		for _, e := range o.errs {
			if strings.Contains(e, "internal error") {
				t.Fatalf("compiler bug: %s", e)
			}
		}
		if res == nil && nerrs == 0 {
			t.Fatal("no result and no error")
		}
		if res != nil && !json.Valid(res.JSON) {
			t.Fatal("invalid JSON")
		}
	})
}
