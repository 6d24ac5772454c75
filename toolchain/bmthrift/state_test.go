package bmthrift

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/bmthrift/bmstate"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func ternary(v, m []byte) *standard.BmMatchParam {
	return &standard.BmMatchParam{Type: standard.BmMatchParamType_TERNARY, Ternary: &standard.BmMatchParamTernary{Key: v, Mask: m}}
}

func lpm(v []byte, plen int32) *standard.BmMatchParam {
	return &standard.BmMatchParam{Type: standard.BmMatchParamType_LPM, Lpm: &standard.BmMatchParamLPM{Key: v, PrefixLength: plen}}
}

func rangeKey(lo, hi []byte) *standard.BmMatchParam {
	return &standard.BmMatchParam{Type: standard.BmMatchParamType_RANGE, Range: &standard.BmMatchParamRange{Start: lo, End_: hi}}
}

func prio(p int32) *standard.BmAddEntryOptions { return &standard.BmAddEntryOptions{Priority: &p} }

// fill writes one of everything a dump holds through the Thrift runtime,
// with holes in the handles (deleted entries, members, groups).
func fill(t *testing.T, r *rig) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	add := func(table string, key standard.BmMatchParams, action string, data standard.BmActionData, opts *standard.BmAddEntryOptions) standard.BmEntryHandle {
		t.Helper()
		h, err := r.std.BmMtAddEntry(ctx, 0, table, key, action, data, opts)
		must(err)
		return h
	}
	for i := byte(1); i <= 3; i++ {
		add("CliIngress.l2", standard.BmMatchParams{exact(mac(i)...)}, "CliIngress.forward", standard.BmActionData{{i}}, nil)
	}
	must(r.std.BmMtDeleteEntry(ctx, 0, "CliIngress.l2", 0))
	must(r.std.BmMtDeleteEntry(ctx, 0, "CliIngress.l2", 1))
	add("CliIngress.l2", standard.BmMatchParams{exact(mac(9)...)}, "CliIngress.set_mcast", standard.BmActionData{{0, 7}}, nil)
	must(r.std.BmMtSetDefaultAction(ctx, 0, "CliIngress.l2", "CliIngress.forward", standard.BmActionData{{5}}))
	add("CliIngress.acl", standard.BmMatchParams{ternary([]byte{8, 0}, []byte{0xff, 0})}, "CliIngress.acl_deny", nil, prio(10))
	add("CliIngress.acl", standard.BmMatchParams{ternary([]byte{8, 6}, []byte{0xff, 0xff})}, "CliIngress.acl_permit", nil, prio(5))
	add("CliIngress.src_rewrite", standard.BmMatchParams{lpm([]byte{10, 0, 0, 0, 0, 1}, 24)}, "CliIngress.set_src",
		standard.BmActionData{{0, 0, 0, 0, 0, 0xaa}}, nil)
	add("CliIngress.type_range", standard.BmMatchParams{rangeKey([]byte{8, 0}, []byte{8, 0xff})}, "CliIngress.mark_type",
		standard.BmActionData{{0x12, 0x34}}, prio(3))
	fh := add("CliIngress.flows", standard.BmMatchParams{exact(mac(1)...)}, "CliIngress.policed_forward", standard.BmActionData{{2}}, nil)
	must(r.std.BmMtSetMeterRates(ctx, 0, "CliIngress.flows", fh, []*standard.BmMeterRateConfig{
		{UnitsPerMicros: 0.0001, BurstSize: 1000}, {UnitsPerMicros: 0.0005, BurstSize: 2000}}))
	must(r.std.BmMeterSetRates(ctx, 0, "CliIngress.port_meter", 3, []*standard.BmMeterRateConfig{
		{UnitsPerMicros: 1e-6, BurstSize: 5}, {UnitsPerMicros: 2e-6, BurstSize: 10}}))
	for _, port := range []byte{1, 2, 3} {
		_, err := r.std.BmMtActProfAddMember(ctx, 0, "CliIngress.dst_profile", "CliIngress.forward", standard.BmActionData{{port}})
		must(err)
	}
	must(r.std.BmMtActProfDeleteMember(ctx, 0, "CliIngress.dst_profile", 1))
	_, err := r.std.BmMtIndirectAddEntry(ctx, 0, "CliIngress.by_dst", standard.BmMatchParams{exact(mac(1)...)}, 2, nil)
	must(err)
	must(r.std.BmMtIndirectSetDefaultMember(ctx, 0, "CliIngress.by_dst", 0))
	for _, d := range []standard.BmActionData{{{0, 0, 0, 0, 0, 0xaa}}, {{5}}} {
		action := "CliIngress.set_src"
		if len(d[0]) == 1 {
			action = "CliIngress.set_tag"
		}
		_, err := r.std.BmMtActProfAddMember(ctx, 0, "CliIngress.src_selector", action, d)
		must(err)
	}
	for i := 0; i < 3; i++ {
		_, err := r.std.BmMtActProfCreateGroup(ctx, 0, "CliIngress.src_selector")
		must(err)
	}
	must(r.std.BmMtActProfDeleteGroup(ctx, 0, "CliIngress.src_selector", 1))
	must(r.std.BmMtActProfAddMemberToGroup(ctx, 0, "CliIngress.src_selector", 1, 2))
	must(r.std.BmMtActProfAddMemberToGroup(ctx, 0, "CliIngress.src_selector", 0, 2))
	_, err = r.std.BmMtIndirectWsAddEntry(ctx, 0, "CliIngress.by_src", standard.BmMatchParams{exact(7)}, 2, nil)
	must(err)
}

