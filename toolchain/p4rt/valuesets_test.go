package p4rt

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestCompressed checks the value/mask a value set member becomes: fields
// concatenated first-most-significant, each kind's mask, omitted fields
// matching anything.
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
		})
	}
}
