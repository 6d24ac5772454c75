package compiler

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
)

// TestP4InfoActionSelectorGroups: a selector's @max_group_size sets the
// action profile's max_group_size, and @selector_size_semantics /
// @max_member_weight its size semantics, as p4c writes them; none of the
// three stays an annotation. Without @selector_size_semantics, p4c writes
// sum_of_weights for a selector created in the table's implementation
// property and nothing for a declared one (its P4Info for its
// action_profile_max_group_size_annotation and fabric_20190420 tests). On a
// profile without a selector the three mean nothing: p4c warns and drops
// them.
func TestP4InfoActionSelectorGroups(t *testing.T) {
	const set = `action set(bit<8> v) { hdr.h.b = v; }`
	const selKey = `key = { hdr.h.a : exact; hdr.h.b : selector; } actions = { set; }`
	tests := []struct {
		name, decls string
		want        string // the action profile without preamble ids and table ids, protobuf text
		warn        string
	}{
		{"declared, max_group_size", `@max_group_size(16) action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;
			table t { ` + selKey + ` implementation = sel; }`,
			`preamble:{} with_selector:true size:64 max_group_size:16`, ""},
		{"declared, typed max_group_size", `@max_group_size(32w8) action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;
			table t { ` + selKey + ` implementation = sel; }`,
			`preamble:{} with_selector:true size:64 max_group_size:8`, ""},
		{"declared, no annotation", `action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;
			table t { ` + selKey + ` implementation = sel; }`,
			`preamble:{} with_selector:true size:64`, ""},
		{"declared, sum of members", `@max_group_size(200) @selector_size_semantics("sum_of_members") @max_member_weight(4000) @other
			action_selector(HashAlgorithm.crc16, 32w1024, 32w10) sel;
			table t { ` + selKey + ` implementation = sel; }`,
			`preamble:{annotations:"@other"} with_selector:true size:1024 max_group_size:200 sum_of_members:{max_member_weight:4000}`, ""},
		{"in place, max_group_size", `table t { ` + selKey + `
			@name("sel") @max_group_size(200) implementation = action_selector(HashAlgorithm.identity, 32w1024, 32w10); }`,
			`preamble:{} with_selector:true size:1024 max_group_size:200 sum_of_weights:{}`, ""},
		{"profile without a selector", `@max_group_size(16) action_profile(32w128) sel;
			table t { key = { hdr.h.a : exact; } actions = { set; } implementation = sel; }`,
			`preamble:{} size:128`, "Ignoring annotation @max_group_size on action profile 'I.sel', which does not have a selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := compileRules(t, "", set+tc.decls, `t.apply();`)
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
