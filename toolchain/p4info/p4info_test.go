package p4info

import (
	"math/big"
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// Ids p4c assigned in the conformance corpus (NAME.p4info.txtpb).
func TestIDsMatchP4c(t *testing.T) {
	tests := []struct {
		kind p4v1.P4Ids_Prefix
		name string
		id   uint32
	}{
		{p4v1.P4Ids_ACTION, "NoAction", 21257015},
		{p4v1.P4Ids_ACTION, "ingress.a", 21186165},
		{p4v1.P4Ids_ACTION, "ingress.a_with_control_params", 17165658},
		{p4v1.P4Ids_TABLE, "ingress.t_ternary", 44370079},
		{p4v1.P4Ids_TABLE, "ingress.simple_table", 39789425},
		{p4v1.P4Ids_ACTION, "ingress.dummy", 18214157},
	}
	s := newSymbolTable()
	for _, tc := range tests {
		s.add(tc.kind, tc.name, 0)
	}
	s.computeIDs()
	for _, tc := range tests {
		if got := s.id(tc.kind, tc.name); got != tc.id {
			t.Errorf("%s: id %d, want %d", tc.name, got, tc.id)
		}
	}
}

func TestJenkinsHash(t *testing.T) {
	// one-at-a-time of "a" worked by hand: 0xca2e9442
	if h := jenkinsOneAtATime("a"); h != 0xca2e9442 {
		t.Errorf("hash(a) = %#x", h)
	}
	if h := jenkinsOneAtATime(""); h != 0 {
		t.Errorf("hash('') = %#x", h)
	}
}

func TestCollisionsAndExplicitIDs(t *testing.T) {
	s := newSymbolTable()
	// claim the id "x" would hash to with an explicit @id for "y"
	want := uint32(p4v1.P4Ids_TABLE)<<24 | jenkinsOneAtATime("x")&0xffffff
	s.add(p4v1.P4Ids_TABLE, "y", want&0xffffff) // prefix filled in by add
	s.add(p4v1.P4Ids_TABLE, "x", 0)
	s.computeIDs()
	if got := s.id(p4v1.P4Ids_TABLE, "y"); got != want {
		t.Errorf("explicit id: got %#x, want %#x", got, want)
	}
	if got := s.id(p4v1.P4Ids_TABLE, "x"); got != want+1 {
		t.Errorf("probing after a collision: got %#x, want %#x", got, want+1)
	}
	bad := newSymbolTable()
	bad.add(p4v1.P4Ids_TABLE, "z", uint32(p4v1.P4Ids_ACTION)<<24|5)
	if len(bad.errs) == 0 {
		t.Errorf("an @id with another resource's prefix must be rejected")
	}
}

func TestAliases(t *testing.T) {
	s := newSymbolTable()
	for _, n := range []string{"ingress.a.t", "ingress.b.t", "egress.u", "NoAction", "ingress.x.y.z"} {
		s.add(p4v1.P4Ids_TABLE, n, 0)
	}
	tests := map[string]string{
		"ingress.a.t":   "a.t",
		"ingress.b.t":   "b.t",
		"egress.u":      "u",
		"NoAction":      "NoAction",
		"ingress.x.y.z": "z",
	}
	for name, want := range tests {
		if got := s.alias(name); got != want {
			t.Errorf("alias(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestFieldIDs(t *testing.T) {
	tests := []struct{ explicit, want []uint32 }{
		{[]uint32{0, 0, 0}, []uint32{1, 2, 3}},
		{[]uint32{0, 7, 0}, []uint32{1, 7, 2}},
		{[]uint32{2, 0, 0}, []uint32{2, 3, 4}},
		{[]uint32{0, 0, 1}, []uint32{2, 3, 1}},
	}
	for _, tc := range tests {
		got := fieldIDs(tc.explicit)
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("fieldIDs(%v) = %v, want %v", tc.explicit, got, tc.want)
				break
			}
		}
	}
}

func sampleProgram() *ir.Program {
	set := &ir.Action{Name: "ingress.set", Params: []ir.ActionParamDecl{{Name: "port", Width: 9}, {Name: "mac", Width: 48, ExplicitID: 5}}}
	noop := &ir.Action{Name: "NoAction", Annotations: []string{`@noWarn("unused")`}}
	ctr := &ir.Counter{Name: "ingress.hits", Direct: true, Kind: ir.CountBytes, Table: "ingress.fwd"}
	tbl := &ir.Table{
		Name: "ingress.fwd", Size: 64,
		Key: []ir.KeyField{{Name: "hdr.ipv4.dst", Match: ir.MatchLPM, Width: 32, P4RTWidth: 32},
			{Name: "sel", Match: ir.MatchSelector, Width: 8}},
		Actions:       []ir.ActionRef{{Action: set}, {Action: noop, DefaultOnly: true, Annotations: []string{"@defaultonly"}}},
		Default:       &ir.DefaultEntry{Action: set, Args: []*big.Int{big.NewInt(3), big.NewInt(10)}, Const: true},
		DirectCounter: ctr,
	}
	return &ir.Program{
		Pipelines:      []*ir.Pipeline{{Name: "ingress", Tables: []*ir.Table{tbl, {Name: "tbl_hidden", Hidden: true}}}},
		ControlActions: []*ir.Action{set, noop},
		Counters:       []*ir.Counter{ctr, {Name: "ingress.drops", Size: 4, Kind: ir.CountPacketsAndBytes}},
		Registers:      []*ir.Register{{Name: "ingress.r", Size: 16, Width: 32}},
		ControllerHeaders: []*ir.ControllerHeader{{Name: "packet_in", TypeName: "packet_in_header_t",
			Fields: []ir.ControllerField{{Name: "ingress_port", Width: 9}}}},
		HasTypeInfo: true,
	}
}

func TestBuild(t *testing.T) {
	info, err := Build(sampleProgram())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Tables) != 1 {
		t.Fatalf("%d tables, want 1 (hidden tables are not in P4Info)", len(info.Tables))
	}
	tb := info.Tables[0]
	if tb.Preamble.Alias != "fwd" || tb.Size != 64 || len(tb.MatchFields) != 1 {
		t.Errorf("table: %v", tb)
	}
	if tb.ActionRefs[1].Scope != p4v1.ActionRef_DEFAULT_ONLY {
		t.Errorf("NoAction should be default-only")
	}
	if tb.ConstDefaultActionId == 0 || tb.ConstDefaultActionId != tb.InitialDefaultAction.ActionId {
		t.Errorf("const default action not set")
	}
	args := tb.InitialDefaultAction.Arguments
	if len(args) != 2 || string(args[0].Value) != "\x00\x03" || args[1].ParamId != 2 || len(args[1].Value) != 6 {
		t.Errorf("default arguments: %v", args)
	}
	if len(tb.DirectResourceIds) != 1 || tb.DirectResourceIds[0]>>24 != uint32(p4v1.P4Ids_DIRECT_COUNTER) {
		t.Errorf("direct counter not attached: %v", tb.DirectResourceIds)
	}
	if p := info.Actions[0].Params; p[0].Id != 1 || p[1].Id != 5 {
		t.Errorf("param ids: %v", p)
	}
	if info.DirectCounters[0].DirectTableId != tb.Preamble.Id || info.DirectCounters[0].Spec.Unit != p4v1.CounterSpec_BYTES {
		t.Errorf("direct counter: %v", info.DirectCounters[0])
	}
	if info.Counters[0].Spec.Unit != p4v1.CounterSpec_BOTH || info.Counters[0].Size != 4 {
		t.Errorf("counter: %v", info.Counters[0])
	}
	cpm := info.ControllerPacketMetadata[0]
	if cpm.Preamble.Name != "packet_in" || cpm.Preamble.Id>>24 != uint32(p4v1.P4Ids_CONTROLLER_HEADER) ||
		cpm.Preamble.Id&0xffffff != jenkinsOneAtATime("packet_in_header_t")&0xffffff {
		t.Errorf("controller header id must hash the header type's name: %v", cpm.Preamble)
	}
	if info.TypeInfo == nil {
		t.Errorf("type_info should be present")
	}
}

func TestFormats(t *testing.T) {
	info, err := Build(sampleProgram())
	if err != nil {
		t.Fatal(err)
	}
	txt, err := Marshal(info, Text)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# proto-message: p4.config.v1.P4Info", "tables {\n  preamble {\n", "    alias: \"fwd\"\n",
		"      value: \"\\000\\003\"\n", "annotations: \"@noWarn(\\\"unused\\\")\"", "type_info {\n}\n"} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("text output lacks %q:\n%s", want, txt)
		}
	}
	bin, err := Marshal(info, Binary)
	if err != nil {
		t.Fatal(err)
	}
	var back p4v1.P4Info
	if err := proto.Unmarshal(bin, &back); err != nil || !proto.Equal(&back, info) {
		t.Errorf("binary round trip failed: %v", err)
	}
	js, err := Marshal(info, JSON)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON p4v1.P4Info
	if err := protojson.Unmarshal(js, &fromJSON); err != nil || !proto.Equal(&fromJSON, info) {
		t.Errorf("JSON round trip failed: %v", err)
	}
	for path, want := range map[string]Format{"a.txt": Text, "a.txtpb": Text, "a.json": JSON, "a.bin": Binary, "noext": Text} {
		if got := FormatFor(path); got != want {
			t.Errorf("FormatFor(%s) = %v, want %v", path, got, want)
		}
	}
}

