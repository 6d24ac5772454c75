package p4rt

import (
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// v1model limits, from the widths of standard_metadata fields on BMv2:
// mcast_grp and egress_rid are bit<16>, ports bit<9>, priority bit<3>.
const (
	maxMulticastGroup = 1<<16 - 1
	maxInstance       = 1<<16 - 1
	maxPort           = 1<<9 - 1
	maxClassOfService = 7
)

// replicas validates a replica list (spec §9.7): singleton ports, v1model
// instance range, no duplicate (port, instance). Ports come as the v1.4
// "port" bytes or the deprecated egress_port number.
func replicas(rs []*p4v1.Replica) ([]pipeline.Replica, error) {
	out := make([]pipeline.Replica, 0, len(rs))
	seen := map[pipeline.Replica]bool{}
	for _, r := range rs {
		if r == nil {
			return nil, invalid("empty replica")
		}
		var port uint64
		switch p := r.GetPortKind().(type) {
		case *p4v1.Replica_Port:
			v, err := canonical(p.Port, 32)
			if err != nil {
				return nil, invalid("replica port: %s", messageOf(err))
			}
			for _, c := range v {
				port = port<<8 | uint64(c)
			}
		case *p4v1.Replica_EgressPort:
			port = uint64(p.EgressPort)
		default:
			return nil, invalid("replica has no port")
		}
		if port > maxPort {
			return nil, invalid("replica port %d is not a v1model port (9 bits)", port)
		}
		if r.GetInstance() > maxInstance {
			return nil, invalid("replica instance %d exceeds v1model's 16-bit egress_rid", r.GetInstance())
		}
		rep := pipeline.Replica{Port: uint32(port), Rid: r.GetInstance()}
		if seen[rep] {
			return nil, invalid("duplicate replica (port %d, instance %d)", rep.Port, rep.Rid)
		}
		seen[rep] = true
		out = append(out, rep)
	}
	return out, nil
}

// writtenAs is what a read of a multicast group or clone session returns
// that the device does not hold: the group's metadata, and which replicas
// named their port by the deprecated egress_port number instead of port
// bytes (a read answers in the form written; port bytes canonical).
type writtenAs struct {
	metadata   []byte
	egressPort []bool // by replica, in order
}

func writtenAsOf(rs []*p4v1.Replica, metadata []byte) writtenAs {
	w := writtenAs{metadata: clone(metadata), egressPort: make([]bool, len(rs))}
	for i, r := range rs {
		_, w.egressPort[i] = r.GetPortKind().(*p4v1.Replica_EgressPort)
	}
	return w
}

// replicaProtos renders the device's replicas in the form they were written.
func (w writtenAs) replicaProtos(rs []pipeline.Replica) []*p4v1.Replica {
	out := make([]*p4v1.Replica, len(rs))
	for i, r := range rs {
		out[i] = &p4v1.Replica{Instance: r.Rid, PortKind: &p4v1.Replica_Port{Port: uintBytes(uint64(r.Port))}}
		if i < len(w.egressPort) && w.egressPort[i] {
			out[i].PortKind = &p4v1.Replica_EgressPort{EgressPort: r.Port}
		}
	}
	return out
}

// multicastGroup reads group id back from the device (nil: no such group).
func (ps *pipelineState) multicastGroup(id uint32) *p4v1.MulticastGroupEntry {
	reps, ok := ps.ctl.MulticastGroup(id)
	if !ok {
		return nil
	}
	w := ps.mcastAs[id]
	return &p4v1.MulticastGroupEntry{MulticastGroupId: id, Replicas: w.replicaProtos(reps), Metadata: clone(w.metadata)}
}

// cloneSession reads session id back from the device (nil: no such session).
func (ps *pipelineState) cloneSession(id uint32) *p4v1.CloneSessionEntry {
	s, ok := ps.ctl.CloneSession(id)
	if !ok {
		return nil
	}
	return &p4v1.CloneSessionEntry{SessionId: id, Replicas: ps.clonesAs[id].replicaProtos(s.Replicas),
		ClassOfService: s.ClassOfService, PacketLengthBytes: int32(s.TruncateLength)}
}

func (ps *pipelineState) writePRE(typ p4v1.Update_Type, pre *p4v1.PacketReplicationEngineEntry) error {
	switch x := pre.GetType().(type) {
	case *p4v1.PacketReplicationEngineEntry_MulticastGroupEntry:
		return ps.writeMulticastGroup(typ, x.MulticastGroupEntry)
	case *p4v1.PacketReplicationEngineEntry_CloneSessionEntry:
		return ps.writeCloneSession(typ, x.CloneSessionEntry)
	default:
		return invalid("packet replication engine entry has no type set")
	}
}

func (ps *pipelineState) writeMulticastGroup(typ p4v1.Update_Type, m *p4v1.MulticastGroupEntry) error {
	id := m.GetMulticastGroupId()
	if id == 0 {
		return invalid("multicast group id 0 is only allowed as a read wildcard")
	}
	if id > maxMulticastGroup {
		return invalid("multicast group id %d exceeds v1model's 16-bit mcast_grp", id)
	}
	_, exists := ps.ctl.MulticastGroup(id)
	switch typ {
	case p4v1.Update_DELETE:
		if !exists {
			return errorf(codes.NotFound, "no multicast group %d", id)
		}
		if err := ps.ctl.DeleteMulticastGroup(id); err != nil {
			return engineErr("deleting the multicast group", err)
		}
		delete(ps.mcastAs, id)
		return nil
	case p4v1.Update_INSERT:
		if exists {
			return errorf(codes.AlreadyExists, "multicast group %d exists", id)
		}
	case p4v1.Update_MODIFY:
		if !exists {
			return errorf(codes.NotFound, "no multicast group %d", id)
		}
	}
	reps, err := replicas(m.GetReplicas())
	if err != nil {
		return err
	}
	if err := ps.ctl.SetMulticastGroup(id, reps); err != nil {
		return engineErr("setting the multicast group", err)
	}
	ps.mcastAs[id] = writtenAsOf(m.GetReplicas(), m.GetMetadata())
	return nil
}

func (ps *pipelineState) writeCloneSession(typ p4v1.Update_Type, c *p4v1.CloneSessionEntry) error {
	id := c.GetSessionId()
	if id == 0 {
		return invalid("clone session id 0 is only allowed as a read wildcard")
	}
	_, exists := ps.ctl.CloneSession(id)
	switch typ {
	case p4v1.Update_DELETE:
		if !exists {
			return errorf(codes.NotFound, "no clone session %d", id)
		}
		if err := ps.ctl.DeleteCloneSession(id); err != nil {
			return engineErr("deleting the clone session", err)
		}
		delete(ps.clonesAs, id)
		return nil
	case p4v1.Update_INSERT:
		if exists {
			return errorf(codes.AlreadyExists, "clone session %d exists", id)
		}
	case p4v1.Update_MODIFY:
		if !exists {
			return errorf(codes.NotFound, "no clone session %d", id)
		}
	}
	if c.GetClassOfService() > maxClassOfService {
		return invalid("class of service %d exceeds v1model's 3-bit priority", c.GetClassOfService())
	}
	if c.GetPacketLengthBytes() < 0 {
		return invalid("negative packet_length_bytes")
	}
	reps, err := replicas(c.GetReplicas())
	if err != nil {
		return err
	}
	sess := pipeline.CloneSession{Replicas: reps, ClassOfService: c.GetClassOfService(), TruncateLength: int(c.GetPacketLengthBytes())}
	if err := ps.ctl.SetCloneSession(id, sess); err != nil {
		return engineErr("setting the clone session", err)
	}
	ps.clonesAs[id] = writtenAsOf(c.GetReplicas(), nil)
	return nil
}

func (ps *pipelineState) writeDigestEntry(typ p4v1.Update_Type, d *p4v1.DigestEntry) error {
	if d.GetDigestId() == 0 {
		return invalid("digest id 0 is only allowed as a read wildcard")
	}
	if _, ok := ps.schema.digests[d.GetDigestId()]; !ok {
		return errorf(codes.NotFound, "no digest with id %#x", d.GetDigestId())
	}
	_, exists := ps.digestCfg[d.GetDigestId()]
	switch typ {
	case p4v1.Update_DELETE:
		if !exists {
			return errorf(codes.NotFound, "digest %#x is not enabled", d.GetDigestId())
		}
		delete(ps.digestCfg, d.GetDigestId())
		return nil
	case p4v1.Update_INSERT:
		if exists {
			return errorf(codes.AlreadyExists, "digest %#x is already enabled", d.GetDigestId())
		}
	case p4v1.Update_MODIFY:
		if !exists {
			return errorf(codes.NotFound, "digest %#x is not enabled", d.GetDigestId())
		}
	}
	cfg := d.GetConfig()
	if cfg == nil {
		return invalid("digest entry needs a config")
	}
	if cfg.GetMaxTimeoutNs() < 0 || cfg.GetMaxListSize() < 0 || cfg.GetAckTimeoutNs() < 0 {
		return invalid("digest config values must not be negative")
	}
	ps.digestCfg[d.GetDigestId()] = proto.Clone(cfg).(*p4v1.DigestEntry_Config)
	return nil
}
