package types

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

func (c *Checker) block(b *ast.BlockStmt, s *scope) {
	sc := newScope(s)
	for _, st := range b.Stmts {
		c.stmt(st, sc)
	}
}

func (c *Checker) stmt(st ast.Stmt, s *scope) {
	switch x := st.(type) {
	case *ast.BlockStmt:
		c.block(x, s)
	case *ast.EmptyStmt:
	case *ast.AssignStmt:
		lt := c.expr(x.LHS, s)
		c.checkLValue(x.LHS, s)
		if x.Op != scanner.Assign {
			// a op= b is a = a op b (P4_16 1.2.4 §12.1).
			c.expr(x.RHS, s)
			c.binaryTypes(x.Op, x.LHS, x.RHS, x.Pos, true) // value unused: the target is a variable
			return
		}
		c.expr(x.RHS, s)
		if _, bad := lt.(*Void); bad {
			return // the left side's error is reported; no value has type void
		}
		c.convert(x.RHS, lt)
	case *ast.CallStmt:
		c.expr(x.Call, s)
	case *ast.IfStmt:
		c.expr(x.Cond, s)
		c.convert(x.Cond, &Bool{})
		c.stmt(x.Then, newScope(s))
		if x.Else != nil {
			c.stmt(x.Else, newScope(s))
		}
	case *ast.ExitStmt:
		if c.ctx.parser != nil {
			c.errorf(x.Pos, "exit is not allowed in a parser")
		} else if c.ctx.function != nil {
			// P4_16 §12.4: exit ends controls and actions, not functions
			c.errorf(x.Pos, "exit is not allowed in a function")
		}
	case *ast.ReturnStmt:
		if c.ctx.parser != nil {
			c.errorf(x.Pos, "return is not allowed in a parser")
			return
		}
		rt := c.ctx.retType
		if x.Value == nil {
			if rt != nil {
				if _, void := rt.(*Void); !void {
					c.errorf(x.Pos, "return needs a value of type %s", rt)
				}
			}
			return
		}
		c.expr(x.Value, s)
		if rt == nil {
			return
		}
		if _, void := rt.(*Void); void {
			c.errorf(x.Pos, "return with a value in a procedure that returns nothing")
			return
		}
		c.convert(x.Value, rt)
	case *ast.BreakStmt:
		if !c.ctx.inLoop {
			c.errorf(x.Pos, "break outside a loop")
		}
	case *ast.ContinueStmt:
		if !c.ctx.inLoop {
			c.errorf(x.Pos, "continue outside a loop")
		}
	case *ast.DeclStmt:
		switch d := x.Decl.(type) {
		case *ast.VarDecl:
			c.varDecl(d, s)
		case *ast.ConstDecl:
			c.constDecl(d, s)
		case *ast.InstanceDecl:
			// P4_16 §10.3: objects are instantiated in a parser's or
			// control's local declarations (or at the top level), never
			// in an apply block, a parser state, an action or a function
			c.errorf(d.Pos, "%s: instances cannot be declared in %s", d.Name, c.bodyName())
			c.instanceDecl(d, s)
			c.declare(s, d.Name, d.Pos, d)
		default:
			c.errorf(x.Position(), "this declaration is not allowed in a block")
		}
	case *ast.SwitchStmt:
		if c.ctx.action != nil {
			// P4_16 §12.7: switch statements are for control apply
			// blocks; p4c refuses them in actions
			c.errorf(x.Pos, "switch statements are not allowed in actions")
		}
		c.switchStmt(x, s)
	case *ast.ForStmt:
		sc := newScope(s)
		for _, i := range x.Init {
			c.stmt(i, sc)
		}
		if x.Cond != nil {
			c.expr(x.Cond, sc)
			c.convert(x.Cond, &Bool{})
		}
		for _, u := range x.Update {
			c.stmt(u, sc)
		}
		saved := c.ctx.inLoop
		c.ctx.inLoop = true
		c.stmt(x.Body, newScope(sc))
		c.ctx.inLoop = saved
	case *ast.ForInStmt:
		sc := newScope(s)
		var vt Type
		if x.Decl != nil {
			vt = c.resolveType(x.Decl.Type, s)
			c.info.DeclTypes[x.Decl] = vt
			c.declare(sc, x.Decl.Name, x.Decl.Pos, x.Decl)
			c.info.Uses[x.Var] = x.Decl
		} else {
			vt = c.expr(x.Var, s)
		}
		if r, ok := x.Range.(*ast.RangeExpr); ok {
			c.expr(r.Lo, s)
			c.expr(r.Hi, s)
			c.convert(r.Lo, vt)
			c.convert(r.Hi, vt)
		} else {
			rt := c.expr(x.Range, s)
			if st, ok := Underlying(rt).(*Stack); ok {
				if vt != nil && !Identical(Underlying(vt), Underlying(st.Elem)) {
					c.errorf(x.Pos, "cannot iterate with a %s over a stack of %s", vt, st.Elem)
				}
			} else {
				c.errorf(x.Range.Position(), "for-in loops go over a range lo .. hi or a header stack, not %s", rt)
			}
		}
		saved := c.ctx.inLoop
		c.ctx.inLoop = true
		c.stmt(x.Body, newScope(sc))
		c.ctx.inLoop = saved
	default:
		c.errorf(st.Position(), "unsupported statement")
	}
}

