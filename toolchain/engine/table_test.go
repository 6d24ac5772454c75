package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func keyDef(kind, field string) map[string]any {
	return map[string]any{"match_type": kind, "name": "h." + field, "target": []string{"h", field}, "mask": nil}
}

var setAction = map[string]any{"name": "set", "id": 1, "runtime_data": []any{map[string]any{"name": "v", "bitwidth": 8}},
	"primitives": []any{
		tAssign(tF("standard_metadata", "egress_spec"), tH("0x1")),
		tAssign(tF("h", "c"), tRD(0)),
	}}

func b16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }

type tEntry struct {
	m    []pipeline.Match
	prio int32
	v    byte
}

// TestMatchKinds checks each match kind and the ordering rules: longest
// prefix for lpm tables, larger priority for ternary/range/optional tables,
// first-added among equal priorities.
func TestMatchKinds(t *testing.T) {
	cases := []struct {
		name    string
		keys    []any
		entries []tEntry
		probes  map[[2]uint16]byte // (k, k2) -> c (0: miss)
	}{
		{"exact", []any{keyDef("exact", "k")}, []tEntry{
			{[]pipeline.Match{{Value: b16(0x0800)}}, 0, 1},
			{[]pipeline.Match{{Value: b16(0x86dd)}}, 0, 2},
		}, map[[2]uint16]byte{{0x0800, 0}: 1, {0x86dd, 0}: 2, {0x0801, 0}: 0}},
		{"two exact fields", []any{keyDef("exact", "k"), keyDef("exact", "k2")}, []tEntry{
			{[]pipeline.Match{{Value: b16(1)}, {Value: b16(2)}}, 0, 1},
			{[]pipeline.Match{{Value: b16(1)}, {Value: b16(3)}}, 0, 2},
		}, map[[2]uint16]byte{{1, 2}: 1, {1, 3}: 2, {2, 2}: 0}},
		{"lpm longest prefix wins", []any{keyDef("lpm", "k")}, []tEntry{
			{[]pipeline.Match{{Value: b16(0xab00), PrefixLen: 8}}, 0, 1},
			{[]pipeline.Match{{Value: b16(0xabc0), PrefixLen: 12}}, 0, 2},
			{[]pipeline.Match{{Value: b16(0xabcd), PrefixLen: 16}}, 0, 3},
			{[]pipeline.Match{{Wildcard: true}}, 0, 4},
		}, map[[2]uint16]byte{{0xabcd, 0}: 3, {0xabce, 0}: 2, {0xab01, 0}: 1, {0x1234, 0}: 4}},
		{"lpm with exact field", []any{keyDef("exact", "k2"), keyDef("lpm", "k")}, []tEntry{
			{[]pipeline.Match{{Value: b16(7)}, {Value: b16(0xab00), PrefixLen: 8}}, 0, 1},
			{[]pipeline.Match{{Value: b16(8)}, {Value: b16(0xabcd), PrefixLen: 16}}, 0, 2},
		}, map[[2]uint16]byte{{0xabcd, 7}: 1, {0xabcd, 8}: 2, {0xab00, 8}: 0}},
		{"ternary priority", []any{keyDef("ternary", "k")}, []tEntry{
			{[]pipeline.Match{{Value: b16(0x0100), Mask: b16(0xff00)}}, 10, 1},
			{[]pipeline.Match{{Value: b16(0x0101), Mask: b16(0xffff)}}, 20, 2},
			{[]pipeline.Match{{Value: b16(0x0001), Mask: b16(0x00ff)}}, 5, 3},
			{[]pipeline.Match{{Wildcard: true}}, 1, 4},
		}, map[[2]uint16]byte{{0x0101, 0}: 2, {0x0102, 0}: 1, {0x0201, 0}: 3, {0x0303, 0}: 4}},
		{"ternary equal priority: first added wins", []any{keyDef("ternary", "k")}, []tEntry{
			{[]pipeline.Match{{Value: b16(0x0100), Mask: b16(0xff00)}}, 10, 1},
			{[]pipeline.Match{{Value: b16(0x0001), Mask: b16(0x00ff)}}, 10, 2},
		}, map[[2]uint16]byte{{0x0101, 0}: 1, {0x0201, 0}: 2}},
		{"range", []any{keyDef("range", "k")}, []tEntry{
			{[]pipeline.Match{{Value: b16(10), High: b16(20)}}, 1, 1},
			{[]pipeline.Match{{Value: b16(15), High: b16(30)}}, 2, 2},
		}, map[[2]uint16]byte{{10, 0}: 1, {15, 0}: 2, {20, 0}: 2, {25, 0}: 2, {30, 0}: 2, {31, 0}: 0, {9, 0}: 0}},
		{"optional", []any{keyDef("optional", "k"), keyDef("exact", "k2")}, []tEntry{
			{[]pipeline.Match{{Value: b16(5)}, {Value: b16(1)}}, 2, 1},
			{[]pipeline.Match{{Wildcard: true}, {Value: b16(1)}}, 1, 2},
		}, map[[2]uint16]byte{{5, 1}: 1, {6, 1}: 2, {5, 2}: 0}},
		{"ternary with range and lpm fields", []any{keyDef("range", "k"), keyDef("lpm", "k2")}, []tEntry{
			{[]pipeline.Match{{Value: b16(0), High: b16(100)}, {Value: b16(0xff00), PrefixLen: 8}}, 5, 1},
			{[]pipeline.Match{{Value: b16(50), High: b16(60)}, {Wildcard: true}}, 9, 2},
		}, map[[2]uint16]byte{{10, 0xff11}: 1, {55, 0xff11}: 2, {55, 0x0011}: 2, {10, 0x0011}: 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := testProg{
				fields:  [][]any{u("k", 16), u("k2", 16), u("c", 8)},
				keys:    tc.keys,
				actions: []map[string]any{setAction},
			}
			pl := tp.load(t, Options{})
			tid, _ := pl.Lookup(KindTable, "ingress.t")
			for _, e := range tc.entries {
				err := pl.AddEntry(tid, pipeline.TableEntry{Match: e.m, Priority: e.prio, Action: pipeline.ActionCall{ActionID: 1, Params: [][]byte{{e.v}}}})
				if err != nil {
					t.Fatalf("AddEntry: %v", err)
				}
			}
			for probe, want := range tc.probes {
				in := append(append(b16(probe[0]), b16(probe[1])...), 0)
				got := run1(t, pl, in)
				if got[4] != want {
					t.Errorf("k=%#x k2=%#x: action wrote %d, want %d", probe[0], probe[1], got[4], want)
				}
			}
			// Every entry reads back, and deleting them all empties the table.
			es, err := pl.ReadEntries(tid)
			if err != nil || len(es) != len(tc.entries) {
				t.Fatalf("ReadEntries: %d entries, %v", len(es), err)
			}
			for _, e := range tc.entries {
				if err := pl.DeleteEntry(tid, e.m, e.prio); err != nil {
					t.Errorf("DeleteEntry: %v", err)
				}
			}
			for probe := range tc.probes {
				in := append(append(b16(probe[0]), b16(probe[1])...), 0)
				if got := run1(t, pl, in); got[4] != 0 {
					t.Errorf("after delete, k=%#x: hit", probe[0])
				}
			}
		})
	}
}

