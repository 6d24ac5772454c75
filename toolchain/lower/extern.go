package lower

import (
	"math/big"
	"strings"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// constArg returns a constructor argument's value as an integer or enum
// member name.
func constInt(v any) (int, bool) {
	cv, ok := v.(*constVal)
	if !ok {
		return 0, false
	}
	switch x := cv.v.(type) {
	case *big.Int:
		return int(x.Int64()), true
	}
	return 0, false
}

func constMember(v any) string {
	cv, ok := v.(*constVal)
	if !ok {
		return ""
	}
	if ev, ok := cv.v.(*types.EnumValue); ok {
		return ev.Member
	}
	return ""
}

// createExtern builds the target object of an extern instance.
func (l *lowerer) createExtern(ei *externInst) {
	annos := renderAnnotations(ei.decl.Annotations)
	id := explicitID(ei.decl.Annotations)
	src := l.source(ei.decl.Pos, ei.decl.Name)
	arg := func(i int) any {
		if i < len(ei.args) {
			return ei.args[i]
		}
		return nil
	}
	switch ei.typ.Decl.Name {
	case "counter":
		size, _ := constInt(arg(0))
		ei.counter = &ir.Counter{Name: ei.name, Size: size, Kind: ir.CounterKind(constMember(arg(1))), Annotations: annos, ExplicitID: id, Loc: src}
		l.prog.Counters = append(l.prog.Counters, ei.counter)
	case "direct_counter":
		ei.counter = &ir.Counter{Name: ei.name, Direct: true, Kind: ir.CounterKind(constMember(arg(0))), Annotations: annos, ExplicitID: id, Loc: src}
	case "meter":
		size, _ := constInt(arg(0))
		ei.meter = &ir.Meter{Name: ei.name, Size: size, Bytes: constMember(arg(1)) == "bytes", RateCount: 2, Annotations: annos, ExplicitID: id, Loc: src}
		l.prog.Meters = append(l.prog.Meters, ei.meter)
	case "direct_meter":
		ei.meter = &ir.Meter{Name: ei.name, Direct: true, Bytes: constMember(arg(0)) == "bytes", RateCount: 2, Annotations: annos, ExplicitID: id, Loc: src}
	case "register":
		size, _ := constInt(arg(0))
		w := 0
		if len(ei.typ.Args) > 0 && ei.typ.Args[0] != nil {
			w = types.Width(ei.typ.Args[0])
		}
		ei.register = &ir.Register{Name: ei.name, Size: size, Width: w, Annotations: annos, ExplicitID: id, Loc: src}
		l.prog.Registers = append(l.prog.Registers, ei.register)
	case "action_profile":
		size, _ := constInt(arg(0))
		ei.profile = &ir.ActionProfile{Name: ei.name, Size: size, ExplicitID: id}
		l.profileAnnotations(ei.profile, ei.decl, ei.inPlace)
	case "action_selector":
		size, _ := constInt(arg(1))
		ow, _ := constInt(arg(2))
		ei.profile = &ir.ActionProfile{Name: ei.name, Size: size, ExplicitID: id,
			Selector: &ir.Selector{Algorithm: constMember(arg(0)), OutputWidth: ow}}
		l.profileAnnotations(ei.profile, ei.decl, ei.inPlace)
	}
}

// profileAnnotations reads what an action profile's or selector's
// annotations say of its groups, as p4c's P4Info does: for a selector,
// @max_group_size(N) is its max_group_size, and
// @selector_size_semantics("sum_of_members") with @max_member_weight(N)
// its size semantics. These three are not kept as annotations; on a
// profile without a selector they mean nothing, and p4c warns and drops
// them. Without @selector_size_semantics p4c writes sum_of_weights for a
// selector created in a table's implementation property and nothing for
// a declared one (its P4Info for action_profile_max_group_size_annotation
// and for fabric_20190420's hashed_selector, from one version).
func (l *lowerer) profileAnnotations(ap *ir.ActionProfile, d *ast.InstanceDecl, inPlace bool) {
	if ap.Selector != nil && inPlace {
		ap.SizeSemantics = "sum_of_weights"
	}
	var kept ast.Annotations
	for _, a := range d.Annotations {
		switch a.Name {
		case "max_group_size", "selector_size_semantics", "max_member_weight":
			if ap.Selector == nil {
				l.warn.Add(a.Pos, "Ignoring annotation @%s on action profile '%s', which does not have a selector", a.Name, ap.Name)
				continue
			}
			switch a.Name {
			case "max_group_size":
				ap.MaxGroupSize = l.annotationInt(a)
			case "max_member_weight":
				ap.MaxMemberWeight = l.annotationInt(a)
			case "selector_size_semantics":
				if len(a.Exprs) == 1 {
					if s, ok := a.Exprs[0].(*ast.StringLit); ok {
						switch v := strings.ToLower(s.Value); v {
						case "sum_of_members", "sum_of_weights":
							ap.SizeSemantics = v
						}
					}
				}
			}
			continue
		}
		kept = append(kept, a)
	}
	ap.Annotations = renderAnnotations(kept)
}

// annotationInt is the integer argument of an annotation like
// @max_group_size(16), @max_group_size(32w16) or @max_group_size(SIZE)
// with a constant SIZE; 0 when it has none.
func (l *lowerer) annotationInt(a *ast.Annotation) int {
	if len(a.Exprs) == 1 {
		if v, ok := l.annotationConst(a.Exprs[0]); ok && v.IsInt64() {
			return int(v.Int64())
		}
	}
	return 0
}

func explicitID(as ast.Annotations) uint32 {
	a := as.Get("id")
	if a == nil || len(a.Exprs) != 1 {
		return 0
	}
	if lit, ok := a.Exprs[0].(*ast.IntLit); ok && lit.Value.IsUint64() {
		return uint32(lit.Value.Uint64())
	}
	return 0
}

// outField returns a field to receive an extern's result, and statements
// to run afterwards when the argument is not a plain field.
func (b *body) outField(arg ast.Expr, t types.Type) (*ir.FieldRef, []mstmt) {
	loc := b.lvalue(arg)
	if f, ok := loc.(*fieldLoc); ok && !irType(f.t).Bool {
		return &ir.FieldRef{Header: f.hdr, Field: f.field, T: storageType(f.t)}, nil
	}
	tmp := b.l.newScalar("tmp", t)
	after := b.sub(func() { b.assign(loc, tmp, arg.Position(), "") })
	return &ir.FieldRef{Header: tmp.hdr, Field: tmp.field, T: storageType(t)}, after
}

// argIR evaluates argument i of a call as a scalar.
func (b *body) argIR(c *types.Call, i int) ir.Expr {
	if i >= len(c.Args) || c.Args[i] == nil {
		return &ir.Const{Value: big.NewInt(0), T: ir.Bits(32, false)}
	}
	t := c.ParamTypes[i]
	if _, isVar := t.(*types.TypeVar); isVar || t == nil {
		t = b.l.info.Types[c.Args[i]]
	}
	v := b.exprAs(c.Args[i], t)
	return b.read(v, t)
}

// flatten lists the scalar values of a (possibly structured) value in
// field order.
func (b *body) flatten(v any, t types.Type) []ir.Expr {
	switch x := v.(type) {
	case *tupleVal:
		tt, _ := types.Underlying(t).(*types.Tuple)
		var out []ir.Expr
		for i, e := range x.elems {
			var et types.Type = &types.Bits{Width: 32}
			if tt != nil && i < len(tt.Elems) {
				et = tt.Elems[i]
			}
			out = append(out, b.flatten(e, et)...)
		}
		return out
	case *structVal:
		var out []ir.Expr
		for i, f := range x.st.Fields {
			out = append(out, b.flatten(x.fields[i], f.Type)...)
		}
		return out
	case *structLoc:
		var out []ir.Expr
		for i, f := range x.st.Fields {
			out = append(out, b.flatten(x.fields[i], f.Type)...)
		}
		return out
	case *headerLoc:
		var out []ir.Expr
		for _, f := range x.st.Fields {
			out = append(out, b.flatten(x.fieldOf(f.Name), f.Type)...)
		}
		return out
	case *stackLoc:
		var out []ir.Expr
		for _, e := range x.elems {
			out = append(out, b.flatten(e, x.t.Elem)...)
		}
		return out
	}
	if !isScalar(t) {
		if tt := b.typeOfVal(v); tt != nil {
			t = tt
		}
	}
	e := b.read(v, t)
	if e.Type().Bool {
		e = toStorage(e)
	}
	return []ir.Expr{e}
}

func (b *body) typeOfVal(v any) types.Type {
	switch x := v.(type) {
	case *scalarVal:
		return x.t
	case *fieldLoc:
		return x.t
	}
	return nil
}

// fieldsOnly makes every value a field or constant, copying expressions
// into temporaries (calculations and learn lists read fields).
func (b *body) fieldsOnly(es []ir.Expr) []ir.Expr {
	out := make([]ir.Expr, len(es))
	for i, e := range es {
		switch x := e.(type) {
		case *ir.FieldRef, *ir.Const:
			out[i] = e
			continue
		case *ir.BitToBool:
			if f, ok := x.X.(*ir.FieldRef); ok {
				out[i] = f
				continue
			}
		}
		t := e.Type()
		tmp := b.l.newScalar("tmp", &types.Bits{Width: t.Width, Signed: t.Signed})
		ref := &ir.FieldRef{Header: tmp.hdr, Field: tmp.field, T: ir.Bits(t.Width, t.Signed)}
		b.emit(&ir.Assign{Dst: ref, Src: toStorage(e)})
		out[i] = ref
	}
	return out
}

func (b *body) externCall(x *ast.CallExpr, c *types.Call, stmt bool) any {
	pos := x.Pos
	frag := exprText(x)
	loc := b.l.source(pos, frag)
	if c.Kind == types.CallExternMethod {
		recv := b.expr(c.Recv)
		switch r := recv.(type) {
		case *packetVal:
			return b.packetCall(x, c, stmt)
		case *externInst:
			return b.externMethod(x, c, r, loc)
		}
		b.errorf(pos, "unsupported extern method call")
		panic(bailout{})
	}
	b.l.noteTypeArgs(c)
	name := c.Proto.Name
	switch name {
	case "mark_to_drop":
		if len(c.Args) == 1 {
			arg := b.expr(c.Args[0])
			var st *types.Struct
			switch a := arg.(type) {
			case *structLoc:
				st = a.st
			case *headerLoc:
				st = a.st
			}
			if st != nil && arg != any(b.l.standard) && fieldIndex(st, "egress_spec") >= 0 && fieldIndex(st, "mcast_grp") >= 0 {
				// a copy of the standard metadata (an argument the
				// calling convention copies): what the primitive does,
				// on the copy
				b.assign(b.memberVal(arg, st, fieldIndex(st, "egress_spec")), &scalarVal{e: &ir.Const{Value: big.NewInt(511), T: ir.Bits(9, false)}, t: &types.Bits{Width: 9}}, pos, frag)
				b.assign(b.memberVal(arg, st, fieldIndex(st, "mcast_grp")), &scalarVal{e: &ir.Const{Value: big.NewInt(0), T: ir.Bits(16, false)}, t: &types.Bits{Width: 16}}, pos, frag)
				return nil
			}
		}
		b.emit(&ir.Primitive{Name: "mark_to_drop", Args: []ir.Arg{{Kind: ir.ArgHeader, Name: "standard_metadata"}}, Loc: loc})
		return nil
	case "static_assert":
		// checked by the type checker; nothing happens at run time
		return &scalarVal{e: &ir.BoolConst{Value: true}, t: &types.Bool{}}
	case "verify":
		if b.kind != kindParser {
			b.errorf(pos, "verify can only be called in a parser")
			return nil
		}
		cond := b.argIR(c, 0)
		errExpr := b.argIR(c, 1)
		v := &ir.Verify{Cond: cond, Loc: loc}
		if k, ok := errExpr.(*ir.Const); ok {
			v.Error = int(k.Value.Int64())
		} else {
			v.ErrorExpr = errExpr
		}
		b.emit(v)
		return nil
	case "random":
		t := c.ParamTypes[0]
		dst, after := b.outField(c.Args[0], t)
		lo, hi := b.argIR(c, 1), b.argIR(c, 2)
		b.emit(&ir.Primitive{Name: "modify_field_rng_uniform", Args: []ir.Arg{{Expr: dst}, {Expr: lo}, {Expr: hi}}, Loc: loc})
		b.emit(after...)
		return nil
	case "hash":
		t := c.ParamTypes[0]
		dst, after := b.outField(c.Args[0], t)
		algo := b.algorithm(c.Args[1])
		base := b.argIR(c, 2)
		dt := c.ParamTypes[3]
		if _, isVar := dt.(*types.TypeVar); isVar {
			dt = b.l.info.Types[c.Args[3]]
		}
		data := b.fieldsOnly(b.flatten(b.exprAs(c.Args[3], dt), dt))
		maxv := b.argIR(c, 4)
		calc := b.l.newCalculation(algo, data, false, loc)
		b.emit(&ir.Primitive{Name: "modify_field_with_hash_based_offset",
			Args: []ir.Arg{{Expr: dst}, {Expr: base}, {Kind: ir.ArgCalculation, Name: calc.Name}, {Expr: maxv}}, Loc: loc})
		b.emit(after...)
		return nil
	case "digest":
		recv := b.argIR(c, 0)
		dt := c.ParamTypes[1]
		if _, isVar := dt.(*types.TypeVar); isVar {
			dt = b.l.info.Types[c.Args[1]]
		}
		v := b.exprAs(c.Args[1], dt)
		fields := b.fieldsOnly(b.flatten(v, dt))
		ll := b.l.learnList(dt, fields)
		b.emit(&ir.Primitive{Name: "generate_digest", Args: []ir.Arg{{Expr: recv}, {Kind: ir.ArgLearnList, Int: ll.ID, Name: ll.Name}}, Loc: loc})
		return nil
	case "clone", "clone3", "clone_preserving_field_list":
		kind := b.cloneKind(c.Args[0])
		session := b.argIR(c, 1)
		prim := "clone_ingress_pkt_to_egress"
		if kind == "E2E" {
			prim = "clone_egress_pkt_to_egress"
		}
		flID := 0
		switch name {
		case "clone3":
			flID = b.l.fieldListFromValue(b, c.Args[2], c.ParamTypes[2])
		case "clone_preserving_field_list":
			flID = b.l.fieldListByIndex(b.constIndex(c.Args[2]))
		}
		b.emit(&ir.Primitive{Name: prim, Args: []ir.Arg{{Expr: session}, {Expr: &ir.Const{Value: big.NewInt(int64(flID)), T: ir.Bits(32, false)}}}, Loc: loc})
		return nil
	case "resubmit", "recirculate", "resubmit_preserving_field_list", "recirculate_preserving_field_list":
		prim := "resubmit"
		if name == "recirculate" || name == "recirculate_preserving_field_list" {
			prim = "recirculate"
		}
		var flID int
		if name == "resubmit" || name == "recirculate" {
			flID = b.l.fieldListFromValue(b, c.Args[0], c.ParamTypes[0])
		} else {
			flID = b.l.fieldListByIndex(b.constIndex(c.Args[0]))
		}
		b.emit(&ir.Primitive{Name: prim, Args: []ir.Arg{{Expr: &ir.Const{Value: big.NewInt(int64(flID)), T: ir.Bits(32, false)}}}, Loc: loc})
		return nil
	case "truncate":
		b.emit(&ir.Primitive{Name: "truncate", Args: []ir.Arg{{Expr: b.argIR(c, 0)}}, Loc: loc})
		return nil
	case "assert", "assume":
		b.emit(&ir.Primitive{Name: name, Args: []ir.Arg{{Expr: b.argIR(c, 0)}}, Loc: loc})
		return nil
	case "log_msg":
		msg, _ := b.l.info.Values[c.Args[0]].(string)
		args := []ir.Arg{{Kind: ir.ArgString, Name: msg}}
		list := ir.Arg{Kind: ir.ArgExprList}
		if len(c.Args) > 1 && c.Args[1] != nil {
			dt := b.l.info.Types[c.Args[1]]
			list.List = b.flatten(b.exprAs(c.Args[1], dt), dt)
		}
		args = append(args, list)
		b.emit(&ir.Primitive{Name: "log_msg", Args: args, Loc: loc})
		return nil
	case "verify_checksum", "update_checksum", "verify_checksum_with_payload", "update_checksum_with_payload":
		if b.kind == kindChecksum {
			b.l.checksumCall(b, x, c)
			return nil
		}
		b.errorf(pos, "%s can only be called in the checksum controls", name)
		return nil
	}
	b.errorf(pos, "extern function %s is not supported by this target", name)
	return nil
}

func (b *body) constIndex(e ast.Expr) int {
	if v, ok := b.l.info.Values[e].(*big.Int); ok {
		return int(v.Int64())
	}
	b.errorf(e.Position(), "expected a constant")
	return 0
}

func (b *body) algorithm(e ast.Expr) string {
	if ev, ok := b.l.info.Values[e].(*types.EnumValue); ok {
		return ev.Member
	}
	b.errorf(e.Position(), "the hash algorithm must be a constant")
	return "crc32"
}

func (b *body) cloneKind(e ast.Expr) string {
	if ev, ok := b.l.info.Values[e].(*types.EnumValue); ok {
		return ev.Member
	}
	b.errorf(e.Position(), "the clone type must be a constant")
	return "I2E"
}

func (l *lowerer) newCalculation(algo string, data []ir.Expr, payload bool, loc ir.Source) *ir.Calculation {
	calc := &ir.Calculation{Name: uniqueCounted(l.calcNames, "calc"), Algorithm: algo, Loc: loc}
	for _, d := range data {
		calc.Inputs = append(calc.Inputs, ir.CalcInput{Expr: d})
	}
	if payload {
		calc.Inputs = append(calc.Inputs, ir.CalcInput{Payload: true})
	}
	l.prog.Calculations = append(l.prog.Calculations, calc)
	return calc
}

// learnList returns the learn list of a digest of type t over fields.
func (l *lowerer) learnList(t types.Type, fields []ir.Expr) *ir.LearnList {
	name := "digest"
	if st, ok := types.Underlying(t).(*types.Struct); ok && st.Name != "" {
		name = st.Name
	}
	for _, ll := range l.prog.LearnLists {
		if ll.Name == name && sameExprs(ll.Fields, fields) {
			return ll
		}
	}
	n := name
	taken := map[string]bool{}
	for _, ll := range l.prog.LearnLists {
		taken[ll.Name] = true
	}
	n = uniqueName(taken, n)
	ll := &ir.LearnList{ID: len(l.prog.LearnLists) + 1, Name: n, Fields: fields}
	l.prog.LearnLists = append(l.prog.LearnLists, ll)
	if st, ok := types.Underlying(t).(*types.Struct); ok {
		l.prog.Digests = append(l.prog.Digests, &ir.Digest{Name: n, LearnID: ll.ID, TypeSpec: l.typeSpec(st)})
	}
	return ll
}

func sameExprs(a, b []ir.Expr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		fa, ok1 := a[i].(*ir.FieldRef)
		fb, ok2 := b[i].(*ir.FieldRef)
		if !ok1 || !ok2 || fa.Header != fb.Header || fa.Field != fb.Field {
			return false
		}
	}
	return true
}

