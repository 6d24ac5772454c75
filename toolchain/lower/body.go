package lower

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// Mid-level statements: straight-line code is ir.Stmt; control flow that
// still has to be placed (into a pipeline graph, an action with jumps, or
// parser states) uses the types below.
type mstmt any

type mIf struct {
	cond ir.Expr
	then []mstmt
	els  []mstmt
	pos  scanner.Pos
}

// mApply applies a table. When hitMiss is set, hit or miss runs after it;
// when cases are given, the case of the action that ran (or deflt).
type mApply struct {
	table      *ir.Table
	hitMiss    bool
	hit, miss  []mstmt
	cases      []applyCase
	hasCases   bool
	deflt      []mstmt
	pos        scanner.Pos
	keyPrelude []mstmt
}

type applyCase struct {
	actions []*ir.Action
	body    []mstmt
}

type mBlock struct {
	label int
	body  []mstmt
}

type mLeave struct{ label int }

type mLoop struct {
	cond   ir.Expr
	body   []mstmt
	update []mstmt
}

type mBreak struct{}
type mContinue struct{}

type mExit struct{ pos scanner.Pos }

// bodyKind says what kind of code a body builder produces.
type bodyKind int

const (
	kindControl  bodyKind = iota // a control's apply block: tables allowed
	kindAction                   // an action run by a table: straight-line
	kindParser                   // a parser state
	kindChecksum                 // a checksum control
	kindDeparser                 // a deparser
)

// retTarget is where `return` goes in an inlined body.
type retTarget struct {
	label int
	val   any // storage for the returned value, nil for void
	t     types.Type
}

// body accumulates the mid-level statements of one piece of code.
type body struct {
	l    *lowerer
	inst *blockInst
	env  *env
	out  []mstmt
	kind bodyKind
	ret  *retTarget
	// exitCopies are copy-out statements of the calls being inlined,
	// innermost first: exit still copies out (P4_16 §12.5 keeps
	// copy-out semantics on exit).
	exitCopies []mstmt
	loops      int
	// parser-only: the state being built, for sub-parser inlining.
	ps *parserState
	// deparser-only: the deparser being built.
	deparser *ir.Deparser
	// checksum controls: whether this is the verifying one.
	verifyChecksums bool
}

func (b *body) emit(s ...mstmt) { b.out = append(b.out, s...) }

// sub runs f with a fresh statement list and returns it.
func (b *body) sub(f func()) []mstmt {
	saved := b.out
	b.out = nil
	f()
	res := b.out
	b.out = saved
	return res
}

// child returns a builder for a nested scope sharing this one's output.
func (b *body) withEnv(e *env) *body {
	c := *b
	c.env = e
	c.out = nil
	return &c
}

func (b *body) errorf(pos scanner.Pos, format string, args ...any) {
	b.l.errorf(pos, format, args...)
}

func (l *lowerer) newLabel() int {
	l.labels++
	return l.labels
}

func (b *body) block(blk *ast.BlockStmt) {
	saved := b.env
	b.env = newEnv(b.env)
	for _, s := range blk.Stmts {
		b.stmt(s)
	}
	b.env = saved
}

func (b *body) stmt(s ast.Stmt) {
	if p := s.Position(); p.IsValid() {
		b.l.lastPos = p
	}
	switch x := s.(type) {
	case *ast.BlockStmt:
		b.block(x)
	case *ast.EmptyStmt:
	case *ast.AssignStmt:
		b.assignStmt(x)
	case *ast.CallStmt:
		b.call(x.Call, true)
	case *ast.IfStmt:
		b.ifStmt(x)
	case *ast.ExitStmt:
		if b.kind == kindParser || b.kind == kindDeparser || b.kind == kindChecksum {
			b.errorf(x.Pos, "exit is not supported here")
			return
		}
		b.emit(b.exitCopies...)
		b.emit(&mExit{pos: x.Pos})
	case *ast.ReturnStmt:
		if b.ret == nil {
			b.errorf(x.Pos, "return is not supported here")
			return
		}
		if x.Value != nil && b.ret.val != nil {
			v := b.exprAs(x.Value, b.ret.t)
			b.assign(b.ret.val, v, x.Pos, "return")
		}
		b.emit(&mLeave{label: b.ret.label})
	case *ast.BreakStmt:
		b.emit(&mBreak{})
	case *ast.ContinueStmt:
		b.emit(&mContinue{})
	case *ast.DeclStmt:
		b.localDecl(x.Decl)
	case *ast.SwitchStmt:
		b.switchStmt(x)
	case *ast.ForStmt:
		b.forStmt(x)
	case *ast.ForInStmt:
		b.forInStmt(x)
	default:
		b.errorf(s.Position(), "unsupported statement")
	}
}

