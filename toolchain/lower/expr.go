package lower

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// lastElem and nextElem stand for stack.last and stack.next.
type lastElem struct{ stack *stackLoc }
type nextElem struct{ stack *stackLoc }

// unionNext is stack.next.member for a stack of header unions.
type unionNext struct {
	stack  *stackLoc
	member string
}

// applyVal is the result of table.apply() in an expression.
type applyVal struct{ ap *mApply }

// constIR turns a compile-time value of scalar type t into IR.
func (l *lowerer) constIR(v types.Value, t types.Type) ir.Expr {
	it := irType(t)
	switch x := v.(type) {
	case bool:
		return &ir.BoolConst{Value: x}
	case *big.Int:
		if it.Bool {
			return &ir.BoolConst{Value: x.Sign() != 0}
		}
		if _, inf := types.Underlying(t).(*types.InfInt); inf {
			return &ir.Const{Value: new(big.Int).Set(x), T: ir.Type{}}
		}
		return &ir.Const{Value: types.Normalize(x, &types.Bits{Width: it.Width, Signed: it.Signed}), T: it}
	case *types.EnumValue:
		if x.Value != nil {
			return &ir.Const{Value: new(big.Int).Set(x.Value), T: it}
		}
		if v := types.MemberValue(x.Enum, x.Member); v != nil {
			return &ir.Const{Value: v, T: ir.Bits(32, false)}
		}
		return &ir.Const{Value: big.NewInt(0), T: ir.Bits(32, false)}
	case *types.ErrorValue:
		for i, n := range l.info.Errors {
			if n == x.Name {
				return &ir.Const{Value: big.NewInt(int64(i)), T: ir.Bits(32, false)}
			}
		}
	}
	return &ir.Const{Value: big.NewInt(0), T: it}
}

// constVal turns a compile-time value into a lowering value (scalars, or
// struct/tuple values of scalars).
func (l *lowerer) constValue(v types.Value, t types.Type) any {
	switch x := v.(type) {
	case *types.StructValue:
		st, ok := types.Underlying(t).(*types.Struct)
		if !ok {
			st = x.Type
		}
		sv := &structVal{st: st, valid: true}
		for _, f := range st.Fields {
			fv, ok := x.Fields[f.Name]
			if !ok {
				sv.fields = append(sv.fields, &scalarVal{e: &ir.Const{Value: big.NewInt(0), T: irType(f.Type)}, t: f.Type})
				continue
			}
			sv.fields = append(sv.fields, l.constValue(fv, f.Type))
		}
		return sv
	case *types.TupleValue:
		tv := &tupleVal{}
		tt, _ := types.Underlying(t).(*types.Tuple)
		for i, e := range x.Elems {
			var et types.Type = &types.InfInt{}
			if tt != nil && i < len(tt.Elems) {
				et = tt.Elems[i]
			}
			tv.elems = append(tv.elems, l.constValue(e, et))
		}
		if st, ok := types.Underlying(t).(*types.Struct); ok {
			sv := &structVal{st: st, valid: true}
			for i, f := range st.Fields {
				if i < len(x.Elems) {
					sv.fields = append(sv.fields, l.constValue(x.Elems[i], f.Type))
				}
			}
			return sv
		}
		return tv
	}
	return &scalarVal{e: l.constIR(v, t), t: t}
}

// hasSideEffects reports whether evaluating e can change state or depends
// on a call (functions, externs, table and block applies).
func (l *lowerer) hasSideEffects(e ast.Expr) bool {
	found := false
	walkExpr(e, func(x ast.Expr) {
		if c, ok := x.(*ast.CallExpr); ok {
			call := l.info.Calls[c]
			if call == nil {
				return
			}
			switch call.Kind {
			case types.CallBuiltin:
				if call.Builtin != "isValid" && !sizeBuiltin(call.Builtin) {
					found = true
				}
			case types.CallConstructor:
			default:
				found = true
			}
		}
	})
	return found
}

func sizeBuiltin(n string) bool {
	switch n {
	case "minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes":
		return true
	}
	return false
}

// walkExpr calls f on e and every subexpression.
func walkExpr(e ast.Expr, f func(ast.Expr)) {
	if e == nil {
		return
	}
	f(e)
	switch x := e.(type) {
	case *ast.MemberExpr:
		walkExpr(x.X, f)
	case *ast.IndexExpr:
		walkExpr(x.X, f)
		walkExpr(x.Index, f)
	case *ast.SliceExpr:
		walkExpr(x.X, f)
	case *ast.CallExpr:
		walkExpr(x.Fun, f)
		for _, a := range x.Args {
			walkExpr(a.Value, f)
		}
	case *ast.UnaryExpr:
		walkExpr(x.X, f)
	case *ast.BinaryExpr:
		walkExpr(x.X, f)
		walkExpr(x.Y, f)
	case *ast.TernaryExpr:
		walkExpr(x.Cond, f)
		walkExpr(x.Then, f)
		walkExpr(x.Else, f)
	case *ast.CastExpr:
		walkExpr(x.X, f)
	case *ast.ListExpr:
		for _, el := range x.Elems {
			walkExpr(el, f)
		}
	case *ast.StructExpr:
		for _, fl := range x.Fields {
			walkExpr(fl.Value, f)
		}
	case *ast.MaskExpr:
		walkExpr(x.Value, f)
		walkExpr(x.Mask, f)
	case *ast.RangeExpr:
		walkExpr(x.Lo, f)
		walkExpr(x.Hi, f)
	}
}

