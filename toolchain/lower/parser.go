package lower

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// parserState is the IR state a parser body builder is filling.
type parserState struct {
	pb *parserBuilder
}

// mParserCall ends the current state with a jump to a sub-parser's start
// state; parsing continues in cont when the sub-parser accepts.
type mParserCall struct {
	entry string
	cont  *ir.ParseState
}

type parserBuilder struct {
	l      *lowerer
	p      *ir.Parser
	names  map[string]bool
	states map[string]*ir.ParseState
	// leaveTo maps the label of a block being emitted (an inlined
	// function's body) to the state after it, where a return goes.
	leaveTo map[int]*ir.ParseState
}

func (pb *parserBuilder) newState(name string, loc ir.Source) *ir.ParseState {
	st := &ir.ParseState{Name: uniqueName(pb.names, name), Loc: loc}
	pb.p.States = append(pb.p.States, st)
	return st
}

func (l *lowerer) lowerParser(inst *blockInst) *ir.Parser {
	p := &ir.Parser{Name: "parser", Init: "start"}
	pb := &parserBuilder{l: l, p: p, names: map[string]bool{}}
	d := inst.decl.(*ast.ParserDecl)
	// local variable initializers run before the start state
	var init []mstmt
	b0 := &body{l: l, inst: inst, env: inst.env, kind: kindParser, ps: &parserState{pb: pb}}
	for _, loc := range d.Locals {
		if v, ok := loc.(*ast.VarDecl); ok {
			storage, _ := inst.env.lookup(v)
			if v.Init != nil {
				t := l.info.DeclTypes[v]
				b0.assign(storage, b0.exprAs(v.Init, t), v.Pos, v.Name)
			} else {
				b0.invalidate(storage)
			}
		}
	}
	init = b0.out
	start := pb.lowerInstance(inst, d, "", "", init)
	p.Init = start
	return p
}

// lowerInstance lowers the states of one parser instance. prefix renames
// the states of inlined sub-parsers; accept is the state that accept
// continues to ("" for the real accept). It returns the entry state name.
func (pb *parserBuilder) lowerInstance(inst *blockInst, d *ast.ParserDecl, prefix, accept string, prelude []mstmt) string {
	l := pb.l
	names := map[*ast.ParserState]*ir.ParseState{}
	for _, st := range d.States {
		name := st.Name
		if prefix != "" {
			name = prefix + "_" + st.Name
		}
		names[st] = pb.newState(name, l.source(st.Pos, st.Name))
	}
	target := func(id *ast.Ident) string {
		st, _ := l.info.Uses[id].(*ast.ParserState)
		switch {
		case st == l.info.AcceptState:
			return accept
		case st == l.info.RejectState:
			return ir.RejectState
		case st != nil && names[st] != nil:
			return names[st].Name
		}
		l.errorf(id.Pos, "unknown state %s", id.Name)
		return ir.RejectState
	}
	entry := ""
	for _, st := range d.States {
		irs := names[st]
		if st.Name == "start" {
			entry = irs.Name
		}
		b := &body{l: l, inst: inst, env: newEnv(inst.env), kind: kindParser, ps: &parserState{pb: pb}}
		if st.Name == "start" {
			b.emit(prelude...)
		}
		for _, s := range st.Stmts {
			b.stmt(s)
		}
		// select keys may need statements, which belong to this state
		var keys []ir.Expr
		var cases []*ast.SelectCase
		var keyTypes []types.Type
		if st.Transition != nil && st.Transition.Select != nil {
			sel := st.Transition.Select
			for _, k := range sel.Keys {
				kt := l.info.Types[k]
				keys = append(keys, b.selectKey(k, kt))
				keyTypes = append(keyTypes, kt)
			}
			cases = sel.Cases
		}
		last := pb.emitOps(b.out, irs)
		if last == nil {
			// every path left an enclosing block: cannot happen for a
			// state's own statements, but keep the graph well formed
			last = pb.newState(irs.Name+"_end", ir.Source{})
		}
		switch {
		case st.Transition == nil:
			last.Transitions = []ir.Transition{{Default: true, Next: ir.RejectState}}
		case st.Transition.Next != nil:
			last.Transitions = []ir.Transition{{Default: true, Next: target(st.Transition.Next)}}
		default:
			last.Key = keys
			hasDefault := false
			for _, cs := range cases {
				tr := pb.transition(b, cs.Keyset, keyTypes)
				tr.Next = target(cs.State)
				last.Transitions = append(last.Transitions, tr)
				if tr.Default {
					hasDefault = true
					break
				}
			}
			if !hasDefault {
				// no case matched: reject with error.NoMatch (P4_16 §13.6)
				last.Transitions = append(last.Transitions, ir.Transition{Default: true, Next: pb.noMatchState()})
			}
		}
	}
	if entry == "" {
		l.errorf(d.Pos, "parser %s has no start state", d.Name)
	}
	return entry
}

