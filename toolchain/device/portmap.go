package device

import "encoding/binary"

// PortMap is a fixed pipeline without P4: each input port forwards to one
// output port. The device tests and the I/O benchmark use it to exercise
// ports and the traffic manager independently of the engine; it is also
// the reference for what a Pipeline must do.
type PortMap struct {
	// Out[p] is where frames from port p go; DropPort (or 0 when unset via
	// NewPortMap) drops.
	Out [512]uint16
	// PriorityOffset, when >= 0, takes the queue from the low 3 bits of
	// that frame byte (as a program would set standard_metadata.priority).
	PriorityOffset int
	// StampOffset, when > 0, makes egress write the queueing metadata into
	// the frame at that offset, big-endian: enq_timestamp, enq_qdepth,
	// deq_timedelta, deq_qdepth (4 bytes each), qid (1 byte).
	StampOffset int
	// Multicast groups: group -> replicas.
	Groups map[uint16][]Replica
}

// NewPortMap returns a PortMap that drops everything until Out is set.
func NewPortMap() *PortMap {
	m := &PortMap{PriorityOffset: -1}
	for i := range m.Out {
		m.Out[i] = DropPort
	}
	return m
}

type portMapState struct {
	frame []byte
	in    uint16
}

// NewState implements Pipeline.
func (m *PortMap) NewState() PacketState { return &portMapState{} }

// Ingress implements Pipeline.
func (m *PortMap) Ingress(st PacketState, frame []byte, meta IngressMeta) IngressDecision {
	s := st.(*portMapState)
	s.frame, s.in = frame, meta.Port
	dec := IngressDecision{EgressPort: m.Out[meta.Port&511]}
	if m.PriorityOffset >= 0 && m.PriorityOffset < len(frame) {
		dec.Priority = frame[m.PriorityOffset] & 7
	}
	if g := dec.EgressPort; g >= 0x1000 {
		dec.McastGroup = g - 0x1000
	}
	return dec
}

// Egress implements Pipeline.
func (m *PortMap) Egress(st PacketState, meta EgressMeta, out []byte) EgressDecision {
	s := st.(*portMapState)
	n := copy(out, s.frame)
	if o := m.StampOffset; o > 0 && o+17 <= n {
		q := meta.Queue
		binary.BigEndian.PutUint32(out[o:], q.EnqTimestampUs)
		binary.BigEndian.PutUint32(out[o+4:], q.EnqQdepth)
		binary.BigEndian.PutUint32(out[o+8:], q.DeqTimedeltaUs)
		binary.BigEndian.PutUint32(out[o+12:], q.DeqQdepth)
		out[o+16] = q.Qid
	}
	return EgressDecision{Len: n}
}

// CopyState implements Pipeline.
func (m *PortMap) CopyState(dst, src PacketState, _ InstanceType) {
	*dst.(*portMapState) = *src.(*portMapState)
}

// MulticastGroup implements Pipeline.
func (m *PortMap) MulticastGroup(group uint16, dst []Replica) []Replica {
	return append(dst, m.Groups[group]...)
}

// CloneSessionReplicas implements Pipeline.
func (m *PortMap) CloneSessionReplicas(uint32, []Replica) ([]Replica, bool) { return nil, false }
