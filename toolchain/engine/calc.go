package engine

// Calculations (BMv2 "calculations"): a hash or checksum algorithm over a
// list of fields, constants, headers and optionally the payload. The
// inputs are concatenated bit by bit (not byte-padded) into a scratch
// buffer, zero-padded to a whole byte, then the algorithm runs over it.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/big"
	"math/bits"
	"strings"
)

type hashAlgo func(p *Packet, b []byte) uint64

type calcInput struct {
	kind  int // ciField, ciConst, ciHeader
	ref   fieldRef
	fd    *fieldDef
	word  int // narrow field word
	wide  int // wide field byte offset
	hdr   int
	width int
	cval  uint64
	cwide []byte
}

const (
	ciField = iota
	ciConst
	ciHeader
	ciValid
)

type calculation struct {
	name    string
	algo    hashAlgo
	algoNm  string
	custom  *customCRC // crc16_custom, crc32_custom: parameters the control plane may change
	inputs  []calcInput
	payload bool
	// afterHdrs are the deparser-ordered headers that follow the last
	// input header, included (when valid) before the payload.
	afterHdrs []int
	max       int // maxBytes
	// fast path: csum16 over narrow fields only (the IPv4 header checksum
	// shape); used when every header the fields belong to is valid.
	fast     *packPlan
	fastHdrs []int
	// inBuf: csum16 over fields of one header, summed from the header's
	// bytes in the packet buffer where those are current (see bufSum).
	inBuf *bufSum
	// lazyHdrs: input headers whose fields the parser may leave unloaded
	lazyHdrs []int
}

func (calc *calculation) prepareFast(l *layout) {
	if calc.payload || (calc.algoNm != "csum16" && calc.algoNm != "cksum16") {
		return
	}
	var fs []packField
	seen := map[int]bool{}
	for _, in := range calc.inputs {
		if in.kind != ciField || !in.fd.narrow {
			return
		}
		fs = append(fs, packField{word: in.word, width: in.width})
		if !seen[in.hdr] && !l.headers[in.hdr].metadata {
			seen[in.hdr] = true
			calc.fastHdrs = append(calc.fastHdrs, in.hdr)
		}
	}
	calc.fast = makePackPlan(fs)
	calc.inBuf = makeBufSum(calc, l)
}

// bufSum computes csum16 over a list of fields of one fixed-size header
// from the header's bytes as the parser found them: 64-bit loads masked to
// the listed fields' bits, with the fields changed since parsing (Packet.dmask)
// taken from the PHV instead. The masked header and the packed list are
// the same sequence of 16-bit words plus zero words, so their sums are
// equal, provided the list keeps the header's field order and every run of
// left-out fields before a listed one is a multiple of 16 bits wide (the
// IPv4 header checksum leaves out hdrChecksum: 16 bits). Before the
// deparser writes anything, the buffer at the header's parse offset holds
// what was extracted, and an unchanged field's PHV word equals its bits
// there (the in-place deparser relies on the same two facts).
//
// The sum is taken RFC 1071's fast way: 64-bit little-endian words added
// with end-around carry, folded to 16 bits and byte-swapped. That gives
// the same 16 bits as BMv2's sum of big-endian 16-bit words: both are
// congruent modulo 0xffff (2^16 = 1, and a byte swap multiplies by 2^8,
// twice = 1), both lie in 1..0xffff unless every input byte is zero, when
// both are 0, and no two values of 1..0xffff are congruent.
type bufSum struct {
	hdr    int
	n      int                     // 8-byte chunks of the header
	masks  [bufSumMaxChunks]uint64 // per chunk: the listed fields' bits, little-endian
	listed uint64                  // dirty bits (Packet.dmask) of the listed fields
	fields []sumField
}

// sumField places a listed field's PHV value into the header's 64-bit
// chunks: piece k is (v << l >> r) & mask (big-endian) in chunk 'chunk'.
type sumField struct {
	word   int
	pieces [2]sumPiece
	n      int
}

type sumPiece struct {
	chunk  int
	l, r   uint8
	mask   uint64 // big-endian
	maskLE uint64 // the same bits as the little-endian chunk has them
}

// bufSumMaxChunks bounds the headers summed from their bytes (64 bytes;
// Internet checksums cover IPv4, TCP, UDP and ICMP headers).
const bufSumMaxChunks = 8

