package engine

import (
	"strings"
	"testing"
)

// TestLoadRefuses pins the refusal of each load step, so the steps can be
// reordered or split without the error a bad program gets changing.
func TestLoadRefuses(t *testing.T) {
	fields := [][]any{{"a", 8}}
	action := func(name string, id int) map[string]any {
		return map[string]any{"name": name, "id": id, "runtime_data": []any{}, "primitives": []any{}}
	}
	cases := []struct {
		name    string
		prog    testProg
		wantErr string
	}{
		{"version", testProg{extra: map[string]any{"__meta__": map[string]any{"version": []int{3, 0}}}},
			"unsupported BMv2 JSON version [3 0] (want 2.x)"},
		{"register width", testProg{extra: map[string]any{"register_arrays": []any{
			map[string]any{"name": "r", "id": 0, "size": 4, "bitwidth": 0}}}},
			"register r: bad size 4 or width 0"},
		{"counter size", testProg{extra: map[string]any{"counter_arrays": []any{
			map[string]any{"name": "c", "id": 0, "size": -1, "is_direct": false}}}},
			"counter c: bad size -1"},
		{"meter size", testProg{extra: map[string]any{"meter_arrays": []any{
			map[string]any{"name": "m", "id": 0, "size": 1<<20 + 1, "type": "bytes", "rate_count": 2}}}},
			"meter m: bad size 1048577"},
		{"direct meter result", testProg{extra: map[string]any{"meter_arrays": []any{
			map[string]any{"name": "m", "id": 0, "size": 0, "type": "bytes", "rate_count": 2,
				"is_direct": true, "binding": "ingress.t", "result_target": []string{"h", "nope"}}}}},
			"meter m result:"},
		{"field list", testProg{extra: map[string]any{"field_lists": []any{
			map[string]any{"name": "fl", "id": 1, "elements": []any{tF("h", "nope")}}}}},
			"field list fl: unknown field h.nope"},
		{"learn list", testProg{extra: map[string]any{"learn_lists": []any{
			map[string]any{"name": "l", "id": 1, "elements": []any{map[string]any{"type": "header", "value": "nope"}}}}}},
			"field list l: unknown header nope"},
		{"deparser", testProg{extra: map[string]any{"deparsers": []any{
			map[string]any{"name": "deparser", "id": 0, "order": []string{"h", "nope"}}}}},
			"deparser: unknown header nope"},
		{"duplicate action", testProg{actions: []map[string]any{action("b", 0)}},
			"duplicate action id 0"},
		{"checksum", testProg{extra: map[string]any{"checksums": []any{
			map[string]any{"name": "ck", "id": 0, "target": []string{"h", "a"}, "type": "generic", "calculation": "nope"}}}},
			"checksum ck: unknown calculation nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.prog.fields = fields
			_, err := Load(tc.prog.json(), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestLoadDecidesFromReads checks the whole-program decisions at the end
// of load: metadata nobody reads is not provided, and a field a field list
// copies counts as read.
func TestLoadDecidesFromReads(t *testing.T) {
	fields := [][]any{{"a", 8}, {"b", 8}}
	cases := []struct {
		name                      string
		prog                      testProg
		ingressTS, egressTS, info bool
	}{
		{"nothing read", testProg{fields: fields}, false, false, false},
		{"ingress timestamp", testProg{fields: fields, prims: []any{
			tAssign(tF("h", "a"), tF("standard_metadata", "ingress_global_timestamp"))}}, true, false, false},
		{"egress queueing metadata", testProg{fields: fields, egress: []any{
			tAssign(tF("h", "a"), tF("standard_metadata", "deq_qdepth"))}}, false, false, true},
		{"copied by a field list", testProg{fields: fields, extra: map[string]any{"field_lists": []any{
			map[string]any{"name": "fl", "id": 1, "elements": []any{tF("standard_metadata", "egress_global_timestamp")}}}}},
			false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := tc.prog.load(t, Options{})
			if pl.useIngressTS != tc.ingressTS || pl.useEgressTS != tc.egressTS || pl.egressInfo != tc.info {
				t.Fatalf("ingress timestamp %v, egress timestamp %v, egress metadata %v; want %v, %v, %v",
					pl.useIngressTS, pl.useEgressTS, pl.egressInfo, tc.ingressTS, tc.egressTS, tc.info)
			}
		})
	}
}
