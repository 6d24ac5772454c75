package engine

import (
	"math/big"
)

// headroom is the space kept in front of a packet's bytes so that the
// deparser can prepend headers that grew (tunnel encapsulation, added
// headers) without moving the payload.
const headroom = 128

// tailSlack keeps readable bytes after the packet so that 64-bit loads of
// the last field never run off the slice.
const tailSlack = 16

// hdrState is the per-packet state of one header instance, kept together
// so that a packet's start resets it with one copy.
type hdrState struct {
	// dmask: which fields changed since the parser extracted the header
	// (bit i = field i; all ones = rewrite the whole header), for in-place
	// deparsing and header checksums
	dmask uint64
	// hoff: where the header was extracted in buf (-1: not extracted in
	// this pass)
	hoff  int32
	vlen  int32 // bits of its varbit field
	valid bool
	// lazy: the header's unread fields are still only in buf at hoff
	// (lazyExtract); meaningful while hoff >= 0.
	lazy bool
}

// Packet is the per-packet context: the PHV, the packet bytes and the
// bookkeeping v1model needs between pipeline stages. Packets come from a
// per-pipeline pool (Pipeline.Ingress takes one, Packet.Release returns it),
// so processing a packet allocates nothing once the pool is warm.
type Packet struct {
	pl *Pipeline

	words  []uint64
	wide   []byte
	hs     []hdrState // per header instance
	stkNxt []int32    // per header stack: next index
	ustNxt []int32    // per union stack: next index

	buf     []byte
	start   int // packet bytes are buf[start:end]
	end     int
	payload int // after parsing: where the unparsed payload starts
	cur     int // parser cursor

	ad     *actionData // action data of the running action
	exit   bool
	failed bool // an assert/assume failed: the packet is dropped

	// per-pass v1model registers (BMv2's packet registers)
	cloneSession uint32
	cloneValid   bool
	cloneList    int
	resubmit     bool
	resubmitList int
	recirc       bool
	recircList   int
	learnList    int
	truncLen     int // truncate() primitive, 0 = none

	lengthReg  uint32 // BMv2 PACKET_LENGTH register
	ingressLen uint32 // length as received (counters and meters count this)

	// arrivalNs is when the packet arrived (pipeline clock), given by
	// IngressAt; meters run at that time while atArrival holds (the
	// ingress pass of a received packet), else at the current clock.
	arrivalNs int64
	atArrival bool

	// set by the traffic manager hand-off
	isClone    bool
	cloneTrunc int
	rid        uint32

	// scratch
	bigs    []big.Int
	keyU    []uint64 // table key fields (narrow)
	keyB    []byte   // table key fields (wide), and parser select keys
	calcBuf []byte
	laVal   uint64 // parser lookahead value being assigned
	laBuf   []byte
	saved   []uint64 // field-list values saved across a metadata reset
	savedB  []byte
	rng     uint64
}

func (pl *Pipeline) newPacket() *Packet {
	l := pl.lay
	p := &Packet{
		pl:     pl,
		words:  make([]uint64, l.nwords),
		wide:   make([]byte, l.nwide+tailSlack),
		hs:     make([]hdrState, len(l.headers)),
		stkNxt: make([]int32, len(l.stacks)),
		ustNxt: make([]int32, len(l.ustacks)),
		bigs:   make([]big.Int, pl.nbig),
		keyU:   make([]uint64, pl.maxKeyFields+1),
		keyB:   make([]byte, 0, 256),
		buf:    make([]byte, headroom+2048+tailSlack),
	}
	p.rng = pl.seedRNG()
	return p
}

// acquire takes a packet context from the pool.
func (pl *Pipeline) acquire() *Packet {
	p, _ := pl.pool.Get().(*Packet)
	if p == nil {
		p = pl.newPacket()
	}
	return p
}

// Release returns the packet context to its pipeline's pool. The packet's
// bytes (a frame returned by Egress) must not be used afterwards.
func (p *Packet) Release() {
	if p == nil || p.pl == nil {
		return
	}
	p.pl.pool.Put(p)
}

// Frame returns the packet's current bytes (after Egress: the deparsed
// frame). The slice is valid until Release.
func (p *Packet) Frame() []byte { return p.buf[p.start:p.end] }

// NewFramePacket returns a packet that carries bytes only, outside any
// pipeline, with room for frames of up to size bytes. A device pipeline that
// forwards without a P4 program (the device's PortMap) queues these, so that
// the device has one job type whether a program runs or not. Release does
// nothing on such a packet: its maker keeps and reuses it.
func NewFramePacket(size int) *Packet {
	return &Packet{buf: make([]byte, size)}
}

// SetFrame makes frame's bytes (copied, truncated to the buffer's size) the
// packet's bytes. It is for packets from NewFramePacket: a pipeline's own
// packets get theirs from Ingress.
func (p *Packet) SetFrame(frame []byte) {
	p.start = 0
	p.end = copy(p.buf[:cap(p.buf)], frame)
}

// load copies frame into the packet buffer after the headroom.
func (p *Packet) load(frame []byte) {
	need := headroom + len(frame) + tailSlack
	if cap(p.buf) < need {
		p.buf = make([]byte, need+need/2)
	}
	p.buf = p.buf[:cap(p.buf)]
	p.start = headroom
	p.end = headroom + len(frame)
	copy(p.buf[p.start:], frame)
	if p.pl.reference {
		// The bytes after the packet are read by 64-bit loads but never
		// used (every use is masked or bounded by end); the reference
		// zeroes them, so the differential tests show that they don't
		// matter.
		clear(p.buf[p.end : p.end+tailSlack])
	}
}

