package types

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// scope maps names to declarations. Functions and extern methods can be
// overloaded, so a name can map to several declarations.
type scope struct {
	parent *scope
	names  map[string][]ast.Node
}

func newScope(parent *scope) *scope {
	return &scope{parent: parent, names: map[string][]ast.Node{}}
}

func (s *scope) lookup(name string) []ast.Node {
	for sc := s; sc != nil; sc = sc.parent {
		if ds, ok := sc.names[name]; ok {
			return ds
		}
	}
	return nil
}

func (s *scope) global() *scope {
	for s.parent != nil {
		s = s.parent
	}
	return s
}

// context tracks where the checker is, for rules that depend on it.
type context struct {
	control  *ast.ControlDecl
	parser   *ast.ParserDecl
	action   *ast.ActionDecl
	function *ast.FunctionDecl
	// retType is the return type of the function being checked.
	retType Type
	inLoop  bool
}

// Checker holds the state of one type-checking run.
type Checker struct {
	info   *Info
	errs   scanner.ErrorList
	global *scope
	// errorMembers and matchKinds collect the members of `error` and
	// `match_kind` across all their declarations.
	errorMembers map[string]*ast.EnumMember
	matchKinds   map[string]*ast.EnumMember
	ctx          context
	// typeDecls caches the Type of type declarations.
	typeDecls map[ast.Node]Type
	// resolving detects cyclic type definitions.
	resolving map[ast.Node]bool
	// specializations holds the instances of generic structs and headers,
	// one per declaration and list of type arguments.
	specializations map[string]*Struct
	// specializing is set while the base of T<...> is resolved, where a
	// generic struct without its arguments is expected.
	specializing bool
	// resolveErrs are names that resolve to no declaration. p4c resolves
	// every name before it checks any type, and stops there when one does
	// not resolve: with such errors, Check reports only them.
	resolveErrs scanner.ErrorList
	// targetErrs are what the target (BMv2, v1model) refuses in a program
	// the language accepts (Info.TargetErrors).
	targetErrs scanner.ErrorList
	// cpNames holds the actions, tables and extern instances by kind and
	// control-plane name, to find two declarations that claim one name.
	cpNames map[string]ast.Node
}

// Check resolves and type-checks a program.
func Check(prog *ast.Program) (*Info, scanner.ErrorList) {
	c := &Checker{
		info: &Info{
			Program:        prog,
			Types:          map[ast.Expr]Type{},
			Values:         map[ast.Expr]Value{},
			Uses:           map[*ast.Ident]ast.Node{},
			Calls:          map[*ast.CallExpr]*Call{},
			InstanceCalls:  map[*ast.InstanceDecl]*Call{},
			DeclTypes:      map[ast.Node]Type{},
			ConstValues:    map[ast.Node]Value{},
			TypeExprs:      map[ast.Type]Type{},
			StateOwner:     map[*ast.ParserState]*ast.ParserDecl{},
			ParentOf:       map[ast.Node]ast.Decl{},
			ActionRefs:     map[*ast.ActionRef]*Call{},
			DefaultActions: map[*ast.TableDecl]*ast.ActionRef{},
			AcceptState:    &ast.ParserState{Name: "accept"},
			RejectState:    &ast.ParserState{Name: "reject"},
		},
		global:          newScope(nil),
		errorMembers:    map[string]*ast.EnumMember{},
		matchKinds:      map[string]*ast.EnumMember{},
		typeDecls:       map[ast.Node]Type{},
		resolving:       map[ast.Node]bool{},
		specializations: map[string]*Struct{},
		cpNames:         map[string]ast.Node{},
	}
	for _, d := range prog.Decls {
		c.topDecl(d)
	}
	if main := c.global.lookup("main"); len(main) > 0 {
		if inst, ok := main[0].(*ast.InstanceDecl); ok {
			c.info.Main = inst
		}
	}
	if c.info.Main != nil {
		c.v1modelTypes(c.info.Main)
	}
	c.directMeters(prog)
	c.info.TargetErrors = c.targetErrs
	if len(c.resolveErrs) > 0 {
		return c.info, c.resolveErrs
	}
	if c.info.Main == nil && len(c.errs) == 0 {
		// where main would be: after the last declaration (an empty
		// program has no position to give)
		var pos scanner.Pos
		for i := len(prog.Decls) - 1; i >= 0 && !pos.IsValid(); i-- {
			pos = prog.Decls[i].Position()
		}
		c.errs.Add(pos, "program has no top-level package instance called main")
	}
	return c.info, c.errs
}

func (c *Checker) warnf(pos scanner.Pos, format string, args ...any) {
	c.info.Warnings.Add(pos, format, args...)
}

// resolveErrorf reports a name that resolves to nothing (see resolveErrs).
func (c *Checker) resolveErrorf(pos scanner.Pos, format string, args ...any) {
	c.resolveErrs.Add(pos, format, args...)
	c.errorf(pos, format, args...)
}

// targetErrorf reports what the target refuses (see targetErrs).
func (c *Checker) targetErrorf(pos scanner.Pos, format string, args ...any) {
	c.targetErrs.Add(pos, format, args...)
}

func (c *Checker) errorf(pos scanner.Pos, format string, args ...any) {
	if len(c.errs) < 50 {
		c.errs.Add(pos, format, args...)
	}
}

// declare adds a declaration to a scope, reporting a clash unless both are
// overloadable callables.
func (c *Checker) declare(s *scope, name string, pos scanner.Pos, d ast.Node) {
	if prev, ok := s.names[name]; ok {
		if overloadable(d) && overloadable(prev[0]) {
			s.names[name] = append(prev, d)
			return
		}
		c.errorf(pos, "%s: duplicate declaration (previous at %s)", name, prev[0].Position())
		return
	}
	s.names[name] = []ast.Node{d}
}

