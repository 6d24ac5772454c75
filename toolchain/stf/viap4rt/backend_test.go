package viap4rt

import (
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func table(t *testing.T, text string) *p4configv1.Table {
	t.Helper()
	tb := &p4configv1.Table{}
	if err := prototext.Unmarshal([]byte(text), tb); err != nil {
		t.Fatal(err)
	}
	return tb
}

// The runner's engine-form keys become canonical P4Runtime matches, with
// don't-care fields omitted (spec §9.1.1).
func TestMatchConversion(t *testing.T) {
	tb := table(t, `preamble { id: 1 name: "ingress.t" }
		match_fields { id: 1 name: "a" bitwidth: 16 match_type: EXACT }
		match_fields { id: 2 name: "b" bitwidth: 32 match_type: LPM }
		match_fields { id: 3 name: "c" bitwidth: 16 match_type: TERNARY }
		match_fields { id: 4 name: "d" bitwidth: 8 match_type: RANGE }
		match_fields { id: 5 name: "e" bitwidth: 9 match_type: OPTIONAL }`)
	b := &Backend{}
	tests := []struct {
		name string
		ms   []pipeline.Match
		want string
	}{
		{"all given", []pipeline.Match{
			{Value: []byte{0, 5}},
			{Value: []byte{10, 0, 0, 0}, PrefixLen: 8},
			{Value: []byte{0x12, 0x34}, Mask: []byte{0xff, 0}},
			{Value: []byte{1}, High: []byte{9}},
			{Value: []byte{0, 3}},
		}, `field_id:1 exact:{value:"\x05"} field_id:2 lpm:{value:"\n\x00\x00\x00" prefix_len:8}
			field_id:3 ternary:{value:"\x12\x00" mask:"\xff\x00"} field_id:4 range:{low:"\x01" high:"\x09"}
			field_id:5 optional:{value:"\x03"}`},
		{"don't cares omitted", []pipeline.Match{
			{Value: []byte{0}},
			{Value: []byte{0, 0, 0, 0}, PrefixLen: 0},
			{Value: []byte{0, 0}, Mask: []byte{0, 0}},
			{Value: []byte{0}, High: []byte{0xff}},
			{Wildcard: true},
		}, `field_id:1 exact:{value:"\x00"}`},
	}
	for _, tc := range tests {
		got, err := b.match(tb, nil, tc.ms)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := &p4v1.TableEntry{}
		if err := prototext.Unmarshal([]byte("match {"+replaceFieldSep(tc.want)+"}"), want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&p4v1.TableEntry{Match: got}, want) {
			t.Errorf("%s: %v, want %v", tc.name, got, want.GetMatch())
		}
	}
	if _, err := b.match(tb, nil, []pipeline.Match{{Value: []byte{1}}}); err == nil {
		t.Error("a key with too few fields was converted")
	}
}

// replaceFieldSep turns "field_id:1 … field_id:2 …" into separate match
// messages for prototext.
func replaceFieldSep(s string) string {
	out, n := "", 0
	for i := 0; i < len(s); i++ {
		if i+9 <= len(s) && s[i:i+9] == "field_id:" {
			if n > 0 {
				out += "} match {"
			}
			n++
		}
		out += string(s[i])
	}
	return out
}

func TestPriorityMapping(t *testing.T) {
	exact := table(t, `match_fields { id: 1 name: "a" bitwidth: 8 match_type: EXACT }`)
	tern := table(t, `match_fields { id: 1 name: "a" bitwidth: 8 match_type: TERNARY }`)
	for _, tc := range []struct {
		tb   *p4configv1.Table
		in   int32
		want int32
	}{
		{exact, 7, 0}, // exact/lpm tables carry no priority
		{tern, 0, 1},  // STF allows 0; P4Runtime needs > 0
		{tern, 503, 504},
		{tern, -1, 1},
	} {
		if got := priority(tc.tb, tc.in); got != tc.want {
			t.Errorf("priority(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestPortOrder: outputs are reported for every port that received frames
// (ports 16 and up too), ports ascending, each port's frames in order.
func TestPortOrder(t *testing.T) {
	tests := []struct {
		name string
		got  map[uint32][][]byte
		want []uint32
	}{
		{"none", map[uint32][][]byte{}, nil},
		{"high ports", map[uint32][][]byte{21: {{1}, {2}}, 3: {{3}}, 300: {{4}}, 16: {}}, []uint32{3, 21, 21, 300}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := portOrder(tc.got)
			var ports []uint32
			for _, o := range out {
				ports = append(ports, o.Port)
			}
			if len(ports) != len(tc.want) {
				t.Fatalf("ports %v, want %v", ports, tc.want)
			}
			for i := range ports {
				if ports[i] != tc.want[i] {
					t.Fatalf("ports %v, want %v", ports, tc.want)
				}
			}
			if len(out) == 4 && (out[1].Data[0] != 1 || out[2].Data[0] != 2) {
				t.Errorf("port 21's frames out of order: %v", out)
			}
		})
	}
}
