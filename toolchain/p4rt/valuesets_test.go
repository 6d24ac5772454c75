package p4rt

import (
	"bytes"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// TestCompressed checks the value/mask a value set member becomes: fields
// concatenated first-most-significant, each kind's mask, omitted fields
// matching anything; and that expanded, which reads members back from the
// device, turns it back into the match written.
func TestCompressed(t *testing.T) {
	vs := func(fs ...fieldInfo) *tableInfo { return &tableInfo{name: "vs", fields: fs} }
	exact4 := fieldInfo{id: 1, name: "a", width: 4, kind: matchExact}
	tern12 := fieldInfo{id: 2, name: "b", width: 12, kind: matchTernary}
	lpm8 := fieldInfo{id: 3, name: "c", width: 8, kind: matchLPM}
	opt3 := fieldInfo{id: 4, name: "d", width: 3, kind: matchOptional}
	rng8 := fieldInfo{id: 5, name: "e", width: 8, kind: matchRange}
	tests := []struct {
		name        string
		t           *tableInfo
		match       []fieldValue
		value, mask []byte
		code        codes.Code
	}{
		{"one exact field", vs(fieldInfo{id: 1, width: 16, kind: matchExact}),
			[]fieldValue{{present: true, value: []byte{0x88, 0xb5}}}, []byte{0x88, 0xb5}, []byte{0xff, 0xff}, codes.OK},
		{"exact then ternary", vs(exact4, tern12),
			[]fieldValue{{present: true, value: []byte{0x5}}, {present: true, value: []byte{0x01, 0x20}, mask: []byte{0x0f, 0xf0}}},
			[]byte{0x51, 0x20}, []byte{0xff, 0xf0}, codes.OK},
		{"omitted ternary matches anything", vs(exact4, tern12),
			[]fieldValue{{present: true, value: []byte{0xa}}, {}}, []byte{0xa0, 0x00}, []byte{0xf0, 0x00}, codes.OK},
		{"lpm prefix and optional", vs(lpm8, opt3),
			[]fieldValue{{present: true, value: []byte{0xc0}, prefixLen: 2}, {present: true, value: []byte{0x5}}},
			[]byte{0x06, 0x05}, []byte{0x06, 0x07}, codes.OK},
		{"omitted optional", vs(lpm8, opt3),
			[]fieldValue{{present: true, value: []byte{0xff}, prefixLen: 8}, {}}, []byte{0x07, 0xf8}, []byte{0x07, 0xf8}, codes.OK},
		{"range is refused", vs(rng8), []fieldValue{{present: true, value: []byte{1}, high: []byte{2}}}, nil, nil, codes.Unimplemented},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compressed(tc.t, tc.match)
			if codeOf(err) != tc.code {
				t.Fatalf("error %v, want code %v", err, tc.code)
			}
			if err != nil {
				return
			}
			if !bytes.Equal(got.Value, tc.value) || !bytes.Equal(got.Mask, tc.mask) {
				t.Fatalf("value %x mask %x, want %x %x", got.Value, got.Mask, tc.value, tc.mask)
			}
			back, err := expanded(tc.t, got)
			if err != nil || !reflect.DeepEqual(back, tc.match) {
				t.Fatalf("expanded back to %+v (%v), want %+v", back, err, tc.match)
			}
		})
	}
}

// TestExpandedRefuses: a member the device holds that no P4Runtime match
// of the set's fields gives is an internal error, never a wrong read.
func TestExpandedRefuses(t *testing.T) {
	vs := func(fs ...fieldInfo) *tableInfo { return &tableInfo{name: "vs", fields: fs} }
	for _, tc := range []struct {
		name string
		f    fieldInfo
		mask []byte
	}{
		{"exact field not matched", fieldInfo{name: "a", width: 8, kind: matchExact}, []byte{0}},
		{"exact field partly masked", fieldInfo{name: "a", width: 8, kind: matchExact}, []byte{0xf0}},
		{"optional field partly masked", fieldInfo{name: "d", width: 8, kind: matchOptional}, []byte{0x0f}},
		{"lpm mask with a hole", fieldInfo{name: "c", width: 8, kind: matchLPM}, []byte{0xb0}},
		{"lpm mask not from the top", fieldInfo{name: "c", width: 8, kind: matchLPM}, []byte{0x70}},
		{"range field", fieldInfo{name: "e", width: 8, kind: matchRange}, []byte{0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expanded(vs(tc.f), pipeline.ValueSetMember{Value: []byte{0}, Mask: tc.mask})
			if codeOf(err) != codes.Internal {
				t.Fatalf("expanded = %+v, %v; want an internal error", got, err)
			}
		})
	}
}