// noMatchState returns a state that rejects with error.NoMatch.
func (pb *parserBuilder) noMatchState() string {
	if st, ok := pb.states["\x00nomatch"]; ok {
		return st.Name
	}
	if pb.states == nil {
		pb.states = map[string]*ir.ParseState{}
	}
	st := pb.newState("noMatch", ir.Source{})
	code := 0
	for i, n := range pb.l.info.Errors {
		if n == "NoMatch" {
			code = i
		}
	}
	st.Ops = append(st.Ops, &ir.Verify{Cond: &ir.BoolConst{Value: false}, Error: code})
	st.Transitions = []ir.Transition{{Default: true, Next: ir.RejectState}}
	pb.states["\x00nomatch"] = st
	return st.Name
}

// selectKey lowers a select key to something a transition can match on:
// a field, the last element of a stack, or a lookahead; anything else is
// first computed into a field.
func (b *body) selectKey(e ast.Expr, t types.Type) ir.Expr {
	v := b.exprAs(e, t)
	if f, ok := v.(*fieldLoc); ok {
		return &ir.FieldRef{Header: f.hdr, Field: f.field, T: storageType(f.t)}
	}
	if sv, ok := v.(*scalarVal); ok {
		switch sv.e.(type) {
		case *ir.LastField, *ir.Lookahead:
			return sv.e
		}
	}
	tmp := b.l.newScalar("tmp", t)
	b.assign(tmp, v, e.Position(), "")
	return &ir.FieldRef{Header: tmp.hdr, Field: tmp.field, T: storageType(t)}
}

// transition lowers a select case keyset.
func (pb *parserBuilder) transition(b *body, ks ast.Expr, keyTypes []types.Type) ir.Transition {
	l := pb.l
	var elems []ast.Expr
	switch x := ks.(type) {
	case *ast.DefaultExpr, *ast.DontCareExpr:
		return ir.Transition{Default: true}
	case *ast.ListExpr:
		if len(keyTypes) == 1 && len(x.Elems) == 1 {
			elems = x.Elems
		} else {
			elems = x.Elems
		}
	default:
		// a value set matches the whole key
		if id, ok := ks.(*ast.Ident); ok {
			if vs, ok := l.info.Uses[id].(*ast.ValueSetDecl); ok {
				v, _ := b.env.lookup(vs)
				if ivs, ok := v.(*ir.ValueSet); ok {
					return ir.Transition{ValueSet: ivs.Name}
				}
			}
		}
		elems = []ast.Expr{ks}
	}
	tr := ir.Transition{}
	allWild := true
	for i, el := range elems {
		w := 0
		if i < len(keyTypes) {
			w = types.Width(keyTypes[i])
		}
		ke := ir.KeysetElem{Width: w}
		switch x := el.(type) {
		case *ast.DefaultExpr, *ast.DontCareExpr:
			ke.Wildcard = true
		case *ast.MaskExpr:
			v, ok1 := l.intValue(x.Value)
			m, ok2 := l.intValue(x.Mask)
			if !ok1 || !ok2 {
				l.errorf(el.Position(), "select cases must be constants")
				continue
			}
			ke.Value = unsignedW(v, w)
			ke.Mask = unsignedW(m, w)
			allWild = false
		case *ast.RangeExpr:
			lo, ok1 := l.intValue(x.Lo)
			hi, ok2 := l.intValue(x.Hi)
			if !ok1 || !ok2 {
				l.errorf(el.Position(), "select cases must be constants")
				continue
			}
			ke.Value = unsignedW(lo, w)
			ke.Hi = unsignedW(hi, w)
			allWild = false
		default:
			v, ok := l.intValue(el)
			if !ok {
				l.errorf(el.Position(), "select cases must be constants")
				continue
			}
			ke.Value = unsignedW(v, w)
			allWild = false
		}
		tr.Keys = append(tr.Keys, ke)
	}
	if allWild {
		return ir.Transition{Default: true}
	}
	return tr
}

