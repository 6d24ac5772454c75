package p4rt

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestParseTranslations: the translation file's format and every way it
// can be wrong.
func TestParseTranslations(t *testing.T) {
	good := `{
		"tna/PortId_t": [{"sdn": 1, "device": 1}, {"sdn": 4294967293, "device": 255}],
		"example.org/PortName_t": [{"sdn": "Ethernet0", "device": 0}],
		"big": [{"sdn": 340282366920938463463374607431768211455, "device": 3}]
	}`
	tr, err := ParseTranslations([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	ports := tr.uris["tna/PortId_t"]
	if ports.strings || !bytes.Equal(ports.toDev[string([]byte{0xff, 0xff, 0xff, 0xfd})], []byte{0xff}) ||
		!bytes.Equal(ports.toSDN[string([]byte{1})], []byte{1}) || ports.maxSDN != 32 {
		t.Fatalf("ports mapping %+v", ports)
	}
	if names := tr.uris["example.org/PortName_t"]; !names.strings || !bytes.Equal(names.toSDN[string([]byte{0})], []byte("Ethernet0")) {
		t.Fatalf("names mapping %+v", names)
	}
	if big := tr.uris["big"]; big.maxSDN != 128 {
		t.Fatalf("a 128-bit SDN value: %d bits", big.maxSDN)
	}

	bad := []struct{ name, file, msg string }{
		{"not JSON", `{"a": [`, "not a JSON object"},
		{"not an object", `[1, 2]`, "not a JSON object"},
		{"text after", `{} {}`, "text after"},
		{"empty URI", `{"": [{"sdn": 1, "device": 1}]}`, "empty translation URI"},
		{"not a list", `{"u": {"sdn": 1, "device": 1}}`, "list of"},
		{"no pairs", `{"u": []}`, "no pairs"},
		{"unknown key", `{"u": [{"sdn": 1, "device": 1, "port": 3}]}`, "unknown field"},
		{"missing device", `{"u": [{"sdn": 1}]}`, `needs both "sdn" and "device"`},
		{"negative", `{"u": [{"sdn": -1, "device": 1}]}`, "not a non-negative integer"},
		{"fraction", `{"u": [{"sdn": 1, "device": 1.5}]}`, "not a non-negative integer"},
		{"device string", `{"u": [{"sdn": 1, "device": "1"}]}`, "is not a number"},
		{"empty string", `{"u": [{"sdn": "", "device": 1}]}`, "empty SDN string"},
		{"mixed kinds", `{"u": [{"sdn": 1, "device": 1}, {"sdn": "x", "device": 2}]}`, "all numbers"},
		{"SDN twice", `{"u": [{"sdn": 1, "device": 1}, {"sdn": 1, "device": 2}]}`, "SDN value 1 is mapped twice"},
		{"device twice", `{"u": [{"sdn": 1, "device": 1}, {"sdn": 2, "device": 1}]}`, "device value 1 is mapped twice"},
		{"string twice", `{"u": [{"sdn": "a", "device": 1}, {"sdn": "a", "device": 2}]}`, `SDN value "a" is mapped twice`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTranslations([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one with %q", err, tc.msg)
			}
		})
	}

	dir := t.TempDir()
	if _, err := LoadTranslationFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file loaded")
	}
	path := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(path, []byte(`{"u": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTranslationFile(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("a bad file's error %v does not name it", err)
	}
}

// TestTranslationValues: one value each way, with the identity, a file's
// numbers and a file's strings, and the codes of the refusals.
func TestTranslationValues(t *testing.T) {
	file, err := ParseTranslations([]byte(`{
		"num": [{"sdn": 1000, "device": 1}, {"sdn": 1001, "device": 600}],
		"str": [{"sdn": "eth1", "device": 1}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	identity := &translation{typeName: "P", uri: "id", sdnWidth: 32}
	mapped := &translation{typeName: "P", uri: "num", sdnWidth: 32, m: file.uris["num"]}
	named := &translation{typeName: "N", uri: "str", m: file.uris["str"]}
	narrow := &translation{typeName: "P", uri: "id", sdnWidth: 8}
	tests := []struct {
		name   string
		tr     *translation
		toDev  bool
		in     []byte
		out    []byte
		code   codes.Code
		msgHas string
	}{
		{"identity in", identity, true, []byte{0, 0, 0, 5}, []byte{5}, codes.OK, ""},
		{"identity in, max device value", identity, true, []byte{1, 0xff}, []byte{1, 0xff}, codes.OK, ""},
		{"identity in, too wide for the device", identity, true, []byte{2, 0}, nil, codes.InvalidArgument, "does not fit the device's 9 bits"},
		{"identity in, too wide for the SDN width", identity, true, []byte{1, 0, 0, 0, 0}, nil, codes.OutOfRange, ""},
		{"identity in, empty", identity, true, nil, nil, codes.OutOfRange, ""},
		{"identity out", identity, false, []byte{5}, []byte{5}, codes.OK, ""},
		{"identity out, wider than SDN", narrow, false, []byte{1, 0}, nil, codes.FailedPrecondition, "does not fit its 8 SDN bits"},
		{"mapped in", mapped, true, []byte{0x03, 0xe8}, []byte{1}, codes.OK, ""},
		{"mapped in, unlisted", mapped, true, []byte{1}, nil, codes.InvalidArgument, `not in the translation file's mapping of "num"`},
		{"mapped in, device value too wide", mapped, true, []byte{0x03, 0xe9}, nil, codes.InvalidArgument, "maps to device value 600"},
		{"mapped out", mapped, false, []byte{1}, []byte{0x03, 0xe8}, codes.OK, ""},
		{"mapped out, unlisted", mapped, false, []byte{2}, nil, codes.FailedPrecondition, "device value 2"},
		{"string in", named, true, []byte("eth1"), []byte{1}, codes.OK, ""},
		{"string in, unlisted", named, true, []byte("eth2"), nil, codes.InvalidArgument, `value "eth2"`},
		{"string in, empty", named, true, nil, nil, codes.InvalidArgument, "empty string"},
		{"string out", named, false, []byte{1}, []byte("eth1"), codes.OK, ""},
		{"string out, unlisted", named, false, []byte{3}, nil, codes.FailedPrecondition, "device value 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			var err error
			if tc.toDev {
				got, err = tc.tr.toDevice(tc.in, 9)
			} else {
				got, err = tc.tr.toSDN(tc.in)
			}
			if codeOf(err) != tc.code || (err != nil && !strings.Contains(messageOf(err), tc.msgHas)) {
				t.Fatalf("error %v, want code %v with %q", err, tc.code, tc.msgHas)
			}
			if err == nil && !bytes.Equal(got, tc.out) {
				t.Fatalf("got %x, want %x", got, tc.out)
			}
		})
	}
}

// TestTranslatedMatch: each match kind of a translated field, written as
// the controller may (non-canonical widths), becomes the device's one-value
// match, and renders back as the canonical write.
func TestTranslatedMatch(t *testing.T) {
	tr := &translation{typeName: "P", uri: "id", sdnWidth: 32}
	tbl := &tableInfo{name: "t"}
	ones32 := []byte{0xff, 0xff, 0xff, 0xff}
	tests := []struct {
		kind      matchKind
		written   *p4v1.FieldMatch
		device    fieldValue
		canonical *p4v1.FieldMatch
	}{
		{matchExact,
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{0, 0, 1, 2}}}},
			fieldValue{present: true, value: []byte{1, 2}},
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{1, 2}}}}},
		{matchOptional,
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: []byte{0, 7}}}},
			fieldValue{present: true, value: []byte{7}},
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: []byte{7}}}}},
		{matchTernary,
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: []byte{0, 0, 0, 7}, Mask: append([]byte{0}, ones32...)}}},
			fieldValue{present: true, value: []byte{7}, mask: []byte{1, 0xff}},
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: []byte{7}, Mask: ones32}}}},
		{matchLPM,
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: []byte{0, 0, 0, 7}, PrefixLen: 32}}},
			fieldValue{present: true, value: []byte{7}, prefixLen: 9},
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: []byte{7}, PrefixLen: 32}}}},
		{matchRange,
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: []byte{0, 7}, High: []byte{7}}}},
			fieldValue{present: true, value: []byte{7}, high: []byte{7}},
			&p4v1.FieldMatch{FieldMatchType: &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: []byte{7}, High: []byte{7}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.kind.String(), func(t *testing.T) {
			f := fieldInfo{id: 1, name: "port", width: 9, kind: tc.kind, tr: tr}
			got, err := parseField(tbl, f, tc.written)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.device) {
				t.Fatalf("device match %+v, want %+v", got, tc.device)
			}
			back := &p4v1.FieldMatch{}
			if err := sdnMatch(tbl, f, got, back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, tc.canonical) {
				t.Fatalf("rendered %v, want %v", back, tc.canonical)
			}
		})
	}

	// What the device may hold (a program's declared entry) but the
	// controller cannot be shown: more than one value.
	cannot := []struct {
		kind matchKind
		v    fieldValue
	}{
		{matchTernary, fieldValue{present: true, value: []byte{4}, mask: []byte{0xfc}}},
		{matchLPM, fieldValue{present: true, value: []byte{4}, prefixLen: 7}},
		{matchRange, fieldValue{present: true, value: []byte{4}, high: []byte{8}}},
	}
	for _, tc := range cannot {
		f := fieldInfo{id: 1, name: "port", width: 9, kind: tc.kind, tr: tr}
		if err := sdnMatch(tbl, f, tc.v, &p4v1.FieldMatch{}); codeOf(err) != codes.FailedPrecondition {
			t.Errorf("%s %+v rendered: %v, want FAILED_PRECONDITION", tc.kind, tc.v, err)
		}
	}
}

