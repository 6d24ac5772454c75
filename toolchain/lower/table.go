package lower

import (
	"math/big"
	"strings"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// applyTable lowers `t.apply()`: the key is computed into fields where it
// is not one already, then the table is applied. The returned mApply has
// been emitted; the caller may attach hit/miss or action branches.
func (b *body) applyTable(x *ast.CallExpr) *mApply {
	c := b.l.info.Calls[x]
	recv := b.expr(c.Recv)
	tr, ok := recv.(*tableRef)
	if !ok {
		b.errorf(x.Pos, "cannot apply this value")
		panic(bailout{})
	}
	inst := tr.inst
	if inst == nil {
		inst = b.inst
	}
	if prev := inst.applied[tr.decl]; prev != nil {
		// applied again: one table node, which the graph builder
		// shares when every apply goes on to the same nodes
		b.emit(b.l.keyPrelude[prev]...)
		ap := &mApply{table: prev, pos: x.Pos}
		b.emit(ap)
		return ap
	}
	start := len(b.out)
	t := b.l.buildTable(b, tr.decl, inst)
	b.l.keyPrelude[t] = append([]mstmt(nil), b.out[start:]...)
	inst.applied[tr.decl] = t
	ap := &mApply{table: t, pos: x.Pos}
	b.emit(ap)
	return ap
}

// tableName is the fully qualified name of a table.
func (l *lowerer) declName(d ast.Decl, annos ast.Annotations, inst *blockInst) string {
	prefix := ""
	if inst != nil {
		prefix = inst.name + "."
	}
	if n, ok := annos.StringArg("name"); ok {
		if len(n) > 0 && n[0] == '.' {
			return n[1:]
		}
		return prefix + n
	}
	return prefix + d.DeclName()
}

// buildTable lowers a table declaration of a control instance. Key
// expressions that are not fields are computed into temporaries by
// statements emitted into b, just before the apply.
func (l *lowerer) buildTable(b *body, td *ast.TableDecl, inst *blockInst) *ir.Table {
	l.lastPos = td.Pos
	t := &ir.Table{
		Name:        l.declName(td, td.Annotations, inst),
		Size:        1024,
		Annotations: renderAnnotations(td.Annotations),
		ExplicitID:  explicitID(td.Annotations),
		Loc:         l.source(td.Pos, td.Name),
		// @hidden keeps a table out of the control-plane API
		Hidden:     td.Annotations.Has("hidden"),
		UserHidden: td.Annotations.Has("hidden"),
	}
	var actionsProp *ast.ActionsProperty
	var entries *ast.EntriesProperty
	for _, p := range td.Properties {
		switch x := p.(type) {
		case *ast.KeyProperty:
			for _, k := range x.Elements {
				t.Key = append(t.Key, b.keyField(k))
			}
		case *ast.ActionsProperty:
			actionsProp = x
		case *ast.EntriesProperty:
			entries = x
		case *ast.ValueProperty:
			switch x.Name {
			case "size":
				if v, ok := l.info.Values[x.Value].(*big.Int); ok {
					t.Size = int(v.Int64())
					t.SizeSet = true
				}
			case "counters":
				if ei := b.externValue(x, t); ei != nil && ei.counter != nil && ei.counter.Direct {
					ei.counter.Table = t.Name
					t.DirectCounter = ei.counter
					l.addDirectCounter(ei.counter)
				} else {
					l.errorf(x.Pos, "counters must name a direct_counter")
				}
			case "meters":
				if ei := b.externValue(x, t); ei != nil && ei.meter != nil && ei.meter.Direct {
					ei.meter.Table = t.Name
					t.DirectMeter = ei.meter
					l.addDirectMeter(ei.meter)
				} else {
					l.errorf(x.Pos, "meters must name a direct_meter")
				}
			case "implementation":
				if ei := b.externValue(x, t); ei != nil && ei.profile != nil {
					t.Implementation = ei.profile
					ei.profile.Tables = append(ei.profile.Tables, t)
				} else {
					l.errorf(x.Pos, "implementation must name an action_profile or action_selector")
				}
			case "support_timeout":
				if v, ok := l.info.Values[x.Value].(bool); ok {
					t.SupportTimeout = v
				}
			}
		}
	}
	// actions
	if actionsProp != nil {
		for _, ar := range actionsProp.Actions {
			a := l.tableAction(b, ar, inst, t)
			if a == nil {
				continue
			}
			ref := ir.ActionRef{Action: a, Annotations: renderAnnotations(ar.Annotations)}
			ref.DefaultOnly = ar.Annotations.Has("defaultonly")
			ref.TableOnly = ar.Annotations.Has("tableonly")
			t.Actions = append(t.Actions, ref)
		}
	}
	// the default action (NoAction when none is given, P4_16 §14.2.1.3)
	if dref := l.info.DefaultActions[td]; dref != nil {
		a := l.findTableAction(t, dref)
		if a == nil {
			l.errorf(dref.Pos, "default action %s is not in the table's actions", dref.Name.Name)
		} else {
			de := &ir.DefaultEntry{Action: a, Const: isConstProperty(td, "default_action")}
			de.Args = l.actionArgs(dref)
			t.Default = de
			if t.Implementation != nil {
				// BMv2 has no default entry for a table whose actions
				// come from an action profile: the JSON leaves it out,
				// and p4c says so
				l.warn.Add(td.Pos, "Target does not support default_action for %s (due to action profiles)", t.Name)
			}
		}
	} else {
		na := l.noAction()
		if na != nil {
			var a *ir.Action
			for _, r := range t.Actions {
				if l.actionDecl[r.Action] == na {
					a = r.Action
				}
			}
			if a == nil {
				a = l.loweredAction(na, nil, nil, inst, t)
				t.Actions = append(t.Actions, ir.ActionRef{Action: a, DefaultOnly: true, Annotations: []string{"@defaultonly"}})
			}
			t.Default = &ir.DefaultEntry{Action: a}
		}
	}
	// selector keys feed the action selector's hash, not the match
	if t.Implementation != nil && t.Implementation.Selector != nil && len(t.Implementation.Selector.Input) == 0 {
		for _, k := range t.Key {
			if k.Match == ir.MatchSelector {
				t.Implementation.Selector.Input = append(t.Implementation.Selector.Input, k.Expr)
			}
		}
	}
	if entries != nil {
		t.ConstEntries = entries.Const
		for i, e := range entries.Entries {
			t.Entries = append(t.Entries, l.entry(t, e, i))
		}
		l.entryPriorities(td, t, entries)
	}
	if inst != nil && inst.pipe != nil {
		inst.pipe.tables = append(inst.pipe.tables, t)
		if t.Implementation != nil {
			inst.pipe.addProfile(t.Implementation)
		}
	}
	return t
}

// entryPriorities gives the entries of a table's `entries` list with
// `priority = N` (P4_16 1.2.4, 14.2.1.4) BMv2 priorities. The first entry
// names its priority; an entry without one takes the previous one minus
// priority_delta (plus, when largest_priority_wins is false). BMv2 prefers
// the smallest number, so where the largest P4 priority wins the numbers
// are mirrored (max - p + 1). Lists without priorities keep program order
// (first entry 1), which both conventions give; @priority annotations are
// BMv2 numbers already. As in p4c, const entries cannot have priorities.
func (l *lowerer) entryPriorities(td *ast.TableDecl, t *ir.Table, entries *ast.EntriesProperty) {
	var first *ast.Entry
	for _, e := range entries.Entries {
		if e.Priority != nil {
			first = e
			break
		}
	}
	if first == nil {
		return
	}
	if entries.Const {
		l.errorf(first.Priority.Position(), "a table with const entries cannot have priorities")
		return
	}
	if entries.Entries[0].Priority == nil {
		l.errorf(entries.Entries[0].Pos, "the first entry must have a priority")
		return
	}
	largestWins, delta := true, int64(1)
	for _, p := range td.Properties {
		vp, ok := p.(*ast.ValueProperty)
		if !ok {
			continue
		}
		switch vp.Name {
		case "largest_priority_wins":
			if v, ok := l.info.Values[vp.Value].(bool); ok {
				largestWins = v
			}
		case "priority_delta":
			if v, ok := l.info.Values[vp.Value].(*big.Int); ok && v.Sign() > 0 && v.IsInt64() {
				delta = v.Int64()
			} else {
				l.errorf(vp.Pos, "priority_delta must be a positive constant")
			}
		}
	}
	prios := make([]int64, len(entries.Entries))
	var cur int64
	for i, e := range entries.Entries {
		if e.Priority != nil {
			v, ok := l.info.Values[e.Priority].(*big.Int)
			if !ok || !v.IsInt64() || v.Sign() < 0 {
				l.errorf(e.Priority.Position(), "an entry priority must be a non-negative constant")
				return
			}
			cur = v.Int64()
		}
		prios[i] = cur
		if largestWins {
			cur -= delta
		} else {
			cur += delta
		}
		if cur < 0 || cur > 1<<31 {
			if i+1 < len(entries.Entries) && entries.Entries[i+1].Priority == nil {
				l.errorf(td.Pos, "overflow in the priorities of table %s's entries", td.Name)
				return
			}
		}
	}
	var maxP int64
	for _, p := range prios {
		if p > maxP {
			maxP = p
		}
	}
	for i, en := range t.Entries {
		if i >= len(prios) {
			break
		}
		if largestWins {
			en.Priority = int(maxP - prios[i] + 1)
		} else {
			en.Priority = int(prios[i])
		}
		en.PrioritySet = true
	}
}

func isConstProperty(td *ast.TableDecl, name string) bool {
	for _, p := range td.Properties {
		if vp, ok := p.(*ast.ValueProperty); ok && vp.Name == name {
			return vp.Const
		}
	}
	return false
}

func (l *lowerer) addDirectCounter(c *ir.Counter) {
	for _, x := range l.prog.Counters {
		if x == c {
			return
		}
	}
	l.prog.Counters = append(l.prog.Counters, c)
}

func (l *lowerer) addDirectMeter(m *ir.Meter) {
	for _, x := range l.prog.Meters {
		if x == m {
			return
		}
	}
	l.prog.Meters = append(l.prog.Meters, m)
}

// externValue evaluates a table property naming an extern instance, or
// creating one (implementation = action_selector(...)).
func (b *body) externValue(prop *ast.ValueProperty, t *ir.Table) *externInst {
	e := prop.Value
	if call, ok := e.(*ast.CallExpr); ok {
		// An instance created in the property itself is named by the
		// property's @name, unqualified as p4c names it in P4Info
		// (@name("ap") implementation = action_profile(128) is "ap").
		// p4c requires that name for P4Runtime; without one, the table's
		// name and the property's keep instances of different tables apart.
		name := t.Name + "_" + prop.Name
		if n, ok := prop.Annotations.StringArg("name"); ok {
			name = strings.TrimPrefix(n, ".")
		}
		c := b.l.info.Calls[call]
		if c != nil && c.Kind == types.CallConstructor && c.Extern != nil {
			ei := &externInst{typ: c.Extern, name: name, owner: b.inst, inPlace: true,
				decl: &ast.InstanceDecl{Pos: call.Pos, Name: prop.Name, Annotations: prop.Annotations}}
			for _, a := range c.Args {
				ei.args = append(ei.args, b.l.ctorArg(a, b.env, ei.name))
			}
			b.l.createExtern(ei)
			return ei
		}
	}
	v := b.expr(e)
	ei, _ := v.(*externInst)
	return ei
}

// noAction finds core.p4's NoAction.
func (l *lowerer) noAction() *ast.ActionDecl {
	for _, d := range l.info.Program.Decls {
		if a, ok := d.(*ast.ActionDecl); ok && a.Name == "NoAction" {
			return a
		}
	}
	return nil
}

// keyField lowers one key element.
func (b *body) keyField(k *ast.KeyElement) ir.KeyField {
	l := b.l
	kf := ir.KeyField{Match: ir.MatchKind(k.MatchKind), Annotations: renderAnnotations(k.Annotations), ExplicitID: explicitID(k.Annotations)}
	kf.Name = keyName(k)
	t := l.info.Types[k.Expr]
	kf.Width = types.Width(t)
	kf.P4RTWidth = l.p4rtWidth(t)
	kf.TypeName = typeNameForP4Info(t)
	l.noteNamedType(t)
	if kf.Width == 0 {
		if v, ok := l.info.Values[k.Expr].(*big.Int); ok {
			kf.Width = v.BitLen()
			if kf.Width == 0 {
				kf.Width = 1
			}
			t = &types.Bits{Width: kf.Width}
		}
	}
	// isValid() matches the validity bit directly
	if call, ok := k.Expr.(*ast.CallExpr); ok {
		if c := l.info.Calls[call]; c != nil && c.Kind == types.CallBuiltin && c.Builtin == "isValid" {
			if h, ok := b.expr(c.Recv).(*headerLoc); ok {
				kf.Expr = &ir.Valid{Header: h.name}
				kf.Width = 1
				return kf
			}
		}
	}
	// field & mask matches a field under a mask
	if be, ok := k.Expr.(*ast.BinaryExpr); ok && be.Op == scanner.And && !l.hasSideEffects(be.X) {
		if m, ok := l.info.Values[be.Y].(*big.Int); ok {
			if f, ok := b.expr(be.X).(*fieldLoc); ok && !irType(f.t).Bool {
				kf.Expr = &ir.FieldRef{Header: f.hdr, Field: f.field, T: storageType(f.t)}
				kf.Mask = m
				return kf
			}
		}
	}
	v := b.exprAs(k.Expr, t)
	if f, ok := v.(*fieldLoc); ok {
		kf.Expr = &ir.FieldRef{Header: f.hdr, Field: f.field, T: storageType(f.t)}
		return kf
	}
	// anything else is computed into a field before the apply
	tmp := l.newScalar("key_"+sanitizeKey(kf.Name), t)
	b.assign(tmp, v, k.Pos, "")
	kf.Expr = &ir.FieldRef{Header: tmp.hdr, Field: tmp.field, T: storageType(t)}
	return kf
}

func sanitizeKey(s string) string {
	var bld strings.Builder
	for _, r := range s {
		if r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			bld.WriteRune(r)
		} else {
			bld.WriteByte('_')
		}
	}
	return bld.String()
}

