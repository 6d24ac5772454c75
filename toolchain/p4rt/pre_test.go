package p4rt_test

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Multicast groups and clone sessions are read back from the device, with
// what only P4Runtime has (a group's metadata, the port form each replica
// was written in) kept by the server: a read returns what was written, port
// bytes in canonical form, before and after RECONCILE_AND_COMMIT, and
// nothing once deleted.
func TestReplicationReadWriteSymmetry(t *testing.T) {
	h := ready(t)
	portBytes := func(port []byte, instance uint32) *p4v1.Replica {
		return &p4v1.Replica{PortKind: &p4v1.Replica_Port{Port: port}, Instance: instance}
	}
	pre := func(e *p4v1.Entity) *p4v1.PacketReplicationEngineEntry { return e.GetPacketReplicationEngineEntry() }
	group := mcastEntity(5, replica(3, 1), portBytes(b(0, 0, 0, 4), 2), portBytes(b(0), 0), replica(7, 0))
	pre(group).GetMulticastGroupEntry().Metadata = b(0xca, 0xfe)
	session := cloneEntity(9, 5, portBytes(b(0, 2), 7), replica(1, 3))
	pre(session).GetCloneSessionEntry().PacketLengthBytes = 128

	// canonical is what a read must return: the write with port bytes
	// in their shortest form.
	canonical := func(e *p4v1.Entity) *p4v1.PacketReplicationEngineEntry {
		c := proto.Clone(pre(e)).(*p4v1.PacketReplicationEngineEntry)
		for _, r := range append(c.GetMulticastGroupEntry().GetReplicas(), c.GetCloneSessionEntry().GetReplicas()...) {
			if p, ok := r.GetPortKind().(*p4v1.Replica_Port); ok {
				for len(p.Port) > 1 && p.Port[0] == 0 {
					p.Port = p.Port[1:]
				}
			}
		}
		return c
	}
	check := func(when string, want ...*p4v1.Entity) {
		t.Helper()
		for _, q := range []*p4v1.Entity{mcastEntity(0), cloneEntity(0, 0)} {
			got, err := h.read(q)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			var exp []*p4v1.PacketReplicationEngineEntry
			for _, w := range want {
				if (pre(w).GetMulticastGroupEntry() != nil) == (pre(q).GetMulticastGroupEntry() != nil) {
					exp = append(exp, canonical(w))
				}
			}
			if len(got) != len(exp) {
				t.Fatalf("%s: read %d entries, want %d: %v", when, len(got), len(exp), got)
			}
			for i := range got {
				if !proto.Equal(pre(got[i]), exp[i]) {
					t.Errorf("%s: read\n %v\nwant\n %v", when, pre(got[i]), exp[i])
				}
			}
		}
	}
	h.mustWrite(update(p4v1.Update_INSERT, group), update(p4v1.Update_INSERT, session),
		update(p4v1.Update_INSERT, mcastEntity(6)))
	check("written", group, session, mcastEntity(6))

	modified := mcastEntity(5, portBytes(b(0, 9), 4))
	h.mustWrite(update(p4v1.Update_MODIFY, modified))
	check("modified", modified, session, mcastEntity(6))

	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
		t.Fatal(err)
	}
	check("reconciled", modified, session, mcastEntity(6))

	h.mustWrite(update(p4v1.Update_DELETE, mcastEntity(5)), update(p4v1.Update_DELETE, cloneEntity(9, 0)))
	check("deleted", mcastEntity(6))
	if _, err := h.read(mcastEntity(5)); codeOfReadError(t, err) != codes.NotFound {
		t.Errorf("reading a deleted group: %v, want NOT_FOUND", err)
	}
}