// fieldListByIndex creates the field list of a *_preserving_field_list
// call: the user metadata fields annotated @field_list(..., index, ...),
// in M's order. As p4c flattens M before it looks, a field inside a
// nested struct counts too, and so does every field of a struct-typed
// field so annotated. The index may be written as a constant's name.
func (l *lowerer) fieldListByIndex(index int) int {
	id := len(l.fieldLists) + 1
	fl := &ir.FieldList{ID: id, Name: uniqueName(l.fieldListNames(), "field_list"+itoa(index))}
	for _, leaf := range l.metaLeaves {
		f, ok := leaf.loc.(*fieldLoc)
		if !ok || !l.inFieldList(leaf.annos, index) {
			continue
		}
		for _, sf := range l.scalars.Fields {
			if sf.Name == f.field {
				fl.Fields = append(fl.Fields, &ir.FieldRef{Header: "scalars", Field: sf.Name, T: ir.Bits(sf.Width, sf.Signed)})
			}
		}
	}
	l.fieldLists[id] = fl
	return id
}

// inFieldList reports whether annotations put a field in field list index.
func (l *lowerer) inFieldList(annos ast.Annotations, index int) bool {
	for _, a := range annos {
		if a.Name != "field_list" {
			continue
		}
		for _, e := range a.Exprs {
			if v, ok := l.annotationConst(e); ok && v.IsInt64() && v.Int64() == int64(index) {
				return true
			}
		}
	}
	return false
}

