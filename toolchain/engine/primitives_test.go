package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Every registered primitive refuses a call with a parameter count it does
// not take, naming itself, before its builder runs (so no builder has to
// check); an unknown name is refused too.
func TestPrimitiveArity(t *testing.T) {
	names := make([]string, 0, len(primitives))
	for name := range primitives {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		def := primitives[name]
		if def.arity == nil {
			continue
		}
		n := slices.Max(def.arity) + 1
		t.Run(name, func(t *testing.T) {
			params := make([]any, n)
			for i := range params {
				params[i] = tH("0x0")
			}
			_, err := Load(testProg{fields: [][]any{u("a", 8)}, prims: []any{tPrim(name, params...)}}.json(), Options{})
			want := fmt.Sprintf("primitive %s takes %v parameters, got %d", name, def.arity, n)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Load = %v, want an error containing %q", err, want)
			}
		})
	}
	_, err := Load(testProg{fields: [][]any{u("a", 8)}, prims: []any{tPrim("frobnicate")}}.json(), Options{})
	if err == nil || !strings.Contains(err.Error(), `unsupported primitive "frobnicate"`) {
		t.Fatalf("Load = %v, want unsupported primitive", err)
	}
}

// Each primitive alone in an action, on a two-byte header h = (a, c).
func TestPrimitivesAlone(t *testing.T) {
	a, c := tF("h", "a"), tF("h", "c")
	for _, tc := range []struct {
		name     string
		prim     any
		in, want string
	}{
		{"assign", tPrim("assign", c, a), "05 00", "05 05"},
		{"modify_field (P4_14 name)", tPrim("modify_field", c, tH("0x09")), "05 00", "05 09"},
		{"add_to_field", tPrim("add_to_field", c, tH("0x03")), "00 fe", "00 01"},
		{"subtract_from_field", tPrim("subtract_from_field", c, tH("0x03")), "00 01", "00 fe"},
		{"add", tPrim("add", c, a, tH("0x10")), "05 00", "05 15"},
		{"subtract", tPrim("subtract", c, a, tH("0x06")), "05 00", "05 ff"},
		{"bit_and", tPrim("bit_and", c, a, tH("0x0c")), "0f 00", "0f 0c"},
		{"bit_or", tPrim("bit_or", c, a, tH("0x30")), "0f 00", "0f 3f"},
		{"bit_xor", tPrim("bit_xor", c, a, tH("0xff")), "0f 00", "0f f0"},
		{"shift_left", tPrim("shift_left", c, a, tH("0x04")), "0f 00", "0f f0"},
		{"shift_right", tPrim("shift_right", c, a, tH("0x02")), "0f 00", "0f 03"},
		{"no_op", tPrim("no_op"), "01 02", "01 02"},
		{"truncate", tPrim("truncate", tH("0x1")), "01 02", "01"},
		{"modify_field_rng_uniform with one value", tPrim("modify_field_rng_uniform", c, tH("0x07"), tH("0x07")), "01 02", "01 07"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := testProg{fields: [][]any{u("a", 8), u("c", 8)}, prims: []any{tc.prim}}.load(t, Options{})
			if got, want := run1(t, pl, mustHex(t, tc.in)), mustHex(t, tc.want); string(got) != string(want) {
				t.Errorf("got %x, want %x", got, want)
			}
		})
	}
}
