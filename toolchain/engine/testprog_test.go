package engine

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// testProg builds small BMv2 JSON programs for table-driven tests: the
// parser extracts header "h" (fields given) then runs parserOps; ingress
// sets egress_spec = 1, then applies table "t" (keys given, else keyless)
// whose default action "a" runs prims; the deparser emits h.
type testProg struct {
	fields    [][]any          // fields of h: [name, width] or [name, width, signed]
	params    []map[string]any // runtime_data of action a
	prims     []any            // primitives of action a
	actions   []map[string]any // more actions (ids from 1)
	keys      []any            // key of table t
	tableType string
	extra     map[string]any // top-level overrides (register_arrays, ...)
	parserOps []any
	egress    []any // primitives of an egress action (keyless table)
	tableMore map[string]any
	profiles  []any // ingress action_profiles
}

func tF(h, f string) map[string]any { return map[string]any{"type": "field", "value": []string{h, f}} }
func tH(v string) map[string]any    { return map[string]any{"type": "hexstr", "value": v} }
func tE(op string, l, r any) map[string]any {
	return map[string]any{"type": "expression", "value": map[string]any{"op": op, "left": l, "right": r}}
}
func tRD(i int) map[string]any { return map[string]any{"type": "runtime_data", "value": i} }
func tAssign(dst, src any) map[string]any {
	return map[string]any{"op": "assign", "parameters": []any{dst, src}}
}
func tPrim(op string, params ...any) map[string]any {
	return map[string]any{"op": op, "parameters": params}
}

var stdMetaFields = [][]any{{"ingress_port", 9, false}, {"egress_spec", 9, false}, {"egress_port", 9, false}, {"instance_type", 32, false}, {"packet_length", 32, false}, {"enq_timestamp", 32, false}, {"enq_qdepth", 19, false}, {"deq_timedelta", 32, false}, {"deq_qdepth", 19, false}, {"ingress_global_timestamp", 48, false}, {"egress_global_timestamp", 48, false}, {"mcast_grp", 16, false}, {"egress_rid", 16, false}, {"checksum_error", 1, false}, {"parser_error", 32, false}, {"priority", 3, false}, {"_padding", 3, false}}

