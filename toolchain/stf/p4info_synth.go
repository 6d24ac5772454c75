package stf

import (
	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/p4info"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// P4InfoFromModel builds a P4Info for a loaded program from its BMv2 JSON
// names, for programs whose corpus has no reference P4Info (the P4Runtime
// path needs one to push the pipeline). Names are the JSON's, which are
// p4c's P4Info names; ids and aliases come from p4info's allocation, so they
// are the ones p4c gives those names (@id annotations aside, which the JSON
// does not keep).
func P4InfoFromModel(pl *engine.Pipeline) *p4configv1.P4Info {
	info := &p4configv1.P4Info{PkgInfo: &p4configv1.PkgInfo{Arch: "v1model"}}
	ids := modelIDs(pl)
	pre := func(kind p4configv1.P4Ids_Prefix, name string) *p4configv1.Preamble {
		return &p4configv1.Preamble{Id: ids.ID(kind, name), Name: name, Alias: ids.Alias(name)}
	}
	tableID := func(name string) uint32 { return ids.ID(p4configv1.P4Ids_TABLE, name) }
	for _, c := range pl.Counters() {
		spec := &p4configv1.CounterSpec{Unit: p4configv1.CounterSpec_BOTH}
		if c.Direct {
			info.DirectCounters = append(info.DirectCounters, &p4configv1.DirectCounter{Preamble: pre(p4configv1.P4Ids_DIRECT_COUNTER, c.Name), Spec: spec, DirectTableId: tableID(c.Table)})
			continue
		}
		info.Counters = append(info.Counters, &p4configv1.Counter{Preamble: pre(p4configv1.P4Ids_COUNTER, c.Name), Spec: spec, Size: int64(c.Size)})
	}
	for _, m := range pl.Meters() {
		spec := &p4configv1.MeterSpec{Unit: p4configv1.MeterSpec_BYTES}
		if m.Unit == pipeline.MeterPackets {
			spec.Unit = p4configv1.MeterSpec_PACKETS
		}
		if m.Direct {
			info.DirectMeters = append(info.DirectMeters, &p4configv1.DirectMeter{Preamble: pre(p4configv1.P4Ids_DIRECT_METER, m.Name), Spec: spec, DirectTableId: tableID(m.Table)})
			continue
		}
		info.Meters = append(info.Meters, &p4configv1.Meter{Preamble: pre(p4configv1.P4Ids_METER, m.Name), Spec: spec, Size: int64(m.Size)})
	}
	described := map[string]bool{}
	for _, a := range pl.Actions() {
		// p4c may emit one action several times under one name (a copy per
		// call site); P4Info has it once, and a table's reference to any
		// copy is a reference to it.
		if described[a.Name] {
			continue
		}
		described[a.Name] = true
		act := &p4configv1.Action{Preamble: pre(p4configv1.P4Ids_ACTION, a.Name)}
		for i, p := range a.Params {
			act.Params = append(act.Params, &p4configv1.Action_Param{Id: uint32(i + 1), Name: p.Name, Bitwidth: int32(p.Bitwidth)})
		}
		info.Actions = append(info.Actions, act)
	}
	for _, ap := range pl.ActionProfiles() {
		prof := &p4configv1.ActionProfile{Preamble: pre(p4configv1.P4Ids_ACTION_PROFILE, ap.Name), WithSelector: ap.HasSelector, Size: int64(ap.MaxSize)}
		for _, t := range ap.TableIDs {
			if ti, err := pl.Table(t); err == nil {
				prof.TableIds = append(prof.TableIds, tableID(ti.Name))
			}
		}
		info.ActionProfiles = append(info.ActionProfiles, prof)
	}
	kinds := map[pipeline.MatchKind]p4configv1.MatchField_MatchType{
		pipeline.MatchExact:    p4configv1.MatchField_EXACT,
		pipeline.MatchLPM:      p4configv1.MatchField_LPM,
		pipeline.MatchTernary:  p4configv1.MatchField_TERNARY,
		pipeline.MatchRange:    p4configv1.MatchField_RANGE,
		pipeline.MatchOptional: p4configv1.MatchField_OPTIONAL,
		pipeline.MatchValid:    p4configv1.MatchField_EXACT,
	}
	for _, t := range pl.Tables() {
		if t.Hidden {
			continue
		}
		tbl := &p4configv1.Table{Preamble: pre(p4configv1.P4Ids_TABLE, t.Name), Size: int64(t.MaxSize), IsConstTable: t.Immutable}
		for i, k := range t.Keys {
			tbl.MatchFields = append(tbl.MatchFields, &p4configv1.MatchField{
				Id: uint32(i + 1), Name: k.Name, Bitwidth: int32(k.Bitwidth),
				Match: &p4configv1.MatchField_MatchType_{MatchType: kinds[k.Kind]},
			})
		}
		referenced := map[uint32]bool{}
		for _, aid := range t.ActionIDs {
			if id := actionID(pl, ids, aid); id != 0 && !referenced[id] {
				referenced[id] = true
				tbl.ActionRefs = append(tbl.ActionRefs, &p4configv1.ActionRef{Id: id})
			}
		}
		if id := ids.ID(p4configv1.P4Ids_DIRECT_COUNTER, t.DirectCounter); id != 0 {
			tbl.DirectResourceIds = append(tbl.DirectResourceIds, id)
		}
		if id := ids.ID(p4configv1.P4Ids_DIRECT_METER, t.DirectMeter); id != 0 {
			tbl.DirectResourceIds = append(tbl.DirectResourceIds, id)
		}
		tbl.ImplementationId = ids.ID(p4configv1.P4Ids_ACTION_PROFILE, t.ActionProfile)
		if t.ConstDefault {
			if a, ok, err := pl.DefaultAction(t.ID); err == nil && ok {
				tbl.ConstDefaultActionId = actionID(pl, ids, a.ActionID)
			}
		}
		info.Tables = append(info.Tables, tbl)
	}
	for _, r := range pl.Registers() {
		info.Registers = append(info.Registers, &p4configv1.Register{
			Preamble: pre(p4configv1.P4Ids_REGISTER, r.Name), Size: int32(r.Size),
			TypeSpec: &p4configv1.P4DataTypeSpec{TypeSpec: &p4configv1.P4DataTypeSpec_Bitstring{
				Bitstring: &p4configv1.P4BitstringLikeTypeSpec{TypeSpec: &p4configv1.P4BitstringLikeTypeSpec_Bit{Bit: &p4configv1.P4BitTypeSpec{Bitwidth: int32(r.Bitwidth)}}},
			}},
		})
	}
	for _, v := range pl.ValueSets() {
		vs := &p4configv1.ValueSet{Preamble: pre(p4configv1.P4Ids_VALUE_SET, v.Name), Size: int32(v.MaxSize)}
		vs.Match = append(vs.Match, &p4configv1.MatchField{Id: 1, Name: v.Name, Bitwidth: int32(v.Bitwidth),
			Match: &p4configv1.MatchField_MatchType_{MatchType: p4configv1.MatchField_TERNARY}})
		info.ValueSets = append(info.ValueSets, vs)
	}
	return info
}

// modelIDs allocates the ids of every object P4InfoFromModel describes.
func modelIDs(pl *engine.Pipeline) *p4info.IDs {
	ids := p4info.NewIDs()
	for _, c := range pl.Counters() {
		kind := p4configv1.P4Ids_COUNTER
		if c.Direct {
			kind = p4configv1.P4Ids_DIRECT_COUNTER
		}
		ids.Add(kind, c.Name)
	}
	for _, m := range pl.Meters() {
		kind := p4configv1.P4Ids_METER
		if m.Direct {
			kind = p4configv1.P4Ids_DIRECT_METER
		}
		ids.Add(kind, m.Name)
	}
	for _, a := range pl.Actions() {
		ids.Add(p4configv1.P4Ids_ACTION, a.Name)
	}
	for _, ap := range pl.ActionProfiles() {
		ids.Add(p4configv1.P4Ids_ACTION_PROFILE, ap.Name)
	}
	for _, t := range pl.Tables() {
		if !t.Hidden {
			ids.Add(p4configv1.P4Ids_TABLE, t.Name)
		}
	}
	for _, r := range pl.Registers() {
		ids.Add(p4configv1.P4Ids_REGISTER, r.Name)
	}
	for _, v := range pl.ValueSets() {
		ids.Add(p4configv1.P4Ids_VALUE_SET, v.Name)
	}
	// Without explicit ids (the JSON keeps none) the allocation cannot
	// fail: a name added twice is one object, and hashing moves past taken
	// ids.
	_ = ids.Assign()
	return ids
}

// actionID is the P4Info id of the action with JSON id aid.
func actionID(pl *engine.Pipeline, ids *p4info.IDs, aid int) uint32 {
	a, err := pl.Action(aid)
	if err != nil {
		return 0
	}
	return ids.ID(p4configv1.P4Ids_ACTION, a.Name)
}
