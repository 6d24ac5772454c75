package parser

import (
	"testing"
	"unicode/utf8"
)

// FuzzParse checks that the parser never panics and that every error it
// reports has a position.
func FuzzParse(f *testing.F) {
	seeds := []string{
		program,
		"header h { bit<8> a; }",
		"control c(inout bit<8> x) { apply { x = x + 1; if (x > 2) { exit; } } }",
		"parser p(packet_in b) { state start { transition select(b.lookahead<bit<8>>()) { 0: accept; default: reject; } } }",
		"const int x = (1 << 3) | 0x10;",
		"action a(bit<8> p) { h.f = p; } table t { key = { h.f: exact; } actions = { a; } }",
		"@name(\"x\") @id(5) extern E<T> { E(); void m<U>(in U u); }",
		"struct s { bit<8> a; } const s v = { a = 1 };",
		"x = a ? b : c ? d : e;",
		"(((((",
		"}}}}",
		"header h { varbit<8> v; } typedef h[4] stack_t;",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) {
			return
		}
		prog, errs := Parse("fuzz.p4", src)
		if prog == nil {
			t.Fatal("Parse returned a nil program")
		}
		for _, e := range errs {
			if e.Pos.File == "" {
				t.Fatalf("error without a file: %v", e)
			}
		}
	})
}