// resetAll makes every header invalid, zeroes all fields and per-pass state:
// the state of a packet that just arrived.
func (p *Packet) resetAll() {
	// Every field is zeroed, not just metadata: a program can read fields
	// of a header that is not valid (a table keyed on a header the parser
	// did not reach), and those must not show a previous packet's values
	// (packet contexts are reused); one clear of the whole PHV costs about
	// what clearing the metadata ranges did.
	clear(p.words)
	if n := p.pl.lay.nwide; n > 0 {
		clear(p.wide[:n])
	}
	copy(p.hs, p.pl.lay.stateInit)
	if len(p.stkNxt) > 0 {
		clear(p.stkNxt)
	}
	if len(p.ustNxt) > 0 {
		clear(p.ustNxt)
	}
	p.resetRegisters()
	p.ad = nil
	p.exit = false
	p.failed = false
	p.isClone = false
	p.cloneTrunc = 0
	p.rid = 0
	p.atArrival = false
}

func (p *Packet) resetRegisters() {
	p.cloneSession, p.cloneValid, p.cloneList = 0, false, 0
	p.resubmit, p.resubmitList = false, 0
	p.recirc, p.recircList = false, 0
	p.learnList = 0
	p.truncLen = 0
}

// resetHeaders invalidates every non-metadata header (BMv2 PHV::reset),
// leaving metadata alone.
func (p *Packet) resetHeaders() {
	l := p.pl.lay
	for i, h := range l.headers {
		if !h.metadata {
			p.hs[i].valid = false
			p.hs[i].vlen = 0
		}
	}
	clear(p.stkNxt)
	clear(p.ustNxt)
}

// resetMetadata zeroes every metadata header (BMv2 PHV::reset_metadata).
func (p *Packet) resetMetadata() {
	for _, r := range p.pl.lay.metaWords {
		clear(p.words[r[0]:r[1]])
	}
	for _, r := range p.pl.lay.metaWide {
		clear(p.wide[r[0]:r[1]])
	}
}

// zeroHeader sets every field of header h to 0 (BMv2 Header::reset).
func (p *Packet) zeroHeader(h *headerInst) {
	clear(p.words[h.wordBase : h.wordBase+h.typ.nwords])
	clear(p.wide[h.wideBase : h.wideBase+h.typ.nwide])
	p.hs[h.id].vlen = 0
	p.hs[h.id].lazy = false
	p.hs[h.id].dmask = ^uint64(0)
}

// setValid marks header h valid; a header union member's siblings become
// invalid (P4_16 §8.20).
func (p *Packet) setValid(hid int) {
	l := p.pl.lay
	if u := l.headers[hid].union; u >= 0 {
		for _, o := range l.unions[u].headers {
			if o != hid {
				p.hs[o].valid = false
			}
		}
	}
	p.hs[hid].valid = true
}

// copyHeader copies fields, varbit length and validity of src to dst (same
// header type).
func (p *Packet) copyHeader(dst, src int) {
	l := p.pl.lay
	d, s := l.headers[dst], l.headers[src]
	p.materialize(src)
	p.hs[dst].lazy = false
	copy(p.words[d.wordBase:d.wordBase+d.typ.nwords], p.words[s.wordBase:s.wordBase+s.typ.nwords])
	copy(p.wide[d.wideBase:d.wideBase+d.typ.nwide], p.wide[s.wideBase:s.wideBase+s.typ.nwide])
	p.hs[dst].vlen = p.hs[src].vlen
	p.hs[dst].valid = p.hs[src].valid
	p.hs[dst].dmask = ^uint64(0)
}

// copyFrom copies the whole PHV and per-pass state of q into p (multicast
// replicas, clones), plus q's bytes.
func (p *Packet) copyFrom(q *Packet) {
	copy(p.words, q.words)
	copy(p.wide, q.wide)
	copy(p.hs, q.hs)
	for i := range p.hs {
		if p.hs[i].hoff >= 0 {
			p.hs[i].hoff += int32(headroom - q.start)
		}
	}
	copy(p.stkNxt, q.stkNxt)
	copy(p.ustNxt, q.ustNxt)
	n := q.end - q.start
	need := headroom + n + tailSlack
	if cap(p.buf) < need {
		p.buf = make([]byte, need+need/2)
	}
	p.buf = p.buf[:cap(p.buf)]
	p.start = headroom
	p.end = headroom + n
	copy(p.buf[p.start:p.end], q.buf[q.start:q.end])
	clear(p.buf[p.end : p.end+tailSlack])
	p.payload = q.payload - q.start + p.start
	p.ad = nil
	p.exit = false
	p.failed = false
	p.resetRegisters()
	p.lengthReg = q.lengthReg
	p.ingressLen = q.ingressLen
	p.isClone = q.isClone
	p.cloneTrunc = q.cloneTrunc
	p.rid = q.rid
}

// random returns the next value of the packet context's xorshift generator
// (v1model random()); no global state, no locks.
func (p *Packet) random() uint64 {
	x := p.rng
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	p.rng = x
	return x
}
