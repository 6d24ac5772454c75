package device

import "github.com/terrapin/terrapin/toolchain/engine"

// This file is the device's view of a compiled P4 pipeline: the engine's
// two-phase API (toolchain/engine/switch.go) with the engine's own job and
// queueing-metadata types, so that a packet crosses from pipeline to queue
// and back without being copied or translated. The pipeline runs parser,
// ingress and BMv2's after-ingress logic (clone, resubmit, multicast) and
// hands back jobs; the device queues each job on its port and, when the
// port may send, runs egress and the deparser on it. The device owns I/O,
// queueing, pacing and the CPU port; the pipeline owns packets (it copies
// each frame it is given) and replication.

// DropPort is v1model's drop port on BMv2 (egress_spec 511 drops).
const DropPort = 511

// Pipeline is the per-packet face of a compiled program. Its methods are
// called concurrently from several goroutines and must not allocate per
// packet once warm.
//
// A job (engine.Job) is a packet waiting for egress on Port in the queue of
// its Priority (standard_metadata.priority when it left ingress, 0 lowest);
// a Port below the drop port that has no interface still gets egress, as on
// BMv2 (what egress leaves to send there is dropped), and the drop port and
// above drop it.
// engine.QueueMeta is the queueing metadata egress sees, in BMv2's units
// (µs of the device clock, depths in packets, Qid equal to the priority).
type Pipeline interface {
	// Ingress runs frame, received on port, through ingress and appends the
	// resulting jobs (none: dropped). frame is copied; the caller reuses it.
	// arrivalNs is when the frame arrived, in the device clock (NowNs):
	// the kernel's receive time for frames from an interface, the current
	// time for packet-outs. Meters and ingress_global_timestamp use it, so
	// a batch processed late is judged by when its frames arrived.
	Ingress(frame []byte, port uint16, arrivalNs int64, jobs []engine.Job) []engine.Job
	// Egress runs a dequeued job through egress and the deparser. frame is
	// the bytes to transmit (nil: nothing leaves, and the pipeline has
	// already released the packet); it stays valid until Release(job.Pkt).
	// Jobs created on the way (egress clones, recirculated packets) are
	// appended to more.
	Egress(job engine.Job, q engine.QueueMeta, more []engine.Job) (frame []byte, jobs []engine.Job)
	// Release returns a packet the device is done with: after transmitting
	// Egress's frame, or when dropping a queued job.
	Release(pkt *engine.Packet)
}
