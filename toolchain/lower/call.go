package lower

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// call lowers a call; stmt is true when its value is not used.
func (b *body) call(x *ast.CallExpr, stmt bool) any {
	c := b.l.info.Calls[x]
	if c == nil {
		b.errorf(x.Pos, "internal: unresolved call")
		panic(bailout{})
	}
	switch c.Kind {
	case types.CallBuiltin:
		return b.builtin(x, c)
	case types.CallTableApply:
		if b.kind != kindControl {
			b.errorf(x.Pos, "tables can only be applied in a control's apply block")
			panic(bailout{})
		}
		ap := b.applyTable(x)
		return &applyVal{ap: ap}
	case types.CallAction:
		b.inlineAction(c.Action, c, x.Pos)
		return nil
	case types.CallFunction:
		return b.inlineFunction(c.Function, c, x.Pos)
	case types.CallExternFunction, types.CallExternMethod:
		return b.externCall(x, c, stmt)
	case types.CallBlockApply:
		b.applyBlock(x, c)
		return nil
	}
	b.errorf(x.Pos, "unsupported call")
	panic(bailout{})
}

func (b *body) builtin(x *ast.CallExpr, c *types.Call) any {
	recv := b.expr(c.Recv)
	switch c.Builtin {
	case "isValid":
		return &scalarVal{e: b.validOf(recv), t: &types.Bool{}}
	case "setValid", "setInvalid":
		valid := c.Builtin == "setValid"
		frag := exprText(x)
		switch r := recv.(type) {
		case *headerLoc, *dynHeader:
			b.emit(&ir.SetValid{Header: headerRefOf(r), Valid: valid, Loc: b.l.source(x.Pos, frag)})
			return nil
		}
	case "push_front", "pop_front":
		s, ok := recv.(*stackLoc)
		n, _ := b.l.info.Values[c.Args[0]].(*big.Int)
		if !ok || n == nil {
			break
		}
		if c.Builtin == "push_front" {
			b.emit(&ir.PushFront{Stack: s.name, Count: int(n.Int64()), Loc: b.l.source(x.Pos, exprText(x))})
		} else {
			b.emit(&ir.PopFront{Stack: s.name, Count: int(n.Int64()), Loc: b.l.source(x.Pos, exprText(x))})
		}
		return nil
	}
	b.errorf(x.Pos, "unsupported use of %s", c.Builtin)
	panic(bailout{})
}

// isConstant reports whether a value needs no copy to be stable.
func isConstant(v any) bool {
	switch x := v.(type) {
	case *scalarVal:
		switch x.e.(type) {
		case *ir.Const, *ir.BoolConst, *ir.ActionParam:
			return true
		}
	case *constVal:
		return true
	case *structVal:
		for _, f := range x.fields {
			if !isConstant(f) {
				return false
			}
		}
		return true
	case *tupleVal:
		for _, f := range x.elems {
			if !isConstant(f) {
				return false
			}
		}
		return true
	}
	return false
}