func unsignedW(v *big.Int, w int) *big.Int {
	if w <= 0 {
		return new(big.Int).Set(v)
	}
	return types.Normalize(v, &types.Bits{Width: w})
}

// emitOps places mid-level statements into parser states, splitting
// states at if statements and sub-parser calls; it returns the state that
// the statements end in, or nil when every path leaves through a return
// (an mLeave of an enclosing block).
func (pb *parserBuilder) emitOps(ms []mstmt, cur *ir.ParseState) *ir.ParseState {
	l := pb.l
	for i, m := range ms {
		switch x := m.(type) {
		case ir.Stmt:
			cur.Ops = append(cur.Ops, x)
		case *mBlock:
			body := x.body
			if n := len(body); n > 0 {
				if lv, ok := body[n-1].(*mLeave); ok && lv.label == x.label {
					body = body[:n-1]
				}
			}
			if !containsLeave(body, x.label) {
				cur = pb.emitOps(body, cur)
				continue
			}
			// a return before the end of an inlined function: the parse
			// graph jumps to a state after the function's statements
			end := pb.newState(cur.Name+"_ret", ir.Source{})
			if pb.leaveTo == nil {
				pb.leaveTo = map[int]*ir.ParseState{}
			}
			pb.leaveTo[x.label] = end
			if last := pb.emitOps(body, cur); last != nil {
				last.Transitions = []ir.Transition{{Default: true, Next: end.Name}}
			}
			delete(pb.leaveTo, x.label)
			cur = end
		case *mParserCall:
			cur.Transitions = []ir.Transition{{Default: true, Next: x.entry}}
			cur = x.cont
		case *mIf:
			flag := l.newScalar("cond", &types.Bool{})
			cur.Ops = append(cur.Ops, &ir.Assign{Dst: flagRef(flag), Src: toStorage(x.cond)})
			then := pb.newState(cur.Name+"_then", ir.Source{})
			els := pb.newState(cur.Name+"_else", ir.Source{})
			cur.Key = []ir.Expr{flagRef(flag)}
			cur.Transitions = []ir.Transition{
				{Keys: []ir.KeysetElem{{Value: big.NewInt(1), Width: 1}}, Next: then.Name},
				{Default: true, Next: els.Name},
			}
			endThen := pb.emitOps(x.then, then)
			endElse := pb.emitOps(x.els, els)
			if endThen == nil && endElse == nil {
				return nil // both branches returned
			}
			join := pb.newState(cur.Name+"_join", ir.Source{})
			for _, e := range []*ir.ParseState{endThen, endElse} {
				if e != nil {
					e.Transitions = []ir.Transition{{Default: true, Next: join.Name}}
				}
			}
			cur = join
		case *mLeave:
			if to, ok := pb.leaveTo[x.label]; ok {
				cur.Transitions = []ir.Transition{{Default: true, Next: to.Name}}
				return nil
			}
			if i != len(ms)-1 {
				l.errorf(scanner.Pos{}, "return in a parser is not supported here")
			}
		default:
			l.errorf(scanner.Pos{}, "this statement is not supported in a parser")
		}
	}
	return cur
}

func containsLeave(ms []mstmt, label int) bool {
	for _, m := range ms {
		switch x := m.(type) {
		case *mLeave:
			if x.label == label {
				return true
			}
		case *mIf:
			if containsLeave(x.then, label) || containsLeave(x.els, label) {
				return true
			}
		case *mBlock:
			if containsLeave(x.body, label) {
				return true
			}
		}
	}
	return false
}

