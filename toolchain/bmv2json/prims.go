package bmv2json

import (
	"fmt"
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// Action bodies are flat lists of primitives in BMv2; structured control
// flow (if, loops, early return) becomes _jump and _jump_if_zero, whose
// targets are primitive indices (the list's length means "the end").

type flat struct {
	e     *emitter
	prims []object
	// patches records jumps whose target is not known yet.
	labels map[int][]int // Block label -> jumps to its end
	loops  []*loopCtx
	exits  []int // jumps to the end of the action
}

type loopCtx struct {
	breaks    []int
	continues []int
}

func (e *emitter) primitives(body []ir.Stmt) []any {
	f := &flat{e: e, labels: map[int][]int{}}
	f.stmts(body)
	end := len(f.prims)
	for _, j := range f.exits {
		f.setTarget(j, end)
	}
	out := make([]any, len(f.prims))
	for i, p := range f.prims {
		out[i] = p
	}
	return out
}

// jumpTarget is a primitive index, written as p4c writes it ("0x6").
func jumpTarget(i int) object { return obj("type", "hexstr", "value", fmt.Sprintf("0x%x", i)) }

func (f *flat) add(op string, params []any, loc ir.Source) int {
	o := obj("op", op, "parameters", params)
	if si := sourceInfo(loc); si != nil {
		o.add("source_info", si)
	}
	f.prims = append(f.prims, o)
	return len(f.prims) - 1
}

// setTarget patches the target of the jump at index i.
func (f *flat) setTarget(i, target int) {
	o := f.prims[i]
	params := o[1].val.([]any)
	params[len(params)-1] = jumpTarget(target)
}

func (f *flat) jump(loc ir.Source) int {
	return f.add("_jump", []any{jumpTarget(0)}, loc)
}

func (f *flat) jumpIfZero(cond ir.Expr, loc ir.Source) int {
	// the condition is converted to data: zero means false
	return f.add("_jump_if_zero", []any{f.e.param(&ir.BoolToBit{X: cond}), jumpTarget(0)}, loc)
}

func (f *flat) stmts(ss []ir.Stmt) {
	for _, s := range ss {
		f.stmt(s)
	}
}

func headerParam(e *emitter, h ir.HeaderRef) any {
	if h.Stack != "" {
		return obj("type", "expression", "value", e.stackElem(h.Stack, h.Index))
	}
	return obj("type", "header", "value", h.Header)
}

func (f *flat) stmt(s ir.Stmt) {
	e := f.e
	switch x := s.(type) {
	case *ir.Assign:
		if x.Dst.Type().Varbit {
			f.add("assign_VL", []any{e.param(x.Dst), e.param(x.Src)}, x.Loc)
			return
		}
		if x.Dst.Type().Bool {
			f.add("assign", []any{e.param(x.Dst), e.boolParam(x.Src)}, x.Loc)
			return
		}
		f.add("assign", []any{e.param(x.Dst), e.param(x.Src)}, x.Loc)
	case *ir.AssignHeader:
		f.add("assign_header", []any{headerParam(e, x.Dst), headerParam(e, x.Src)}, x.Loc)
	case *ir.AssignUnion:
		f.add("assign_union", []any{obj("type", "header_union", "value", x.Dst), obj("type", "header_union", "value", x.Src)}, x.Loc)
	case *ir.AssignStack:
		f.add("assign_header_stack", []any{obj("type", "header_stack", "value", x.Dst), obj("type", "header_stack", "value", x.Src)}, x.Loc)
	case *ir.SetValid:
		op := "remove_header"
		if x.Valid {
			op = "add_header"
		}
		f.add(op, []any{headerParam(e, x.Header)}, x.Loc)
	case *ir.PushFront:
		f.add("push", []any{obj("type", "header_stack", "value", x.Stack), hexNode(big.NewInt(int64(x.Count)), 4)}, x.Loc)
	case *ir.PopFront:
		f.add("pop", []any{obj("type", "header_stack", "value", x.Stack), hexNode(big.NewInt(int64(x.Count)), 4)}, x.Loc)
	case *ir.Primitive:
		var params []any
		for _, a := range x.Args {
			params = append(params, f.arg(x.Name, a))
		}
		if params == nil {
			params = []any{}
		}
		f.add(x.Name, params, x.Loc)
	case *ir.Exit:
		f.add("exit", []any{}, x.Loc)
		f.exits = append(f.exits, f.jump(ir.Source{}))
	case *ir.If:
		jz := f.jumpIfZero(x.Cond, x.Loc)
		f.stmts(x.Then)
		if len(x.Else) == 0 {
			f.setTarget(jz, len(f.prims))
			return
		}
		j := f.jump(ir.Source{})
		f.setTarget(jz, len(f.prims))
		f.stmts(x.Else)
		f.setTarget(j, len(f.prims))
	case *ir.Loop:
		top := len(f.prims)
		jz := f.jumpIfZero(x.Cond, ir.Source{})
		lc := &loopCtx{}
		f.loops = append(f.loops, lc)
		f.stmts(x.Body)
		f.loops = f.loops[:len(f.loops)-1]
		update := len(f.prims)
		f.stmts(x.Update)
		back := f.jump(ir.Source{})
		f.setTarget(back, top)
		end := len(f.prims)
		f.setTarget(jz, end)
		for _, b := range lc.breaks {
			f.setTarget(b, end)
		}
		for _, c := range lc.continues {
			f.setTarget(c, update)
		}
	case *ir.Break:
		if len(f.loops) == 0 {
			e.fail("break outside a loop")
			return
		}
		lc := f.loops[len(f.loops)-1]
		lc.breaks = append(lc.breaks, f.jump(ir.Source{}))
	case *ir.Continue:
		if len(f.loops) == 0 {
			e.fail("continue outside a loop")
			return
		}
		lc := f.loops[len(f.loops)-1]
		lc.continues = append(lc.continues, f.jump(ir.Source{}))
	case *ir.Block:
		f.stmts(x.Body)
		end := len(f.prims)
		for _, j := range f.labels[x.Label] {
			f.setTarget(j, end)
		}
		delete(f.labels, x.Label)
	case *ir.Leave:
		f.labels[x.Label] = append(f.labels[x.Label], f.jump(ir.Source{}))
	default:
		e.fail("statement %T is not allowed in an action", s)
	}
}

func (f *flat) arg(prim string, a ir.Arg) any {
	e := f.e
	switch a.Kind {
	case ir.ArgHeader:
		return obj("type", "header", "value", a.Name)
	case ir.ArgCounter:
		return obj("type", "counter_array", "value", a.Name)
	case ir.ArgMeter:
		return obj("type", "meter_array", "value", a.Name)
	case ir.ArgRegister:
		return obj("type", "register_array", "value", a.Name)
	case ir.ArgCalculation:
		return obj("type", "calculation", "value", a.Name)
	case ir.ArgFieldList, ir.ArgLearnList:
		return hexNode(big.NewInt(int64(a.Int)), 4)
	case ir.ArgString:
		return obj("type", "string", "value", a.Name)
	case ir.ArgStack:
		return obj("type", "header_stack", "value", a.Name)
	case ir.ArgExprList:
		vals := []any{}
		for _, x := range a.List {
			// each item is a parameter of its own to BMv2
			vals = append(vals, topLevel(e.data(x)))
		}
		return obj("type", "parameters_vector", "value", vals)
	}
	if prim == "assert" || prim == "assume" {
		return e.boolParam(a.Expr)
	}
	return e.param(a.Expr)
}