func dumpOf(t *testing.T, r *rig) []byte {
	t.Helper()
	s, err := r.std.BmSerializeState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

// TestSerializeRestoreRoundTrip: a dump restored into a fresh switch
// gives the same tables (entries with their handles, keys as written,
// defaults), profiles and meters, and dumps byte for byte the same.
func TestSerializeRestoreRoundTrip(t *testing.T) {
	a := newRig(t)
	fill(t, a)
	dump := dumpOf(t, a)
	sum := md5.Sum(a.json)
	if !bytes.HasPrefix(dump, append([]byte("06062016_0\n"), append(sum[:], '\n')...)) {
		t.Fatalf("dump starts %q", dump[:min(len(dump), 40)])
	}
	for _, want := range []string{
		// l2: handles 0 and 1 deleted (versions bumped), 2 kept; the new
		// entry took index 0, version 1
		"CliIngress.l2\nCliIngress.acl\n2\n0\n1\n000000000009\n",
		"2\n0\n000000000003\n",
		// src_rewrite keeps the key's bits past the prefix, as written
		"0a0000000001\n24\n",
		// acl: the key masked, BMv2's priority
		"0800\nff00\n10\n",
		// the selector: group 2 holds members 0 and 1, group 1 is gone
		"2\n2\n0\n1\n",
	} {
		if !bytes.Contains(dump, []byte(want)) {
			t.Errorf("the dump lacks %q", want)
		}
	}
	b := newRig(t)
	if err := b.srv.RestoreState(dump); err != nil {
		t.Fatal(err)
	}
	if again := dumpOf(t, b); !bytes.Equal(again, dump) {
		t.Errorf("restored and dumped again:\n%q\nwas\n%q", again, dump)
	}
	ctx := context.Background()
	for _, table := range []string{"CliIngress.l2", "CliIngress.acl", "CliIngress.src_rewrite", "CliIngress.type_range",
		"CliIngress.flows", "CliIngress.by_dst", "CliIngress.by_src"} {
		ea, err := a.std.BmMtGetEntries(ctx, 0, table)
		if err != nil {
			t.Fatal(err)
		}
		eb, err := b.std.BmMtGetEntries(ctx, 0, table)
		if err != nil {
			t.Fatal(err)
		}
		if len(ea) != len(eb) {
			t.Fatalf("%s: %d entries, restored %d", table, len(ea), len(eb))
		}
		for i := range ea {
			if !ea[i].Equals(eb[i]) {
				t.Errorf("%s: entry %v, restored %v", table, ea[i], eb[i])
			}
		}
		da, _ := a.std.BmMtGetDefaultEntry(ctx, 0, table)
		db, _ := b.std.BmMtGetDefaultEntry(ctx, 0, table)
		if !da.Equals(db) {
			t.Errorf("%s: default %v, restored %v", table, da, db)
		}
	}
	ra, _ := a.std.BmMtGetMeterRates(ctx, 0, "CliIngress.flows", 0)
	rb, err := b.std.BmMtGetMeterRates(ctx, 0, "CliIngress.flows", 0)
	if err != nil || len(rb) != 2 || !ra[0].Equals(rb[0]) || !ra[1].Equals(rb[1]) {
		t.Errorf("direct meter %v, restored %v (%v)", ra, rb, err)
	}
	if m, err := b.std.BmMeterGetRates(ctx, 0, "CliIngress.port_meter", 3); err != nil || len(m) != 2 || m[1].BurstSize != 10 {
		t.Errorf("meter cell: %v %v", m, err)
	}
	// the next handles follow from the restored ones: the lowest free
	// index (1, version 1 in the first switch, 0 after a restore: BMv2
	// does not dump the versions of free indexes)
	h, err := b.std.BmMtAddEntry(ctx, 0, "CliIngress.l2", standard.BmMatchParams{exact(mac(20)...)}, "CliIngress.drop", nil, nil)
	if err != nil || h != 1 {
		t.Errorf("next handle %#x %v, want 1", h, err)
	}
	if m, err := b.std.BmMtActProfAddMember(ctx, 0, "CliIngress.dst_profile", "CliIngress.drop", nil); err != nil || m != 1 {
		t.Errorf("next member %d %v, want 1", m, err)
	}
	if g, err := b.std.BmMtActProfCreateGroup(ctx, 0, "CliIngress.src_selector"); err != nil || g != 1 {
		t.Errorf("next group %d %v, want 1", g, err)
	}
}

// TestSerializeProfileSizes: a profile's sizes and use counts as BMv2
// keeps them: sizes grow with the handles given out and only a reset
// shrinks them; counts are the groups, entries and defaults using each.
func TestSerializeProfileSizes(t *testing.T) {
	r := newRig(t)
	fill(t, r)
	dump := dumpOf(t, r)
	v, err := r.srv.current()
	if err != nil {
		t.Fatal(err)
	}
	fwd, _ := v.table("CliIngress.by_dst")
	a, _ := fwd.action("CliIngress.forward")
	// dst_profile: size 3, members 0 and 2 (1 deleted); member 0 is the
	// default (1 use), member 2 the entry's (1 use); no groups
	want := fmt.Sprintf("3\n2\n0\n%d\n1\n1\n__NULL__\n2\n%d\n1\n3\n__NULL__\n3\n1\n0\n1\n0\n0\n", a.ID, a.ID)
	if !bytes.Contains(dump, []byte(want)) {
		t.Errorf("dst_profile: the dump lacks %q:\n%q", want, dump)
	}
	// src_selector: members 0 and 1, each in group 2; groups 0..2 given
	// out (1 deleted), group 2 used by the entry
	want = "__NULL__\n2\n1\n1\n3\n0\n0\n1\n2\n0\n0\n2\n2\n0\n1\n"
	if !bytes.Contains(dump, []byte(want)) {
		t.Errorf("src_selector: the dump lacks %q:\n%q", want, dump)
	}
	if err := r.std.BmResetState(context.Background()); err != nil {
		t.Fatal(err)
	}
	// every profile back to size 0: "0 sizes, 0 members, 0 counts, 0 counts, 0 groups"
	if dump = dumpOf(t, r); bytes.Count(dump, []byte("\n0\n0\n0\n0\n0\n")) < 1 || bytes.Contains(dump, []byte("__NULL__\n3\n")) {
		t.Errorf("after reset_state: %q", dump)
	}
}

// TestRestoreRefuses: a dump of another program, a malformed one, and
// one the program's objects cannot take are refused with an error.
func TestRestoreRefuses(t *testing.T) {
	a := newRig(t)
	fill(t, a)
	dump := dumpOf(t, a)
	head := len(bmstate.Version) + 1 + 17
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "incompatible version"},
		{"another program", append([]byte(bmstate.Version+"\n"+strings.Repeat("\x01", 16)+"\n"), dump[head:]...), "does not match"},
		{"truncated", dump[:bytes.IndexByte(dump[len(dump)/2:], '\n')+len(dump)/2+1], "ends early"},
		{"entry of a missing member", bytes.Replace(dump, []byte("000000000001\n2\n0\n"), []byte("000000000001\n1\n0\n"), 1),
			"has no member 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "entry of a missing member" && bytes.Equal(tc.data, dump) {
				t.Fatal("edit not applied")
			}
			b := newRig(t)
			err := b.srv.RestoreState(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestBMKeyLayout(t *testing.T) {
	l, err := bmstate.NewLayout(program(t).JSON)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table  string
		params standard.BmMatchParams
		key    string
		mask   string
		plen   int
	}{
		{"CliIngress.l2", standard.BmMatchParams{exact(1, 2, 3, 4, 5, 6)}, "010203040506", "", 0},
		{"CliIngress.src_rewrite", standard.BmMatchParams{lpm([]byte{10, 0, 0, 0, 0, 1}, 12)}, "0a0000000001", "", 12},
		{"CliIngress.acl", standard.BmMatchParams{ternary([]byte{8, 6}, []byte{0xff, 0})}, "0800", "ff00", 0},
		{"CliIngress.type_range", standard.BmMatchParams{rangeKey([]byte{1}, []byte{2, 0})}, "0001", "0200", 0},
		{"CliIngress.by_src", standard.BmMatchParams{exact(7)}, "07", "", 0},
	} {
		lt := l.Table(tc.table)
		key, mask, plen := bmKey(lt, tc.params)
		if got := (struct {
			k, m string
			p    int
		}{hex.EncodeToString(key), hex.EncodeToString(mask), plen}); got.k != tc.key || got.m != tc.mask || got.p != tc.plen {
			t.Errorf("%s: key %s mask %s plen %d, want %s %s %d", tc.table, got.k, got.m, got.p, tc.key, tc.mask, tc.plen)
		}
		back, err := thriftKeyOf(lt, &bmstate.Entry{Key: key, Mask: mask, PrefixLen: plen})
		if err != nil {
			t.Errorf("%s: %v", tc.table, err)
			continue
		}
		for i := range back {
			want := tc.params[i]
			if want.Type == standard.BmMatchParamType_TERNARY {
				continue // the key comes back masked
			}
			if want.Type == standard.BmMatchParamType_RANGE {
				want = rangeKey([]byte{0, 1}, []byte{2, 0})
			}
			if !back[i].Equals(want) {
				t.Errorf("%s: back %v, want %v", tc.table, back[i], want)
			}
		}
	}
}

// TestEntryTimeoutThrift: table_set_timeout on a table with
// support_timeout, by the handle's index; the entry's life read back, the
// timeout dumped and restored; other tables answer AGEING_DISABLED.
func TestEntryTimeoutThrift(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	h, err := r.std.BmMtAddEntry(ctx, 0, "CliIngress.aged", standard.BmMatchParams{exact(0, 5)}, "CliIngress.set_tag",
		standard.BmActionData{{1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := r.std.BmMtGetEntry(ctx, 0, "CliIngress.aged", h); e.Life != nil {
		t.Errorf("life before a timeout: %v", e.Life)
	}
	for _, tc := range []struct {
		name  string
		table string
		h     standard.BmEntryHandle
		want  standard.TableOperationErrorCode
	}{
		{"by handle", "CliIngress.aged", h, 0},
		{"another version", "CliIngress.aged", h | 0x03000000, 0},
		{"no entry", "CliIngress.aged", 5, standard.TableOperationErrorCode_INVALID_HANDLE},
		{"no timeouts", "CliIngress.l2", 0, standard.TableOperationErrorCode_AGEING_DISABLED},
	} {
		err := r.std.BmMtSetEntryTTL(ctx, 0, tc.table, tc.h, 1500)
		if tableCode(err) != tc.want || (tc.want == 0 && err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	e, err := r.std.BmMtGetEntry(ctx, 0, "CliIngress.aged", h)
	if err != nil || e.Life == nil || e.Life.TimeoutMs != 1500 || e.Life.TimeSinceHitMs < 0 || e.Life.TimeSinceHitMs > 5000 {
		t.Fatalf("life %v (%v)", e, err)
	}
	dump := dumpOf(t, r)
	if !bytes.Contains(dump, []byte("CliIngress.aged\n__NULL__\n1\n0\n0\n0005\n")) || !bytes.Contains(dump, []byte("\n1500\n")) {
		t.Errorf("the dump lacks the timeout: %q", dump)
	}
	b := newRig(t)
	if err := b.srv.RestoreState(dump); err != nil {
		t.Fatal(err)
	}
	if e, err := b.std.BmMtGetEntry(ctx, 0, "CliIngress.aged", h); err != nil || e.Life == nil || e.Life.TimeoutMs != 1500 {
		t.Errorf("restored: %v %v", e, err)
	}
}

// TestStoredKey: a key as BMv2 keeps it: values in their field's width,
// static masks applied, ternary values masked, lpm values as written.
func TestStoredKey(t *testing.T) {
	tb := &tbl{info: pipeline.TableInfo{Keys: []pipeline.KeyFieldInfo{
		{Kind: pipeline.MatchExact, Bitwidth: 48, Mask: []byte{1, 1, 1, 1, 1, 1}},
		{Kind: pipeline.MatchLPM, Bitwidth: 9},
		{Kind: pipeline.MatchTernary, Bitwidth: 16, Mask: []byte{0xff, 0xf0}},
		{Kind: pipeline.MatchRange, Bitwidth: 16},
		{Kind: pipeline.MatchValid, Bitwidth: 1},
	}}}
	in := standard.BmMatchParams{
		exact(0xa5, 0xc3, 0xa5, 0xc3, 0xa5, 0xd9),
		lpm([]byte{0xff, 0xff}, 4),
		ternary([]byte{0x12, 0x3f}, []byte{0xff, 0x0f}),
		rangeKey([]byte{1}, []byte{0x10, 0}),
		{Type: standard.BmMatchParamType_VALID, Valid: &standard.BmMatchParamValid{Key: true}},
	}
	want := standard.BmMatchParams{
		exact(1, 1, 1, 1, 1, 1),
		lpm([]byte{0x01, 0xff}, 4),
		ternary([]byte{0x12, 0x00}, []byte{0xff, 0x0f}),
		rangeKey([]byte{0, 1}, []byte{0x10, 0}),
		{Type: standard.BmMatchParamType_VALID, Valid: &standard.BmMatchParamValid{Key: true}},
	}
	got := tb.storedKey(in)
	for i := range want {
		if !got[i].Equals(want[i]) {
			t.Errorf("field %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestRestoreMutated: dumps with one word changed are refused or
// restored, never a panic; one restored dumps again as a valid dump.
func TestRestoreMutated(t *testing.T) {
	a := newRig(t)
	fill(t, a)
	dump := dumpOf(t, a)
	head := len(bmstate.Version) + 1 + 17
	words := strings.Fields(string(dump[head:]))
	pool := []string{"0", "1", "2", "-1", "255", "256", "16777216", "16777218", "4294967295", "99999999999",
		"ff", "0a0000000001", "__NULL__", "CliIngress.l2", "CliIngress.acl", "nan", "1e-06", "x"}
	b := newRig(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 11))
	restored := 0
	for i := 0; i < 400; i++ {
		w := slices.Clone(words)
		switch k := r.IntN(len(w)); r.IntN(3) {
		case 0:
			w[k] = pool[r.IntN(len(pool))]
		case 1:
			w = slices.Delete(w, k, k+1)
		default:
			w = slices.Insert(w, k, pool[r.IntN(len(pool))])
		}
		mutated := append(append([]byte(nil), dump[:head]...), strings.Join(w, "\n")+"\n"...)
		if err := b.srv.RestoreState(mutated); err == nil {
			restored++
			again := dumpOf(t, b)
			v, _ := b.srv.current()
			l, _ := v.layout()
			if _, err := bmstate.Read(again, l, md5.Sum(b.json)); err != nil {
				t.Errorf("mutation %d restored, its dump does not read: %v", i, err)
			}
		}
		if err := b.std.BmResetState(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 400 mutated dumps restored", restored)
}

// TestSerializeIsOneState: a dump taken while a P4Runtime client writes
// (P4Runtime does not take the Thrift server's lock) is one state of the
// switch. The writer adds a flows entry only after the l2 entry of the
// same MAC and deletes it before, so in every state the switch passes
// through the flows MACs are a subset of the l2 MACs; a dump that read l2
// before a write and flows after another would break that.
func TestSerializeIsOneState(t *testing.T) {
	r := newRig(t)
	c, _, _ := r.target.Current()
	pl := c.Engine
	id := func(kind engine.ObjectKind, name string) int {
		t.Helper()
		n, ok := pl.Lookup(kind, name)
		if !ok {
			t.Fatalf("%s not in the engine", name)
		}
		return n
	}
	l2, flows := id(engine.KindTable, "CliIngress.l2"), id(engine.KindTable, "CliIngress.flows")
	forward, policed := id(engine.KindAction, "CliIngress.forward"), id(engine.KindAction, "CliIngress.policed_forward")
	entry := func(m byte, action int) pipeline.TableEntry {
		return pipeline.TableEntry{Match: []pipeline.Match{{Value: mac(m)}}, Action: pipeline.ActionCall{ActionID: action, Params: [][]byte{{0, 1}}}}
	}
	stop := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		defer close(failed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m := byte(i%8 + 1)
			steps := []func() error{
				func() error { return pl.AddEntry(l2, entry(m, forward)) },
				func() error { return pl.AddEntry(flows, entry(m, policed)) },
				func() error { return pl.DeleteEntry(flows, []pipeline.Match{{Value: mac(m)}}, 0) },
				func() error { return pl.DeleteEntry(l2, []pipeline.Match{{Value: mac(m)}}, 0) },
			}
			for _, step := range steps {
				if err := step(); err != nil {
					failed <- err
					return
				}
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-failed; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()
	lay, err := bmstate.NewLayout(r.json)
	if err != nil {
		t.Fatal(err)
	}
	macs := func(st *bmstate.State, table string) map[string]bool {
		got := map[string]bool{}
		for _, ts := range st.Tables {
			if ts.Name == table {
				for _, e := range ts.Entries {
					got[hex.EncodeToString(e.Key)] = true
				}
			}
		}
		return got
	}
	for range 300 {
		dump := dumpOf(t, r)
		st, err := bmstate.Read(dump, lay, md5.Sum(r.json))
		if err != nil {
			t.Fatal(err)
		}
		inL2 := macs(st, "CliIngress.l2")
		for k := range macs(st, "CliIngress.flows") {
			if !inL2[k] {
				t.Fatalf("the dump has flows entry %s without its l2 entry: a state the switch never had", k)
			}
		}
	}
}