// TestTranslatedTypes: which P4Info types translate, and the mapping each
// gets.
func TestTranslatedTypes(t *testing.T) {
	file, err := ParseTranslations([]byte(`{"mapped": [{"sdn": 1, "device": 1}], "names": [{"sdn": "a", "device": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	newType := func(uri string, bits int32, str bool) *p4configv1.P4NewTypeSpec {
		tt := &p4configv1.P4NewTypeTranslation{Uri: uri}
		if str {
			tt.SdnType = &p4configv1.P4NewTypeTranslation_SdnString_{SdnString: &p4configv1.P4NewTypeTranslation_SdnString{}}
		} else if bits > 0 {
			tt.SdnType = &p4configv1.P4NewTypeTranslation_SdnBitwidth{SdnBitwidth: bits}
		}
		return &p4configv1.P4NewTypeSpec{Representation: &p4configv1.P4NewTypeSpec_TranslatedType{TranslatedType: tt}}
	}
	info := &p4configv1.P4Info{TypeInfo: &p4configv1.P4TypeInfo{NewTypes: map[string]*p4configv1.P4NewTypeSpec{
		"Plain_t":  {Representation: &p4configv1.P4NewTypeSpec_OriginalType{OriginalType: &p4configv1.P4DataTypeSpec{}}},
		"Port_t":   newType("port", 32, false),
		"Mapped_t": newType("mapped", 16, false),
		"Name_t":   newType("names", 0, true),
	}}}
	trs, err := newTranslations(info, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 3 || trs["Plain_t"] != nil {
		t.Fatalf("translated types %v: want Port_t, Mapped_t and Name_t", trs)
	}
	if p := trs["Port_t"]; p.sdnWidth != 32 || p.m != nil || p.uri != "port" {
		t.Errorf("Port_t: %+v, want 32 bits, the identity", p)
	}
	if m := trs["Mapped_t"]; m.sdnWidth != 16 || m.m != file.uris["mapped"] {
		t.Errorf("Mapped_t: %+v, want 16 bits, the file's mapping", m)
	}
	if n := trs["Name_t"]; n.sdnWidth != 0 || n.m != file.uris["names"] {
		t.Errorf("Name_t: %+v, want a string, the file's mapping", n)
	}
	info.TypeInfo.NewTypes["Orphan_t"] = newType("nowhere", 0, true)
	if _, err := newTranslations(info, file); codeOf(err) != codes.InvalidArgument || !strings.Contains(messageOf(err), "Orphan_t") {
		t.Errorf("an unmapped string type: %v, want INVALID_ARGUMENT naming it", err)
	}
}