// annotationConst is the value of an annotation argument that is an
// integer or names a top-level constant (annotations are not type
// checked; p4c folds such names to their values).
func (l *lowerer) annotationConst(e ast.Expr) (*big.Int, bool) {
	switch x := e.(type) {
	case *ast.IntLit:
		return x.Value, true
	case *ast.Ident:
		for _, d := range l.info.Program.Decls {
			if cd, ok := d.(*ast.ConstDecl); ok && cd.Name == x.Name {
				if v, ok := l.info.ConstValues[cd].(*big.Int); ok {
					return v, true
				}
			}
		}
	}
	return nil, false
}

func (l *lowerer) fieldListNames() map[string]bool {
	m := map[string]bool{}
	for _, fl := range l.fieldLists {
		m[fl.Name] = true
	}
	return m
}

// fieldListFromValue builds a field list from the data argument of the
// deprecated clone3/resubmit/recirculate.
func (l *lowerer) fieldListFromValue(b *body, e ast.Expr, t types.Type) int {
	if _, isVar := t.(*types.TypeVar); isVar || t == nil {
		t = l.info.Types[e]
	}
	v := b.exprAs(e, t)
	id := len(l.fieldLists) + 1
	fl := &ir.FieldList{ID: id, Name: uniqueName(l.fieldListNames(), "fl")}
	for _, x := range b.flatten(v, t) {
		if f, ok := x.(*ir.FieldRef); ok {
			fl.Fields = append(fl.Fields, f)
		}
	}
	l.fieldLists[id] = fl
	return id
}

