package bmstate

import (
	"bytes"
	"crypto/md5"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testProgram is a BMv2 JSON program with one object of each kind a dump
// holds: an exact table with a direct meter, an lpm table keyed on an
// exact field too, a ternary table with a valid key and a static mask, a
// range table, an indirect table on a selector, a hit/miss table, an
// indexed meter array.
const testProgram = `{
  "header_types": [
    {"name": "h_t", "fields": [["a", 48, false], ["b", 9, false], ["c", 16, false]]}
  ],
  "headers": [{"name": "h", "header_type": "h_t"}],
  "actions": [
    {"name": "NoAction", "id": 0, "runtime_data": []},
    {"name": "fwd", "id": 1, "runtime_data": [{"name": "port", "bitwidth": 9}]},
    {"name": "two", "id": 2, "runtime_data": [{"name": "x", "bitwidth": 48}, {"name": "y", "bitwidth": 8}]}
  ],
  "meter_arrays": [
    {"name": "ing.dm", "id": 0, "is_direct": true, "rate_count": 2, "type": "bytes", "size": 4, "binding": "ing.ex"},
    {"name": "ing.m", "id": 1, "is_direct": false, "rate_count": 2, "type": "packets", "size": 2}
  ],
  "pipelines": [
    {"name": "ingress", "action_profiles": [{"name": "ing.sel", "max_size": 8, "selector": {"algo": "crc16", "input": []}}],
     "tables": [
      {"name": "ing.ex", "match_type": "exact", "type": "simple", "max_size": 4,
       "key": [{"match_type": "exact", "target": ["h", "a"], "mask": null}],
       "action_ids": [1, 0], "actions": ["fwd", "NoAction"],
       "next_tables": {"fwd": "ing.lpm", "NoAction": null}, "base_default_next": "ing.lpm",
       "direct_meters": "ing.dm",
       "default_entry": {"action_id": 0, "action_const": false, "action_data": [], "action_entry_const": false}},
      {"name": "ing.lpm", "match_type": "lpm", "type": "simple", "max_size": 8,
       "key": [{"match_type": "lpm", "target": ["h", "a"]}, {"match_type": "exact", "target": ["h", "b"]}],
       "action_ids": [2], "next_tables": {"two": "ing.tern"}, "base_default_next": "ing.tern"},
      {"name": "ing.tern", "match_type": "ternary", "type": "simple", "max_size": 8,
       "key": [{"match_type": "ternary", "target": ["h", "c"], "mask": "0x0ff0"}, {"match_type": "valid", "target": "h"}],
       "action_ids": [1], "next_tables": {"__HIT__": "ing.rng", "__MISS__": null}},
      {"name": "ing.rng", "match_type": "range", "type": "simple", "max_size": 8,
       "key": [{"match_type": "exact", "target": ["h", "b"]}, {"match_type": "range", "target": ["h", "c"]}],
       "action_ids": [1], "next_tables": {"fwd": "ing.ind"}, "base_default_next": "ing.ind"},
      {"name": "ing.ind", "match_type": "exact", "type": "indirect_ws", "max_size": 8, "action_profile": "ing.sel",
       "key": [{"match_type": "exact", "target": ["h", "c"]}],
       "action_ids": [1, 2], "next_tables": {"fwd": null, "two": null}, "base_default_next": null}
    ]}
  ]
}`

func testLayout(t *testing.T) *Layout {
	t.Helper()
	l, err := NewLayout([]byte(testProgram))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLayout(t *testing.T) {
	l := testLayout(t)
	var names []string
	for _, tb := range l.Tables {
		names = append(names, tb.Name)
	}
	if want := UnorderedMapOrder([]string{"ing.ex", "ing.lpm", "ing.tern", "ing.rng", "ing.ind"}); !reflect.DeepEqual(names, want) {
		t.Errorf("tables %v, want %v", names, want)
	}
	if !reflect.DeepEqual(l.Profiles, []string{"ing.sel"}) || len(l.Meters) != 2 {
		t.Errorf("profiles %v, meters %d", l.Profiles, len(l.Meters))
	}
	lpm := l.Table("ing.lpm")
	// the unit's order: exact before lpm
	if lpm.Keys[0].Kind != KeyExact || lpm.Keys[0].Index != 1 || lpm.Keys[0].Bytes() != 2 || lpm.Keys[1].Kind != KeyLPM {
		t.Errorf("lpm keys %+v", lpm.Keys)
	}
	tern := l.Table("ing.tern")
	if tern.Keys[0].Kind != KeyValid || tern.Keys[1].Kind != KeyTernary || !bytes.Equal(tern.Keys[1].Mask, []byte{0x0f, 0xf0}) {
		t.Errorf("ternary keys %+v", tern.Keys)
	}
	for _, tc := range []struct {
		table       string
		action      int
		entry, dflt string
	}{
		{"ing.ex", 1, "ing.lpm", "ing.lpm"},
		{"ing.ex", 0, "", ""},
		{"ing.ex", -1, "", "ing.lpm"},
		{"ing.tern", 1, "ing.rng", ""}, // hit/miss: __HIT__, __MISS__
		{"ing.tern", -1, "", ""},
	} {
		tb := l.Table(tc.table)
		if tc.action >= 0 {
			if got := tb.EntryNext(tc.action); got != tc.entry {
				t.Errorf("%s action %d: entry next %q, want %q", tc.table, tc.action, got, tc.entry)
			}
		}
		if got := tb.DefaultNext(tc.action); got != tc.dflt {
			t.Errorf("%s action %d: default next %q, want %q", tc.table, tc.action, got, tc.dflt)
		}
	}
	if l.Table("ing.ex").MissNext != "ing.lpm" || l.Table("ing.tern").MissNext != "" || l.Table("ing.ind").MissNext != "" {
		t.Error("miss nodes")
	}
}

func TestLayoutErrors(t *testing.T) {
	for _, tc := range []struct{ name, old, nu, want string }{
		{"not JSON", testProgram, "{", "program"},
		{"unknown match unit", `"match_type": "range", "type"`, `"match_type": "fuzzy", "type"`, "match_type"},
		{"optional key", `"match_type": "range", "target": ["h", "c"]`, `"match_type": "optional", "target": ["h", "c"]`, "key match type"},
		{"unknown field", `["h", "c"], "mask"`, `["h", "zz"], "mask"`, "key field"},
		{"bad mask", `"0x0ff0"`, `"0x10ff0"`, "key mask"},
		{"unknown direct meter", `"direct_meters": "ing.dm"`, `"direct_meters": "ing.zz"`, "unknown direct meter"},
	} {
		if !strings.Contains(testProgram, tc.old) {
			t.Fatalf("%s: %q not in the program", tc.name, tc.old)
		}
		prog := strings.Replace(testProgram, tc.old, tc.nu, 1)
		if _, err := NewLayout([]byte(prog)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

// testState is a state of testProgram, in its layout's order.
func testState(t testing.TB, l *Layout) *State {
	t.Helper()
	st := &State{MD5: md5.Sum([]byte(testProgram))}
	for _, tb := range l.Tables {
		ts := TableState{Name: tb.Name, MissNext: tb.MissNext}
		switch tb.Name {
		case "ing.ex":
			ts.Entries = []Entry{
				{Index: 0, Version: 1, Key: []byte{0, 0, 0, 0, 0, 1}, Action: Action{ActionID: 1, Data: [][]byte{{1, 0x2c}}, Next: "ing.lpm"}},
				{Index: 2, Key: []byte{0, 0, 0, 0, 0, 2}, Action: Action{ActionID: 0, Next: ""}, TimeoutMs: 500},
			}
			ts.DirectMeters = []Meter{{Rates: []Rate{{0.0005, 2000}, {0.0001, 1000}}}, {}, {}, {}}
			ts.Default = Action{ActionID: 0}
		case "ing.lpm":
			ts.Entries = []Entry{{Index: 0, Key: []byte{0, 3, 10, 0, 0, 1, 0, 0}, PrefixLen: 16 + 12,
				Action: Action{ActionID: 2, Data: [][]byte{{0xa, 0xb, 0xc, 0xd, 0xe, 0xf}, {0}}, Next: "ing.tern"}}}
			ts.Default = Action{ActionID: -1, Next: "ing.tern"}
		case "ing.tern":
			ts.Entries = []Entry{{Index: 0, Key: []byte{1, 0x08, 0x00}, Mask: []byte{0xff, 0xff, 0x00}, Priority: 7,
				Action: Action{ActionID: 1, Data: [][]byte{{3}}, Next: "ing.rng"}}}
			ts.Default = Action{ActionID: -1}
		case "ing.rng":
			ts.Entries = []Entry{{Index: 1, Version: 255, Key: []byte{0x08, 0x00, 0, 1}, Mask: []byte{0x08, 0xff, 0xff, 0xff},
				Priority: -3, Action: Action{ActionID: 1, Data: [][]byte{{1}}, Next: "ing.ind"}}}
			ts.Default = Action{ActionID: -1, Next: "ing.ind"}
		case "ing.ind":
			ts.Entries = []Entry{
				{Index: 0, Key: []byte{0, 1}, Indirect: 1},
				{Index: 1, Key: []byte{0, 2}, Indirect: GroupFlag | 0},
			}
			ts.DefaultSet, ts.DefaultIndex = true, 0
		}
		st.Tables = append(st.Tables, ts)
	}
	st.Profiles = []ProfileState{{
		Slots:      3,
		Members:    []Member{{Handle: 0, Action: Action{ActionID: 1, Data: [][]byte{{5}}}}, {Handle: 1, Action: Action{ActionID: 2, Data: [][]byte{{1}, {2}}}}},
		MemberRefs: []uint32{2, 1, 0},
		GroupRefs:  []uint32{1},
		Groups:     []Group{{Handle: 0, Members: []uint32{0}}},
	}}
	for _, m := range l.Meters {
		cells := make([]Meter, m.Size)
		if m.Direct {
			copy(cells, st.Tables[0].DirectMeters)
			for i, tb := range l.Tables {
				if tb.Name == "ing.ex" {
					copy(cells, st.Tables[i].DirectMeters)
				}
			}
		} else {
			cells[1] = Meter{Rates: []Rate{{1e-06, 10}, {1.5e-07, 5}}}
		}
		st.Meters = append(st.Meters, cells)
	}
	return st
}

// tableText is what a dump holds for each table of testState.
var tableText = map[string]string{
	"ing.ex": "ing.ex\ning.lpm\n2\n" +
		"0\n1\n000000000001\n1\n1\n12c\ning.lpm\n0\n" +
		"2\n0\n000000000002\n0\n0\n__NULL__\n500\n" +
		"1\n0.0005 2000\n0.0001 1000\n0\n0\n0\n" +
		"0\n0\n__NULL__\n",
	"ing.lpm": "ing.lpm\ning.tern\n1\n" +
		"0\n0\n00030a0000010000\n28\n2\n2\na0b0c0d0e0f\n0\ning.tern\n0\n" +
		"-1\ning.tern\n",
	"ing.tern": "ing.tern\n__NULL__\n1\n" +
		"0\n0\n010800\nffff00\n7\n1\n1\n3\ning.rng\n0\n" +
		"-1\n__NULL__\n",
	"ing.rng": "ing.rng\ning.ind\n1\n" +
		"1\n255\n08000001\n08ffffff\n-3\n1\n1\n1\ning.ind\n0\n" +
		"-1\ning.ind\n",
	"ing.ind": "ing.ind\n__NULL__\n2\n" +
		"0\n0\n0001\n1\n0\n" +
		"1\n0\n0002\n16777216\n0\n" +
		"1\n0\n",
}

const profileText = "3\n2\n0\n1\n1\n5\n__NULL__\n1\n2\n2\n1\n2\n__NULL__\n3\n2\n1\n0\n1\n1\n1\n0\n1\n0\n"

func testDump(t *testing.T, l *Layout) []byte {
	t.Helper()
	sum := md5.Sum([]byte(testProgram))
	var b bytes.Buffer
	b.WriteString("06062016_0\n")
	b.Write(sum[:])
	b.WriteString("\n")
	for _, tb := range l.Tables {
		b.WriteString(tableText[tb.Name])
	}
	b.WriteString(profileText)
	for _, m := range l.Meters {
		if m.Direct {
			b.WriteString("1\n0.0005 2000\n0.0001 1000\n0\n0\n0\n")
		} else {
			b.WriteString("0\n1\n1e-06 10\n1.5e-07 5\n")
		}
	}
	return b.Bytes()
}

func TestWrite(t *testing.T) {
	l := testLayout(t)
	var b bytes.Buffer
	if err := Write(&b, l, testState(t, l)); err != nil {
		t.Fatal(err)
	}
	if want := testDump(t, l); !bytes.Equal(b.Bytes(), want) {
		t.Errorf("dump:\n%q\nwant\n%q", b.Bytes(), want)
	}
	if err := Write(&b, l, &State{}); err == nil {
		t.Error("a state of another program: no error")
	}
}

func TestReadRoundTrip(t *testing.T) {
	l := testLayout(t)
	want := testState(t, l)
	got, err := Read(testDump(t, l), l, md5.Sum([]byte(testProgram)))
	if err != nil {
		t.Fatal(err)
	}
	// normalize empty data lists, which the reader leaves nil
	if !reflect.DeepEqual(got, want) {
		for i := range want.Tables {
			if !reflect.DeepEqual(got.Tables[i], want.Tables[i]) {
				t.Errorf("table %s:\n got %+v\nwant %+v", want.Tables[i].Name, got.Tables[i], want.Tables[i])
			}
		}
		if !reflect.DeepEqual(got.Profiles, want.Profiles) {
			t.Errorf("profiles:\n got %+v\nwant %+v", got.Profiles, want.Profiles)
		}
		if !reflect.DeepEqual(got.Meters, want.Meters) {
			t.Errorf("meters:\n got %+v\nwant %+v", got.Meters, want.Meters)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, l, got); err != nil || !bytes.Equal(b.Bytes(), testDump(t, l)) {
		t.Errorf("written again: %v\n%q", err, b.Bytes())
	}
}

// TestReadMalformed: every malformed dump is refused with an error naming
// where, never a panic: the md5 and version checks, edits of single words,
// and every truncation.
func TestReadMalformed(t *testing.T) {
	l := testLayout(t)
	sum := md5.Sum([]byte(testProgram))
	good := testDump(t, l)
	sub := func(old, nu string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("%q not in the dump", old)
		}
		return bytes.Replace(good, []byte(old), []byte(nu), 1)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "incompatible version"},
		{"other version", sub("06062016_0", "06062016_1"), "incompatible version"},
		{"no md5", []byte("06062016_0\n"), "no md5"},
		{"md5 of another program", append([]byte("06062016_0\n"+strings.Repeat("x", 16)+"\n"), good[28:]...), "does not match the program"},
		{"other table", sub("ing.ex\ning.lpm\n2", "ing.zz\ning.lpm\n2"), "names table"},
		{"other miss node", sub("ing.ex\ning.lpm\n2", "ing.ex\ning.rng\n2"), "miss node"},
		{"more entries than the table", sub("ing.ex\ning.lpm\n2\n", "ing.ex\ning.lpm\n5\n"), "the table holds 4"},
		{"handle past the table", sub("2\n0\n000000000002", "9\n0\n000000000002"), "more than 3"},
		{"handle twice", sub("2\n0\n000000000002", "0\n0\n000000000002"), "listed twice"},
		{"version past 8 bits", sub("1\n255\n", "1\n256\n"), "more than 255"},
		{"short key", sub("000000000002", "0002"), "not 6 bytes"},
		{"key not hex", sub("000000000002", "00000000000g"), "not 6 bytes"},
		{"unknown action", sub("000000000001\n1\n1\n12c", "000000000001\n9\n1\n12c"), "has no action 9"},
		{"action of another table", sub("0\n2\n0\n000000000002\n0\n0\n", "0\n2\n0\n000000000002\n2\n0\n"), "takes 2 values"},
		{"wrong next node", sub("12c\ning.lpm\n", "12c\ning.rng\n"), "next node"},
		{"data not hex", sub("12c\n", "12x\n"), "not a hex number"},
		{"data with sign", sub("12c\n", "+12c\n"), "not a hex number"},
		{"negative count", sub("ing.ex\ning.lpm\n2\n", "ing.ex\ning.lpm\n-2\n"), "not a number"},
		{"meter flag", sub("1\n0.0005 2000", "2\n0.0005 2000"), "neither 0 nor 1"},
		{"meter rate", sub("0.0005 2000", "nan 2000"), "rate"},
		{"indirect neither", sub("1\n0\n0002\n16777216", "1\n0\n0002\n33554432"), "neither a member nor a group"},
		{"profile size", sub(profileText, "99999999"+profileText[1:]), "more than"},
		{"member past the size", sub(profileText, "1"+profileText[1:]), "more than 0"},
		{"use counts not the size", sub(profileText, strings.Replace(profileText, "__NULL__\n3\n2\n1\n0\n", "__NULL__\n2\n2\n1\n", 1)),
			"member use counts"},
		{"group of an unknown member", sub(profileText, strings.TrimSuffix(profileText, "0\n")+"2\n"), "which the profile has not"},
		{"member twice in a group", sub(profileText, strings.TrimSuffix(profileText, "1\n0\n")+"2\n0\n0\n"), "twice"},
		{"trailing words", append(append([]byte(nil), good...), "7\n"...), "belong to nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.data, l, sum)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := Read(good[:10], l, sum); !errors.Is(err, ErrVersion) {
		t.Errorf("cut in the version: %v", err)
	}
	for cut := 0; cut < len(good); cut++ {
		if _, err := Read(good[:cut], l, sum); err == nil && cut < len(good)-1 {
			t.Errorf("cut at %d of %d: no error", cut, len(good))
		}
	}
}

// TestLayoutOfConformancePrograms: every program of the conformance
// corpus (p4c-bm2-ss's JSON) has a layout, and a state with no entries
// writes and reads back.
func TestLayoutOfConformancePrograms(t *testing.T) {
	files, _ := filepath.Glob("../../../../shared/conformance/p4c-stf/*.p4c.json")
	if len(files) == 0 {
		t.Skip("../shared/conformance is not here")
	}
	for _, f := range files {
		prog, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewLayout(prog)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		st := &State{MD5: md5.Sum(prog)}
		for _, tb := range l.Tables {
			ts := TableState{Name: tb.Name, MissNext: tb.MissNext, Default: Action{ActionID: -1, Next: tb.DefaultNext(-1)}}
			if m := l.Meter(tb.DirectMeter); m != nil {
				ts.DirectMeters = make([]Meter, m.Size)
			}
			st.Tables = append(st.Tables, ts)
		}
		for range l.Profiles {
			st.Profiles = append(st.Profiles, ProfileState{})
		}
		for _, m := range l.Meters {
			st.Meters = append(st.Meters, make([]Meter, m.Size))
		}
		var b bytes.Buffer
		if err := Write(&b, l, st); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(b.Bytes(), l, st.MD5); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}

// FuzzRead: whatever the bytes, Read answers a state or an error, never a
// panic; a state it answers writes back to the same bytes.
func FuzzRead(f *testing.F) {
	l, err := NewLayout([]byte(testProgram))
	if err != nil {
		f.Fatal(err)
	}
	sum := md5.Sum([]byte(testProgram))
	var b bytes.Buffer
	if err := Write(&b, l, testState(f, l)); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:len(b.Bytes())/3])
	f.Add([]byte("06062016_0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Read(data, l, sum)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Write(&out, l, st); err != nil {
			t.Fatalf("a state Read answered does not write: %v", err)
		}
		if _, err := Read(out.Bytes(), l, sum); err != nil {
			t.Fatalf("written again, not read: %v", err)
		}
	})
}