func (b *body) localDecl(d ast.Decl) {
	switch x := d.(type) {
	case *ast.VarDecl:
		t := b.l.info.DeclTypes[x]
		loc := b.l.alloc(t, x.Name)
		b.env.set(x, loc)
		if x.Init != nil {
			v := b.exprAs(x.Init, t)
			b.assign(loc, v, x.Pos, x.Name+" = ...")
		} else {
			b.invalidate(loc)
		}
	case *ast.ConstDecl:
		b.env.set(x, &constVal{v: b.l.info.ConstValues[x], t: b.l.info.DeclTypes[x]})
	case *ast.InstanceDecl:
		b.l.declareInstance(b.inst, x, b.env)
	default:
		b.errorf(d.Position(), "unsupported declaration")
	}
}

// invalidate makes headers in a freshly declared variable invalid, as
// P4_16 requires of uninitialized header variables.
func (b *body) invalidate(loc any) {
	switch v := loc.(type) {
	case *headerLoc:
		b.emit(&ir.SetValid{Header: ir.HeaderRef{Header: v.name}, Valid: false})
	case *structLoc:
		for _, f := range v.fields {
			b.invalidate(f)
		}
	case *stackLoc:
		for _, e := range v.elems {
			b.invalidate(e)
		}
	case *unionLoc:
		for _, m := range v.members {
			b.invalidate(m)
		}
	}
}

func (b *body) assignStmt(x *ast.AssignStmt) {
	lt := b.l.info.Types[x.LHS]
	dst := b.lvalue(x.LHS)
	if x.Op != scanner.Assign {
		// a op= b is a = a op b, with a evaluated once.
		cur := b.read(dst, lt)
		y := b.exprAs(x.RHS, lt)
		v := b.binaryOp(x.Op, &scalarVal{e: cur, t: lt}, y, lt, x.Pos)
		b.assign(dst, v, x.Pos, "")
		return
	}
	v := b.exprAs(x.RHS, lt)
	b.assign(dst, v, x.Pos, "")
}

// applyInCond recognizes `t.apply().hit`, `t.apply().miss` and their
// negations, returning the apply call and whether the condition means
// "hit".
func (b *body) applyInCond(e ast.Expr) (*ast.CallExpr, bool, bool) {
	neg := false
	for {
		u, ok := e.(*ast.UnaryExpr)
		if !ok || u.Op != scanner.Not {
			break
		}
		neg = !neg
		e = u.X
	}
	m, ok := e.(*ast.MemberExpr)
	if !ok || (m.Name != "hit" && m.Name != "miss") {
		return nil, false, false
	}
	call, ok := m.X.(*ast.CallExpr)
	if !ok {
		return nil, false, false
	}
	if c := b.l.info.Calls[call]; c == nil || c.Kind != types.CallTableApply {
		return nil, false, false
	}
	hit := m.Name == "hit"
	if neg {
		hit = !hit
	}
	return call, hit, true
}

func (b *body) ifStmt(x *ast.IfStmt) {
	if b.kind == kindControl {
		if call, hit, ok := b.applyInCond(x.Cond); ok {
			ap := b.applyTable(call)
			if ap == nil {
				return
			}
			then := b.sub(func() { b.scoped(x.Then) })
			var els []mstmt
			if x.Else != nil {
				els = b.sub(func() { b.scoped(x.Else) })
			}
			ap.hitMiss = true
			if hit {
				ap.hit, ap.miss = then, els
			} else {
				ap.hit, ap.miss = els, then
			}
			return
		}
	}
	if v, ok := b.l.info.Values[x.Cond].(bool); ok {
		// a constant condition: only the live branch is lowered
		if v {
			b.scoped(x.Then)
		} else if x.Else != nil {
			b.scoped(x.Else)
		}
		return
	}
	cond := b.cond(x.Cond)
	then := b.sub(func() { b.scoped(x.Then) })
	var els []mstmt
	if x.Else != nil {
		els = b.sub(func() { b.scoped(x.Else) })
	}
	b.emit(&mIf{cond: cond, then: then, els: els, pos: x.Pos})
}

// scoped lowers a statement in its own scope.
func (b *body) scoped(s ast.Stmt) {
	saved := b.env
	b.env = newEnv(b.env)
	b.stmt(s)
	b.env = saved
}

