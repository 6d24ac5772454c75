package engine

import (
	"strings"
	"testing"
)

// TestActionDataPlacement: the engine loads action data where BMv2 does
// ("runtime_data" as a primitive's parameter or a parameters_vector item,
// "local" inside an expression) and refuses it elsewhere, as BMv2 does, so
// a compiler that mixes them up is caught without BMv2 at hand.
func TestActionDataPlacement(t *testing.T) {
	local := map[string]any{"type": "local", "value": 0}
	sum := func(x any) any { return tE("+", tF("h", "a"), x) }
	tests := []struct {
		name    string
		param   any
		wantErr string
	}{
		{"runtime_data as the parameter", tRD(0), ""},
		{"local inside an expression", sum(local), ""},
		{"runtime_data inside an expression", sum(tRD(0)), `must be "local"`},
		{"runtime_data deep inside", tE("&", sum(tRD(0)), tH("0xff")), `must be "local"`},
		{"runtime_data in a ternary's condition", map[string]any{"type": "expression", "value": map[string]any{
			"op": "?", "left": tH("0x1"), "right": tH("0x2"), "cond": tE("d2b", nil, tRD(0))}}, `must be "local"`},
		{"runtime_data as a register index", map[string]any{"type": "register", "value": []any{"r", tRD(0)}}, `must be "local"`},
		{"local as the parameter", local, `must be "runtime_data"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := testProg{fields: [][]any{u("a", 8), u("c", 8)},
				params: []map[string]any{{"name": "v", "bitwidth": 8}},
				prims:  []any{tAssign(tF("h", "c"), tc.param)}}
			_, err := Load(tp.json(), Options{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
