package engine

import "encoding/binary"

// packPlan packs a fixed sequence of narrow PHV words (each holding a field
// of known width, right-aligned) into big-endian 64-bit chunks, the way
// they lie on the wire. Deparsing a fixed header, and checksumming a list
// of fields, then cost one shift-or per field piece and one store or add
// per 64 bits, instead of bit-by-bit work. PHV words never hold bits above
// their field's width (every write masks), which the plan relies on.
type packPlan struct {
	bits   int
	ops    []packOp
	starts []int // ops of chunk j are ops[starts[j]:starts[j+1]]
}

type packOp struct {
	word int32
	l, r uint8 // piece = (v << l) >> r
}

type packField struct {
	word  int
	width int
}

func makePackPlan(fields []packField) *packPlan {
	pp := &packPlan{}
	for _, f := range fields {
		pp.bits += f.width
	}
	nchunks := (pp.bits + 63) / 64
	off := 0
	type piece struct {
		chunk int
		op    packOp
	}
	var pieces []piece
	for _, f := range fields {
		end := off + f.width
		for j := off / 64; j*64 < end; j++ {
			chunkEnd := (j + 1) * 64
			// bits of the field in this chunk end at min(end, chunkEnd)
			var sh int
			if end <= chunkEnd {
				sh = chunkEnd - end // left shift to place the field's low bit
			} else {
				sh = -(end - chunkEnd) // the field continues: drop its low bits
			}
			if f.width > 0 {
				op := packOp{word: int32(f.word)}
				if sh >= 0 {
					op.l = uint8(sh)
				} else {
					op.r = uint8(-sh)
				}
				pieces = append(pieces, piece{j, op})
			}
		}
		off = end
	}
	pp.starts = make([]int, nchunks+1)
	for j := 0; j < nchunks; j++ {
		pp.starts[j] = len(pp.ops)
		for _, pc := range pieces {
			if pc.chunk == j {
				pp.ops = append(pp.ops, pc.op)
			}
		}
	}
	pp.starts[nchunks] = len(pp.ops)
	return pp
}

// chunk returns 64-bit chunk j (the last one left-aligned, zero-padded).
func (pp *packPlan) chunk(words []uint64, j int) uint64 {
	// "& 63" tells the compiler the shifts are below 64 (they are), which
	// spares it Go's shift-by-64 handling; small chunks are unrolled.
	ops := pp.ops[pp.starts[j]:pp.starts[j+1]]
	switch len(ops) {
	case 1:
		return words[ops[0].word] << (ops[0].l & 63) >> (ops[0].r & 63)
	case 2:
		return words[ops[0].word]<<(ops[0].l&63)>>(ops[0].r&63) |
			words[ops[1].word]<<(ops[1].l&63)>>(ops[1].r&63)
	case 3:
		return words[ops[0].word]<<(ops[0].l&63)>>(ops[0].r&63) |
			words[ops[1].word]<<(ops[1].l&63)>>(ops[1].r&63) |
			words[ops[2].word]<<(ops[2].l&63)>>(ops[2].r&63)
	case 4:
		return words[ops[0].word]<<(ops[0].l&63)>>(ops[0].r&63) |
			words[ops[1].word]<<(ops[1].l&63)>>(ops[1].r&63) |
			words[ops[2].word]<<(ops[2].l&63)>>(ops[2].r&63) |
			words[ops[3].word]<<(ops[3].l&63)>>(ops[3].r&63)
	}
	var c uint64
	for _, op := range ops {
		c |= words[op.word] << (op.l & 63) >> (op.r & 63)
	}
	return c
}

// write stores the packed bits at b[0:ceil(bits/8)] (whole bytes; the
// plan's bit count is a multiple of 8 for headers). Bytes of b after the
// packed bits are preserved; when b has 8 bytes to spare past them the
// last partial chunk is merged with one 64-bit load and store.
func (pp *packPlan) write(words []uint64, b []byte) {
	n := len(pp.starts) - 1
	nbytes := (pp.bits + 7) / 8
	for j := 0; j < n; j++ {
		c := pp.chunk(words, j)
		rem := nbytes - 8*j
		switch {
		case rem >= 8:
			binary.BigEndian.PutUint64(b[8*j:], c)
		case len(b) >= 8*j+8:
			keep := ^uint64(0) >> uint(8*rem)
			old := binary.BigEndian.Uint64(b[8*j:])
			binary.BigEndian.PutUint64(b[8*j:], c|old&keep)
		default:
			for k := 0; k < rem; k++ {
				b[8*j+k] = byte(c >> uint(56-8*k))
			}
		}
	}
}

// csum16 returns the 16-bit ones' complement sum (not yet complemented) of
// the packed bits, zero-padded to a 16-bit boundary.
func (pp *packPlan) csum16(words []uint64) uint64 {
	var sum uint64
	n := len(pp.starts) - 1
	for j := 0; j < n; j++ {
		c := pp.chunk(words, j)
		sum += c>>48 + c>>32&0xffff + c>>16&0xffff + c&0xffff
	}
	return sum
}