func (b *body) switchStmt(x *ast.SwitchStmt) {
	t := b.l.info.Types[x.Expr]
	if _, ok := t.(*types.ActionEnum); ok {
		m, ok := x.Expr.(*ast.MemberExpr)
		var call *ast.CallExpr
		if ok {
			call, _ = m.X.(*ast.CallExpr)
		}
		if call == nil || b.kind != kindControl {
			b.errorf(x.Pos, "switch on action_run must apply a table directly")
			return
		}
		ap := b.applyTable(call)
		if ap == nil {
			return
		}
		ap.hasCases = true
		var pending []*ir.Action
		for _, cs := range x.Cases {
			if cs.Default {
				ap.deflt = b.sub(func() { b.scoped(cs.Body) })
				continue
			}
			for _, lbl := range cs.Labels {
				id, ok := lbl.(*ast.Ident)
				if !ok {
					continue
				}
				if a := b.l.tableActionByName(ap.table, id); a != nil {
					pending = append(pending, a)
				}
			}
			if cs.Body == nil {
				continue // falls through to the next case's body
			}
			body := b.sub(func() { b.scoped(cs.Body) })
			ap.cases = append(ap.cases, applyCase{actions: pending, body: body})
			pending = nil
		}
		if len(pending) > 0 {
			ap.cases = append(ap.cases, applyCase{actions: pending})
		}
		return
	}
	// switch on a value: a chain of comparisons; labels without a body
	// share the next body (P4_16 §12.7).
	v := b.exprAs(x.Expr, t)
	sel := b.snapshot(v, t)
	var chain func(i int) []mstmt
	chain = func(i int) []mstmt {
		if i >= len(x.Cases) {
			return nil
		}
		var conds []ir.Expr
		j := i
		for ; j < len(x.Cases); j++ {
			cs := x.Cases[j]
			if cs.Default {
				return b.sub(func() {
					if cs.Body != nil {
						b.scoped(cs.Body)
					} else {
						// default falls through to the next body
						for k := j + 1; k < len(x.Cases); k++ {
							if x.Cases[k].Body != nil {
								b.scoped(x.Cases[k].Body)
								break
							}
						}
					}
				})
			}
			for _, lbl := range cs.Labels {
				lv := b.exprAs(lbl, t)
				conds = append(conds, &ir.Binary{Op: "==", X: sel, Y: b.read(lv, t), T: ir.BoolType})
			}
			if cs.Body != nil {
				break
			}
		}
		if j >= len(x.Cases) {
			return nil
		}
		var cond ir.Expr
		for _, c := range conds {
			if cond == nil {
				cond = c
			} else {
				cond = &ir.Binary{Op: "or", X: cond, Y: c, T: ir.BoolType}
			}
		}
		then := b.sub(func() { b.scoped(x.Cases[j].Body) })
		rest := chain(j + 1)
		if cond == nil {
			return then
		}
		return []mstmt{&mIf{cond: cond, then: then, els: rest, pos: x.Cases[j].Pos}}
	}
	b.emit(chain(0)...)
}

// tableActionByName finds the lowered action of a table named by a switch
// label.
func (l *lowerer) tableActionByName(t *ir.Table, id *ast.Ident) *ir.Action {
	decl, _ := l.info.Uses[id].(*ast.ActionDecl)
	for _, ar := range t.Actions {
		if ar.Action != nil && l.actionDecl[ar.Action] == decl && decl != nil {
			return ar.Action
		}
	}
	for _, ar := range t.Actions {
		if ar.Action != nil && shortName(ar.Action.Name) == id.Name {
			return ar.Action
		}
	}
	return nil
}

func (b *body) forStmt(x *ast.ForStmt) {
	saved := b.env
	b.env = newEnv(b.env)
	defer func() { b.env = saved }()
	for _, s := range x.Init {
		b.stmt(s)
	}
	var cond ir.Expr = &ir.BoolConst{Value: true}
	var condPrelude []mstmt
	if x.Cond != nil {
		condPrelude = b.sub(func() { cond = b.cond(x.Cond) })
	}
	b.loops++
	body := b.sub(func() { b.scoped(x.Body) })
	update := b.sub(func() {
		for _, s := range x.Update {
			b.stmt(s)
		}
	})
	b.loops--
	if len(condPrelude) > 0 {
		// the condition needs statements: evaluate it into a flag at the
		// top of every iteration.
		flag := b.l.newScalar("loop_cond", &types.Bool{})
		set := append(append([]mstmt{}, condPrelude...), &ir.Assign{Dst: flagRef(flag), Src: &ir.BoolToBit{X: cond}})
		b.emit(set...)
		body = append([]mstmt{}, body...)
		update = append(append([]mstmt{}, update...), set...)
		cond = &ir.BitToBool{X: flagRef(flag)}
	}
	b.emit(&mLoop{cond: cond, body: body, update: update})
}

func flagRef(f *fieldLoc) *ir.FieldRef {
	return &ir.FieldRef{Header: f.hdr, Field: f.field, T: ir.Bits(1, false)}
}

