package device

import (
	"time"

	"github.com/terrapin/terrapin/toolchain/engine"
)

// worker is the per-goroutine scratch of the forwarding path, so that
// nothing on it allocates.
type worker struct {
	d       *Device
	jobs    []engine.Job
	more    []engine.Job
	touched []*egressPort
	// deferred holds jobs made while an egress port lock was held (egress
	// clones, recirculated packets); they are queued after it is released,
	// since they may be for that same port.
	deferred     []engine.Job
	deferredPipe []Pipeline
	// pend holds the jobs of the batch until flush queues them, one lock
	// per port instead of one per packet.
	pend []pendingJob
	// now is the device clock read for the batch being processed (0: none;
	// read the clock). Packets queued on unpaced ports are stamped with it
	// instead of a clock read each: they leave within the same batch.
	now int64
	// receive counters of the batch, added to the port's once per batch
	rxPackets, rxBytes uint64
	// thread is the forwarding thread's scheduling state (nil for the
	// packet-out path, which never busy-waits).
	thread *fwdThread
}

// pendingJob is a job ingress made, waiting for the end of the batch.
type pendingJob struct {
	job  engine.Job
	pipe Pipeline
}

func (d *Device) newWorker() *worker {
	return &worker{
		pend:         make([]pendingJob, 0, 2*rxBatch),
		d:            d,
		jobs:         make([]engine.Job, 0, 64),
		more:         make([]engine.Job, 0, 64),
		touched:      make([]*egressPort, 0, 16),
		deferred:     make([]engine.Job, 0, 64),
		deferredPipe: make([]Pipeline, 0, 64),
	}
}

// receive takes one frame from a port's ring into the pipeline.
// Caller holds d.pipeMu for reading and is the port's receive goroutine
// (it owns in.clock).
func (w *worker) receive(in *inputPort, f rxFrame) {
	d := w.d
	if f.outgoing {
		return
	}
	arrival := in.clock.arrival(d, f.tsNs)
	if w.rxPackets == 0 {
		in.rxDelay.observe(in.clock.now - arrival)
	}
	w.rxPackets++
	w.rxBytes += uint64(f.wireLen)
	if f.wireLen > len(f.data) {
		// Longer than the ring slot (MTU raised after start): forwarding a
		// cut frame would corrupt it.
		in.rxTruncated.Add(1)
		return
	}
	if in.pcap != nil {
		ts := f.tsNs
		if ts <= 0 {
			ts = time.Now().UnixNano()
		}
		in.pcap.write(time.Unix(0, ts), f.data)
	}
	if d.pipe == nil {
		d.dropNoPipeline.Add(1)
		return
	}
	w.ingress(f.data, in.num, arrival)
}

// commitRx adds the batch's receive counters to the port's.
func (w *worker) commitRx(in *inputPort) {
	if w.rxPackets != 0 {
		in.rxPackets.Add(w.rxPackets)
		in.rxBytes.Add(w.rxBytes)
		w.rxPackets, w.rxBytes = 0, 0
	}
}

// ingress runs a frame that arrived at arrivalNs (device clock) through the
// current pipeline and queues its jobs. Caller holds d.pipeMu for reading.
func (w *worker) ingress(frame []byte, port uint16, arrivalNs int64) {
	pipe := w.d.pipe
	w.jobs = pipe.Ingress(frame, port, arrivalNs, w.jobs[:0])
	if len(w.jobs) == 0 {
		w.d.dropIngress.Add(1)
		return
	}
	for i := range w.jobs {
		if len(w.pend) == cap(w.pend) {
			w.enqueuePending()
		}
		w.pend = append(w.pend, pendingJob{w.jobs[i], pipe})
		w.jobs[i] = engine.Job{}
	}
}

// egressPortOf returns the port a job goes to, or nil after dropping the
// job (the drop port or beyond, or a priority without a queue).
func (w *worker) egressPortOf(job engine.Job, pipe Pipeline) *egressPort {
	d := w.d
	eg := d.egressPortFor(job.Port)
	if eg == nil {
		d.dropNoPort.Add(1)
		pipe.Release(job.Pkt)
		return nil
	}
	if int(job.Priority) >= d.nq {
		// BMv2 drops a packet whose priority has no queue.
		d.dropPriority.Add(1)
		pipe.Release(job.Pkt)
		return nil
	}
	return eg
}

// enqueue puts a job in its egress port's queue (tail drop when full).
func (w *worker) enqueue(job engine.Job, pipe Pipeline) {
	eg := w.egressPortOf(job, pipe)
	if eg == nil {
		return
	}
	eg.mu.Lock()
	w.enqueueLocked(eg, job, pipe)
	eg.mu.Unlock()
	w.touch(eg)
}

// enqueuePending queues the jobs ingress made in this batch, taking each
// port's lock once for all of that port's jobs (in their order).
func (w *worker) enqueuePending() {
	for i := range w.pend {
		pj := &w.pend[i]
		if pj.pipe == nil {
			continue // queued with an earlier job's port
		}
		eg := w.egressPortOf(pj.job, pj.pipe)
		if eg == nil {
			*pj = pendingJob{}
			continue
		}
		eg.mu.Lock()
		w.enqueueLocked(eg, pj.job, pj.pipe)
		*pj = pendingJob{}
		for j := i + 1; j < len(w.pend); j++ {
			o := &w.pend[j]
			if o.pipe == nil || o.job.Port != uint32(eg.num) {
				continue
			}
			if int(o.job.Priority) < w.d.nq {
				w.enqueueLocked(eg, o.job, o.pipe)
			} else {
				w.d.dropPriority.Add(1)
				o.pipe.Release(o.job.Pkt)
			}
			*o = pendingJob{}
		}
		eg.mu.Unlock()
		w.touch(eg)
	}
	w.pend = w.pend[:0]
}

