package p4rt_test

import (
	"bytes"
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var mac2 = b(0, 0, 0, 0, 0, 2)

// ids of the test program's objects.
type ids struct {
	l2, acl, flows, srcRewrite, typeRange, fixed                       uint32
	forward, toCPU, setMcast, drop, aclPermit, setSrc, markType, polic uint32
	portCounter, aclCounter, portMeter, flowMeter, lastLength, learn   uint32
}

func (h *harness) ids() ids {
	return ids{
		l2: h.tableID("TestIngress.l2"), acl: h.tableID("TestIngress.acl"), flows: h.tableID("TestIngress.flows"),
		srcRewrite: h.tableID("TestIngress.src_rewrite"), typeRange: h.tableID("TestIngress.type_range"),
		fixed:   h.tableID("TestIngress.fixed"),
		forward: h.actionID("TestIngress.forward"), toCPU: h.actionID("TestIngress.to_cpu"),
		setMcast: h.actionID("TestIngress.set_mcast"), drop: h.actionID("TestIngress.drop"),
		aclPermit: h.actionID("TestIngress.acl_permit"), setSrc: h.actionID("TestIngress.set_src"),
		markType: h.actionID("TestIngress.mark_type"), polic: h.actionID("TestIngress.policed_forward"),
		portCounter: h.objectID("counter", "port_counter"), aclCounter: h.objectID("direct_counter", "acl_counter"),
		portMeter: h.objectID("meter", "port_meter"), flowMeter: h.objectID("direct_meter", "flow_meter"),
		lastLength: h.objectID("register", "last_length"), learn: h.objectID("digest", "learn_t"),
	}
}

func TestCapabilities(t *testing.T) {
	h := newHarness(t)
	r, err := h.client.Capabilities(h.ctx, &p4v1.CapabilitiesRequest{})
	if err != nil || r.GetP4RuntimeApiVersion() != "1.4.1" {
		t.Fatalf("Capabilities = %v, %v", r, err)
	}
}

// TestWriteCodes is one table of (setup, update, expected code) over every
// entity kind: the per-update code must be exactly the spec's.
func TestWriteCodes(t *testing.T) {
	h0 := newHarness(t)
	h0.becomePrimary()
	if err := h0.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h0.config()); err != nil {
		t.Fatal(err)
	}
	id := h0.ids()
	fwd := func(port ...byte) *p4v1.TableAction { return call(id.forward, port) }
	l2 := func(a *p4v1.TableAction, m ...*p4v1.FieldMatch) *p4v1.TableEntry { return entry(id.l2, 0, a, m...) }
	acl := func(prio int32, m ...*p4v1.FieldMatch) *p4v1.TableEntry {
		return entry(id.acl, prio, call(id.aclPermit), m...)
	}
	withDefault := func(te *p4v1.TableEntry) *p4v1.TableEntry { te.IsDefaultAction = true; return te }
	modifyE := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_MODIFY, e) }
	insertE := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_INSERT, e) }
	deleteE := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_DELETE, e) }
	cfg := func(cir, cb, pir, pb int64) *p4v1.MeterConfig {
		return &p4v1.MeterConfig{Cir: cir, Cburst: cb, Pir: pir, Pburst: pb}
	}
	mutate := func(te *p4v1.TableEntry, f func(*p4v1.TableEntry)) *p4v1.TableEntry { f(te); return te }

	tests := []struct {
		name  string
		setup []*p4v1.Update
		u     *p4v1.Update
		code  codes.Code
	}{
		{"exact insert", nil, insert(l2(fwd(2), exact(1, mac2...))), codes.OK},
		{"exact insert padded value", nil, insert(l2(fwd(0, 2), exact(1, b(0, 0, 0, 0, 0, 0, 0, 2)...))), codes.OK},
		{"duplicate insert", []*p4v1.Update{insert(l2(fwd(2), exact(1, mac2...)))}, insert(l2(fwd(3), exact(1, mac2...))), codes.AlreadyExists},
		{"padded duplicate is the same entry", []*p4v1.Update{insert(l2(fwd(2), exact(1, mac2...)))}, insert(l2(fwd(3), exact(1, b(0, 0, 0, 2)...))), codes.AlreadyExists},
		{"value wider than the field", nil, insert(l2(fwd(2), exact(1, b(1, 0, 0, 0, 0, 0, 2)...))), codes.OutOfRange},
		{"empty value", nil, insert(l2(fwd(2), exact(1))), codes.OutOfRange},
		{"missing exact field", nil, insert(l2(fwd(2))), codes.InvalidArgument},
		{"unknown field id", nil, insert(l2(fwd(2), exact(1, mac2...), exact(9, 1))), codes.InvalidArgument},
		{"field given twice", nil, insert(l2(fwd(2), exact(1, mac2...), exact(1, mac2...))), codes.InvalidArgument},
		{"wrong match kind", nil, insert(l2(fwd(2), ternary(1, mac2, b(0xff)))), codes.InvalidArgument},
		{"priority on an exact table", nil, insert(entry(id.l2, 5, fwd(2), exact(1, mac2...))), codes.InvalidArgument},
		{"insert without action", nil, insert(l2(nil, exact(1, mac2...))), codes.InvalidArgument},
		{"action of another table", nil, insert(l2(call(id.setSrc, mac2), exact(1, mac2...))), codes.InvalidArgument},
		{"missing parameter", nil, insert(l2(call(id.forward), exact(1, mac2...))), codes.InvalidArgument},
		{"extra parameter", nil, insert(l2(call(id.forward, b(1), b(2)), exact(1, mac2...))), codes.InvalidArgument},
		{"parameter too wide", nil, insert(l2(fwd(2, 0), exact(1, mac2...))), codes.OutOfRange},
		{"action profile member on a direct table", nil, insert(l2(&p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: 1}}, exact(1, mac2...))), codes.InvalidArgument},
		{"table action with nothing set", nil, insert(l2(&p4v1.TableAction{}, exact(1, mac2...))), codes.InvalidArgument},
		{"modify missing", nil, modify(l2(fwd(2), exact(1, mac2...))), codes.NotFound},
		{"delete missing", nil, remove(l2(nil, exact(1, mac2...))), codes.NotFound},
		{"modify keeps key, changes action", []*p4v1.Update{insert(l2(fwd(2), exact(1, mac2...)))}, modify(l2(fwd(3), exact(1, mac2...))), codes.OK},
		{"delete ignores a bad action", []*p4v1.Update{insert(l2(fwd(2), exact(1, mac2...)))}, remove(l2(call(12345), exact(1, mac2...))), codes.OK},
		{"unknown table", nil, insert(entry(12345, 0, fwd(2), exact(1, mac2...))), codes.NotFound},
		{"table id 0", nil, insert(entry(0, 0, fwd(2), exact(1, mac2...))), codes.InvalidArgument},
		{"is_const in a write", nil, insert(mutate(l2(fwd(2), exact(1, mac2...)), func(te *p4v1.TableEntry) { te.IsConst = true })), codes.InvalidArgument},
		{"idle timeout not supported", nil, insert(mutate(l2(fwd(2), exact(1, mac2...)), func(te *p4v1.TableEntry) { te.IdleTimeoutNs = 1000 })), codes.InvalidArgument},
		{"counter_data without a direct counter", nil, insert(mutate(l2(fwd(2), exact(1, mac2...)), func(te *p4v1.TableEntry) { te.CounterData = &p4v1.CounterData{} })), codes.InvalidArgument},
		{"meter_config without a direct meter", nil, insert(mutate(acl(1, ternary(1, b(8, 0), b(0xff, 0xff))), func(te *p4v1.TableEntry) { te.MeterConfig = cfg(1, 1, 1, 1) })), codes.InvalidArgument},
		{"ternary needs a priority", nil, insert(acl(0, ternary(1, b(8, 0), b(0xff, 0xff)))), codes.InvalidArgument},
		{"ternary value outside mask", nil, insert(acl(1, ternary(1, b(8, 1), b(0xff, 0)))), codes.InvalidArgument},
		{"ternary zero mask", nil, insert(acl(1, ternary(1, b(0), b(0)))), codes.InvalidArgument},
		{"ternary and optional", nil, insert(acl(10, ternary(1, b(8, 0), b(0xff, 0xff)), optional(2, 3))), codes.OK},
		{"all don't care with priority", nil, insert(acl(3)), codes.OK},
		{"counter_data initial value", nil, insert(mutate(acl(4, optional(2, 1)), func(te *p4v1.TableEntry) { te.CounterData = &p4v1.CounterData{PacketCount: 5, ByteCount: 500} })), codes.OK},
		{"same key other priority is another entry", []*p4v1.Update{insert(acl(1, optional(2, 1)))}, insert(acl(2, optional(2, 1))), codes.OK},
		{"lpm ok", nil, insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(0x0a, 0, 0, 0, 0, 0), 8))), codes.OK},
		{"lpm bits past the prefix", nil, insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(0x0a, 0, 0, 0, 0, 1), 8))), codes.InvalidArgument},
		{"lpm prefix 0", nil, insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(0), 0))), codes.InvalidArgument},
		{"lpm prefix too long", nil, insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(1), 49))), codes.InvalidArgument},
		{"range ok", nil, insert(entry(id.typeRange, 1, call(id.markType, b(1)), rng(1, b(0x10), b(0x20)))), codes.OK},
		{"range low above high", nil, insert(entry(id.typeRange, 1, call(id.markType, b(1)), rng(1, b(0x20), b(0x10)))), codes.InvalidArgument},
		{"range covering everything", nil, insert(entry(id.typeRange, 1, call(id.markType, b(1)), rng(1, b(0), b(0xff, 0xff)))), codes.InvalidArgument},
		{"default entry modify", nil, modify(withDefault(entry(id.l2, 0, fwd(4)))), codes.OK},
		{"default entry reset", nil, modify(withDefault(entry(id.l2, 0, nil))), codes.OK},
		{"default entry insert", nil, insert(withDefault(entry(id.l2, 0, fwd(4)))), codes.InvalidArgument},
		{"default entry delete", nil, remove(withDefault(entry(id.l2, 0, nil))), codes.InvalidArgument},
		{"default entry with a match", nil, modify(withDefault(entry(id.l2, 0, fwd(4), exact(1, mac2...)))), codes.InvalidArgument},
		{"const default action", nil, modify(withDefault(entry(id.fixed, 0, call(id.markType, b(1))))), codes.PermissionDenied},
		{"insert into a const table", nil, insert(entry(id.fixed, 0, call(id.markType, b(1)), exact(1, 0x86, 0xdd))), codes.PermissionDenied},
		{"delete a const entry", nil, remove(entry(id.fixed, 0, nil, exact(1, 0x08, 0x00))), codes.PermissionDenied},
		{"modify a const entry's action", nil, modify(entry(id.fixed, 0, call(id.markType, b(1)), exact(1, 0x08, 0x00))), codes.PermissionDenied},
		{"no update type", nil, update(p4v1.Update_UNSPECIFIED, tableEntity(l2(fwd(2), exact(1, mac2...)))), codes.InvalidArgument},
		{"empty entity", nil, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{}}, codes.InvalidArgument},
		{"counter modify", nil, modifyE(counterEntity(id.portCounter, idx(3), &p4v1.CounterData{PacketCount: 9})), codes.OK},
		{"counter modify all cells", nil, modifyE(counterEntity(id.portCounter, nil, &p4v1.CounterData{})), codes.OK},
		{"counter insert", nil, insertE(counterEntity(id.portCounter, idx(3), &p4v1.CounterData{})), codes.InvalidArgument},
		{"counter negative index", nil, modifyE(counterEntity(id.portCounter, idx(-1), &p4v1.CounterData{})), codes.InvalidArgument},
		{"counter index past the end", nil, modifyE(counterEntity(id.portCounter, idx(16), &p4v1.CounterData{})), codes.OutOfRange},
		{"counter id 0", nil, modifyE(counterEntity(0, idx(1), &p4v1.CounterData{})), codes.InvalidArgument},
		{"unknown counter", nil, modifyE(counterEntity(1, idx(1), &p4v1.CounterData{})), codes.NotFound},
		{"meter config", nil, modifyE(meterEntity(id.portMeter, idx(1), cfg(10, 5, 20, 10))), codes.OK},
		{"meter reset", nil, modifyE(meterEntity(id.portMeter, idx(1), nil)), codes.OK},
		{"meter cir above pir", nil, modifyE(meterEntity(id.portMeter, idx(1), cfg(20, 5, 10, 5))), codes.InvalidArgument},
		{"meter eburst on a two-rate meter", nil, modifyE(meterEntity(id.portMeter, idx(1), &p4v1.MeterConfig{Cir: 1, Pir: 1, Eburst: 3})), codes.InvalidArgument},
		{"meter negative rate", nil, modifyE(meterEntity(id.portMeter, idx(1), cfg(-1, 1, 1, 1))), codes.InvalidArgument},
		{"meter delete", nil, deleteE(meterEntity(id.portMeter, idx(1), nil)), codes.InvalidArgument},
		{"register write", nil, modifyE(registerEntity(id.lastLength, idx(2), b(0, 0, 1, 0))), codes.OK},
		{"register value too wide", nil, modifyE(registerEntity(id.lastLength, idx(2), b(1, 0, 0, 0, 0))), codes.InvalidArgument},
		{"register without data", nil, modifyE(registerEntity(id.lastLength, idx(2), nil)), codes.InvalidArgument},
		{"multicast group", nil, insertE(mcastEntity(5, replica(1, 0), replica(2, 0))), codes.OK},
		{"multicast group again", []*p4v1.Update{insertE(mcastEntity(5, replica(1, 0)))}, insertE(mcastEntity(5, replica(2, 0))), codes.AlreadyExists},
		{"multicast modify missing", nil, modifyE(mcastEntity(5, replica(1, 0))), codes.NotFound},
		{"multicast delete missing", nil, deleteE(mcastEntity(5)), codes.NotFound},
		{"multicast group 0", nil, insertE(mcastEntity(0, replica(1, 0))), codes.InvalidArgument},
		{"multicast duplicate replica", nil, insertE(mcastEntity(5, replica(1, 0), replica(1, 0))), codes.InvalidArgument},
		{"multicast port past 9 bits", nil, insertE(mcastEntity(5, replica(512, 0))), codes.InvalidArgument},
		{"clone session", nil, insertE(cloneEntity(3, 0, replica(255, 0))), codes.OK},
		{"clone class of service too large", nil, insertE(cloneEntity(3, 8, replica(2, 0))), codes.InvalidArgument},
		{"clone session 0", nil, insertE(cloneEntity(0, 0, replica(2, 0))), codes.InvalidArgument},
		{"digest enable", nil, insertE(digestEntity(id.learn, &p4v1.DigestEntry_Config{MaxListSize: 1})), codes.OK},
		{"digest without config", nil, insertE(digestEntity(id.learn, nil)), codes.InvalidArgument},
		{"digest modify before enable", nil, modifyE(digestEntity(id.learn, &p4v1.DigestEntry_Config{})), codes.NotFound},
		{"unknown digest", nil, insertE(digestEntity(99, &p4v1.DigestEntry_Config{})), codes.NotFound},
		{"direct counter insert", nil, insertE(directCounterEntity(acl(1, optional(2, 1)), &p4v1.CounterData{})), codes.InvalidArgument},
		{"direct counter of a missing entry", nil, modifyE(directCounterEntity(acl(1, optional(2, 1)), &p4v1.CounterData{})), codes.NotFound},
		{"direct counter on a table without one", nil, modifyE(directCounterEntity(l2(nil, exact(1, mac2...)), &p4v1.CounterData{})), codes.InvalidArgument},
		{"direct counter set", []*p4v1.Update{insert(acl(1, optional(2, 1)))}, modifyE(directCounterEntity(acl(1, optional(2, 1)), &p4v1.CounterData{PacketCount: 3})), codes.OK},
		{"direct meter set", []*p4v1.Update{insert(entry(id.flows, 0, call(id.polic, b(2)), exact(1, mac2...)))}, modifyE(directMeterEntity(entry(id.flows, 0, nil, exact(1, mac2...)), cfg(100, 10, 200, 20))), codes.OK},
		{"value set entries take MODIFY only", nil, insertE(&p4v1.Entity{Entity: &p4v1.Entity_ValueSetEntry{ValueSetEntry: &p4v1.ValueSetEntry{}}}), codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := ready(t)
			if len(tc.setup) > 0 {
				h.mustWrite(tc.setup...)
			}
			cs, err := h.write(tc.u)
			if err != nil {
				t.Fatalf("write failed as a whole: %v", err)
			}
			if cs[0] != tc.code {
				t.Fatalf("code %v, want %v", cs[0], tc.code)
			}
		})
	}
}

