package bmv2json

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// BMv2 expressions distinguish booleans from data (bit strings): boolean
// operators take and give booleans, arithmetic takes and gives data. The
// IR carries that distinction in each expression's type; data() and
// boolean() insert the b2d / d2b conversions a context needs.

func exprNode(op string, left, right any) object {
	return obj("type", "expression", "value", obj("op", op, "left", operand(left), "right", operand(right)))
}

// operand is a node used inside an expression. BMv2 names an action
// parameter "runtime_data" only in a primitive's own parameter list; inside
// an expression its builder accepts "local" and rejects "runtime_data"
// ("Invalid 'type' in expression"), so p4c writes "local" there.
func operand(n any) any {
	if o, ok := n.(object); ok && len(o) == 2 && o[0].key == "type" && o[0].val == "runtime_data" {
		return obj("type", "local", "value", o[1].val)
	}
	return n
}

func hexNode(v *big.Int, w int) object {
	return obj("type", "hexstr", "value", hexWidth(v, w))
}

// data renders e as a data-valued typed node.
func (e *emitter) data(x ir.Expr) any {
	if x.Type().Bool {
		if bb, ok := x.(*ir.BitToBool); ok {
			return e.data(bb.X)
		}
		if bc, ok := x.(*ir.BoolConst); ok {
			v := int64(0)
			if bc.Value {
				v = 1
			}
			return hexNode(big.NewInt(v), 1)
		}
		return exprNode("b2d", nil, e.node(x))
	}
	return e.node(x)
}

// boolean renders e as a boolean-valued typed node.
func (e *emitter) boolean(x ir.Expr) any {
	if !x.Type().Bool {
		if bb, ok := x.(*ir.BoolToBit); ok {
			return e.boolean(bb.X)
		}
		return exprNode("d2b", nil, e.node(x))
	}
	return e.node(x)
}

// node renders e in its own type.
func (e *emitter) node(x ir.Expr) any {
	switch v := x.(type) {
	case *ir.FieldRef:
		return obj("type", "field", "value", []string{v.Header, v.Field})
	case *ir.Const:
		return obj("type", "hexstr", "value", hexConst(v))
	case *ir.BoolConst:
		return obj("type", "bool", "value", v.Value)
	case *ir.ActionParam:
		return obj("type", "runtime_data", "value", v.Index) // "local" inside an expression: operand
	case *ir.Valid:
		if v.Union {
			return exprNode("valid_union", nil, obj("type", "header_union", "value", v.Header))
		}
		// the $valid$ pseudo-field, as p4c writes validity tests
		return exprNode("d2b", nil, obj("type", "field", "value", []string{v.Header, "$valid$"}))
	case *ir.Unary:
		switch v.Op {
		case ir.OpNot:
			return exprNode("not", nil, e.boolean(v.X))
		case ir.OpCompl:
			return exprNode("~", nil, e.data(v.X))
		case ir.OpNeg:
			// BMv2 has no negation: 0 - x, wrapped by the caller
			return exprNode("-", hexNode(big.NewInt(0), max(8, v.T.Width)), e.data(v.X))
		}
	case *ir.Binary:
		switch v.Op {
		case "and", "or":
			return exprNode(v.Op, e.boolean(v.X), e.boolean(v.Y))
		}
		return exprNode(v.Op, e.data(v.X), e.data(v.Y))
	case *ir.Mux:
		var th, el any
		if v.T.Bool {
			th, el = e.boolean(v.Then), e.boolean(v.Else)
		} else {
			th, el = e.data(v.Then), e.data(v.Else)
		}
		return obj("type", "expression", "value",
			obj("op", "?", "left", operand(th), "right", operand(el), "cond", operand(e.boolean(v.Cond))))
	case *ir.Truncate:
		if c, ok := v.X.(*ir.Const); ok {
			return hexNode(new(big.Int).And(c.Value, mask(v.T.Width)), v.T.Width)
		}
		return exprNode("&", e.data(v.X), hexNode(mask(v.T.Width), v.T.Width))
	case *ir.SignWrap:
		return exprNode("two_comp_mod", e.data(v.X), hexNode(big.NewInt(int64(v.T.Width)), 8))
	case *ir.Saturate:
		op := "usat_cast"
		if v.T.Signed {
			op = "sat_cast"
		}
		return exprNode(op, e.data(v.X), hexNode(big.NewInt(int64(v.T.Width)), 8))
	case *ir.BoolToBit:
		if bb, ok := v.X.(*ir.BitToBool); ok {
			return e.data(bb.X)
		}
		return e.data(v.X)
	case *ir.BitToBool:
		if bb, ok := v.X.(*ir.BoolToBit); ok {
			return e.boolean(bb.X)
		}
		return e.boolean(v.X)
	case *ir.StackField:
		return exprNode("access_field", e.stackElem(v.Stack, v.Index), v.FieldIndex)
	case *ir.StackElemValid:
		return exprNode("valid", nil, e.stackElem(v.Stack, v.Index))
	case *ir.LastField:
		return obj("type", "stack_field", "value", []string{v.Stack, v.Field})
	case *ir.LastIndex:
		return exprNode("last_stack_index", nil, obj("type", "header_stack", "value", v.Stack))
	case *ir.Lookahead:
		return obj("type", "lookahead", "value", []int{v.Offset, v.Width})
	}
	e.fail("unsupported expression %T", x)
	return obj("type", "hexstr", "value", "0x00")
}

func (e *emitter) stackElem(stack string, index ir.Expr) any {
	return exprNode("dereference_header_stack", obj("type", "header_stack", "value", stack), e.data(index))
}

func mask(w int) *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
}

// param wraps an expression as an action primitive parameter: fields and
// constants as themselves, anything else as an "expression" parameter.
func (e *emitter) param(x ir.Expr) any {
	return topLevel(e.data(x))
}

// boolParam is param for boolean arguments.
func (e *emitter) boolParam(x ir.Expr) any {
	return topLevel(e.boolean(x))
}

// topLevel makes a rendered node a primitive's parameter (or an item of a
// parameters_vector, which BMv2 reads as parameters too): an operator gets
// a second "expression" wrapper, as BMv2's parameter reader expects.
func topLevel(n any) any {
	if o, ok := n.(object); ok && len(o) > 0 && o[0].val == "expression" {
		return obj("type", "expression", "value", n)
	}
	return n
}
