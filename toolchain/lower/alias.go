package lower

import (
	"strings"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// Aliasing between a call's arguments and what its callee writes.
//
// P4_16 §6.8 (calling convention): in and inout arguments are copied in
// before the body runs, out and inout ones copied back when it ends. A
// copy can be left out only where it provably changes nothing; the
// helpers here answer that from storage regions: a header (every element
// of a stack is one region, the stack's), or one scalar field. Regions are
// coarser than storage, so an overlap they report may not be real; they
// never miss one.

// region is a header (field "") or one of its fields; every element of a
// stack is the stack's region, and a scalar is a field of "scalars".
type region struct{ hdr, field string }

// overlaps reports whether two regions may share storage.
func (r region) overlaps(o region) bool {
	return r.hdr == o.hdr && (r.field == "" || o.field == "" || r.field == o.field)
}

// regionSet is a set of storage regions; all means "anything" (a write
// the analysis does not look into).
type regionSet struct {
	all  bool
	keys map[region]bool
}

func (s *regionSet) add(r region) {
	if s.keys == nil {
		s.keys = map[region]bool{}
	}
	s.keys[r] = true
}

// overlaps reports whether two sets may share storage.
func (s *regionSet) overlaps(o *regionSet) bool {
	if (s.all && (o.all || len(o.keys) > 0)) || (o.all && len(s.keys) > 0) {
		return true
	}
	for k := range s.keys {
		for ok := range o.keys {
			if k.overlaps(ok) {
				return true
			}
		}
	}
	return false
}

// headerRegion is the region of a whole header instance: its stack's for
// a stack element (named "stack[i]").
func headerRegion(name string) region {
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return region{hdr: name}
}

// fieldRegion is the region of one field.
func fieldRegion(hdr, field string) region {
	r := headerRegion(hdr)
	r.field = field
	return r
}

// locRegions gives the regions a location occupies; ok is false for a
// value the analysis does not know.
func locRegions(v any) (s regionSet, ok bool) {
	ok = addLocRegions(&s, v)
	return s, ok
}

func addLocRegions(s *regionSet, v any) bool {
	switch x := v.(type) {
	case *fieldLoc:
		s.add(fieldRegion(x.hdr, x.field))
	case *headerLoc:
		if x.stack != nil {
			s.add(headerRegion(x.stack.name))
		}
		s.add(headerRegion(x.name))
	case *dynHeader:
		s.add(headerRegion(x.stack.name))
	case *dynFieldLoc:
		s.add(fieldRegion(x.stack.name, x.field))
	case *sliceLoc:
		return addLocRegions(s, x.base)
	case *structLoc:
		for _, f := range x.fields {
			if !addLocRegions(s, f) {
				return false
			}
		}
	case *stackLoc:
		s.add(headerRegion(x.name))
		for _, e := range x.elems {
			if !addLocRegions(s, e) {
				return false
			}
		}
	case *unionLoc:
		for _, m := range x.members {
			s.add(headerRegion(m.name))
		}
	default:
		return false
	}
	return true
}

// valueReads gives the regions an argument's value reads (a location, or
// an expression over fields); ok is false for a value the analysis does
// not know.
func valueReads(v any) (s regionSet, ok bool) {
	switch x := v.(type) {
	case *scalarVal:
		exprReads(&s, x.e)
		return s, true
	case *structVal:
		for _, f := range x.fields {
			fs, ok := valueReads(f)
			if !ok {
				return s, false
			}
			s.merge(&fs)
		}
		return s, true
	case *tupleVal:
		for _, f := range x.elems {
			fs, ok := valueReads(f)
			if !ok {
				return s, false
			}
			s.merge(&fs)
		}
		return s, true
	case *constVal:
		return s, true
	}
	return locRegions(v)
}

func (s *regionSet) merge(o *regionSet) {
	s.all = s.all || o.all
	for k := range o.keys {
		s.add(k)
	}
}

// exprReads adds the regions an IR expression reads.
func exprReads(s *regionSet, e ir.Expr) {
	switch x := e.(type) {
	case nil:
	case *ir.FieldRef:
		s.add(fieldRegion(x.Header, x.Field))
	case *ir.Valid:
		// a union's validity is its members': not named here
		if x.Union {
			s.all = true
			return
		}
		s.add(headerRegion(x.Header))
	case *ir.StackField:
		s.add(fieldRegion(x.Stack, x.Field))
		exprReads(s, x.Index)
	case *ir.StackElemValid:
		s.add(headerRegion(x.Stack))
		exprReads(s, x.Index)
	case *ir.LastField:
		s.add(fieldRegion(x.Stack, x.Field))
	case *ir.LastIndex:
		s.add(headerRegion(x.Stack))
	case *ir.Const, *ir.BoolConst, *ir.ActionParam, *ir.Lookahead:
	case *ir.Unary:
		exprReads(s, x.X)
	case *ir.Binary:
		exprReads(s, x.X)
		exprReads(s, x.Y)
	case *ir.Mux:
		exprReads(s, x.Cond)
		exprReads(s, x.Then)
		exprReads(s, x.Else)
	case *ir.Truncate:
		exprReads(s, x.X)
	case *ir.SignWrap:
		exprReads(s, x.X)
	case *ir.Saturate:
		exprReads(s, x.X)
	case *ir.BoolToBit:
		exprReads(s, x.X)
	case *ir.BitToBool:
		exprReads(s, x.X)
	default:
		s.all = true
	}
}

// addHeaderRefWrite adds the region a header reference names.
func (s *regionSet) addHeaderRef(h ir.HeaderRef) {
	if h.Stack != "" {
		s.add(headerRegion(h.Stack))
		return
	}
	s.add(headerRegion(h.Header))
}

// stmtWrites adds the regions mid-level statements may write, skipping
// the statements in skip (by identity).
func stmtWrites(s *regionSet, ms []mstmt, skip map[mstmt]bool) {
	for _, m := range ms {
		if skip[m] {
			continue
		}
		switch x := m.(type) {
		case *ir.Assign:
			// the destination's own index expression is only read
			var d regionSet
			exprReads(&d, x.Dst)
			s.merge(&d)
		case *ir.AssignHeader:
			s.addHeaderRef(x.Dst)
		case *ir.SetValid:
			s.addHeaderRef(x.Header)
		case *ir.PushFront:
			s.add(headerRegion(x.Stack))
		case *ir.PopFront:
			s.add(headerRegion(x.Stack))
		case *ir.AssignStack:
			s.add(headerRegion(x.Dst))
		case *ir.Extract:
			if x.Stack != "" {
				s.add(headerRegion(x.Stack))
			} else {
				s.add(headerRegion(x.Header))
			}
		case *ir.Primitive:
			// extern primitives write some of their arguments (a
			// register read, a hash); count every field they name
			for _, a := range x.Args {
				switch a.Kind {
				case ir.ArgHeader, ir.ArgStack:
					s.add(headerRegion(a.Name))
				case ir.ArgExpr:
					exprReads(s, a.Expr)
				case ir.ArgExprList:
					for _, e := range a.List {
						exprReads(s, e)
					}
				}
			}
		case *ir.Advance, *ir.Verify, *ir.Break, *ir.Continue, *ir.Leave, *ir.Exit,
			*mLeave, *mBreak, *mContinue, *mExit:
		case *mIf:
			stmtWrites(s, x.then, skip)
			stmtWrites(s, x.els, skip)
		case *mBlock:
			stmtWrites(s, x.body, skip)
		case *mLoop:
			stmtWrites(s, x.body, skip)
			stmtWrites(s, x.update, skip)
		default:
			// table applies, sub-parser calls, union copies, ...
			s.all = true
		}
	}
}

// unusedCopy is the copy-in and copy-out of an inout argument whose
// parameter the callee never names. Both are kept until the body has
// been lowered: they can go only if nothing else writes the argument's
// storage during the call (P4_16 §6.8: the copy-out would otherwise undo
// that write).
type unusedCopy struct {
	loc     any
	in, out *mBlock
}

// settleUnusedCopies empties the copies of unnamed inout parameters that
// change nothing: those whose argument neither the lowered body nor an
// earlier copy-out may write.
func settleUnusedCopies(unused []unusedCopy, body []mstmt, copyOut []mstmt) {
	for _, u := range unused {
		arg, ok := locRegions(u.loc)
		if !ok {
			continue
		}
		var w regionSet
		skip := map[mstmt]bool{u.out: true}
		stmtWrites(&w, body, skip)
		// copy-outs after this one cannot be undone by it
		for _, m := range copyOut {
			if m == mstmt(u.out) {
				break
			}
			stmtWrites(&w, []mstmt{m}, skip)
		}
		if w.overlaps(&arg) {
			continue
		}
		u.in.body = nil
		u.out.body = nil
	}
}
