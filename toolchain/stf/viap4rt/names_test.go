package viap4rt

import (
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

func field(kind p4configv1.MatchField_MatchType, width int32) *p4configv1.MatchField {
	return &p4configv1.MatchField{Id: 1, Name: "hdr.f", Bitwidth: width, Match: &p4configv1.MatchField_MatchType_{MatchType: kind}}
}

func TestFieldMatch(t *testing.T) {
	const (
		E = p4configv1.MatchField_EXACT
		L = p4configv1.MatchField_LPM
		T = p4configv1.MatchField_TERNARY
		R = p4configv1.MatchField_RANGE
		O = p4configv1.MatchField_OPTIONAL
	)
	tests := []struct {
		kind  p4configv1.MatchField_MatchType
		width int32
		text  string
		want  string // prototext of the FieldMatch; "" = don't care; "error"
	}{
		{E, 16, "0x0800", `field_id:1 exact:{value:"\x08\x00"}`},
		{E, 16, "2048", `field_id:1 exact:{value:"\x08\x00"}`},
		{E, 8, "0x04", `field_id:1 exact:{value:"\x04"}`},
		{E, 8, "0", `field_id:1 exact:{value:"\x00"}`},
		{E, 8, "0x0*", "error"},
		{E, 8, "zz", "error"},
		{L, 32, "0x0a000000/8", `field_id:1 lpm:{value:"\n\x00\x00\x00" prefix_len:8}`},
		{L, 32, "0x0a010065", `field_id:1 lpm:{value:"\n\x01\x00e" prefix_len:32}`},
		{L, 32, "0x0a000000/0", ""},
		{T, 32, "0x****0101", `field_id:1 ternary:{value:"\x01\x01" mask:"\xff\xff"}`},
		{T, 16, "0x25**", `field_id:1 ternary:{value:"%\x00" mask:"\xff\x00"}`},
		{T, 16, "0x1111&&&0xf", `field_id:1 ternary:{value:"\x01" mask:"\x0f"}`},
		{T, 16, "0x2525", `field_id:1 ternary:{value:"%%" mask:"\xff\xff"}`},
		{T, 16, "0x****", ""},
		{R, 16, "0x10->0x20", `field_id:1 range:{low:"\x10" high:"\x20"}`},
		{R, 16, "5", `field_id:1 range:{low:"\x05" high:"\x05"}`},
		{R, 8, "0->255", ""},
		{O, 9, "3", `field_id:1 optional:{value:"\x03"}`},
		{O, 9, "0x***", ""},
	}
	for _, tc := range tests {
		got, err := fieldMatch(field(tc.kind, tc.width), tc.text)
		switch {
		case tc.want == "error":
			if err == nil {
				t.Errorf("%v %q: accepted as %v", tc.kind, tc.text, got)
			}
		case err != nil:
			t.Errorf("%v %q: %v", tc.kind, tc.text, err)
		case tc.want == "":
			if got != nil {
				t.Errorf("%v %q: %v, want don't care", tc.kind, tc.text, got)
			}
		default:
			want := &p4v1.FieldMatch{}
			if err := prototext.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("%v %q: %v, want %v", tc.kind, tc.text, got, want)
			}
		}
	}
}

func TestNames(t *testing.T) {
	info := &p4configv1.P4Info{}
	if err := prototext.Unmarshal([]byte(`
tables { preamble { id: 1 name: "ingress.test1" alias: "test1" }
  match_fields { id: 1 name: "hdrs.extra[0].h" bitwidth: 16 match_type: TERNARY }
  match_fields { id: 2 name: "meta.fwd.l2ptr" bitwidth: 16 match_type: EXACT }
  action_refs { id: 10 } action_refs { id: 11 } }
tables { preamble { id: 2 name: "egress.test1" alias: "egress.test1" } }
tables { preamble { id: 3 name: "ingress.c.t" alias: "c.t" } }
actions { preamble { id: 10 name: "ingress.setb1" } }
actions { preamble { id: 11 name: "NoAction" } }
actions { preamble { id: 12 name: "egress.setb1" } }
`), info); err != nil {
		t.Fatal(err)
	}
	n := newNames(info)
	if tb, err := n.table("ingress.test1"); err != nil || tb.GetPreamble().GetId() != 1 {
		t.Errorf("full name: %v %v", tb, err)
	}
	if _, err := n.table("test1"); err == nil {
		t.Error("ambiguous short name accepted")
	}
	if tb, err := n.table("c.t"); err != nil || tb.GetPreamble().GetId() != 3 {
		t.Errorf("dotted suffix: %v %v", tb, err)
	}
	tb, _ := n.table("ingress.test1")
	if f, err := n.field(tb, "extra$0.h"); err != nil || f.GetId() != 1 {
		t.Errorf("stack field: %v %v", f, err)
	}
	if f, err := n.field(tb, "fwd.l2ptr"); err != nil || f.GetId() != 2 {
		t.Errorf("suffix field: %v %v", f, err)
	}
	if a, err := n.action(tb, "setb1"); err != nil || a.GetPreamble().GetId() != 10 {
		t.Errorf("action resolved within the table: %v %v", a, err)
	}
	if _, err := n.action(tb, "nosuch"); err == nil {
		t.Error("unknown action accepted")
	}
}