func (c *Checker) switchStmt(x *ast.SwitchStmt, s *scope) {
	t := c.expr(x.Expr, s)
	ae, isAction := t.(*ActionEnum)
	seen := map[string]bool{}
	defaults := 0
	for _, cs := range x.Cases {
		if cs.Default {
			defaults++
		}
	}
	if defaults > 1 {
		c.errorf(x.Pos, "switch has multiple default labels")
	}
	for i, cs := range x.Cases {
		if cs.Default && i != len(x.Cases)-1 && defaults == 1 {
			c.errorf(cs.Pos, "default must be the last switch label")
		}
		for _, l := range cs.Labels {
			if isAction {
				id, ok := l.(*ast.Ident)
				if !ok {
					c.errorf(l.Position(), "switch label must name an action of table %s", ae.Table.Name)
					continue
				}
				a := tableAction(ae.Table, id.Name)
				if a == nil {
					c.errorf(l.Position(), "%s is not an action of table %s", id.Name, ae.Table.Name)
					continue
				}
				if ds := s.lookup(id.Name); len(ds) > 0 {
					c.info.Uses[id] = ds[0]
				}
				if seen[id.Name] {
					c.errorf(l.Position(), "duplicate switch label %s", id.Name)
				}
				seen[id.Name] = true
				c.info.Types[l] = t
				continue
			}
			c.expr(l, s)
			c.convert(l, t)
			if _, ok := c.info.Values[l]; !ok {
				c.errorf(l.Position(), "switch label must be a compile-time constant")
			}
		}
		if cs.Body != nil {
			c.block(cs.Body, s)
		}
	}
	if !isAction {
		switch Underlying(t).(type) {
		case *Bits, *Enum, *ErrorType:
		default:
			c.errorf(x.Expr.Position(), "cannot switch on a value of type %s", t)
		}
	}
}

// tableAction finds the actions-list entry of a table by action name.
func tableAction(t *ast.TableDecl, name string) *ast.ActionRef {
	for _, p := range t.Properties {
		if ap, ok := p.(*ast.ActionsProperty); ok {
			for _, a := range ap.Actions {
				if a.Name.Name == name {
					return a
				}
			}
		}
	}
	return nil
}

// checkLValue reports assignments to things that cannot be written.
func (c *Checker) checkLValue(e ast.Expr, s *scope) {
	switch x := e.(type) {
	case *ast.Ident:
		switch d := c.info.Uses[x].(type) {
		case *ast.VarDecl:
			return
		case *ast.Param:
			if d.Dir == ast.In || d.Dir == ast.None {
				c.errorf(x.Pos, "%s is a read-only parameter and cannot be assigned", x.Name)
			}
			return
		case nil:
			return // already reported
		}
		c.errorf(x.Pos, "%s cannot be assigned", x.Name)
	case *ast.MemberExpr:
		if _, ok := c.info.Types[x.X].(*TypeOfType); ok {
			c.errorf(x.Pos, "cannot assign to a constant")
			return
		}
		switch Underlying(c.info.Types[x.X]).(type) {
		case *Struct:
			c.checkLValue(x.X, s)
		case *Stack:
			if x.Name != "next" && x.Name != "last" {
				c.errorf(x.Pos, "%s of a header stack cannot be assigned", x.Name)
			}
			c.checkLValue(x.X, s)
		default:
			c.errorf(x.Pos, "%s cannot be assigned", x.Name)
		}
	case *ast.IndexExpr:
		c.checkLValue(x.X, s)
	case *ast.SliceExpr:
		c.checkLValue(x.X, s)
	case *ast.DontCareExpr:
	default:
		c.errorf(e.Position(), "expression cannot be assigned")
	}
}