// TestTypeInfoText checks type_info's enums and error as p4c prints them:
// enums by member name, the error type with every member, in the proto's
// field order (enums before error before serializable_enums).
func TestTypeInfoText(t *testing.T) {
	p := &ir.Program{HasTypeInfo: true, TypeInfo: &ir.TypeInfo{
		PlainEnums: []*ir.PlainEnum{{Name: "Color", Members: []string{"Red", "Green"}}},
		Enums:      []*ir.SerializableEnum{{Name: "SE", Width: 8, Members: []ir.EnumMember{{Name: "A", Value: big.NewInt(42)}}}},
		HasError:   true, Errors: []string{"NoError", "Mine"},
	}}
	info, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	txt, err := Marshal(info, Text)
	if err != nil {
		t.Fatal(err)
	}
	want := `type_info {
  enums {
    key: "Color"
    value {
      members {
        name: "Red"
      }
      members {
        name: "Green"
      }
    }
  }
  error {
    members: "NoError"
    members: "Mine"
  }
  serializable_enums {
    key: "SE"
    value {
      underlying_type {
        bitwidth: 8
      }
      members {
        name: "A"
        value: "*"
      }
    }
  }
}
`
	if !strings.HasSuffix(string(txt), want) {
		t.Errorf("type_info:\n%s\nwant:\n%s", txt, want)
	}
}