func overloadable(d ast.Node) bool {
	switch d.(type) {
	case *ast.ExternFuncDecl, *ast.FunctionDecl:
		return true
	}
	return false
}

func (c *Checker) topDecl(d ast.Decl) {
	s := c.global
	switch x := d.(type) {
	case *ast.ErrorDecl:
		for _, m := range x.Members {
			if _, dup := c.errorMembers[m.Name]; dup {
				c.errorf(m.Pos, "error.%s declared twice", m.Name)
				continue
			}
			c.errorMembers[m.Name] = m
			c.info.Errors = append(c.info.Errors, m.Name)
			c.info.ConstValues[m] = &ErrorValue{Name: m.Name}
		}
		return
	case *ast.MatchKindDecl:
		for _, m := range x.Members {
			if _, dup := c.matchKinds[m.Name]; dup {
				c.errorf(m.Pos, "match_kind %s declared twice", m.Name)
				continue
			}
			c.matchKinds[m.Name] = m
			c.info.ConstValues[m] = &MatchKindValue{Name: m.Name}
			c.declare(s, m.Name, m.Pos, m)
		}
		return
	case *ast.StructDecl, *ast.EnumDecl, *ast.TypedefDecl, *ast.ExternDecl,
		*ast.BlockTypeDecl, *ast.PackageDecl:
		switch x := d.(type) {
		case *ast.PackageDecl:
			c.ctorParamsDirectionless(x.Params)
		case *ast.ExternDecl:
			for _, m := range x.Methods {
				if m.ReturnType == nil && m.Name == x.Name {
					c.ctorParamsDirectionless(m.Params)
				}
			}
		}
		c.declare(s, d.DeclName(), d.Position(), d)
		t := c.declType(d)
		if st, ok := t.(*Struct); ok && st.Kind == ast.StructKindHeader && len(st.TypeParams) == 0 {
			// BMv2 parses and deparses whole bytes: p4c-bm2-ss refuses
			// a header type whose fields do not add up to them
			bits := 0
			for _, f := range st.Fields {
				bits += Width(f.Type)
			}
			if bits%8 != 0 {
				c.targetErrorf(x.Position(), "header %s is %d bits long, not a whole number of bytes", st.Name, bits)
			}
		}
		return
	case *ast.ParserDecl:
		c.declare(s, x.Name, x.Pos, x)
		c.declType(d)
		c.checkParser(x, s)
		return
	case *ast.ControlDecl:
		c.declare(s, x.Name, x.Pos, x)
		c.declType(d)
		c.checkControl(x, s)
		return
	case *ast.ConstDecl:
		c.constDecl(x, s)
		return
	case *ast.ActionDecl:
		c.declare(s, x.Name, x.Pos, x)
		c.checkAction(x, s)
		return
	case *ast.FunctionDecl:
		c.declare(s, x.Proto.Name, x.Proto.Pos, x)
		c.checkFunction(x, s)
		return
	case *ast.ExternFuncDecl:
		c.declare(s, x.Proto.Name, x.Proto.Pos, x)
		c.checkProto(x.Proto, s)
		return
	case *ast.InstanceDecl:
		c.instanceDecl(x, s)
		c.instancePlace(x)
		c.declare(s, x.Name, x.Pos, x)
		return
	case *ast.VarDecl:
		c.errorf(x.Pos, "variables cannot be declared at the top level; use const")
		return
	}
	c.errorf(d.Position(), "unexpected declaration at top level")
}

// declType computes the Type of a type declaration.
// containsStruct reports whether t is st or holds it (as a stack element
// or in a field): a type containing itself would be infinitely large.
func containsStruct(t Type, st *Struct) bool {
	switch x := t.(type) {
	case *Struct:
		if x == st {
			return true
		}
		for _, f := range x.Fields {
			if containsStruct(f.Type, st) {
				return true
			}
		}
	case *Stack:
		return containsStruct(x.Elem, st)
	}
	return false
}