// keyName is the control-plane name of a key element: its @name, or the
// expression as written (isValid() reads as $valid$, as in p4c).
func keyName(k *ast.KeyElement) string {
	if n, ok := k.Annotations.StringArg("name"); ok {
		return n
	}
	if call, ok := k.Expr.(*ast.CallExpr); ok && len(call.Args) == 0 {
		if m, ok := call.Fun.(*ast.MemberExpr); ok && m.Name == "isValid" {
			return exprText(m.X) + ".$valid$"
		}
	}
	return exprText(k.Expr)
}

// tableAction lowers an entry of a table's actions list.
func (l *lowerer) tableAction(b *body, ar *ast.ActionRef, inst *blockInst, t *ir.Table) *ir.Action {
	call := l.info.ActionRefs[ar]
	if call == nil || call.Action == nil {
		return nil
	}
	return l.loweredAction(call.Action, l.actionInst(call.Action, inst), call.Args, inst, t)
}

// findTableAction returns the table's lowered action an action reference
// names.
func (l *lowerer) findTableAction(t *ir.Table, ar *ast.ActionRef) *ir.Action {
	call := l.info.ActionRefs[ar]
	if call == nil {
		return nil
	}
	for _, r := range t.Actions {
		if l.actionDecl[r.Action] == call.Action {
			return r.Action
		}
	}
	return nil
}

