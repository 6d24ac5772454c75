package lower

// Header stack elements chosen at run time (h[i] with i not a constant).
//
// P4_16 says an out-of-range index reads an unspecified value and writes
// nothing. BMv2 does not: its dereference_header_stack throws past the
// stack's end and simple_switch aborts. So, as p4c's BMv2 back end does
// today, every statement and condition that names an element by a run-time
// index becomes a chain over the stack's constant indexes: "if i == 0 the
// statement on h[0], else if i == 1 on h[1], ...". No dereference by a
// run-time index is left for BMv2 to throw on; out of range, a statement
// does nothing and a condition is false. In a control's graph the chain
// shares the condition's two successors; in an action body a condition's
// branches are repeated per index.
//
// Not rewritten (they keep the run-time dereference): loop conditions in
// actions, parser statements, and checksum and deparser field lists.

import (
	"math/big"
	"reflect"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// runtimeIndex is the first element of a stack chosen by a run-time index
// that an expression names.
type runtimeIndex struct {
	stack string
	index ir.Expr
}

// guardStackIndexes rewrites every action body and control condition of the
// program (see the file comment).
func (l *lowerer) guardStackIndexes() {
	stacks := map[string]*ir.Stack{}
	for _, s := range l.prog.Stacks {
		stacks[s.Name] = s
	}
	if len(stacks) == 0 {
		return
	}
	g := &indexGuard{stacks: stacks}
	for _, a := range l.prog.Actions {
		a.Body = g.stmts(a.Body)
	}
	for _, p := range l.prog.Pipelines {
		for _, c := range p.Conditionals {
			p.Conditionals = append(p.Conditionals, g.conditional(c, l.nextCondName)...)
		}
	}
}

func (l *lowerer) nextCondName() string {
	l.condNames++
	return "node_" + itoa(l.condNames)
}

type indexGuard struct {
	stacks map[string]*ir.Stack
}

// conditional turns c, if its condition names an element by a run-time
// index, into a chain: c itself tests index 0 (so every node that leads to
// c still does), and the conditionals it returns the others.
func (g *indexGuard) conditional(c *ir.Conditional, name func() string) []*ir.Conditional {
	ri, ok := g.find(c.Cond)
	if !ok {
		return nil
	}
	// built from the last index back, so each links to the next
	ks := g.indexes(ri)
	var added []*ir.Conditional
	next := c.False
	for i := len(ks) - 1; i > 0; i-- {
		nc := &ir.Conditional{Name: name(), Cond: g.condAt(c.Cond, ri, ks[i]), True: c.True, False: next, Loc: c.Loc}
		added = append(added, nc)
		next = nc
	}
	c.Cond, c.False = g.condAt(c.Cond, ri, ks[0]), next
	// the chain's conditions may name other run-time indexes
	out := added
	for _, nc := range append([]*ir.Conditional{c}, added...) {
		out = append(out, g.conditional(nc, name)...)
	}
	return out
}

// stmts rewrites a statement list.
func (g *indexGuard) stmts(ss []ir.Stmt) []ir.Stmt {
	if ss == nil {
		return nil
	}
	out := make([]ir.Stmt, 0, len(ss))
	for _, s := range ss {
		out = append(out, g.stmt(s))
	}
	return out
}

func (g *indexGuard) stmt(s ir.Stmt) ir.Stmt {
	switch x := s.(type) {
	case *ir.If:
		if ri, ok := g.find(x.Cond); ok {
			return g.chainIf(x, ri)
		}
		return &ir.If{Cond: x.Cond, Then: g.stmts(x.Then), Else: g.stmts(x.Else), Loc: x.Loc}
	case *ir.Loop:
		return &ir.Loop{Cond: x.Cond, Body: g.stmts(x.Body), Update: g.stmts(x.Update)}
	case *ir.Block:
		return &ir.Block{Label: x.Label, Body: g.stmts(x.Body)}
	}
	ri, ok := g.findStmt(s)
	if !ok {
		return s
	}
	var chain []ir.Stmt // the else branch of the index tested before
	ks := g.indexes(ri)
	for i := len(ks) - 1; i >= 0; i-- {
		k := ks[i]
		chain = []ir.Stmt{&ir.If{Cond: indexIs(ri.index, k), Then: []ir.Stmt{g.stmt(g.stmtAt(s, ri, k))}, Else: chain, Loc: stmtLoc(s)}}
	}
	return chain[0]
}

// chainIf is "if (i == 0 && cond[0]) then else if (i == 1 && cond[1]) then
// ... else els".
func (g *indexGuard) chainIf(x *ir.If, ri runtimeIndex) ir.Stmt {
	then, els := g.stmts(x.Then), g.stmts(x.Else)
	chain := els
	ks := g.indexes(ri)
	for i := len(ks) - 1; i >= 0; i-- {
		chain = []ir.Stmt{g.stmt(&ir.If{Cond: g.condAt(x.Cond, ri, ks[i]), Then: then, Else: chain, Loc: x.Loc})}
	}
	return chain[0]
}

// indexes are the constant indexes ri's index can take within the stack
// (never none: a stack has an element, and index 0 fits any width).
func (g *indexGuard) indexes(ri runtimeIndex) []int {
	n := len(g.stacks[ri.stack].Headers)
	t := ri.index.Type()
	var ks []int
	for k := 0; k < n; k++ {
		if t.Width > 0 && t.Width < 31 && k >= 1<<t.Width {
			break
		}
		ks = append(ks, k)
	}
	return ks
}

// condAt is "the index is k and cond holds of element k".
func (g *indexGuard) condAt(cond ir.Expr, ri runtimeIndex, k int) ir.Expr {
	return &ir.Binary{Op: "and", X: indexIs(ri.index, k), Y: g.at(cond, ri, k), T: ir.BoolType}
}

func indexIs(index ir.Expr, k int) ir.Expr {
	t := index.Type()
	return &ir.Binary{Op: "==", X: index, Y: &ir.Const{Value: big.NewInt(int64(k)), T: t}, T: ir.BoolType}
}

// find returns the first element an expression names by a run-time index.
func (g *indexGuard) find(x ir.Expr) (runtimeIndex, bool) {
	var found runtimeIndex
	ok := false
	walkIR(x, func(e ir.Expr) {
		if ok {
			return
		}
		switch v := e.(type) {
		case *ir.StackField:
			if _, known := g.stacks[v.Stack]; known {
				found, ok = runtimeIndex{v.Stack, v.Index}, true
			}
		case *ir.StackElemValid:
			if _, known := g.stacks[v.Stack]; known {
				found, ok = runtimeIndex{v.Stack, v.Index}, true
			}
		}
	})
	return found, ok
}

func (g *indexGuard) findRef(h ir.HeaderRef) (runtimeIndex, bool) {
	if h.Stack == "" || h.Index == nil {
		return runtimeIndex{}, false
	}
	if _, known := g.stacks[h.Stack]; !known {
		return runtimeIndex{}, false
	}
	return runtimeIndex{h.Stack, h.Index}, true
}

// findStmt returns the first run-time element a statement names.
func (g *indexGuard) findStmt(s ir.Stmt) (runtimeIndex, bool) {
	var exprs []ir.Expr
	var refs []ir.HeaderRef
	switch x := s.(type) {
	case *ir.Assign:
		exprs = []ir.Expr{x.Dst, x.Src}
	case *ir.AssignHeader:
		refs = []ir.HeaderRef{x.Dst, x.Src}
	case *ir.SetValid:
		refs = []ir.HeaderRef{x.Header}
	case *ir.Primitive:
		for _, a := range x.Args {
			if a.Expr != nil {
				exprs = append(exprs, a.Expr)
			}
			exprs = append(exprs, a.List...)
		}
	}
	for _, r := range refs {
		if ri, ok := g.findRef(r); ok {
			return ri, true
		}
	}
	for _, e := range exprs {
		if ri, ok := g.find(e); ok {
			return ri, true
		}
	}
	return runtimeIndex{}, false
}

// stmtAt is s with element ri.index of ri.stack named as element k.
func (g *indexGuard) stmtAt(s ir.Stmt, ri runtimeIndex, k int) ir.Stmt {
	switch x := s.(type) {
	case *ir.Assign:
		return &ir.Assign{Dst: g.at(x.Dst, ri, k), Src: g.at(x.Src, ri, k), Loc: x.Loc}
	case *ir.AssignHeader:
		return &ir.AssignHeader{Dst: g.refAt(x.Dst, ri, k), Src: g.refAt(x.Src, ri, k), Loc: x.Loc}
	case *ir.SetValid:
		return &ir.SetValid{Header: g.refAt(x.Header, ri, k), Valid: x.Valid, Loc: x.Loc}
	case *ir.Primitive:
		args := make([]ir.Arg, len(x.Args))
		for i, a := range x.Args {
			args[i] = a
			if a.Expr != nil {
				args[i].Expr = g.at(a.Expr, ri, k)
			}
			if a.List != nil {
				args[i].List = make([]ir.Expr, len(a.List))
				for j, e := range a.List {
					args[i].List[j] = g.at(e, ri, k)
				}
			}
		}
		return &ir.Primitive{Name: x.Name, Args: args, Loc: x.Loc}
	}
	return s
}

func (g *indexGuard) refAt(h ir.HeaderRef, ri runtimeIndex, k int) ir.HeaderRef {
	if h.Stack == ri.stack && h.Index != nil && sameExpr(h.Index, ri.index) {
		return ir.HeaderRef{Header: g.stacks[ri.stack].Headers[k].Name}
	}
	return h
}

// at is x with element ri.index of ri.stack named as element k.
func (g *indexGuard) at(x ir.Expr, ri runtimeIndex, k int) ir.Expr {
	elem := g.stacks[ri.stack].Headers[k].Name
	return mapIR(x, func(e ir.Expr) ir.Expr {
		switch v := e.(type) {
		case *ir.StackField:
			if v.Stack == ri.stack && sameExpr(v.Index, ri.index) {
				return &ir.FieldRef{Header: elem, Field: v.Field, T: v.T}
			}
		case *ir.StackElemValid:
			if v.Stack == ri.stack && sameExpr(v.Index, ri.index) {
				return &ir.Valid{Header: elem}
			}
		}
		return e
	})
}

func sameExpr(a, b ir.Expr) bool { return a == b || reflect.DeepEqual(a, b) }

func stmtLoc(s ir.Stmt) ir.Source {
	switch x := s.(type) {
	case *ir.Assign:
		return x.Loc
	case *ir.AssignHeader:
		return x.Loc
	case *ir.SetValid:
		return x.Loc
	case *ir.Primitive:
		return x.Loc
	}
	return ir.Source{}
}

// walkIR calls f on x and every expression inside it.
func walkIR(x ir.Expr, f func(ir.Expr)) {
	mapIR(x, func(e ir.Expr) ir.Expr { f(e); return e })
}

// mapIR rebuilds x bottom-up, replacing each node by what f returns for
// it (x itself is not changed: expressions may be shared).
func mapIR(x ir.Expr, f func(ir.Expr) ir.Expr) ir.Expr {
	if x == nil {
		return nil
	}
	m := func(e ir.Expr) ir.Expr { return mapIR(e, f) }
	switch v := x.(type) {
	case *ir.Unary:
		return f(&ir.Unary{Op: v.Op, X: m(v.X), T: v.T})
	case *ir.Binary:
		return f(&ir.Binary{Op: v.Op, X: m(v.X), Y: m(v.Y), T: v.T})
	case *ir.Mux:
		return f(&ir.Mux{Cond: m(v.Cond), Then: m(v.Then), Else: m(v.Else), T: v.T})
	case *ir.Truncate:
		return f(&ir.Truncate{X: m(v.X), T: v.T})
	case *ir.SignWrap:
		return f(&ir.SignWrap{X: m(v.X), T: v.T})
	case *ir.Saturate:
		return f(&ir.Saturate{X: m(v.X), T: v.T})
	case *ir.BoolToBit:
		return f(&ir.BoolToBit{X: m(v.X)})
	case *ir.BitToBool:
		return f(&ir.BitToBool{X: m(v.X)})
	case *ir.StackField:
		return f(&ir.StackField{Stack: v.Stack, Index: m(v.Index), Field: v.Field, FieldIndex: v.FieldIndex, T: v.T})
	case *ir.StackElemValid:
		return f(&ir.StackElemValid{Stack: v.Stack, Index: m(v.Index)})
	}
	return f(x)
}
