package lower

import (
	"strings"
	"testing"
)

// TestJSONEnumsArePlainOnly: the BMv2 JSON's "enums" lists the program's
// enums without an underlying type, as p4c does (its ConvertEnums pass
// maps only those). A serializable enum is its bit<W> to BMv2 and is left
// out, also when two members share a value, which BMv2's loader would
// refuse ("Invalid enums specification").
func TestJSONEnumsArePlainOnly(t *testing.T) {
	tests := []struct {
		name, decls string
		want        string // "Enum:member=value,..." per listed enum, space-separated
	}{
		{"plain", "enum Color { Red, Green }", "Color:Red=0,Green=1"},
		{"serializable", "enum bit<8> Reason { A = 0, B = 26 }", ""},
		{"serializable with a shared value", "enum bit<8> Reason { A = 29, B = 29 }", ""},
		{"both", "enum bit<2> Colour { G = 0, Y = 1, R = 3 }\nenum Dir { In, Out, Both }", "Dir:In=0,Out=1,Both=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(skeleton, "struct headers {", tc.decls+"\nstruct headers {", 1)
			src = strings.Replace(src, "INGRESS", "apply { }", 1)
			p, errs := lowerProgram(t, src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			var got []string
			for _, e := range p.Enums {
				var ms []string
				for _, m := range e.Members {
					ms = append(ms, m.Name+"="+m.Value.String())
				}
				got = append(got, e.Name+":"+strings.Join(ms, ","))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("enums %q, want %q", g, tc.want)
			}
		})
	}
}
