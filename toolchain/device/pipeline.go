package device

// This file is the device's view of a compiled P4 pipeline. The device owns
// packet I/O, buffering, queueing, pacing and replication; the pipeline owns
// parsing, the match-action controls and deparsing, and the tables of
// multicast groups and clone sessions its control API fills. The split
// follows BMv2's simple_switch, where the target (not the match-action core)
// performs enqueueing, multicast and cloning.

// DropPort is v1model's drop port on BMv2 (egress_spec 511 drops).
const DropPort = 511

// PacketState is a pipeline's per-packet state (parsed headers, metadata)
// carried from ingress through the queue to egress. The device allocates a
// fixed number of them when a pipeline is loaded and reuses them, so the
// per-packet path never allocates.
type PacketState interface{}

// InstanceType is v1model's standard_metadata.instance_type value space
// as BMv2 numbers it.
type InstanceType uint8

// BMv2 instance types (simple_switch.h PKT_INSTANCE_TYPE_*).
const (
	InstanceNormal       InstanceType = 0
	InstanceIngressClone InstanceType = 1
	InstanceEgressClone  InstanceType = 2
	InstanceCoalesced    InstanceType = 3
	InstanceRecirculated InstanceType = 4
	InstanceReplication  InstanceType = 5
	InstanceResubmitted  InstanceType = 6
)

// IngressMeta is what the device tells the pipeline about a received frame.
type IngressMeta struct {
	Port        uint16
	Instance    InstanceType
	TimestampUs uint64 // ingress_global_timestamp, µs since the device started
}

// IngressDecision is what the device needs from ingress to queue a packet.
type IngressDecision struct {
	Drop       bool   // mark_to_drop / egress_spec == DropPort / parser reject policy
	EgressPort uint16 // egress_spec
	McastGroup uint16 // mcast_grp; non-zero wins over EgressPort, as in BMv2
	Priority   uint8  // standard_metadata.priority: the egress queue
	// CloneSession is the I2E clone session requested (clone/clone3), valid
	// when Clone is true.
	Clone        bool
	CloneSession uint32
	Resubmit     bool
}

// QueueMeta is v1model's queueing metadata, in BMv2's units.
type QueueMeta struct {
	EnqTimestampUs uint32 // µs since the device started, when enqueued
	EnqQdepth      uint32 // packets in the port's queues before this one
	DeqTimedeltaUs uint32 // µs spent queued
	DeqQdepth      uint32 // packets left in the port's queues after dequeue
	Qid            uint8  // the queue: equal to the priority, as BMv2 reports it
}

// EgressMeta is what the device tells the pipeline at dequeue.
type EgressMeta struct {
	Port        uint16
	Rid         uint16 // egress_rid of a multicast replica
	Instance    InstanceType
	TimestampUs uint64 // egress_global_timestamp
	Queue       QueueMeta
}

// EgressDecision is what the device needs from egress.
type EgressDecision struct {
	Drop         bool
	Len          int // bytes of the deparsed frame written into out
	Clone        bool
	CloneSession uint32 // E2E clone session
	Recirculate  bool
}

// Replica is one copy a multicast group or clone session asks for.
type Replica struct {
	Port uint16
	Rid  uint16
}

// Pipeline is the per-packet face of a compiled program. Its methods are
// called concurrently from several goroutines, each with its own states.
type Pipeline interface {
	// NewState allocates one reusable per-packet state (load time only).
	NewState() PacketState
	// Ingress parses frame into st and runs the ingress control. frame stays
	// valid and unmodified until st is reused, so st may point into it.
	Ingress(st PacketState, frame []byte, m IngressMeta) IngressDecision
	// Egress runs the egress control on st, then deparses into out (whose
	// capacity is MaxFrame+headroom), returning the length written.
	Egress(st PacketState, m EgressMeta, out []byte) EgressDecision
	// CopyState makes dst a copy of src for a replica or clone of the given
	// instance type; frame is the buffer dst will refer to.
	CopyState(dst, src PacketState, kind InstanceType)
	// MulticastGroup appends the replicas of group to dst.
	MulticastGroup(group uint16, dst []Replica) []Replica
	// CloneSessionReplicas appends the replicas of a clone session to dst;
	// ok is false when the session is not configured.
	CloneSessionReplicas(session uint32, dst []Replica) ([]Replica, bool)
}
