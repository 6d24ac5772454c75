package types

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// Integer constants of type bit<W> are kept in [0, 2^W) and those of type
// int<W> in [-2^(W-1), 2^(W-1)): the two's complement wrap-around of
// P4_16 §8.5 applied after every operation.

func mask(w int) *big.Int {
	m := new(big.Int).Lsh(big.NewInt(1), uint(w))
	return m.Sub(m, big.NewInt(1))
}

// normalize wraps v into the range of t.
func normalize(v *big.Int, t *Bits) *big.Int {
	r := new(big.Int).And(v, mask(t.Width))
	if t.Signed && t.Width > 0 && r.Bit(t.Width-1) == 1 {
		r.Sub(r, new(big.Int).Lsh(big.NewInt(1), uint(t.Width)))
	}
	return r
}

// normalizeFor wraps v into the range of t when t has a width.
func normalizeFor(v *big.Int, t Type) *big.Int {
	if b := BitsOf(t); b != nil {
		return normalize(v, b)
	}
	return v
}

// Normalize is normalize for other packages.
func Normalize(v *big.Int, t *Bits) *big.Int { return normalize(v, t) }

// fits reports whether a literal's value fits its declared width: for
// unsigned types any value below 2^W, for signed ones the signed range.
func fits(v *big.Int, t *Bits) bool {
	if v.Sign() < 0 {
		return t.Signed && v.Cmp(new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(t.Width-1)))) >= 0
	}
	if t.Signed {
		// p4c accepts 8s255 style literals by wrapping; only reject
		// values wider than the type.
		return v.BitLen() <= t.Width
	}
	return v.BitLen() <= t.Width
}

// fitsLoose reports whether an int constant can be given type t: values
// wider than t are an error, negative values wrap (p4c accepts
// `bit<8> x = -1`).
func fitsLoose(v *big.Int, t *Bits) bool {
	if v.Sign() < 0 {
		return new(big.Int).Neg(v).BitLen() <= t.Width
	}
	return v.BitLen() <= t.Width
}

func toUnsigned(v *big.Int, w int) *big.Int {
	return new(big.Int).And(v, mask(w))
}

// castInt converts an integer constant from type src to target: widths
// change first keeping the source's signedness (sign extension for int),
// then the bits are reinterpreted.
func castInt(v *big.Int, src Type, target *Bits) *big.Int {
	return normalize(v, target)
}

// CastInt is castInt for other packages.
func CastInt(v *big.Int, target *Bits) *big.Int { return normalize(v, target) }

func foldArith(op scanner.Kind, x, y *big.Int, t Type) *big.Int {
	r := new(big.Int)
	b := BitsOf(t)
	switch op {
	case scanner.Add:
		r.Add(x, y)
	case scanner.Sub:
		r.Sub(x, y)
	case scanner.Mul:
		r.Mul(x, y)
	case scanner.Div:
		if y.Sign() == 0 {
			return nil
		}
		r.Quo(x, y)
	case scanner.Mod:
		if y.Sign() == 0 {
			return nil
		}
		r.Rem(x, y)
	case scanner.And:
		r.And(x, y)
	case scanner.Or:
		r.Or(x, y)
	case scanner.Xor:
		r.Xor(x, y)
	case scanner.SatAdd, scanner.SatSub:
		if op == scanner.SatAdd {
			r.Add(x, y)
		} else {
			r.Sub(x, y)
		}
		if b == nil {
			return r
		}
		lo, hi := bounds(b)
		if r.Cmp(lo) < 0 {
			return lo
		}
		if r.Cmp(hi) > 0 {
			return hi
		}
		return r
	default:
		return nil
	}
	if b != nil {
		return normalize(r, b)
	}
	return r
}

// bounds returns the smallest and largest value of t.
func bounds(t *Bits) (*big.Int, *big.Int) {
	if t.Signed {
		hi := new(big.Int).Lsh(big.NewInt(1), uint(t.Width-1))
		lo := new(big.Int).Neg(hi)
		return lo, hi.Sub(hi, big.NewInt(1))
	}
	return new(big.Int), mask(t.Width)
}

// valuesEqual compares two constant values; ok is false when they are not
// comparable at compile time.
func valuesEqual(a, b Value) (eq, ok bool) {
	switch x := a.(type) {
	case *big.Int:
		y, ok := b.(*big.Int)
		if !ok {
			return false, false
		}
		return x.Cmp(y) == 0, true
	case bool:
		y, ok := b.(bool)
		return x == y, ok
	case *ErrorValue:
		y, ok := b.(*ErrorValue)
		if !ok {
			return false, false
		}
		return x.Name == y.Name, true
	case *EnumValue:
		y, ok := b.(*EnumValue)
		if !ok {
			return false, false
		}
		if x.Value != nil && y.Value != nil {
			return x.Value.Cmp(y.Value) == 0, true
		}
		return x.Member == y.Member, true
	}
	return false, false
}

// MemberValue returns the numeric value of an enum member for BMv2: the
// declared value of a serializable enum member, or the member's index.
func MemberValue(e *Enum, member string) *big.Int {
	for i, m := range e.Decl.Members {
		if m.Name == member {
			if e.Underlying != nil {
				return nil
			}
			return big.NewInt(int64(i))
		}
	}
	return nil
}