func (c *Checker) declType(d ast.Node) Type {
	if t, ok := c.typeDecls[d]; ok {
		return t
	}
	if c.resolving[d] {
		c.errorf(d.Position(), "recursive type definition")
		return &Void{}
	}
	c.resolving[d] = true
	defer delete(c.resolving, d)
	var t Type
	switch x := d.(type) {
	case *ast.StructDecl:
		st := &Struct{Kind: x.Kind, Name: x.Name, Decl: x, TypeParams: x.TypeParams}
		c.typeDecls[d] = st // allow self reference in error paths
		sc := c.global
		if len(x.TypeParams) > 0 {
			sc = c.typeParamScope(x.TypeParams, c.global)
		}
		seen := map[string]bool{}
		for _, f := range x.Fields {
			ft := c.resolveType(f.Type, sc)
			if containsStruct(ft, st) {
				c.errorf(f.Pos, "%s cannot contain itself", x.Name)
				ft = &Void{}
			}
			if seen[f.Name] {
				c.errorf(f.Pos, "duplicate field %s in %s", f.Name, x.Name)
			}
			seen[f.Name] = true
			if !hasTypeVar(ft) {
				c.checkFieldType(x, f, ft)
			}
			st.Fields = append(st.Fields, &Field{Name: f.Name, Type: ft, Annotations: f.Annotations, Decl: f})
		}
		if len(x.TypeParams) == 0 {
			// a generic declaration is a template: only its
			// specializations are types of the program
			c.info.Structs = append(c.info.Structs, st)
		}
		t = st
	case *ast.EnumDecl:
		et := &Enum{Name: x.Name, Decl: x}
		if x.Underlying != nil {
			ut := c.resolveType(x.Underlying, c.global)
			if b, ok := Underlying(ut).(*Bits); ok {
				et.Underlying = b
			} else {
				c.errorf(x.Underlying.Position(), "enum %s: underlying type must be bit<W> or int<W>", x.Name)
				et.Underlying = &Bits{Width: 32}
			}
		}
		c.typeDecls[d] = et
		for _, m := range x.Members {
			et.Members = append(et.Members, m.Name)
			ev := &EnumValue{Enum: et, Member: m.Name}
			if et.Underlying != nil && m.Value != nil {
				c.expr(m.Value, c.global)
				c.convert(m.Value, et.Underlying)
				if v, ok := c.info.Values[m.Value].(*big.Int); ok {
					ev.Value = v
				} else {
					c.errorf(m.Value.Position(), "enum member value must be a compile-time constant")
					ev.Value = new(big.Int)
				}
			}
			c.info.ConstValues[m] = ev
		}
		c.info.Enums = append(c.info.Enums, et)
		t = et
	case *ast.TypedefDecl:
		base := c.resolveType(x.Type, c.global)
		if x.NewType {
			t = &NewType{Name: x.Name, Base: base, Decl: x}
		} else {
			t = base
		}
	case *ast.ExternDecl:
		t = &Extern{Decl: x}
		c.typeDecls[d] = t
		sc := newScope(c.global)
		for _, tp := range x.TypeParams {
			c.declare(sc, tp.Name, tp.Pos, tp)
		}
		for _, m := range x.Methods {
			c.checkProto(m, sc)
		}
	case *ast.BlockTypeDecl:
		t = &Block{IsParser: x.IsParser, Name: x.Name, Params: x.Params, Decl: x}
		c.typeDecls[d] = t
		sc := c.typeParamScope(x.TypeParams, c.global)
		c.checkParams(x.Params, sc)
	case *ast.ParserDecl:
		t = &Block{IsParser: true, Name: x.Name, Params: x.Params, Decl: x}
	case *ast.ControlDecl:
		t = &Block{Name: x.Name, Params: x.Params, Decl: x}
	case *ast.PackageDecl:
		t = &Package{Decl: x}
		c.typeDecls[d] = t
		sc := c.typeParamScope(x.TypeParams, c.global)
		c.checkParams(x.Params, sc)
	case *ast.TypeParam:
		t = &TypeVar{Name: x.Name, Decl: x}
	default:
		c.errorf(d.Position(), "not a type")
		t = &Void{}
	}
	c.typeDecls[d] = t
	return t
}

// specialize instantiates a generic struct, header or header union
// (P4_16 7.2.9) with type arguments: a new type whose fields have the
// arguments in place of the parameters.
func (c *Checker) specialize(g *Struct, args []Type, pos scanner.Pos) Type {
	if len(args) != len(g.TypeParams) {
		c.errorf(pos, "%s expects %d type arguments, got %d", g.Name, len(g.TypeParams), len(args))
		return &Void{}
	}
	generic := false
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = a.String()
		generic = generic || hasTypeVar(a)
	}
	key := fmt.Sprintf("%p<%s>", g.Decl, strings.Join(parts, ","))
	if st, ok := c.specializations[key]; ok {
		return st
	}
	env := map[*ast.TypeParam]Type{}
	for i, tp := range g.TypeParams {
		env[tp] = args[i]
	}
	// p4c's name for a specialization: the base name and, per argument,
	// "_" and the argument as written without <, > and spaces, with , and
	// . as "_" (Pair<bit<32>> is Pair_bit32)
	name := g.Name
	for _, p := range parts {
		name += "_" + strings.NewReplacer("<", "", ">", "", " ", "", ",", "_", ".", "_").Replace(p)
	}
	st := &Struct{Kind: g.Kind, Name: name, Decl: g.Decl}
	for i, f := range g.Fields {
		ft := Subst(f.Type, env)
		if inner, ok := ft.(*Struct); ok && inner.Generic != nil && !generic {
			// a field of type G<T>: G specialized with this T
			innerArgs := make([]Type, len(inner.Args))
			for j, a := range inner.Args {
				innerArgs[j] = Subst(a, env)
			}
			ft = c.specialize(inner.Generic, innerArgs, pos)
		}
		if !hasTypeVar(ft) {
			c.checkFieldType(g.Decl, g.Decl.Fields[i], ft)
		}
		st.Fields = append(st.Fields, &Field{Name: f.Name, Type: ft, Annotations: f.Annotations, Decl: f.Decl})
	}
	if generic {
		// inside another generic declaration: specialized when that one is
		st.Generic, st.Args = g, args
		return st
	}
	c.specializations[key] = st
	c.info.Structs = append(c.info.Structs, st)
	return st
}

// hasTypeVar reports whether t mentions a type parameter.
func hasTypeVar(t Type) bool {
	switch x := t.(type) {
	case *TypeVar:
		return true
	case *Stack:
		return hasTypeVar(x.Elem)
	case *Tuple:
		for _, e := range x.Elems {
			if hasTypeVar(e) {
				return true
			}
		}
	case *Struct:
		return len(x.TypeParams) > 0 || x.Generic != nil
	}
	return false
}

func (c *Checker) checkFieldType(sd *ast.StructDecl, f *ast.Field, ft Type) {
	u := Underlying(ft)
	switch sd.Kind {
	case ast.StructKindHeader:
		switch u.(type) {
		case *Bits, *Varbit, *Bool:
			return
		case *Enum:
			if u.(*Enum).Underlying != nil {
				return
			}
		case *Struct:
			if IsStruct(u) {
				// P4_16 allows structs of bit fields inside headers.
				return
			}
		}
		c.errorf(f.Pos, "header field %s has type %s, which headers cannot contain", f.Name, ft)
	case ast.StructKindUnion:
		if !IsHeader(u) {
			c.errorf(f.Pos, "header_union member %s must be a header, not %s", f.Name, ft)
		}
	}
}

