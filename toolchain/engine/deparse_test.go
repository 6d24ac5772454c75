package engine

import (
	"bytes"
	"testing"
)

// TestDeparse covers the in-place path (headers where the parser found
// them: only changed fields are rewritten) and the full path (headers
// added, removed or moved), which must give the same bytes.
func TestDeparse(t *testing.T) {
	hdr := func(n string) map[string]any { return map[string]any{"type": "header", "value": n} }
	extract := func(n string) map[string]any {
		return map[string]any{"op": "extract", "parameters": []any{map[string]any{"type": "regular", "value": n}}}
	}
	cases := []struct {
		name  string
		prims []any
		in    string
		want  string
	}{
		{"unchanged", nil, "0102 0304 aabb", "0102 0304 aabb"},
		{"one field changed", []any{tAssign(tF("g", "x"), tH("0x0506"))}, "0102 0304 aabb", "0102 0506 aabb"},
		{"unaligned field changed", []any{tAssign(tF("h", "b"), tH("0x0f"))}, "0102 0304 aabb", "000f 0304 aabb"}, // h is a:4 b:12
		{"front header removed", []any{tPrim("remove_header", hdr("h"))}, "0102 0304 aabb", "0304 aabb"},
		{"back header removed", []any{tPrim("remove_header", hdr("g"))}, "0102 0304 aabb", "0102 aabb"},
		{"header added in front", []any{tPrim("add_header", hdr("n")), tAssign(tF("n", "y"), tH("0x77"))}, "0102 0304 aabb", "77 0102 0304 aabb"},
		{"removed and re-added is zeroed", []any{tPrim("remove_header", hdr("h")), tPrim("add_header", hdr("h"))}, "0102 0304 aabb", "0000 0304 aabb"},
		{"header copied", []any{tPrim("assign_header", hdr("n"), hdr("n")), tAssign(tF("h", "a"), tF("g", "x"))}, "0102 0304 aabb", "4102 0304 aabb"}, // 0x0304 stored in 4 bits
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := testProg{
				fields: [][]any{u("a", 8), u("b", 8)},
				prims:  tc.prims,
				extra: map[string]any{
					"header_types": []any{
						map[string]any{"name": "scalars_0", "id": 0, "fields": []any{}},
						map[string]any{"name": "standard_metadata", "id": 1, "fields": stdMetaFields},
						map[string]any{"name": "h_t", "id": 2, "fields": [][]any{u("a", 4), u("b", 12)}},
						map[string]any{"name": "g_t", "id": 3, "fields": [][]any{u("x", 16)}},
						map[string]any{"name": "n_t", "id": 4, "fields": [][]any{u("y", 8)}},
					},
					"headers": []any{
						map[string]any{"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": true},
						map[string]any{"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
						map[string]any{"name": "h", "id": 2, "header_type": "h_t", "metadata": false},
						map[string]any{"name": "g", "id": 3, "header_type": "g_t", "metadata": false},
						map[string]any{"name": "n", "id": 4, "header_type": "n_t", "metadata": false},
					},
					"parsers": []any{map[string]any{"name": "parser", "id": 0, "init_state": "start", "parse_states": []any{
						map[string]any{"name": "start", "id": 0, "parser_ops": []any{extract("h"), extract("g")},
							"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}}, "transition_key": []any{}},
					}}},
					"deparsers": []any{map[string]any{"name": "deparser", "id": 0, "order": []string{"n", "h", "g"}}},
				},
			}
			pl := tp.load(t, Options{})
			got := run1(t, pl, mustHex(t, tc.in))
			if want := mustHex(t, tc.want); !bytes.Equal(got, want) {
				t.Errorf("got %x, want %x", got, want)
			}
		})
	}
}
