package compiler

import (
	"encoding/json"
	"strings"
	"testing"
)

// rulesProgram is a v1model program whose ingress is DECLS and APPLY,
// with TYPES (types, top-level actions, controls) declared before the
// parser.
const rulesProgram = `#include <core.p4>
#include <v1model.p4>
header pkt_t { bit<8> a; bit<8> b; bit<16> c; }
struct headers { pkt_t h; }
struct meta { bit<8> m; bit<16> w; }
TYPES
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    DECLS
    apply { APPLY }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`

func compileRules(t *testing.T, types, decls, apply string) *Result {
	t.Helper()
	src := strings.NewReplacer("TYPES", types, "DECLS", decls, "APPLY", apply).Replace(rulesProgram)
	res, errs := Compile(Options{Program: "main.p4", ReadFile: memFS{"main.p4": src}.read})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	return res
}

// TestIndirectTableDefaultAction: BMv2 has no default entry for a table
// whose actions come from an action profile or selector (simple_switch
// refuses a const one: "does not have type 'simple'"), so the JSON leaves
// it out and the compiler warns, as p4c does; P4Info still says what the
// program wrote.
func TestIndirectTableDefaultAction(t *testing.T) {
	for _, impl := range []string{"action_profile(32w16)", "action_selector(HashAlgorithm.crc16, 32w16, 32w8)"} {
		sel := ""
		if strings.HasPrefix(impl, "action_selector") {
			sel = " hdr.h.b : selector;"
		}
		res := compileRules(t, "", `
			action set(bit<8> v) { hdr.h.b = v; } action nop() { }
			table t { key = { hdr.h.a : exact;`+sel+` } actions = { set; @defaultonly nop; }
			          const default_action = nop(); implementation = `+impl+`; }`, `t.apply();`)
		var doc struct {
			Pipelines []struct {
				Tables []struct {
					Name         string          `json:"name"`
					Type         string          `json:"type"`
					DefaultEntry json.RawMessage `json:"default_entry"`
				} `json:"tables"`
			} `json:"pipelines"`
		}
		if err := json.Unmarshal(res.JSON, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tb := range doc.Pipelines[0].Tables {
			if tb.Name == "I.t" && tb.DefaultEntry != nil {
				t.Errorf("%s: %s table has a default_entry %s", impl, tb.Type, tb.DefaultEntry)
			}
		}
		if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Msg, "Target does not support default_action for I.t (due to action profiles)") {
			t.Errorf("%s: warnings %v", impl, res.Warnings)
		}
		if res.P4Info.Tables[0].ConstDefaultActionId == 0 {
			t.Errorf("%s: P4Info lost the const default action", impl)
		}
	}
}

// TestTargetMacro: like p4c-bm2-ss, terrapin-p4c defines __TARGET_BMV2__
// for every program, whatever the command line defines.
func TestTargetMacro(t *testing.T) {
	for _, defines := range []map[string]string{nil, {"__TARGET_BMV2__": "0", "X": "1"}} {
		src := strings.Replace(withBody(""), "apply {  }", `apply {
#if defined(__TARGET_BMV2__) && __TARGET_BMV2__
    hdr.h.a = 1;
#else
    hdr.h.a = bad;
#endif
    }`, 1)
		if !strings.Contains(src, "__TARGET_BMV2__") {
			t.Fatal("test program not built")
		}
		if _, errs := Compile(Options{Program: "main.p4", Defines: defines, ReadFile: memFS{"main.p4": src}.read}); len(errs) > 0 {
			t.Errorf("defines %v: %v", defines, errs)
		}
	}
}