// A batch with failures: UNKNOWN at the top, one p4.v1.Error per update,
// in order, and the good updates applied (CONTINUE_ON_ERROR).
func TestWriteBatchErrors(t *testing.T) {
	h := ready(t)
	id := h.ids()
	good := insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...)))
	bad := insert(entry(id.l2, 0, call(id.forward, b(2))))
	good2 := insert(entry(id.l2, 0, call(id.forward, b(3)), exact(1, 0, 0, 0, 0, 0, 3)))
	cs, err := h.write(good, bad, good2, good)
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.InvalidArgument, codes.OK, codes.AlreadyExists}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("update %d: %v, want %v", i, cs[i], want[i])
		}
	}
	got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2}))
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d entries (%v), want the 2 good ones", len(got), err)
	}
	if _, err := h.client.Write(h.ctx, &p4v1.WriteRequest{DeviceId: deviceID, ElectionId: h.primary,
		Atomicity: p4v1.WriteRequest_ROLLBACK_ON_ERROR, Updates: []*p4v1.Update{good}}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ROLLBACK_ON_ERROR: %v, want UNIMPLEMENTED", err)
	}
}

func TestWritePreconditions(t *testing.T) {
	h := newHarness(t)
	u := &p4v1.WriteRequest{DeviceId: deviceID, ElectionId: &p4v1.Uint128{High: 1}}
	if _, err := h.client.Write(h.ctx, u); status.Code(err) != codes.PermissionDenied {
		t.Errorf("write with no stream: %v, want PERMISSION_DENIED", err)
	}
	h.becomePrimary()
	if _, err := h.client.Write(h.ctx, u); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("write before a pipeline: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := h.read(tableEntity(&p4v1.TableEntry{})); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("read before a pipeline: %v, want FAILED_PRECONDITION", err)
	}
	u.DeviceId = 99
	if _, err := h.client.Write(h.ctx, u); status.Code(err) != codes.NotFound {
		t.Errorf("write to another device: %v, want NOT_FOUND", err)
	}
	u.DeviceId, u.Role = deviceID, "nosuchrole"
	if _, err := h.client.Write(h.ctx, u); status.Code(err) != codes.NotFound {
		t.Errorf("write for an unknown role: %v, want NOT_FOUND", err)
	}
	u.Role, u.ElectionId = "", &p4v1.Uint128{High: 0, Low: 5}
	if _, err := h.client.Write(h.ctx, u); status.Code(err) != codes.PermissionDenied {
		t.Errorf("write with a stale election id: %v, want PERMISSION_DENIED", err)
	}
}

