package p4rt

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestDecodeDeviceConfig: each p4_device_config encoding decodes to the
// JSON simple_switch_grpc would load (docs/p4runtime.md).
func TestDecodeDeviceConfig(t *testing.T) {
	js := []byte(`{"program": "x"}`)
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	reassign := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)
	kv := func(k, v string) []byte { return field(1, append(field(1, []byte(k)), field(2, []byte(v))...)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name     string
		in       []byte
		json     []byte // nil: no program named
		wrapped  bool
		reassign bool
		extras   map[string]string
	}{
		{"JSON", js, js, false, false, nil},
		{"JSON after whitespace", append([]byte(" \n\t"), js...), append([]byte(" \n\t"), js...), false, false, nil},
		{"wrapper", cat(reassign, field(3, js)), js, true, true, nil},
		{"wrapper, no reassign", field(3, js), js, true, false, nil},
		{"wrapper, fields in any order", cat(field(3, js), reassign), js, true, true, nil},
		{"wrapper, last device_data wins", cat(field(3, []byte("old")), field(3, js)), js, true, false, nil},
		{"wrapper with extras", cat(reassign, field(2, cat(kv("a", "1"), kv("b", "2"))), field(3, js)), js, true, true,
			map[string]string{"a": "1", "b": "2"}},
		{"wrapper with an unknown field", cat(field(9, []byte("?")), field(3, js)), js, true, false, nil},
		{"wrapper without device_data", reassign, nil, true, true, nil},
		{"empty: an empty wrapper", []byte{}, nil, true, false, nil},
		{"extras key not UTF-8: not a wrapper", cat(field(2, kv("\xff", "1")), field(3, js)),
			cat(field(2, kv("\xff", "1")), field(3, js)), false, false, nil},
		{"truncated wrapper: taken for JSON", field(3, js)[:5], field(3, js)[:5], false, false, nil},
		{"garbage: taken for JSON", []byte("\xff\xfe?"), []byte("\xff\xfe?"), false, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dc := decodeDeviceConfig(tc.in)
			if !bytes.Equal(dc.json, tc.json) || (dc.json == nil) != (tc.json == nil) {
				t.Errorf("json %q, want %q", dc.json, tc.json)
			}
			if dc.wrapped != tc.wrapped || dc.reassign != tc.reassign {
				t.Errorf("wrapped %v reassign %v, want %v %v", dc.wrapped, dc.reassign, tc.wrapped, tc.reassign)
			}
			if len(dc.extras) != len(tc.extras) {
				t.Errorf("extras %v, want %v", dc.extras, tc.extras)
			}
			for k, v := range tc.extras {
				if dc.extras[k] != v {
					t.Errorf("extras %v, want %v", dc.extras, tc.extras)
				}
			}
		})
	}
}