func (c *Checker) typeParamScope(tps []*ast.TypeParam, parent *scope) *scope {
	sc := newScope(parent)
	for _, tp := range tps {
		c.declare(sc, tp.Name, tp.Pos, tp)
	}
	return sc
}

// resolveType turns a written type into a Type.
func (c *Checker) resolveType(t ast.Type, s *scope) Type {
	if t == nil {
		return &Void{}
	}
	r := c.resolveType1(t, s)
	c.info.TypeExprs[t] = r
	return r
}

func (c *Checker) resolveType1(t ast.Type, s *scope) Type {
	switch x := t.(type) {
	case *ast.BitType:
		if x.Width == nil {
			return &Bits{Width: 1, Signed: x.Signed}
		}
		w := c.constInt(x.Width, s)
		if w <= 0 || (x.Signed && w < 1) {
			c.errorf(x.Pos, "invalid width %d", w)
			w = 1
		}
		if w > 1<<16 {
			c.errorf(x.Pos, "width %d is too large", w)
			w = 1 << 16
		}
		return &Bits{Width: w, Signed: x.Signed}
	case *ast.VarbitType:
		w := c.constInt(x.Width, s)
		if w <= 0 {
			c.errorf(x.Pos, "invalid varbit width %d", w)
			w = 8
		}
		return &Varbit{Max: w}
	case *ast.BaseType:
		switch x.Kind {
		case "bool":
			return &Bool{}
		case "error":
			return &ErrorType{}
		case "string":
			return &String{}
		case "int":
			return &InfInt{}
		case "void":
			return &Void{}
		case "match_kind":
			return &MatchKind{}
		}
	case *ast.NamedType:
		sc := s
		if x.Global {
			sc = s.global()
		}
		ds := sc.lookup(x.Name)
		if len(ds) == 0 {
			c.resolveErrorf(x.Pos, "%s: unknown type", x.Name)
			return &Void{}
		}
		switch ds[0].(type) {
		case *ast.StructDecl, *ast.EnumDecl, *ast.TypedefDecl, *ast.ExternDecl, *ast.BlockTypeDecl,
			*ast.PackageDecl, *ast.TypeParam, *ast.ParserDecl, *ast.ControlDecl:
			dt := c.declType(ds[0])
			if st, ok := dt.(*Struct); ok && len(st.TypeParams) > 0 && !c.specializing {
				c.errorf(x.Pos, "%s is generic: it needs type arguments (%s<...>)", x.Name, x.Name)
			}
			return dt
		}
		c.errorf(x.Pos, "%s is not a type", x.Name)
		return &Void{}
	case *ast.SpecializedType:
		saved := c.specializing
		c.specializing = true
		base := c.resolveType(x.Base, s)
		c.specializing = saved
		args := make([]Type, len(x.Args))
		for i, a := range x.Args {
			args[i] = c.resolveType(a, s)
		}
		switch b := base.(type) {
		case *Extern:
			if len(args) != len(b.Decl.TypeParams) {
				c.errorf(x.Pos, "%s expects %d type arguments, got %d", b.Decl.Name, len(b.Decl.TypeParams), len(args))
			}
			return &Extern{Decl: b.Decl, Args: args}
		case *Block:
			return &Block{IsParser: b.IsParser, Name: b.Name, Params: b.Params, Decl: b.Decl, Args: args}
		case *Package:
			return &Package{Decl: b.Decl, Args: args}
		case *Struct:
			if len(b.TypeParams) > 0 {
				return c.specialize(b, args, x.Pos)
			}
		}
		c.errorf(x.Pos, "%s is not generic", base)
		return base
	case *ast.StackType:
		elem := c.resolveType(x.Elem, s)
		n := c.constInt(x.Size, s)
		if n <= 0 {
			c.errorf(x.Pos, "header stack size must be positive")
			n = 1
		}
		if !IsHeader(Underlying(elem)) && !IsUnion(Underlying(elem)) {
			c.errorf(x.Pos, "header stack element must be a header or header_union, not %s", elem)
		}
		return &Stack{Elem: elem, Size: n}
	case *ast.TupleType:
		tt := &Tuple{}
		for _, e := range x.Elems {
			tt.Elems = append(tt.Elems, c.resolveType(e, s))
		}
		return tt
	case *ast.DontCareType:
		return &DontCare{}
	}
	c.errorf(t.Position(), "unsupported type")
	return &Void{}
}

// constInt evaluates a compile-time integer (a width or a size).
func (c *Checker) constInt(e ast.Expr, s *scope) int {
	c.expr(e, s)
	v, ok := c.info.Values[e].(*big.Int)
	if !ok {
		c.errorf(e.Position(), "expected a compile-time constant")
		return 0
	}
	if !v.IsInt64() || v.Int64() > 1<<20 || v.Int64() < -1<<20 {
		c.errorf(e.Position(), "constant %s is out of range", v)
		return 0
	}
	return int(v.Int64())
}

func (c *Checker) checkParams(ps []*ast.Param, s *scope) {
	seen := map[string]bool{}
	for _, p := range ps {
		t := c.resolveType(p.Type, s)
		c.info.DeclTypes[p] = t
		if seen[p.Name] {
			c.errorf(p.Pos, "duplicate parameter %s", p.Name)
		}
		seen[p.Name] = true
		if _, isInt := t.(*InfInt); isInt && p.Dir != ast.None {
			// P4_16 §6.8: an int is a compile-time value, passed
			// without direction
			c.errorf(p.Pos, "%s: parameters of type int must be directionless", p.Name)
		}
		if p.Default != nil {
			c.expr(p.Default, s)
			c.convert(p.Default, t)
		}
	}
}

