package engine

import (
	"testing"
)

func u(name string, w int) []any { return []any{name, w, false} }
func s(name string, w int) []any { return []any{name, w, true} }
func un(op string, x any) map[string]any {
	return map[string]any{"type": "expression", "value": map[string]any{"op": op, "left": nil, "right": x}}
}
func ter(c, l, r any) map[string]any {
	return map[string]any{"type": "expression", "value": map[string]any{"op": "?", "cond": c, "left": l, "right": r}}
}

// TestArithmetic checks BMv2's arithmetic (infinite precision, truncation on
// store) on the fast (<= 64-bit) and big paths, signed and unsigned, with the
// expression shapes p4c emits. Header h is a, b, c; the action computes c.
func TestArithmetic(t *testing.T) {
	a, b := tF("h", "a"), tF("h", "b")
	c := tF("h", "c")
	m8, m16, m32 := tH("0xff"), tH("0xffff"), tH("0xffffffff")
	m64 := tH("0xffffffffffffffff")
	m128 := tH("0xffffffffffffffffffffffffffffffff")
	cases := []struct {
		name     string
		fields   [][]any
		expr     any
		in, want string
	}{
		{"8-bit add wraps", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE("&", tE("+", a, b), m8), "f0 20 00", "f0 20 10"},
		{"8-bit sub below zero", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE("&", tE("-", a, b), m8), "10 20 00", "10 20 f0"},
		{"store truncates without mask", [][]any{u("a", 8), u("b", 8), u("c", 4), u("pad", 4)}, tE("+", a, b), "0f 02 00", "0f 02 10"},
		{"64-bit add wraps", [][]any{u("a", 64), u("b", 64), u("c", 64)}, tE("&", tE("+", a, b), m64),
			"ffffffffffffffff 0000000000000002 0000000000000000", "ffffffffffffffff 0000000000000002 0000000000000001"},
		{"64-bit mul wraps", [][]any{u("a", 64), u("b", 64), u("c", 64)}, tE("&", tE("*", a, b), m64),
			"0000000100000000 0000000100000001 0000000000000000", "0000000100000000 0000000100000001 0000000100000000"},
		{"128-bit add carries past 64", [][]any{u("a", 128), u("b", 128), u("c", 128)}, tE("&", tE("+", a, b), m128),
			"0000000000000000ffffffffffffffff 00000000000000000000000000000001 00000000000000000000000000000000",
			"0000000000000000ffffffffffffffff 00000000000000000000000000000001 00000000000000010000000000000000"},
		{"128-bit add wraps", [][]any{u("a", 128), u("b", 128), u("c", 128)}, tE("&", tE("+", a, b), m128),
			"ffffffffffffffffffffffffffffffff 00000000000000000000000000000001 11111111111111111111111111111111",
			"ffffffffffffffffffffffffffffffff 00000000000000000000000000000001 00000000000000000000000000000000"},
		{"128-bit shift right 64", [][]any{u("a", 128), u("b", 128), u("c", 128)}, tE(">>", a, tH("0x40")),
			"0123456789abcdef0000000000000000 00000000000000000000000000000000 00000000000000000000000000000000",
			"0123456789abcdef0000000000000000 00000000000000000000000000000000 00000000000000000123456789abcdef"},
		{"runtime shift past width", [][]any{u("a", 16), u("b", 8), u("c", 16)}, tE("&", tE("<<", a, b), m16), "abcd 14 0000", "abcd 14 0000"},
		{"runtime shift in range", [][]any{u("a", 16), u("b", 8), u("c", 16)}, tE("&", tE("<<", a, b), m16), "abcd 04 0000", "abcd 04 bcd0"},
		{"shift right past width", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE(">>", a, tH("0x09")), "ff 00 aa", "ff 00 00"},
		{"signed add wraps (two_comp_mod)", [][]any{s("a", 8), s("b", 8), s("c", 8)}, tE("two_comp_mod", tE("+", a, b), tH("0x08")), "7f 01 00", "7f 01 80"},
		{"signed less-than", [][]any{s("a", 8), s("b", 8), u("c", 8)}, un("b2d", tE("<", a, b)), "ff 01 00", "ff 01 01"},
		{"unsigned less-than same bits", [][]any{u("a", 8), u("b", 8), u("c", 8)}, un("b2d", tE("<", a, b)), "ff 01 00", "ff 01 00"},
		{"arithmetic shift right", [][]any{s("a", 8), s("b", 8), s("c", 8)}, tE("two_comp_mod", tE(">>", a, tH("0x01")), tH("0x08")), "80 00 00", "80 00 c0"},
		{"usat_cast clamps high", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE("usat_cast", tE("+", a, b), tH("0x08")), "f0 20 00", "f0 20 ff"},
		{"usat_cast clamps low", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE("usat_cast", tE("-", a, b), tH("0x08")), "10 20 55", "10 20 00"},
		{"sat_cast clamps high", [][]any{s("a", 8), s("b", 8), s("c", 8)}, tE("sat_cast", tE("+", a, b), tH("0x08")), "7f 7f 00", "7f 7f 7f"},
		{"sat_cast clamps low", [][]any{s("a", 8), s("b", 8), s("c", 8)}, tE("sat_cast", tE("+", a, b), tH("0x08")), "80 ff 00", "80 ff 80"},
		{"conditional operator", [][]any{u("a", 8), u("b", 8), u("c", 8)}, ter(tE("==", a, b), tH("0x11"), tH("0x22")), "05 05 00", "05 05 11"},
		{"conditional operator false", [][]any{u("a", 8), u("b", 8), u("c", 8)}, ter(tE("==", a, b), tH("0x11"), tH("0x22")), "05 06 00", "05 06 22"},
		{"division", [][]any{u("a", 32), u("b", 32), u("c", 32)}, tE("/", a, b), "00000064 00000007 00000000", "00000064 00000007 0000000e"},
		{"modulo", [][]any{u("a", 32), u("b", 32), u("c", 32)}, tE("%", a, b), "00000064 00000007 00000000", "00000064 00000007 00000002"},
		{"division by zero gives 0", [][]any{u("a", 32), u("b", 32), u("c", 32)}, tE("/", a, b), "00000064 00000000 ffffffff", "00000064 00000000 00000000"},
		{"bitwise not", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE("&", un("~", a), m8), "0f 00 00", "0f 00 f0"},
		{"64-bit unsigned compare", [][]any{u("a", 64), u("b", 64), u("c", 8)}, un("b2d", tE(">", a, b)),
			"ffffffffffffffff 0000000000000001 00", "ffffffffffffffff 0000000000000001 01"},
		{"64-bit unsigned vs signed compare", [][]any{u("a", 64), s("b", 8), u("c", 8)}, un("b2d", tE(">", a, b)),
			"0000000000000000 ff 00", "0000000000000000 ff 01"},
		{"72-bit compare", [][]any{u("a", 72), u("b", 72), u("c", 8)}, un("b2d", tE(">", a, b)),
			"010000000000000000 00ffffffffffffffff 00", "010000000000000000 00ffffffffffffffff 01"},
		{"concatenation", [][]any{u("a", 8), u("b", 8), u("c", 16)}, tE("|", tE("&", tE("<<", a, tH("0x08")), tH("0xff00")), b), "ab cd 0000", "ab cd abcd"},
		{"slice", [][]any{u("a", 16), u("b", 8), u("c", 8)}, tE("&", tE(">>", a, tH("0x04")), m8), "abcd 00 00", "abcd 00 bc"},
		{"32-bit decrement wraps", [][]any{u("a", 32), u("b", 8), u("c", 32)}, tE("&", tE("+", a, m32), m32), "00000000 00 00000000", "00000000 00 ffffffff"},
		{"unaligned fields", [][]any{u("a", 3), u("b", 13), u("c", 8)}, tE("&", tE("+", b, tH("0x01")), m8), "1f ff 00", "1f ff 00"},
		{"xor and or", [][]any{u("a", 8), u("b", 8), u("c", 8)}, tE("|", tE("^", a, b), tH("0x01")), "f0 0f 00", "f0 0f ff"},
		{"d2b of nonzero wide value", [][]any{u("a", 128), u("b", 8), u("c", 8)}, un("b2d", un("d2b", a)),
			"01000000000000000000000000000000 00 00", "01000000000000000000000000000000 00 01"},
		{"equality of wide values", [][]any{u("a", 96), u("b", 96), u("c", 8)}, un("b2d", tE("==", a, b)),
			"0102030405060708090a0b0c 0102030405060708090a0b0c 00", "0102030405060708090a0b0c 0102030405060708090a0b0c 01"},
		{"signed wide two_comp_mod", [][]any{s("a", 80), s("b", 80), s("c", 80)}, tE("two_comp_mod", tE("-", a, b), tH("0x50")),
			"00000000000000000000 00000000000000000001 00000000000000000000", "00000000000000000000 00000000000000000001 ffffffffffffffffffff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := testProg{fields: tc.fields, prims: []any{tAssign(c, tc.expr)}}
			pl := tp.load(t, Options{})
			got := run1(t, pl, mustHex(t, tc.in))
			if want := mustHex(t, tc.want); string(got) != string(want) {
				t.Errorf("got %x, want %x", got, want)
			}
		})
	}
}

