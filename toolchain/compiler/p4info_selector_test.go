package compiler

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
)

// TestP4InfoActionSelectorGroups: a selector's @max_group_size sets the
// action profile's max_group_size, and @selector_size_semantics /
// @max_member_weight its size semantics (sum of weights unless said
// otherwise), as p4c writes them; none of the three stays an annotation.
// On a profile without a selector they mean nothing: p4c warns and drops
// them.
func TestP4InfoActionSelectorGroups(t *testing.T) {
	tests := []struct {
		name, decl string
		want       string // the action profile without preamble ids and table ids, protobuf text
		warn       string
	}{
		{"max_group_size", `@max_group_size(16) action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;`,
			`preamble:{} with_selector:true size:64 max_group_size:16 sum_of_weights:{}`, ""},
		{"typed max_group_size", `@max_group_size(32w8) action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;`,
			`preamble:{} with_selector:true size:64 max_group_size:8 sum_of_weights:{}`, ""},
		{"no annotation", `action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;`,
			`preamble:{} with_selector:true size:64 sum_of_weights:{}`, ""},
		{"sum of members", `@max_group_size(200) @selector_size_semantics("sum_of_members") @max_member_weight(4000) @other action_selector(HashAlgorithm.crc16, 32w1024, 32w10) sel;`,
			`preamble:{annotations:"@other"} with_selector:true size:1024 max_group_size:200 sum_of_members:{max_member_weight:4000}`, ""},
		{"profile without a selector", `@max_group_size(16) action_profile(32w128) sel;`,
			`preamble:{} size:128`, "Ignoring annotation @max_group_size on action profile 'I.sel', which does not have a selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "hdr.h.a : exact; hdr.h.b : selector;"
			if !strings.Contains(tc.decl, "action_selector") {
				key = "hdr.h.a : exact;"
			}
			res := compileRules(t, "", tc.decl+`
				action set(bit<8> v) { hdr.h.b = v; }
				table t { key = { `+key+` } actions = { set; } implementation = sel; }`, `t.apply();`)
			if len(res.P4Info.ActionProfiles) != 1 {
				t.Fatalf("action profiles %v", res.P4Info.ActionProfiles)
			}
			ap := res.P4Info.ActionProfiles[0]
			ap.Preamble.Id, ap.Preamble.Name, ap.Preamble.Alias, ap.TableIds = 0, "", "", nil
			got := strings.Join(strings.Fields(prototext.MarshalOptions{}.Format(ap)), "")
			want := strings.Join(strings.Fields(tc.want), "")
			if got != want {
				t.Errorf("action profile\n got %s\nwant %s", got, want)
			}
			warned := ""
			for _, w := range res.Warnings {
				warned += w.Msg + "\n"
			}
			if tc.warn != "" && !strings.Contains(warned, tc.warn) {
				t.Errorf("warnings %q, want %q", warned, tc.warn)
			}
			if tc.warn == "" && warned != "" {
				t.Errorf("unexpected warnings %q", warned)
			}
		})
	}
}
