package device

import "time"

// worker is the per-goroutine scratch of the forwarding path, so that
// nothing on it allocates.
type worker struct {
	d        *Device
	replicas []Replica
	touched  []*egressPort
	deferred []deferredPacket
}

// deferredPacket is work produced while an egress port lock is held (an
// E2E clone, a recirculation) and done after it is released, since it may
// need that same port.
type deferredPacket struct {
	pk      *packet
	ingress bool
}

func (d *Device) newWorker() *worker {
	return &worker{
		d:        d,
		replicas: make([]Replica, 0, 64),
		touched:  make([]*egressPort, 0, 16),
		deferred: make([]deferredPacket, 0, 64),
	}
}

// receive takes one frame from a port's ring into the pipeline.
// Caller holds d.pipeMu for reading.
func (w *worker) receive(in *inputPort, f rxFrame) {
	d := w.d
	if f.outgoing {
		return
	}
	in.rxPackets.Add(1)
	in.rxBytes.Add(uint64(f.wireLen))
	if f.wireLen > len(f.data) {
		// Longer than the ring slot (MTU raised after start): forwarding a
		// cut frame would corrupt it.
		in.rxTruncated.Add(1)
		return
	}
	if in.pcap != nil {
		in.pcap.write(time.Now(), f.data)
	}
	if d.pipe == nil {
		d.dropNoPipeline.Add(1)
		return
	}
	if len(f.data) > d.pool.bufSize {
		in.rxTruncated.Add(1)
		return
	}
	pk := d.pool.get()
	if pk == nil {
		d.dropPool.Add(1)
		return
	}
	pk.buf.n = copy(pk.buf.data, f.data)
	pk.inPort = in.num
	setState(pk, d.pipe)
	w.ingress(pk, InstanceNormal)
}

// ingress runs the ingress control on pk and queues what it decides,
// in BMv2's order: clone, then resubmit, then multicast or unicast.
func (w *worker) ingress(pk *packet, kind InstanceType) {
	d := w.d
	pipe := pk.pipe
	pk.instance = kind
	dec := pipe.Ingress(pk.st, pk.buf.bytes(), IngressMeta{
		Port: pk.inPort, Instance: kind, TimestampUs: uint64(d.nowNs() / 1e3),
	})
	if dec.Clone {
		w.replicas = w.replicas[:0]
		var ok bool
		w.replicas, ok = pipe.CloneSessionReplicas(dec.CloneSession, w.replicas)
		if ok {
			for _, r := range w.replicas {
				if c := w.replica(pk, InstanceIngressClone); c != nil {
					c.outPort, c.rid, c.prio = r.Port, r.Rid, dec.Priority
					w.enqueue(c)
				}
			}
		}
	}
	if dec.Resubmit {
		if pk.hops >= maxHops {
			d.dropLoop.Add(1)
			d.pool.put(pk)
			return
		}
		r := w.replica(pk, InstanceResubmitted)
		hops := pk.hops
		d.pool.put(pk)
		if r != nil {
			r.hops = hops + 1
			w.ingress(r, InstanceResubmitted)
		}
		return
	}
	if dec.McastGroup != 0 {
		w.replicas = w.replicas[:0]
		w.replicas = pipe.MulticastGroup(dec.McastGroup, w.replicas)
		for _, r := range w.replicas {
			if c := w.replica(pk, InstanceReplication); c != nil {
				c.outPort, c.rid, c.prio = r.Port, r.Rid, dec.Priority
				w.enqueue(c)
			}
		}
		d.pool.put(pk)
		return
	}
	if dec.Drop || dec.EgressPort == DropPort {
		d.dropIngress.Add(1)
		d.pool.put(pk)
		return
	}
	pk.outPort, pk.rid, pk.prio = dec.EgressPort, 0, dec.Priority
	w.enqueue(pk)
}

// replica makes a packet sharing src's buffer with a copy of its state.
func (w *worker) replica(src *packet, kind InstanceType) *packet {
	d := w.d
	c := d.pool.getPacket()
	if c == nil {
		d.dropPool.Add(1)
		return nil
	}
	c.buf = src.buf
	src.buf.refs.Add(1)
	c.inPort, c.hops, c.instance = src.inPort, src.hops, kind
	setState(c, src.pipe)
	src.pipe.CopyState(c.st, src.st, kind)
	return c
}

// enqueue puts pk in its egress port's queue (tail drop when full).
func (w *worker) enqueue(pk *packet) {
	d := w.d
	eg := d.ports[pk.outPort&511]
	if eg == nil {
		d.dropNoPort.Add(1)
		d.pool.put(pk)
		return
	}
	if int(pk.prio) >= d.nq {
		// BMv2 drops a packet whose priority has no queue.
		d.dropPriority.Add(1)
		d.pool.put(pk)
		return
	}
	q := &eg.queues[pk.prio]
	eg.mu.Lock()
	if q.n == len(q.ring) {
		eg.mu.Unlock()
		q.drops.Add(1)
		d.pool.put(pk)
		return
	}
	pk.enqNs = d.nowNs()
	pk.enqDepth = uint32(eg.depth)
	q.push(pk)
	eg.depth++
	q.enq.Add(1)
	q.depth.Store(int64(q.n))
	if int64(q.n) > q.maxDepth.Load() {
		q.maxDepth.Store(int64(q.n))
	}
	if int64(eg.depth) > eg.maxDepth.Load() {
		eg.maxDepth.Store(int64(eg.depth))
	}
	eg.mu.Unlock()
	for _, t := range w.touched {
		if t == eg {
			return
		}
	}
	w.touched = append(w.touched, eg)
}