// bindParams implements copy-in for a call into callee and returns the
// copy-out statements (P4_16 §6.7: in and inout arguments are copied in
// left to right, out and inout ones copied back after the call).
//
// Copies of inout parameters the body never names are added to *unused;
// the caller settles them (settleUnusedCopies) once the body is lowered.
//
// The standard metadata is passed in place (mark_to_drop(s) must reach the
// architecture's own): that is a copy unless the body (or an action it
// calls) also names it another way, which standardInPlace checks once every
// parameter is bound; then it is copied after all.
func (b *body) bindParams(params []*ast.Param, ptypes []types.Type, args []ast.Expr, callee *env, pos scanner.Pos, unused *[]unusedCopy, calleeBody *ast.BlockStmt) []mstmt {
	var copyOut []mstmt
	var inPlace []standardParam
	for i, p := range params {
		var pt types.Type
		if i < len(ptypes) {
			pt = ptypes[i]
		}
		if pt == nil {
			pt = b.l.info.DeclTypes[p]
		}
		var arg ast.Expr
		if i < len(args) {
			arg = args[i]
		}
		if arg == nil {
			callee.set(p, b.l.alloc(pt, p.Name))
			continue
		}
		if _, ok := types.Underlying(pt).(*types.Extern); ok {
			callee.set(p, b.expr(arg))
			continue
		}
		switch p.Dir {
		case ast.In, ast.None:
			v := b.exprAs(arg, pt)
			if v == b.l.standard {
				callee.set(p, v)
				inPlace = append(inPlace, standardParam{p: p, t: pt})
				continue
			}
			if isConstant(v) {
				callee.set(p, v)
				continue
			}
			if _, ok := v.(*packetVal); ok {
				callee.set(p, v)
				continue
			}
			tmp := b.l.alloc(pt, p.Name)
			b.assign(tmp, v, pos, "")
			callee.set(p, tmp)
		case ast.Out:
			loc := b.lvalue(arg)
			if loc == b.l.standard {
				callee.set(p, loc)
				out := &mBlock{label: b.l.newLabel()}
				copyOut = append(copyOut, out)
				inPlace = append(inPlace, standardParam{p: p, t: pt, out: out})
				continue
			}
			tmp := b.l.alloc(pt, p.Name)
			b.invalidate(tmp)
			callee.set(p, tmp)
			if loc != nil {
				copyOut = append(copyOut, b.sub(func() { b.assign(loc, tmp, pos, "") })...)
			}
		case ast.InOut:
			loc := b.lvalue(arg)
			if loc == b.l.standard && b.l.isReferenced(p) {
				callee.set(p, loc)
				out := &mBlock{label: b.l.newLabel()}
				copyOut = append(copyOut, out)
				inPlace = append(inPlace, standardParam{p: p, t: pt, out: out})
				continue
			}
			if _, ok := loc.(*packetVal); ok {
				callee.set(p, loc)
				continue
			}
			tmp := b.l.alloc(pt, p.Name)
			callee.set(p, tmp)
			if !b.l.isReferenced(p) {
				// A body that never names the parameter leaves it as it
				// came in, so its copies change nothing unless the body
				// (or another copy-out) writes the argument's storage
				// another way, which the copy-out must then undo. The
				// copies are accesses of their own, and BMv2 aborts (an
				// uncaught std::out_of_range) on a header stack index out
				// of range, which P4_16 leaves undefined rather than
				// fatal; p4c drops them too (gauntlet_index_5-bmv2: an
				// empty action given h.h[index].a). So they are made
				// now and emptied by settleUnusedCopies once the body is
				// known. The argument is still evaluated above.
				in := &mBlock{label: b.l.newLabel(), body: b.sub(func() { b.assign(tmp, loc, pos, "") })}
				out := &mBlock{label: b.l.newLabel(), body: b.sub(func() { b.assign(loc, tmp, pos, "") })}
				b.emit(in)
				copyOut = append(copyOut, out)
				*unused = append(*unused, unusedCopy{loc: loc, in: in, out: out})
				continue
			}
			b.assign(tmp, loc, pos, "")
			copyOut = append(copyOut, b.sub(func() { b.assign(loc, tmp, pos, "") })...)
		}
	}
	for _, sp := range inPlace {
		if !b.l.namesOtherwise(calleeBody, sp.p, b.l.standard, callee, map[*ast.BlockStmt]bool{}) {
			continue
		}
		// copies made after the other copy-ins, which write only
		// their own temporaries, so the standard metadata is the same
		tmp := b.l.alloc(sp.t, sp.p.Name)
		if sp.p.Dir != ast.Out {
			b.assign(tmp, b.l.standard, pos, "")
		}
		callee.set(sp.p, tmp)
		if sp.out != nil {
			sp.out.body = b.sub(func() { b.assign(b.l.standard, tmp, pos, "") })
		}
	}
	return copyOut
}

// standardParam is a parameter bound to the standard metadata in place;
// out is its (so far empty) copy-out.
type standardParam struct {
	p   *ast.Param
	t   types.Type
	out *mBlock
}

// namesOtherwise reports whether body, or an action it calls, names a
// declaration other than p that denotes storage v in env ev.
func (l *lowerer) namesOtherwise(body *ast.BlockStmt, p *ast.Param, v any, ev *env, seen map[*ast.BlockStmt]bool) bool {
	if body == nil || seen[body] {
		return false
	}
	seen[body] = true
	for id, d := range l.info.Uses {
		if d == ast.Node(p) || !within(id.Pos, body) {
			continue
		}
		if got, ok := ev.lookup(d); ok && got == v {
			return true
		}
	}
	for x, c := range l.info.Calls {
		if c.Kind == types.CallAction && c.Action != nil && within(x.Pos, body) &&
			l.namesOtherwise(c.Action.Body, p, v, ev, seen) {
			return true
		}
	}
	return false
}