func (c *Checker) declareParams(ps []*ast.Param, s *scope) {
	for _, p := range ps {
		c.declare(s, p.Name, p.Pos, p)
	}
}

func (c *Checker) checkProto(fp *ast.FunctionProto, s *scope) *scope {
	sc := c.typeParamScope(fp.TypeParams, s)
	if fp.ReturnType != nil {
		c.resolveType(fp.ReturnType, sc)
	}
	c.checkParams(fp.Params, sc)
	return sc
}

func (c *Checker) constDecl(x *ast.ConstDecl, s *scope) {
	t := c.resolveType(x.Type, s)
	c.info.DeclTypes[x] = t
	c.expr(x.Value, s)
	if x.Name == "__v1model_version" {
		// v1model.p4 takes V1MODEL_VERSION, a release date as a
		// number; p4c refuses a negative one
		if v, ok := c.info.Values[x.Value].(*big.Int); ok && v.Sign() < 0 {
			c.errorf(x.Value.Position(), "%s: expected v1model version to be a non-negative number", v)
		}
	}
	c.convert(x.Value, t)
	if v, ok := c.info.Values[x.Value]; ok {
		c.info.ConstValues[x] = v
	} else {
		c.errorf(x.Value.Position(), "const %s: initializer is not a compile-time constant", x.Name)
	}
	c.declare(s, x.Name, x.Pos, x)
}

func (c *Checker) varDecl(x *ast.VarDecl, s *scope) {
	t := c.resolveType(x.Type, s)
	c.info.DeclTypes[x] = t
	switch Underlying(t).(type) {
	case *Void, *Extern, *Package:
		c.errorf(x.Pos, "cannot declare a variable of type %s", t)
	}
	if x.Init != nil {
		c.expr(x.Init, s)
		c.convert(x.Init, t)
	}
	c.declare(s, x.Name, x.Pos, x)
}

func (c *Checker) checkAction(a *ast.ActionDecl, s *scope) {
	c.controlPlaneName(a, a.Annotations, a.Pos, "action")
	sc := newScope(s)
	c.checkParams(a.Params, sc)
	seenNone := false
	for _, p := range a.Params {
		if p.Dir == ast.None {
			seenNone = true
		} else if seenNone {
			c.errorf(p.Pos, "action %s: directional parameter %s after directionless ones", a.Name, p.Name)
		}
	}
	c.declareParams(a.Params, sc)
	saved := c.ctx
	c.ctx.action = a
	c.ctx.retType = &Void{}
	c.block(a.Body, sc)
	c.ctx = saved
	c.info.DeclTypes[a] = &Action{Decl: a}
}

func (c *Checker) checkFunction(f *ast.FunctionDecl, s *scope) {
	sc := c.checkProto(f.Proto, s)
	c.declareParams(f.Proto.Params, sc)
	saved := c.ctx
	c.ctx.function = f
	c.ctx.retType = c.info.TypeExprs[f.Proto.ReturnType]
	body := newScope(sc)
	c.block(f.Body, body)
	if _, void := c.ctx.retType.(*Void); !void && !blockReturns(f.Body) {
		c.errorf(f.Body.End, "function %s does not return a value on every path", f.Proto.Name)
	}
	c.ctx = saved
}

// blockReturns reports whether every path through b ends in return or exit.
func blockReturns(b *ast.BlockStmt) bool {
	for _, s := range b.Stmts {
		if stmtReturns(s) {
			return true
		}
	}
	return false
}

func stmtReturns(s ast.Stmt) bool {
	switch x := s.(type) {
	case *ast.ReturnStmt, *ast.ExitStmt:
		return true
	case *ast.BlockStmt:
		return blockReturns(x)
	case *ast.IfStmt:
		return x.Else != nil && stmtReturns(x.Then) && stmtReturns(x.Else)
	case *ast.SwitchStmt:
		hasDefault := false
		for _, cs := range x.Cases {
			if cs.Default {
				hasDefault = true
			}
			if cs.Body != nil && !blockReturns(cs.Body) {
				return false
			}
		}
		return hasDefault
	}
	return false
}

func (c *Checker) checkParser(p *ast.ParserDecl, s *scope) {
	c.ctorParamsDirectionless(p.CtorParams)
	sc := c.typeParamScope(p.TypeParams, s)
	c.checkParams(p.Params, sc)
	c.checkParams(p.CtorParams, sc)
	c.declareParams(p.Params, sc)
	c.declareParams(p.CtorParams, sc)
	saved := c.ctx
	c.ctx = context{parser: p}
	// States can be referenced before they are declared.
	states := newScope(sc)
	c.declare(states, "accept", p.Pos, c.info.AcceptState)
	c.declare(states, "reject", p.Pos, c.info.RejectState)
	for _, st := range p.States {
		if st.Name == "accept" || st.Name == "reject" {
			c.errorf(st.Pos, "state %s is built in and cannot be declared", st.Name)
			continue
		}
		c.declare(states, st.Name, st.Pos, st)
		c.info.StateOwner[st] = p
		c.info.DeclTypes[st] = &StateType{}
	}
	locals := newScope(states)
	for _, d := range p.Locals {
		c.info.ParentOf[d] = p
		c.localDecl(d, locals)
	}
	hasStart := false
	for _, st := range p.States {
		if st.Name == "start" {
			hasStart = true
		}
		body := newScope(locals)
		for _, stmt := range st.Stmts {
			c.stmt(stmt, body)
		}
		if st.Transition != nil {
			c.transition(st.Transition, body)
		}
	}
	if !hasStart {
		c.errorf(p.Pos, "parser %s has no start state", p.Name)
	} else if !parserCanEnd(p) {
		c.errorf(p.Pos, "parser %s never reaches accept or reject: every state reachable from start only goes on to another", p.Name)
	}
	c.ctx = saved
}

