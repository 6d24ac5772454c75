package compiler

import (
	"strconv"
	"strings"
	"testing"
)

// TestP4InfoControllerHeaders: controller packet metadata as p4c's P4Info
// has them: a @hidden field takes a field id but is not described, a
// @hidden controller header is not described at all, and a header holding
// structs is flattened (p4c's FlattenHeader): every bit field at any
// depth, named by its dotted path, with the annotations of the fields on
// the way (the innermost winning).
func TestP4InfoControllerHeaders(t *testing.T) {
	tests := []struct {
		name, types string
		want        string // "packet_in: id name bits annotations; ..." per header, " | " between headers
	}{
		{"plain", `@controller_header("packet_in") header pin_t { bit<9> port; @padding bit<7> pad; }`,
			`packet_in: 1 port 9 []; 2 pad 7 [@padding]`},
		{"hidden field", `@controller_header("packet_in") header pin_t { bit<9> port; @hidden bit<7> pad; bit<8> reason; }`,
			`packet_in: 1 port 9 []; 3 reason 8 []`},
		{"explicit ids", `@controller_header("packet_in") header pin_t { bit<9> port; @id(7) bit<7> pad; }`,
			`packet_in: 1 port 9 []; 7 pad 7 []`},
		{"hidden header", `@controller_header("packet_in") header pin_t { bit<16> a; }
			@hidden @controller_header("packet_out") header pout_t { bit<16> b; }`,
			`packet_in: 1 a 16 []`},
		{"struct inside", `struct port_s { @foo bit<9> num; bit<7> pad; }
			@controller_header("packet_in") header pin_t { @bar port_s port; bit<8> reason; }`,
			`packet_in: 1 port.num 9 [@foo @bar]; 2 port.pad 7 [@bar]; 3 reason 8 []`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// the headers are used so that they are part of the program
			decls := "pin_t pin;"
			apply := "pin.setValid();"
			if strings.Contains(tc.types, "pout_t") {
				decls += " pout_t pout;"
				apply += " pout.setValid();"
			}
			res := compileRules(t, tc.types, decls, apply)
			var hdrs []string
			for _, ch := range res.P4Info.ControllerPacketMetadata {
				var fields []string
				for _, m := range ch.Metadata {
					fields = append(fields, strings.Join([]string{strconv.Itoa(int(m.Id)), m.Name, strconv.Itoa(int(m.Bitwidth)), "[" + strings.Join(m.Annotations, " ") + "]"}, " "))
				}
				hdrs = append(hdrs, ch.Preamble.Name+": "+strings.Join(fields, "; "))
			}
			if got := strings.Join(hdrs, " | "); got != tc.want {
				t.Errorf("controller packet metadata\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
