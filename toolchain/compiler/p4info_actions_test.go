package compiler

import (
	"encoding/json"
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

func actionNames(info *p4v1.P4Info) string {
	var names []string
	for _, a := range info.Actions {
		names = append(names, a.Preamble.Name)
	}
	return strings.Join(names, " ")
}

// TestP4InfoActionsListed: which actions P4Info describes. p4c generates
// P4Info from its front end's output: every action a control declares
// and uses (in a table or in a call), not those written @hidden (P4Info
// leaves them out, though they keep a P4Runtime name: their ids and
// aliases are allocated with the rest), and not a top-level action that
// only other actions call (its calls are inlined before top-level actions
// are copied into the controls that name them, so no control names it).
func TestP4InfoActionsListed(t *testing.T) {
	tests := []struct {
		name, types, decls, apply string
		want                      string // the actions listed, in order
	}{
		{"table actions and NoAction", "",
			`action set(bit<8> v) { hdr.h.b = v; }
			 table t { key = { hdr.h.a : exact; } actions = { set; } }`,
			`t.apply();`, "NoAction I.set"},
		{"a @hidden helper called by table actions", "",
			`@hidden action helper(bit<8> v) { hdr.h.b = v; }
			 action set(bit<8> v) { helper(v); }
			 table t { key = { hdr.h.a : exact; } actions = { set; } }`,
			`t.apply();`, "NoAction I.set"},
		{"a @hidden action called from the apply block", "",
			`@hidden action drop() { mark_to_drop(sm); }`,
			`if (hdr.h.a == 0) { drop(); }`, ""},
		{"a @hidden table's @hidden actions", "",
			`@hidden action one() { hdr.h.b = 1; } @hidden action two() { hdr.h.b = 2; }
			 @hidden table pick { key = { hdr.h.a : exact; } actions = { one; two; } const entries = { 1 : one(); 2 : two(); } }`,
			`pick.apply();`, "NoAction"},
		{"a top-level action only other actions call", `action helper(inout pkt_t h) { h.b = 9; }`,
			`action set() { helper(hdr.h); }
			 table t { key = { hdr.h.a : exact; } actions = { set; } }`,
			`t.apply();`, "NoAction I.set"},
		{"a top-level action called from the apply block", `action helper(inout pkt_t h) { h.b = 9; }`,
			``, `helper(hdr.h);`, "helper"},
		{"a control's action only other actions call", "",
			`action helper() { hdr.h.b = 9; }
			 action set() { helper(); }
			 table t { key = { hdr.h.a : exact; } actions = { set; } }`,
			`t.apply();`, "NoAction I.helper I.set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := compileRules(t, tc.types, tc.decls, tc.apply)
			if got := actionNames(res.P4Info); got != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

// TestP4InfoHiddenNamesCountForAliases: a @hidden table or action is not
// described, but its name still takes part in the aliases (p4c's symbol
// table holds every table and action of the program), and its direct
// counter and meter are left out with it.
func TestP4InfoHiddenNamesCountForAliases(t *testing.T) {
	res := compileRules(t, `
		control Sub(inout headers hdr) {
			@hidden action set() { hdr.h.b = 1; }
			direct_counter(CounterType.packets) hc;
			direct_meter<bit<8>>(MeterType.packets) hm;
			@hidden action count() { hc.count(); hm.read(hdr.h.b); }
			@hidden table t { key = { hdr.h.a : exact; } actions = { count; set; } counters = hc; meters = hm; }
			apply { t.apply(); }
		}`, `
		Sub() sub;
		action set() { hdr.h.b = 2; }
		table t { key = { hdr.h.a : exact; } actions = { set; } }`,
		`t.apply(); sub.apply(hdr);`)
	info := res.P4Info
	if len(info.Tables) != 1 || info.Tables[0].Preamble.Name != "I.t" {
		t.Fatalf("tables %v, want I.t only", info.Tables)
	}
	if a := info.Tables[0].Preamble.Alias; a != "I.t" {
		t.Errorf("table alias %q, want I.t (I.sub.t is a table too)", a)
	}
	for _, a := range info.Actions {
		if a.Preamble.Name == "I.set" && a.Preamble.Alias != "I.set" {
			t.Errorf("action alias %q, want I.set (I.sub.set is an action too)", a.Preamble.Alias)
		}
		if strings.HasPrefix(a.Preamble.Name, "I.sub.") {
			t.Errorf("@hidden action %s listed", a.Preamble.Name)
		}
	}
	if len(info.DirectCounters) != 0 || len(info.DirectMeters) != 0 {
		t.Errorf("the @hidden table's direct resources are listed: %v %v", info.DirectCounters, info.DirectMeters)
	}
	// the JSON keeps them: the table still counts
	var doc struct {
		Counters []struct {
			Name     string `json:"name"`
			IsDirect bool   `json:"is_direct"`
		} `json:"counter_arrays"`
	}
	if err := json.Unmarshal(res.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Counters) != 1 || !doc.Counters[0].IsDirect {
		t.Errorf("JSON counter_arrays %+v, want the direct counter", doc.Counters)
	}
}