// TestControlFlowPrimitives covers _jump_if_zero/_jump (if/else inside
// actions), exit, and header validity primitives.
func TestControlFlowPrimitives(t *testing.T) {
	a, c := tF("h", "a"), tF("h", "c")
	fields := [][]any{u("a", 8), u("c", 8)}
	cases := []struct {
		name     string
		prims    []any
		in, want string
		drop     bool
	}{
		{"if taken", []any{
			// indices count the egress_spec assignment testProg prepends
			tPrim("_jump_if_zero", un("d2b", a), tH("0x4")), // if (a != 0)
			tAssign(c, tH("0x01")),
			tPrim("_jump", tH("0x5")),
			tAssign(c, tH("0x02")),
		}, "05 00", "05 01", false},
		{"else taken", []any{
			tPrim("_jump_if_zero", un("d2b", a), tH("0x4")),
			tAssign(c, tH("0x01")),
			tPrim("_jump", tH("0x5")),
			tAssign(c, tH("0x02")),
		}, "00 00", "00 02", false},
		{"exit stops the action", []any{tAssign(c, tH("0x07")), tPrim("exit"), tAssign(c, tH("0x08"))}, "00 00", "00 07", false},
		{"remove_header drops it from the output", []any{tPrim("remove_header", map[string]any{"type": "header", "value": "h"})}, "01 02", "", false},
		{"mark_to_drop", []any{tPrim("mark_to_drop", map[string]any{"type": "header", "value": "standard_metadata"})}, "01 02", "", true},
		{"assert failure drops", []any{tPrim("assert", tE("==", a, tH("0x01")))}, "00 02", "", true},
		{"assert success", []any{tPrim("assert", tE("==", a, tH("0x01")))}, "01 02", "01 02", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := testProg{fields: fields, prims: tc.prims}.load(t, Options{})
			out := process(pl, mustHex(t, tc.in), 0)
			if tc.drop {
				if len(out) != 0 {
					t.Fatalf("got %d frames, want a drop", len(out))
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("got %d frames, want 1", len(out))
			}
			if want := mustHex(t, tc.want); string(out[0].frame) != string(want) {
				t.Errorf("got %x, want %x", out[0].frame, want)
			}
		})
	}
}