// enqueueLocked queues job on eg, whose lock the caller holds, or drops it
// when its queue is full.
func (w *worker) enqueueLocked(eg *egressPort, job engine.Job, pipe Pipeline) {
	if eg.retired.Load() {
		// Looked up just before port_add or port_remove replaced it.
		w.d.dropNoPort.Add(1)
		pipe.Release(job.Pkt)
		return
	}
	q := &eg.queues[job.Priority]
	if q.n >= q.limit {
		q.drops.Add(1)
		pipe.Release(job.Pkt)
		return
	}
	enqNs := w.now
	if enqNs == 0 || eg.rateBps > 0 || q.gapNs > 0 {
		// A paced port's queueing delay is what its metadata reports;
		// stamp it exactly.
		enqNs = w.d.nowNs()
	}
	var sendNs int64
	if q.gapNs > 0 {
		// BMv2's rate limiter: a packet may leave a gap after the one
		// queued before it, and not before it arrived.
		sendNs = max(enqNs, q.lastSend+q.gapNs)
		q.lastSend = sendNs
	}
	// enq_qdepth is the depth of the packet's own priority queue, as in
	// p4lang's simple_switch (egress_buffers.size(port, priority)).
	q.push(queued{job: job, pipe: pipe, enqNs: enqNs, enqDepth: uint32(q.n), sendNs: sendNs})
	eg.depth++
	q.enq.Add(1)
	q.depth.Store(int64(q.n))
	if int64(q.n) > q.maxDepth.Load() {
		q.maxDepth.Store(int64(q.n))
	}
	if int64(eg.depth) > eg.maxDepth.Load() {
		eg.maxDepth.Store(int64(eg.depth))
	}
}

// touch records that eg has packets this worker queued.
func (w *worker) touch(eg *egressPort) {
	for _, t := range w.touched {
		if t == eg {
			return
		}
	}
	w.touched = append(w.touched, eg)
}

// flush serves the ports this worker queued to — draining unpaced ones,
// sending what a paced one may send now and waking its pacer for the rest
// — then queues the jobs that produced. Caller holds d.pipeMu for reading.
func (w *worker) flush() {
	w.enqueuePending()
	for len(w.touched) > 0 || len(w.deferred) > 0 {
		for len(w.touched) > 0 {
			eg := w.touched[len(w.touched)-1]
			w.touched = w.touched[:len(w.touched)-1]
			if !eg.shaped.Load() {
				w.drain(eg)
			} else if wait, _ := w.serveDue(eg, false); wait > 0 && (eg.pacerIdle.Load() || w.d.nowNs()+wait < eg.pacerWake.Load()) {
				// The pacer sleeps without a deadline, or past when
				// what is queued now may go (a rate-limited queue's
				// frame can be due before the one it sleeps for).
				eg.wakePacer()
			}
		}
		for len(w.deferred) > 0 {
			i := len(w.deferred) - 1
			job, pipe := w.deferred[i], w.deferredPipe[i]
			w.deferred, w.deferredPipe = w.deferred[:i], w.deferredPipe[:i]
			w.enqueue(job, pipe)
		}
	}
}

// drain sends everything queued on an unpaced port, in priority order, in
// sendmmsg batches.
func (w *worker) drain(eg *egressPort) {
	eg.mu.Lock()
	for eg.depth > 0 {
		now := w.d.nowNs()
		if w.now != 0 {
			w.now = now // jobs made by egress are queued at this time
		}
		for len(eg.outv) < txBatch && eg.depth > 0 {
			w.egress(eg, eg.dequeue(), now)
		}
		w.d.transmit(eg)
	}
	eg.mu.Unlock()
}

// egress runs the egress pipeline for a job dequeued from eg at now and
// adds the frame to eg's transmit batch. It returns the frame length, 0
// if nothing leaves. Caller holds eg.mu.
func (w *worker) egress(eg *egressPort, e queued, now int64) int {
	d := w.d
	eg.queues[e.job.Priority].delay.observe(now - e.enqNs)
	enqUs := e.enqNs / 1e3
	q := engine.QueueMeta{
		EnqTimestamp: uint64(enqUs),
		EnqQdepth:    e.enqDepth,
		DeqTimedelta: uint32(now/1e3 - enqUs),
		DeqQdepth:    uint32(eg.queues[e.job.Priority].n),
		Qid:          e.job.Priority,
	}
	frame, more := e.pipe.Egress(e.job, q, w.more[:0])
	for i := range more {
		w.deferred = append(w.deferred, more[i])
		w.deferredPipe = append(w.deferredPipe, e.pipe)
		more[i] = engine.Job{}
	}
	w.more = more[:0]
	if frame == nil {
		d.dropEgress.Add(1)
		return 0
	}
	if len(frame) == 0 {
		// Truncated to nothing: there is no frame to put on a wire.
		e.pipe.Release(e.job.Pkt)
		d.dropEgress.Add(1)
		return 0
	}
	if eg.sock != nil && !eg.sock.sendable(len(frame)) {
		// Longer than the port's MTU (headers pushed), or shorter than its
		// link-layer header: the kernel would refuse it.
		e.pipe.Release(e.job.Pkt)
		eg.txErrors.Add(1)
		return 0
	}
	eg.outv = append(eg.outv, frame)
	eg.outq = append(eg.outq, e)
	return len(frame)
}