func (tp testProg) json() []byte {
	fields := tp.fields
	prims := append([]any{tAssign(tF("standard_metadata", "egress_spec"), tH("0x1"))}, tp.prims...)
	params := tp.params
	if params == nil {
		params = []map[string]any{}
	}
	actions := []any{map[string]any{"name": "a", "id": 0, "runtime_data": params, "primitives": prims}}
	actionIDs := []int{0}
	actionNames := []string{"a"}
	for _, a := range tp.actions {
		actions = append(actions, a)
		actionIDs = append(actionIDs, a["id"].(int))
		actionNames = append(actionNames, a["name"].(string))
	}
	nextTables := map[string]any{}
	for _, n := range actionNames {
		nextTables[n] = nil
	}
	keys := tp.keys
	if keys == nil {
		keys = []any{}
	}
	mt := "exact"
	for _, k := range keys {
		switch k.(map[string]any)["match_type"] {
		case "ternary", "optional":
			if mt != "range" {
				mt = "ternary"
			}
		case "range":
			mt = "range"
		case "lpm":
			if mt == "exact" {
				mt = "lpm"
			}
		}
	}
	ttype := tp.tableType
	if ttype == "" {
		ttype = "simple"
	}
	table := map[string]any{
		"name": "ingress.t", "id": 0, "key": keys, "match_type": mt, "type": ttype,
		"max_size": 1024, "with_counters": false, "support_timeout": false, "direct_meters": nil,
		"action_ids": actionIDs, "actions": actionNames, "base_default_next": nil,
		"next_tables":   nextTables,
		"default_entry": map[string]any{"action_id": 0, "action_const": false, "action_data": []any{}, "action_entry_const": false},
	}
	for k, v := range tp.tableMore {
		table[k] = v
	}
	if len(tp.params) > 0 {
		delete(table, "default_entry")
	}
	profiles := tp.profiles
	if profiles == nil {
		profiles = []any{}
	}
	egressTables := []any{}
	egressInit := any(nil)
	if tp.egress != nil {
		actions = append(actions, map[string]any{"name": "e", "id": 99, "runtime_data": []any{}, "primitives": tp.egress})
		egressTables = append(egressTables, map[string]any{
			"name": "egress.te", "id": 1, "key": []any{}, "match_type": "exact", "type": "simple",
			"max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": nil,
			"action_ids": []int{99}, "actions": []string{"e"}, "base_default_next": nil,
			"next_tables":   map[string]any{"e": nil},
			"default_entry": map[string]any{"action_id": 99, "action_const": true, "action_data": []any{}, "action_entry_const": true},
		})
		egressInit = "egress.te"
	}
	parserOps := append([]any{map[string]any{"op": "extract", "parameters": []any{map[string]any{"type": "regular", "value": "h"}}}}, tp.parserOps...)
	prog := map[string]any{
		"__meta__": map[string]any{"version": []int{2, 23}},
		"header_types": []any{
			map[string]any{"name": "scalars_0", "id": 0, "fields": []any{}},
			map[string]any{"name": "standard_metadata", "id": 1, "fields": stdMetaFields},
			map[string]any{"name": "h_t", "id": 2, "fields": fields},
		},
		"headers": []any{
			map[string]any{"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": true},
			map[string]any{"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
			map[string]any{"name": "h", "id": 2, "header_type": "h_t", "metadata": false},
		},
		"header_stacks": []any{}, "header_union_types": []any{}, "header_unions": []any{}, "header_union_stacks": []any{},
		"field_lists": []any{},
		"errors":      [][]any{{"NoError", 0}, {"PacketTooShort", 1}, {"NoMatch", 2}, {"StackOutOfBounds", 3}, {"HeaderTooShort", 4}, {"ParserTimeout", 5}, {"ParserInvalidArgument", 6}},
		"parsers": []any{map[string]any{"name": "parser", "id": 0, "init_state": "start", "parse_states": []any{
			map[string]any{"name": "start", "id": 0, "parser_ops": parserOps,
				"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}}, "transition_key": []any{}},
		}}},
		"parse_vsets":     []any{},
		"deparsers":       []any{map[string]any{"name": "deparser", "id": 0, "order": []string{"h"}}},
		"meter_arrays":    []any{},
		"counter_arrays":  []any{},
		"register_arrays": []any{},
		"calculations":    []any{},
		"learn_lists":     []any{},
		"actions":         actions,
		"pipelines": []any{
			map[string]any{"name": "ingress", "id": 0, "init_table": "ingress.t", "tables": []any{table}, "action_profiles": profiles, "conditionals": []any{}},
			map[string]any{"name": "egress", "id": 1, "init_table": egressInit, "tables": egressTables, "action_profiles": []any{}, "conditionals": []any{}},
		},
		"checksums":        []any{},
		"field_aliases":    [][]any{{"intrinsic_metadata.mcast_grp", []string{"standard_metadata", "mcast_grp"}}, {"intrinsic_metadata.egress_rid", []string{"standard_metadata", "egress_rid"}}, {"intrinsic_metadata.priority", []string{"standard_metadata", "priority"}}},
		"extern_instances": []any{},
	}
	for k, v := range tp.extra {
		prog[k] = v
	}
	b, err := json.Marshal(prog)
	if err != nil {
		panic(err)
	}
	return b
}

func (tp testProg) load(t testing.TB, opts Options) *Pipeline {
	t.Helper()
	pl, err := Load(tp.json(), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return pl
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run1 sends one packet and returns the single output frame (failing the
// test if there is not exactly one).
func run1(t testing.TB, pl *Pipeline, in []byte) []byte {
	t.Helper()
	out := process(pl, in, 0)
	if len(out) != 1 {
		t.Fatalf("got %d output frames, want 1", len(out))
	}
	return out[0].frame
}
