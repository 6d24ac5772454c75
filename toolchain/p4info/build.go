package p4info

import (
	"errors"
	"fmt"
	"math/big"
	"sort"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// Build describes a lowered program's control-plane API.
func Build(p *ir.Program) (*p4v1.P4Info, error) {
	syms := newSymbolTable()
	tables := controlTables(p)
	if err := duplicateNames(p); err != nil {
		return nil, err
	}

	// collect symbols (the order only matters for explicit-id clashes).
	// As in p4c, every table and action of the program is a symbol, also
	// those written @hidden, which P4Info does not describe: they take
	// ids and count for the aliases of the others.
	for _, t := range tables {
		syms.add(p4v1.P4Ids_TABLE, t.Name, t.ExplicitID)
	}
	for _, t := range userHiddenTables(p) {
		syms.add(p4v1.P4Ids_TABLE, t.Name, t.ExplicitID)
	}
	listed := map[string]bool{}
	for _, t := range tables {
		listed[t.Name] = true
	}
	for _, a := range p.ControlActions {
		syms.add(p4v1.P4Ids_ACTION, a.Name, a.ExplicitID)
	}
	for _, c := range p.Counters {
		if c.Direct {
			syms.add(p4v1.P4Ids_DIRECT_COUNTER, c.Name, c.ExplicitID)
		} else {
			syms.add(p4v1.P4Ids_COUNTER, c.Name, c.ExplicitID)
		}
	}
	for _, m := range p.Meters {
		if m.Direct {
			syms.add(p4v1.P4Ids_DIRECT_METER, m.Name, m.ExplicitID)
		} else {
			syms.add(p4v1.P4Ids_METER, m.Name, m.ExplicitID)
		}
	}
	for _, r := range p.Registers {
		syms.add(p4v1.P4Ids_REGISTER, r.Name, r.ExplicitID)
	}
	for _, ap := range p.ActionProfiles {
		syms.add(p4v1.P4Ids_ACTION_PROFILE, ap.Name, ap.ExplicitID)
	}
	for _, d := range p.Digests {
		syms.add(p4v1.P4Ids_DIGEST, d.Name, d.ExplicitID)
	}
	for _, vs := range p.ValueSets {
		syms.add(p4v1.P4Ids_VALUE_SET, vs.Name, vs.ExplicitID)
	}
	for _, ch := range p.ControllerHeaders {
		syms.add(p4v1.P4Ids_CONTROLLER_HEADER, ch.TypeName, ch.ExplicitID)
	}
	syms.computeIDs()
	if len(syms.errs) > 0 {
		return nil, errors.Join(syms.errs...)
	}

	info := &p4v1.P4Info{PkgInfo: &p4v1.PkgInfo{Arch: "v1model"}}
	for _, t := range tables {
		info.Tables = append(info.Tables, table(syms, t))
	}
	for _, a := range p.ControlActions {
		if a.Hidden {
			continue
		}
		info.Actions = append(info.Actions, action(syms, a))
	}
	for _, ap := range p.ActionProfiles {
		msg := &p4v1.ActionProfile{
			Preamble:     preamble(syms, p4v1.P4Ids_ACTION_PROFILE, ap.Name, ap.Annotations),
			WithSelector: ap.Selector != nil,
			Size:         int64(ap.Size),
		}
		if ap.Selector != nil {
			msg.MaxGroupSize = int32(ap.MaxGroupSize)
			switch ap.SizeSemantics {
			case "sum_of_members":
				msg.SelectorSizeSemantics = &p4v1.ActionProfile_SumOfMembers_{
					SumOfMembers: &p4v1.ActionProfile_SumOfMembers{MaxMemberWeight: int32(ap.MaxMemberWeight)}}
			case "sum_of_weights":
				msg.SelectorSizeSemantics = &p4v1.ActionProfile_SumOfWeights_{SumOfWeights: &p4v1.ActionProfile_SumOfWeights{}}
			}
		}
		for _, t := range ap.Tables {
			msg.TableIds = append(msg.TableIds, syms.id(p4v1.P4Ids_TABLE, t.Name))
		}
		info.ActionProfiles = append(info.ActionProfiles, msg)
	}
	for _, c := range p.Counters {
		spec := &p4v1.CounterSpec{Unit: counterUnit(c.Kind)}
		if c.Direct {
			if !listed[c.Table] {
				// a direct resource is described with its table
				continue
			}
			info.DirectCounters = append(info.DirectCounters, &p4v1.DirectCounter{
				Preamble:      preamble(syms, p4v1.P4Ids_DIRECT_COUNTER, c.Name, c.Annotations),
				Spec:          spec,
				DirectTableId: syms.id(p4v1.P4Ids_TABLE, c.Table),
			})
			continue
		}
		info.Counters = append(info.Counters, &p4v1.Counter{
			Preamble: preamble(syms, p4v1.P4Ids_COUNTER, c.Name, c.Annotations),
			Spec:     spec,
			Size:     int64(c.Size),
		})
	}
	for _, m := range p.Meters {
		spec := &p4v1.MeterSpec{Unit: p4v1.MeterSpec_PACKETS}
		if m.Bytes {
			spec.Unit = p4v1.MeterSpec_BYTES
		}
		if m.Direct {
			if !listed[m.Table] {
				continue
			}
			info.DirectMeters = append(info.DirectMeters, &p4v1.DirectMeter{
				Preamble:      preamble(syms, p4v1.P4Ids_DIRECT_METER, m.Name, m.Annotations),
				Spec:          spec,
				DirectTableId: syms.id(p4v1.P4Ids_TABLE, m.Table),
			})
			continue
		}
		info.Meters = append(info.Meters, &p4v1.Meter{
			Preamble: preamble(syms, p4v1.P4Ids_METER, m.Name, m.Annotations),
			Spec:     spec,
			Size:     int64(m.Size),
		})
	}
	for _, ch := range p.ControllerHeaders {
		if ch.Hidden {
			continue
		}
		msg := &p4v1.ControllerPacketMetadata{Preamble: &p4v1.Preamble{
			Id:          syms.id(p4v1.P4Ids_CONTROLLER_HEADER, ch.TypeName),
			Name:        ch.Name,
			Alias:       ch.Name,
			Annotations: ch.Annotations,
		}}
		explicit := make([]uint32, len(ch.Fields))
		for i, f := range ch.Fields {
			explicit[i] = f.ExplicitID
		}
		ids := fieldIDs(explicit)
		for i, f := range ch.Fields {
			if f.Hidden {
				continue
			}
			md := &p4v1.ControllerPacketMetadata_Metadata{Id: ids[i], Name: f.Name, Bitwidth: int32(f.Width), Annotations: f.Annotations}
			if f.TypeName != "" {
				md.TypeName = &p4v1.P4NamedType{Name: f.TypeName}
			}
			msg.Metadata = append(msg.Metadata, md)
		}
		info.ControllerPacketMetadata = append(info.ControllerPacketMetadata, msg)
	}
	for _, vs := range p.ValueSets {
		msg := &p4v1.ValueSet{Preamble: preamble(syms, p4v1.P4Ids_VALUE_SET, vs.Name, vs.Annotations), Size: int32(vs.Size)}
		if len(vs.MatchFields) == 0 {
			w := 0
			if len(vs.Widths) > 0 {
				w = vs.Widths[0]
			}
			msg.Match = append(msg.Match, &p4v1.MatchField{Id: 1, Bitwidth: int32(w),
				Match: &p4v1.MatchField_MatchType_{MatchType: p4v1.MatchField_EXACT}})
		}
		explicit := make([]uint32, len(vs.MatchFields))
		for i, mf := range vs.MatchFields {
			explicit[i] = mf.ExplicitID
		}
		ids := fieldIDs(explicit)
		for i, mf := range vs.MatchFields {
			m := &p4v1.MatchField{Id: ids[i], Name: mf.Name, Bitwidth: int32(mf.Width), Annotations: mf.Annotations}
			if mt := matchType(mf.Match); mt != p4v1.MatchField_UNSPECIFIED {
				m.Match = &p4v1.MatchField_MatchType_{MatchType: mt}
			} else {
				m.Match = &p4v1.MatchField_OtherMatchType{OtherMatchType: string(mf.Match)}
			}
			msg.Match = append(msg.Match, m)
		}
		info.ValueSets = append(info.ValueSets, msg)
	}
	for _, r := range p.Registers {
		info.Registers = append(info.Registers, &p4v1.Register{
			Preamble: preamble(syms, p4v1.P4Ids_REGISTER, r.Name, r.Annotations),
			TypeSpec: bitSpec(r.Width, false),
			Size:     int32(r.Size),
		})
	}
	for _, d := range p.Digests {
		info.Digests = append(info.Digests, &p4v1.Digest{
			Preamble: preamble(syms, p4v1.P4Ids_DIGEST, d.Name, nil),
			TypeSpec: typeSpec(d.TypeSpec),
		})
	}
	if p.HasTypeInfo || p.TypeInfo != nil {
		info.TypeInfo = typeInfo(p.TypeInfo)
	}
	return info, nil
}

// controlTables lists the tables the control plane sees, once each, in
// p4c's order: by pipeline, then by declaration.
func controlTables(p *ir.Program) []*ir.Table {
	var out []*ir.Table
	seen := map[string]bool{}
	for _, pl := range p.Pipelines {
		var ts []*ir.Table
		for _, t := range pl.Tables {
			if t.Hidden || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			ts = append(ts, t)
		}
		sort.SliceStable(ts, func(i, j int) bool {
			a, b := ts[i].Loc.Pos, ts[j].Loc.Pos
			if a.File != b.File {
				return false
			}
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Col < b.Col
		})
		out = append(out, ts...)
	}
	return out
}

// userHiddenTables lists the tables written @hidden, once each.
func userHiddenTables(p *ir.Program) []*ir.Table {
	var out []*ir.Table
	seen := map[string]bool{}
	for _, pl := range p.Pipelines {
		for _, t := range pl.Tables {
			if t.UserHidden && !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

func preamble(syms *symbolTable, kind p4v1.P4Ids_Prefix, name string, annos []string) *p4v1.Preamble {
	return &p4v1.Preamble{Id: syms.id(kind, name), Name: name, Alias: syms.alias(name), Annotations: annos}
}

func matchType(k ir.MatchKind) p4v1.MatchField_MatchType {
	switch k {
	case ir.MatchExact:
		return p4v1.MatchField_EXACT
	case ir.MatchLPM:
		return p4v1.MatchField_LPM
	case ir.MatchTernary:
		return p4v1.MatchField_TERNARY
	case ir.MatchRange:
		return p4v1.MatchField_RANGE
	case ir.MatchOptional:
		return p4v1.MatchField_OPTIONAL
	}
	return p4v1.MatchField_UNSPECIFIED
}

func counterUnit(k ir.CounterKind) p4v1.CounterSpec_Unit {
	switch k {
	case ir.CountBytes:
		return p4v1.CounterSpec_BYTES
	case ir.CountPacketsAndBytes:
		return p4v1.CounterSpec_BOTH
	}
	return p4v1.CounterSpec_PACKETS
}

func table(syms *symbolTable, t *ir.Table) *p4v1.Table {
	msg := &p4v1.Table{
		Preamble: preamble(syms, p4v1.P4Ids_TABLE, t.Name, t.Annotations),
		Size:     int64(t.Size),
	}
	var keys []ir.KeyField
	for _, k := range t.Key {
		if k.Match != ir.MatchSelector {
			keys = append(keys, k)
		}
	}
	explicit := make([]uint32, len(keys))
	for i, k := range keys {
		explicit[i] = k.ExplicitID
	}
	ids := fieldIDs(explicit)
	for i, k := range keys {
		mf := &p4v1.MatchField{
			Id:          ids[i],
			Name:        k.Name,
			Bitwidth:    int32(k.P4RTWidth),
			Annotations: k.Annotations,
		}
		if k.TypeName != "" {
			mf.TypeName = &p4v1.P4NamedType{Name: k.TypeName}
		}
		if mt := matchType(k.Match); mt != p4v1.MatchField_UNSPECIFIED {
			mf.Match = &p4v1.MatchField_MatchType_{MatchType: mt}
		} else {
			mf.Match = &p4v1.MatchField_OtherMatchType{OtherMatchType: string(k.Match)}
		}
		msg.MatchFields = append(msg.MatchFields, mf)
	}
	for _, r := range t.Actions {
		ref := &p4v1.ActionRef{Id: syms.id(p4v1.P4Ids_ACTION, r.Action.Name), Annotations: r.Annotations}
		switch {
		case r.TableOnly:
			ref.Scope = p4v1.ActionRef_TABLE_ONLY
		case r.DefaultOnly:
			ref.Scope = p4v1.ActionRef_DEFAULT_ONLY
		}
		msg.ActionRefs = append(msg.ActionRefs, ref)
	}
	if t.Default != nil && t.Default.Action != nil {
		aid := syms.id(p4v1.P4Ids_ACTION, t.Default.Action.Name)
		if t.Default.Const {
			msg.ConstDefaultActionId = aid
		}
		call := &p4v1.TableActionCall{ActionId: aid}
		for i, v := range t.Default.Args {
			w := 0
			if i < len(t.Default.Action.Params) {
				w = t.Default.Action.Params[i].Width
			}
			call.Arguments = append(call.Arguments, &p4v1.TableActionCall_Argument{ParamId: uint32(i + 1), Value: bytesOf(v, w)})
		}
		msg.InitialDefaultAction = call
	}
	if t.Implementation != nil {
		msg.ImplementationId = syms.id(p4v1.P4Ids_ACTION_PROFILE, t.Implementation.Name)
	}
	if t.DirectCounter != nil {
		msg.DirectResourceIds = append(msg.DirectResourceIds, syms.id(p4v1.P4Ids_DIRECT_COUNTER, t.DirectCounter.Name))
	}
	if t.DirectMeter != nil {
		msg.DirectResourceIds = append(msg.DirectResourceIds, syms.id(p4v1.P4Ids_DIRECT_METER, t.DirectMeter.Name))
	}
	if t.SupportTimeout {
		msg.IdleTimeoutBehavior = p4v1.Table_NOTIFY_CONTROL
	}
	if len(t.Entries) > 0 {
		msg.HasInitialEntries = true
		msg.IsConstTable = t.ConstEntries
	}
	return msg
}

// bytesOf encodes a value in the whole bytes of its width, as p4c does
// for default action arguments.
func bytesOf(v *big.Int, w int) []byte {
	n := (w + 7) / 8
	if n == 0 {
		n = 1
	}
	b := v.Bytes()
	if len(b) >= n {
		return b[len(b)-n:]
	}
	out := make([]byte, n)
	copy(out[n-len(b):], b)
	return out
}

func action(syms *symbolTable, a *ir.Action) *p4v1.Action {
	msg := &p4v1.Action{Preamble: preamble(syms, p4v1.P4Ids_ACTION, a.Name, a.Annotations)}
	explicit := make([]uint32, len(a.Params))
	for i, prm := range a.Params {
		explicit[i] = prm.ExplicitID
	}
	ids := fieldIDs(explicit)
	for i, prm := range a.Params {
		ap := &p4v1.Action_Param{Id: ids[i], Name: prm.Name, Bitwidth: int32(prm.Width), Annotations: prm.Annotations}
		if prm.TypeName != "" {
			ap.TypeName = &p4v1.P4NamedType{Name: prm.TypeName}
		}
		msg.Params = append(msg.Params, ap)
	}
	return msg
}

func bitSpec(w int, signed bool) *p4v1.P4DataTypeSpec {
	bs := &p4v1.P4BitstringLikeTypeSpec{}
	if signed {
		bs.TypeSpec = &p4v1.P4BitstringLikeTypeSpec_Int{Int: &p4v1.P4IntTypeSpec{Bitwidth: int32(w)}}
	} else {
		bs.TypeSpec = &p4v1.P4BitstringLikeTypeSpec_Bit{Bit: &p4v1.P4BitTypeSpec{Bitwidth: int32(w)}}
	}
	return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Bitstring{Bitstring: bs}}
}

func typeSpec(ts *ir.TypeSpec) *p4v1.P4DataTypeSpec {
	if ts == nil {
		return nil
	}
	switch ts.Kind {
	case "bitstring":
		if ts.Varbit {
			return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Bitstring{Bitstring: &p4v1.P4BitstringLikeTypeSpec{
				TypeSpec: &p4v1.P4BitstringLikeTypeSpec_Varbit{Varbit: &p4v1.P4VarbitTypeSpec{MaxBitwidth: int32(ts.Width)}}}}}
		}
		return bitSpec(ts.Width, ts.Signed)
	case "bool":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Bool{Bool: &p4v1.P4BoolType{}}}
	case "error":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Error{Error: &p4v1.P4ErrorType{}}}
	case "struct":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Struct{Struct: &p4v1.P4NamedType{Name: ts.Name}}}
	case "header":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Header{Header: &p4v1.P4NamedType{Name: ts.Name}}}
	case "header_union":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_HeaderUnion{HeaderUnion: &p4v1.P4NamedType{Name: ts.Name}}}
	case "serializable_enum":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_SerializableEnum{SerializableEnum: &p4v1.P4NamedType{Name: ts.Name}}}
	case "enum":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Enum{Enum: &p4v1.P4NamedType{Name: ts.Name}}}
	case "new_type":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_NewType{NewType: &p4v1.P4NamedType{Name: ts.Name}}}
	case "tuple":
		tt := &p4v1.P4TupleTypeSpec{}
		for _, e := range ts.Elems {
			tt.Members = append(tt.Members, typeSpec(e))
		}
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Tuple{Tuple: tt}}
	case "header_stack":
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_HeaderStack{HeaderStack: &p4v1.P4HeaderStackTypeSpec{
			Header: &p4v1.P4NamedType{Name: ts.Name}, Size: int32(ts.Width)}}}
	}
	return bitSpec(ts.Width, false)
}