// TestConstEntriesAndDefaults: const entries (JSON priorities: smaller
// wins), immutable tables, const default actions, set/reset default.
func TestConstEntriesAndDefaults(t *testing.T) {
	tp := testProg{
		fields:  [][]any{u("k", 16), u("k2", 16), u("c", 8)},
		keys:    []any{keyDef("ternary", "k")},
		actions: []map[string]any{setAction},
		tableMore: map[string]any{"entries": []any{
			map[string]any{"match_key": []any{map[string]any{"match_type": "ternary", "key": "0x0100", "mask": "0xff00"}},
				"action_entry": map[string]any{"action_id": 1, "action_data": []string{"0x01"}}, "priority": 1},
			map[string]any{"match_key": []any{map[string]any{"match_type": "ternary", "key": "0x0101", "mask": "0xffff"}},
				"action_entry": map[string]any{"action_id": 1, "action_data": []string{"0x02"}}, "priority": 2},
		}},
	}
	pl := tp.load(t, Options{})
	tid, _ := pl.Lookup(KindTable, "ingress.t")
	if got := run1(t, pl, mustHex(t, "0101 0000 00")); got[4] != 1 {
		t.Errorf("const entry order: got %d, want 1 (the first entry wins)", got[4])
	}
	err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(5), Mask: b16(0xffff)}}, Priority: 1, Action: pipeline.ActionCall{ActionID: 1, Params: [][]byte{{9}}}})
	if ErrorCodeOf(err) != CodePermissionDenied {
		t.Errorf("add to a const table: %v", err)
	}
	es, _ := pl.ReadEntries(tid)
	if len(es) != 2 || !es[0].Const {
		t.Errorf("const entries read back: %+v", es)
	}
	// default action: a miss runs "a" (c untouched); set default to set(7)
	if got := run1(t, pl, mustHex(t, "0303 0000 00")); got[4] != 0 {
		t.Errorf("miss ran %d", got[4])
	}
	if err := pl.SetDefaultAction(tid, pipeline.ActionCall{ActionID: 1, Params: [][]byte{{7}}}); err != nil {
		t.Fatal(err)
	}
	if got := run1(t, pl, mustHex(t, "0303 0000 00")); got[4] != 7 {
		t.Errorf("new default ran %d, want 7", got[4])
	}
	if err := pl.ResetDefaultAction(tid); err != nil {
		t.Fatal(err)
	}
	if got := run1(t, pl, mustHex(t, "0303 0000 00")); got[4] != 0 {
		t.Errorf("reset default ran %d", got[4])
	}
	// A const default action cannot change.
	tp2 := testProg{fields: [][]any{u("k", 16), u("c", 8)}, keys: []any{keyDef("exact", "k")}, actions: []map[string]any{setAction},
		tableMore: map[string]any{"default_entry": map[string]any{"action_id": 0, "action_const": true, "action_data": []any{}, "action_entry_const": true}}}
	pl2 := tp2.load(t, Options{})
	tid2, _ := pl2.Lookup(KindTable, "ingress.t")
	if err := pl2.SetDefaultAction(tid2, pipeline.ActionCall{ActionID: 1, Params: [][]byte{{1}}}); ErrorCodeOf(err) != CodePermissionDenied {
		t.Errorf("set const default: %v", err)
	}
}