func makeBufSum(calc *calculation, l *layout) *bufSum {
	if len(calc.inputs) == 0 {
		return nil
	}
	h := l.headers[calc.inputs[0].hdr]
	t := h.typ
	if h.metadata || t.vlField >= 0 || t.fixedBits%8 != 0 || t.fixedBits == 0 || len(t.fields) > 64 {
		return nil
	}
	listed := make([]bool, len(t.fields))
	last := -1
	for _, in := range calc.inputs {
		if in.kind != ciField || in.hdr != h.id || in.ref.fld <= last || !in.fd.narrow {
			return nil
		}
		last = in.ref.fld
		listed[last] = true
	}
	run := 0
	for i, fd := range t.fields {
		if !listed[i] {
			run += fd.width
			continue
		}
		if run%16 != 0 {
			return nil
		}
		run = 0
	}
	if (t.fixedBits+63)/64 > bufSumMaxChunks {
		return nil
	}
	bs := &bufSum{hdr: h.id, n: (t.fixedBits + 63) / 64, fields: make([]sumField, len(t.fields))}
	for i, fd := range t.fields {
		if !listed[i] || fd.width == 0 {
			continue
		}
		bs.listed |= fd.dirtyBit()
		sf := sumField{word: h.wordBase + fd.slot}
		end := fd.bitOff + fd.width
		for j := fd.bitOff / 64; j*64 < end; j++ {
			pc := sumPiece{chunk: j}
			if chunkEnd := (j + 1) * 64; end <= chunkEnd {
				pc.l = uint8(chunkEnd - end)
			} else {
				pc.r = uint8(end - chunkEnd)
			}
			pc.mask = mask64(fd.width) << pc.l >> pc.r
			pc.maskLE = bits.ReverseBytes64(pc.mask)
			bs.masks[j] |= pc.maskLE
			sf.pieces[sf.n] = pc
			sf.n++
		}
		bs.fields[i] = sf
	}
	return bs
}

// sum returns the checksum (complemented), or false when the header's
// bytes cannot be used: not extracted this pass, rewritten as a whole, or
// too long to patch changed fields into.
func (bs *bufSum) sum(p *Packet) (uint64, bool) {
	hs := &p.hs[bs.hdr]
	off, dirty := hs.hoff, hs.dmask
	if off < 0 || !hs.valid || dirty == ^uint64(0) {
		return 0, false
	}
	w := window(p.buf, int(off))
	if w == nil {
		return 0, false // a buffer ending within 72 bytes of the header
	}
	masks := &bs.masks
	var s, carry uint64
	if dirty&bs.listed != 0 {
		patched := bs.masks
		masks = &patched
		for m := dirty & bs.listed; m != 0; m &= m - 1 {
			f := &bs.fields[bits.TrailingZeros64(m)&63]
			v := p.words[f.word]
			for k := 0; k < f.n; k++ {
				pc := &f.pieces[k]
				le := bits.ReverseBytes64(v << (pc.l & 63) >> (pc.r & 63) & pc.mask)
				s, carry = bits.Add64(s, le, carry)
				patched[pc.chunk&(bufSumMaxChunks-1)] &^= pc.maskLE
			}
		}
	}
	for j := 0; j < bs.n; j++ {
		c := binary.LittleEndian.Uint64(w[(8*j)&(windowBytes-9):])
		s, carry = bits.Add64(s, c&masks[j&(bufSumMaxChunks-1)], carry)
	}
	return uint64(^bits.ReverseBytes16(fold16(s, carry))), true
}

// fold16 folds a 64-bit ones' complement sum (plus its pending carry)
// to 16 bits with end-around carries.
func fold16(s, carry uint64) uint16 {
	s, carry = bits.Add64(s, carry, 0)
	s += carry
	t := s>>32 + s&0xffffffff
	t = t>>16 + t&0xffff
	t = t>>16 + t&0xffff
	return uint16(t>>16 + t&0xffff)
}