func (c *Checker) transition(tr *ast.Transition, s *scope) {
	if tr.Next != nil {
		c.stateRef(tr.Next, s)
		return
	}
	se := tr.Select
	var keyTypes []Type
	for _, k := range se.Keys {
		t := c.expr(k, s)
		if _, ok := Underlying(t).(*InfInt); ok {
			c.errorf(k.Position(), "select key must have a fixed width")
		}
		keyTypes = append(keyTypes, t)
	}
	for _, cs := range se.Cases {
		// p4c types a select as a whole: a case that does not match
		// the keys is an error of the select expression, reported there
		before := len(c.errs)
		c.keyset(cs.Keyset, keyTypes, s)
		for i := before; i < len(c.errs); i++ {
			c.errs[i].Msg = fmt.Sprintf("select case at %d:%d: %s", c.errs[i].Pos.Line, c.errs[i].Pos.Col, c.errs[i].Msg)
			c.errs[i].Pos = se.Pos
		}
		c.stateRef(cs.State, s)
	}
}

func (c *Checker) stateRef(id *ast.Ident, s *scope) {
	ds := s.lookup(id.Name)
	if len(ds) == 0 {
		c.resolveErrorf(id.Pos, "%s: no such parser state", id.Name)
		return
	}
	st, ok := ds[0].(*ast.ParserState)
	if !ok {
		c.errorf(id.Pos, "%s is not a parser state", id.Name)
		return
	}
	c.info.Uses[id] = st
}

// keyset checks a select case or table entry keyset against key types.
func (c *Checker) keyset(e ast.Expr, keyTypes []Type, s *scope) {
	if l, ok := e.(*ast.ListExpr); ok && len(keyTypes) != 1 {
		if len(l.Elems) != len(keyTypes) {
			c.errorf(e.Position(), "keyset has %d elements, but there are %d keys", len(l.Elems), len(keyTypes))
			return
		}
		for i, el := range l.Elems {
			c.simpleKeyset(el, keyTypes[i], s)
		}
		return
	}
	if l, ok := e.(*ast.ListExpr); ok && len(keyTypes) == 1 && len(l.Elems) == 1 {
		c.simpleKeyset(l.Elems[0], keyTypes[0], s)
		return
	}
	switch e.(type) {
	case *ast.DefaultExpr, *ast.DontCareExpr:
		return
	}
	if len(keyTypes) != 1 {
		// a single value set may match a tuple of keys
		if t := c.expr(e, s); t != nil {
			if _, ok := t.(*ValueSet); ok {
				return
			}
		}
		c.errorf(e.Position(), "keyset must have %d elements", len(keyTypes))
		return
	}
	c.simpleKeyset(e, keyTypes[0], s)
}

func (c *Checker) simpleKeyset(e ast.Expr, kt Type, s *scope) {
	switch x := e.(type) {
	case *ast.DefaultExpr, *ast.DontCareExpr:
		c.info.Types[e] = &DontCare{}
	case *ast.MaskExpr:
		vt := c.expr(x.Value, s)
		mt := c.expr(x.Mask, s)
		c.convert(x.Value, setOperandType(kt, vt))
		c.convert(x.Mask, setOperandType(kt, mt))
		c.info.Types[e] = &Set{Elem: kt}
	case *ast.RangeExpr:
		lt := c.expr(x.Lo, s)
		ht := c.expr(x.Hi, s)
		c.convert(x.Lo, setOperandType(kt, lt))
		c.convert(x.Hi, setOperandType(kt, ht))
		c.info.Types[e] = &Set{Elem: kt}
	default:
		t := c.expr(e, s)
		if _, ok := t.(*ValueSet); ok {
			return
		}
		c.convert(e, kt)
	}
}

// setOperandType is the type an operand of a mask (&&&) or range (..)
// keyset converts to. A mask or range over a serializable enum key is a set
// of bit patterns rather than of members, so (as p4c accepts) its operands may
// be values of the enum's underlying type: (bit<16>)E.A &&& 0xff00.
func setOperandType(key, operand Type) Type {
	e, ok := Underlying(key).(*Enum)
	if !ok || e.Underlying == nil {
		return key
	}
	if _, same := Underlying(operand).(*Enum); same {
		return key
	}
	return e.Underlying
}

func (c *Checker) checkControl(ctl *ast.ControlDecl, s *scope) {
	c.ctorParamsDirectionless(ctl.CtorParams)
	sc := c.typeParamScope(ctl.TypeParams, s)
	c.checkParams(ctl.Params, sc)
	c.checkParams(ctl.CtorParams, sc)
	c.declareParams(ctl.Params, sc)
	c.declareParams(ctl.CtorParams, sc)
	saved := c.ctx
	c.ctx = context{control: ctl}
	locals := newScope(sc)
	for _, d := range ctl.Locals {
		c.info.ParentOf[d] = ctl
		c.localDecl(d, locals)
	}
	c.ctx.retType = &Void{}
	c.block(ctl.Body, newScope(locals))
	c.ctx = saved
}