// TestBatch installs many entries in one batch and checks them all.
func TestBatch(t *testing.T) {
	tp := testProg{fields: [][]any{u("k", 16), u("k2", 16), u("c", 8)}, keys: []any{keyDef("exact", "k")}, actions: []map[string]any{setAction}}
	pl := tp.load(t, Options{})
	tid, _ := pl.Lookup(KindTable, "ingress.t")
	err := pl.Batch(func(tx *Txn) error {
		for i := 0; i < 1000; i++ {
			if err := tx.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(uint16(i))}}, Action: pipeline.ActionCall{ActionID: 1, Params: [][]byte{{byte(i)}}}}); err != nil {
				return fmt.Errorf("entry %d: %v", i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint16{0, 1, 500, 999} {
		if got := run1(t, pl, append(append(b16(i), 0, 0), 0)); got[4] != byte(i) {
			t.Errorf("entry %d: got %d", i, got[4])
		}
	}
	if err := pl.ClearTable(tid); err != nil {
		t.Fatal(err)
	}
	if es, _ := pl.ReadEntries(tid); len(es) != 0 {
		t.Errorf("ClearTable left %d entries", len(es))
	}
}

// TestActionSelector: an indirect_ws table whose entries name members or a
// group; the selector's hash (identity of h.k here) modulo the group size
// picks the member, in group order.
func TestActionSelector(t *testing.T) {
	tp := testProg{
		fields:    [][]any{u("k", 16), u("k2", 16), u("c", 8)},
		keys:      []any{keyDef("exact", "k2")},
		actions:   []map[string]any{setAction},
		tableType: "indirect_ws",
		tableMore: map[string]any{"action_profile": "ap"},
		profiles: []any{map[string]any{"name": "ap", "id": 0, "max_size": 16,
			"selector": map[string]any{"algo": "identity", "input": []any{tF("h", "k")}}}},
	}
	pl := tp.load(t, Options{})
	tid, _ := pl.Lookup(KindTable, "ingress.t")
	ap, ok := pl.Lookup(KindActionProfile, "ap")
	if !ok {
		t.Fatal("no action profile ap")
	}
	for m := uint32(1); m <= 3; m++ {
		if err := pl.SetProfileMember(ap, m, pipeline.ActionCall{ActionID: 1, Params: [][]byte{{byte(m * 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.SetProfileGroup(ap, 100, []uint32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(7)}}, Indirect: pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: 100}}); err != nil {
		t.Fatal(err)
	}
	if err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(8)}}, Indirect: pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: 2}}); err != nil {
		t.Fatal(err)
	}
	for k := uint16(0); k < 6; k++ {
		got := run1(t, pl, append(append(b16(k), b16(7)...), 0))
		if want := byte(10 * (k%3 + 1)); got[4] != want {
			t.Errorf("group, k=%d: member ran %d, want %d", k, got[4], want)
		}
	}
	if got := run1(t, pl, append(append(b16(0), b16(8)...), 0)); got[4] != 20 {
		t.Errorf("member entry ran %d", got[4])
	}
	// Changing a member changes what entries referring to it run.
	if err := pl.SetProfileMember(ap, 2, pipeline.ActionCall{ActionID: 1, Params: [][]byte{{99}}}); err != nil {
		t.Fatal(err)
	}
	if got := run1(t, pl, append(append(b16(0), b16(8)...), 0)); got[4] != 99 {
		t.Errorf("modified member ran %d", got[4])
	}
	if err := pl.DeleteProfileMember(ap, 2); ErrorCodeOf(err) != CodeFailedPrecondition {
		t.Errorf("deleting a member in use: %v", err)
	}
	if err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(9)}}, Indirect: pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: 42}}); ErrorCodeOf(err) != CodeNotFound {
		t.Errorf("entry naming a missing member: %v", err)
	}
	if err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(9)}}, Action: pipeline.ActionCall{ActionID: 1, Params: [][]byte{{1}}}}); ErrorCodeOf(err) != CodeInvalidArgument {
		t.Errorf("direct action in an indirect table: %v", err)
	}
	es, _ := pl.ReadEntries(tid)
	if len(es) != 2 || es[0].Indirect != (pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: 100}) {
		t.Errorf("entries read back: %+v", es)
	}
}