func crc16Table(poly uint16) *[256]uint16 {
	var t [256]uint16
	for i := 0; i < 256; i++ {
		c := uint16(i)
		for k := 0; k < 8; k++ {
			if c&1 != 0 {
				c = c>>1 ^ poly
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return &t
}

// CRC-16/ARC (BMv2 "crc16"): reflected poly 0x8005, init 0, no final xor.
var crc16ARC = crc16Table(0xA001)

func algoCRC16(_ *Packet, b []byte) uint64 {
	var crc uint16
	for _, x := range b {
		crc = crc>>8 ^ crc16ARC[byte(crc)^x]
	}
	return uint64(crc)
}

// CRC-16/CCITT-FALSE (BMv2 "crcCCITT"): poly 0x1021, init 0xFFFF.
func algoCRCCCITT(_ *Packet, b []byte) uint64 {
	crc := uint16(0xFFFF)
	for _, x := range b {
		crc ^= uint16(x) << 8
		for k := 0; k < 8; k++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return uint64(crc)
}

// CRC-32 (IEEE 802.3, BMv2 "crc32").
func algoCRC32(_ *Packet, b []byte) uint64 { return uint64(crc32.ChecksumIEEE(b)) }

// Internet checksum (RFC 1071; BMv2 "csum16"/"cksum16").
func algoCsum16(_ *Packet, b []byte) uint64 {
	var sum uint64
	n := len(b)
	i := 0
	for ; i+1 < n; i += 2 {
		sum += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if i < n {
		sum += uint64(b[i]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint64(^uint16(sum))
}

func algoXor16(_ *Packet, b []byte) uint64 {
	var x uint16
	n := len(b)
	i := 0
	for ; i+1 < n; i += 2 {
		x ^= uint16(b[i])<<8 | uint16(b[i+1])
	}
	if i < n {
		x ^= uint16(b[i]) << 8
	}
	return uint64(x)
}

// identity: the first 8 bytes of the input as a big-endian number.
func algoIdentity(_ *Packet, b []byte) uint64 {
	var v uint64
	for i := 0; i < len(b) && i < 8; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func algoRandom(p *Packet, _ []byte) uint64 { return p.random() }

func lookupAlgo(name string) (hashAlgo, bool) {
	switch strings.ToLower(name) {
	case "crc16":
		return algoCRC16, true
	case "crc32":
		return algoCRC32, true
	case "crcccitt", "crc_ccitt":
		return algoCRCCCITT, true
	case "csum16", "cksum16":
		return algoCsum16, true
	case "xor16":
		return algoXor16, true
	case "identity":
		return algoIdentity, true
	case "random":
		return algoRandom, true
	}
	return nil, false
}

func (c *closureBuilder) compileCalculation(jc *jCalculation, deparseOrder []int) (*calculation, error) {
	var custom *customCRC
	algo, ok := lookupAlgo(jc.Algo)
	if width := customCRCWidth(strings.ToLower(jc.Algo)); width != 0 {
		custom, algo = newCustomCRC(width)
		ok = true
	}
	if !ok {
		return nil, fmt.Errorf("calculation %s: unsupported algorithm %q", jc.Name, jc.Algo)
	}
	calc := &calculation{name: jc.Name, algo: algo, algoNm: jc.Algo, custom: custom}
	c.pl.calcs = append(c.pl.calcs, calc)
	defer func() { calc.max = calc.maxBytes(c.lay) }()
	ins, err := parseTVs(jc.Input)
	if err != nil {
		return nil, fmt.Errorf("calculation %s: %v", jc.Name, err)
	}
	lastHdr := -1
	for _, in := range ins {
		if in == nil {
			continue
		}
		switch in.kind {
		case "field":
			if len(in.names) != 2 {
				return nil, fmt.Errorf("calculation %s: bad field %v", jc.Name, in.names)
			}
			r, ok := c.lay.lookupField(in.names[0], in.names[1])
			if !ok {
				return nil, fmt.Errorf("calculation %s: unknown field %s.%s", jc.Name, in.names[0], in.names[1])
			}
			ci := calcInput{kind: ciField, ref: r, hdr: r.hdr}
			if r.fld < 0 {
				ci.kind = ciValid // a header's validity bit
				ci.width = 1
			} else {
				ci.fd = c.lay.field(r)
				ci.width = ci.fd.width
				if ci.fd.narrow {
					ci.word = c.lay.word(r)
					// A packet header's fields need not be parsed eagerly for
					// a calculation: compute materializes its input headers
					// (lazyHdrs) where it reads the PHV.
					if c.lay.headers[r.hdr].metadata {
						c.markRead(ci.word)
					}
				} else {
					ci.wide = c.lay.wideAt(r)
				}
			}
			calc.inputs = append(calc.inputs, ci)
			lastHdr = r.hdr
		case "hexstr":
			w := in.width
			if w <= 0 {
				w = max(in.val.BitLen(), 1)
			}
			ci := calcInput{kind: ciConst, width: w}
			if w <= 64 {
				ci.cval = low64(in.val) & mask64(w)
			} else {
				ci.cwide = make([]byte, (w+7)/8)
				v := new(big.Int).And(in.val, new(big.Int).Sub(bigPow2(w), big.NewInt(1)))
				v.FillBytes(ci.cwide)
			}
			calc.inputs = append(calc.inputs, ci)
		case "header":
			h, ok := c.lay.hdrByName[in.name]
			if !ok {
				return nil, fmt.Errorf("calculation %s: unknown header %s", jc.Name, in.name)
			}
			if c.lay.headers[h].metadata {
				c.markHeaderRead(h)
			}
			calc.inputs = append(calc.inputs, calcInput{kind: ciHeader, hdr: h})
			lastHdr = h
		case "payload":
			calc.payload = true
		default:
			return nil, fmt.Errorf("calculation %s: unsupported input type %q", jc.Name, in.kind)
		}
	}
	if calc.payload && lastHdr >= 0 {
		for i, h := range deparseOrder {
			if h == lastHdr {
				calc.afterHdrs = append(calc.afterHdrs, deparseOrder[i+1:]...)
				break
			}
		}
	}
	return calc, nil
}

// appendHeader appends header h as it would go on the wire.
func appendHeader(bw *bitWriter, p *Packet, h *headerInst) {
	for i := range h.typ.fields {
		fd := &h.typ.fields[i]
		if fd.narrow {
			if fd.width > 0 {
				bw.put(p.words[h.wordBase+fd.slot], uint(fd.width))
			}
			continue
		}
		w := fd.width
		if fd.varbit {
			w = int(p.hs[h.id].vlen)
		}
		if w > 0 {
			bw.putBytes(p.wide[h.wideBase+fd.woff:h.wideBase+fd.woff+fd.wlen], w)
		}
	}
}

// maxBytes bounds the calculation's input size, the payload excepted.
func (calc *calculation) maxBytes(l *layout) int {
	bits := 0
	for _, in := range calc.inputs {
		switch in.kind {
		case ciHeader:
			for _, fd := range l.headers[in.hdr].typ.fields {
				bits += fd.width
			}
		default:
			bits += in.width
		}
	}
	for _, h := range calc.afterHdrs {
		for _, fd := range l.headers[h].typ.fields {
			bits += fd.width
		}
	}
	return (bits+7)/8 + 16
}

// compute runs the calculation on the packet's current state.
func (calc *calculation) compute(p *Packet) uint64 {
	if calc.inBuf != nil {
		if v, ok := calc.inBuf.sum(p); ok {
			return v
		}
	}
	for _, h := range calc.lazyHdrs {
		p.materialize(h)
	}
	if calc.fast != nil {
		ok := true
		for _, h := range calc.fastHdrs {
			ok = ok && p.hs[h].valid
		}
		if ok {
			sum := calc.fast.csum16(p.words)
			for sum>>16 != 0 {
				sum = sum&0xffff + sum>>16
			}
			return uint64(^uint16(sum))
		}
	}
	need := calc.max
	var payload []byte
	if calc.payload {
		payload = p.buf[p.payload:p.end]
		need += len(payload)
	}
	if cap(p.calcBuf) < need {
		p.calcBuf = make([]byte, need+need/2)
	}
	bw := bitWriter{b: p.calcBuf[:cap(p.calcBuf)]}
	hs := p.pl.lay.headers
	for i := range calc.inputs {
		in := &calc.inputs[i]
		switch in.kind {
		case ciField:
			if !p.hs[in.hdr].valid {
				continue
			}
			if in.fd.narrow {
				bw.put(p.words[in.word], uint(in.width))
			} else {
				w := in.width
				if in.fd.varbit {
					w = int(p.hs[in.hdr].vlen)
				}
				bw.putBytes(p.wide[in.wide:in.wide+in.fd.wlen], w)
			}
		case ciValid:
			v := uint64(0)
			if p.hs[in.hdr].valid {
				v = 1
			}
			bw.put(v, 1)
		case ciConst:
			if in.cwide != nil {
				bw.putBytes(in.cwide, in.width)
			} else {
				bw.put(in.cval, uint(in.width))
			}
		case ciHeader:
			if p.hs[in.hdr].valid {
				appendHeader(&bw, p, hs[in.hdr])
			}
		}
	}
	if calc.payload {
		for _, h := range calc.afterHdrs {
			if p.hs[h].valid && !hs[h].metadata {
				appendHeader(&bw, p, hs[h])
			}
		}
		if bw.n%8 == 0 {
			bw.flush()
			bw.pos += copy(bw.b[bw.pos:], payload)
		} else {
			for _, c := range payload {
				bw.put(uint64(c), 8)
			}
		}
	}
	bw.flush()
	return calc.algo(p, bw.b[:bw.pos])
}