func (b *body) externMethod(x *ast.CallExpr, c *types.Call, ei *externInst, loc ir.Source) any {
	method := c.Proto.Name
	b.l.noteTypeArgs(c)
	switch ei.typ.Decl.Name {
	case "counter":
		if method == "count" && ei.counter != nil {
			b.emit(&ir.Primitive{Name: "count", Args: []ir.Arg{{Kind: ir.ArgCounter, Name: ei.counter.Name}, {Expr: b.argIR(c, 0)}}, Loc: loc})
			return nil
		}
	case "direct_counter":
		if method == "count" {
			return nil // counted by the table on every hit
		}
	case "meter":
		if method == "execute_meter" && ei.meter != nil {
			idx := b.argIR(c, 0)
			dst, after := b.outField(c.Args[1], c.ParamTypes[1])
			b.emit(&ir.Primitive{Name: "execute_meter", Args: []ir.Arg{{Kind: ir.ArgMeter, Name: ei.meter.Name}, {Expr: idx}, {Expr: dst}}, Loc: loc})
			b.emit(after...)
			return nil
		}
	case "direct_meter":
		if method == "read" && ei.meter != nil {
			loc := b.lvalue(c.Args[0])
			f, ok := loc.(*fieldLoc)
			if !ok {
				b.errorf(x.Pos, "direct_meter.read() needs a field to write")
				return nil
			}
			ref := &ir.FieldRef{Header: f.hdr, Field: f.field, T: storageType(f.t)}
			if ei.meter.Result != nil && (ei.meter.Result.Header != ref.Header || ei.meter.Result.Field != ref.Field) {
				b.errorf(x.Pos, "direct meter %s is read into two different places", ei.name)
			}
			ei.meter.Result = ref
			return nil
		}
	case "register":
		if ei.register == nil {
			break
		}
		switch method {
		case "read":
			dst, after := b.outField(c.Args[0], c.ParamTypes[0])
			idx := b.argIR(c, 1)
			b.emit(&ir.Primitive{Name: "register_read", Args: []ir.Arg{{Expr: dst}, {Kind: ir.ArgRegister, Name: ei.register.Name}, {Expr: idx}}, Loc: loc})
			b.emit(after...)
			return nil
		case "write":
			idx := b.argIR(c, 0)
			val := b.argIR(c, 1)
			b.emit(&ir.Primitive{Name: "register_write", Args: []ir.Arg{{Kind: ir.ArgRegister, Name: ei.register.Name}, {Expr: idx}, {Expr: val}}, Loc: loc})
			return nil
		}
	}
	b.errorf(x.Pos, "%s.%s is not supported by this target", ei.typ.Decl.Name, method)
	return nil
}