func (b *body) forInStmt(x *ast.ForInStmt) {
	if _, isStack := types.Underlying(b.l.info.Types[x.Range]).(*types.Stack); isStack {
		b.forInStack(x)
		return
	}
	r, ok := x.Range.(*ast.RangeExpr)
	if !ok {
		b.errorf(x.Pos, "for-in loops are only supported over ranges lo .. hi")
		return
	}
	saved := b.env
	b.env = newEnv(b.env)
	defer func() { b.env = saved }()
	var loc any
	var t types.Type
	if x.Decl != nil {
		t = b.l.info.DeclTypes[x.Decl]
		loc = b.l.alloc(t, x.Decl.Name)
		b.env.set(x.Decl, loc)
	} else {
		t = b.l.info.Types[x.Var]
		loc = b.lvalue(x.Var)
	}
	lo := b.exprAs(r.Lo, t)
	hi := b.snapshot(b.exprAs(r.Hi, t), t)
	b.assign(loc, lo, x.Pos, "")
	cur := b.read(loc, t)
	cond := &ir.Binary{Op: "<=", X: cur, Y: hi, T: ir.BoolType}
	b.loops++
	body := b.sub(func() { b.scoped(x.Body) })
	b.loops--
	it := irType(t)
	// stop before wrapping around when hi is the largest value
	done := b.l.newScalar("loop_done", &types.Bool{})
	b.emit(&ir.Assign{Dst: flagRef(done), Src: &ir.Const{Value: big.NewInt(0), T: ir.Bits(1, false)}})
	next := &ir.Binary{Op: "+", X: cur, Y: &ir.Const{Value: big.NewInt(1), T: it}, T: it}
	update := []mstmt{
		&mIf{cond: &ir.Binary{Op: "==", X: cur, Y: hi, T: ir.BoolType},
			then: []mstmt{&ir.Assign{Dst: flagRef(done), Src: &ir.Const{Value: big.NewInt(1), T: ir.Bits(1, false)}}},
			els:  []mstmt{&ir.Assign{Dst: b.irLoc(loc), Src: wrapArith(next, it)}}},
	}
	full := &ir.Binary{Op: "and", X: &ir.Unary{Op: ir.OpNot, X: &ir.BitToBool{X: flagRef(done)}, T: ir.BoolType}, Y: cond, T: ir.BoolType}
	b.emit(&mLoop{cond: full, body: body, update: update})
}

// forInStack lowers `for (T e in stack)`: the loop variable is a copy of
// each element in turn, from index 0 to the stack's size - 1, valid or
// not. A hidden index counts the iterations, so break and continue work
// as in any other loop.
func (b *body) forInStack(x *ast.ForInStmt) {
	st, ok := b.expr(x.Range).(*stackLoc)
	if !ok {
		b.errorf(x.Range.Position(), "for-in over a header stack needs a stack in storage")
		return
	}
	saved := b.env
	b.env = newEnv(b.env)
	defer func() { b.env = saved }()
	var loc any
	if x.Decl != nil {
		loc = b.l.alloc(b.l.info.DeclTypes[x.Decl], x.Decl.Name)
		b.env.set(x.Decl, loc)
	} else {
		loc = b.lvalue(x.Var)
	}
	it := ir.Bits(32, false)
	idx := b.l.newScalar("loop_index", &types.Bits{Width: 32})
	b.emit(&ir.Assign{Dst: &ir.FieldRef{Header: idx.hdr, Field: idx.field, T: it}, Src: &ir.Const{Value: big.NewInt(0), T: it}})
	cur := &ir.FieldRef{Header: idx.hdr, Field: idx.field, T: it}
	cond := &ir.Binary{Op: "<", X: cur, Y: &ir.Const{Value: big.NewInt(int64(len(st.elems))), T: it}, T: ir.BoolType}
	b.loops++
	body := b.sub(func() {
		b.assign(loc, &dynHeader{stack: st, index: cur}, x.Pos, "")
		b.scoped(x.Body)
	})
	b.loops--
	next := &ir.Binary{Op: "+", X: cur, Y: &ir.Const{Value: big.NewInt(1), T: it}, T: it}
	update := []mstmt{&ir.Assign{Dst: &ir.FieldRef{Header: idx.hdr, Field: idx.field, T: it}, Src: wrapArith(next, it)}}
	b.emit(&mLoop{cond: cond, body: body, update: update})
}

// irLoc is the IR expression of a scalar location.
func (b *body) irLoc(loc any) ir.Expr {
	switch v := loc.(type) {
	case *fieldLoc:
		return &ir.FieldRef{Header: v.hdr, Field: v.field, T: storageType(v.t)}
	case *dynFieldLoc:
		return b.dynField(v)
	}
	b.errorf(scanner.Pos{}, "internal: not a scalar location")
	return &ir.Const{Value: big.NewInt(0), T: ir.Bits(1, false)}
}
