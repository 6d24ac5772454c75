package pipeline

import "testing"

// The names are those BMv2 JSON and P4Info spell; the P4Runtime server
// and the STF runner print and compare them.
func TestMatchKindString(t *testing.T) {
	for _, tc := range []struct {
		k    MatchKind
		want string
	}{
		{MatchExact, "exact"}, {MatchLPM, "lpm"}, {MatchTernary, "ternary"},
		{MatchRange, "range"}, {MatchOptional, "optional"}, {MatchValid, "valid"},
		{MatchValid + 1, "unknown"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("MatchKind(%d).String() = %q, want %q", tc.k, got, tc.want)
		}
	}
}