func (c *Checker) localDecl(d ast.Decl, s *scope) {
	switch x := d.(type) {
	case *ast.ConstDecl:
		c.constDecl(x, s)
	case *ast.VarDecl:
		c.varDecl(x, s)
	case *ast.InstanceDecl:
		c.instanceDecl(x, s)
		c.instancePlace(x)
		c.declare(s, x.Name, x.Pos, x)
	case *ast.ActionDecl:
		c.declare(s, x.Name, x.Pos, x)
		saved := c.ctx
		c.checkAction(x, s)
		c.ctx = saved
	case *ast.TableDecl:
		c.declare(s, x.Name, x.Pos, x)
		c.checkTable(x, s)
	case *ast.ValueSetDecl:
		if c.ctx.control != nil {
			c.errorf(x.Pos, "%s: value sets are instantiated in a parser or at the top level, not in a control", x.Name)
		}
		et := c.resolveType(x.ElemType, s)
		c.expr(x.Size, s)
		c.declare(s, x.Name, x.Pos, x)
		c.info.DeclTypes[x] = &ValueSet{Elem: et, Decl: x}
	case *ast.FunctionDecl:
		c.declare(s, x.Proto.Name, x.Proto.Pos, x)
		c.checkFunction(x, s)
	default:
		c.errorf(d.Position(), "this declaration is not allowed here")
	}
}

// controlPlaneName records an action's or table's control-plane name and
// refuses a second declaration of the same kind with the same name: an
// absolute @name(".n") anywhere in the program, or a relative name within
// one control (whose instances prefix both alike). P4Runtime identifies
// the objects by these names (P4_16 §18.3.3).
func (c *Checker) controlPlaneName(d ast.Node, annos ast.Annotations, pos scanner.Pos, kind string) {
	name, ok := annos.StringArg("name")
	if !ok {
		return
	}
	key := kind + " " + name
	if !strings.HasPrefix(name, ".") {
		if c.ctx.control == nil {
			return
		}
		key = kind + " " + c.ctx.control.Name + "." + name
	}
	if prev, dup := c.cpNames[key]; dup && prev != d {
		c.errorf(pos, "%s: conflicting control plane name: %s at %s has it too", name, kind, prev.Position())
		return
	}
	c.cpNames[key] = d
}

// v1modelTypes checks what v1model.p4 documents of V1Switch<H, M> and
// p4c-bm2-ss enforces: M, the user metadata, is a struct, and H is a
// struct of headers, header stacks and header unions only, or of
// structs of them.
func (c *Checker) v1modelTypes(main *ast.InstanceDecl) {
	pkg, ok := c.info.DeclTypes[main].(*Package)
	if !ok || pkg.Decl.Name != "V1Switch" || len(main.Args) == 0 {
		return
	}
	b, ok := c.info.Types[main.Args[0].Value].(*Block)
	if !ok {
		return
	}
	pd, ok := b.Decl.(*ast.ParserDecl)
	if !ok || len(pd.Params) != 4 {
		return
	}
	h, m := pd.Params[1], pd.Params[2]
	if st, ok := Underlying(c.info.DeclTypes[m]).(*Struct); !ok || st.Kind != ast.StructKindStruct {
		c.targetErrorf(m.Pos, "%s: expected the user metadata type to be a struct, not %s", m.Name, c.info.DeclTypes[m])
	}
	st, ok := Underlying(c.info.DeclTypes[h]).(*Struct)
	if !ok || st.Kind != ast.StructKindStruct {
		c.targetErrorf(h.Pos, "%s: expected the headers type to be a struct, not %s", h.Name, c.info.DeclTypes[h])
		return
	}
	if path, t := nonHeaderField(st, ""); path != "" {
		c.targetErrorf(h.Pos, "%s: the headers type %s should be a struct of headers, stacks or unions; field %s is a %s", h.Name, st.Name, path, t)
	}
}

// nonHeaderField finds the first field of a headers struct that is not a
// header, a header stack or a header union. Structs may nest: p4c
// flattens a headers struct of structs of headers into its headers
// (FlattenInterfaceStructs), so only the leaves must be headers. It
// returns the field's dotted path and type, or "" when there is none.
func nonHeaderField(st *Struct, prefix string) (string, Type) {
	for _, f := range st.Fields {
		switch ft := Underlying(f.Type).(type) {
		case *Stack:
			continue
		case *Struct:
			if ft.Kind != ast.StructKindStruct {
				continue
			}
			if path, t := nonHeaderField(ft, prefix+f.Name+"."); path != "" {
				return path, t
			}
			continue
		}
		return prefix + f.Name, f.Type
	}
	return "", nil
}

// directMeters checks v1model's direct meters as p4c-bm2-ss does: a
// direct_meter belongs to the one table whose `meters` property names it,
// and that table's actions read it (BMv2 writes its colour into the
// field read() names). One read but attached to no table, or attached
// but never read, is refused.
func (c *Checker) directMeters(prog *ast.Program) {
	instOf := func(e ast.Expr) *ast.InstanceDecl {
		if id, ok := e.(*ast.Ident); ok {
			d, _ := c.info.Uses[id].(*ast.InstanceDecl)
			return d
		}
		return nil
	}
	attached := map[*ast.InstanceDecl]*ast.TableDecl{}
	for _, d := range prog.Decls {
		ctl, ok := d.(*ast.ControlDecl)
		if !ok {
			continue
		}
		for _, l := range ctl.Locals {
			t, ok := l.(*ast.TableDecl)
			if !ok {
				continue
			}
			for _, p := range t.Properties {
				if vp, ok := p.(*ast.ValueProperty); ok && vp.Name == "meters" {
					if inst := instOf(vp.Value); inst != nil {
						attached[inst] = t
					}
				}
			}
		}
	}
	read := map[*ast.InstanceDecl]bool{}
	var calls []*ast.CallExpr
	for x, call := range c.info.Calls {
		if call.Extern != nil && call.Extern.Decl.Name == "direct_meter" && call.Proto != nil && call.Proto.Name == "read" {
			calls = append(calls, x)
		}
	}
	sort.Slice(calls, func(i, j int) bool { return posLess(calls[i].Position(), calls[j].Position()) })
	for _, x := range calls {
		inst := instOf(c.info.Calls[x].Recv)
		if inst == nil {
			continue
		}
		read[inst] = true
		if attached[inst] == nil {
			c.targetErrorf(x.Position(), "direct meter %s is read, but no table has it as its meters property", inst.Name)
		}
	}
	for inst, t := range attached {
		if !read[inst] {
			c.targetErrorf(inst.Pos, "direct meter %s of table %s is never read; BMv2 needs a field for its result", inst.Name, t.Name)
		}
	}
}