// within reports whether pos lies inside a block's braces.
func within(pos scanner.Pos, bl *ast.BlockStmt) bool {
	if pos.File != bl.Pos.File {
		return false
	}
	after := pos.Line > bl.Pos.Line || (pos.Line == bl.Pos.Line && pos.Col >= bl.Pos.Col)
	before := pos.Line < bl.End.Line || (pos.Line == bl.End.Line && pos.Col <= bl.End.Col)
	return after && before
}

// isReferenced reports whether any identifier names declaration d.
func (l *lowerer) isReferenced(d ast.Node) bool {
	if l.referenced == nil {
		l.referenced = map[ast.Node]bool{}
		for _, decl := range l.info.Uses {
			l.referenced[decl] = true
		}
	}
	return l.referenced[d]
}

// enterInline marks a function or action as being inlined; it is an error
// to inline it again inside itself. The returned function unmarks it.
func (b *body) enterInline(d ast.Node, name string, pos scanner.Pos) func() {
	if b.l.inlining == nil {
		b.l.inlining = map[ast.Node]bool{}
	}
	if b.l.inlining[d] {
		b.errorf(pos, "%s calls itself (recursion is not allowed)", name)
		panic(bailout{})
	}
	b.l.inlining[d] = true
	b.l.callStack = append(b.l.callStack, d)
	return func() {
		delete(b.l.inlining, d)
		b.l.callStack = b.l.callStack[:len(b.l.callStack)-1]
	}
}

// inAction reports whether the code being lowered is written in an
// action's body: the innermost call being inlined is an action's, or
// there is none and this is a table action's body. (Code of a function
// is not, even when an action calls the function.)
func (b *body) inAction() bool {
	if n := len(b.l.callStack); n > 0 {
		_, ok := b.l.callStack[n-1].(*ast.ActionDecl)
		return ok
	}
	return b.kind == kindAction
}

func (b *body) inlineFunction(fd *ast.FunctionDecl, c *types.Call, pos scanner.Pos) any {
	callee := newEnv(b.l.globalEnv)
	var unused []unusedCopy
	copyOut := b.bindParams(fd.Proto.Params, c.ParamTypes, c.Args, callee, pos, &unused, fd.Body)
	// marked only now: f(f(x)) evaluates the inner call first
	defer b.enterInline(fd, fd.Proto.Name, pos)()
	var retLoc any
	rt := c.Result
	if rt != nil {
		if _, void := rt.(*types.Void); !void {
			retLoc = b.l.alloc(rt, "retval")
		}
	}
	label := b.l.newLabel()
	sub := &body{l: b.l, inst: b.inst, env: callee, kind: b.kind, ps: b.ps,
		ret:        &retTarget{label: label, val: retLoc, t: rt},
		exitCopies: append(append([]mstmt{}, copyOut...), b.exitCopies...)}
	sub.block(fd.Body)
	settleUnusedCopies(unused, sub.out, copyOut)
	b.emit(&mBlock{label: label, body: sub.out})
	b.emit(copyOut...)
	return retLoc
}

// actionEnv is the environment an action's body sees: its control
// instance's, or the global one for top-level actions.
func (l *lowerer) actionEnv(ad *ast.ActionDecl, inst *blockInst) *env {
	if parent := l.info.ParentOf[ad]; parent != nil && inst != nil && parent == inst.decl {
		return inst.env
	}
	return l.globalEnv
}

// actionInst returns the instance an action belongs to (nil for
// top-level actions).
func (l *lowerer) actionInst(ad *ast.ActionDecl, inst *blockInst) *blockInst {
	if parent := l.info.ParentOf[ad]; parent != nil && inst != nil && parent == inst.decl {
		return inst
	}
	return nil
}

