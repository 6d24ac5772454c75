package device

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/terrapin/terrapin/toolchain/engine"
)

// PortMap is a fixed pipeline without P4: each input port forwards to one
// output port (or a list of ports, as a multicast group would). The device
// tests and the benchmark's "device without P4" row use it to exercise ports
// and the traffic manager independently of the engine; it is also the
// smallest example of what a Pipeline must do.
type PortMap struct {
	// Out[p] lists where frames from port p go; empty drops.
	Out [512][]uint16
	// PriorityOffset, when >= 0, takes the queue from the low 3 bits of
	// that frame byte (as a program would set standard_metadata.priority).
	PriorityOffset int
	// StampOffset, when > 0, makes egress write the queueing metadata into
	// the frame at that offset, big-endian: enq_timestamp (low 32 bits),
	// enq_qdepth, deq_timedelta, deq_qdepth (4 bytes each), qid (1 byte).
	StampOffset int

	mu          sync.Mutex
	free        []*engine.Packet
	outstanding atomic.Int64
}

// NewPortMap returns a PortMap that drops everything until Out is set.
func NewPortMap() *PortMap { return &PortMap{PriorityOffset: -1} }

// Connect makes frames from port in go to the out ports.
func (m *PortMap) Connect(in uint16, out ...uint16) { m.Out[in&511] = out }

func (m *PortMap) get() *engine.Packet {
	m.outstanding.Add(1)
	m.mu.Lock()
	if n := len(m.free); n > 0 {
		p := m.free[n-1]
		m.free = m.free[:n-1]
		m.mu.Unlock()
		return p
	}
	m.mu.Unlock()
	return engine.NewFramePacket(MaxFrame) // warm-up only
}

// Ingress implements Pipeline.
func (m *PortMap) Ingress(frame []byte, port uint16, arrivalNs int64, jobs []engine.Job) []engine.Job {
	outs := m.Out[port&511]
	if len(frame) > MaxFrame {
		return jobs
	}
	var prio uint8
	if m.PriorityOffset >= 0 && m.PriorityOffset < len(frame) {
		prio = frame[m.PriorityOffset] & 7
	}
	for _, o := range outs {
		p := m.get()
		p.SetFrame(frame)
		jobs = append(jobs, engine.Job{Pkt: p, Port: uint32(o), Priority: prio})
	}
	return jobs
}

// Egress implements Pipeline.
func (m *PortMap) Egress(job engine.Job, q engine.QueueMeta, more []engine.Job) ([]byte, []engine.Job) {
	out := job.Pkt.Frame()
	if o := m.StampOffset; o > 0 && o+17 <= len(out) {
		binary.BigEndian.PutUint32(out[o:], uint32(q.EnqTimestamp))
		binary.BigEndian.PutUint32(out[o+4:], q.EnqQdepth)
		binary.BigEndian.PutUint32(out[o+8:], q.DeqTimedelta)
		binary.BigEndian.PutUint32(out[o+12:], q.DeqQdepth)
		out[o+16] = q.Qid
	}
	return out, more
}

// Release implements Pipeline.
func (m *PortMap) Release(pkt *engine.Packet) {
	m.outstanding.Add(-1)
	m.mu.Lock()
	m.free = append(m.free, pkt)
	m.mu.Unlock()
}

// Outstanding is how many packets are held by the device (for leak tests).
func (m *PortMap) Outstanding() int64 { return m.outstanding.Load() }
