package stf

import (
	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// P4Info id prefixes (P4Runtime spec §6.3, p4info.proto P4Ids).
const (
	idAction        = 0x01
	idTable         = 0x02
	idValueSet      = 0x03
	idActionProfile = 0x11
	idCounter       = 0x12
	idDirectCounter = 0x13
	idMeter         = 0x15
	idDirectMeter   = 0x14
	idRegister      = 0x16
	idDigest        = 0x18
)

func p4id(prefix, jsonID int) uint32 { return uint32(prefix)<<24 | uint32(jsonID+1)&0xffffff }

// P4InfoFromModel builds a P4Info for a loaded program from its BMv2 JSON
// names, for programs whose corpus has no reference P4Info (the P4Runtime
// path needs one to push the pipeline). Names are the JSON's, which are
// p4c's P4Info names; ids are made from the JSON ids with the P4Runtime
// prefixes, so they are unique but not p4c's.
func P4InfoFromModel(pl *engine.Pipeline) *p4configv1.P4Info {
	info := &p4configv1.P4Info{PkgInfo: &p4configv1.PkgInfo{Arch: "v1model"}}
	pre := func(prefix, id int, name string) *p4configv1.Preamble {
		alias := name
		for i := len(name) - 1; i >= 0; i-- {
			if name[i] == '.' {
				alias = name[i+1:]
				break
			}
		}
		return &p4configv1.Preamble{Id: p4id(prefix, id), Name: name, Alias: alias}
	}
	counterID := map[string]int{}
	for _, c := range pl.Counters() {
		counterID[c.Name] = c.ID
		spec := &p4configv1.CounterSpec{Unit: p4configv1.CounterSpec_BOTH}
		if c.Direct {
			var tid uint32
			if t, ok := pl.Lookup(engine.KindTable, c.Table); ok {
				tid = p4id(idTable, t)
			}
			info.DirectCounters = append(info.DirectCounters, &p4configv1.DirectCounter{Preamble: pre(idDirectCounter, c.ID, c.Name), Spec: spec, DirectTableId: tid})
			continue
		}
		info.Counters = append(info.Counters, &p4configv1.Counter{Preamble: pre(idCounter, c.ID, c.Name), Spec: spec, Size: int64(c.Size)})
	}
	meterID := map[string]int{}
	for _, m := range pl.Meters() {
		meterID[m.Name] = m.ID
		spec := &p4configv1.MeterSpec{Unit: p4configv1.MeterSpec_BYTES}
		if m.Unit == pipeline.MeterPackets {
			spec.Unit = p4configv1.MeterSpec_PACKETS
		}
		if m.Direct {
			var tid uint32
			if t, ok := pl.Lookup(engine.KindTable, m.Table); ok {
				tid = p4id(idTable, t)
			}
			info.DirectMeters = append(info.DirectMeters, &p4configv1.DirectMeter{Preamble: pre(idDirectMeter, m.ID, m.Name), Spec: spec, DirectTableId: tid})
			continue
		}
		info.Meters = append(info.Meters, &p4configv1.Meter{Preamble: pre(idMeter, m.ID, m.Name), Spec: spec, Size: int64(m.Size)})
	}
	for _, a := range pl.Actions() {
		act := &p4configv1.Action{Preamble: pre(idAction, a.ID, a.Name)}
		for i, p := range a.Params {
			act.Params = append(act.Params, &p4configv1.Action_Param{Id: uint32(i + 1), Name: p.Name, Bitwidth: int32(p.Bitwidth)})
		}
		info.Actions = append(info.Actions, act)
	}
	profID := map[string]int{}
	for _, ap := range pl.ActionProfiles() {
		profID[ap.Name] = ap.ID
		prof := &p4configv1.ActionProfile{Preamble: pre(idActionProfile, ap.ID, ap.Name), WithSelector: ap.HasSelector, Size: int64(ap.MaxSize)}
		for _, t := range ap.TableIDs {
			prof.TableIds = append(prof.TableIds, p4id(idTable, t))
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
		tbl := &p4configv1.Table{Preamble: pre(idTable, t.ID, t.Name), Size: int64(t.MaxSize), IsConstTable: t.Immutable}
		for i, k := range t.Keys {
			tbl.MatchFields = append(tbl.MatchFields, &p4configv1.MatchField{
				Id: uint32(i + 1), Name: k.Name, Bitwidth: int32(k.Bitwidth),
				Match: &p4configv1.MatchField_MatchType_{MatchType: kinds[k.Kind]},
			})
		}
		for _, aid := range t.ActionIDs {
			tbl.ActionRefs = append(tbl.ActionRefs, &p4configv1.ActionRef{Id: p4id(idAction, aid)})
		}
		if t.DirectCounter != "" {
			if id, ok := counterID[t.DirectCounter]; ok {
				tbl.DirectResourceIds = append(tbl.DirectResourceIds, p4id(idDirectCounter, id))
			}
		}
		if t.DirectMeter != "" {
			if id, ok := meterID[t.DirectMeter]; ok {
				tbl.DirectResourceIds = append(tbl.DirectResourceIds, p4id(idDirectMeter, id))
			}
		}
		if t.ActionProfile != "" {
			if id, ok := profID[t.ActionProfile]; ok {
				tbl.ImplementationId = p4id(idActionProfile, id)
			}
		}
		if t.ConstDefault {
			if a, ok, err := pl.DefaultAction(t.ID); err == nil && ok {
				tbl.ConstDefaultActionId = p4id(idAction, a.ActionID)
			}
		}
		info.Tables = append(info.Tables, tbl)
	}
	for _, r := range pl.Registers() {
		info.Registers = append(info.Registers, &p4configv1.Register{
			Preamble: pre(idRegister, r.ID, r.Name), Size: int32(r.Size),
			TypeSpec: &p4configv1.P4DataTypeSpec{TypeSpec: &p4configv1.P4DataTypeSpec_Bitstring{
				Bitstring: &p4configv1.P4BitstringLikeTypeSpec{TypeSpec: &p4configv1.P4BitstringLikeTypeSpec_Bit{Bit: &p4configv1.P4BitTypeSpec{Bitwidth: int32(r.Bitwidth)}}},
			}},
		})
	}
	for _, v := range pl.ValueSets() {
		vs := &p4configv1.ValueSet{Preamble: pre(idValueSet, v.ID, v.Name), Size: int32(v.MaxSize)}
		vs.Match = append(vs.Match, &p4configv1.MatchField{Id: 1, Name: v.Name, Bitwidth: int32(v.Bitwidth),
			Match: &p4configv1.MatchField_MatchType_{MatchType: p4configv1.MatchField_TERNARY}})
		info.ValueSets = append(info.ValueSets, vs)
	}
	return info
}