// actionArgs evaluates the control-plane arguments of a default action or
// entry.
func (l *lowerer) actionArgs(ar *ast.ActionRef) []*big.Int {
	call := l.info.ActionRefs[ar]
	if call == nil {
		return nil
	}
	var out []*big.Int
	for i, p := range call.Action.Params {
		if p.Dir != ast.None {
			continue
		}
		var v *big.Int
		if i < len(call.Args) && call.Args[i] != nil {
			switch x := l.info.Values[call.Args[i]].(type) {
			case *big.Int:
				v = x
			case bool:
				if x {
					v = big.NewInt(1)
				} else {
					v = big.NewInt(0)
				}
			case *types.EnumValue:
				if c, ok := l.constIR(x, call.ParamTypes[i]).(*ir.Const); ok {
					v = c.Value
				}
			case *types.ErrorValue:
				if c, ok := l.constIR(x, call.ParamTypes[i]).(*ir.Const); ok {
					v = c.Value
				}
			}
		}
		if v == nil {
			v = big.NewInt(0)
		}
		w := types.Width(call.ParamTypes[i])
		if w > 0 {
			v = types.Normalize(v, &types.Bits{Width: w})
		}
		out = append(out, v)
	}
	return out
}

// loweredAction returns the IR action a table runs for an action
// declaration: one per action and instance, unless the actions list binds
// directional arguments, which makes the body specific to the table.
func (l *lowerer) loweredAction(ad *ast.ActionDecl, inst *blockInst, bound []ast.Expr, argInst *blockInst, t *ir.Table) *ir.Action {
	l.lastPos = ad.Pos
	ca := l.useAction(ad, inst)
	ca.inTable = true
	hasBound := false
	for i, p := range ad.Params {
		if p.Dir != ast.None && i < len(bound) && bound[i] != nil {
			hasBound = true
		}
	}
	key := actionKey{decl: ad, inst: inst}
	if !hasBound {
		if a, ok := l.tableActions[key]; ok {
			return a
		}
	}
	a := &ir.Action{Name: ca.name, Params: ca.params, Annotations: ca.annotations, ExplicitID: ca.explicitID,
		Loc: l.source(ad.Pos, ad.Name)}
	l.actionDecl[a] = ad
	env := newEnv(l.actionEnv(ad, inst))
	b := &body{l: l, inst: inst, env: env, kind: kindAction}
	idx := 0
	var copyOut []mstmt
	var unused []unusedCopy
	for i, p := range ad.Params {
		pt := l.info.DeclTypes[p]
		if p.Dir == ast.None {
			it := storageType(pt)
			var v any = &scalarVal{e: &ir.ActionParam{Index: idx, T: it}, t: pt}
			if irType(pt).Bool {
				v = &scalarVal{e: &ir.BitToBool{X: &ir.ActionParam{Index: idx, T: it}}, t: pt}
			}
			env.set(p, v)
			idx++
			continue
		}
		var arg ast.Expr
		if i < len(bound) {
			arg = bound[i]
		}
		if arg == nil {
			env.set(p, l.alloc(pt, p.Name))
			continue
		}
		// directional arguments bound in the actions list are evaluated
		// in the control's scope when the action runs
		outer := &body{l: l, inst: argInst, env: argInst.envOrGlobal(l), kind: kindAction}
		copyOut = append(copyOut, outer.bindParams([]*ast.Param{p}, []types.Type{pt}, []ast.Expr{arg}, env, ad.Pos, &unused, ad.Body)...)
		b.emit(outer.out...)
	}
	label := l.newLabel()
	b.ret = &retTarget{label: label}
	b.exitCopies = copyOut
	b.block(ad.Body)
	settleUnusedCopies(unused, b.out, copyOut)
	stmts := []mstmt{&mBlock{label: label, body: b.out}}
	stmts = append(stmts, copyOut...)
	a.Body = l.toActionBody(stmts, ad.Pos)
	l.prog.Actions = append(l.prog.Actions, a)
	if !hasBound {
		l.tableActions[key] = a
	}
	if ca.ir == nil {
		ca.ir = a
	}
	return a
}

