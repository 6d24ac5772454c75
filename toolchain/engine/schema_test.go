package engine

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Schema's declared entries are the JSON's, in its order, with BMv2's
// priority p stored as ConstPriorityBase − p and the values as the JSON
// writes them (an lpm value with bits past its prefix stays so; matching
// masks its own copy).
func TestSchemaConstEntries(t *testing.T) {
	for _, tc := range []struct {
		file, table string
		lpmValue    []byte // first entry's lpm value as written, if any
	}{
		{file: "table-entries-ternary-bmv2.p4c.json", table: "ingress.t_ternary"},
		{file: "table-entries-lpm-bmv2.p4c.json", table: "ingress.t_lpm", lpmValue: []byte{0x11}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			js, err := os.ReadFile("../../../shared/conformance/p4c-stf/" + tc.file)
			if err != nil {
				t.Skip(err)
			}
			var doc struct {
				Pipelines []struct {
					Tables []struct {
						Name    string `json:"name"`
						Entries []struct {
							Priority int `json:"priority"`
						} `json:"entries"`
					} `json:"tables"`
				} `json:"pipelines"`
			}
			if err := json.Unmarshal(js, &doc); err != nil {
				t.Fatal(err)
			}
			var prios []int
			for _, p := range doc.Pipelines {
				for _, tb := range p.Tables {
					if tb.Name == tc.table {
						for _, e := range tb.Entries {
							prios = append(prios, e.Priority)
						}
					}
				}
			}
			pl, err := Load(js, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := pl.Schema().ConstEntries[tc.table]
			if len(prios) == 0 || len(got) != len(prios) {
				t.Fatalf("%d declared entries, the JSON has %d", len(got), len(prios))
			}
			for i, e := range got {
				if want := int32(pipeline.ConstPriorityBase - prios[i]); e.Priority != want || !e.Const {
					t.Errorf("entry %d: priority %d const %v, want %d const", i, e.Priority, e.Const, want)
				}
			}
			if tc.lpmValue != nil && string(got[0].Match[0].Value) != string(tc.lpmValue) {
				t.Errorf("first lpm value %x, the JSON writes %x", got[0].Match[0].Value, tc.lpmValue)
			}
		})
	}
}
