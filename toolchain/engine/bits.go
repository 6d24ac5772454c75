package engine

import "encoding/binary"

// Bit-string helpers. Packet headers are big-endian bit strings; a field of
// w <= 64 bits at bit offset off is read into the low w bits of a uint64.

func mask64(w int) uint64 {
	if w >= 64 {
		return ^uint64(0)
	}
	return (uint64(1) << uint(w)) - 1
}

// readBits returns the w-bit (1..64) field at bit offset off of b. The
// caller guarantees that b holds the field's bytes.
func readBits(b []byte, off, w int) uint64 {
	i := off >> 3
	s := uint(off & 7)
	if i+8 <= len(b) {
		v := binary.BigEndian.Uint64(b[i:])
		if int(s)+w <= 64 {
			return (v << s) >> uint(64-w)
		}
		if i+9 <= len(b) {
			v = v<<s | uint64(b[i+8])>>(8-s)
			return v >> uint(64-w)
		}
	}
	var v uint64
	rem := w
	pos := off
	for rem > 0 {
		bi := pos >> 3
		bit := pos & 7
		take := 8 - bit
		if take > rem {
			take = rem
		}
		bits := (uint64(b[bi]) >> uint(8-bit-take)) & mask64(take)
		v = v<<uint(take) | bits
		rem -= take
		pos += take
	}
	return v
}

// writeBits stores the low w (1..64) bits of v at bit offset off of b.
func writeBits(b []byte, off, w int, v uint64) {
	i := off >> 3
	s := off & 7
	if s+w <= 64 && i+8 <= len(b) {
		x := binary.BigEndian.Uint64(b[i:])
		sh := uint(64 - s - w)
		m := mask64(w) << sh
		x = x&^m | (v<<sh)&m
		binary.BigEndian.PutUint64(b[i:], x)
		return
	}
	rem := w
	pos := off
	for rem > 0 {
		bi := pos >> 3
		bit := pos & 7
		take := 8 - bit
		if take > rem {
			take = rem
		}
		sh := uint(8 - bit - take)
		m := byte(mask64(take) << sh)
		chunk := byte((v>>uint(rem-take))&mask64(take)) << sh
		b[bi] = b[bi]&^m | chunk
		rem -= take
		pos += take
	}
}

// copyBits copies n bits from src at bit offset so to dst at bit offset do.
func copyBits(dst []byte, do int, src []byte, so int, n int) {
	if do&7 == 0 && so&7 == 0 && n&7 == 0 {
		copy(dst[do>>3:(do+n)>>3], src[so>>3:(so+n)>>3])
		return
	}
	for n > 0 {
		c := n
		if c > 56 {
			c = 56
		}
		writeBits(dst, do, c, readBits(src, so, c))
		do += c
		so += c
		n -= c
	}
}

// putUint writes v into dst (big-endian, len(dst) bytes), truncating.
func putUint(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte(v)
		v >>= 8
	}
}

// getUint reads a big-endian unsigned value of at most 8 significant bytes
// (leading bytes beyond 8 are ignored).
func getUint(src []byte) uint64 {
	var v uint64
	for _, c := range src {
		v = v<<8 | uint64(c)
	}
	return v
}

// fitsWidth reports whether the big-endian value b fits in w bits.
func fitsWidth(b []byte, w int) bool {
	nb := (w + 7) / 8
	// leading bytes beyond nb must be zero
	for i := 0; i < len(b)-nb; i++ {
		if b[i] != 0 {
			return false
		}
	}
	if len(b) >= nb && nb > 0 && w%8 != 0 {
		top := b[len(b)-nb]
		if top>>uint(w%8) != 0 {
			return false
		}
	}
	return true
}

// normBytes returns v as exactly nb big-endian bytes (left-padded or
// left-truncated), in a new slice.
func normBytes(v []byte, nb int) []byte {
	out := make([]byte, nb)
	if len(v) >= nb {
		copy(out, v[len(v)-nb:])
	} else {
		copy(out[nb-len(v):], v)
	}
	return out
}

// bitWriter appends big-endian bit strings to a byte slice through a
// 64-bit accumulator: a field costs a shift and an or, and every 64 bits
// one 8-byte store. It never writes past the last complete byte until
// flush, so it can fill a region that ends where the payload begins.
type bitWriter struct {
	b   []byte
	pos int // next byte to write
	acc uint64
	n   uint // bits pending in acc (< 64 between calls)
}

// put appends the low w bits of v (w <= 64).
func (bw *bitWriter) put(v uint64, w uint) {
	if w < 64 {
		v &= 1<<w - 1
	}
	if bw.n+w < 64 {
		bw.acc = bw.acc<<w | v
		bw.n += w
		return
	}
	// fill the accumulator to 64 bits, store it, keep the rest
	take := 64 - bw.n
	rest := w - take
	var full uint64
	if take == 64 {
		full = v >> rest
	} else {
		full = bw.acc<<take | v>>rest
	}
	binary.BigEndian.PutUint64(bw.b[bw.pos:], full)
	bw.pos += 8
	bw.acc = v & (1<<rest - 1)
	bw.n = rest
}

// putBytes appends w bits taken from the right-aligned big-endian value src.
func (bw *bitWriter) putBytes(src []byte, w int) {
	lead := len(src)*8 - w
	for w > 0 {
		c := w
		if c > 56 {
			c = 56
		}
		bw.put(readBits(src, lead, c), uint(c))
		lead += c
		w -= c
	}
}

// flush writes the pending bits, zero-padded to a byte boundary.
func (bw *bitWriter) flush() {
	if bw.n == 0 {
		return
	}
	pad := (8 - bw.n%8) % 8
	acc := bw.acc << pad
	nb := int((bw.n + pad) / 8)
	for i := nb - 1; i >= 0; i-- {
		bw.b[bw.pos+i] = byte(acc)
		acc >>= 8
	}
	bw.pos += nb
	bw.acc, bw.n = 0, 0
}

// bitsWritten returns the number of bits appended so far.
func (bw *bitWriter) bitsWritten() int { return bw.pos*8 + int(bw.n) }