// IDs gives what Build gives for the same names: p4c's hash-based ids with
// the kind's prefix, and the shortest unique suffix as alias.
func TestIDsAllocation(t *testing.T) {
	x := NewIDs()
	x.Add(p4v1.P4Ids_TABLE, "ingress.a.t")
	x.Add(p4v1.P4Ids_TABLE, "ingress.b.t")
	x.Add(p4v1.P4Ids_ACTION, "ingress.fwd")
	if id := x.ID(p4v1.P4Ids_TABLE, "ingress.a.t"); id != 0 {
		t.Errorf("before Assign: id %#x, want 0", id)
	}
	if err := x.Assign(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind        p4v1.P4Ids_Prefix
		name, alias string
	}{
		{p4v1.P4Ids_TABLE, "ingress.a.t", "a.t"},
		{p4v1.P4Ids_TABLE, "ingress.b.t", "b.t"},
		{p4v1.P4Ids_ACTION, "ingress.fwd", "fwd"},
	} {
		want := uint32(tc.kind)<<24 | jenkinsOneAtATime(tc.name)&0xffffff
		if got := x.ID(tc.kind, tc.name); got != want {
			t.Errorf("%s: id %#x, want %#x", tc.name, got, want)
		}
		if got := x.Alias(tc.name); got != tc.alias {
			t.Errorf("%s: alias %q, want %q", tc.name, got, tc.alias)
		}
	}
}