// TestIndirectDefault: an indirect table's default entry can be a member
// or a group of its profile (BMv2's table_indirect_set_default and
// ..._with_group): a miss runs it, the member or group is then in use, and
// resetting the default (or setting an action) undoes it.
func TestIndirectDefault(t *testing.T) {
	tp := testProg{
		fields:    [][]any{u("k", 16), u("k2", 16), u("c", 8)},
		keys:      []any{keyDef("exact", "k2")},
		actions:   []map[string]any{setAction},
		tableType: "indirect_ws",
		tableMore: map[string]any{"action_profile": "ap"},
		profiles: []any{map[string]any{"name": "ap", "id": 0, "max_size": 16,
			"selector": map[string]any{"algo": "identity", "input": []any{tF("h", "k")}}}},
	}
	pl := tp.load(t, Options{})
	tid, _ := pl.Lookup(KindTable, "ingress.t")
	ap, _ := pl.Lookup(KindActionProfile, "ap")
	for m := uint32(1); m <= 2; m++ {
		if err := pl.SetProfileMember(ap, m, pipeline.ActionCall{ActionID: 1, Params: [][]byte{{byte(m * 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.SetProfileGroup(ap, 5, []uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := pl.SetProfileGroup(ap, 6, nil); err != nil {
		t.Fatal(err)
	}
	member := func(id uint32) pipeline.IndirectRef {
		return pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: id}
	}
	group := func(id uint32) pipeline.IndirectRef {
		return pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: id}
	}
	miss := func(k uint16) byte { return run1(t, pl, append(append(b16(k), b16(99)...), 0))[4] }
	for _, tc := range []struct {
		name string
		ref  pipeline.IndirectRef
		code ErrorCode // of the set; 0: it succeeds
		runs [2]byte
	}{
		{"member", member(2), 0, [2]byte{20, 20}},
		{"group: the selector picks", group(5), 0, [2]byte{10, 20}},
		{"empty group: nothing runs", group(6), 0, [2]byte{0, 0}},
		{"no such member", member(9), CodeNotFound, [2]byte{0, 0}},
		{"no such group", group(9), CodeNotFound, [2]byte{0, 0}},
		{"no kind", pipeline.IndirectRef{}, CodeInvalidArgument, [2]byte{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := pl.ResetDefaultAction(tid); err != nil {
				t.Fatal(err)
			}
			err := pl.SetDefaultIndirect(tid, tc.ref)
			if tc.code != 0 {
				if ErrorCodeOf(err) != tc.code {
					t.Fatalf("set: %v, want code %v", err, tc.code)
				}
				if ref, _ := pl.DefaultIndirect(tid); ref.Kind != pipeline.IndirectNone {
					t.Errorf("a refused default was kept: %+v", ref)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if ref, _ := pl.DefaultIndirect(tid); ref != tc.ref {
				t.Errorf("read back %+v", ref)
			}
			for k, want := range tc.runs {
				if got := miss(uint16(k)); got != want {
					t.Errorf("miss, k=%d: ran %d, want %d", k, got, want)
				}
			}
		})
	}
	// In use while it is the default; free again once reset.
	if err := pl.SetDefaultIndirect(tid, member(1)); err != nil {
		t.Fatal(err)
	}
	if err := pl.SetProfileGroup(ap, 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := pl.DeleteProfileMember(ap, 1); ErrorCodeOf(err) != CodeFailedPrecondition {
		t.Errorf("deleting the default member: %v", err)
	}
	if err := pl.SetDefaultIndirect(tid, group(6)); err != nil {
		t.Fatal(err)
	}
	if err := pl.DeleteProfileGroup(ap, 6); ErrorCodeOf(err) != CodeFailedPrecondition {
		t.Errorf("deleting the default group: %v", err)
	}
	if err := pl.DeleteProfileMember(ap, 1); err != nil {
		t.Errorf("member 1 no longer the default: %v", err)
	}
	if err := pl.ResetDefaultAction(tid); err != nil {
		t.Fatal(err)
	}
	if err := pl.DeleteProfileGroup(ap, 6); err != nil {
		t.Errorf("after the reset: %v", err)
	}
	if ref, _ := pl.DefaultIndirect(tid); ref.Kind != pipeline.IndirectNone {
		t.Errorf("after the reset: %+v", ref)
	}
}

// TestAddEntryAt: entries restored with given handles (BMv2's state
// dumps); the indexes below that were never given out become free with
// version 0, and later entries take the lowest free index.
func TestAddEntryAt(t *testing.T) {
	tp := testProg{fields: [][]any{u("k", 16), u("k2", 16), u("c", 8)}, keys: []any{keyDef("exact", "k")}, actions: []map[string]any{setAction}}
	pl := tp.load(t, Options{})
	tid, _ := pl.Lookup(KindTable, "ingress.t")
	entry := func(k uint16) pipeline.TableEntry {
		return pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(k)}}, Action: pipeline.ActionCall{ActionID: 1, Params: [][]byte{{byte(k)}}}}
	}
	steps := []struct {
		key     uint16
		at      int64 // -1: AddEntry
		want    uint32
		wantErr string
	}{
		{1, 0x03000002, 0x03000002, ""},
		{2, 0x01000005, 0x01000005, ""},
		{3, 0x00000002, 0, "handle in use"},
		{3, -1, 0, ""},
		{4, 0x00000001, 1, ""},
		{5, -1, 3, ""},
		{6, -1, 4, ""},
		{7, -1, 6, ""},
		{1, 0x00000009, 0, "already has this entry"},
	}
	for i, s := range steps {
		var err error
		if s.at < 0 {
			err = pl.AddEntry(tid, entry(s.key))
		} else {
			err = pl.AddEntryAt(tid, entry(s.key), uint32(s.at))
		}
		if s.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Errorf("step %d: error %v, want %q", i, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		e, err := pl.ReadEntry(tid, entry(s.key).Match, 0)
		if err != nil || e.Handle != s.want {
			t.Errorf("step %d: handle %#x (%v), want %#x", i, e.Handle, err, s.want)
		}
	}
	if _, err := pl.EntryByHandle(tid, 0x02000002); err == nil {
		t.Error("a stale version of a restored handle is accepted")
	}
}

// TestEntryTimeout: in a table with support_timeout, an entry's ageing
// timeout is set by its handle's index (any version), read back with the
// time since the entry was last hit, added or given its timeout; tables
// without support_timeout refuse.
func TestEntryTimeout(t *testing.T) {
	var now int64
	clock := func() int64 { return now }
	for _, ageing := range []bool{true, false} {
		tp := testProg{fields: [][]any{u("k", 16), u("k2", 16), u("c", 8)}, keys: []any{keyDef("exact", "k")},
			actions: []map[string]any{setAction}, tableMore: map[string]any{"support_timeout": ageing}}
		pl := tp.load(t, Options{Clock: clock})
		tid, _ := pl.Lookup(KindTable, "ingress.t")
		if info, _ := pl.Table(tid); info.SupportTimeout != ageing {
			t.Fatalf("SupportTimeout %v, want %v", info.SupportTimeout, ageing)
		}
		now = 1e9
		if err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: b16(7)}},
			Action: pipeline.ActionCall{ActionID: 1, Params: [][]byte{{3}}}}); err != nil {
			t.Fatal(err)
		}
		err := pl.SetEntryTimeout(tid, 0x05000000, 500)
		if !ageing {
			if err == nil {
				t.Error("a table without support_timeout takes a timeout")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			advance int64
			hit     bool
			since   uint64
		}{
			{250e6, false, 250},
			{100e6, true, 0},
			{40e6, false, 40},
		} {
			now += step.advance
			if step.hit {
				run1(t, pl, []byte{0, 7, 0, 0, 0})
			}
			ms, since, err := pl.EntryTimeout(tid, 0)
			if err != nil || ms != 500 || since != step.since {
				t.Errorf("after %d ns (hit %v): timeout %d, %d ms since hit (%v); want 500, %d", step.advance, step.hit, ms, since, err, step.since)
			}
		}
		if _, _, err := pl.EntryTimeout(tid, 3); !errors.Is(err, ErrInvalidHandle) {
			t.Errorf("no entry at index 3: %v", err)
		}
	}
}
