package viap4rt

import (
	"fmt"
	"math/big"
	"strings"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// names resolves the names an STF script uses through the P4Info, the way
// p4c's STF runner matches them: a full name, or a suffix after a "."
// ("test1" for "ingress.test1", "data.f1" for "hdrs.data.f1"), with
// "$N" for a header stack index ("extra$0.h" for "hdrs.extra[0].h").
type names struct {
	info *p4configv1.P4Info
}

func newNames(info *p4configv1.P4Info) *names { return &names{info: info} }

func stfName(s string) string {
	// extra$0.h → extra[0].h
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j > i+1 {
				b.WriteString("[" + s[i+1:j] + "]")
				i = j - 1
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pick returns the one candidate name matches: exactly, or as a suffix.
func pick[T any](what, name string, all []T, nameOf func(T) string) (T, error) {
	var zero T
	want := stfName(name)
	var suffix []T
	for _, c := range all {
		n := nameOf(c)
		if n == want {
			return c, nil
		}
		if strings.HasSuffix(n, "."+want) {
			suffix = append(suffix, c)
		}
	}
	switch len(suffix) {
	case 1:
		return suffix[0], nil
	case 0:
		return zero, fmt.Errorf("no %s named %q in the P4Info", what, name)
	default:
		return zero, fmt.Errorf("%s name %q is ambiguous in the P4Info", what, name)
	}
}

func (n *names) table(name string) (*p4configv1.Table, error) {
	return pick("table", name, n.info.GetTables(), func(t *p4configv1.Table) string { return t.GetPreamble().GetName() })
}

func (n *names) action(t *p4configv1.Table, name string) (*p4configv1.Action, error) {
	var cands []*p4configv1.Action
	for _, ref := range t.GetActionRefs() {
		for _, a := range n.info.GetActions() {
			if a.GetPreamble().GetId() == ref.GetId() {
				cands = append(cands, a)
			}
		}
	}
	return pick("action of table "+t.GetPreamble().GetName(), name, cands,
		func(a *p4configv1.Action) string { return a.GetPreamble().GetName() })
}

func (n *names) field(t *p4configv1.Table, name string) (*p4configv1.MatchField, error) {
	return pick("match field of table "+t.GetPreamble().GetName(), name, t.GetMatchFields(),
		func(f *p4configv1.MatchField) string { return f.GetName() })
}

// value is a parsed STF number: value with don't-care bits (mask 0).
type value struct {
	v, mask *big.Int
	hasMask bool // "*" nibbles were used
}

// parseNumber reads 0x… (with "*" nibbles), 0b…, or decimal, taken modulo
// 2^width.
func parseNumber(s string, width int) (value, error) {
	mod := new(big.Int).Lsh(big.NewInt(1), uint(width))
	full := new(big.Int).Sub(mod, big.NewInt(1))
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	out := value{v: new(big.Int), mask: new(big.Int).Set(full)}
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		digits := s[2:]
		vb, mb := new(big.Int), new(big.Int)
		for _, c := range digits {
			vb.Lsh(vb, 4)
			mb.Lsh(mb, 4)
			if c == '*' {
				out.hasMask = true
				continue
			}
			d, ok := new(big.Int).SetString(string(c), 16)
			if !ok {
				return value{}, fmt.Errorf("bad hex number %q", s)
			}
			vb.Or(vb, d)
			mb.Or(mb, big.NewInt(15))
		}
		out.v = vb
		if out.hasMask {
			// Bits above the written digits are don't-care too.
			out.mask = mb.And(mb, full)
		}
	case strings.HasPrefix(s, "0b") || strings.HasPrefix(s, "0B"):
		if _, ok := out.v.SetString(s[2:], 2); !ok {
			return value{}, fmt.Errorf("bad binary number %q", s)
		}
	default:
		if _, ok := out.v.SetString(s, 10); !ok {
			return value{}, fmt.Errorf("bad number %q", s)
		}
	}
	if neg {
		out.v.Neg(out.v)
	}
	out.v.Mod(out.v, mod)
	out.v.And(out.v, out.mask)
	return out, nil
}

func bytesOf(v *big.Int) []byte {
	b := v.Bytes()
	if len(b) == 0 {
		return []byte{0}
	}
	return b
}

// fieldMatch turns an STF key value into a P4Runtime match for field f;
// nil means "don't care" (the field is omitted, per spec §9.1.1).
func fieldMatch(f *p4configv1.MatchField, text string) (*p4v1.FieldMatch, error) {
	w := int(f.GetBitwidth())
	full := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
	fm := &p4v1.FieldMatch{FieldId: f.GetId()}
	switch f.GetMatchType() {
	case p4configv1.MatchField_EXACT:
		v, err := parseNumber(text, w)
		if err != nil {
			return nil, err
		}
		if v.hasMask {
			return nil, fmt.Errorf("field %s is exact: no don't-care digits", f.GetName())
		}
		fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: bytesOf(v.v)}}
	case p4configv1.MatchField_LPM:
		vs, ls, hasLen := strings.Cut(text, "/")
		v, err := parseNumber(vs, w)
		if err != nil {
			return nil, err
		}
		plen := w
		if hasLen {
			if _, err := fmt.Sscan(ls, &plen); err != nil || plen < 0 || plen > w {
				return nil, fmt.Errorf("bad prefix length %q", ls)
			}
		} else if v.hasMask {
			plen = v.mask.BitLen() - int(v.mask.TrailingZeroBits())
			if v.mask.Sign() == 0 {
				plen = 0
			}
		}
		if plen == 0 {
			return nil, nil
		}
		pm := new(big.Int).Lsh(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(plen)), big.NewInt(1)), uint(w-plen))
		fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: bytesOf(new(big.Int).And(v.v, pm)), PrefixLen: int32(plen)}}
	case p4configv1.MatchField_TERNARY:
		vs, ms, hasMask := strings.Cut(text, "&&&")
		v, err := parseNumber(vs, w)
		if err != nil {
			return nil, err
		}
		mask := v.mask
		if hasMask {
			m, err := parseNumber(ms, w)
			if err != nil {
				return nil, err
			}
			mask = m.v
		}
		if mask.Sign() == 0 {
			return nil, nil
		}
		val := new(big.Int).And(v.v, mask)
		fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: bytesOf(val), Mask: bytesOf(mask)}}
	case p4configv1.MatchField_RANGE:
		lo, hi := text, text
		if a, b, ok := strings.Cut(text, "->"); ok {
			lo, hi = a, b
		}
		l, err := parseNumber(lo, w)
		if err != nil {
			return nil, err
		}
		h, err := parseNumber(hi, w)
		if err != nil {
			return nil, err
		}
		if l.v.Sign() == 0 && h.v.Cmp(full) == 0 {
			return nil, nil
		}
		fm.FieldMatchType = &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: bytesOf(l.v), High: bytesOf(h.v)}}
	case p4configv1.MatchField_OPTIONAL:
		if strings.Trim(text, "0x*") == "" && strings.Contains(text, "*") {
			return nil, nil
		}
		v, err := parseNumber(text, w)
		if err != nil {
			return nil, err
		}
		if v.hasMask {
			if v.mask.Sign() == 0 {
				return nil, nil
			}
			return nil, fmt.Errorf("optional field %s: partial wildcard", f.GetName())
		}
		fm.FieldMatchType = &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: bytesOf(v.v)}}
	default:
		return nil, fmt.Errorf("field %s: match kind %v", f.GetName(), f.GetMatchType())
	}
	return fm, nil
}
