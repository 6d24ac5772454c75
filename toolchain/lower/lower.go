// Package lower turns a type-checked v1model program into the IR.
//
// It instantiates the V1Switch package, gives every variable storage (a
// header instance, or a field of the "scalars" metadata header), inlines
// sub-parsers, sub-controls, functions and directly called actions with
// P4_16 copy-in/copy-out semantics, orders side effects left to right, and
// splits control blocks into a graph of tables and conditionals, putting
// straight-line code into compiler-generated actions. What comes out refers
// only to resolved names, widths and constants.
package lower

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// Options tune the lowering.
type Options struct {
	// SourceFile is the program's file name as given on the command line
	// (recorded in the output and used for generated names).
	SourceFile string
}

type lowerer struct {
	info *types.Info
	// inlining holds the functions and actions whose calls are being
	// inlined, to reject recursion (P4_16 forbids it; inlining it would
	// never end).
	inlining map[ast.Node]bool
	// callStack lists them innermost last.
	callStack []ast.Node
	// metaLeaves are the leaves of the user metadata struct, in order.
	metaLeaves []metaLeaf
	opts       Options
	prog       *ir.Program
	errs       scanner.ErrorList
	warn       scanner.ErrorList

	headerTypes map[*ast.StructDecl]*ir.HeaderType
	unionTypes  map[*ast.StructDecl]*ir.UnionType
	typeNames   map[string]bool
	headerNames map[string]bool
	scalarNames map[string]bool
	actionNames map[string]int
	tableNames  map[string]int
	condNames   int
	calcNames   map[string]int
	scalars     *ir.HeaderType
	labels      int

	// standard is the standard_metadata instance.
	standard *headerLoc

	// actions lowered for tables, by declaration and enclosing instance.
	tableActions map[actionKey]*ir.Action
	// keyPrelude holds the statements that compute a table's non-field
	// key values, emitted again before each further apply.
	keyPrelude map[*ir.Table][]mstmt
	// controlActions are the control-plane actions in P4Info order of
	// discovery (every action used anywhere, by fully qualified name).
	controlActions []*controlAction
	controlByName  map[string]*controlAction

	// referenced holds every declaration some identifier names (from
	// info.Uses), so that a parameter its body never mentions is known.
	referenced map[ast.Node]bool

	// actionDecl remembers the declaration each lowered action came from.
	actionDecl map[*ir.Action]*ast.ActionDecl
	globalEnv  *env

	// block is the V1Switch argument being lowered.
	block int
	// lastPos is the position of the statement being lowered, for
	// diagnostics about constructs without one.
	lastPos scanner.Pos

	fieldLists  map[int]*ir.FieldList
	learnLists  map[string]*ir.LearnList
	usesGeneric bool
}

type actionKey struct {
	decl *ast.ActionDecl
	inst *blockInst
}

// controlAction is an action as the control plane sees it.
type controlAction struct {
	name        string
	decl        *ast.ActionDecl
	params      []ir.ActionParamDecl
	annotations []string
	explicitID  uint32
	ir          *ir.Action // one lowered instance (for tables), if any
	// block is the index of the V1Switch block that first used the
	// action, and seq the order of that use: P4Info lists actions by
	// block, top-level actions first, then the block's own in
	// declaration order (p4c's order after it localizes actions).
	block int
	seq   int
	// inTable: some table can run the action. Actions only called
	// directly have no control-plane parameters (p4c turns their
	// parameters into locals before generating P4Info).
	inTable bool
}

// Result is the lowered program and the warnings found on the way.
type Result struct {
	Program  *ir.Program
	Warnings scanner.ErrorList
}