func posLess(a, b scanner.Pos) bool {
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Col < b.Col
}

// instancePlace checks where an object is instantiated (P4_16 Appendix
// F): a package only at the top level, a parser only in a parser, a
// control only in a control. (Externs go anywhere but bodies, which
// stmt refuses.) A parser or control given to a package is a constructor
// call, not an instantiation.
func (c *Checker) instancePlace(x *ast.InstanceDecl) {
	where := "at the top level"
	switch {
	case c.ctx.parser != nil:
		where = "in a parser"
	case c.ctx.control != nil:
		where = "in a control"
	}
	switch t := c.info.DeclTypes[x].(type) {
	case *Extern:
		c.controlPlaneName(x, x.Annotations, x.Pos, t.Decl.Name)
	case *Package:
		if where != "at the top level" {
			c.errorf(x.Pos, "%s: a package is instantiated only at the top level, not %s", x.Name, where)
		}
	case *Block:
		kind, home := "control", "in a control"
		if t.IsParser {
			kind, home = "parser", "in a parser"
		}
		if where != home {
			c.errorf(x.Pos, "%s: a %s cannot be instantiated %s", x.Name, kind, where)
		}
	}
}

// parserCanEnd reports whether a parser can end: some state reachable
// from start goes to accept or reject (also by a missing transition or a
// select without a default, which rejects when no case matches) or does
// something that can end parsing with an error (a call: extract, advance,
// verify, lookahead, a sub-parser; any statement but plain assignments and
// declarations counts). A parser that can do none of these loops forever
// (P4_16 §13: parsing ends in accept or reject).
func parserCanEnd(p *ast.ParserDecl) bool {
	states := map[string]*ast.ParserState{}
	for _, st := range p.States {
		states[st.Name] = st
	}
	seen := map[string]bool{}
	work := []string{"start"}
	for len(work) > 0 {
		name := work[len(work)-1]
		work = work[:len(work)-1]
		if name == "accept" || name == "reject" {
			return true
		}
		st := states[name]
		if st == nil || seen[name] {
			continue
		}
		seen[name] = true
		for _, stmt := range st.Stmts {
			if stmtMayFail(stmt) {
				return true
			}
		}
		tr := st.Transition
		switch {
		case tr == nil:
			return true
		case tr.Next != nil:
			work = append(work, tr.Next.Name)
		case tr.Select != nil:
			hasDefault := false
			for _, k := range tr.Select.Keys {
				if exprHasCall(k) {
					return true
				}
			}
			for _, cs := range tr.Select.Cases {
				switch cs.Keyset.(type) {
				case *ast.DefaultExpr, *ast.DontCareExpr:
					hasDefault = true
				}
				work = append(work, cs.State.Name)
			}
			if !hasDefault {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// stmtMayFail is false only for statements that cannot end parsing:
// assignments and declarations without calls, empty statements.
func stmtMayFail(s ast.Stmt) bool {
	switch x := s.(type) {
	case *ast.EmptyStmt:
		return false
	case *ast.AssignStmt:
		return exprHasCall(x.LHS) || exprHasCall(x.RHS)
	case *ast.DeclStmt:
		switch d := x.Decl.(type) {
		case *ast.VarDecl:
			return d.Init != nil && exprHasCall(d.Init)
		case *ast.ConstDecl:
			return false
		}
	case *ast.BlockStmt:
		for _, st := range x.Stmts {
			if stmtMayFail(st) {
				return true
			}
		}
		return false
	}
	return true
}

// exprHasCall reports whether an expression may contain a call; unknown
// forms count as calls.
func exprHasCall(e ast.Expr) bool {
	switch x := e.(type) {
	case nil, *ast.Ident, *ast.IntLit, *ast.BoolLit, *ast.StringLit, *ast.DefaultExpr, *ast.DontCareExpr, *ast.InvalidExpr, *ast.TypeExpr:
		return false
	case *ast.MemberExpr:
		return exprHasCall(x.X)
	case *ast.IndexExpr:
		return exprHasCall(x.X) || exprHasCall(x.Index)
	case *ast.SliceExpr:
		return exprHasCall(x.X) || exprHasCall(x.Hi) || exprHasCall(x.Lo)
	case *ast.UnaryExpr:
		return exprHasCall(x.X)
	case *ast.BinaryExpr:
		return exprHasCall(x.X) || exprHasCall(x.Y)
	case *ast.TernaryExpr:
		return exprHasCall(x.Cond) || exprHasCall(x.Then) || exprHasCall(x.Else)
	case *ast.CastExpr:
		return exprHasCall(x.X)
	case *ast.ListExpr:
		for _, el := range x.Elems {
			if exprHasCall(el) {
				return true
			}
		}
		return false
	case *ast.StructExpr:
		for _, f := range x.Fields {
			if exprHasCall(f.Value) {
				return true
			}
		}
		return false
	}
	return true
}

// ctorParamsDirectionless refuses a direction on a constructor parameter
// (of a parser, control, package or extern): constructor arguments are
// compile-time values (P4_16 §14.1, §6.8).
func (c *Checker) ctorParamsDirectionless(ps []*ast.Param) {
	for _, p := range ps {
		if p.Dir != ast.None {
			c.errorf(p.Pos, "%s: constructor parameters cannot have a direction", p.Name)
		}
	}
}