// Reads return what was written, canonically, with wildcards per §9.1.5.
func TestReadBack(t *testing.T) {
	h := ready(t)
	id := h.ids()
	e1 := entry(id.l2, 0, call(id.forward, b(0, 2)), exact(1, b(0, 0, 0, 0, 0, 0, 0, 2)...))
	e1.ControllerMetadata, e1.Metadata = 77, []byte("cookie")
	e2 := entry(id.acl, 10, call(id.aclPermit), ternary(1, b(8, 0), b(0xff, 0xff)))
	h.mustWrite(insert(e1), insert(e2),
		update(p4v1.Update_MODIFY, meterEntity(id.portMeter, idx(4), &p4v1.MeterConfig{Cir: 10, Cburst: 2, Pir: 20, Pburst: 4})),
		update(p4v1.Update_MODIFY, registerEntity(id.lastLength, idx(5), b(0, 0, 0x12, 0x34))),
		update(p4v1.Update_INSERT, mcastEntity(9, replica(3, 1), replica(2, 0))),
		update(p4v1.Update_INSERT, cloneEntity(4, 2, replica(255, 0))),
		update(p4v1.Update_MODIFY, tableEntity(&p4v1.TableEntry{TableId: id.l2, IsDefaultAction: true, Action: call(id.forward, b(9))})),
	)

	got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2}))
	if err != nil || len(got) != 1 {
		t.Fatalf("l2 read: %v, %v", got, err)
	}
	want := entry(id.l2, 0, call(id.forward, b(2)), exact(1, 2)) // shortest strings (§8.4)
	want.ControllerMetadata, want.Metadata = 77, []byte("cookie")
	if !proto.Equal(got[0].GetTableEntry(), want) {
		t.Errorf("l2 entry read back as\n%v\nwant canonical\n%v", got[0].GetTableEntry(), want)
	}

	all, err := h.read(tableEntity(&p4v1.TableEntry{}))
	if err != nil {
		t.Fatal(err)
	}
	var sawConst bool
	for _, e := range all {
		te := e.GetTableEntry()
		if te.GetTableId() == id.fixed {
			sawConst = te.GetIsConst() && bytes.Equal(te.GetMatch()[0].GetExact().GetValue(), b(8, 0))
		}
	}
	if len(all) != 3 || !sawConst {
		t.Errorf("wildcard read over all tables: %d entries (const entry seen: %v), want 3", len(all), sawConst)
	}

	def, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2, IsDefaultAction: true}))
	if err != nil || len(def) != 1 || def[0].GetTableEntry().GetAction().GetAction().GetActionId() != id.forward {
		t.Errorf("default entry read: %v %v", def, err)
	}
	initial, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.acl, IsDefaultAction: true}))
	if err != nil || len(initial) != 1 || initial[0].GetTableEntry().GetAction().GetAction().GetActionId() != id.aclPermit {
		t.Errorf("initial default entry read: %v %v", initial, err)
	}

	one, err := h.read(tableEntity(entry(id.acl, 10, nil, ternary(1, b(8, 0), b(0xff, 0xff)))))
	if err != nil || len(one) != 1 {
		t.Errorf("read by key: %v %v", one, err)
	}
	none, err := h.read(tableEntity(entry(id.acl, 11, nil, ternary(1, b(8, 0), b(0xff, 0xff)))))
	if err != nil || len(none) != 0 {
		t.Errorf("read by key with another priority: %v %v", none, err)
	}
	withCounter, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.acl, CounterData: &p4v1.CounterData{}}))
	if err != nil || len(withCounter) != 1 || withCounter[0].GetTableEntry().GetCounterData() == nil {
		t.Errorf("read with counter_data: %v %v", withCounter, err)
	}
	if withoutCounter, _ := h.read(tableEntity(&p4v1.TableEntry{TableId: id.acl})); len(withoutCounter) != 1 || withoutCounter[0].GetTableEntry().GetCounterData() != nil {
		t.Errorf("counter_data returned although not asked for: %v", withoutCounter)
	}

	counters, err := h.read(counterEntity(id.portCounter, nil, nil))
	if err != nil || len(counters) != 16 {
		t.Errorf("counter wildcard read: %d cells, %v", len(counters), err)
	}
	meters, err := h.read(meterEntity(id.portMeter, idx(4), nil))
	if err != nil || len(meters) != 1 || meters[0].GetMeterEntry().GetConfig().GetPir() != 20 {
		t.Errorf("meter read: %v %v", meters, err)
	}
	unset, err := h.read(meterEntity(id.portMeter, idx(3), nil))
	if err != nil || len(unset) != 1 || unset[0].GetMeterEntry().GetConfig() != nil {
		t.Errorf("unconfigured meter read: %v %v", unset, err)
	}
	regs, err := h.read(registerEntity(id.lastLength, idx(5), nil))
	if err != nil || len(regs) != 1 || !bytes.Equal(regs[0].GetRegisterEntry().GetData().GetBitstring(), b(0x12, 0x34)) {
		t.Errorf("register read: %v %v", regs, err)
	}
	groups, err := h.read(mcastEntity(0))
	if err != nil || len(groups) != 1 || len(groups[0].GetPacketReplicationEngineEntry().GetMulticastGroupEntry().GetReplicas()) != 2 {
		t.Errorf("multicast read: %v %v", groups, err)
	}
	sessions, err := h.read(cloneEntity(0, 0))
	if err != nil || len(sessions) != 1 || sessions[0].GetPacketReplicationEngineEntry().GetCloneSessionEntry().GetClassOfService() != 2 {
		t.Errorf("clone session read: %v %v", sessions, err)
	}

	// A batch with a bad request: UNKNOWN, details in order, good results kept.
	_, err = h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2}), tableEntity(&p4v1.TableEntry{TableId: 12345}), &p4v1.Entity{})
	st := status.Convert(err)
	if st.Code() != codes.Unknown || len(st.Details()) != 3 {
		t.Fatalf("bad read batch: %v", err)
	}
	wantCodes := []codes.Code{codes.OK, codes.NotFound, codes.InvalidArgument}
	for i, d := range st.Details() {
		if c := codes.Code(d.(*p4v1.Error).GetCanonicalCode()); c != wantCodes[i] {
			t.Errorf("read detail %d: %v, want %v", i, c, wantCodes[i])
		}
	}
}

