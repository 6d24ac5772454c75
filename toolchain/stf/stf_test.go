package stf

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func TestParseScript(t *testing.T) {
	src := `# comment
add test1 503 data.f1:0x****0202 ingress.setb1(val:7, port:3) = H1
add ipv4_lpm ipv4.dstAddr:0x0a000000/8 fwd(mac:0x0102, port:1)
setdefault t drop()
packet 1 0102 0304   # trailing comment
expect 2 01** 03$
expect 3
check_counter cnt(2) bytes >= 40
mirroring_add 5 4
`
	cmds, err := ParseScript(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 8 {
		t.Fatalf("%d commands", len(cmds))
	}
	a := cmds[0]
	if a.Op != "add" || a.Table != "test1" || a.Priority == nil || *a.Priority != 503 || a.Handle != "H1" ||
		len(a.Keys) != 1 || a.Keys[0] != (KeyArg{"data.f1", "0x****0202"}) || a.Action != "ingress.setb1" ||
		len(a.Params) != 2 || a.Params[1] != (ParamArg{"port", "3"}) {
		t.Errorf("add parsed as %+v", a)
	}
	if cmds[1].Priority != nil || cmds[1].Keys[0].Value != "0x0a000000/8" {
		t.Errorf("add without priority: %+v", cmds[1])
	}
	if cmds[3].Port != 1 || cmds[3].Data != "01020304" {
		t.Errorf("packet: %+v", cmds[3])
	}
	if cmds[4].Data != "01**03$" || cmds[5].AnyLen != true {
		t.Errorf("expect: %+v %+v", cmds[4], cmds[5])
	}
	if c := cmds[6]; c.Counter != "cnt" || c.Index != "2" || c.CountTy != "bytes" || c.Relation != ">=" || c.Value != 40 {
		t.Errorf("check_counter: %+v", c)
	}
	for _, bad := range []string{"packet x 00", "packet 1 0g", "add t k:1", "add t k act(x)"} {
		if _, err := ParseScript(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestKeyMatch(t *testing.T) {
	cases := []struct {
		kind  pipeline.MatchKind
		width int
		in    string
		want  pipeline.Match
	}{
		{pipeline.MatchTernary, 32, "0x****0101", pipeline.Match{Value: []byte{0, 0, 1, 1}, Mask: []byte{0, 0, 0xff, 0xff}}},
		{pipeline.MatchTernary, 16, "0x25**", pipeline.Match{Value: []byte{0x25, 0}, Mask: []byte{0xff, 0}}},
		{pipeline.MatchTernary, 8, "0x10&&&0xf0", pipeline.Match{Value: []byte{0x10}, Mask: []byte{0xf0}}},
		{pipeline.MatchTernary, 8, "0b1*1", pipeline.Match{Value: []byte{5}, Mask: []byte{5}}},
		{pipeline.MatchLPM, 32, "0x0a010065", pipeline.Match{Value: []byte{10, 1, 0, 0x65}, PrefixLen: 32}},
		{pipeline.MatchLPM, 32, "0x0a01****", pipeline.Match{Value: []byte{10, 1, 0, 0}, PrefixLen: 16}},
		{pipeline.MatchLPM, 32, "0x0a000000/8", pipeline.Match{Value: []byte{10, 0, 0, 0}, PrefixLen: 8}},
		{pipeline.MatchRange, 16, "5->10", pipeline.Match{Value: []byte{0, 5}, High: []byte{0, 10}}},
		{pipeline.MatchExact, 9, "511", pipeline.Match{Value: []byte{1, 0xff}}},
		{pipeline.MatchExact, 8, "-1", pipeline.Match{Value: []byte{0xff}}},
		{pipeline.MatchOptional, 8, "*", pipeline.Match{Wildcard: true}},
	}
	for _, tc := range cases {
		got, err := keyMatch(pipeline.KeyFieldInfo{Kind: tc.kind, Bitwidth: tc.width}, tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !bytes.Equal(got.Value, tc.want.Value) || !bytes.Equal(got.Mask, tc.want.Mask) || !bytes.Equal(got.High, tc.want.High) ||
			got.PrefixLen != tc.want.PrefixLen || got.Wildcard != tc.want.Wildcard {
			t.Errorf("%s (%v/%d) = %+v, want %+v", tc.in, tc.kind, tc.width, got, tc.want)
		}
	}
}

func TestComparePacket(t *testing.T) {
	rcv, _ := hex.DecodeString("0102030405")
	cases := []struct {
		exp string
		ok  bool
	}{
		{"0102030405", true},
		{"01020304", true},    // a longer packet matches without '$'
		{"01020304$", false},  // but not with it
		{"0102030405$", true}, // exact length
		{"01**03", true},
		{"0103", false},
		{"010203040506", false}, // too short
	}
	for _, tc := range cases {
		if err := comparePacket(tc.exp, rcv); (err == nil) != tc.ok {
			t.Errorf("expect %s vs %x: %v", tc.exp, rcv, err)
		}
	}
}

func loadModel(t *testing.T) *Program {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "ipv4_lpm.json"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := engine.Load(data, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &Program{Name: "ipv4_lpm", JSON: data, Model: pl}
}

// TestRunEngine runs scripts against the engine backend: a passing one, and
// failing ones whose errors say what went wrong.
func TestRunEngine(t *testing.T) {
	prog := loadModel(t)
	pkt := "001122334455 66778899aabb 0800 4500001400001234 4011 0000 0a000001 0a010203"
	// the forwarded frame: new dst MAC, old dst as src, TTL 0x3f, checksum
	// recomputed (0x2b..; matched with wildcards)
	exp := "020000000003 001122334455 0800 4500001400001234 3f11 **** 0a000001 0a010203$"
	cases := []struct {
		name   string
		script string
		err    string
	}{
		{"forward", "add ipv4_lpm ipv4.dstAddr:0x0a010200/24 ipv4_forward(dstAddr:0x020000000003, port:3)\npacket 0 " + pkt + "\nexpect 3 " + exp, ""},
		{"lpm digits", "add ipv4_lpm ipv4.dstAddr:0x0a01**** ipv4_forward(dstAddr:0x020000000003, port:3)\npacket 0 " + pkt + "\nexpect 3 " + exp, ""},
		{"miss drops", "packet 0 " + pkt + "\nexpect 3", ""},
		{"unexpected packet", "add ipv4_lpm ipv4.dstAddr:0x0a010200/24 ipv4_forward(dstAddr:0x020000000003, port:0)\npacket 0 " + pkt, "expected 0 packets on port 0, got 1"},
		{"missing packet", "packet 0 " + pkt + "\nexpect 0 00", "expected 1 packets on port 0, got 0"},
		{"unobserved port", "add ipv4_lpm ipv4.dstAddr:0x0a010200/24 ipv4_forward(dstAddr:0x020000000003, port:7)\npacket 0 " + pkt, ""},
		{"wrong bytes", "add ipv4_lpm ipv4.dstAddr:0x0a010200/24 ipv4_forward(dstAddr:0x020000000003, port:3)\npacket 0 " + pkt + "\nexpect 3 03", "differs at hex digit 1"},
		{"unknown table", "add nosuch k:1 a()", "no table nosuch"},
		{"unknown action", "add ipv4_lpm ipv4.dstAddr:0x0a010200/24 nosuch()", "no action nosuch"},
		{"bad parameter", "add ipv4_lpm ipv4.dstAddr:0x0a010200/24 ipv4_forward(mac:1, port:3)", "has no parameter mac"},
		{"unknown command", "frobnicate 1", "unsupported STF command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmds, err := ParseScript(strings.NewReader(tc.script))
			if err != nil {
				t.Fatal(err)
			}
			b := NewEngineBackend()
			if err := b.Start(prog); err != nil {
				t.Fatal(err)
			}
			err = Run(b, prog, cmds, nil)
			if tc.err == "" && err != nil {
				t.Errorf("failed: %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestP4InfoFromModel(t *testing.T) {
	prog := loadModel(t)
	info := P4InfoFromModel(prog.Model)
	if len(info.Tables) != 1 || info.Tables[0].Preamble.Name != "MyIngress.ipv4_lpm" || info.Tables[0].Preamble.Id>>24 != 0x02 {
		t.Fatalf("tables %v", info.Tables)
	}
	mf := info.Tables[0].MatchFields[0]
	if mf.Name != "hdr.ipv4.dstAddr" || mf.Bitwidth != 32 || mf.GetMatchType() != p4configv1.MatchField_LPM {
		t.Errorf("match field %v", mf)
	}
	var fwd *p4configv1.Action
	for _, a := range info.Actions {
		if a.Preamble.Name == "MyIngress.ipv4_forward" {
			fwd = a
		}
	}
	if fwd == nil || len(fwd.Params) != 2 || fwd.Params[1].Name != "port" || fwd.Params[1].Bitwidth != 9 {
		t.Errorf("action %v", fwd)
	}
}

func TestDiffP4Info(t *testing.T) {
	a := &p4configv1.P4Info{Tables: []*p4configv1.Table{
		{Preamble: &p4configv1.Preamble{Id: 1, Name: "t1", Doc: &p4configv1.Documentation{Brief: "x"}}},
		{Preamble: &p4configv1.Preamble{Id: 2, Name: "t2"}},
	}}
	b := &p4configv1.P4Info{Tables: []*p4configv1.Table{
		{Preamble: &p4configv1.Preamble{Id: 2, Name: "t2"}},
		{Preamble: &p4configv1.Preamble{Id: 1, Name: "t1"}},
	}}
	if d := DiffP4Info(a, b); d != "" {
		t.Errorf("order and docs should not matter: %s", d)
	}
	b.Tables[0].Preamble.Name = "t3"
	if d := DiffP4Info(a, b); d == "" {
		t.Error("a renamed table was not noticed")
	}
}

func TestReadXfail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.txt")
	if err := os.WriteFile(p, []byte("# header\nfoo   needs bar\n\nbaz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ReadXfail(p)
	if err != nil || len(m) != 2 || m["foo"] != "needs bar" {
		t.Errorf("%v %v", m, err)
	}
	if m, err := ReadXfail(filepath.Join(t.TempDir(), "none")); err != nil || len(m) != 0 {
		t.Errorf("missing file: %v %v", m, err)
	}
}

// TestCorpusSample runs a few programs of the shared conformance corpus,
// when it is present beside the repository, through RunCorpus.
func TestCorpusSample(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("conformance corpus not present")
	}
	s, err := RunCorpus(t.Context(), CorpusOptions{
		Dir: dir, JSON: JSONP4C, NewBackend: func() Backend { return NewEngineBackend() },
		Run: mustRE("^(v1model-special-ops-bmv2|ternary2-bmv2|header-stack-ops-bmv2|checksum-l4-bmv2|parser_error-bmv2)$"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Passed != 5 || s.Failed != 0 {
		for _, r := range s.Results {
			t.Logf("%s: %v %s", r.Name, r.Pass, r.Reason)
		}
		t.Errorf("%d passed, %d failed", s.Passed, s.Failed)
	}
}

func mustRE(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// The P4Info made from a program's JSON gives tables, actions, counters,
// meters and registers the ids p4c gave them: for every corpus program with
// p4c's P4Info and JSON beside it, each object both name has one id.
func TestP4InfoFromModelHasP4cIDs(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf")
	infos, _ := filepath.Glob(filepath.Join(dir, "*.p4info.txtpb"))
	if len(infos) == 0 {
		t.Skip("corpus not present beside the repository")
	}
	compared := 0
	for _, path := range infos {
		name := strings.TrimSuffix(filepath.Base(path), ".p4info.txtpb")
		data, err := os.ReadFile(filepath.Join(dir, name+".p4c.json"))
		if err != nil {
			continue
		}
		pl, err := engine.Load(data, engine.Options{})
		if err != nil {
			continue // programs the engine refuses are xfail elsewhere
		}
		want, err := ReadP4Info(path)
		if err != nil {
			t.Fatal(err)
		}
		ids := func(info *p4configv1.P4Info) map[string]uint32 {
			m := map[string]uint32{}
			for _, p := range info.GetTables() {
				m["table "+p.GetPreamble().GetName()] = p.GetPreamble().GetId()
			}
			for _, p := range info.GetActions() {
				m["action "+p.GetPreamble().GetName()] = p.GetPreamble().GetId()
			}
			for _, p := range info.GetCounters() {
				m["counter "+p.GetPreamble().GetName()] = p.GetPreamble().GetId()
			}
			for _, p := range info.GetMeters() {
				m["meter "+p.GetPreamble().GetName()] = p.GetPreamble().GetId()
			}
			for _, p := range info.GetRegisters() {
				m["register "+p.GetPreamble().GetName()] = p.GetPreamble().GetId()
			}
			return m
		}
		got, ref := ids(P4InfoFromModel(pl)), ids(want)
		for obj, id := range got {
			if wantID, ok := ref[obj]; ok {
				compared++
				if id != wantID {
					t.Errorf("%s: %s has id %#x, p4c gave %#x", name, obj, id, wantID)
				}
			}
		}
	}
	if compared == 0 {
		t.Fatal("no object compared")
	}
	t.Logf("%d objects of %d programs compared", compared, len(infos))
}