// exprAs evaluates e, whose type the checker has already made t.
func (b *body) exprAs(e ast.Expr, t types.Type) any {
	v := b.expr(e)
	if sv, ok := v.(*scalarVal); ok {
		if c, ok := sv.e.(*ir.Const); ok && c.T.Width == 0 && !c.T.Bool {
			if bt := types.BitsOf(t); bt != nil {
				return &scalarVal{e: &ir.Const{Value: types.Normalize(c.Value, bt), T: irType(t)}, t: t}
			}
		}
	}
	return v
}

// cond evaluates a boolean expression.
func (b *body) cond(e ast.Expr) ir.Expr {
	return b.read(b.expr(e), &types.Bool{})
}

// rv evaluates a scalar expression to IR.
func (b *body) rv(e ast.Expr) ir.Expr {
	t := b.l.info.Types[e]
	return b.read(b.exprAs(e, t), t)
}

// read turns a scalar value into an IR expression whose type follows t
// (bool values are booleans, not bits).
func (b *body) read(v any, t types.Type) ir.Expr {
	isBool := irType(t).Bool
	switch x := v.(type) {
	case *scalarVal:
		if isBool && !x.e.Type().Bool {
			return &ir.BitToBool{X: x.e}
		}
		if !isBool && x.e.Type().Bool {
			return &ir.BoolToBit{X: x.e}
		}
		return x.e
	case *fieldLoc:
		st := storageType(x.t)
		if _, vb := types.Underlying(x.t).(*types.Varbit); vb {
			st.Varbit = true
		}
		ref := &ir.FieldRef{Header: x.hdr, Field: x.field, T: st}
		if irType(x.t).Bool {
			return &ir.BitToBool{X: ref}
		}
		return ref
	case *dynFieldLoc:
		ref := b.dynField(x)
		if irType(x.t).Bool {
			return &ir.BitToBool{X: ref}
		}
		return ref
	case *constVal:
		return b.read(b.l.constValue(x.v, x.t), t)
	case *sliceLoc:
		base := b.read(x.base, baseType(x.base))
		return sliceIR(base, x.hi, x.lo)
	}
	if _, union := v.(*unionLoc); union {
		// Field lists (digests, preserved metadata) are lowered from fields, headers and structs;
		// flattening a union's alternatives is not implemented.
		b.errorf(scanner.Pos{}, "a header union in a digest or field list is not supported; list the union's headers instead")
	} else {
		b.errorf(scanner.Pos{}, "internal: a %T value used as a scalar", v)
	}
	return &ir.Const{Value: big.NewInt(0), T: irType(t)}
}

func baseType(v any) types.Type {
	switch x := v.(type) {
	case *fieldLoc:
		return x.t
	case *dynFieldLoc:
		return x.t
	}
	return &types.Bits{Width: 32}
}

func (b *body) dynField(x *dynFieldLoc) ir.Expr {
	elem := x.stack.ir
	idx := -1
	var ht *ir.HeaderType
	if elem != nil {
		ht = elem.Type
		idx = ht.FieldIndex(x.field)
	}
	return &ir.StackField{Stack: x.stack.name, Index: x.index, Field: x.field, FieldIndex: idx, T: storageType(x.t)}
}

func sliceIR(base ir.Expr, hi, lo int) ir.Expr {
	w := hi - lo + 1
	e := base
	if lo > 0 {
		e = &ir.Binary{Op: ">>", X: e, Y: &ir.Const{Value: big.NewInt(int64(lo)), T: ir.Bits(32, false)}, T: base.Type()}
	}
	return &ir.Truncate{X: e, T: ir.Bits(w, false)}
}

// wrapArith applies P4's wrap-around to an arithmetic result of type t.
func wrapArith(e ir.Expr, t ir.Type) ir.Expr {
	if t.Bool || t.Width == 0 {
		return e
	}
	if t.Signed {
		return &ir.SignWrap{X: e, T: t}
	}
	return &ir.Truncate{X: e, T: t}
}

// snapshot copies a scalar into a temporary unless it is a constant, so
// that later side effects cannot change it (left-to-right evaluation).
func (b *body) snapshot(v any, t types.Type) ir.Expr {
	e := b.read(v, t)
	switch e.(type) {
	case *ir.Const, *ir.BoolConst, *ir.ActionParam:
		return e
	}
	tmp := b.l.newScalar("tmp", t)
	b.emit(&ir.Assign{Dst: &ir.FieldRef{Header: tmp.hdr, Field: tmp.field, T: storageType(t)}, Src: toStorage(e)})
	return b.read(tmp, t)
}