// Pipeline config actions (§14, §15).
func TestPipelineConfig(t *testing.T) {
	h := newHarness(t)
	h.becomePrimary()
	get := func(rt p4v1.GetForwardingPipelineConfigRequest_ResponseType) *p4v1.ForwardingPipelineConfig {
		t.Helper()
		r, err := h.client.GetForwardingPipelineConfig(h.ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: deviceID, ResponseType: rt})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetConfig()
	}
	if get(p4v1.GetForwardingPipelineConfigRequest_ALL) != nil {
		t.Error("a config before any was set")
	}
	A := p4v1.SetForwardingPipelineConfigRequest_VERIFY
	codeOf := func(err error) codes.Code { return status.Code(err) }
	if c := codeOf(h.setPipeline(A, &p4v1.ForwardingPipelineConfig{P4Info: h.prog.info, P4DeviceConfig: []byte("{broken")})); c != codes.InvalidArgument {
		t.Errorf("VERIFY of broken JSON: %v", c)
	}
	if c := codeOf(h.setPipeline(A, nil)); c != codes.InvalidArgument {
		t.Errorf("VERIFY without config: %v", c)
	}
	if c := codeOf(h.setPipeline(A, h.config())); c != codes.OK {
		t.Errorf("VERIFY: %v", c)
	}
	if get(p4v1.GetForwardingPipelineConfigRequest_ALL) != nil {
		t.Error("VERIFY installed the config")
	}
	if c := codeOf(h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil)); c != codes.NotFound {
		t.Errorf("COMMIT with nothing saved: %v", c)
	}
	if c := codeOf(h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, h.config())); c != codes.OK {
		t.Fatalf("VERIFY_AND_SAVE: %v", c)
	}
	id := h.ids()
	e := entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...))
	h.mustWrite(insert(e)) // goes to the saved pipeline
	if c := codeOf(h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_COMMIT, h.config())); c != codes.InvalidArgument {
		t.Errorf("COMMIT with a config: %v", c)
	}
	if c := codeOf(h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil)); c != codes.OK {
		t.Fatalf("COMMIT: %v", c)
	}
	if got, _ := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2})); len(got) != 1 {
		t.Errorf("the write between SAVE and COMMIT is lost: %v", got)
	}
	all := get(p4v1.GetForwardingPipelineConfigRequest_ALL)
	if all.GetCookie().GetCookie() != 42 || !proto.Equal(all.GetP4Info(), h.prog.info) || !bytes.Equal(all.GetP4DeviceConfig(), h.prog.json) {
		t.Error("ALL does not return the config as set")
	}
	if c := get(p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY); c.GetP4Info() != nil || c.GetP4DeviceConfig() != nil || c.GetCookie().GetCookie() != 42 {
		t.Error("COOKIE_ONLY")
	}
	if c := get(p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE); c.GetP4Info() == nil || c.GetP4DeviceConfig() != nil {
		t.Error("P4INFO_AND_COOKIE")
	}
	if c := get(p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE); c.GetP4Info() != nil || c.GetP4DeviceConfig() == nil {
		t.Error("DEVICE_CONFIG_AND_COOKIE")
	}

	// RECONCILE_AND_COMMIT keeps entries, groups, meters; VERIFY_AND_COMMIT clears.
	h.mustWrite(update(p4v1.Update_INSERT, mcastEntity(3, replica(1, 0))),
		update(p4v1.Update_MODIFY, meterEntity(id.portMeter, idx(2), &p4v1.MeterConfig{Cir: 1, Cburst: 1, Pir: 2, Pburst: 2})))
	if c := codeOf(h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config())); c != codes.OK {
		t.Fatalf("RECONCILE_AND_COMMIT: %v", c)
	}
	if got, _ := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2})); len(got) != 1 {
		t.Errorf("RECONCILE_AND_COMMIT lost the entry: %v", got)
	}
	if got, _ := h.read(mcastEntity(3)); len(got) != 1 {
		t.Errorf("RECONCILE_AND_COMMIT lost the multicast group: %v", got)
	}
	if got, _ := h.read(meterEntity(id.portMeter, idx(2), nil)); len(got) != 1 || got[0].GetMeterEntry().GetConfig().GetPir() != 2 {
		t.Errorf("RECONCILE_AND_COMMIT lost the meter config: %v", got)
	}
	if cs, _ := h.write(insert(e)); cs[0] != codes.AlreadyExists {
		t.Errorf("the reconciled entry is not in the new pipeline: insert gave %v", cs[0])
	}
	if c := codeOf(h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config())); c != codes.OK {
		t.Fatal(c)
	}
	if got, _ := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2})); len(got) != 0 {
		t.Errorf("VERIFY_AND_COMMIT kept entries: %v", got)
	}
}