func (c *Checker) instanceDecl(x *ast.InstanceDecl, s *scope) {
	t := c.resolveType(x.Type, s)
	c.info.DeclTypes[x] = t
	call := &Call{Kind: CallConstructor}
	switch b := t.(type) {
	case *Extern:
		var ctors []*ast.FunctionProto
		for _, m := range b.Decl.Methods {
			if m.ReturnType == nil && m.Name == b.Decl.Name {
				ctors = append(ctors, m)
			}
		}
		ctor := pickOverload(ctors, x.Args)
		if ctor == nil {
			c.errorf(x.Pos, "%s has no constructor taking %d arguments", b.Decl.Name, len(x.Args))
			return
		}
		env := map[*ast.TypeParam]Type{}
		for i, tp := range b.Decl.TypeParams {
			if i < len(b.Args) {
				env[tp] = b.Args[i]
			}
		}
		call.Proto = ctor
		call.Extern = b
		c.bindArgs(call, ctor.Params, x.Args, env, x.Pos, s)
		c.info.InstanceCalls[x] = call
		// infer the extern's type arguments from the constructor (e.g. an
		// unspecialized generic extern)
		if len(b.Args) == 0 && len(b.Decl.TypeParams) > 0 {
			b.Args = make([]Type, len(b.Decl.TypeParams))
			for i, tp := range b.Decl.TypeParams {
				b.Args[i] = env[tp]
			}
		}
	case *Block:
		ctorParams, ok := blockCtorParams(b)
		if !ok {
			c.errorf(x.Pos, "%s is a type without implementation and cannot be instantiated", b.Name)
			return
		}
		call.Block = b
		c.bindArgs(call, ctorParams, x.Args, nil, x.Pos, s)
		c.info.InstanceCalls[x] = call
	case *Package:
		call.Package = b
		c.bindArgs(call, b.Decl.Params, x.Args, nil, x.Pos, s)
		c.info.InstanceCalls[x] = call
	default:
		c.errorf(x.Pos, "%s cannot be instantiated", t)
		return
	}
	for _, d := range x.Init {
		if f, ok := d.(*ast.FunctionDecl); ok {
			c.checkFunction(f, s)
		}
	}
}

// pickOverload chooses among overloads by argument count (and names).
func pickOverload(cands []*ast.FunctionProto, args []*ast.Arg) *ast.FunctionProto {
	var best *ast.FunctionProto
	for _, fp := range cands {
		if arityMatches(fp.Params, args) {
			if best == nil {
				best = fp
			}
		}
	}
	return best
}

func arityMatches(params []*ast.Param, args []*ast.Arg) bool {
	if len(args) > len(params) {
		return false
	}
	named := len(args) > 0 && args[0].Name != ""
	if named {
		supplied := map[string]bool{}
		for _, a := range args {
			found := false
			for _, p := range params {
				if p.Name == a.Name {
					found = true
				}
			}
			if !found {
				return false
			}
			supplied[a.Name] = true
		}
		for _, p := range params {
			if !supplied[p.Name] && p.Default == nil && !p.Annotations.Has("optional") {
				return false
			}
		}
		return true
	}
	for i := len(args); i < len(params); i++ {
		if params[i].Default == nil && !params[i].Annotations.Has("optional") {
			return false
		}
	}
	return true
}