func (inst *blockInst) envOrGlobal(l *lowerer) *env {
	if inst == nil {
		return l.globalEnv
	}
	return inst.env
}

// toActionBody converts mid-level statements into an action body.
func (l *lowerer) toActionBody(ms []mstmt, pos scanner.Pos) []ir.Stmt {
	var out []ir.Stmt
	for _, m := range ms {
		switch x := m.(type) {
		case ir.Stmt:
			out = append(out, x)
		case *mIf:
			out = append(out, &ir.If{Cond: x.cond, Then: l.toActionBody(x.then, pos), Else: l.toActionBody(x.els, pos), Loc: l.source(x.pos, "")})
		case *mBlock:
			out = append(out, &ir.Block{Label: x.label, Body: l.toActionBody(x.body, pos)})
		case *mLeave:
			out = append(out, &ir.Leave{Label: x.label})
		case *mLoop:
			out = append(out, &ir.Loop{Cond: x.cond, Body: l.toActionBody(x.body, pos), Update: l.toActionBody(x.update, pos)})
		case *mBreak:
			out = append(out, &ir.Break{})
		case *mContinue:
			out = append(out, &ir.Continue{})
		case *mExit:
			out = append(out, &ir.Exit{Loc: l.source(x.pos, "exit")})
		case *mApply:
			l.errorf(x.pos, "tables cannot be applied here")
		default:
			l.errorf(pos, "internal: unexpected statement in an action")
		}
	}
	return out
}