// Lower lowers a checked program.
func Lower(info *types.Info, opts Options) (*Result, scanner.ErrorList) {
	l := &lowerer{
		info:          info,
		opts:          opts,
		prog:          &ir.Program{SourceFile: opts.SourceFile},
		headerTypes:   map[*ast.StructDecl]*ir.HeaderType{},
		unionTypes:    map[*ast.StructDecl]*ir.UnionType{},
		typeNames:     map[string]bool{},
		headerNames:   map[string]bool{},
		scalarNames:   map[string]bool{},
		actionNames:   map[string]int{},
		tableNames:    map[string]int{},
		calcNames:     map[string]int{},
		tableActions:  map[actionKey]*ir.Action{},
		keyPrelude:    map[*ir.Table][]mstmt{},
		controlByName: map[string]*controlAction{},
		fieldLists:    map[int]*ir.FieldList{},
		learnLists:    map[string]*ir.LearnList{},
		actionDecl:    map[*ir.Action]*ast.ActionDecl{},
		globalEnv:     newEnv(nil),
	}
	l.run()
	res := &Result{Program: l.prog, Warnings: l.warn}
	hasParams := false
	sort.SliceStable(l.controlActions, func(i, j int) bool {
		a, b := l.controlActions[i], l.controlActions[j]
		if a.block != b.block {
			return a.block < b.block
		}
		ag, bg := l.info.ParentOf[a.decl] == nil, l.info.ParentOf[b.decl] == nil
		if ag != bg {
			return ag
		}
		if ag {
			return a.seq < b.seq
		}
		pa, pb := a.decl.Pos, b.decl.Pos
		if pa.File != pb.File {
			return a.seq < b.seq
		}
		if pa.Line != pb.Line {
			return pa.Line < pb.Line
		}
		return pa.Col < pb.Col
	})
	for _, ca := range l.controlActions {
		var params []ir.ActionParamDecl
		if ca.inTable {
			params = ca.params
		}
		l.prog.ControlActions = append(l.prog.ControlActions, &ir.Action{
			Name: ca.name, Params: params, Annotations: ca.annotations, ExplicitID: ca.explicitID,
			Hidden: ca.decl.Annotations.Has("hidden"),
		})
		if len(params) > 0 && !ca.decl.Annotations.Has("hidden") {
			hasParams = true
		}
	}
	l.prog.HasTypeInfo = l.usesGeneric || anyTable(l.prog) || hasParams || l.prog.TypeInfo != nil
	return res, l.errs
}

func anyTable(p *ir.Program) bool {
	for _, pl := range p.Pipelines {
		for _, t := range pl.Tables {
			if !t.Hidden {
				return true
			}
		}
	}
	return false
}

// bailout abandons lowering after an error that leaves no sensible way on.
type bailout struct{}

func (l *lowerer) errorf(pos scanner.Pos, format string, args ...any) {
	if !pos.IsValid() {
		// blame the statement being lowered when the construct itself
		// has no position
		pos = l.lastPos
	}
	if len(l.errs) < 50 {
		l.errs.Add(pos, format, args...)
	}
}