// applySubParser inlines a sub-parser: its states are copied under a new
// prefix, accept continues in a fresh state of the caller.
func (b *body) applySubParser(sb *subBlock, d *ast.ParserDecl, c *types.Call, x *ast.CallExpr) {
	l := b.l
	pb := b.ps.pb
	inst := l.instantiate(sb, b.inst)
	copyOut := b.bindBlockParams(d.Params, c.ParamTypes, c.Args, inst.env, x.Pos)
	// parser locals and their initializers
	var prelude []mstmt
	bl := &body{l: l, inst: inst, env: inst.env, kind: kindParser, ps: b.ps}
	for _, loc := range d.Locals {
		if v, ok := loc.(*ast.VarDecl); ok {
			storage, _ := inst.env.lookup(v)
			if v.Init != nil {
				t := l.info.DeclTypes[v]
				bl.assign(storage, bl.exprAs(v.Init, t), v.Pos, v.Name)
			} else {
				bl.invalidate(storage)
			}
		}
	}
	prelude = bl.out
	sb.applies++
	prefix := d.Name
	if sb.inst != nil {
		prefix = d.Name
	}
	cont := pb.newState(prefix+"_accept", ir.Source{})
	entry := pb.lowerInstance(inst, d, uniqueName(pb.names, prefix), cont.Name, prelude)
	// the prefix was reserved as a state name only to make it unique
	b.emit(&mParserCall{entry: entry, cont: cont})
	b.emit(copyOut...)
}

// packetCall lowers packet_in and packet_out methods.
func (b *body) packetCall(x *ast.CallExpr, c *types.Call, stmt bool) any {
	l := b.l
	method := c.Proto.Name
	loc := l.source(x.Pos, exprText(x))
	switch method {
	case "extract":
		if b.kind != kindParser {
			b.errorf(x.Pos, "extract can only be called in a parser")
			return nil
		}
		target := b.lvalue(c.Args[0])
		ex := &ir.Extract{Loc: loc}
		if len(c.Args) > 1 && c.Args[1] != nil {
			// BMv2 reads the size from a field or constant
			ex.VarbitBits = b.snapshot(&scalarVal{e: b.argIR(c, 1), t: c.ParamTypes[1]}, c.ParamTypes[1])
		}
		switch t := target.(type) {
		case *headerLoc:
			ex.Header = t.name
		case *nextElem:
			ex.Stack = t.stack.name
		case *unionNext:
			ex.Stack = t.stack.name
			ex.Member = t.member
		case *unionLoc:
			b.errorf(x.Pos, "extract into a header union: extract one of its members")
			return nil
		default:
			// extract into a copy, then assign (e.g. an out parameter)
			pt := c.ParamTypes[0]
			st, ok := types.Underlying(pt).(*types.Struct)
			if !ok || st.Kind != ast.StructKindHeader {
				b.errorf(x.Pos, "extract needs a header")
				return nil
			}
			tmp := l.newHeader("tmp_hdr", st)
			ex.Header = tmp.name
			b.emit(ex)
			b.assign(target, tmp, x.Pos, "")
			return nil
		}
		b.emit(ex)
		return nil
	case "lookahead":
		if types.IsStruct(types.Underlying(c.Result)) {
			l.usesGeneric = true
		}
		if b.kind != kindParser {
			b.errorf(x.Pos, "lookahead can only be called in a parser")
			return nil
		}
		rt := c.Result
		w := types.Width(rt)
		switch types.Underlying(rt).(type) {
		case *types.Struct, *types.Stack:
			// a lookahead of a header or struct: read its bits into a
			// temporary of that type, field by field (headers, also
			// in stacks, become valid)
			tmp := l.alloc(rt, "tmp")
			look := &ir.Lookahead{Offset: 0, Width: w}
			whole := l.newScalar("tmp", &types.Bits{Width: w})
			b.emit(&ir.Assign{Dst: &ir.FieldRef{Header: whole.hdr, Field: whole.field, T: ir.Bits(w, false)}, Src: look})
			src := &ir.FieldRef{Header: whole.hdr, Field: whole.field, T: ir.Bits(w, false)}
			b.unpackBits(tmp, rt, src, w, x.Pos)
			return tmp
		}
		// BMv2 reads ahead only into a field (a "set" from a lookahead),
		// so the bits go into a temporary first
		tmp := l.newScalar("lookahead", &types.Bits{Width: w})
		ref := &ir.FieldRef{Header: tmp.hdr, Field: tmp.field, T: ir.Bits(w, false)}
		b.emit(&ir.Assign{Dst: ref, Src: &ir.Lookahead{Offset: 0, Width: w}, Loc: loc})
		return &scalarVal{e: castIR(ref, &types.Bits{Width: w}, rt), t: rt}
	case "advance":
		if b.kind != kindParser {
			b.errorf(x.Pos, "advance can only be called in a parser")
			return nil
		}
		bits := b.snapshot(&scalarVal{e: b.argIR(c, 0), t: c.ParamTypes[0]}, c.ParamTypes[0])
		b.emit(&ir.Advance{Bits: bits, Loc: loc})
		return nil
	case "length":
		b.errorf(x.Pos, "packet_in.length() is not supported by this target")
		return &scalarVal{e: &ir.Const{Value: big.NewInt(0), T: ir.Bits(32, false)}, t: &types.Bits{Width: 32}}
	case "emit":
		if b.kind != kindDeparser {
			b.errorf(x.Pos, "emit can only be called in a deparser")
			return nil
		}
		v := b.expr(c.Args[0])
		b.emitOrder(v, x.Pos)
		return nil
	}
	b.errorf(x.Pos, "unsupported packet method %s", method)
	return nil
}