func (c *Checker) checkTable(t *ast.TableDecl, s *scope) {
	c.controlPlaneName(t, t.Annotations, t.Pos, "table")
	c.info.DeclTypes[t] = &Table{Decl: t}
	var keyTypes []Type
	var keyKinds []string
	var actions *ast.ActionsProperty
	seen := map[string]bool{}
	lpms := 0
	for _, p := range t.Properties {
		if seen[p.PropName()] {
			c.errorf(p.Position(), "table %s: duplicate property %s", t.Name, p.PropName())
		}
		seen[p.PropName()] = true
		switch x := p.(type) {
		case *ast.KeyProperty:
			for _, k := range x.Elements {
				kt := c.expr(k.Expr, s)
				switch Underlying(kt).(type) {
				case *Bits, *Bool, *Enum, *ErrorType:
				case *InfInt:
					// a literal key: it has no width, p4c gives it one
					// from its value; keep it as is.
				default:
					c.errorf(k.Expr.Position(), "table key of type %s is not supported", kt)
				}
				if _, ok := c.matchKinds[k.MatchKind]; !ok {
					c.errorf(k.MatchPos, "%s is not a match_kind", k.MatchKind)
				}
				if k.MatchKind == "lpm" {
					// a longest-prefix match has one prefix to be
					// longest (P4Runtime, BMv2)
					if lpms++; lpms == 2 {
						c.targetErrorf(k.MatchPos, "table %s has more than one lpm key", t.Name)
					}
				}
				keyTypes = append(keyTypes, kt)
				keyKinds = append(keyKinds, k.MatchKind)
			}
		case *ast.ActionsProperty:
			actions = x
			for _, ar := range x.Actions {
				c.actionRef(ar, s, false)
			}
		}
	}
	for _, p := range t.Properties {
		switch x := p.(type) {
		case *ast.EntriesProperty:
			switch {
			case !seen["key"]:
				c.errorf(x.Pos, "table %s has entries but no key", t.Name)
			case propIndex(t, "entries") < propIndex(t, "key"):
				// P4_16 §14.2.1.4: entries are read against the key,
				// which comes first
				c.errorf(x.Pos, "table %s: entries must come after the table's key", t.Name)
			}
			if !x.Const && entriesHavePriority(x) && !needsPriority(keyKinds) {
				// P4_16 §14.2.1.4: priorities order entries of tables
				// whose keys can overlap; exact and lpm keys cannot
				pos := x.Pos
				for _, p := range t.Properties {
					if kp, ok := p.(*ast.KeyProperty); ok {
						pos = kp.Pos
					}
				}
				c.errorf(pos, "table %s: its key's match kinds (exact, lpm) take no priorities, but entries give some", t.Name)
			}
			for _, e := range x.Entries {
				if len(e.Keys) != len(keyTypes) {
					c.errorf(e.Pos, "entry has %d keys, table %s has %d", len(e.Keys), t.Name, len(keyTypes))
				} else {
					for i, k := range e.Keys {
						c.simpleKeyset(k, keyTypes[i], s)
						c.entryKeyForm(k, keyKinds[i])
					}
				}
				if ar := tableAction(t, e.Action.Name.Name); ar != nil && ar.Annotations.Has("defaultonly") {
					// P4_16 §14.2.1.2: @defaultonly actions are only
					// the default action
					c.errorf(e.Pos, "action %s is @defaultonly in table %s and cannot be in its entries", ar.Name.Name, t.Name)
				}
				if e.Priority != nil {
					c.expr(e.Priority, s)
					c.convert(e.Priority, &InfInt{})
				}
				c.actionRef(e.Action, s, true)
				if actions != nil && tableAction(t, e.Action.Name.Name) == nil {
					c.errorf(e.Action.Pos, "%s is not an action of table %s", e.Action.Name.Name, t.Name)
				}
			}
		case *ast.ValueProperty:
			switch x.Name {
			case "default_action":
				ar := exprToActionRef(x.Value)
				if ar == nil {
					c.errorf(x.Value.Position(), "default_action must name an action")
					continue
				}
				c.actionRef(ar, s, true)
				c.info.DefaultActions[t] = ar
				if call, ok := x.Value.(*ast.CallExpr); ok {
					c.info.Types[call] = &Void{}
				}
				c.info.Types[x.Value] = &Void{}
				if actions != nil && tableAction(t, ar.Name.Name) == nil {
					c.errorf(x.Value.Position(), "default action %s is not in the actions of table %s", ar.Name.Name, t.Name)
				} else if ref := tableAction(t, ar.Name.Name); ref != nil && ref.Annotations.Has("tableonly") {
					c.errorf(x.Pos, "action %s is @tableonly in table %s and cannot be its default action", ar.Name.Name, t.Name)
				}
			default:
				c.expr(x.Value, s)
				if x.Name == "size" {
					c.convert(x.Value, &InfInt{})
					if _, ok := c.info.Values[x.Value].(*big.Int); !ok {
						c.errorf(x.Value.Position(), "table size must be a compile-time constant")
					}
				}
			}
		}
	}
}