func (l *lowerer) run() {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
		}
	}()
	main := l.info.Main
	if main == nil {
		l.errorf(scanner.Pos{}, "no main package instance")
		return
	}
	pt, ok := l.info.DeclTypes[main].(*types.Package)
	if !ok || pt.Decl.Name != "V1Switch" {
		l.errorf(main.Pos, "main must be an instance of V1Switch (only the v1model architecture is supported)")
		return
	}
	// the arguments as the checker bound them: named ones
	// (V1Switch(p = P(), ig = I(), ...)) by name, not by position
	var mainArgs []ast.Expr
	if call := l.info.InstanceCalls[main]; call != nil {
		mainArgs = call.Args
	} else {
		for _, a := range main.Args {
			mainArgs = append(mainArgs, a.Value)
		}
	}
	if len(mainArgs) != 6 {
		l.errorf(main.Pos, "V1Switch expects 6 arguments, got %d", len(mainArgs))
		return
	}
	l.prog.Errors = nil
	for i, name := range l.info.Errors {
		l.prog.Errors = append(l.prog.Errors, ir.ErrorCode{Name: name, Value: i})
	}
	l.scalars = &ir.HeaderType{Name: "scalars_0"}
	l.typeNames["scalars_0"] = true
	l.typeNames["standard_metadata"] = true
	l.headerNames["scalars"] = true
	l.headerNames["standard_metadata"] = true

	blocks := make([]*blockInst, 6)
	for i, a := range mainArgs {
		blocks[i] = l.topBlock(a)
		if blocks[i] == nil {
			return
		}
	}
	// The parser's parameters fix the header and metadata types; every
	// block shares the same storage for them.
	pd, ok := blocks[0].decl.(*ast.ParserDecl)
	if !ok || len(pd.Params) != 4 {
		l.errorf(blocks[0].pos, "the first argument of V1Switch must be a parser with 4 parameters")
		return
	}
	hType := l.info.DeclTypes[pd.Params[1]]
	mType := l.info.DeclTypes[pd.Params[2]]
	stdType := l.info.DeclTypes[pd.Params[3]]
	hdrs := l.allocTop(hType)
	meta := l.allocMeta(mType)
	l.standard = l.allocStandard(stdType)

	bind := func(b *blockInst, params []*ast.Param, roles []any) {
		for i, p := range params {
			if i < len(roles) && roles[i] != nil {
				b.env.set(p, roles[i])
			}
		}
	}
	pkt := &packetVal{}
	bind(blocks[0], pd.Params, []any{pkt, hdrs, meta, l.standard})
	for _, i := range []int{1, 4} {
		cd, ok := blocks[i].decl.(*ast.ControlDecl)
		if !ok || len(cd.Params) != 2 {
			l.errorf(blocks[i].pos, "checksum controls must be controls with 2 parameters")
			return
		}
		bind(blocks[i], cd.Params, []any{hdrs, meta})
	}
	for _, i := range []int{2, 3} {
		cd, ok := blocks[i].decl.(*ast.ControlDecl)
		if !ok || len(cd.Params) != 3 {
			l.errorf(blocks[i].pos, "ingress and egress must be controls with 3 parameters")
			return
		}
		bind(blocks[i], cd.Params, []any{hdrs, meta, l.standard})
	}
	dd, ok := blocks[5].decl.(*ast.ControlDecl)
	if !ok || len(dd.Params) != 2 {
		l.errorf(blocks[5].pos, "the deparser must be a control with 2 parameters")
		return
	}
	bind(blocks[5], dd.Params, []any{pkt, hdrs})

	l.block = 0
	l.prog.Parsers = append(l.prog.Parsers, l.lowerParser(blocks[0]))
	l.block = 1
	l.lowerChecksumControl(blocks[1], true)
	l.block = 2
	l.prog.Pipelines = append(l.prog.Pipelines, l.lowerPipeline(blocks[2], "ingress"))
	l.block = 3
	l.prog.Pipelines = append(l.prog.Pipelines, l.lowerPipeline(blocks[3], "egress"))
	l.block = 4
	l.lowerChecksumControl(blocks[4], false)
	l.block = 5
	l.prog.Deparsers = append(l.prog.Deparsers, l.lowerDeparser(blocks[5]))
	l.finishLayout()
	l.guardStackIndexes()
	l.collectTypeInfo()
}

// topBlock instantiates one argument of V1Switch.
func (l *lowerer) topBlock(e ast.Expr) *blockInst {
	var decl ast.Decl
	var args []ast.Expr
	switch x := e.(type) {
	case *ast.CallExpr:
		call := l.info.Calls[x]
		if call == nil || call.Kind != types.CallConstructor || call.Block == nil {
			l.errorf(x.Pos, "expected a parser or control instantiation")
			return nil
		}
		decl = call.Block.Decl
		args = call.Args
	case *ast.Ident:
		inst, ok := l.info.Uses[x].(*ast.InstanceDecl)
		if !ok {
			l.errorf(x.Pos, "expected a parser or control instance")
			return nil
		}
		bt, ok := l.info.DeclTypes[inst].(*types.Block)
		if !ok {
			l.errorf(x.Pos, "expected a parser or control instance")
			return nil
		}
		decl = bt.Decl
		for _, a := range inst.Args {
			args = append(args, a.Value)
		}
	default:
		l.errorf(e.Position(), "expected a parser or control instantiation")
		return nil
	}
	b := &blockInst{decl: decl, name: decl.DeclName(), pos: e.Position(), env: newEnv(nil)}
	var ctorParams []*ast.Param
	switch d := decl.(type) {
	case *ast.ParserDecl:
		ctorParams = d.CtorParams
	case *ast.ControlDecl:
		ctorParams = d.CtorParams
	default:
		l.errorf(e.Position(), "%s has no implementation", decl.DeclName())
		return nil
	}
	for i, p := range ctorParams {
		if i < len(args) && args[i] != nil {
			b.env.set(p, l.ctorArg(args[i], newEnv(nil), b.name))
		}
	}
	l.declareLocals(b)
	return b
}

// uniqueName returns name, or name_N when it is taken, and marks it taken.
func uniqueName(taken map[string]bool, name string) string {
	if !taken[name] {
		taken[name] = true
		return name
	}
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s_%d", name, i)
		if !taken[n] {
			taken[n] = true
			return n
		}
	}
}

