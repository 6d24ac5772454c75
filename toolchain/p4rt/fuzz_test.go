package p4rt_test

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// FuzzWrite throws malformed WriteRequests (mutations of valid ones, as
// protobuf bytes) at a server running the real engine. The server must
// never panic — recovered panics are logged as BUG and fail the test — and
// must answer with a spec code: a request-wide code, or UNKNOWN with one
// p4.v1.Error per update.
func FuzzWrite(f *testing.F) {
	h := ready(f)
	fuzzWrites(f, h, writeSeeds(h.ids()))
}

// FuzzWriteProfiles does the same over action profile members and groups,
// entries of indirect tables and parser value sets.
func FuzzWriteProfiles(f *testing.F) {
	h := readyFor(f, profileProgram)
	fuzzWrites(f, h, profileSeeds(h.profileIDs()))
}

func fuzzWrites(f *testing.F, h *harness, seeds []*p4v1.Update) {
	for _, u := range seeds {
		req := &p4v1.WriteRequest{DeviceId: deviceID, ElectionId: h.primary, Updates: []*p4v1.Update{u}}
		data, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &p4v1.WriteRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		// Keep most requests addressed to the primary, so they reach the
		// per-update code paths instead of stopping at arbitration.
		if len(data)%8 != 0 {
			req.DeviceId, req.ElectionId = deviceID, h.primary
		}
		_, err := h.client.Write(h.ctx, req)
		for _, bug := range h.bugs.take() {
			t.Fatalf("server bug on %v: %s", req, bug)
		}
		checkWriteStatus(t, req, err)
	})
}

// checkWriteStatus fails t unless err is a status the spec allows for a
// bad WriteRequest: a request-wide code, or UNKNOWN with one p4.v1.Error
// per update, at least one of them failed, each with a per-update code.
func checkWriteStatus(t testing.TB, req *p4v1.WriteRequest, err error) {
	t.Helper()
	if err == nil {
		return
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unknown:
		if len(st.Details()) != len(req.GetUpdates()) {
			t.Fatalf("%d details for %d updates", len(st.Details()), len(req.GetUpdates()))
		}
		failed := 0
		for _, d := range st.Details() {
			pe, ok := d.(*p4v1.Error)
			if !ok {
				t.Fatalf("detail %T is not a p4.v1.Error", d)
			}
			switch c := codes.Code(pe.GetCanonicalCode()); c {
			case codes.OK:
			case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.OutOfRange,
				codes.PermissionDenied, codes.Unimplemented, codes.ResourceExhausted,
				codes.FailedPrecondition: // deleting a member or group in use (§9.2)
				failed++
			default:
				t.Fatalf("update code %v (%s) is not one the spec gives for a bad update", c, pe.GetMessage())
			}
		}
		if failed == 0 {
			t.Fatal("UNKNOWN without a failed update")
		}
	case codes.NotFound, codes.PermissionDenied, codes.Unimplemented, codes.FailedPrecondition:
	default:
		t.Fatalf("request-wide code %v: %v", st.Code(), err)
	}
}

// writeSeeds are valid updates of every entity kind, the starting points
// for malformed ones.
func writeSeeds(id ids) []*p4v1.Update {
	return []*p4v1.Update{
		insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...))),
		insert(entry(id.acl, 10, call(id.aclPermit), ternary(1, b(8, 0), b(0xff, 0xff)), optional(2, 3))),
		insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(0x0a, 0, 0, 0, 0, 0), 8))),
		insert(entry(id.typeRange, 1, call(id.markType, b(1)), rng(1, b(0x10), b(0x20)))),
		modify(&p4v1.TableEntry{TableId: id.l2, IsDefaultAction: true, Action: call(id.forward, b(9))}),
		update(p4v1.Update_MODIFY, counterEntity(id.portCounter, idx(3), &p4v1.CounterData{PacketCount: 9})),
		update(p4v1.Update_MODIFY, meterEntity(id.portMeter, idx(1), &p4v1.MeterConfig{Cir: 1, Cburst: 1, Pir: 2, Pburst: 2})),
		update(p4v1.Update_MODIFY, registerEntity(id.lastLength, idx(2), b(1, 2))),
		update(p4v1.Update_INSERT, mcastEntity(5, replica(1, 0), replica(2, 1))),
		update(p4v1.Update_INSERT, cloneEntity(3, 1, replica(255, 0))),
		update(p4v1.Update_INSERT, digestEntity(id.learn, &p4v1.DigestEntry_Config{MaxListSize: 4})),
		update(p4v1.Update_MODIFY, directCounterEntity(entry(id.acl, 10, nil, ternary(1, b(8, 0), b(0xff, 0xff)), optional(2, 3)), &p4v1.CounterData{PacketCount: 1})),
		update(p4v1.Update_MODIFY, directMeterEntity(entry(id.flows, 0, nil, exact(1, mac2...)), &p4v1.MeterConfig{Cir: 5, Pir: 5})),
		remove(entry(id.l2, 0, nil, exact(1, mac2...))),
	}
}

// profileSeeds are valid updates of the profile program: members, a group,
// entries naming them, a value set, one-shot action sets, and deletions in
// dependency order.
func profileSeeds(id profileIDs) []*p4v1.Update {
	ins := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_INSERT, e) }
	return []*p4v1.Update{
		ins(memberEntity(id.dstProfile, 1, call(id.forward, b(2)))),
		ins(memberEntity(id.srcSelector, 1, call(id.setSrc, srcMacA))),
		ins(memberEntity(id.srcSelector, 2, call(id.setTag, b(4)))),
		ins(groupEntity(id.srcSelector, 1, 4, gm(1, 1), gm(2, 1))),
		update(p4v1.Update_MODIFY, groupEntity(id.srcSelector, 1, 4, gm(2, 1))),
		insert(entry(id.byDst, 0, toMember(1), exact(1, mac2...))),
		insert(entry(id.bySrc, 0, toGroup(1), exact(1, 7))),
		modify(entry(id.bySrc, 0, toMember(2), exact(1, 7))),
		update(p4v1.Update_MODIFY, valueSetEntity(id.customTypes, fields(exact(1, 0x88, 0xb5)))),
		insert(entry(id.bySrc, 0, actionSet(call(id.setSrc, srcMacA), call(id.setTag, b(3))), exact(1, 9))),
		modify(entry(id.bySrc, 0, actionSet(call(id.setTag, b(4))), exact(1, 9))),
		remove(entry(id.bySrc, 0, nil, exact(1, 9))),
		remove(entry(id.bySrc, 0, nil, exact(1, 7))),
		update(p4v1.Update_DELETE, groupEntity(id.srcSelector, 1, 0)),
		update(p4v1.Update_DELETE, memberEntity(id.srcSelector, 2, nil)),
	}
}