// entry lowers a constant table entry.
func (l *lowerer) entry(t *ir.Table, e *ast.Entry, index int) *ir.Entry {
	en := &ir.Entry{Loc: l.source(e.Pos, "")}
	for i, k := range e.Keys {
		if i >= len(t.Key) {
			break
		}
		kf := t.Key[i]
		en.Keys = append(en.Keys, l.entryKey(kf, k))
	}
	if e.Action != nil {
		call := l.info.ActionRefs[e.Action]
		if call != nil {
			for _, r := range t.Actions {
				if l.actionDecl[r.Action] == call.Action {
					en.Action = r.Action
				}
			}
		}
		if en.Action == nil {
			l.errorf(e.Action.Pos, "entry action %s is not in the table's actions", e.Action.Name.Name)
		}
		en.Args = l.actionArgs(e.Action)
	}
	// Earlier entries win: BMv2 prefers the smallest priority number, and
	// p4c numbers entries from 1 unless @priority (or priority =) says
	// otherwise.
	en.Priority = index + 1
	if a := e.Annotations.Get("priority"); a != nil && len(a.Exprs) == 1 {
		if v, ok := l.info.Values[a.Exprs[0]].(*big.Int); ok {
			en.Priority = int(v.Int64())
			en.PrioritySet = true
		} else if lit, ok := a.Exprs[0].(*ast.IntLit); ok {
			en.Priority = int(lit.Value.Int64())
			en.PrioritySet = true
		}
	}
	if e.Priority != nil {
		if v, ok := l.info.Values[e.Priority].(*big.Int); ok {
			en.Priority = int(v.Int64())
			en.PrioritySet = true
		}
	}
	return en
}

