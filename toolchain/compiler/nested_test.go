package compiler

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/stf"
)

// nestedProgram has headers and metadata structs that nest structs, as
// SD-Fabric's v1model program does (struct v1model_header_t {
// ingress_headers_t ingress; egress_headers_t egress; }): the parser
// extracts into hdr.outer.*, a sub-control takes hdr.outer as a whole,
// the deparser emits the nested struct.
const nestedProgram = `#include <core.p4>
#include <v1model.p4>
header a_t { bit<8> x; bit<8> y; }
header b_t { bit<16> z; }
struct outer_t { a_t a; b_t[2] bs; }
struct inner_t { b_t b; }
struct headers { outer_t outer; inner_t inner; a_t last; }
struct lkp_t { bit<8> k; bool seen; }
struct meta { bit<4> flag; lkp_t lkp; a_t saved; }
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.outer.a); m.lkp.k = hdr.outer.a.x; transition select(hdr.outer.a.x) { 1: two; default: accept; } }
    state two { p.extract(hdr.outer.bs.next); p.extract(hdr.outer.bs.next); p.extract(hdr.inner.b); transition accept; }
}
control Swap(inout outer_t o) { apply { bit<16> t = o.bs[0].z; o.bs[0].z = o.bs[1].z; o.bs[1].z = t; } }
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 0;
        m.saved.setValid();
        m.saved.y = m.lkp.k + 1;
        m.lkp.seen = hdr.inner.b.isValid();
        if (m.lkp.seen) { Swap.apply(hdr.outer); hdr.outer.a.y = m.saved.y; }
    }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`

// TestNestedInterfaceStructs: a headers struct of structs of headers
// compiles (p4c accepts it; only the leaves must be headers, stacks or
// unions), its instances and the nested metadata's scalars are named as
// p4c's FlattenInterfaceStructs names them ("_" + path + leaf index), and
// the program behaves: nested headers parse, pass as a whole struct to a
// control and deparse in declaration order.
func TestNestedInterfaceStructs(t *testing.T) {
	res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": nestedProgram}.read})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	var doc struct {
		Headers []struct {
			Name     string `json:"name"`
			Metadata bool   `json:"metadata"`
		} `json:"headers"`
		Stacks []struct {
			Name string `json:"name"`
		} `json:"header_stacks"`
		HeaderTypes []struct {
			Name   string  `json:"name"`
			Fields [][]any `json:"fields"`
		} `json:"header_types"`
	}
	if err := json.Unmarshal(res.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, h := range doc.Headers {
		names[h.Name] = true
	}
	for _, s := range doc.Stacks {
		names["stack "+s.Name] = true
	}
	for _, ht := range doc.HeaderTypes {
		if strings.HasPrefix(ht.Name, "scalars") {
			for _, f := range ht.Fields {
				names["scalar "+f[0].(string)] = true
			}
		}
	}
	for _, want := range []string{
		// headers: leaves a, bs, b, last in order
		"_outer_a0", "stack _outer_bs1", "_outer_bs1[0]", "_outer_bs1[1]", "_inner_b2", "_last3",
		// metadata: leaves flag, lkp.k, lkp.seen, saved
		"scalar meta._flag0", "scalar meta._lkp_k1", "scalar meta._lkp_seen2", "_saved3",
	} {
		if !names[want] {
			t.Errorf("no %s in the JSON; it has %v", want, names)
		}
	}

	pl, err := engine.Load(res.JSON, engine.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	script := strings.Join([]string{
		// x = 1: both stack elements and inner.b are parsed; bs swapped, y = 2
		"packet 0 0100 1111 2222 3333 ee",
		"expect 0 0102 2222 1111 3333 ee$",
		// x = 5: only a; nothing changes
		"packet 0 0500 1111",
		"expect 0 0500 1111$",
	}, "\n")
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

// TestFlatInterfaceStructNames: structs that do not nest keep p4c's plain
// names (instances after their fields, scalars "<type>.<field>").
func TestFlatInterfaceStructNames(t *testing.T) {
	res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": withBody("")}.read})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, want := range []string{`"name":"h"`, `"meta.m"`} {
		if !strings.Contains(compact(t, res.JSON), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// compact is a JSON document without insignificant spaces.
func compact(t *testing.T, js []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, js); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestFieldListsOfNestedMetadata: a *_preserving_field_list call keeps
// the user metadata fields annotated @field_list(index), the index also
// written as a constant (p4c folds it), at any depth of a metadata struct
// that nests structs, and every field of a struct-typed field so
// annotated (p4c flattens the struct first and hands the annotation
// down). Fields not in the list start from zero on the resubmitted pass.
func TestFieldListsOfNestedMetadata(t *testing.T) {
	src := `#include <core.p4>
#include <v1model.p4>
const bit<8> KEEP = 3;
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct headers { h_t h; }
struct inner_t { @field_list(KEEP) bit<8> kept; bit<8> lost; }
struct lkp_t { bit<8> x; bit<8> y; }
struct meta { bit<8> top; inner_t inr; @field_list(KEEP, 5) lkp_t lkp; @field_list(4) bit<8> other; }
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 0;
        if (sm.instance_type == 0) {
            m.inr.kept = hdr.h.a; m.inr.lost = hdr.h.a; m.lkp.x = hdr.h.a + 1; m.lkp.y = hdr.h.a + 2; m.other = 9;
            resubmit_preserving_field_list(KEEP);
        } else {
            hdr.h.a = m.inr.lost; hdr.h.b = m.inr.kept; hdr.h.c = m.lkp.x + m.lkp.y; hdr.h.d = m.other;
        }
    }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`
	res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": src}.read})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	var doc struct {
		FieldLists []struct {
			Elements []struct {
				Value []string `json:"value"`
			} `json:"elements"`
		} `json:"field_lists"`
	}
	if err := json.Unmarshal(res.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fl := range doc.FieldLists {
		for _, e := range fl.Elements {
			got = append(got, strings.Join(e.Value, "."))
		}
	}
	if want := "scalars.meta._inr_kept1 scalars.meta._lkp_x3 scalars.meta._lkp_y4"; strings.Join(got, " ") != want {
		t.Errorf("field list %v, want %s", got, want)
	}
	pl, err := engine.Load(res.JSON, engine.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	cmds, err := stf.ParseScript(strings.NewReader("packet 0 05000000\nexpect 0 00050d00$"))
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
