package types

import (
	"fmt"
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// expr types an expression, records its type (and value, if constant) and
// returns the type. Errors produce a Void type so that checking goes on.
func (c *Checker) expr(e ast.Expr, s *scope) Type {
	if e == nil {
		return &Void{}
	}
	if t, ok := c.info.Types[e]; ok {
		return t
	}
	t := c.expr1(e, s)
	if t == nil {
		t = &Void{}
	}
	c.info.Types[e] = t
	return t
}

func (c *Checker) setValue(e ast.Expr, v Value) {
	if v != nil {
		c.info.Values[e] = v
	}
}

func (c *Checker) expr1(e ast.Expr, s *scope) Type {
	switch x := e.(type) {
	case *ast.IntLit:
		if x.Width == 0 && !x.Sized {
			c.setValue(e, new(big.Int).Set(x.Value))
			return &InfInt{}
		}
		t := &Bits{Width: x.Width, Signed: x.Signed}
		v := new(big.Int).Set(x.Value)
		if !fits(v, t) {
			c.errorf(x.Pos, "value %s does not fit in %s", x.Value, t)
		}
		c.setValue(e, normalize(v, t))
		return t
	case *ast.BoolLit:
		c.setValue(e, x.Value)
		return &Bool{}
	case *ast.StringLit:
		c.setValue(e, x.Value)
		return &String{}
	case *ast.Ident:
		return c.ident(x, s)
	case *ast.TypeExpr:
		return &TypeOfType{T: c.resolveType(x.Type, s)}
	case *ast.ThisExpr:
		c.errorf(x.Pos, "this is not supported")
		return &Void{}
	case *ast.MemberExpr:
		return c.member(x, s)
	case *ast.IndexExpr:
		return c.index(x, s)
	case *ast.SliceExpr:
		return c.slice(x, s)
	case *ast.CallExpr:
		return c.call(x, s)
	case *ast.UnaryExpr:
		return c.unary(x, s)
	case *ast.BinaryExpr:
		c.expr(x.X, s)
		c.expr(x.Y, s)
		t, v := c.binaryTypes(x.Op, x.X, x.Y, x.Pos, false)
		c.setValue(e, v)
		return t
	case *ast.TernaryExpr:
		return c.ternary(x, s)
	case *ast.CastExpr:
		return c.cast(x, s)
	case *ast.ListExpr:
		tt := &Tuple{}
		var vals []Value
		allConst := true
		for _, el := range x.Elems {
			tt.Elems = append(tt.Elems, c.expr(el, s))
			if v, ok := c.info.Values[el]; ok {
				vals = append(vals, v)
			} else {
				allConst = false
			}
		}
		if allConst {
			c.setValue(e, &TupleValue{Elems: vals})
		}
		return tt
	case *ast.StructExpr:
		st := &Struct{Kind: ast.StructKindStruct}
		if x.Type != nil {
			t := c.resolveType(x.Type, s)
			if target, ok := Underlying(t).(*Struct); ok {
				for _, f := range x.Fields {
					c.expr(f.Value, s)
				}
				c.info.Types[e] = &Struct{Kind: ast.StructKindStruct, Fields: anonFields(x, c)}
				c.convert(e, target)
				return c.info.Types[e]
			}
			c.errorf(x.Pos, "%s is not a struct or header type", t)
		}
		for _, f := range x.Fields {
			st.Fields = append(st.Fields, &Field{Name: f.Name, Type: c.expr(f.Value, s)})
		}
		return st
	case *ast.MaskExpr, *ast.RangeExpr, *ast.DefaultExpr:
		c.errorf(e.Position(), "keyset expression is only allowed in select cases and table entries")
		return &Void{}
	case *ast.DontCareExpr:
		return &DontCare{}
	case *ast.InvalidExpr:
		// typed by the context it is converted to: a header or header union
		return &InvalidHeader{}
	}
	c.errorf(e.Position(), "unsupported expression")
	return &Void{}
}

func anonFields(x *ast.StructExpr, c *Checker) []*Field {
	var fs []*Field
	for _, f := range x.Fields {
		fs = append(fs, &Field{Name: f.Name, Type: c.info.Types[f.Value]})
	}
	return fs
}

func (c *Checker) ident(x *ast.Ident, s *scope) Type {
	sc := s
	if x.Global {
		sc = s.global()
	}
	ds := sc.lookup(x.Name)
	if len(ds) == 0 {
		c.resolveErrorf(x.Pos, "%s: undeclared identifier", x.Name)
		return &Void{}
	}
	d := ds[0]
	c.info.Uses[x] = d
	switch y := d.(type) {
	case *ast.VarDecl, *ast.Param, *ast.InstanceDecl, *ast.ValueSetDecl, *ast.ParserState:
		if t, ok := c.info.DeclTypes[d]; ok {
			return t
		}
		c.errorf(x.Pos, "%s used before its declaration is complete", x.Name)
		return &Void{}
	case *ast.ConstDecl:
		if v, ok := c.info.ConstValues[y]; ok {
			c.setValue(x, v)
		}
		return c.info.DeclTypes[y]
	case *ast.TableDecl:
		return &Table{Decl: y}
	case *ast.ActionDecl:
		return &Action{Decl: y}
	case *ast.FunctionDecl:
		return &Function{Proto: y.Proto}
	case *ast.ExternFuncDecl:
		return &Function{Proto: y.Proto}
	case *ast.EnumMember:
		if v, ok := c.info.ConstValues[y]; ok {
			c.setValue(x, v)
		}
		return &MatchKind{}
	case *ast.StructDecl, *ast.EnumDecl, *ast.TypedefDecl, *ast.ExternDecl, *ast.BlockTypeDecl,
		*ast.PackageDecl, *ast.TypeParam, *ast.ParserDecl, *ast.ControlDecl:
		return &TypeOfType{T: c.declType(d)}
	}
	c.errorf(x.Pos, "%s cannot be used here", x.Name)
	return &Void{}
}

func (c *Checker) member(x *ast.MemberExpr, s *scope) Type {
	xt := c.expr(x.X, s)
	if tt, ok := xt.(*TypeOfType); ok {
		switch t := Underlying(tt.T).(type) {
		case *ErrorType:
			if _, ok := c.errorMembers[x.Name]; !ok {
				c.resolveErrorf(x.Pos, "error.%s is not declared", x.Name)
			}
			c.setValue(x, &ErrorValue{Name: x.Name})
			return &ErrorType{}
		case *Enum:
			for _, m := range t.Decl.Members {
				if m.Name == x.Name {
					c.setValue(x, c.info.ConstValues[m])
					return tt.T
				}
			}
			c.errorf(x.Pos, "%s has no member %s", t.Name, x.Name)
			return &Void{}
		}
		c.errorf(x.Pos, "%s has no member %s", tt.T, x.Name)
		return &Void{}
	}
	switch t := Underlying(xt).(type) {
	case *Struct:
		f := t.FieldByName(x.Name)
		if f == nil {
			c.errorf(x.Pos, "%s has no field %s", t, x.Name)
			return &Void{}
		}
		if sv, ok := c.info.Values[x.X].(*StructValue); ok {
			c.setValue(x, sv.Fields[x.Name])
		}
		return f.Type
	case *Stack:
		switch x.Name {
		case "next", "last":
			if c.ctx.parser == nil && x.Name == "next" {
				c.errorf(x.Pos, "stack.next can only be used in a parser")
			}
			return t.Elem
		case "size":
			c.setValue(x, big.NewInt(int64(t.Size)))
			return &Bits{Width: 32}
		case "lastIndex":
			if c.ctx.parser == nil {
				c.errorf(x.Pos, "stack.lastIndex can only be used in a parser")
			}
			return &Bits{Width: 32}
		}
		c.errorf(x.Pos, "header stack has no member %s", x.Name)
		return &Void{}
	case *ApplyResult:
		switch x.Name {
		case "hit", "miss":
			return &Bool{}
		case "action_run":
			return &ActionEnum{Table: t.Table}
		}
		c.errorf(x.Pos, "the result of apply() has no member %s", x.Name)
		return &Void{}
	}
	c.errorf(x.Pos, "%s has no member %s", xt, x.Name)
	return &Void{}
}

func (c *Checker) index(x *ast.IndexExpr, s *scope) Type {
	xt := c.expr(x.X, s)
	it := c.expr(x.Index, s)
	switch t := Underlying(xt).(type) {
	case *Stack:
		if _, ok := Underlying(it).(*InfInt); ok {
			c.convert(x.Index, &Bits{Width: 32})
		} else if BitsOf(it) == nil {
			c.errorf(x.Index.Position(), "stack index must be an integer")
		}
		if v, ok := c.info.Values[x.Index].(*big.Int); ok {
			if v.Sign() < 0 || v.Cmp(big.NewInt(int64(t.Size))) >= 0 {
				c.errorf(x.Index.Position(), "index %s is out of range for a stack of size %d", v, t.Size)
			}
		}
		return t.Elem
	case *Tuple:
		v, ok := c.info.Values[x.Index].(*big.Int)
		if !ok || !v.IsInt64() || v.Int64() < 0 || v.Int64() >= int64(len(t.Elems)) {
			c.errorf(x.Index.Position(), "tuple index must be a constant in range")
			return &Void{}
		}
		if tv, ok := c.info.Values[x.X].(*TupleValue); ok {
			c.setValue(x, tv.Elems[v.Int64()])
		}
		return t.Elems[v.Int64()]
	}
	c.errorf(x.Pos, "cannot index a value of type %s", xt)
	return &Void{}
}

func (c *Checker) slice(x *ast.SliceExpr, s *scope) Type {
	xt := c.expr(x.X, s)
	c.expr(x.Hi, s)
	c.expr(x.Lo, s)
	hv, ok1 := c.info.Values[x.Hi].(*big.Int)
	lv, ok2 := c.info.Values[x.Lo].(*big.Int)
	if !ok1 || !ok2 {
		c.errorf(x.Pos, "slice bounds must be compile-time constants")
		return &Void{}
	}
	hi, lo := int(hv.Int64()), int(lv.Int64())
	var w int
	switch t := Underlying(xt).(type) {
	case *Bits:
		w = t.Width
	case *InfInt:
		w = 1 << 16
	default:
		c.errorf(x.Pos, "cannot slice a value of type %s", xt)
		return &Void{}
	}
	if lo < 0 || hi < lo || hi >= w {
		c.errorf(x.Pos, "slice [%d:%d] is out of range for %s", hi, lo, xt)
		return &Void{}
	}
	rt := &Bits{Width: hi - lo + 1}
	if v, ok := c.info.Values[x.X].(*big.Int); ok {
		r := new(big.Int).Rsh(v, uint(lo))
		c.setValue(x, normalize(r, rt))
	}
	return rt
}

func (c *Checker) unary(x *ast.UnaryExpr, s *scope) Type {
	t := c.expr(x.X, s)
	v, isConst := c.info.Values[x.X]
	switch x.Op {
	case scanner.Not:
		c.convert(x.X, &Bool{})
		if b, ok := c.info.Values[x.X].(bool); ok {
			c.setValue(x, !b)
		}
		return &Bool{}
	case scanner.Compl:
		b, ok := Underlying(t).(*Bits)
		if !ok {
			c.errorf(x.Pos, "~ needs a bit<W> or int<W> operand, not %s", t)
			return &Void{}
		}
		if iv, ok := v.(*big.Int); ok && isConst {
			c.setValue(x, normalize(new(big.Int).Not(iv), b))
		}
		return t
	case scanner.Sub, scanner.Add:
		switch u := Underlying(t).(type) {
		case *Bits:
			if iv, ok := v.(*big.Int); ok && isConst {
				if x.Op == scanner.Sub {
					c.setValue(x, normalize(new(big.Int).Neg(iv), u))
				} else {
					c.setValue(x, iv)
				}
			}
			return t
		case *InfInt:
			if iv, ok := v.(*big.Int); ok && isConst {
				if x.Op == scanner.Sub {
					c.setValue(x, new(big.Int).Neg(iv))
				} else {
					c.setValue(x, iv)
				}
			}
			return t
		}
		c.errorf(x.Pos, "unary %s needs a numeric operand, not %s", x.Op, t)
	}
	return &Void{}
}

func isInfInt(t Type) bool {
	_, ok := Underlying(t).(*InfInt)
	return ok
}

// binaryTypes types `x op y` where both operands are already typed. assign
// is true for compound assignments (the result goes back into x).
func (c *Checker) binaryTypes(op scanner.Kind, x, y ast.Expr, pos scanner.Pos, assign bool) (Type, Value) {
	xt, yt := c.info.Types[x], c.info.Types[y]
	switch op {
	case scanner.AndAnd, scanner.OrOr:
		c.convert(x, &Bool{})
		c.convert(y, &Bool{})
		xv, xok := c.info.Values[x].(bool)
		yv, yok := c.info.Values[y].(bool)
		if xok && yok {
			if op == scanner.AndAnd {
				return &Bool{}, xv && yv
			}
			return &Bool{}, xv || yv
		}
		return &Bool{}, nil
	case scanner.Eq, scanner.Ne:
		// h == {#} compares with an invalid header of h's type
		if _, ok := x.(*ast.InvalidExpr); ok {
			c.convert(x, c.info.Types[y])
		} else if _, ok := y.(*ast.InvalidExpr); ok {
			c.convert(y, c.info.Types[x])
		}
		c.unifyOperands(x, y)
		xt, yt = c.info.Types[x], c.info.Types[y]
		if !Identical(Underlying(xt), Underlying(yt)) && !isInfInt(xt) {
			if !(IsHeader(xt) && IsHeader(yt)) {
				c.errorf(pos, "cannot compare %s and %s", xt, yt)
			}
		}
		if xv, ok := c.info.Values[x]; ok {
			if yv, ok := c.info.Values[y]; ok {
				if eq, ok := valuesEqual(xv, yv); ok {
					return &Bool{}, op == scanner.Eq == eq
				}
			}
		}
		return &Bool{}, nil
	case scanner.Lt, scanner.Gt, scanner.Le, scanner.Ge:
		c.unifyOperands(x, y)
		xt, yt = c.info.Types[x], c.info.Types[y]
		if !numeric(xt) || !Identical(Underlying(xt), Underlying(yt)) {
			c.errorf(pos, "cannot compare %s and %s with %s", xt, yt, op)
			return &Bool{}, nil
		}
		xv, xok := c.info.Values[x].(*big.Int)
		yv, yok := c.info.Values[y].(*big.Int)
		if xok && yok {
			r := xv.Cmp(yv)
			var b bool
			switch op {
			case scanner.Lt:
				b = r < 0
			case scanner.Gt:
				b = r > 0
			case scanner.Le:
				b = r <= 0
			case scanner.Ge:
				b = r >= 0
			}
			return &Bool{}, b
		}
		return &Bool{}, nil
	case scanner.Shl, ast.ShrOp:
		if _, ok := Underlying(yt).(*Bits); ok && Underlying(yt).(*Bits).Signed {
			c.errorf(pos, "shift amount must be unsigned")
		}
		if isInfInt(yt) {
			if v, ok := c.info.Values[y].(*big.Int); ok && v.Sign() < 0 {
				c.errorf(pos, "shift amount must not be negative")
			}
		} else if _, ok := yt.(*Bits); !ok {
			// P4_16 §8.5: bit<S> or a non-negative compile-time
			// integer; not a `type` over bits, an enum or a bool.
			c.errorf(pos, "shift amount must be a bit<S> value or a non-negative integer, not %s", yt)
		}
		if isInfInt(xt) && !isInfInt(yt) {
			if _, ok := c.info.Values[y]; !ok {
				c.errorf(pos, "left operand of a shift by a run-time amount needs a width")
			}
		}
		if !numeric(xt) {
			c.errorf(pos, "cannot shift a value of type %s", xt)
			return &Void{}, nil
		}
		xv, xok := c.info.Values[x].(*big.Int)
		yv, yok := c.info.Values[y].(*big.Int)
		if xok && yok && yv.IsInt64() && yv.Int64() < 1<<16 {
			var r *big.Int
			if op == scanner.Shl {
				r = new(big.Int).Lsh(xv, uint(yv.Int64()))
			} else {
				r = new(big.Int).Rsh(xv, uint(yv.Int64()))
			}
			return xt, normalizeFor(r, xt)
		}
		return xt, nil
	case scanner.Concat:
		xb, ok1 := Underlying(xt).(*Bits)
		yb, ok2 := Underlying(yt).(*Bits)
		if isInfInt(xt) || isInfInt(yt) {
			c.errorf(pos, "operands of ++ need widths")
			return &Void{}, nil
		}
		if !ok1 || !ok2 {
			c.errorf(pos, "cannot concatenate %s and %s", xt, yt)
			return &Void{}, nil
		}
		rt := &Bits{Width: xb.Width + yb.Width, Signed: xb.Signed}
		xv, xok := c.info.Values[x].(*big.Int)
		yv, yok := c.info.Values[y].(*big.Int)
		if xok && yok {
			r := new(big.Int).Lsh(toUnsigned(xv, xb.Width), uint(yb.Width))
			r.Or(r, toUnsigned(yv, yb.Width))
			return rt, normalize(r, rt)
		}
		return rt, nil
	}
	// arithmetic and bitwise operators
	c.unifyOperands(x, y)
	xt, yt = c.info.Types[x], c.info.Types[y]
	if assign {
		c.convert(y, xt)
		yt = c.info.Types[y]
	}
	if !numeric(xt) || !Identical(Underlying(xt), Underlying(yt)) {
		c.errorf(pos, "operator %s cannot combine %s and %s", opName(op), xt, yt)
		return &Void{}, nil
	}
	if _, ok := Underlying(xt).(*Enum); ok {
		c.errorf(pos, "operator %s cannot be applied to enum values", opName(op))
		return &Void{}, nil
	}
	if isInfInt(xt) && (op == scanner.SatAdd || op == scanner.SatSub) {
		c.errorf(pos, "saturating arithmetic needs a width")
	}
	if b, ok := Underlying(xt).(*Bits); ok && (op == scanner.Div || op == scanner.Mod) {
		if b.Signed {
			c.errorf(pos, "%s is not defined on signed values", opName(op))
		}
	}
	xv, xok := c.info.Values[x].(*big.Int)
	yv, yok := c.info.Values[y].(*big.Int)
	if (op == scanner.Div || op == scanner.Mod) && yok && yv.Sign() == 0 {
		c.errorf(pos, "division by zero")
		return xt, nil
	}
	if xok && yok {
		if r := foldArith(op, xv, yv, xt); r != nil {
			return xt, r
		}
	}
	return xt, nil
}

func opName(op scanner.Kind) string {
	if op == ast.ShrOp {
		return ">>"
	}
	return op.String()
}

func numeric(t Type) bool {
	switch Underlying(t).(type) {
	case *Bits, *InfInt:
		return true
	case *Enum:
		return Underlying(t).(*Enum).Underlying != nil
	}
	return false
}

// unifyOperands applies the implicit casts between the operands of a
// binary operator: an int constant takes the other side's type, and a
// serializable enum meets its underlying type.
func (c *Checker) unifyOperands(x, y ast.Expr) {
	xt, yt := c.info.Types[x], c.info.Types[y]
	switch {
	case isInfInt(xt) && !isInfInt(yt):
		c.convert(x, yt)
	case isInfInt(yt) && !isInfInt(xt):
		c.convert(y, xt)
	}
	xt, yt = c.info.Types[x], c.info.Types[y]
	if xe, ok := Underlying(xt).(*Enum); ok && xe.Underlying != nil {
		if _, ok := Underlying(yt).(*Bits); ok {
			c.convert(x, yt)
		}
	}
	if ye, ok := Underlying(yt).(*Enum); ok && ye.Underlying != nil {
		if _, ok := Underlying(xt).(*Bits); ok {
			c.convert(y, xt)
		}
	}
}

func (c *Checker) ternary(x *ast.TernaryExpr, s *scope) Type {
	c.expr(x.Cond, s)
	c.convert(x.Cond, &Bool{})
	tt := c.expr(x.Then, s)
	et := c.expr(x.Else, s)
	if isInfInt(tt) && !isInfInt(et) {
		c.convert(x.Then, et)
	} else if isInfInt(et) && !isInfInt(tt) {
		c.convert(x.Else, tt)
	}
	tt, et = c.info.Types[x.Then], c.info.Types[x.Else]
	if !Identical(Underlying(tt), Underlying(et)) {
		c.errorf(x.Pos, "the branches of ?: have different types %s and %s", tt, et)
	}
	cv, ok := c.info.Values[x.Cond].(bool)
	if ok {
		branch := x.Else
		if cv {
			branch = x.Then
		}
		if v, ok := c.info.Values[branch]; ok {
			c.setValue(x, v)
		}
	} else if isInfInt(tt) {
		c.errorf(x.Pos, "?: with a run-time condition needs branches with a width")
	}
	return tt
}

func (c *Checker) cast(x *ast.CastExpr, s *scope) Type {
	target := c.resolveType(x.Type, s)
	src := c.expr(x.X, s)
	// A cast of a list or struct initializer is a typed initializer.
	switch x.X.(type) {
	case *ast.ListExpr, *ast.StructExpr, *ast.InvalidExpr:
		c.convert(x.X, target)
		if v, ok := c.info.Values[x.X]; ok {
			c.setValue(x, v)
		}
		return target
	}
	tu, su := Underlying(target), Underlying(src)
	v, isConst := c.info.Values[x.X]
	switch t := tu.(type) {
	case *Bits:
		switch sv := su.(type) {
		case *Bits, *InfInt:
			if iv, ok := v.(*big.Int); ok && isConst {
				c.setValue(x, castInt(iv, su, t))
			}
			return target
		case *Bool:
			if t.Width != 1 {
				c.errorf(x.Pos, "bool can only be cast to bit<1>")
			}
			if b, ok := v.(bool); ok && isConst {
				if b {
					c.setValue(x, big.NewInt(1))
				} else {
					c.setValue(x, big.NewInt(0))
				}
			}
			return target
		case *Enum:
			if sv.Underlying == nil {
				c.errorf(x.Pos, "enum %s has no numeric representation", sv.Name)
				return target
			}
			if ev, ok := v.(*EnumValue); ok && isConst && ev.Value != nil {
				c.setValue(x, castInt(ev.Value, sv.Underlying, t))
			}
			return target
		}
	case *Bool:
		switch sv := su.(type) {
		case *Bits:
			if sv.Width != 1 || sv.Signed {
				c.errorf(x.Pos, "only bit<1> can be cast to bool")
			}
			if iv, ok := v.(*big.Int); ok && isConst {
				c.setValue(x, iv.Sign() != 0)
			}
			return target
		case *InfInt:
			if iv, ok := v.(*big.Int); ok && isConst {
				c.setValue(x, iv.Sign() != 0)
			}
			return target
		case *Bool:
			if isConst {
				c.setValue(x, v)
			}
			return target
		}
	case *Enum:
		if t.Underlying != nil {
			if BitsOf(su) != nil || isInfInt(su) {
				if iv, ok := v.(*big.Int); ok && isConst {
					c.setValue(x, c.enumFromInt(t, normalize(iv, t.Underlying)))
				}
				return target
			}
		}
		if Identical(tu, su) {
			if isConst {
				c.setValue(x, v)
			}
			return target
		}
	case *Struct, *Tuple:
		if Identical(tu, su) {
			return target
		}
	case *ErrorType:
		if _, ok := su.(*ErrorType); ok {
			if isConst {
				c.setValue(x, v)
			}
			return target
		}
	case *Varbit:
		if Identical(tu, su) {
			return target
		}
	}
	c.errorf(x.Pos, "cannot cast %s to %s", src, target)
	return target
}

// enumFromInt returns the member of a serializable enum with value v, or
// a nameless value when none has it (P4_16 allows unnamed values).
func (c *Checker) enumFromInt(t *Enum, v *big.Int) *EnumValue {
	for _, m := range t.Decl.Members {
		if ev, ok := c.info.ConstValues[m].(*EnumValue); ok && ev.Value != nil && ev.Value.Cmp(v) == 0 {
			return &EnumValue{Enum: t, Member: m.Name, Value: v}
		}
	}
	return &EnumValue{Enum: t, Value: v}
}

// convert applies the implicit cast of e to target (P4_16 §8.11), or
// reports an error when there is none.
func (c *Checker) convert(e ast.Expr, target Type) {
	src := c.info.Types[e]
	if src == nil || target == nil {
		return
	}
	if _, bad := src.(*Void); bad {
		return // already reported
	}
	switch target.(type) {
	case *TypeVar, *DontCare:
		return
	}
	if _, ok := src.(*DontCare); ok {
		return
	}
	if Identical(src, target) {
		c.info.Types[e] = target
		return
	}
	tu, su := Underlying(target), Underlying(src)
	switch t := tu.(type) {
	case *Bits:
		if _, ok := su.(*InfInt); ok {
			if v, ok := c.info.Values[e].(*big.Int); ok {
				if !fitsLoose(v, t) {
					c.warnf(e.Position(), "value %s does not fit in %s; it is truncated", v, t)
				}
				c.info.Values[e] = normalize(v, t)
			}
			c.info.Types[e] = target
			return
		}
		if se, ok := su.(*Enum); ok && se.Underlying != nil && Identical(se.Underlying, t) {
			if ev, ok := c.info.Values[e].(*EnumValue); ok && ev.Value != nil {
				c.info.Values[e] = ev.Value
			}
			c.info.Types[e] = target
			return
		}
		if sb, ok := su.(*Bits); ok && Identical(sb, t) {
			if _, isNew := target.(*NewType); isNew && !isLiteral(e) {
				break
			}
			c.info.Types[e] = target
			return
		}
	case *InfInt:
		if _, ok := su.(*Bits); ok {
			if _, ok := c.info.Values[e]; ok {
				return // a sized constant where a size is expected
			}
		}
	case *Struct:
		switch x := e.(type) {
		case *ast.ListExpr:
			if len(x.Elems) != len(t.Fields) {
				c.errorf(e.Position(), "%s has %d fields, the initializer has %d", t.Name, len(t.Fields), len(x.Elems))
				return
			}
			vals := map[string]Value{}
			allConst := true
			for i, el := range x.Elems {
				c.convert(el, t.Fields[i].Type)
				if v, ok := c.info.Values[el]; ok {
					vals[t.Fields[i].Name] = v
				} else {
					allConst = false
				}
			}
			c.info.Types[e] = target
			if allConst {
				c.info.Values[e] = &StructValue{Type: t, Fields: vals, Valid: true}
			} else {
				delete(c.info.Values, e)
			}
			return
		case *ast.StructExpr:
			vals := map[string]Value{}
			allConst := true
			seen := map[string]bool{}
			for _, f := range x.Fields {
				tf := t.FieldByName(f.Name)
				if tf == nil {
					c.errorf(f.Pos, "%s has no field %s", t.Name, f.Name)
					continue
				}
				seen[f.Name] = true
				c.convert(f.Value, tf.Type)
				if v, ok := c.info.Values[f.Value]; ok {
					vals[f.Name] = v
				} else {
					allConst = false
				}
			}
			for _, f := range t.Fields {
				if !seen[f.Name] && !x.Rest {
					c.errorf(e.Position(), "initializer of %s has no value for field %s", t.Name, f.Name)
				}
			}
			c.info.Types[e] = target
			// with `...` the lowering supplies the default values
			if allConst && !x.Rest {
				c.info.Values[e] = &StructValue{Type: t, Fields: vals, Valid: true}
			}
			return
		case *ast.CastExpr:
			if Identical(Underlying(c.info.Types[x]), t) {
				return
			}
		case *ast.InvalidExpr:
			if t.Kind != ast.StructKindStruct {
				c.info.Types[e] = target
				return
			}
		}
		if ss, ok := su.(*Struct); ok && ss.Name == "" && t.Kind == ast.StructKindStruct {
			// an anonymous struct produced by an untyped initializer
			if len(ss.Fields) == len(t.Fields) {
				c.info.Types[e] = target
				return
			}
		}
	case *Tuple:
		if x, ok := e.(*ast.ListExpr); ok && len(x.Elems) == len(t.Elems) {
			for i, el := range x.Elems {
				c.convert(el, t.Elems[i])
			}
			c.info.Types[e] = target
			return
		}
	case *Stack:
		if x, ok := e.(*ast.ListExpr); ok && len(x.Elems) == t.Size {
			for _, el := range x.Elems {
				c.convert(el, t.Elem)
			}
			c.info.Types[e] = target
			return
		}
	case *Set:
		c.convert(e, t.Elem)
		return
	case *Block:
		// an architecture block type (Parser<H, M>) filled by a user
		// parser or control with the same shape
		if sb, ok := su.(*Block); ok && sb.IsParser == t.IsParser && len(sb.Params) == len(t.Params) {
			if msg := c.blockShapeMismatch(sb, t); msg != "" {
				c.errorf(e.Position(), "cannot use %s where %s is expected: %s", src, target, msg)
			}
			return
		}
	}
	c.errorf(e.Position(), "cannot use a value of type %s where %s is expected", src, target)
}

func isLiteral(e ast.Expr) bool {
	_, ok := e.(*ast.IntLit)
	return ok
}

// blockShapeMismatch says how a parser or control differs from the block
// type it is given for (P4_16 §7.2.12: a parser or control matches a
// parser or control type when their parameters have the same directions
// and types, type variables standing for any type). "" when it matches.
func (c *Checker) blockShapeMismatch(have, want *Block) string {
	for i, wp := range want.Params {
		hp := have.Params[i]
		if hp.Dir != wp.Dir {
			return fmt.Sprintf("parameter %s is %s, the type's %s is %s", hp.Name, dirName(hp.Dir), wp.Name, dirName(wp.Dir))
		}
		wt, ht := c.info.DeclTypes[wp], c.info.DeclTypes[hp]
		if wt == nil || ht == nil || hasTypeVar(wt) {
			continue
		}
		if !Identical(Underlying(wt), Underlying(ht)) {
			return fmt.Sprintf("parameter %s has type %s, the type's %s has %s", hp.Name, ht, wp.Name, wt)
		}
	}
	return ""
}

func dirName(d ast.Direction) string {
	switch d {
	case ast.In:
		return "in"
	case ast.Out:
		return "out"
	case ast.InOut:
		return "inout"
	}
	return "directionless"
}