func (b *body) inlineAction(ad *ast.ActionDecl, c *types.Call, pos scanner.Pos) {
	if inst := b.l.actionInst(ad, b.inst); inst != nil || !b.inAction() {
		// A top-level action called only from other actions is not a
		// control-plane action: p4c inlines such calls before it copies
		// top-level actions into the controls that name them, so none
		// does, and P4Info leaves it out.
		b.l.useAction(ad, inst)
	}
	callee := newEnv(b.l.actionEnv(ad, b.inst))
	var unused []unusedCopy
	copyOut := b.bindParams(ad.Params, c.ParamTypes, c.Args, callee, pos, &unused, ad.Body)
	defer b.enterInline(ad, ad.Name, pos)()
	label := b.l.newLabel()
	sub := &body{l: b.l, inst: b.inst, env: callee, kind: b.kind, ps: b.ps,
		ret:        &retTarget{label: label},
		exitCopies: append(append([]mstmt{}, copyOut...), b.exitCopies...)}
	if sub.kind == kindControl {
		// an action cannot apply tables, but its body runs inside the
		// control's graph like any other statements
		sub.kind = kindControl
	}
	sub.block(ad.Body)
	settleUnusedCopies(unused, sub.out, copyOut)
	b.emit(&mBlock{label: label, body: sub.out})
	b.emit(copyOut...)
}

// applyBlock inlines the apply of a sub-control (or, in a parser, a
// sub-parser).
func (b *body) applyBlock(x *ast.CallExpr, c *types.Call) {
	recv := b.expr(c.Recv)
	sb, ok := recv.(*subBlock)
	if !ok {
		b.errorf(x.Pos, "cannot apply this value")
		panic(bailout{})
	}
	switch d := sb.decl.(type) {
	case *ast.ControlDecl:
		if b.kind != kindControl && b.kind != kindDeparser && b.kind != kindChecksum {
			b.errorf(x.Pos, "controls can only be applied from controls")
			panic(bailout{})
		}
		inst := b.l.instantiate(sb, b.inst)
		copyOut := b.bindBlockParams(d.Params, c.ParamTypes, c.Args, inst.env, x.Pos)
		label := b.l.newLabel()
		sub := &body{l: b.l, inst: inst, env: newEnv(inst.env), kind: b.kind,
			ret:        &retTarget{label: label},
			exitCopies: append(append([]mstmt{}, copyOut...), b.exitCopies...)}
		sub.controlBody(d)
		b.emit(&mBlock{label: label, body: sub.out})
		b.emit(copyOut...)
	case *ast.ParserDecl:
		if b.kind != kindParser {
			b.errorf(x.Pos, "parsers can only be applied from parsers")
			panic(bailout{})
		}
		b.applySubParser(sb, d, c, x)
	default:
		b.errorf(x.Pos, "cannot apply this value")
		panic(bailout{})
	}
}

// controlBody lowers a control's local variable initializers and its
// apply block.
func (b *body) controlBody(d *ast.ControlDecl) {
	for _, loc := range d.Locals {
		if v, ok := loc.(*ast.VarDecl); ok {
			t := b.l.info.DeclTypes[v]
			storage := b.l.alloc(t, v.Name)
			b.inst.env.set(v, storage)
			if v.Init != nil {
				b.assign(storage, b.exprAs(v.Init, t), v.Pos, v.Name)
			} else {
				b.invalidate(storage)
			}
		}
	}
	b.block(d.Body)
}

// instantiate creates a fresh instance of a sub-block for one apply.
func (l *lowerer) instantiate(sb *subBlock, parent *blockInst) *blockInst {
	// P4_16 forbids recursive instantiation: an instance declaration that
	// is being instantiated already would be instantiated forever. (The
	// same type may appear twice in the chain, passed as a constructor
	// argument to an instance of itself.)
	for p := parent; p != nil; p = p.parent {
		if p.site != nil && p.site == sb.inst {
			l.errorf(sb.pos, "%s instantiates itself (recursion is not allowed)", sb.decl.DeclName())
			panic(bailout{})
		}
	}
	inst := &blockInst{decl: sb.decl, parent: parent, site: sb.inst, name: sb.name, pos: sb.pos, env: newEnv(sb.ctor)}
	if parent != nil {
		inst.pipe = parent.pipe
	}
	if sb.applied == nil {
		sb.applied = map[*ast.TableDecl]*ir.Table{}
	}
	inst.applied = sb.applied
	inst.externs = sb.externs
	l.declareLocals(inst)
	sb.externs = inst.externs
	return inst
}

