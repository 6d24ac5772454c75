package p4rt_test

import (
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// Small builders for P4Runtime messages used across the tests.

func exact(id uint32, v ...byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}}
}

func ternary(id uint32, v, m []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: v, Mask: m}}}
}

func lpm(id uint32, v []byte, plen int32) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v, PrefixLen: plen}}}
}

func rng(id uint32, lo, hi []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: lo, High: hi}}}
}

func optional(id uint32, v ...byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: v}}}
}

// call is an action with parameters numbered 1..n.
func call(id uint32, params ...[]byte) *p4v1.TableAction {
	a := &p4v1.Action{ActionId: id}
	for i, p := range params {
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: uint32(i + 1), Value: p})
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
}

func b(v ...byte) []byte { return v }

func entry(table uint32, prio int32, a *p4v1.TableAction, m ...*p4v1.FieldMatch) *p4v1.TableEntry {
	return &p4v1.TableEntry{TableId: table, Priority: prio, Action: a, Match: m}
}

func tableEntity(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

func update(t p4v1.Update_Type, e *p4v1.Entity) *p4v1.Update {
	return &p4v1.Update{Type: t, Entity: e}
}

func insert(te *p4v1.TableEntry) *p4v1.Update { return update(p4v1.Update_INSERT, tableEntity(te)) }
func modify(te *p4v1.TableEntry) *p4v1.Update { return update(p4v1.Update_MODIFY, tableEntity(te)) }
func remove(te *p4v1.TableEntry) *p4v1.Update { return update(p4v1.Update_DELETE, tableEntity(te)) }

func counterEntity(id uint32, index *p4v1.Index, d *p4v1.CounterData) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: id, Index: index, Data: d}}}
}

func meterEntity(id uint32, index *p4v1.Index, c *p4v1.MeterConfig) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_MeterEntry{MeterEntry: &p4v1.MeterEntry{MeterId: id, Index: index, Config: c}}}
}

func registerEntity(id uint32, index *p4v1.Index, v []byte) *p4v1.Entity {
	r := &p4v1.RegisterEntry{RegisterId: id, Index: index}
	if v != nil {
		r.Data = &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: v}}
	}
	return &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: r}}
}

func idx(i int64) *p4v1.Index { return &p4v1.Index{Index: i} }

func replica(port uint32, instance uint32) *p4v1.Replica {
	return &p4v1.Replica{PortKind: &p4v1.Replica_EgressPort{EgressPort: port}, Instance: instance}
}

func mcastEntity(id uint32, rs ...*p4v1.Replica) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{MulticastGroupId: id, Replicas: rs}}}}}
}

func cloneEntity(id uint32, cos uint32, rs ...*p4v1.Replica) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4v1.CloneSessionEntry{SessionId: id, ClassOfService: cos, Replicas: rs}}}}}
}

func digestEntity(id uint32, cfg *p4v1.DigestEntry_Config) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: id, Config: cfg}}}
}

func directCounterEntity(te *p4v1.TableEntry, d *p4v1.CounterData) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: te, Data: d}}}
}

func directMeterEntity(te *p4v1.TableEntry, c *p4v1.MeterConfig) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_DirectMeterEntry{DirectMeterEntry: &p4v1.DirectMeterEntry{TableEntry: te, Config: c}}}
}
