package lower

import (
	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// pipeBuilder collects what a control block lowers to.
type pipeBuilder struct {
	name     string
	tables   []*ir.Table
	conds    []*ir.Conditional
	profiles []*ir.ActionProfile
}

func (p *pipeBuilder) addProfile(ap *ir.ActionProfile) {
	for _, x := range p.profiles {
		if x == ap {
			return
		}
	}
	p.profiles = append(p.profiles, ap)
}

// lowerPipeline lowers ingress or egress.
func (l *lowerer) lowerPipeline(inst *blockInst, name string) *ir.Pipeline {
	pipe := &pipeBuilder{name: name}
	inst.pipe = pipe
	d := inst.decl.(*ast.ControlDecl)
	label := l.newLabel()
	b := &body{l: l, inst: inst, env: newEnv(inst.env), kind: kindControl, ret: &retTarget{label: label}}
	b.controlBody(d)
	cb := &cfgBuilder{l: l, pipe: pipe, labels: map[int]ir.Node{}}
	init := cb.build([]mstmt{&mBlock{label: label, body: b.out}}, nil)
	pl := &ir.Pipeline{Name: name, Init: init, Profiles: pipe.profiles, Loc: l.source(d.Pos, d.Name)}
	// list tables and conditionals in the order control reaches them
	seen := map[ir.Node]bool{}
	var visit func(n ir.Node)
	visit = func(n ir.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		switch x := n.(type) {
		case *ir.Table:
			pl.Tables = append(pl.Tables, x)
			for _, r := range x.Actions {
				visit(x.NextByAction[r.Action])
			}
			visit(x.HitNext)
			visit(x.MissNext)
			visit(x.BaseNext)
		case *ir.Conditional:
			pl.Conditionals = append(pl.Conditionals, x)
			visit(x.True)
			visit(x.False)
		}
	}
	visit(init)
	for _, t := range pipe.tables {
		if !seen[t] {
			pl.Tables = append(pl.Tables, t)
		}
	}
	for _, ap := range pipe.profiles {
		l.prog.ActionProfiles = append(l.prog.ActionProfiles, ap)
	}
	return pl
}

// cfgBuilder turns mid-level statements into a graph of tables and
// conditionals. It works backwards: each statement list is built with
// the node that follows it already known, so joins need no fix-ups.
type cfgBuilder struct {
	l      *lowerer
	pipe   *pipeBuilder
	labels map[int]ir.Node
	// placed holds the tables an apply has been placed for.
	placed map[*ir.Table]bool
}

// straight reports whether a statement can go into a generated action:
// plain statements, loops, exits (the exit primitive stops the pipeline),
// and labelled blocks whose jumps stay inside them (inlined actions and
// functions). Ifs outside those stay in the graph as conditionals, as p4c
// places them.
func straight(m mstmt) bool {
	switch x := m.(type) {
	case ir.Stmt, *mExit:
		return true
	case *mLoop:
		return !hasControl(x.body) && !hasControl(x.update)
	case *mBlock:
		return selfContained(x.body, map[int]bool{x.label: true})
	}
	return false
}

// selfContained reports whether statements apply no table and jump only
// to the given labels (or ones they define).
func selfContained(ms []mstmt, labels map[int]bool) bool {
	for _, m := range ms {
		switch x := m.(type) {
		case *mApply, *mBreak, *mContinue:
			return false
		case *mLeave:
			if !labels[x.label] {
				return false
			}
		case *mIf:
			if !selfContained(x.then, labels) || !selfContained(x.els, labels) {
				return false
			}
		case *mBlock:
			inner := map[int]bool{x.label: true}
			for k := range labels {
				inner[k] = true
			}
			if !selfContained(x.body, inner) {
				return false
			}
		case *mLoop:
			if hasControl(x.body) || hasControl(x.update) {
				return false
			}
		}
	}
	return true
}

// hasControl reports statements that must stay in the graph: table
// applies, exits and jumps out of their block.
func hasControl(ms []mstmt) bool {
	for _, m := range ms {
		switch x := m.(type) {
		case *mApply, *mExit, *mLeave:
			return true
		case *mIf:
			if hasControl(x.then) || hasControl(x.els) {
				return true
			}
		case *mBlock:
			if hasControl(x.body) {
				return true
			}
		case *mLoop:
			if hasControl(x.body) || hasControl(x.update) {
				return true
			}
		}
	}
	return false
}

// pruneDead drops statements after an unconditional jump.
func pruneDead(ms []mstmt) []mstmt {
	for i, m := range ms {
		switch m.(type) {
		case *mLeave, *mExit, *mBreak, *mContinue:
			return ms[:i+1]
		}
	}
	return ms
}

func (cb *cfgBuilder) build(ms []mstmt, next ir.Node) ir.Node {
	ms = pruneDead(ms)
	cur := next
	i := len(ms)
	for i > 0 {
		m := ms[i-1]
		if straight(m) {
			j := i - 1
			for j > 0 && straight(ms[j-1]) {
				j--
			}
			if !emptyCode(ms[j:i]) {
				cur = cb.action(ms[j:i], cur)
			}
			i = j
			continue
		}
		switch x := m.(type) {
		case *mIf:
			t := cb.build(x.then, cur)
			f := cb.build(x.els, cur)
			if t == cur && f == cur {
				break // both branches empty: the condition has no effect
			}
			c := &ir.Conditional{Name: cb.condName(), Cond: x.cond, True: t, False: f, Loc: cb.l.source(x.pos, "")}
			cb.pipe.conds = append(cb.pipe.conds, c)
			cur = c
		case *mApply:
			cur = cb.apply(x, cur)
		case *mBlock:
			cb.labels[x.label] = cur
			cur = cb.build(x.body, cur)
		case *mLeave:
			target, ok := cb.labels[x.label]
			if !ok {
				cb.l.errorf(scanner.Pos{}, "internal: jump to an unknown label")
			}
			cur = target
		case *mExit:
			cur = cb.action([]mstmt{&ir.Exit{Loc: cb.l.source(x.pos, "exit")}}, nil)
		case *mLoop:
			cb.l.errorf(scanner.Pos{}, "loops that apply tables or exit are not supported")
		case *mBreak, *mContinue:
			cb.l.errorf(scanner.Pos{}, "break and continue are only supported inside loops in actions")
		default:
			cb.l.errorf(scanner.Pos{}, "internal: unexpected statement in a control")
		}
		i--
	}
	return cur
}

func (cb *cfgBuilder) condName() string {
	cb.l.condNames++
	return "node_" + itoa(cb.l.condNames)
}

// action puts straight-line statements into a generated action, run by a
// generated keyless table whose only (const default) action it is.
func (cb *cfgBuilder) action(ms []mstmt, next ir.Node) ir.Node {
	l := cb.l
	pos := firstPos(ms)
	name := uniqueCounted(l.actionNames, l.generatedName(pos))
	a := &ir.Action{Name: name, Hidden: true, Body: l.toActionBody(ms, pos), Loc: l.source(pos, "")}
	l.prog.Actions = append(l.prog.Actions, a)
	t := &ir.Table{
		Name:         uniqueCounted(l.tableNames, "tbl_"+name),
		Hidden:       true,
		Size:         1024,
		Actions:      []ir.ActionRef{{Action: a}},
		Default:      &ir.DefaultEntry{Action: a, Const: true},
		NextByAction: map[*ir.Action]ir.Node{a: next},
		BaseNext:     next,
		Loc:          l.source(pos, ""),
	}
	cb.pipe.tables = append(cb.pipe.tables, t)
	return t
}

// emptyCode reports statements that do nothing (empty blocks).
func emptyCode(ms []mstmt) bool {
	for _, m := range ms {
		switch x := m.(type) {
		case *mBlock:
			if !emptyCode(x.body) {
				return false
			}
		case *ir.Block:
			if !emptyCode(stmtsOf(x.Body)) {
				return false
			}
		case *mLeave, *ir.Leave:
		default:
			return false
		}
	}
	return true
}

func stmtsOf(ss []ir.Stmt) []mstmt {
	out := make([]mstmt, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// firstPos finds a source position among statements, for naming.
func firstPos(ms []mstmt) scanner.Pos {
	for _, m := range ms {
		var p scanner.Pos
		switch x := m.(type) {
		case *mBlock:
			p = firstPos(x.body)
		case *ir.Block:
			p = firstPos(stmtsOf(x.Body))
		case *mIf:
			p = x.pos
		case *mExit:
			p = x.pos
		case *ir.Assign:
			p = x.Loc.Pos
		case *ir.Primitive:
			p = x.Loc.Pos
		case *ir.SetValid:
			p = x.Loc.Pos
		case *ir.AssignHeader:
			p = x.Loc.Pos
		case *ir.Exit:
			p = x.Loc.Pos
		case *ir.PushFront:
			p = x.Loc.Pos
		case *ir.PopFront:
			p = x.Loc.Pos
		}
		if p.IsValid() {
			return p
		}
	}
	return scanner.Pos{}
}

func (cb *cfgBuilder) apply(x *mApply, next ir.Node) ir.Node {
	t := x.table
	if cb.placed[t] {
		// A table applied more than once is one node of the BMv2 graph,
		// which goes on to one next node per action: the applies can
		// share it only when they all continue the same way (as in
		// p4c's issue986-1-bmv2, one apply in each branch of an if).
		old := *t
		old.NextByAction = t.NextByAction
		cb.placeApply(x, next)
		same := t.BaseNext == old.BaseNext && t.UseHitMiss == old.UseHitMiss &&
			t.HitNext == old.HitNext && t.MissNext == old.MissNext && len(t.NextByAction) == len(old.NextByAction)
		for a, n := range t.NextByAction {
			if old.NextByAction[a] != n {
				same = false
			}
		}
		t.BaseNext, t.UseHitMiss, t.HitNext, t.MissNext, t.NextByAction = old.BaseNext, old.UseHitMiss, old.HitNext, old.MissNext, old.NextByAction
		if !same {
			cb.l.errorf(x.pos, "table %s is applied more than once, and its applies go on to different code; a BMv2 table continues one way per action, so each apply must be followed by the same statements", t.Name)
		}
		return t
	}
	if cb.placed == nil {
		cb.placed = map[*ir.Table]bool{}
	}
	cb.placed[t] = true
	cb.placeApply(x, next)
	return t
}

// placeApply sets where the table goes next after this apply.
func (cb *cfgBuilder) placeApply(x *mApply, next ir.Node) {
	t := x.table
	t.BaseNext = next
	t.NextByAction = map[*ir.Action]ir.Node{}
	switch {
	case x.hitMiss:
		t.UseHitMiss = true
		t.HitNext = cb.build(x.hit, next)
		t.MissNext = cb.build(x.miss, next)
	case x.hasCases:
		deflt := cb.build(x.deflt, next)
		for _, r := range t.Actions {
			t.NextByAction[r.Action] = deflt
		}
		for _, c := range x.cases {
			n := cb.build(c.body, next)
			for _, a := range c.actions {
				t.NextByAction[a] = n
			}
		}
	default:
		for _, r := range t.Actions {
			t.NextByAction[r.Action] = next
		}
	}
}

// lowerDeparser lowers the deparser to the order of emitted headers.
func (l *lowerer) lowerDeparser(inst *blockInst) *ir.Deparser {
	d := inst.decl.(*ast.ControlDecl)
	dp := &ir.Deparser{Name: "deparser", Loc: l.source(d.Pos, d.Name)}
	b := &body{l: l, inst: inst, env: newEnv(inst.env), kind: kindDeparser, deparser: dp}
	b.controlBody(d)
	if !onlyBlocks(b.out) {
		l.errorf(d.Pos, "deparser %s: only emit calls are supported here (BMv2 deparsers emit a fixed list of headers; the invalid ones are skipped)", d.Name)
	}
	return dp
}

// onlyBlocks reports statement lists holding nothing but (nested) blocks:
// what a deparser of emit calls lowers to.
func onlyBlocks(ms []mstmt) bool {
	for _, m := range ms {
		switch x := m.(type) {
		case *mBlock:
			if !onlyBlocks(x.body) {
				return false
			}
		case *mLeave:
		default:
			return false
		}
	}
	return true
}

// emitOrder records headers a deparser emits, in order.
func (b *body) emitOrder(v any, pos scanner.Pos) {
	dp := b.deparser
	if dp == nil {
		b.errorf(pos, "emit outside the deparser")
		return
	}
	switch x := v.(type) {
	case *headerLoc:
		dp.Order = append(dp.Order, x.name)
	case *structLoc:
		for _, f := range x.fields {
			b.emitOrder(f, pos)
		}
	case *stackLoc:
		for _, e := range x.elems {
			b.emitOrder(e, pos)
		}
	case *unionLoc:
		for _, m := range x.members {
			b.emitOrder(m, pos)
		}
	case *fieldLoc, *scalarVal:
		b.errorf(pos, "emit needs a header, a header stack, a union or a struct of them")
	default:
		b.errorf(pos, "emit needs a header, a header stack, a union or a struct of them")
	}
}

// lowerChecksumControl lowers VerifyChecksum or ComputeChecksum: their
// verify_checksum/update_checksum calls become BMv2 checksum objects.
func (l *lowerer) lowerChecksumControl(inst *blockInst, verify bool) {
	d := inst.decl.(*ast.ControlDecl)
	b := &body{l: l, inst: inst, env: newEnv(inst.env), kind: kindChecksum, verifyChecksums: verify}
	b.controlBody(d)
	for _, m := range b.out {
		switch x := m.(type) {
		case *mBlock:
			if hasControl(x.body) {
				l.errorf(d.Pos, "checksum controls may only call verify_checksum/update_checksum")
			}
		case *ir.Assign, *ir.SetValid, *ir.AssignHeader:
			l.errorf(d.Pos, "checksum controls may only call verify_checksum/update_checksum; other statements are not supported by this target")
		}
	}
}

// checksumCall lowers one verify_checksum / update_checksum call.
func (l *lowerer) checksumCall(b *body, x *ast.CallExpr, c *types.Call) {
	name := c.Proto.Name
	isVerify := name == "verify_checksum" || name == "verify_checksum_with_payload"
	if isVerify != b.verifyChecksums {
		which := "VerifyChecksum"
		if !b.verifyChecksums {
			which = "ComputeChecksum"
		}
		l.errorf(x.Pos, "%s cannot be called in %s", name, which)
		return
	}
	payload := name == "verify_checksum_with_payload" || name == "update_checksum_with_payload"
	cond := b.argIR(c, 0)
	dt := c.ParamTypes[1]
	if _, isVar := dt.(*types.TypeVar); isVar || dt == nil {
		dt = l.info.Types[c.Args[1]]
	}
	data := b.flatten(b.exprAs(c.Args[1], dt), dt)
	for i, e := range data {
		switch e.(type) {
		case *ir.FieldRef, *ir.Const:
		default:
			l.errorf(c.Args[1].Position(), "checksum data must be fields or constants")
			data[i] = &ir.Const{Value: bigInt(0), T: e.Type()}
		}
	}
	target := b.lvalue(c.Args[2])
	f, ok := target.(*fieldLoc)
	if !ok {
		l.errorf(c.Args[2].Position(), "the checksum must be a field")
		return
	}
	algo := b.algorithm(c.Args[3])
	loc := l.source(x.Pos, exprText(x))
	calc := l.newCalculation(algo, data, payload, loc)
	ck := &ir.Checksum{
		Name:        uniqueCounted(l.calcNames, "cksum"),
		Target:      &ir.FieldRef{Header: f.hdr, Field: f.field, T: storageType(f.t)},
		Calculation: calc,
		Verify:      isVerify,
		Update:      !isVerify,
		Cond:        cond,
		Loc:         loc,
	}
	l.prog.Checksums = append(l.prog.Checksums, ck)
}