// exprToActionRef turns the value of default_action into an action
// reference: `a`, `a()` or `a(args)`.
func exprToActionRef(e ast.Expr) *ast.ActionRef {
	switch x := e.(type) {
	case *ast.Ident:
		return &ast.ActionRef{Pos: x.Pos, Name: x}
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok {
			args := x.Args
			if args == nil {
				args = []*ast.Arg{}
			}
			return &ast.ActionRef{Pos: x.Pos, Name: id, Args: args}
		}
	}
	return nil
}

// actionRef resolves an action named in a table. In an actions list the
// arguments bind the directional parameters; in entries and default actions
// (full) they bind all parameters, or only the directionless ones when the
// directional ones were bound in the actions list.
func (c *Checker) actionRef(ar *ast.ActionRef, s *scope, full bool) {
	sc := s
	if ar.Name.Global {
		sc = s.global()
	}
	ds := sc.lookup(ar.Name.Name)
	if len(ds) == 0 {
		c.resolveErrorf(ar.Name.Pos, "%s: undeclared action", ar.Name.Name)
		return
	}
	a, ok := ds[0].(*ast.ActionDecl)
	if !ok {
		c.errorf(ar.Name.Pos, "%s is not an action", ar.Name.Name)
		return
	}
	c.info.Uses[ar.Name] = a
	call := &Call{Kind: CallAction, Action: a, Params: a.Params, Args: make([]ast.Expr, len(a.Params)),
		ParamTypes: make([]Type, len(a.Params))}
	for i, p := range a.Params {
		call.ParamTypes[i] = c.info.DeclTypes[p]
	}
	c.info.ActionRefs[ar] = call
	nDir := 0
	for _, p := range a.Params {
		if p.Dir != ast.None {
			nDir++
		}
	}
	var targets []int
	// complete: the arguments bind the action fully, with defaults
	complete := false
	switch {
	case !full:
		for i := 0; i < len(ar.Args) && i < len(a.Params); i++ {
			targets = append(targets, i)
		}
		if len(ar.Args) > nDir {
			c.errorf(ar.Pos, "action %s: the actions list can only bind directional parameters", a.Name)
		}
	case len(ar.Args) == len(a.Params):
		complete = true
		for i := range a.Params {
			targets = append(targets, i)
		}
	case ar.Args != nil && len(ar.Args) <= len(a.Params)-nDir &&
		(len(ar.Args) >= len(a.Params)-nDir-trailingDefaults(a.Params) || (len(ar.Args) > 0 && ar.Args[0].Name != "")):
		// the directionless parameters; those left out take their
		// default values (P4_16 §6.8.2), named arguments are checked below
		complete = true
		for i := nDir; i < nDir+len(ar.Args); i++ {
			targets = append(targets, i)
		}
	default:
		if ar.Args != nil || len(a.Params)-nDir > 0 {
			c.errorf(ar.Pos, "action %s expects %d arguments, got %d", a.Name, len(a.Params)-nDir, len(ar.Args))
		}
	}
	// Named arguments (P4_16 §8.20: `a(y = 1, x = 2)`) bind by name, in
	// any order; the arity rules above still hold.
	if len(ar.Args) > 0 && ar.Args[0].Name != "" && len(targets) > 0 {
		byName := make([]int, 0, len(ar.Args))
		seen := map[int]bool{}
		for _, arg := range ar.Args {
			if arg.Name == "" {
				c.errorf(arg.Pos, "cannot mix named and positional arguments")
				return
			}
			idx := -1
			for j, p := range a.Params {
				if p.Name == arg.Name {
					idx = j
				}
			}
			if idx < 0 {
				c.errorf(arg.Pos, "action %s has no parameter called %s", a.Name, arg.Name)
				return
			}
			if seen[idx] {
				c.errorf(arg.Pos, "parameter %s is bound twice", arg.Name)
				return
			}
			seen[idx] = true
			byName = append(byName, idx)
		}
		targets = byName
	}
	for i, idx := range targets {
		if i >= len(ar.Args) {
			break
		}
		arg := ar.Args[i].Value
		c.expr(arg, s)
		c.convert(arg, call.ParamTypes[idx])
		call.Args[idx] = arg
		if full && a.Params[idx].Dir == ast.None {
			if _, ok := c.info.Values[arg]; !ok {
				c.errorf(arg.Position(), "action argument must be a compile-time constant")
			}
		}
	}
	if !complete {
		return
	}
	for i, p := range a.Params {
		if p.Dir != ast.None || call.Args[i] != nil {
			continue
		}
		if p.Default == nil {
			c.errorf(ar.Pos, "action %s: missing argument for parameter %s", a.Name, p.Name)
			return
		}
		call.Args[i] = p.Default
	}
}

