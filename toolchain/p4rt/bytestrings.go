package p4rt

import (
	"fmt"
	"math/bits"

	"google.golang.org/grpc/codes"
)

// canonical checks a P4Runtime binary string against an unsigned field of
// width bits and returns its canonical form: the shortest string holding the
// value (spec §8.4 "Bytestrings"). Receivers must accept any length as long
// as the value fits; an empty string never fits. Both failures are
// OUT_OF_RANGE, as the spec's Bytestrings section prescribes.
func canonical(b []byte, width int) ([]byte, error) {
	if len(b) == 0 {
		return nil, errorf(codes.OutOfRange, "empty bytestring for a %d-bit value", width)
	}
	i := 0
	for i < len(b)-1 && b[i] == 0 {
		i++
	}
	v := b[i:]
	if bitLen(v) > width {
		return nil, errorf(codes.OutOfRange, "value 0x%x does not fit in %d bits", v, width)
	}
	return append([]byte(nil), v...), nil
}

// bitLen is the number of significant bits of a big-endian string whose
// first byte is non-zero (or which is a single byte).
func bitLen(v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return (len(v)-1)*8 + bits.Len8(v[0])
}

// padded widens a canonical string to ceil(width/8) bytes, the fixed-width
// form the engine takes (as BMv2's runtime interface does).
func padded(v []byte, width int) []byte {
	n := (width + 7) / 8
	if n == 0 {
		n = 1
	}
	out := make([]byte, n)
	if len(v) > n {
		v = v[len(v)-n:]
	}
	copy(out[n-len(v):], v)
	return out
}

// trimmed turns a fixed-width value read back from the engine into its
// canonical string, so that reads are symmetric with writes.
func trimmed(v []byte) []byte {
	i := 0
	for i < len(v)-1 && v[i] == 0 {
		i++
	}
	if len(v) == 0 {
		return []byte{0}
	}
	return append([]byte(nil), v[i:]...)
}

// isZero reports whether a string encodes 0.
func isZero(v []byte) bool {
	for _, c := range v {
		if c != 0 {
			return false
		}
	}
	return true
}

// andBytes is a&b for two strings right-aligned to width bits; result is
// canonical.
func andBytes(a, b []byte, width int) []byte {
	pa, pb := padded(a, width), padded(b, width)
	for i := range pa {
		pa[i] &= pb[i]
	}
	return trimmed(pa)
}

// equalValue compares two canonical strings.
func equalValue(a, b []byte) bool {
	return string(a) == string(b)
}

// compareValue orders two canonical unsigned strings numerically.
func compareValue(a, b []byte) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// trailingZeros counts the zero bits at the low end of a width-bit value.
func trailingZeros(v []byte, width int) int {
	p := padded(v, width)
	n := 0
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == 0 {
			n += 8
			continue
		}
		n += bits.TrailingZeros8(p[i])
		break
	}
	if n > width {
		n = width
	}
	return n
}

// allOnes returns the canonical string of 2^width-1.
func allOnes(width int) []byte {
	if width <= 0 {
		return []byte{0}
	}
	n := (width + 7) / 8
	out := make([]byte, n)
	for i := range out {
		out[i] = 0xff
	}
	if r := width % 8; r != 0 {
		out[0] = byte(1<<r) - 1
	}
	return out
}

// prefixMask returns the canonical mask of the top plen bits of width.
func prefixMask(plen, width int) []byte {
	n := (width + 7) / 8
	out := make([]byte, n)
	for bit := 0; bit < plen; bit++ {
		pos := width - 1 - bit // bit index from the least significant end
		out[n-1-pos/8] |= 1 << (pos % 8)
	}
	return trimmed(out)
}

func uintBytes(v uint64) []byte {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return trimmed(b[:])
}

func describeWidth(w int) string { return fmt.Sprintf("bit<%d>", w) }