func (l *lowerer) intValue(e ast.Expr) (*big.Int, bool) {
	switch v := l.info.Values[e].(type) {
	case *big.Int:
		return v, true
	case bool:
		if v {
			return big.NewInt(1), true
		}
		return big.NewInt(0), true
	case *types.EnumValue, *types.ErrorValue:
		if c, ok := l.constIR(v, l.info.Types[e]).(*ir.Const); ok {
			return c.Value, true
		}
	}
	return nil, false
}

func fullMask(w int) *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
}

// entryKey lowers one key of a constant entry for its match kind.
func (l *lowerer) entryKey(kf ir.KeyField, k ast.Expr) ir.EntryKey {
	w := kf.Width
	ek := ir.EntryKey{Match: kf.Match, Width: w}
	unsigned := func(v *big.Int) *big.Int { return types.Normalize(v, &types.Bits{Width: w}) }
	switch x := k.(type) {
	case *ast.DefaultExpr, *ast.DontCareExpr:
		ek.Wildcard = true
		ek.Value = big.NewInt(0)
		switch kf.Match {
		case ir.MatchTernary, ir.MatchOptional:
			ek.Mask = big.NewInt(0)
		case ir.MatchLPM:
			ek.PrefixLen = 0
		case ir.MatchRange:
			ek.Hi = fullMask(w)
		}
		return ek
	case *ast.MaskExpr:
		v, _ := l.intValue(x.Value)
		m, _ := l.intValue(x.Mask)
		if v == nil || m == nil {
			l.errorf(k.Position(), "entry keys must be constants")
			return ek
		}
		v, m = unsigned(v), unsigned(m)
		ek.Value = new(big.Int).And(v, m)
		ek.Mask = m
		if kf.Match == ir.MatchLPM {
			ek.PrefixLen = prefixLen(m, w)
			if ek.PrefixLen < 0 {
				l.errorf(k.Position(), "lpm mask is not a prefix")
				ek.PrefixLen = w
			}
			ek.Mask = nil
		}
		return ek
	case *ast.RangeExpr:
		lo, _ := l.intValue(x.Lo)
		hi, _ := l.intValue(x.Hi)
		if lo == nil || hi == nil {
			l.errorf(k.Position(), "entry keys must be constants")
			return ek
		}
		ek.Value, ek.Hi = unsigned(lo), unsigned(hi)
		return ek
	}
	v, ok := l.intValue(k)
	if !ok {
		l.errorf(k.Position(), "entry keys must be constants")
		ek.Value = big.NewInt(0)
		return ek
	}
	v = unsigned(v)
	ek.Value = v
	switch kf.Match {
	case ir.MatchTernary, ir.MatchOptional:
		ek.Mask = fullMask(w)
	case ir.MatchLPM:
		ek.PrefixLen = w
	case ir.MatchRange:
		ek.Hi = v
	}
	if kf.Mask != nil && kf.Match == ir.MatchExact {
		ek.Value = new(big.Int).And(v, kf.Mask)
	}
	return ek
}

// prefixLen returns the length of a prefix mask, or -1.
func prefixLen(m *big.Int, w int) int {
	n := 0
	for i := w - 1; i >= 0; i-- {
		if m.Bit(i) == 1 {
			n++
		} else {
			break
		}
	}
	for i := w - 1 - n; i >= 0; i-- {
		if m.Bit(i) == 1 {
			return -1
		}
	}
	return n
}
