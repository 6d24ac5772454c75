package compiler

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
)

// TestP4InfoTranslatedTypes: a `type` with @p4runtime_translation(uri, T)
// (P4Runtime spec §8.3) is described in type_info as a translated_type
// with the URI and the SDN representation (a width written as N or
// bit<N>, or string); match fields, action parameters and controller
// packet metadata of that type carry its name and the SDN width (none for
// string). A `type` without the annotation is an original_type, and its
// fields keep their own width.
func TestP4InfoTranslatedTypes(t *testing.T) {
	types := `
		@p4runtime_translation("p4.org/test/Port_t", 32) type bit<9> Port_t;
		@p4runtime_translation("p4.org/test/Big_t", bit<64>) type bit<16> Big_t;
		@p4runtime_translation("p4.org/test/Name_t", string) type bit<8> Name_t;
		type bit<12> Plain_t;
		@controller_header("packet_in") header packet_in_t { Port_t port; bit<7> pad; }`
	res := compileRules(t, types, `
		Port_t p; Big_t big; Name_t n; Plain_t pl; packet_in_t pin;
		action fwd(Port_t port, Big_t b, Name_t nm, Plain_t x) { p = port; big = b; n = nm; pl = x; }
		table t { key = { p : exact; big : ternary; n : exact; pl : lpm; } actions = { fwd; } }`,
		`t.apply(); pin.setValid(); pin.port = p;`)
	info := res.P4Info
	tests := []struct {
		name           string
		width          int32
		typeName, spec string
	}{
		{"Port_t", 32, "Port_t", `translated_type:{uri:"p4.org/test/Port_t"sdn_bitwidth:32}`},
		{"Big_t", 64, "Big_t", `translated_type:{uri:"p4.org/test/Big_t"sdn_bitwidth:64}`},
		{"Name_t", 0, "Name_t", `translated_type:{uri:"p4.org/test/Name_t"sdn_string:{}}`},
		{"Plain_t", 12, "Plain_t", `original_type:{bitstring:{bit:{bitwidth:12}}}`},
	}
	tbl := info.Tables[0]
	act := info.Actions[len(info.Actions)-1]
	for i, tc := range tests {
		mf := tbl.MatchFields[i]
		if mf.Bitwidth != tc.width || mf.GetTypeName().GetName() != tc.typeName {
			t.Errorf("match field %s: bitwidth %d type %q, want %d %q", mf.Name, mf.Bitwidth, mf.GetTypeName().GetName(), tc.width, tc.typeName)
		}
		prm := act.Params[i]
		if prm.Bitwidth != tc.width || prm.GetTypeName().GetName() != tc.typeName {
			t.Errorf("parameter %s: bitwidth %d type %q, want %d %q", prm.Name, prm.Bitwidth, prm.GetTypeName().GetName(), tc.width, tc.typeName)
		}
		spec := info.TypeInfo.NewTypes[tc.name]
		if got := strings.Join(strings.Fields(prototext.MarshalOptions{}.Format(spec)), ""); got != tc.spec {
			t.Errorf("type_info new_types[%s] = %s, want %s", tc.name, got, tc.spec)
		}
	}
	if len(info.ControllerPacketMetadata) != 1 {
		t.Fatalf("controller packet metadata %v", info.ControllerPacketMetadata)
	}
	md := info.ControllerPacketMetadata[0].Metadata[0]
	if md.Bitwidth != 32 || md.GetTypeName().GetName() != "Port_t" {
		t.Errorf("packet_in port: bitwidth %d type %q, want 32 Port_t", md.Bitwidth, md.GetTypeName().GetName())
	}
	// The BMv2 JSON describes the data plane: the action's runtime_data
	// keeps each parameter's underlying width (the switch translates the
	// SDN value into it), not the SDN width P4Info gives the controller.
	var doc struct {
		Actions []struct {
			Name        string `json:"name"`
			RuntimeData []struct {
				Name     string `json:"name"`
				Bitwidth int    `json:"bitwidth"`
			} `json:"runtime_data"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(res.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	device := map[string]int{"port": 9, "b": 16, "nm": 8, "x": 12}
	found := 0
	for _, a := range doc.Actions {
		for _, rd := range a.RuntimeData {
			if want, ok := device[rd.Name]; ok && strings.HasSuffix(a.Name, "fwd") {
				found++
				if rd.Bitwidth != want {
					t.Errorf("JSON runtime_data %s: bitwidth %d, want the device's %d", rd.Name, rd.Bitwidth, want)
				}
			}
		}
	}
	if found != len(device) {
		t.Errorf("JSON: %d of fwd's parameters found, want %d", found, len(device))
	}
}