// declareValueSet creates a parser value set.
func (l *lowerer) declareValueSet(inst *blockInst, x *ast.ValueSetDecl) {
	vt, _ := l.info.DeclTypes[x].(*types.ValueSet)
	vs := &ir.ValueSet{Name: l.declName(x, x.Annotations, inst), Annotations: renderAnnotations(x.Annotations),
		ExplicitID: explicitID(x.Annotations), Loc: l.source(x.Pos, x.Name)}
	if v, ok := l.info.Values[x.Size].(*big.Int); ok {
		vs.Size = int(v.Int64())
	}
	if vt != nil {
		switch et := types.Underlying(vt.Elem).(type) {
		case *types.Struct:
			for _, f := range et.Fields {
				w := types.Width(f.Type)
				vs.Widths = append(vs.Widths, w)
				mf := ir.MatchField{Name: f.Name, Width: w, Match: ir.MatchExact, ExplicitID: explicitID(f.Annotations)}
				if n, ok := f.Annotations.StringArg("name"); ok {
					mf.Name = n
				}
				for _, a := range f.Annotations {
					switch a.Name {
					case "match":
						if len(a.Exprs) == 1 {
							if id, ok := a.Exprs[0].(*ast.Ident); ok {
								mf.Match = ir.MatchKind(id.Name)
							}
						}
					case "name", "id", "brief", "description":
					default:
						mf.Annotations = append(mf.Annotations, renderAnnotation(a))
					}
				}
				vs.MatchFields = append(vs.MatchFields, mf)
			}
		case *types.Tuple:
			for i, e := range et.Elems {
				w := types.Width(e)
				vs.Widths = append(vs.Widths, w)
				vs.MatchFields = append(vs.MatchFields, ir.MatchField{Name: "f" + itoa(i), Width: w, Match: ir.MatchExact})
			}
		default:
			w := types.Width(vt.Elem)
			vs.Widths = []int{w}
		}
	}
	inst.env.set(x, vs)
	l.prog.ValueSets = append(l.prog.ValueSets, vs)
}

// unpackBits assigns to dst, of type t, the bits of src that end below
// bit hi (exclusive), the first field in the most significant bits, as
// P4_16 lays out a header or struct it reads from a packet. It returns
// where the bits of what follows end.
func (b *body) unpackBits(dst any, t types.Type, src ir.Expr, hi int, pos scanner.Pos) int {
	switch tt := types.Underlying(t).(type) {
	case *types.Struct:
		if h, ok := dst.(*headerLoc); ok {
			b.emit(&ir.SetValid{Header: ir.HeaderRef{Header: h.name}, Valid: true})
		}
		for i, f := range tt.Fields {
			hi = b.unpackBits(b.memberVal(dst, tt, i), f.Type, src, hi, pos)
		}
		return hi
	case *types.Stack:
		if sl, ok := dst.(*stackLoc); ok {
			for _, e := range sl.elems {
				hi = b.unpackBits(e, tt.Elem, src, hi, pos)
			}
			return hi
		}
	default:
		fw := types.Width(t)
		fv := sliceIR(src, hi-1, hi-fw)
		b.assign(dst, &scalarVal{e: castIR(fv, &types.Bits{Width: fw}, t), t: t}, pos, "")
		return hi - fw
	}
	b.errorf(pos, "cannot read %s ahead", t)
	panic(bailout{})
}
