package engine

// The v1model packet path, split at the traffic manager the way a real
// switch needs it:
//
//	Ingress(frame, port)  parser, checksum verification, ingress control,
//	                      then BMv2's after-ingress logic (I2E clone,
//	                      digest, resubmit, multicast, drop, unicast); it
//	                      returns egress jobs for the device to queue.
//	Egress(job, qmeta)    egress control with BMv2's queueing metadata,
//	                      E2E clone, drop, checksum update, deparser,
//	                      recirculation (which runs ingress again and yields
//	                      more jobs); it returns the frame to transmit.
//
// The after-ingress and after-egress steps follow simple_switch.md's
// pseudocode and simple_switch.cpp (field lists preserved on resubmit,
// recirculate and clones; metadata reset; instance_type values).

import (
	"encoding/binary"
	"math/bits"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Job is a packet waiting for egress: the device queues it on Port in the
// queue of its Priority (standard_metadata.priority when it left ingress,
// 0 lowest).
type Job struct {
	Pkt      *Packet
	Port     uint32
	Priority uint8
}

// QueueMeta is the queueing metadata egress sees, in BMv2's units: times
// in microseconds of the pipeline clock (Pipeline.Now), depths in packets.
type QueueMeta struct {
	EnqTimestamp uint64
	EnqQdepth    uint32
	DeqTimedelta uint32
	DeqQdepth    uint32
	Qid          uint8
}

// Output is a frame leaving the switch. Frame is valid until the caller
// calls Pkt.Release().
type Output struct {
	Port  uint32
	Frame []byte
	Pkt   *Packet
}

// maxResubmits bounds resubmission loops of one packet (BMv2 has no bound;
// a program that always resubmits would spin forever).
const maxResubmits = 64

// Ingress runs a received frame through ingress and appends the resulting
// egress jobs to jobs. frame is copied; the caller may reuse it. The packet
// arrives now: meters and ingress_global_timestamp read the clock.
func (pl *Pipeline) Ingress(frame []byte, port uint32, jobs []Job) []Job {
	p := pl.received(frame, port)
	if pl.useIngressTS {
		pl.std.set(p, pl.std.ingressTS, pl.Now())
	}
	return pl.ingressPass(p, jobs)
}

// IngressAt is Ingress for a frame that arrived at arrivalNs (pipeline
// clock, as Options.Clock gives it), which a device knows from the kernel's
// receive timestamp. ingress_global_timestamp is the arrival time and
// ingress meters run at it, so frames that waited to be processed (a late
// batch) are metered by when they arrived, not by when the pipeline got to
// them; BMv2 meters at processing time. A meter cell never goes back in
// time: a packet stamped before the cell's last update earns no tokens.
// Egress meters, and ingress meters on resubmitted or recirculated
// passes, run at the current clock.
func (pl *Pipeline) IngressAt(frame []byte, port uint32, arrivalNs int64, jobs []Job) []Job {
	p := pl.received(frame, port)
	p.arrivalNs, p.atArrival = arrivalNs, true
	if pl.useIngressTS {
		pl.std.set(p, pl.std.ingressTS, uint64(max(arrivalNs, 0)/1000))
	}
	return pl.ingressPass(p, jobs)
}

// stampIngress sets ingress_global_timestamp to now for a packet starting
// another ingress pass (resubmitted, recirculated): BMv2's ingress thread
// stamps every packet it takes in, after the preserved field list is
// copied, so the stamp wins over a preserved value.
func (pl *Pipeline) stampIngress(p *Packet) {
	if pl.useIngressTS {
		pl.std.set(p, pl.std.ingressTS, pl.Now())
	}
}

// received takes a packet context for a frame received on port.
func (pl *Pipeline) received(frame []byte, port uint32) *Packet {
	p := pl.acquire()
	p.load(frame)
	p.resetAll()
	s := &pl.std
	n := uint32(len(frame))
	s.set(p, s.ingressPort, uint64(port))
	s.set(p, s.packetLength, uint64(n))
	s.set(p, s.instanceType, InstanceNormal)
	p.lengthReg = n
	p.ingressLen = n
	return p
}

func (pl *Pipeline) ingressPass(p *Packet, jobs []Job) []Job {
	s := &pl.std
	for round := 0; ; round++ {
		inStart, inEnd := p.start, p.end
		ingressSize := p.lengthReg
		errVal := pl.parser.run(p)
		s.set(p, s.parserError, errVal)
		if len(pl.verifyCk) > 0 || s.checksumError.w >= 0 {
			pl.verifyChecksums(p)
		}
		runControl(p, pl.ingress)
		p.exit = false
		if p.failed {
			p.Release()
			return jobs
		}
		// I2E clone: the packet as it entered this ingress pass, parsed
		// again, metadata reset except the preserved field list.
		if p.cloneValid {
			p.cloneValid = false
			if sess := pl.pre.sessionRef(p.cloneSession); sess != nil {
				for _, r := range sess.Replicas {
					c := pl.acquire()
					c.load(p.buf[inStart:inEnd])
					c.resetAll()
					pl.parser.run(c)
					c.resetMetadata()
					pl.copyFieldList(c, p, p.cloneList)
					s.set(c, s.instanceType, InstanceIngressClone)
					c.lengthReg = ingressSize
					c.ingressLen = p.ingressLen
					c.isClone = true
					c.cloneTrunc = sess.TruncateLength
					if len(sess.Replicas) > 1 || r.Rid != 0 {
						s.set(c, s.egressRid, uint64(r.Rid))
					}
					jobs = pl.enqueue(c, r.Port, jobs)
				}
			}
		}
		if p.learnList != 0 {
			pl.sendDigest(p, p.learnList)
			p.learnList = 0
		}
		if p.resubmit && round < maxResubmits {
			list := p.resubmitList
			pl.saveFieldList(p, list)
			ingressLen := p.ingressLen
			p.start, p.end = inStart, inEnd
			p.resetAll()
			pl.restoreFieldList(p, list)
			pl.stampIngress(p)
			s.set(p, s.instanceType, InstanceResubmit)
			s.set(p, s.packetLength, uint64(ingressSize))
			p.lengthReg = ingressSize
			p.ingressLen = ingressLen
			continue
		}
		if mg := s.get(p, s.mcastGrp); mg != 0 {
			s.set(p, s.instanceType, InstanceReplication)
			for _, r := range pl.pre.replicas(uint32(mg)) {
				c := pl.acquire()
				c.copyFrom(p)
				s.set(c, s.egressRid, uint64(r.Rid))
				jobs = pl.enqueue(c, r.Port, jobs)
			}
			p.Release()
			return jobs
		}
		spec := s.get(p, s.egressSpec)
		if s.egressSpec.w < 0 || spec == uint64(pl.dropPort) {
			p.Release()
			return jobs
		}
		s.set(p, s.instanceType, InstanceNormal)
		return pl.enqueue(p, uint32(spec), jobs)
	}
}

func (pl *Pipeline) enqueue(p *Packet, port uint32, jobs []Job) []Job {
	prio := uint8(pl.std.get(p, pl.std.priority))
	return append(jobs, Job{Pkt: p, Port: port, Priority: prio})
}

// Egress runs one dequeued job through egress and the deparser. If the
// packet leaves the switch, out.Pkt is non-nil and the caller must call
// out.Pkt.Release() once out.Frame has been sent. Jobs created on the way
// (egress clones, packets recirculated into ingress) are appended to jobs.
func (pl *Pipeline) Egress(job Job, q QueueMeta, jobs []Job) (out Output, more []Job) {
	p := job.Pkt
	p.atArrival = false // egress meters judge departures: the current clock
	s := &pl.std
	s.set(p, s.egressSpec, 0)
	if pl.egressInfo {
		s.set(p, s.egressPort, uint64(job.Port))
		s.set(p, s.packetLength, uint64(p.lengthReg))
		s.set(p, s.enqTimestamp, q.EnqTimestamp)
		s.set(p, s.enqQdepth, uint64(q.EnqQdepth))
		s.set(p, s.deqTimedelta, uint64(q.DeqTimedelta))
		s.set(p, s.deqQdepth, uint64(q.DeqQdepth))
		s.set(p, s.qid, uint64(q.Qid))
	}
	if pl.useEgressTS {
		s.set(p, s.egressTS, pl.Now())
	}
	runControl(p, pl.egress)
	p.exit = false
	if p.failed {
		p.Release()
		return Output{}, jobs
	}
	// E2E clone: the packet as egress left it (headers included), metadata
	// reset except the preserved field list.
	if p.cloneValid {
		p.cloneValid = false
		if sess := pl.pre.sessionRef(p.cloneSession); sess != nil {
			for _, r := range sess.Replicas {
				c := pl.acquire()
				c.copyFrom(p)
				c.resetMetadata()
				pl.copyFieldList(c, p, p.cloneList)
				s.set(c, s.instanceType, InstanceEgressClone)
				c.isClone = true
				c.cloneTrunc = sess.TruncateLength
				if len(sess.Replicas) > 1 || r.Rid != 0 {
					s.set(c, s.egressRid, uint64(r.Rid))
				}
				jobs = pl.enqueue(c, r.Port, jobs)
			}
		}
	}
	if s.get(p, s.egressSpec) == uint64(pl.dropPort) {
		p.Release()
		return Output{}, jobs
	}
	pl.deparse(p)
	if p.recirc {
		list := p.recircList
		pl.saveFieldList(p, list)
		n := uint32(p.end - p.start)
		// the deparsed bytes become the received packet
		start, end := p.start, p.end
		p.resetAll()
		p.start, p.end = start, end
		pl.restoreFieldList(p, list)
		pl.stampIngress(p)
		s.set(p, s.instanceType, InstanceRecirc)
		s.set(p, s.packetLength, uint64(n))
		p.lengthReg = n
		p.ingressLen = n
		jobs = pl.ingressPass(p, jobs)
		return Output{}, jobs
	}
	limit := 0
	if p.truncLen != 0 {
		limit = p.truncLen
	}
	if p.isClone && p.cloneTrunc > 0 && (limit == 0 || p.cloneTrunc < limit) {
		limit = p.cloneTrunc
	}
	if limit < 0 {
		p.end = p.start
	} else if limit > 0 && p.end-p.start > limit {
		p.end = p.start + limit
	}
	return Output{Port: job.Port, Frame: p.buf[p.start:p.end], Pkt: p}, jobs
}

// ProcessPacket runs a frame through the whole switch synchronously, with
// unbounded FIFO queues and zero queueing delay, calling emit for every
// frame that leaves (the frame is only valid during the call). It is the
// path used by the STF runner, tests and fuzzing.
func (pl *Pipeline) ProcessPacket(frame []byte, port uint32, emit func(port uint32, frame []byte)) {
	jobs := pl.Ingress(frame, port, nil)
	for steps := 0; len(jobs) > 0; steps++ {
		j := jobs[0]
		jobs = jobs[1:]
		if steps > 10000 { // runaway recirculation
			j.Pkt.Release()
			continue
		}
		now := pl.Now()
		out, more := pl.Egress(j, QueueMeta{EnqTimestamp: now, Qid: j.Priority}, nil)
		jobs = append(jobs, more...)
		if out.Pkt != nil {
			if emit != nil {
				emit(out.Port, out.Frame)
			}
			out.Pkt.Release()
		}
	}
}

// ---- helpers ----

func (pl *Pipeline) verifyChecksums(p *Packet) {
	s := &pl.std
	bad := false
	for _, ck := range pl.verifyCk {
		if ck.condValid >= 0 {
			if !p.hs[ck.condValid].valid {
				continue
			}
		} else if ck.cond != nil && !ck.cond(p) {
			continue
		}
		v := ck.calc.compute(p)
		lv := ck.target
		h := pl.lay.headers[lv.hdr(p)]
		var cur uint64
		if lv.fd.narrow {
			cur = p.words[h.wordBase+lv.fd.slot]
		} else {
			off := h.wideBase + lv.fd.woff
			cur = getUint(p.wide[off+lv.fd.wlen-min(lv.fd.wlen, 8) : off+lv.fd.wlen])
		}
		if cur != v&mask64(lv.fd.width) {
			bad = true
		}
	}
	if bad {
		s.set(p, s.checksumError, 1)
	} else {
		s.set(p, s.checksumError, 0)
	}
}

func (pl *Pipeline) updateChecksums(p *Packet) {
	for _, ck := range pl.updateCk {
		if ck.condValid >= 0 {
			if !p.hs[ck.condValid].valid {
				continue
			}
		} else if ck.cond != nil && !ck.cond(p) {
			continue
		}
		var v uint64
		ok := false
		if bs := ck.calc.inBuf; bs != nil {
			v, ok = bs.sum(p)
		}
		if !ok {
			v = ck.calc.compute(p)
		}
		if ck.word >= 0 {
			p.words[ck.word] = v & ck.mask
			p.hs[ck.hdr].dmask |= ck.bit
			continue
		}
		lv := ck.target
		h := pl.lay.headers[lv.hdr(p)]
		p.hs[h.id].dmask |= lv.fd.dirtyBit()
		if lv.fd.narrow {
			p.words[h.wordBase+lv.fd.slot] = v & mask64(lv.fd.width)
		} else {
			off := h.wideBase + lv.fd.woff
			dst := p.wide[off : off+lv.fd.wlen]
			clear(dst)
			n := min(len(dst), 8)
			putUint(dst[len(dst)-n:], v)
			maskTop(dst, lv.fd.width)
		}
	}
}

// deparse updates checksums and writes the valid headers in deparser order
// in front of the payload; the frame is then p.buf[p.start:p.end].
func (pl *Pipeline) deparse(p *Packet) {
	pl.updateChecksums(p)
	if !pl.reference {
		if pos, ok := pl.inPlace(p); ok {
			pl.writeBack(p)
			p.start = pos
			return
		}
	}
	hs := pl.lay.headers
	total := 0
	for _, h := range pl.deparseOrder {
		if p.hs[h].valid && !hs[h].metadata {
			// before anything is written: headers may move over others' bytes
			p.materialize(h)
			total += headerBytes(hs[h], p)
		}
	}
	if p.payload < p.start {
		p.payload = p.start
	}
	if p.payload > p.end {
		p.payload = p.end
	}
	start := p.payload - total
	if start < 0 {
		// Not enough headroom: move the payload right.
		shift := -start
		plen := p.end - p.payload
		need := p.end + shift + tailSlack
		if cap(p.buf) < need {
			nb := make([]byte, need+headroom)
			copy(nb[p.payload+shift:], p.buf[p.payload:p.end])
			p.buf = nb
		} else {
			p.buf = p.buf[:cap(p.buf)]
			copy(p.buf[p.payload+shift:p.payload+shift+plen], p.buf[p.payload:p.end])
		}
		p.payload += shift
		p.end += shift
		start = 0
	}
	if len(p.buf) < p.end+tailSlack {
		p.buf = p.buf[:cap(p.buf)]
	}
	// Every byte of the header region is written below (plans and the bit
	// writer cover whole headers), so it needs no clearing.
	bw := bitWriter{b: p.buf[start:p.payload]}
	for _, hid := range pl.deparseOrder {
		if !p.hs[hid].valid {
			continue
		}
		h := hs[hid]
		if h.metadata {
			continue
		}
		if pp := pl.hdrPack[hid]; pp != nil && !pl.reference {
			pp.write(p.words, p.buf[start+bw.pos:])
			bw.pos += pp.bits / 8
			continue
		}
		emitHeader(p, h, &bw)
	}
	p.start = start
}

// inPlace reports whether every valid header of the deparser's order still
// sits where the parser found it, back to back up to the payload (the
// common case: no header added, removed or resized), and where the frame
// then starts.
func (pl *Pipeline) inPlace(p *Packet) (int, bool) {
	if p.payload < p.start || p.payload > p.end || len(p.buf) < p.end+tailSlack {
		return 0, false
	}
	pos := int32(p.payload)
	order := pl.emitOrder
	hs := p.hs
	for i := len(order) - 1; i >= 0; i-- {
		e := &order[i]
		h := &hs[e.hdr]
		if !h.valid {
			continue
		}
		pos -= e.bytes
		if h.hoff != pos || e.varbit {
			return 0, false
		}
	}
	if int(pos) < p.start {
		return 0, false
	}
	return int(pos), true
}

// writeBack writes the fields changed since parsing (Packet.dmask) of the
// headers in place into the buffer (inPlace must hold).
func (pl *Pipeline) writeBack(p *Packet) {
	order := pl.emitOrder
	for i := range order {
		e := &order[i]
		hs := &p.hs[e.hdr]
		m := hs.dmask
		if m == 0 || !hs.valid {
			continue
		}
		off := int(hs.hoff)
		w := window(p.buf, off)
		if m == ^uint64(0) || e.fast == nil || w == nil {
			pl.writeBackSlow(p, e, m, off)
			continue
		}
		words := p.words
		for ; m != 0; m &= m - 1 {
			fp := &e.fast[bits.TrailingZeros64(m)&63]
			at := fp.at & (windowBytes - 9)
			switch fp.bytes {
			case 0:
				if fp.mask == 0 {
					fp.put(p, off) // wide, or not within 8 bytes
					continue
				}
				x := binary.BigEndian.Uint64(w[at:])
				binary.BigEndian.PutUint64(w[at:], x&^fp.mask|words[fp.word]<<(fp.sh&63)&fp.mask)
			case 1:
				w[at] = byte(words[fp.word])
			case 2:
				binary.BigEndian.PutUint16(w[at:], uint16(words[fp.word]))
			case 3:
				v := words[fp.word]
				binary.BigEndian.PutUint16(w[at:], uint16(v>>8))
				w[at+2] = byte(v)
			case 4:
				binary.BigEndian.PutUint32(w[at:], uint32(words[fp.word]))
			case 5:
				v := words[fp.word]
				binary.BigEndian.PutUint32(w[at:], uint32(v>>8))
				w[at+4] = byte(v)
			case 6:
				v := words[fp.word]
				binary.BigEndian.PutUint32(w[at:], uint32(v>>16))
				binary.BigEndian.PutUint16(w[at+4:], uint16(v))
			case 7:
				v := words[fp.word]
				binary.BigEndian.PutUint32(w[at:], uint32(v>>24))
				binary.BigEndian.PutUint16(w[at+4:], uint16(v>>8))
				w[at+6] = byte(v)
			default:
				binary.BigEndian.PutUint64(w[at:], words[fp.word])
			}
		}
	}
}

// writeBackSlow writes header e back field by field, or whole (m all ones:
// it was rewritten as a whole, or has more fields than dirty bits).
func (pl *Pipeline) writeBackSlow(p *Packet, e *emitInfo, m uint64, off int) {
	if m == ^uint64(0) || e.many {
		p.materialize(e.hdr)
		if pp := pl.hdrPack[e.hdr]; pp != nil {
			pp.write(p.words, p.buf[off:])
		} else {
			bw := bitWriter{b: p.buf[off : off+int(e.bytes)]}
			emitHeader(p, pl.lay.headers[e.hdr], &bw)
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		e.fields[bits.TrailingZeros64(m)&63].put(p, off)
	}
}

// windowBytes is the size of the buffer windows fixed-size headers are
// read and written through: a header of up to 64 bytes plus room for a
// 64-bit access at any of its bytes. Indexing an array pointer with an
// offset masked below 64 needs no bounds checks.
const windowBytes = 72

// window returns the windowBytes of buf at off, or nil if buf is shorter.
func window(buf []byte, off int) *[windowBytes]byte {
	if uint(off)+windowBytes > uint(len(buf)) {
		return nil
	}
	return (*[windowBytes]byte)(buf[off:])
}

// fieldPut writes one field of an in-place header back into the buffer.
// Byte-aligned fields of whole bytes are stored with stores of their exact
// size; no load, so nothing waits for an earlier store to an overlapping
// address (an 8-byte read-modify-write of the field after a neighbour's
// costs a store-forwarding stall). Other fields within 8 bytes of their
// first byte take one 64-bit read-modify-write (the buffer has tailSlack
// bytes after the packet), the rest the bit writer.
type fieldPut struct {
	fd    *fieldDef
	word  int    // PHV word (narrow fields)
	wide  int    // PHV byte offset (wide fields)
	at    int    // byte offset in the header
	bytes int    // > 0: byte-aligned narrow field of this many bytes
	sh    uint8  // left shift placing the value in the 64-bit word at 'at'
	mask  uint64 // the field's bits in that word; 0: slow path
}

func makeFieldPut(h *headerInst, fd *fieldDef) fieldPut {
	fp := fieldPut{fd: fd, word: h.wordBase + fd.slot, wide: h.wideBase + fd.woff, at: fd.bitOff >> 3}
	s := fd.bitOff & 7
	switch {
	case !fd.narrow || fd.width == 0:
	case s == 0 && fd.width%8 == 0:
		fp.bytes = fd.width / 8
	case s+fd.width <= 64:
		fp.sh = uint8(64 - s - fd.width)
		fp.mask = mask64(fd.width) << fp.sh
	}
	return fp
}

func (fp *fieldPut) put(p *Packet, hoff int) {
	if fp.bytes > 0 {
		b := p.buf[hoff+fp.at:]
		v := p.words[fp.word]
		switch fp.bytes {
		case 1:
			b[0] = byte(v)
		case 2:
			binary.BigEndian.PutUint16(b, uint16(v))
		case 3:
			binary.BigEndian.PutUint16(b, uint16(v>>8))
			b[2] = byte(v)
		case 4:
			binary.BigEndian.PutUint32(b, uint32(v))
		case 5:
			binary.BigEndian.PutUint32(b, uint32(v>>8))
			b[4] = byte(v)
		case 6:
			binary.BigEndian.PutUint32(b, uint32(v>>16))
			binary.BigEndian.PutUint16(b[4:], uint16(v))
		case 7:
			binary.BigEndian.PutUint32(b, uint32(v>>24))
			binary.BigEndian.PutUint16(b[4:], uint16(v>>8))
			b[6] = byte(v)
		default:
			binary.BigEndian.PutUint64(b, v)
		}
		return
	}
	if fp.mask != 0 {
		b := p.buf[hoff+fp.at:]
		x := binary.BigEndian.Uint64(b)
		binary.BigEndian.PutUint64(b, x&^fp.mask|p.words[fp.word]<<(fp.sh&63)&fp.mask)
		return
	}
	fd := fp.fd
	switch {
	case fd.width == 0:
	case fd.narrow:
		writeBits(p.buf, hoff*8+fd.bitOff, fd.width, p.words[fp.word])
	default:
		copyBits(p.buf, hoff*8+fd.bitOff, p.wide[fp.wide:], fd.wlen*8-fd.width, fd.width)
	}
}

// emitHeader appends header h to bw.
func emitHeader(p *Packet, h *headerInst, bw *bitWriter) {
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
	bw.flush()
}

// saveFieldList copies the values of field list id into p's scratch.
func (pl *Pipeline) saveFieldList(p *Packet, id int) {
	p.saved = p.saved[:0]
	p.savedB = p.savedB[:0]
	for _, r := range pl.fieldLists[id] {
		fd := pl.lay.field(r)
		if fd.narrow {
			p.saved = append(p.saved, p.words[pl.lay.word(r)])
		} else {
			off := pl.lay.wideAt(r)
			p.savedB = append(p.savedB, p.wide[off:off+fd.wlen]...)
		}
	}
}

func (pl *Pipeline) restoreFieldList(p *Packet, id int) {
	i, j := 0, 0
	for _, r := range pl.fieldLists[id] {
		fd := pl.lay.field(r)
		p.hs[r.hdr].dmask |= fd.dirtyBit()
		if fd.narrow {
			p.words[pl.lay.word(r)] = p.saved[i]
			i++
		} else {
			off := pl.lay.wideAt(r)
			copy(p.wide[off:off+fd.wlen], p.savedB[j:j+fd.wlen])
			j += fd.wlen
		}
	}
}

// copyFieldList copies field list id from src to dst.
func (pl *Pipeline) copyFieldList(dst, src *Packet, id int) {
	for _, r := range pl.fieldLists[id] {
		fd := pl.lay.field(r)
		dst.hs[r.hdr].dmask |= fd.dirtyBit()
		if fd.narrow {
			w := pl.lay.word(r)
			dst.words[w] = src.words[w]
		} else {
			off := pl.lay.wideAt(r)
			copy(dst.wide[off:off+fd.wlen], src.wide[off:off+fd.wlen])
		}
	}
}

func (pl *Pipeline) sendDigest(p *Packet, id int) {
	ll, ok := pl.learnByID[id]
	if !ok {
		return
	}
	d := pipeline.Digest{ListID: id, Name: ll.name, Timestamp: pl.Now()}
	for _, r := range ll.fields {
		d.Fields = append(d.Fields, p.fieldBytes(r))
	}
	select {
	case pl.digests <- d:
	default:
		pl.digestDrops.Add(1)
	}
}