// snapshotVal is snapshot for values of any type.
func (b *body) snapshotVal(v any, t types.Type) any {
	if isScalar(t) {
		return &scalarVal{e: b.snapshot(v, t), t: t}
	}
	switch v.(type) {
	case *structVal, *tupleVal:
		return v
	}
	tmp := b.l.alloc(t, "tmp")
	b.assign(tmp, v, scanner.Pos{}, "")
	return tmp
}

// toStorage converts a boolean expression into the bit stored for it.
func toStorage(e ir.Expr) ir.Expr {
	if e.Type().Bool {
		if bb, ok := e.(*ir.BitToBool); ok {
			return bb.X
		}
		return &ir.BoolToBit{X: e}
	}
	return e
}

func (b *body) expr(e ast.Expr) any {
	info := b.l.info
	t := info.Types[e]
	if v, ok := info.Values[e]; ok {
		switch v.(type) {
		case string:
		default:
			return b.l.constValue(v, t)
		}
	}
	switch x := e.(type) {
	case *ast.Ident:
		return b.ident(x)
	case *ast.MemberExpr:
		return b.member(x)
	case *ast.IndexExpr:
		return b.index(x, false)
	case *ast.SliceExpr:
		base := b.expr(x.X)
		hi, _ := info.Values[x.Hi].(*big.Int)
		lo, _ := info.Values[x.Lo].(*big.Int)
		if hi == nil || lo == nil {
			b.errorf(x.Pos, "slice bounds must be constants")
			return &scalarVal{e: &ir.Const{Value: big.NewInt(0), T: irType(t)}, t: t}
		}
		bt := info.Types[x.X]
		return &scalarVal{e: sliceIR(b.read(base, bt), int(hi.Int64()), int(lo.Int64())), t: t}
	case *ast.CallExpr:
		return b.call(x, false)
	case *ast.UnaryExpr:
		xt := info.Types[x.X]
		xv := b.read(b.expr(x.X), xt)
		it := irType(t)
		switch x.Op {
		case scanner.Not:
			return &scalarVal{e: &ir.Unary{Op: ir.OpNot, X: xv, T: ir.BoolType}, t: t}
		case scanner.Compl:
			return &scalarVal{e: wrapArith(&ir.Unary{Op: ir.OpCompl, X: xv, T: it}, it), t: t}
		case scanner.Sub:
			return &scalarVal{e: wrapArith(&ir.Unary{Op: ir.OpNeg, X: xv, T: it}, it), t: t}
		}
		return &scalarVal{e: xv, t: t}
	case *ast.BinaryExpr:
		return b.binary(x)
	case *ast.TernaryExpr:
		return b.ternary(x)
	case *ast.CastExpr:
		switch x.X.(type) {
		case *ast.ListExpr, *ast.StructExpr:
			return b.expr(x.X)
		}
		st := info.Types[x.X]
		v := b.expr(x.X)
		if !isScalar(t) || !isScalar(st) {
			return v
		}
		return &scalarVal{e: castIR(b.read(v, st), st, t), t: t}
	case *ast.ListExpr:
		vals := b.evalInOrder(x.Elems)
		switch tt := types.Underlying(t).(type) {
		case *types.Struct:
			return &structVal{st: tt, fields: vals, valid: true}
		}
		return &tupleVal{elems: vals}
	case *ast.StructExpr:
		exprs := make([]ast.Expr, len(x.Fields))
		for i, f := range x.Fields {
			exprs[i] = f.Value
		}
		vals := b.evalInOrder(exprs)
		st, ok := types.Underlying(t).(*types.Struct)
		if !ok {
			b.errorf(x.Pos, "struct initializer without a struct type")
			return &tupleVal{elems: vals}
		}
		sv := &structVal{st: st, valid: true, fields: make([]any, len(st.Fields))}
		for i, f := range x.Fields {
			if idx := fieldIndex(st, f.Name); idx >= 0 {
				sv.fields[idx] = vals[i]
			}
		}
		for i, f := range st.Fields {
			if sv.fields[i] == nil {
				sv.fields[i] = b.defaultValue(f.Type, x.Pos)
			}
		}
		return sv
	case *ast.InvalidExpr:
		st, ok := types.Underlying(t).(*types.Struct)
		if !ok || st.Kind == ast.StructKindStruct {
			b.errorf(x.Pos, "{#} without a header or header union type")
			panic(bailout{})
		}
		return b.defaultValue(st, x.Pos)
	case *ast.DontCareExpr:
		return nil
	case *ast.TypeExpr:
		return nil
	}
	b.errorf(e.Position(), "unsupported expression")
	return &scalarVal{e: &ir.Const{Value: big.NewInt(0), T: irType(t)}, t: t}
}

