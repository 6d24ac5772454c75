package scanner

import (
	"math/big"
	"testing"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		src   string
		kinds []Kind
		texts []string
	}{
		{"header h { bit<8> f; }", []Kind{Header, Ident, LBrace, Bit, Lt, Int, Gt, Ident, Semi, RBrace, EOF},
			[]string{"header", "h", "{", "bit", "<", "8", ">", "f", ";", "}", ""}},
		{"a &&& b && c & d", []Kind{Ident, Mask, Ident, AndAnd, Ident, And, Ident, EOF}, nil},
		{"x |+| y |-| z | w", []Kind{Ident, SatAdd, Ident, SatSub, Ident, Or, Ident, EOF}, nil},
		{"a ++ b << 2 <= c", []Kind{Ident, Concat, Ident, Shl, Int, Le, Ident, EOF}, nil},
		{"x >> 2", []Kind{Ident, Gt, Gt, Int, EOF}, nil},
		{"x >>= 2; y |+|= 1", []Kind{Ident, ShrAssign, Int, Semi, Ident, SatAddAssign, Int, EOF}, nil},
		{"1..5 _ @name(\"x\")", []Kind{Int, DotDot, Int, Underscore, At, Ident, LParen, String, RParen, EOF}, nil},
		{"h = {#}; s = { a = 1, ... }", []Kind{Ident, Assign, InvalidHeader, Semi, Ident, Assign, LBrace, Ident, Assign, Int, Comma, Ellipsis, RBrace, EOF}, nil},
		{"// comment\n/* block\ncomment */ apply", []Kind{Apply, EOF}, nil},
		{"8w0x1F 16s5 0b101 32w0d10", []Kind{Int, Int, Int, Int, EOF}, []string{"8w0x1F", "16s5", "0b101", "32w0d10", ""}},
	}
	for _, tc := range tests {
		s := New("t.p4", tc.src)
		toks := s.All()
		if len(s.Errors) > 0 {
			t.Errorf("%q: unexpected errors %v", tc.src, s.Errors)
		}
		if len(toks) != len(tc.kinds) {
			t.Errorf("%q: got %d tokens %v, want %d", tc.src, len(toks), toks, len(tc.kinds))
			continue
		}
		for i, k := range tc.kinds {
			if toks[i].Kind != k {
				t.Errorf("%q: token %d is %v, want %v", tc.src, i, toks[i].Kind, k)
			}
			if tc.texts != nil && toks[i].Text != tc.texts[i] {
				t.Errorf("%q: token %d text %q, want %q", tc.src, i, toks[i].Text, tc.texts[i])
			}
		}
	}
}

func TestShiftAdjacency(t *testing.T) {
	toks := New("t", "a >> b > > c").All()
	if toks[2].Spaced {
		t.Errorf(">> : the second > must not be marked spaced")
	}
	if !toks[5].Spaced {
		t.Errorf("> > : the second > must be marked spaced")
	}
}

func TestPositionsAndLineMarkers(t *testing.T) {
	src := "a\n  b\n# 10 \"other.p4\"\nc d\n"
	toks := New("main.p4", src).All()
	want := []Pos{{"main.p4", 1, 1}, {"main.p4", 2, 3}, {"other.p4", 10, 1}, {"other.p4", 10, 3}}
	for i, w := range want {
		if toks[i].Pos != w {
			t.Errorf("token %d (%s) at %v, want %v", i, toks[i].Text, toks[i].Pos, w)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		src string
		pos Pos
	}{
		{"a $ b", Pos{"t", 1, 3}},
		{"x\n\"unterminated", Pos{"t", 2, 1}},
		{"/* never closed", Pos{"t", 1, 1}},
		{"#pragma\n", Pos{"t", 1, 1}},
	}
	for _, tc := range tests {
		s := New("t", tc.src)
		s.All()
		if len(s.Errors) == 0 {
			t.Errorf("%q: no error", tc.src)
			continue
		}
		if s.Errors[0].Pos != tc.pos {
			t.Errorf("%q: error at %v, want %v", tc.src, s.Errors[0].Pos, tc.pos)
		}
	}
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		text   string
		value  int64
		width  int
		signed bool
		bad    bool
	}{
		{"42", 42, 0, false, false},
		{"0x2A", 42, 0, false, false},
		{"0X2a", 42, 0, false, false},
		{"8w255", 255, 8, false, false},
		{"4s3", 3, 4, true, false},
		{"16w0b1010_0101", 0xa5, 16, false, false},
		{"0o17", 15, 0, false, false},
		{"32w0d99", 99, 32, false, false},
		{"1_000", 1000, 0, false, false},
		{"0w0", 0, 0, false, false}, // bit<0>; 0w5 does not fit it (the checker says so)
		{"0s0", 0, 0, false, true},
		{"8w", 0, 0, false, true},
		{"0xZZ", 0, 0, false, true},
	}
	for _, tc := range tests {
		lit, err := ParseInt(tc.text)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: expected an error", tc.text)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.text, err)
			continue
		}
		if lit.Value.Cmp(big.NewInt(tc.value)) != 0 || lit.Width != tc.width || lit.Signed != tc.signed {
			t.Errorf("%s: got %v w%d s%v", tc.text, lit.Value, lit.Width, lit.Signed)
		}
	}
}