// uniqueCounted is uniqueName for maps that count uses.
func uniqueCounted(taken map[string]int, name string) string {
	if _, ok := taken[name]; !ok {
		taken[name] = 0
		return name
	}
	for {
		n := fmt.Sprintf("%s_%d", name, taken[name])
		taken[name]++
		if _, ok := taken[n]; !ok {
			taken[n] = 0
			return n
		}
	}
}

// source builds the source_info of a node.
func (l *lowerer) source(pos scanner.Pos, fragment string) ir.Source {
	return ir.Source{Pos: pos, Fragment: fragment}
}

// generatedName names a compiler-generated action after the source line
// it comes from, as p4c does (file name without punctuation, "l", line).
func (l *lowerer) generatedName(pos scanner.Pos) string {
	base := filepath.Base(pos.File)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	var b strings.Builder
	for _, r := range base {
		if r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		b.WriteString("act")
	}
	if pos.Line > 0 {
		fmt.Fprintf(&b, "l%d", pos.Line)
	}
	return b.String()
}

// finishLayout pads metadata headers and records the header types.
func (l *lowerer) finishLayout() {
	w := 0
	for _, f := range l.scalars.Fields {
		w += f.Width
	}
	if w%8 != 0 {
		l.scalars.Fields = append(l.scalars.Fields, ir.HeaderField{Name: "_padding_0", Width: 8 - w%8})
	}
	// scalars and standard_metadata come first, as in p4c's output.
	hts := []*ir.HeaderType{l.scalars}
	headers := []*ir.Header{{Name: "scalars", Type: l.scalars, Metadata: true}}
	hts = append(hts, l.standard.ht)
	headers = append(headers, &ir.Header{Name: "standard_metadata", Type: l.standard.ht, Metadata: true})
	for _, t := range l.prog.HeaderTypes {
		if t != l.scalars && t != l.standard.ht {
			hts = append(hts, t)
		}
	}
	for _, h := range l.prog.Headers {
		if h.Name != "scalars" && h.Name != "standard_metadata" {
			headers = append(headers, h)
		}
	}
	l.prog.HeaderTypes = hts
	l.prog.Headers = headers
	for _, a := range []struct{ alias, field string }{
		{"queueing_metadata.enq_timestamp", "enq_timestamp"},
		{"queueing_metadata.enq_qdepth", "enq_qdepth"},
		{"queueing_metadata.deq_timedelta", "deq_timedelta"},
		{"queueing_metadata.deq_qdepth", "deq_qdepth"},
		{"intrinsic_metadata.ingress_global_timestamp", "ingress_global_timestamp"},
		{"intrinsic_metadata.egress_global_timestamp", "egress_global_timestamp"},
		{"intrinsic_metadata.mcast_grp", "mcast_grp"},
		{"intrinsic_metadata.egress_rid", "egress_rid"},
		{"intrinsic_metadata.priority", "priority"},
	} {
		if l.standard.ht.FieldIndex(a.field) >= 0 {
			l.prog.FieldAliases = append(l.prog.FieldAliases, ir.FieldAlias{Alias: a.alias, Header: "standard_metadata", Field: a.field})
		}
	}
	// enums: every enum without an underlying type the program declares
	// (BMv2 lists them). A serializable enum (enum bit<W> E) is a bit<W>
	// to BMv2, and p4c leaves it out: its members may share a value, which
	// BMv2's loader refuses in "enums".
	for _, e := range l.info.Enums {
		if e.Decl == nil || e.Underlying != nil {
			continue
		}
		ie := &ir.Enum{Name: e.Name}
		for i, m := range e.Decl.Members {
			v := types.MemberValue(e, m.Name)
			if v == nil {
				v = bigInt(int64(i))
			}
			ie.Members = append(ie.Members, ir.EnumMember{Name: m.Name, Value: v})
		}
		if isArchEnum(e.Name) {
			continue
		}
		l.prog.Enums = append(l.prog.Enums, ie)
	}
	ids := make([]int, 0, len(l.fieldLists))
	for id := range l.fieldLists {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		l.prog.FieldLists = append(l.prog.FieldLists, l.fieldLists[id])
	}
}

// isArchEnum reports enums declared by v1model.p4 that BMv2 does not need.
func isArchEnum(name string) bool {
	switch name {
	case "CounterType", "MeterType", "HashAlgorithm", "CloneType":
		return true
	}
	return false
}