// TestPipelineConfigRefusesP4Info: a P4Info that does not describe the
// device config is INVALID_ARGUMENT (spec §14), with a message naming what
// differs. One row per check the schema makes, so its steps can move
// without a refusal changing.
func TestPipelineConfigRefusesP4Info(t *testing.T) {
	h := newHarness(t)
	h.becomePrimary()
	table := func(info *p4configv1.P4Info, name string) *p4configv1.Table { return named(t, info.GetTables(), name) }
	action := func(info *p4configv1.P4Info, name string) *p4configv1.Action {
		return named(t, info.GetActions(), name)
	}
	cases := []struct {
		name   string
		change func(info *p4configv1.P4Info)
		want   string
	}{
		{"id 0", func(i *p4configv1.P4Info) { table(i, "TestIngress.l2").Preamble.Id = 0 },
			`P4Info object "TestIngress.l2" has id 0`},
		{"id twice", func(i *p4configv1.P4Info) {
			i.Counters[0].Preamble.Id = table(i, "TestIngress.l2").GetPreamble().GetId()
		}, `used by both "TestIngress.l2" and "TestIngress.port_counter"`},
		{"parameter width", func(i *p4configv1.P4Info) { action(i, "TestIngress.forward").Params[0].Bitwidth = 7 },
			`action "TestIngress.forward" parameter "port" is 7 bits in P4Info`},
		{"parameter without width", func(i *p4configv1.P4Info) { action(i, "TestIngress.forward").Params[0].Bitwidth = 0 },
			`action "TestIngress.forward" parameter "port" has no bitwidth`},
		{"match fields", func(i *p4configv1.P4Info) {
			l2 := table(i, "TestIngress.l2")
			l2.MatchFields = append(l2.MatchFields, &p4configv1.MatchField{Id: 9, Name: "x", Bitwidth: 8,
				Match: &p4configv1.MatchField_MatchType_{MatchType: p4configv1.MatchField_EXACT}})
		}, `table "TestIngress.l2" has 2 match fields in P4Info, 1 in the device config`},
		{"match field id", func(i *p4configv1.P4Info) { table(i, "TestIngress.l2").MatchFields[0].Id = 0 },
			`table "TestIngress.l2" has a duplicate or zero match field id 0`},
		{"unknown action", func(i *p4configv1.P4Info) { table(i, "TestIngress.l2").ActionRefs[0].Id = 0x01abcdef },
			`table "TestIngress.l2" refers to unknown action id 0x1abcdef`},
		{"unknown direct resource", func(i *p4configv1.P4Info) {
			l2 := table(i, "TestIngress.l2")
			l2.DirectResourceIds = append(l2.DirectResourceIds, 0x01abcdef)
		}, `table "TestIngress.l2" has unknown direct resource 0x1abcdef`},
		{"direct counter of no table", func(i *p4configv1.P4Info) { table(i, "TestIngress.acl").DirectResourceIds = nil },
			`is attached to no table`},
		{"counter", func(i *p4configv1.P4Info) { i.Counters[0].Preamble.Name = "TestIngress.nope" },
			`P4Info counter "TestIngress.nope" is not in the device config`},
		{"meter", func(i *p4configv1.P4Info) { i.Meters[0].Preamble.Name = "TestIngress.nope" },
			`P4Info meter "TestIngress.nope" is not in the device config`},
		{"register", func(i *p4configv1.P4Info) { i.Registers[0].Preamble.Name = "TestIngress.nope" },
			`P4Info register "TestIngress.nope" is not in the device config`},
		{"controller header", func(i *p4configv1.P4Info) { i.ControllerPacketMetadata[0].Metadata[0].Bitwidth = 0 },
			`controller header "packet_in" field "ingress_port" has no bitwidth`},
		{"another program", func(i *p4configv1.P4Info) {
			for _, x := range i.Tables {
				x.Preamble.Name += "_elsewhere"
			}
			for _, x := range i.Actions {
				x.Preamble.Name += "_elsewhere"
			}
			i.Counters, i.Meters, i.Registers, i.DirectCounters, i.DirectMeters = nil, nil, nil, nil, nil
			for _, x := range i.Tables {
				x.DirectResourceIds = nil
			}
		}, `none of the P4Info tables and actions is in the device config`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.config()
			cfg.P4Info = proto.Clone(cfg.P4Info).(*p4configv1.P4Info)
			tc.change(cfg.P4Info)
			err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY, cfg)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want INVALID_ARGUMENT containing %q", err, tc.want)
			}
		})
	}
}