// declareLocals binds the constants, instances and value sets declared in
// a parser or control.
func (l *lowerer) declareLocals(inst *blockInst) {
	var locals []ast.Decl
	switch d := inst.decl.(type) {
	case *ast.ParserDecl:
		locals = d.Locals
	case *ast.ControlDecl:
		locals = d.Locals
	}
	if inst.applied == nil {
		inst.applied = map[*ast.TableDecl]*ir.Table{}
	}
	for _, d := range locals {
		switch x := d.(type) {
		case *ast.ConstDecl:
			inst.env.set(x, &constVal{v: l.info.ConstValues[x], t: l.info.DeclTypes[x]})
		case *ast.InstanceDecl:
			if inst.externs != nil {
				if v, ok := inst.externs[x]; ok {
					inst.env.set(x, v)
					continue
				}
			}
			v := l.declareInstance(inst, x, inst.env)
			if inst.externs == nil {
				inst.externs = map[*ast.InstanceDecl]any{}
			}
			inst.externs[x] = v
		case *ast.ValueSetDecl:
			l.declareValueSet(inst, x)
		case *ast.VarDecl:
			if _, isParser := inst.decl.(*ast.ParserDecl); isParser {
				t := l.info.DeclTypes[x]
				inst.env.set(x, l.alloc(t, x.Name))
			}
		}
	}
}

// ctorArg evaluates a constructor argument: a constant, or an instance.
func (l *lowerer) ctorArg(e ast.Expr, ev *env, prefix string) any {
	if e == nil {
		return nil // a left-out @optional parameter
	}
	if v, ok := l.info.Values[e]; ok {
		return &constVal{v: v, t: l.info.Types[e]}
	}
	switch x := e.(type) {
	case *ast.Ident:
		if v, ok := ev.lookup(l.info.Uses[x]); ok {
			return v
		}
	case *ast.CallExpr:
		c := l.info.Calls[x]
		if c != nil && c.Kind == types.CallConstructor && c.Block != nil {
			return &subBlock{decl: c.Block.Decl, pos: x.Pos, name: prefix, ctor: l.ctorEnv(c.Block.Decl, c.Args, ev, prefix)}
		}
	}
	l.errorf(e.Position(), "constructor argument must be a compile-time constant")
	return &constVal{v: big.NewInt(0), t: &types.InfInt{}}
}

func (l *lowerer) ctorEnv(decl ast.Decl, args []ast.Expr, ev *env, prefix string) *env {
	e := newEnv(nil)
	var params []*ast.Param
	switch d := decl.(type) {
	case *ast.ParserDecl:
		params = d.CtorParams
	case *ast.ControlDecl:
		params = d.CtorParams
	}
	for i, p := range params {
		if i < len(args) && args[i] != nil {
			e.set(p, l.ctorArg(args[i], ev, prefix+"."+p.Name))
		}
	}
	return e
}

// declareInstance creates what an instance declaration denotes.
func (l *lowerer) declareInstance(inst *blockInst, x *ast.InstanceDecl, ev *env) any {
	prefix := ""
	if inst != nil {
		prefix = inst.name + "."
	}
	name := prefix + x.Name
	if n, ok := x.Annotations.StringArg("name"); ok {
		if len(n) > 0 && n[0] == '.' {
			name = n[1:]
		} else {
			name = prefix + n
		}
	}
	t := l.info.DeclTypes[x]
	switch tt := t.(type) {
	case *types.Block:
		var args []ast.Expr
		if call := l.info.InstanceCalls[x]; call != nil {
			args = call.Args
		} else {
			for _, a := range x.Args {
				args = append(args, a.Value)
			}
		}
		sb := &subBlock{decl: tt.Decl, inst: x, pos: x.Pos, name: name, ctor: l.ctorEnv(tt.Decl, args, ev, name)}
		ev.set(x, sb)
		return sb
	case *types.Extern:
		ei := &externInst{decl: x, typ: tt, name: name, owner: inst}
		if call := l.info.InstanceCalls[x]; call != nil {
			for _, a := range call.Args {
				ei.args = append(ei.args, l.ctorArg(a, ev, name))
			}
		} else {
			for _, a := range x.Args {
				ei.args = append(ei.args, l.ctorArg(a.Value, ev, name))
			}
		}
		l.createExtern(ei)
		ev.set(x, ei)
		return ei
	}
	l.errorf(x.Pos, "cannot instantiate %s here", t)
	return nil
}