// trailingDefaults counts the parameters at the end of the list that have
// default values.
func trailingDefaults(params []*ast.Param) int {
	n := 0
	for i := len(params) - 1; i >= 0 && params[i].Default != nil; i-- {
		n++
	}
	return n
}

// bodyName names the kind of body being checked, for diagnostics.
func (c *Checker) bodyName() string {
	switch {
	case c.ctx.action != nil:
		return "an action"
	case c.ctx.function != nil:
		return "a function"
	case c.ctx.parser != nil:
		return "a parser state"
	}
	return "a control's apply block"
}

// propIndex is the index of a table's property, or -1.
func propIndex(t *ast.TableDecl, name string) int {
	for i, p := range t.Properties {
		if p.PropName() == name {
			return i
		}
	}
	return -1
}

// entryKeyForm checks that an entry's keyset has a form its key's match
// kind takes (P4_16 §14.2.1.4, with v1model's optional): a mask only for
// ternary and lpm keys (for lpm, a prefix), a range only for range keys,
// and for exact and optional keys a plain value (optional also _).
func (c *Checker) entryKeyForm(k ast.Expr, kind string) {
	bad := false
	switch x := k.(type) {
	case *ast.MaskExpr:
		switch kind {
		case "ternary":
		case "lpm":
			if m, ok := c.info.Values[x.Mask].(*big.Int); ok && m.Sign() > 0 {
				if w := c.info.Types[k]; w != nil {
					if b := BitsOf(setElem(w)); b != nil && !isPrefixMask(m, b.Width) {
						c.targetErrorf(x.Mask.Position(), "%s is not a prefix mask for an lpm key", m)
					}
				}
			}
		default:
			bad = true
		}
	case *ast.RangeExpr:
		bad = kind != "range"
	case *ast.DefaultExpr, *ast.DontCareExpr:
		bad = kind == "exact"
	}
	if bad {
		c.targetErrorf(k.Position(), "invalid key expression for the %s key", kind)
	}
}

func setElem(t Type) Type {
	if s, ok := t.(*Set); ok {
		return s.Elem
	}
	return t
}

// isPrefixMask reports whether m, in width bits, is ones followed by zeros.
func isPrefixMask(m *big.Int, width int) bool {
	if width <= 0 || m.BitLen() > width {
		return false
	}
	inv := new(big.Int).Lsh(big.NewInt(1), uint(width))
	inv.Sub(inv, big.NewInt(1))
	inv.Xor(inv, m) // the zeros below the prefix, as ones: 2^k - 1
	return new(big.Int).And(inv, new(big.Int).Add(inv, big.NewInt(1))).Sign() == 0
}

func entriesHavePriority(ep *ast.EntriesProperty) bool {
	for _, e := range ep.Entries {
		if e.Priority != nil {
			return true
		}
	}
	return false
}

// needsPriority reports whether a key has a match kind whose entries can
// overlap, so that they need priorities: any but exact and lpm (p4c treats
// a match kind it does not know as one that may).
func needsPriority(kinds []string) bool {
	for _, k := range kinds {
		if k != "exact" && k != "lpm" {
			return true
		}
	}
	return false
}