// named is the P4Info object of that name among xs.
func named[T interface{ GetPreamble() *p4configv1.Preamble }](t *testing.T, xs []T, name string) T {
	t.Helper()
	for _, x := range xs {
		if x.GetPreamble().GetName() == name {
			return x
		}
	}
	t.Fatalf("no P4Info object %s", name)
	var none T
	return none
}

// Several clients: only the primary writes; backups are told who is.
func TestArbitrationOverStreams(t *testing.T) {
	h := newHarness(t)
	s1, a1 := h.open(&p4v1.Uint128{Low: 1}, "")
	if codes.Code(a1.GetStatus().GetCode()) != codes.OK {
		t.Fatalf("first client: %v", a1)
	}
	_, a2 := h.open(&p4v1.Uint128{Low: 2}, "")
	if codes.Code(a2.GetStatus().GetCode()) != codes.OK {
		t.Fatalf("higher id did not become primary: %v", a2)
	}
	if n := s1.nextArbitration(t); codes.Code(n.GetStatus().GetCode()) != codes.AlreadyExists || n.GetElectionId().GetLow() != 2 {
		t.Fatalf("old primary was told %v", n)
	}
	h.primary = &p4v1.Uint128{Low: 1}
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); status.Code(err) != codes.PermissionDenied {
		t.Errorf("backup set the pipeline: %v", err)
	}
	h.primary = &p4v1.Uint128{Low: 2}
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		t.Fatal(err)
	}
	s3, a3 := h.open(&p4v1.Uint128{Low: 2}, "")
	if a3 != nil {
		t.Errorf("duplicate election id was accepted: %v", a3)
	}
	_ = s3
	bad, _ := h.client.StreamChannel(h.ctx)
	_ = bad.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 99, ElectionId: &p4v1.Uint128{Low: 9}}}})
	if _, err := bad.Recv(); status.Code(err) != codes.NotFound {
		t.Errorf("arbitration for an unknown device: %v, want NOT_FOUND", err)
	}
}