// useAction records an action as visible to the control plane.
func (l *lowerer) useAction(ad *ast.ActionDecl, inst *blockInst) *controlAction {
	name := l.actionName(ad, inst)
	if ca, ok := l.controlByName[name]; ok {
		return ca
	}
	ca := &controlAction{name: name, decl: ad, annotations: renderAnnotations(ad.Annotations), explicitID: explicitID(ad.Annotations),
		block: l.block, seq: len(l.controlActions)}
	for _, p := range ad.Params {
		if p.Dir != ast.None {
			continue
		}
		t := l.info.DeclTypes[p]
		name := p.Name
		if n, ok := p.Annotations.StringArg("name"); ok {
			name = n
		}
		l.noteNamedType(t)
		param := ir.ActionParamDecl{Name: name, Width: l.p4rtWidth(t),
			Annotations: renderAnnotations(p.Annotations), TypeName: typeNameForP4Info(t), ExplicitID: explicitID(p.Annotations)}
		if w := types.Width(t); w != param.Width {
			param.DeviceWidth = w
		}
		ca.params = append(ca.params, param)
	}
	l.controlByName[name] = ca
	l.controlActions = append(l.controlActions, ca)
	return ca
}

// actionName is the fully qualified control-plane name of an action.
func (l *lowerer) actionName(ad *ast.ActionDecl, inst *blockInst) string {
	prefix := ""
	if inst != nil {
		prefix = inst.name + "."
	}
	if n, ok := ad.Annotations.StringArg("name"); ok {
		if len(n) > 0 && n[0] == '.' {
			return n[1:]
		}
		return prefix + n
	}
	return prefix + ad.Name
}

// noteTypeArgs records calls whose type arguments are structured (a
// tuple, struct or header): p4c then emits a type_info message, even an
// empty one.
func (l *lowerer) noteTypeArgs(c *types.Call) {
	for _, t := range c.TypeArgs {
		switch types.Underlying(t).(type) {
		case *types.Tuple, *types.Struct, *types.Stack:
			l.usesGeneric = true
		}
	}
}