// defaultValue is the value P4_16 §7.3 gives a variable of type t that an
// initializer with `...` leaves out: 0 for bits, false, the first member of
// an enum without representation, invalid headers and unions, and structs
// of such values.
func (b *body) defaultValue(t types.Type, pos scanner.Pos) any {
	switch x := types.Underlying(t).(type) {
	case *types.Struct:
		sv := &structVal{st: x, valid: x.Kind == ast.StructKindStruct}
		for _, f := range x.Fields {
			sv.fields = append(sv.fields, b.defaultValue(f.Type, pos))
		}
		return sv
	case *types.Stack:
		tv := &tupleVal{}
		for i := 0; i < x.Size; i++ {
			tv.elems = append(tv.elems, b.defaultValue(x.Elem, pos))
		}
		return tv
	case *types.Bits, *types.Bool, *types.Enum, *types.ErrorType:
		it := irType(t)
		if it.Bool {
			return &scalarVal{e: &ir.BoolConst{Value: false}, t: t}
		}
		return &scalarVal{e: &ir.Const{Value: big.NewInt(0), T: it}, t: t}
	}
	b.errorf(pos, "no default value for a value of type %s here", t)
	panic(bailout{})
}

// evalInOrder evaluates expressions left to right; a value that a later
// expression's side effects could change is copied first.
func (b *body) evalInOrder(es []ast.Expr) []any {
	vals := make([]any, len(es))
	for i, e := range es {
		v := b.exprAs(e, b.l.info.Types[e])
		later := false
		for _, f := range es[i+1:] {
			if b.l.hasSideEffects(f) {
				later = true
			}
		}
		if later && v != nil {
			v = b.snapshotVal(v, b.l.info.Types[e])
		}
		vals[i] = v
	}
	return vals
}

func (b *body) ident(x *ast.Ident) any {
	d := b.l.info.Uses[x]
	if d == nil {
		b.errorf(x.Pos, "internal: unresolved name %s", x.Name)
		panic(bailout{})
	}
	if v, ok := b.env.lookup(d); ok {
		return v
	}
	if v, ok := b.l.globalEnv.lookup(d); ok {
		return v
	}
	switch y := d.(type) {
	case *ast.ConstDecl:
		return b.l.constValue(b.l.info.ConstValues[y], b.l.info.DeclTypes[y])
	case *ast.InstanceDecl:
		if b.l.info.ParentOf[y] == nil {
			return b.l.declareInstance(nil, y, b.l.globalEnv)
		}
	case *ast.TableDecl:
		return &tableRef{decl: y, inst: b.inst}
	case *ast.ActionDecl:
		return &actionRefVal{decl: y, inst: b.inst}
	}
	b.errorf(x.Pos, "%s cannot be used here", x.Name)
	panic(bailout{})
}

func (b *body) member(x *ast.MemberExpr) any {
	info := b.l.info
	t := info.Types[x]
	// t.apply().hit / .miss in a value context
	if call, ok := x.X.(*ast.CallExpr); ok {
		if c := info.Calls[call]; c != nil && c.Kind == types.CallTableApply && (x.Name == "hit" || x.Name == "miss") {
			ap := b.applyTable(call)
			if ap == nil {
				return &scalarVal{e: &ir.BoolConst{}, t: t}
			}
			tmp := b.l.newScalar("hasReturned_hit", &types.Bool{})
			one := &ir.Assign{Dst: flagRef(tmp), Src: &ir.Const{Value: big.NewInt(1), T: ir.Bits(1, false)}}
			zero := &ir.Assign{Dst: flagRef(tmp), Src: &ir.Const{Value: big.NewInt(0), T: ir.Bits(1, false)}}
			ap.hitMiss = true
			if x.Name == "hit" {
				ap.hit, ap.miss = []mstmt{one}, []mstmt{zero}
			} else {
				ap.hit, ap.miss = []mstmt{zero}, []mstmt{one}
			}
			return tmp
		}
	}
	xv := b.expr(x.X)
	switch v := xv.(type) {
	case *structLoc:
		if i := fieldIndex(v.st, x.Name); i >= 0 {
			return v.fields[i]
		}
	case *structVal:
		if i := fieldIndex(v.st, x.Name); i >= 0 {
			return v.fields[i]
		}
	case *headerLoc:
		if f := v.fieldOf(x.Name); f != nil {
			return f
		}
	case *unionLoc:
		if i := fieldIndex(v.st, x.Name); i >= 0 {
			return v.members[i]
		}
	case *dynHeader:
		elem := types.Underlying(v.stack.t.Elem).(*types.Struct)
		if f := elem.FieldByName(x.Name); f != nil {
			if elem.Kind == ast.StructKindUnion {
				b.errorf(x.Pos, "run-time indexing of header union stacks is not supported")
				panic(bailout{})
			}
			return &dynFieldLoc{stack: v.stack, index: v.index, field: x.Name, t: f.Type}
		}
	case *stackLoc:
		switch x.Name {
		case "last":
			return &lastElem{stack: v}
		case "next":
			return &nextElem{stack: v}
		case "lastIndex":
			return &scalarVal{e: &ir.LastIndex{Stack: v.name}, t: t}
		}
	case *lastElem:
		elem := types.Underlying(v.stack.t.Elem).(*types.Struct)
		if f := elem.FieldByName(x.Name); f != nil {
			return &scalarVal{e: &ir.LastField{Stack: v.stack.name, Field: x.Name, T: storageType(f.Type)}, t: f.Type}
		}
	case *nextElem:
		elem := types.Underlying(v.stack.t.Elem).(*types.Struct)
		if elem.Kind == ast.StructKindUnion && elem.FieldByName(x.Name) != nil {
			return &unionNext{stack: v.stack, member: x.Name}
		}
	case *tupleVal:
	}
	b.errorf(x.Pos, "cannot lower member %s here", x.Name)
	panic(bailout{})
}