func typeInfo(ti *ir.TypeInfo) *p4v1.P4TypeInfo {
	out := &p4v1.P4TypeInfo{}
	if ti == nil {
		return out
	}
	for _, s := range ti.Structs {
		if out.Structs == nil {
			out.Structs = map[string]*p4v1.P4StructTypeSpec{}
		}
		spec := &p4v1.P4StructTypeSpec{}
		for _, m := range s.Members {
			spec.Members = append(spec.Members, &p4v1.P4StructTypeSpec_Member{Name: m.Name, TypeSpec: typeSpec(m.Spec)})
		}
		out.Structs[s.Name] = spec
	}
	for _, h := range ti.Headers {
		if out.Headers == nil {
			out.Headers = map[string]*p4v1.P4HeaderTypeSpec{}
		}
		spec := &p4v1.P4HeaderTypeSpec{}
		for _, m := range h.Members {
			var bs *p4v1.P4BitstringLikeTypeSpec
			if ds := typeSpec(m.Spec); ds != nil {
				if b, ok := ds.TypeSpec.(*p4v1.P4DataTypeSpec_Bitstring); ok {
					bs = b.Bitstring
				}
			}
			spec.Members = append(spec.Members, &p4v1.P4HeaderTypeSpec_Member{Name: m.Name, TypeSpec: bs})
		}
		out.Headers[h.Name] = spec
	}
	for _, u := range ti.Unions {
		if out.HeaderUnions == nil {
			out.HeaderUnions = map[string]*p4v1.P4HeaderUnionTypeSpec{}
		}
		spec := &p4v1.P4HeaderUnionTypeSpec{}
		for _, m := range u.Members {
			spec.Members = append(spec.Members, &p4v1.P4HeaderUnionTypeSpec_Member{Name: m.Name, Header: &p4v1.P4NamedType{Name: m.Spec.Name}})
		}
		out.HeaderUnions[u.Name] = spec
	}
	for _, e := range ti.Enums {
		if out.SerializableEnums == nil {
			out.SerializableEnums = map[string]*p4v1.P4SerializableEnumTypeSpec{}
		}
		spec := &p4v1.P4SerializableEnumTypeSpec{UnderlyingType: &p4v1.P4BitTypeSpec{Bitwidth: int32(e.Width)}}
		for _, m := range e.Members {
			spec.Members = append(spec.Members, &p4v1.P4SerializableEnumTypeSpec_Member{Name: m.Name, Value: bytesOf(m.Value, e.Width)})
		}
		out.SerializableEnums[e.Name] = spec
	}
	for _, e := range ti.PlainEnums {
		if out.Enums == nil {
			out.Enums = map[string]*p4v1.P4EnumTypeSpec{}
		}
		spec := &p4v1.P4EnumTypeSpec{}
		for _, m := range e.Members {
			spec.Members = append(spec.Members, &p4v1.P4EnumTypeSpec_Member{Name: m})
		}
		out.Enums[e.Name] = spec
	}
	for _, nt := range ti.NewTypes {
		if out.NewTypes == nil {
			out.NewTypes = map[string]*p4v1.P4NewTypeSpec{}
		}
		spec := &p4v1.P4NewTypeSpec{}
		if nt.Translation != "" {
			tr := &p4v1.P4NewTypeTranslation{Uri: nt.Translation}
			if nt.SDNString {
				tr.SdnType = &p4v1.P4NewTypeTranslation_SdnString_{SdnString: &p4v1.P4NewTypeTranslation_SdnString{}}
			} else {
				tr.SdnType = &p4v1.P4NewTypeTranslation_SdnBitwidth{SdnBitwidth: int32(nt.SDNWidth)}
			}
			spec.Representation = &p4v1.P4NewTypeSpec_TranslatedType{TranslatedType: tr}
		} else {
			spec.Representation = &p4v1.P4NewTypeSpec_OriginalType{OriginalType: typeSpec(nt.Spec)}
		}
		out.NewTypes[nt.Name] = spec
	}
	if ti.HasError {
		out.Error = &p4v1.P4ErrorTypeSpec{Members: ti.Errors}
	}
	return out
}