// flush drains the unpaced ports this worker queued to, then any deferred
// work that draining produced. Caller holds d.pipeMu for reading.
func (w *worker) flush() {
	for len(w.touched) > 0 || len(w.deferred) > 0 {
		for len(w.touched) > 0 {
			eg := w.touched[len(w.touched)-1]
			w.touched = w.touched[:len(w.touched)-1]
			if eg.rateBps == 0 {
				w.drain(eg)
			} else if w.serveDue(eg) > 0 {
				// More than the link may carry now: the pacer takes over.
				select {
				case eg.kick <- struct{}{}:
				default:
				}
			}
		}
		for len(w.deferred) > 0 {
			x := w.deferred[len(w.deferred)-1]
			w.deferred = w.deferred[:len(w.deferred)-1]
			if x.ingress {
				w.ingress(x.pk, InstanceRecirculated)
			} else {
				w.enqueue(x.pk)
			}
		}
	}
}

// drain sends everything queued on an unpaced port, in priority order, in
// sendmmsg batches.
func (w *worker) drain(eg *egressPort) {
	eg.mu.Lock()
	for eg.depth > 0 {
		eg.outv = eg.outv[:0]
		now := w.d.nowNs()
		for i := 0; i < len(eg.out) && eg.depth > 0; i++ {
			pk := eg.dequeue()
			if l := w.egress(eg, pk, eg.out[len(eg.outv)], now); l > 0 {
				eg.outv = append(eg.outv, eg.out[len(eg.outv)][:l])
			}
		}
		w.d.transmit(eg, eg.outv)
	}
	eg.mu.Unlock()
}

// egress runs the egress control for pk, dequeued from eg at now, and
// deparses into out. It returns the frame length to send, 0 if none.
// It always releases pk. Caller holds eg.mu.
func (w *worker) egress(eg *egressPort, pk *packet, out []byte, now int64) int {
	d := w.d
	pipe := pk.pipe
	enqUs := pk.enqNs / 1e3
	meta := EgressMeta{
		Port: eg.num, Rid: pk.rid, Instance: pk.instance, TimestampUs: uint64(now / 1e3),
		Queue: QueueMeta{
			EnqTimestampUs: uint32(enqUs),
			EnqQdepth:      pk.enqDepth,
			DeqTimedeltaUs: uint32(now/1e3 - enqUs),
			DeqQdepth:      uint32(eg.depth),
			Qid:            pk.prio,
		},
	}
	dec := pipe.Egress(pk.st, meta, out[:cap(out)])
	if dec.Clone {
		w.replicas = w.replicas[:0]
		var ok bool
		w.replicas, ok = pipe.CloneSessionReplicas(dec.CloneSession, w.replicas)
		if ok {
			for _, r := range w.replicas {
				if c := w.replica(pk, InstanceEgressClone); c != nil {
					c.outPort, c.rid, c.prio = r.Port, r.Rid, pk.prio
					w.deferred = append(w.deferred, deferredPacket{pk: c})
				}
			}
		}
	}
	n := dec.Len
	if n < 0 || n > len(out) {
		n = 0
	}
	if dec.Recirculate && !dec.Drop && n > 0 {
		w.recirculate(pk, out[:n])
		n = 0
	} else if dec.Drop {
		d.dropEgress.Add(1)
		n = 0
	}
	d.pool.put(pk)
	return n
}

// recirculate sends the deparsed frame back to ingress on the same port.
func (w *worker) recirculate(pk *packet, frame []byte) {
	d := w.d
	if pk.hops >= maxHops {
		d.dropLoop.Add(1)
		return
	}
	if len(frame) > d.pool.bufSize {
		d.dropEgress.Add(1)
		return
	}
	c := d.pool.get()
	if c == nil {
		d.dropPool.Add(1)
		return
	}
	c.buf.n = copy(c.buf.data, frame)
	c.inPort, c.hops = pk.inPort, pk.hops+1
	// A recirculated packet re-enters the current pipeline; its preserved
	// metadata can only carry over when that is still the one it left.
	setState(c, d.pipe)
	if d.pipe == nil {
		d.dropNoPipeline.Add(1)
		d.pool.put(c)
		return
	}
	if d.pipe == pk.pipe {
		d.pipe.CopyState(c.st, pk.st, InstanceRecirculated)
	}
	w.deferred = append(w.deferred, deferredPacket{pk: c, ingress: true})
}