func (b *body) index(x *ast.IndexExpr, forWrite bool) any {
	info := b.l.info
	xv := b.expr(x.X)
	switch v := xv.(type) {
	case *stackLoc:
		if iv, ok := info.Values[x.Index].(*big.Int); ok {
			i := int(iv.Int64())
			if i < 0 || i >= len(v.elems) {
				b.errorf(x.Pos, "index %d out of range", i)
				panic(bailout{})
			}
			return v.elems[i]
		}
		idx := b.rv(x.Index)
		if forWrite {
			idx = b.snapshot(&scalarVal{e: idx, t: info.Types[x.Index]}, info.Types[x.Index])
		}
		return &dynHeader{stack: v, index: idx}
	case *tupleVal:
		if iv, ok := info.Values[x.Index].(*big.Int); ok && int(iv.Int64()) < len(v.elems) {
			return v.elems[iv.Int64()]
		}
	}
	b.errorf(x.Pos, "cannot index this value")
	panic(bailout{})
}

// lvalue evaluates an assignment target to storage.
func (b *body) lvalue(e ast.Expr) any {
	switch x := e.(type) {
	case *ast.DontCareExpr:
		return nil
	case *ast.IndexExpr:
		return b.index(x, true)
	case *ast.SliceExpr:
		base := b.lvalue(x.X)
		hi, _ := b.l.info.Values[x.Hi].(*big.Int)
		lo, _ := b.l.info.Values[x.Lo].(*big.Int)
		if hi == nil || lo == nil {
			b.errorf(x.Pos, "slice bounds must be constants")
			panic(bailout{})
		}
		return &sliceLoc{base: base, hi: int(hi.Int64()), lo: int(lo.Int64())}
	case *ast.MemberExpr:
		xv := b.lvalue(x.X)
		switch v := xv.(type) {
		case *structLoc, *headerLoc, *unionLoc, *dynHeader, *stackLoc, *nextElem:
			_ = v
		default:
			return b.member(x)
		}
		return b.memberOf(xv, x)
	}
	return b.expr(e)
}

// memberOf is member() on an already evaluated base.
func (b *body) memberOf(xv any, x *ast.MemberExpr) any {
	switch v := xv.(type) {
	case *structLoc:
		if i := fieldIndex(v.st, x.Name); i >= 0 {
			return v.fields[i]
		}
	case *headerLoc:
		if f := v.fieldOf(x.Name); f != nil {
			return f
		}
	case *unionLoc:
		if i := fieldIndex(v.st, x.Name); i >= 0 {
			return v.members[i]
		}
	case *dynHeader:
		elem := types.Underlying(v.stack.t.Elem).(*types.Struct)
		if f := elem.FieldByName(x.Name); f != nil {
			return &dynFieldLoc{stack: v.stack, index: v.index, field: x.Name, t: f.Type}
		}
	case *stackLoc:
		switch x.Name {
		case "last":
			return &lastElem{stack: v}
		case "next":
			return &nextElem{stack: v}
		}
	case *nextElem:
		elem := types.Underlying(v.stack.t.Elem).(*types.Struct)
		if elem.Kind == ast.StructKindUnion && elem.FieldByName(x.Name) != nil {
			return &unionNext{stack: v.stack, member: x.Name}
		}
	}
	b.errorf(x.Pos, "cannot assign to %s", x.Name)
	panic(bailout{})
}

func (b *body) binary(x *ast.BinaryExpr) any {
	info := b.l.info
	t := info.Types[x]
	switch x.Op {
	case scanner.AndAnd, scanner.OrOr:
		if !b.l.hasSideEffects(x.Y) {
			l := b.cond(x.X)
			r := b.cond(x.Y)
			op := "and"
			if x.Op == scanner.OrOr {
				op = "or"
			}
			return &scalarVal{e: &ir.Binary{Op: op, X: l, Y: r, T: ir.BoolType}, t: t}
		}
		// the right operand runs only when needed (short circuit)
		tmp := b.l.newScalar("tmp", &types.Bool{})
		l := b.cond(x.X)
		b.emit(&ir.Assign{Dst: flagRef(tmp), Src: toStorage(l)})
		rhs := b.sub(func() {
			r := b.cond(x.Y)
			b.emit(&ir.Assign{Dst: flagRef(tmp), Src: toStorage(r)})
		})
		test := ir.Expr(&ir.BitToBool{X: flagRef(tmp)})
		if x.Op == scanner.OrOr {
			test = &ir.Unary{Op: ir.OpNot, X: test, T: ir.BoolType}
		}
		b.emit(&mIf{cond: test, then: rhs, pos: x.Pos})
		return tmp
	}
	xt, yt := info.Types[x.X], info.Types[x.Y]
	xv := b.exprAs(x.X, xt)
	if b.l.hasSideEffects(x.Y) {
		xv = b.snapshotVal(xv, xt)
	}
	yv := b.exprAs(x.Y, yt)
	return b.binaryTyped(x.Op, xv, xt, yv, yt, t, x.Pos)
}

