package device

// This file is the device's view of a compiled P4 pipeline, shaped after the
// engine's two-phase API (toolchain/engine/switch.go): the pipeline runs
// parser, ingress and BMv2's after-ingress logic (clone, resubmit,
// multicast) and hands back jobs; the device queues each job on its port
// and, when the port may send, runs egress and the deparser on it. The
// device owns I/O, queueing, pacing and the CPU port; the pipeline owns
// packets (it copies each frame it is given) and replication.

// DropPort is v1model's drop port on BMv2 (egress_spec 511 drops).
const DropPort = 511

// PacketRef is a pipeline's handle on one packet instance (for the engine, a
// *engine.Packet). Storing a pointer in it does not allocate.
type PacketRef interface{}

// Job is a packet waiting for egress on Port in the queue of its Priority
// (standard_metadata.priority when it left ingress, 0 lowest).
type Job struct {
	Pkt      PacketRef
	Port     uint16
	Priority uint8
}

// QueueMeta is the queueing metadata egress sees, in BMv2's units.
type QueueMeta struct {
	EnqTimestampUs uint64 // µs of the device clock when enqueued
	EnqQdepth      uint32 // packets in this packet's priority queue before it
	DeqTimedeltaUs uint32 // µs spent queued
	DeqQdepth      uint32 // packets left in its priority queue after it left
	Qid            uint8  // the queue, equal to the priority, as BMv2 reports it
}

// Scratch is working space a pipeline may keep per calling goroutine (the
// device gives each forwarding goroutine its own), so that the per-packet
// path needs neither a pool nor a lock for it. Store a pointer in it: that
// does not allocate.
type Scratch struct{ V any }

// Pipeline is the per-packet face of a compiled program. Its methods are
// called concurrently from several goroutines and must not allocate per
// packet once warm.
type Pipeline interface {
	// Ingress runs frame, received on port, through ingress and appends the
	// resulting jobs (none: dropped). frame is copied; the caller reuses it.
	// arrivalNs is when the frame arrived, in the device clock (NowNs):
	// the kernel's receive time for frames from an interface, the current
	// time for packet-outs. Meters and ingress_global_timestamp use it, so
	// a batch processed late is judged by when its frames arrived.
	// sc is the calling goroutine's scratch space.
	Ingress(frame []byte, port uint16, arrivalNs int64, jobs []Job, sc *Scratch) []Job
	// Egress runs a dequeued job through egress and the deparser. frame is
	// the bytes to transmit (nil: nothing leaves, and the pipeline has
	// already released the packet); it stays valid until Release(job.Pkt).
	// Jobs created on the way (egress clones, recirculated packets) are
	// appended to more.
	Egress(job Job, q QueueMeta, more []Job, sc *Scratch) (frame []byte, jobs []Job)
	// Release returns a packet the device is done with: after transmitting
	// Egress's frame, or when dropping a queued job.
	Release(pkt PacketRef)
}