// bindBlockParams binds the parameters of a sub-parser or sub-control.
// Such a block can only reach its caller's data through its parameters, so
// when the arguments are distinct, fixed storage it works on them
// directly: that keeps what copies cannot carry (a header stack's next
// index) and saves the copies. Otherwise it falls back to copy-in and
// copy-out.
func (b *body) bindBlockParams(params []*ast.Param, ptypes []types.Type, args []ast.Expr, callee *env, pos scanner.Pos) []mstmt {
	vals := make([]any, len(params))
	alias := true
	var reads, writes regionSet
	keys := map[string]bool{}
	for i, p := range params {
		if i >= len(args) || args[i] == nil {
			continue
		}
		pt := b.l.info.DeclTypes[p]
		if i < len(ptypes) && ptypes[i] != nil {
			pt = ptypes[i]
		}
		if _, ok := types.Underlying(pt).(*types.Extern); ok {
			vals[i] = b.expr(args[i])
			continue
		}
		var v any
		if p.Dir == ast.Out || p.Dir == ast.InOut {
			v = b.lvalue(args[i])
		} else {
			v = b.exprAs(args[i], pt)
		}
		vals[i] = v
		if isConstant(v) {
			continue
		}
		if _, ok := v.(*packetVal); ok {
			continue
		}
		switch v.(type) {
		case *scalarVal, *structVal, *tupleVal:
			// a value computed from storage is read where the callee
			// uses it: it must not see the callee's writes
			r, ok := valueReads(v)
			if !ok {
				alias = false
			}
			reads.merge(&r)
		}
		if p.Dir == ast.Out || p.Dir == ast.InOut {
			w, ok := locRegions(v)
			if !ok {
				alias = false
			}
			writes.merge(&w)
		}
		ks, static := storageKeys(v)
		if !static {
			alias = false
		}
		for _, k := range ks {
			if keys[k] {
				alias = false
			}
			keys[k] = true
		}
	}
	if reads.overlaps(&writes) {
		alias = false
	}
	var copyOut []mstmt
	for i, p := range params {
		v := vals[i]
		pt := b.l.info.DeclTypes[p]
		if i < len(ptypes) && ptypes[i] != nil {
			pt = ptypes[i]
		}
		if i >= len(args) || args[i] == nil {
			callee.set(p, b.l.alloc(pt, p.Name))
			continue
		}
		if _, ok := types.Underlying(pt).(*types.Extern); ok || isConstant(v) || v == nil {
			callee.set(p, v)
			continue
		}
		if _, ok := v.(*packetVal); ok {
			callee.set(p, v)
			continue
		}
		if alias {
			callee.set(p, v)
			if p.Dir == ast.Out {
				b.invalidate(v)
			}
			continue
		}
		tmp := b.l.alloc(pt, p.Name)
		switch p.Dir {
		case ast.Out:
			b.invalidate(tmp)
			copyOut = append(copyOut, b.sub(func() { b.assign(v, tmp, pos, "") })...)
		case ast.InOut:
			b.assign(tmp, v, pos, "")
			copyOut = append(copyOut, b.sub(func() { b.assign(v, tmp, pos, "") })...)
		default:
			b.assign(tmp, v, pos, "")
		}
		callee.set(p, tmp)
	}
	return copyOut
}

// storageKeys names the storage a location occupies; static is false for
// locations chosen at run time.
func storageKeys(v any) (keys []string, static bool) {
	switch x := v.(type) {
	case *fieldLoc:
		if x.hdr == "scalars" {
			return []string{"f:" + x.field}, true
		}
		return []string{"h:" + x.hdr}, true
	case *headerLoc:
		return []string{"h:" + x.name}, true
	case *structLoc:
		static = true
		for _, f := range x.fields {
			k, s := storageKeys(f)
			keys = append(keys, k...)
			static = static && s
		}
		return keys, static
	case *stackLoc:
		keys = append(keys, "s:"+x.name)
		for _, e := range x.elems {
			k, _ := storageKeys(e)
			keys = append(keys, k...)
		}
		return keys, true
	case *unionLoc:
		for _, m := range x.members {
			keys = append(keys, "h:"+m.name)
		}
		return keys, true
	case *scalarVal, *structVal, *tupleVal:
		return nil, true
	}
	return nil, false
}