// binaryOp applies op to evaluated operands of type t (compound
// assignments).
func (b *body) binaryOp(op scanner.Kind, xv, yv any, t types.Type, pos scanner.Pos) any {
	return b.binaryTyped(op, xv, t, yv, t, t, pos)
}

var cmpOps = map[scanner.Kind]string{
	scanner.Eq: "==", scanner.Ne: "!=", scanner.Lt: "<", scanner.Le: "<=", scanner.Gt: ">", scanner.Ge: ">=",
}

var arithOps = map[scanner.Kind]string{
	scanner.Add: "+", scanner.Sub: "-", scanner.Mul: "*", scanner.Div: "/", scanner.Mod: "%",
	scanner.And: "&", scanner.Or: "|", scanner.Xor: "^", scanner.Shl: "<<", ast.ShrOp: ">>",
}

func (b *body) binaryTyped(op scanner.Kind, xv any, xt types.Type, yv any, yt types.Type, t types.Type, pos scanner.Pos) any {
	if op == scanner.Eq || op == scanner.Ne {
		if !isScalar(xt) {
			eq := b.equal(xv, yv, xt, pos)
			if op == scanner.Ne {
				eq = &ir.Unary{Op: ir.OpNot, X: eq, T: ir.BoolType}
			}
			return &scalarVal{e: eq, t: &types.Bool{}}
		}
	}
	x := b.read(xv, xt)
	y := b.read(yv, yt)
	if s, ok := cmpOps[op]; ok {
		if x.Type().Bool || y.Type().Bool {
			x, y = toStorage(x), toStorage(y)
		}
		return &scalarVal{e: &ir.Binary{Op: s, X: x, Y: y, T: ir.BoolType}, t: &types.Bool{}}
	}
	it := irType(t)
	switch op {
	case scanner.SatAdd, scanner.SatSub:
		s := "+"
		if op == scanner.SatSub {
			s = "-"
		}
		return &scalarVal{e: &ir.Saturate{X: &ir.Binary{Op: s, X: x, Y: y, T: it}, T: it}, t: t}
	case scanner.Concat:
		xb, yb := irType(xt), irType(yt)
		hi := &ir.Binary{Op: "<<", X: &ir.Truncate{X: x, T: ir.Bits(xb.Width, false)},
			Y: &ir.Const{Value: big.NewInt(int64(yb.Width)), T: ir.Bits(32, false)}, T: ir.Bits(it.Width, false)}
		e := ir.Expr(&ir.Binary{Op: "|", X: hi, Y: &ir.Truncate{X: y, T: ir.Bits(yb.Width, false)}, T: ir.Bits(it.Width, false)})
		if it.Signed {
			e = &ir.SignWrap{X: e, T: it}
		}
		return &scalarVal{e: e, t: t}
	}
	s, ok := arithOps[op]
	if !ok {
		b.errorf(pos, "unsupported operator")
		return &scalarVal{e: x, t: t}
	}
	if op == scanner.Shl || op == ast.ShrOp {
		if c, ok := y.(*ir.Const); ok && c.T.Width == 0 {
			y = &ir.Const{Value: c.Value, T: ir.Bits(32, false)}
		}
	}
	e := ir.Expr(&ir.Binary{Op: s, X: x, Y: y, T: it})
	switch op {
	case scanner.Add, scanner.Sub, scanner.Mul, scanner.Shl:
		e = wrapArith(e, it)
	}
	return &scalarVal{e: e, t: t}
}

// equal compares two values of a struct-like type field by field (P4_16
// §8.12: headers compare equal when both invalid, or both valid with equal
// fields).
func (b *body) equal(xv, yv any, t types.Type, pos scanner.Pos) ir.Expr {
	switch tt := types.Underlying(t).(type) {
	case *types.Struct:
		var res ir.Expr = &ir.BoolConst{Value: true}
		and := func(e ir.Expr) {
			if bc, ok := res.(*ir.BoolConst); ok && bc.Value {
				res = e
				return
			}
			res = &ir.Binary{Op: "and", X: res, Y: e, T: ir.BoolType}
		}
		for i, f := range tt.Fields {
			fx := b.memberVal(xv, tt, i)
			fy := b.memberVal(yv, tt, i)
			and(b.equal(fx, fy, f.Type, pos))
		}
		if tt.Kind == ast.StructKindHeader {
			vx, vy := b.validOf(xv), b.validOf(yv)
			bothInvalid := &ir.Binary{Op: "and", X: &ir.Unary{Op: ir.OpNot, X: vx, T: ir.BoolType}, Y: &ir.Unary{Op: ir.OpNot, X: vy, T: ir.BoolType}, T: ir.BoolType}
			bothValid := &ir.Binary{Op: "and", X: vx, Y: vy, T: ir.BoolType}
			res = &ir.Binary{Op: "or", X: bothInvalid, Y: &ir.Binary{Op: "and", X: bothValid, Y: res, T: ir.BoolType}, T: ir.BoolType}
		}
		return res
	case *types.Stack:
		var res ir.Expr = &ir.BoolConst{Value: true}
		xs, _ := xv.(*stackLoc)
		ys, _ := yv.(*stackLoc)
		if xs == nil || ys == nil {
			b.errorf(pos, "cannot compare these stacks")
			return res
		}
		for i := range xs.elems {
			e := b.equal(xs.elems[i], ys.elems[i], tt.Elem, pos)
			res = &ir.Binary{Op: "and", X: res, Y: e, T: ir.BoolType}
		}
		return res
	case *types.Tuple:
		var res ir.Expr = &ir.BoolConst{Value: true}
		xs, _ := xv.(*tupleVal)
		ys, _ := yv.(*tupleVal)
		if xs == nil || ys == nil {
			return res
		}
		for i := range xs.elems {
			e := b.equal(xs.elems[i], ys.elems[i], tt.Elems[i], pos)
			res = &ir.Binary{Op: "and", X: res, Y: e, T: ir.BoolType}
		}
		return res
	}
	x, y := b.read(xv, t), b.read(yv, t)
	if x.Type().Bool {
		x, y = toStorage(x), toStorage(y)
	}
	return &ir.Binary{Op: "==", X: x, Y: y, T: ir.BoolType}
}