// fieldIDs numbers the fields of one object (match fields, parameters,
// packet metadata) as p4c's FieldIdAllocator does: @id values first; then
// a counter starting at 1 walks the fields in order, stepping once past
// each field with an @id and skipping numbers already taken.
func fieldIDs(explicit []uint32) []uint32 {
	ids := make([]uint32, len(explicit))
	taken := map[uint32]bool{}
	for i, e := range explicit {
		if e != 0 {
			ids[i] = e
			taken[e] = true
		}
	}
	index := uint32(1)
	for i, e := range explicit {
		if e != 0 {
			index++
			continue
		}
		for taken[index] {
			index++
		}
		ids[i] = index
		taken[index] = true
	}
	return ids
}

// NameError is a control-plane name P4Info cannot hold, at the source of
// the object that takes it.
type NameError struct {
	Loc ir.Source
	Msg string
}

func (e *NameError) Error() string { return e.Msg }

// duplicateNames refuses two objects of one kind with one control-plane
// name (a table or extern with an absolute @name in a control instantiated
// twice): P4Info names each object once, and p4c refuses such a program.
func duplicateNames(p *ir.Program) error {
	type object struct {
		ptr any
		loc ir.Source
	}
	seen := map[string]object{}
	check := func(kind, name string, ptr any, loc ir.Source) error {
		key := kind + " " + name
		if prev, ok := seen[key]; ok && prev.ptr != ptr {
			return &NameError{Loc: loc, Msg: fmt.Sprintf("name %q is used for more than one %s in the P4Info (one is at %s)", name, kind, prev.loc.Pos)}
		}
		seen[key] = object{ptr, loc}
		return nil
	}
	for _, pl := range p.Pipelines {
		for _, t := range pl.Tables {
			if t.Hidden {
				continue
			}
			if err := check("table", t.Name, t, t.Loc); err != nil {
				return err
			}
		}
	}
	for _, c := range p.Counters {
		if err := check("counter", c.Name, c, c.Loc); err != nil {
			return err
		}
	}
	for _, m := range p.Meters {
		if err := check("meter", m.Name, m, m.Loc); err != nil {
			return err
		}
	}
	for _, r := range p.Registers {
		if err := check("register", r.Name, r, r.Loc); err != nil {
			return err
		}
	}
	return nil
}
