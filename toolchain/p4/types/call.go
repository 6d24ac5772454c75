package types

import (
	"fmt"
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

func (c *Checker) call(x *ast.CallExpr, s *scope) Type {
	switch f := x.Fun.(type) {
	case *ast.MemberExpr:
		return c.methodCall(x, f, s)
	case *ast.Ident:
		sc := s
		if f.Global {
			sc = s.global()
		}
		ds := sc.lookup(f.Name)
		if len(ds) == 0 {
			c.resolveErrorf(f.Pos, "%s: undeclared identifier", f.Name)
			c.exprArgs(x, s)
			return &Void{}
		}
		switch d := ds[0].(type) {
		case *ast.ActionDecl:
			c.info.Uses[f] = d
			c.info.Types[f] = &Action{Decl: d}
			call := &Call{Kind: CallAction, Action: d}
			c.bindArgs(call, d.Params, x.Args, nil, x.Pos, s)
			c.info.Calls[x] = call
			if c.ctx.parser != nil {
				c.errorf(x.Pos, "actions cannot be called from a parser")
			}
			return &Void{}
		case *ast.FunctionDecl, *ast.ExternFuncDecl:
			var protos []*ast.FunctionProto
			byProto := map[*ast.FunctionProto]ast.Node{}
			for _, dd := range ds {
				switch y := dd.(type) {
				case *ast.FunctionDecl:
					protos = append(protos, y.Proto)
					byProto[y.Proto] = y
				case *ast.ExternFuncDecl:
					protos = append(protos, y.Proto)
					byProto[y.Proto] = y
				}
			}
			fp := pickOverload(protos, x.Args)
			if fp == nil {
				c.errorf(x.Pos, "no overload of %s takes %d arguments", f.Name, len(x.Args))
				c.exprArgs(x, s)
				return &Void{}
			}
			decl := byProto[fp]
			c.info.Uses[f] = decl
			c.info.Types[f] = &Function{Proto: fp}
			call := &Call{Proto: fp}
			if fd, ok := decl.(*ast.FunctionDecl); ok {
				call.Kind = CallFunction
				call.Function = fd
			} else {
				call.Kind = CallExternFunction
			}
			env := c.explicitTypeArgs(fp.TypeParams, x.TypeArgs, x.Pos, s)
			c.bindArgs(call, fp.Params, x.Args, env, x.Pos, s)
			call.Result = Subst(c.info.TypeExprs[fp.ReturnType], call.TypeArgs)
			c.info.Calls[x] = call
			if call.Kind == CallExternFunction && fp.Name == "static_assert" {
				c.staticAssert(x)
			}
			return call.Result
		}
		// a constructor call: Type(args), e.g. the arguments of main
		t := c.expr(f, s)
		if tt, ok := t.(*TypeOfType); ok {
			return c.constructorCall(x, tt.T, s)
		}
		c.errorf(f.Pos, "%s is not callable", f.Name)
		c.exprArgs(x, s)
		return &Void{}
	}
	c.errorf(x.Pos, "expression is not callable")
	c.exprArgs(x, s)
	return &Void{}
}

// staticAssert evaluates core.p4's static_assert(check[, message]) while
// checking: the condition must be a compile-time constant, a false one is
// an error, and the call's value is true, so that it can initialize a
// constant (const bool ok = static_assert(...)).
func (c *Checker) staticAssert(x *ast.CallExpr) {
	if len(x.Args) == 0 {
		return
	}
	v, ok := c.info.Values[x.Args[0].Value].(bool)
	if !ok {
		c.errorf(x.Args[0].Value.Position(), "static_assert: the condition is not a compile-time constant")
		return
	}
	if !v {
		msg := "static_assert failed"
		if len(x.Args) > 1 {
			if m, ok := c.info.Values[x.Args[1].Value].(string); ok {
				msg += ": " + m
			}
		}
		c.errorf(x.Pos, "%s", msg)
		return
	}
	c.setValue(x, true)
}

func (c *Checker) exprArgs(x *ast.CallExpr, s *scope) {
	for _, a := range x.Args {
		c.expr(a.Value, s)
	}
}

func (c *Checker) explicitTypeArgs(tps []*ast.TypeParam, targs []ast.Type, pos scanner.Pos, s *scope) map[*ast.TypeParam]Type {
	env := map[*ast.TypeParam]Type{}
	if len(targs) == 0 {
		return env
	}
	if len(targs) != len(tps) {
		c.errorf(pos, "expected %d type arguments, got %d", len(tps), len(targs))
		return env
	}
	for i, ta := range targs {
		t := c.resolveType(ta, s)
		if _, dc := t.(*DontCare); dc {
			continue
		}
		env[tps[i]] = t
	}
	return env
}

func (c *Checker) constructorCall(x *ast.CallExpr, t Type, s *scope) Type {
	call := &Call{Kind: CallConstructor}
	switch b := t.(type) {
	case *Block:
		ctorParams, ok := blockCtorParams(b)
		if !ok {
			c.errorf(x.Pos, "%s has no implementation to instantiate", b.Name)
			return &Void{}
		}
		call.Block = b
		c.bindArgs(call, ctorParams, x.Args, nil, x.Pos, s)
		c.info.Calls[x] = call
		return b
	case *Extern:
		var ctors []*ast.FunctionProto
		for _, m := range b.Decl.Methods {
			if m.ReturnType == nil {
				ctors = append(ctors, m)
			}
		}
		ctor := pickOverload(ctors, x.Args)
		if ctor == nil {
			c.errorf(x.Pos, "%s has no constructor taking %d arguments", b.Decl.Name, len(x.Args))
			return &Void{}
		}
		call.Proto = ctor
		call.Extern = b
		env := map[*ast.TypeParam]Type{}
		c.bindArgs(call, ctor.Params, x.Args, env, x.Pos, s)
		c.info.Calls[x] = call
		return b
	case *Package:
		call.Package = b
		c.bindArgs(call, b.Decl.Params, x.Args, nil, x.Pos, s)
		c.info.Calls[x] = call
		return b
	}
	c.errorf(x.Pos, "%s cannot be constructed", t)
	return &Void{}
}

// sizeBuiltins are the methods every fixed-size type has (P4_16 §8.10).
var sizeBuiltins = map[string]bool{
	"minSizeInBits": true, "minSizeInBytes": true, "maxSizeInBits": true, "maxSizeInBytes": true,
}

func (c *Checker) methodCall(x *ast.CallExpr, f *ast.MemberExpr, s *scope) Type {
	rt := c.expr(f.X, s)
	call := &Call{Recv: f.X}
	c.info.Calls[x] = call
	noArgs := func() {
		if len(x.Args) != 0 {
			c.errorf(x.Pos, "%s takes no arguments", f.Name)
		}
	}
	if tt, ok := rt.(*TypeOfType); ok {
		if sizeBuiltins[f.Name] {
			noArgs()
			call.Kind = CallBuiltin
			call.Builtin = f.Name
			c.setValue(x, sizeOf(tt.T, f.Name))
			return &InfInt{}
		}
		b, isBlock := tt.T.(*Block)
		if !isBlock || f.Name != "apply" {
			c.errorf(f.Pos, "%s has no method %s", tt.T, f.Name)
			return &Void{}
		}
		inst := c.directInstance(b, f, s)
		if inst == nil {
			c.exprArgs(x, s)
			return &Void{}
		}
		rt = c.info.DeclTypes[inst]
		call.Recv = f.X
	}
	if sizeBuiltins[f.Name] {
		noArgs()
		call.Kind = CallBuiltin
		call.Builtin = f.Name
		c.setValue(x, sizeOf(rt, f.Name))
		return &InfInt{}
	}
	switch t := Underlying(rt).(type) {
	case *Struct:
		if t.Kind == ast.StructKindHeader || t.Kind == ast.StructKindUnion {
			switch f.Name {
			case "isValid":
				noArgs()
				call.Kind = CallBuiltin
				call.Builtin = f.Name
				return &Bool{}
			case "setValid", "setInvalid":
				if t.Kind == ast.StructKindUnion {
					break
				}
				noArgs()
				call.Kind = CallBuiltin
				call.Builtin = f.Name
				c.checkLValue(f.X, s)
				return &Void{}
			}
		}
	case *Stack:
		switch f.Name {
		case "push_front", "pop_front":
			call.Kind = CallBuiltin
			call.Builtin = f.Name
			if len(x.Args) != 1 {
				c.errorf(x.Pos, "%s takes one argument", f.Name)
				return &Void{}
			}
			c.expr(x.Args[0].Value, s)
			c.convert(x.Args[0].Value, &InfInt{})
			if v, ok := c.info.Values[x.Args[0].Value].(*big.Int); !ok || v.Sign() < 0 {
				c.errorf(x.Args[0].Pos, "%s needs a non-negative constant count", f.Name)
			}
			call.Args = []ast.Expr{x.Args[0].Value}
			c.checkLValue(f.X, s)
			return &Void{}
		}
	case *Table:
		if f.Name == "apply" {
			noArgs()
			call.Kind = CallTableApply
			call.Table = t.Decl
			if c.ctx.control == nil {
				c.errorf(x.Pos, "tables can only be applied in a control")
			}
			if c.ctx.action != nil {
				c.errorf(x.Pos, "tables cannot be applied from an action")
			}
			return &ApplyResult{Table: t.Decl}
		}
	case *Block:
		if f.Name == "apply" {
			call.Kind = CallBlockApply
			call.Block = t
			c.bindArgs(call, t.Params, x.Args, nil, x.Pos, s)
			return &Void{}
		}
	case *Extern:
		var cands []*ast.FunctionProto
		for _, m := range t.Decl.Methods {
			if m.Name == f.Name && m.ReturnType != nil {
				cands = append(cands, m)
			}
		}
		if len(cands) == 0 {
			break
		}
		fp := pickOverload(cands, x.Args)
		if fp == nil {
			c.errorf(x.Pos, "no overload of %s.%s takes %d arguments", t.Decl.Name, f.Name, len(x.Args))
			c.exprArgs(x, s)
			return &Void{}
		}
		call.Kind = CallExternMethod
		call.Proto = fp
		call.Extern = t
		env := c.explicitTypeArgs(fp.TypeParams, x.TypeArgs, x.Pos, s)
		for i, tp := range t.Decl.TypeParams {
			if i < len(t.Args) && t.Args[i] != nil {
				env[tp] = t.Args[i]
			}
		}
		c.bindArgs(call, fp.Params, x.Args, env, x.Pos, s)
		call.Result = Subst(c.info.TypeExprs[fp.ReturnType], call.TypeArgs)
		if _, ok := call.Result.(*TypeVar); ok {
			c.errorf(x.Pos, "cannot infer the result type of %s; give it as a type argument", f.Name)
		}
		return call.Result
	}
	c.errorf(f.Pos, "%s has no method %s", rt, f.Name)
	c.exprArgs(x, s)
	return &Void{}
}

// directInstance turns a direct invocation of a parser or control type
// (P4_16 §15.1, `T.apply(args)` with no instance declared) into an
// instance of T local to the enclosing parser or control, one per call
// site, and points the call's receiver at it. Like p4c, the instance takes
// the type's name as its control-plane name (@name("T")), so externs in T
// are named as if T had been instantiated under its own name.
func (c *Checker) directInstance(b *Block, f *ast.MemberExpr, s *scope) *ast.InstanceDecl {
	ctorParams, ok := blockCtorParams(b)
	if !ok {
		c.errorf(f.Pos, "%s is a type without implementation and cannot be applied", b.Name)
		return nil
	}
	if len(ctorParams) > 0 {
		c.errorf(f.Pos, "%s has constructor parameters; instantiate it to apply it", b.Name)
		return nil
	}
	var locals *[]ast.Decl
	var owner ast.Decl
	switch {
	case c.ctx.action != nil || c.ctx.function != nil:
	case c.ctx.control != nil:
		locals, owner = &c.ctx.control.Locals, c.ctx.control
	case c.ctx.parser != nil:
		locals, owner = &c.ctx.parser.Locals, c.ctx.parser
	}
	if locals == nil {
		c.errorf(f.Pos, "%s can only be applied directly in a parser or control", b.Name)
		return nil
	}
	taken := map[string]bool{}
	cpNames := map[string]bool{}
	for _, d := range *locals {
		if in, ok := d.(*ast.InstanceDecl); ok {
			taken[in.Name] = true
			if n, ok := in.Annotations.StringArg("name"); ok {
				cpNames[n] = true
			}
		}
	}
	name := b.Name + "_inst"
	for i := 0; taken[name]; i++ {
		name = fmt.Sprintf("%s_inst_%d", b.Name, i)
	}
	cpName := b.Name
	for i := 0; cpNames[cpName]; i++ {
		cpName = fmt.Sprintf("%s_%d", b.Name, i)
	}
	inst := &ast.InstanceDecl{
		Pos:  f.Pos,
		Type: &ast.NamedType{Pos: f.Pos, Name: b.Name, Global: true},
		Name: name,
		Annotations: ast.Annotations{{Pos: f.Pos, Name: "name",
			Exprs: []ast.Expr{&ast.StringLit{Pos: f.Pos, Value: cpName}}}},
	}
	*locals = append(*locals, inst)
	c.info.ParentOf[inst] = owner
	c.instanceDecl(inst, s)
	if _, ok := c.info.DeclTypes[inst]; !ok {
		return nil
	}
	id := &ast.Ident{Pos: f.X.Position(), Name: name}
	c.info.Uses[id] = inst
	c.info.Types[id] = c.info.DeclTypes[inst]
	f.X = id
	return inst
}

// sizeOf computes minSizeInBits and friends for a type.
func sizeOf(t Type, which string) *big.Int {
	var bits int
	switch which {
	case "minSizeInBits", "minSizeInBytes":
		bits = minWidth(t)
	default:
		bits = Width(t)
	}
	if which == "minSizeInBytes" || which == "maxSizeInBytes" {
		return big.NewInt(int64((bits + 7) / 8))
	}
	return big.NewInt(int64(bits))
}

func minWidth(t Type) int {
	switch x := Underlying(t).(type) {
	case *Varbit:
		return 0
	case *Struct:
		w := 0
		for _, f := range x.Fields {
			w += minWidth(f.Type)
		}
		return w
	}
	return Width(t)
}

// bindArgs matches call arguments to parameters, infers type parameters
// and applies implicit casts. It fills call.Args, call.ParamTypes,
// call.Params and call.TypeArgs.
func (c *Checker) bindArgs(call *Call, params []*ast.Param, args []*ast.Arg, env map[*ast.TypeParam]Type, pos scanner.Pos, s *scope) {
	if env == nil {
		env = map[*ast.TypeParam]Type{}
	}
	call.Params = params
	call.Args = make([]ast.Expr, len(params))
	named := len(args) > 0 && args[0].Name != ""
	if len(args) > len(params) {
		c.errorf(pos, "too many arguments: %d given, %d expected", len(args), len(params))
	}
	for i, a := range args {
		if (a.Name != "") != named {
			c.errorf(a.Pos, "all arguments must be named, or none")
			continue
		}
		idx := i
		if named {
			idx = -1
			for j, p := range params {
				if p.Name == a.Name {
					idx = j
				}
			}
			if idx < 0 {
				c.errorf(a.Pos, "no parameter called %s", a.Name)
				c.expr(a.Value, s)
				continue
			}
		}
		if idx >= len(params) {
			c.expr(a.Value, s)
			continue
		}
		call.Args[idx] = a.Value
	}
	// type the arguments and infer type variables
	for i, p := range params {
		a := call.Args[i]
		if a == nil {
			continue
		}
		at := c.expr(a, s)
		pt := c.info.DeclTypes[p]
		if pt == nil {
			pt = c.resolveType(p.Type, s)
		}
		unify(pt, at, env)
	}
	call.TypeArgs = env
	call.ParamTypes = make([]Type, len(params))
	for i, p := range params {
		pt := c.info.DeclTypes[p]
		if pt == nil {
			pt = &Void{}
		}
		pt = Subst(pt, env)
		call.ParamTypes[i] = pt
		a := call.Args[i]
		if a == nil {
			if p.Default != nil {
				call.Args[i] = p.Default
			} else if !p.Annotations.Has("optional") {
				c.errorf(pos, "missing argument for parameter %s", p.Name)
			}
			continue
		}
		if tv, isVar := pt.(*TypeVar); isVar {
			// nothing else fixes the type variable: an integer
			// without a width gives it none (P4_16 §8.9.1: int is
			// not a type a run-time value can have)
			if _, inf := Underlying(c.info.Types[a]).(*InfInt); inf {
				c.errorf(a.Position(), "could not infer a width for %s from %s; give the value a width", tv.Name, exprText(a))
			}
			continue
		}
		c.convert(a, pt)
		if p.Dir == ast.Out || p.Dir == ast.InOut {
			if _, dc := a.(*ast.DontCareExpr); dc && p.Dir == ast.Out {
				continue
			}
			c.checkLValue(a, s)
		}
	}
}

// unify binds type variables in pt so that it matches at.
func unify(pt, at Type, env map[*ast.TypeParam]Type) {
	switch p := pt.(type) {
	case *TypeVar:
		if _, bound := env[p.Decl]; bound {
			return
		}
		switch at.(type) {
		case *InfInt, *DontCare, *Void:
			return
		}
		env[p.Decl] = at
	case *Tuple:
		if a, ok := at.(*Tuple); ok && len(a.Elems) == len(p.Elems) {
			for i := range p.Elems {
				unify(p.Elems[i], a.Elems[i], env)
			}
		}
	case *Stack:
		if a, ok := at.(*Stack); ok {
			unify(p.Elem, a.Elem, env)
		}
	case *Extern:
		if a, ok := at.(*Extern); ok && a.Decl == p.Decl {
			for i := range p.Args {
				if i < len(a.Args) {
					unify(p.Args[i], a.Args[i], env)
				}
			}
		}
	}
	// Block types (Parser<H, M> of a package) are matched by shape in
	// convert; their type parameters are not needed afterwards.
}

// blockCtorParams returns the constructor parameters of a parser or
// control; ok is false for a block type without an implementation (a
// parser or control type declaration).
func blockCtorParams(b *Block) (params []*ast.Param, ok bool) {
	switch d := b.Decl.(type) {
	case *ast.ParserDecl:
		return d.CtorParams, true
	case *ast.ControlDecl:
		return d.CtorParams, true
	}
	return nil, false
}

// exprText is a short spelling of an expression for diagnostics.
func exprText(e ast.Expr) string {
	if l, ok := e.(*ast.IntLit); ok {
		return l.Text
	}
	return "an integer"
}