// memberVal returns member i of a struct-like value.
func (b *body) memberVal(v any, st *types.Struct, i int) any {
	switch x := v.(type) {
	case *structLoc:
		return x.fields[i]
	case *structVal:
		return x.fields[i]
	case *headerLoc:
		return x.fieldOf(st.Fields[i].Name)
	case *unionLoc:
		return x.members[i]
	case *dynHeader:
		f := st.Fields[i]
		return &dynFieldLoc{stack: x.stack, index: x.index, field: f.Name, t: f.Type}
	case *tupleVal:
		return x.elems[i]
	}
	b.errorf(scanner.Pos{}, "internal: member of %T", v)
	panic(bailout{})
}

// validOf is the validity of a header value.
func (b *body) validOf(v any) ir.Expr {
	switch x := v.(type) {
	case *headerLoc:
		return &ir.Valid{Header: x.name}
	case *dynHeader:
		return &ir.StackElemValid{Stack: x.stack.name, Index: x.index}
	case *structVal:
		return &ir.BoolConst{Value: x.valid}
	case *unionLoc:
		return &ir.Valid{Header: x.name, Union: true}
	}
	return &ir.BoolConst{Value: true}
}

func (b *body) ternary(x *ast.TernaryExpr) any {
	info := b.l.info
	t := info.Types[x]
	if !b.l.hasSideEffects(x.Then) && !b.l.hasSideEffects(x.Else) && isScalar(t) {
		c := b.cond(x.Cond)
		th := b.read(b.exprAs(x.Then, t), t)
		el := b.read(b.exprAs(x.Else, t), t)
		if th.Type().Bool != el.Type().Bool {
			th, el = toStorage(th), toStorage(el)
		}
		return &scalarVal{e: &ir.Mux{Cond: c, Then: th, Else: el, T: th.Type()}, t: t}
	}
	tmp := b.l.alloc(t, "tmp")
	c := b.cond(x.Cond)
	then := b.sub(func() { b.assign(tmp, b.exprAs(x.Then, t), x.Pos, "") })
	els := b.sub(func() { b.assign(tmp, b.exprAs(x.Else, t), x.Pos, "") })
	b.emit(&mIf{cond: c, then: then, els: els, pos: x.Pos})
	return tmp
}

// castIR converts a scalar between types (P4_16 §8.11).
func castIR(e ir.Expr, from, to types.Type) ir.Expr {
	ft, tt := irType(from), irType(to)
	if tt.Bool {
		if ft.Bool {
			return e
		}
		return &ir.BitToBool{X: e}
	}
	if ft.Bool {
		return &ir.BoolToBit{X: e}
	}
	if tt.Signed {
		if ft.Signed && ft.Width <= tt.Width {
			return e
		}
		if !ft.Signed && ft.Width < tt.Width {
			return e
		}
		return &ir.SignWrap{X: e, T: tt}
	}
	if !ft.Signed && ft.Width <= tt.Width && ft.Width > 0 {
		return e
	}
	if c, ok := e.(*ir.Const); ok {
		return &ir.Const{Value: types.Normalize(c.Value, &types.Bits{Width: tt.Width}), T: tt}
	}
	return &ir.Truncate{X: e, T: tt}
}