// RECONCILE_AND_COMMIT keeps what the new program can hold and drops the
// rest: here the new P4Info no longer has src_rewrite.
func TestReconcileDropsWhatTheNewProgramLacks(t *testing.T) {
	h := ready(t)
	id := h.ids()
	h.mustWrite(
		insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...))),
		insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(0x0a, 0, 0, 0, 0, 0), 8))),
		update(p4v1.Update_MODIFY, tableEntity(&p4v1.TableEntry{TableId: id.typeRange, IsDefaultAction: true, Action: call(id.markType, b(7))})),
	)
	next := proto.Clone(h.prog.info).(*p4configv1.P4Info)
	var kept []*p4configv1.Table
	for _, tb := range next.GetTables() {
		if tb.GetPreamble().GetId() != id.srcRewrite {
			kept = append(kept, tb)
		}
	}
	next.Tables = kept
	cfg := &p4v1.ForwardingPipelineConfig{P4Info: next, P4DeviceConfig: h.prog.json}
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, cfg); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2})); len(got) != 1 {
		t.Errorf("l2 entry not kept: %v", got)
	}
	if _, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.srcRewrite})); status.Code(err) != codes.Unknown {
		t.Errorf("reading a table the new P4Info lacks: %v, want a NOT_FOUND detail", err)
	}
	def, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.typeRange, IsDefaultAction: true}))
	if err != nil || len(def) != 1 || def[0].GetTableEntry().GetAction().GetAction().GetActionId() != id.markType {
		t.Errorf("client default action not kept: %v %v", def, err)
	}
	// The engine has the entry too: a packet to 00:..:02 leaves on port 2.
	if err := h.target.Send(1, ethFrame(mac2, 64)); err != nil {
		t.Fatal(err)
	}
	if got := h.target.Received(2); len(got) != 1 {
		t.Errorf("after reconcile, %d frames out of port 2, want 1", len(got))
	}
}