// assign stores src into dst.
func (b *body) assign(dst, src any, pos scanner.Pos, frag string) {
	loc := ir.Source{Pos: pos, Fragment: frag}
	switch d := dst.(type) {
	case nil:
		return
	case *fieldLoc:
		e := b.read(src, d.t)
		st := storageType(d.t)
		ref := &ir.FieldRef{Header: d.hdr, Field: d.field, T: st}
		if _, vb := types.Underlying(d.t).(*types.Varbit); vb {
			ref.T.Varbit = true
		}
		b.emit(&ir.Assign{Dst: ref, Src: dropWrap(toStorage(e), st), Loc: loc})
		return
	case *dynFieldLoc:
		e := b.read(src, d.t)
		ref := b.dynField(d)
		b.emit(&ir.Assign{Dst: ref, Src: dropWrap(toStorage(e), storageType(d.t)), Loc: loc})
		return
	case *sliceLoc:
		bt := baseType(d.base)
		w := irType(bt).Width
		base := b.read(d.base, bt)
		v := toStorage(b.read(src, &types.Bits{Width: d.hi - d.lo + 1}))
		m := new(big.Int).Lsh(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(d.hi-d.lo+1)), big.NewInt(1)), uint(d.lo))
		keep := new(big.Int).Xor(m, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1)))
		bw := ir.Bits(w, false)
		shifted := ir.Expr(v)
		if d.lo > 0 {
			shifted = &ir.Binary{Op: "<<", X: v, Y: &ir.Const{Value: big.NewInt(int64(d.lo)), T: ir.Bits(32, false)}, T: bw}
		}
		nv := &ir.Binary{Op: "|",
			X: &ir.Binary{Op: "&", X: base, Y: &ir.Const{Value: keep, T: bw}, T: bw},
			Y: &ir.Binary{Op: "&", X: shifted, Y: &ir.Const{Value: m, T: bw}, T: bw}, T: bw}
		b.assign(d.base, &scalarVal{e: nv, t: &types.Bits{Width: w}}, pos, frag)
		return
	case *headerLoc, *dynHeader:
		dref := headerRefOf(d)
		if le, ok := src.(*lastElem); ok {
			// stack.last as a whole header: the element at lastIndex
			src = &dynHeader{stack: le.stack, index: &ir.LastIndex{Stack: le.stack.name}}
		}
		switch s := src.(type) {
		case *headerLoc, *dynHeader:
			b.emit(&ir.AssignHeader{Dst: dref, Src: headerRefOf(s), Loc: loc})
			return
		case *structVal:
			st := s.st
			b.emit(&ir.SetValid{Header: dref, Valid: s.valid, Loc: loc})
			if !s.valid {
				return
			}
			for i := range st.Fields {
				b.assign(b.memberVal(dst, st, i), s.fields[i], pos, frag)
			}
			return
		case *structLoc:
			// the standard metadata (a header to BMv2) from a copy
			for i := range s.st.Fields {
				b.assign(b.memberVal(dst, s.st, i), s.fields[i], pos, frag)
			}
			return
		case *tupleVal:
			st := headerStruct(d)
			b.emit(&ir.SetValid{Header: dref, Valid: true, Loc: loc})
			for i := range st.Fields {
				if i < len(s.elems) {
					b.assign(b.memberVal(dst, st, i), s.elems[i], pos, frag)
				}
			}
			return
		}
	case *structLoc:
		for i := range d.st.Fields {
			var fv any
			switch s := src.(type) {
			case *tupleVal:
				if i < len(s.elems) {
					fv = s.elems[i]
				}
			default:
				fv = b.memberVal(src, d.st, i)
			}
			b.assign(d.fields[i], fv, pos, frag)
		}
		return
	case *stackLoc:
		if s, ok := src.(*stackLoc); ok && len(s.elems) == len(d.elems) {
			for i := range d.elems {
				b.assign(d.elems[i], s.elems[i], pos, frag)
			}
			return
		}
		if s, ok := src.(*tupleVal); ok && len(s.elems) == len(d.elems) {
			for i := range d.elems {
				b.assign(d.elems[i], s.elems[i], pos, frag)
			}
			return
		}
	case *unionLoc:
		if s, ok := src.(*unionLoc); ok {
			for i := range d.members {
				b.emit(&ir.AssignHeader{Dst: ir.HeaderRef{Header: d.members[i].name}, Src: ir.HeaderRef{Header: s.members[i].name}, Loc: loc})
			}
			return
		}
		if s, ok := src.(*structVal); ok && !s.valid {
			// {#}: every member becomes invalid
			for i := range d.members {
				b.emit(&ir.SetValid{Header: ir.HeaderRef{Header: d.members[i].name}, Valid: false, Loc: loc})
			}
			return
		}
	case *tupleVal:
		if s, ok := src.(*tupleVal); ok && len(s.elems) == len(d.elems) {
			for i := range d.elems {
				b.assign(d.elems[i], s.elems[i], pos, frag)
			}
			return
		}
	}
	b.errorf(pos, "unsupported assignment (%T from %T)", dst, src)
}

func headerStruct(v any) *types.Struct {
	switch x := v.(type) {
	case *headerLoc:
		return x.st
	case *dynHeader:
		return types.Underlying(x.stack.t.Elem).(*types.Struct)
	}
	return nil
}

func headerRefOf(v any) ir.HeaderRef {
	switch x := v.(type) {
	case *headerLoc:
		return ir.HeaderRef{Header: x.name}
	case *dynHeader:
		return ir.HeaderRef{Stack: x.stack.name, Index: x.index}
	}
	return ir.HeaderRef{}
}

// dropWrap would remove a truncation the assignment itself performs;
// it keeps it, because a target is not required to truncate on store
// (p4c's own output masks explicitly too).
func dropWrap(e ir.Expr, _ ir.Type) ir.Expr { return e }
