package lower

import (
	"math/big"
	"strings"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

func bigInt(v int64) *big.Int { return big.NewInt(v) }

// env binds declarations to what they denote in one instantiation: storage
// for variables and parameters, values for constructor parameters,
// instances for externs and sub-blocks.
type env struct {
	parent *env
	m      map[ast.Node]any
}

func newEnv(parent *env) *env { return &env{parent: parent, m: map[ast.Node]any{}} }

func (e *env) set(d ast.Node, v any) { e.m[d] = v }

func (e *env) lookup(d ast.Node) (any, bool) {
	for x := e; x != nil; x = x.parent {
		if v, ok := x.m[d]; ok {
			return v, true
		}
	}
	return nil, false
}

// blockInst is one instance of a parser or control.
type blockInst struct {
	decl ast.Decl
	// parent is the instance that applies this one (nil at the top), and
	// site the declaration it was instantiated from.
	parent *blockInst
	site   *ast.InstanceDecl
	// name is the control-plane prefix of the instance ("ingress",
	// "ingress.c_inst").
	name string
	pos  scanner.Pos
	env  *env
	// pipeline collects the tables of controls.
	pipe *pipeBuilder
	// applied records tables already applied (each may be applied once).
	applied map[*ast.TableDecl]*ir.Table
	// inlined counts how often a sub-block was applied, for naming
	// parser states.
	inlined int
	// externs are the instance's extern and sub-block instances, shared
	// by every apply of the instance.
	externs map[*ast.InstanceDecl]any
}

// ---- values ----

// A val is what an expression evaluates to: a scalar IR expression, or
// storage (fieldLoc, headerLoc, structLoc, stackLoc, unionLoc, dynHeader,
// sliceLoc, dynFieldLoc), or a composite rvalue (structVal, tupleVal).

type scalarVal struct {
	e ir.Expr
	t types.Type
}

type fieldLoc struct {
	hdr, field string
	t          types.Type
}

type headerLoc struct {
	name string
	st   *types.Struct
	ht   *ir.HeaderType
	// stack and index are set for elements of a header stack.
	stack *stackLoc
	index int
}

type structLoc struct {
	st     *types.Struct
	fields []any
}

type stackLoc struct {
	name  string
	t     *types.Stack
	elems []any // *headerLoc or *unionLoc
	ir    *ir.Stack
	uir   *ir.UnionStack
}

type unionLoc struct {
	name    string
	st      *types.Struct
	members []*headerLoc
}

// dynHeader is a stack element chosen at run time.
type dynHeader struct {
	stack *stackLoc
	index ir.Expr
}

// dynFieldLoc is a field of a stack element chosen at run time.
type dynFieldLoc struct {
	stack *stackLoc
	index ir.Expr
	field string
	t     types.Type
}

// sliceLoc is a bit slice of a scalar location, as an assignment target.
type sliceLoc struct {
	base   any // *fieldLoc or *dynFieldLoc
	hi, lo int
}

// structVal is a struct or header value built by an initializer. For
// headers, valid says whether it is valid.
type structVal struct {
	st     *types.Struct
	fields []any
	valid  bool
}

type tupleVal struct {
	elems []any
}

// packetVal is the packet_in / packet_out parameter.
type packetVal struct{}

// constVal is a compile-time value bound to a name (constructor
// parameters).
type constVal struct {
	v types.Value
	t types.Type
}

// externInst is an instance of an extern object.
type externInst struct {
	decl  *ast.InstanceDecl
	typ   *types.Extern
	name  string // fully qualified
	args  []any  // constructor arguments (constVal)
	owner *blockInst
	// inPlace: created in a table property (implementation = ...).
	inPlace bool

	counter  *ir.Counter
	meter    *ir.Meter
	register *ir.Register
	profile  *ir.ActionProfile
	// checksum16 and direct resources have no arrays.
}

// subBlock is an instance of a parser or control inside another.
type subBlock struct {
	decl ast.Decl
	// inst is the instance declaration, nil for an instance created in a
	// constructor argument (C2(C1()) c2); pos is where it is created.
	inst *ast.InstanceDecl
	pos  scanner.Pos
	name string
	ctor *env
	// applied and externs persist across applies of the instance.
	applied map[*ast.TableDecl]*ir.Table
	externs map[*ast.InstanceDecl]any
	// applies counts the applies, for naming inlined parser states.
	applies int
}

// tableRef names a table of a control instance.
type tableRef struct {
	decl *ast.TableDecl
	inst *blockInst
}

// actionRef names an action declared in a control instance (or at top
// level, inst nil).
type actionRefVal struct {
	decl *ast.ActionDecl
	inst *blockInst
}

// ---- types ----

// irType maps a scalar P4 type to its IR type.
func irType(t types.Type) ir.Type {
	switch x := types.Underlying(t).(type) {
	case *types.Bool:
		return ir.BoolType
	case *types.Bits:
		return ir.Bits(x.Width, x.Signed)
	case *types.Enum:
		if x.Underlying != nil {
			return ir.Bits(x.Underlying.Width, x.Underlying.Signed)
		}
		return ir.Bits(32, false)
	case *types.ErrorType:
		return ir.Bits(32, false)
	case *types.Varbit:
		return ir.Bits(x.Max, false)
	}
	return ir.Bits(32, false)
}

// storageType is the type a scalar occupies in a header field.
func storageType(t types.Type) ir.Type {
	it := irType(t)
	if it.Bool {
		return ir.Bits(1, false)
	}
	return it
}

func isScalar(t types.Type) bool {
	switch x := types.Underlying(t).(type) {
	case *types.Bool, *types.Bits, *types.ErrorType, *types.Varbit:
		return true
	case *types.Enum:
		_ = x
		return true
	}
	return false
}

// headerType returns (creating once) the IR layout of a header type.
func (l *lowerer) headerType(st *types.Struct) *ir.HeaderType {
	if st.Decl != nil {
		if ht, ok := l.headerTypes[st.Decl]; ok {
			return ht
		}
	}
	name := st.Name
	if name == "" {
		name = "header"
	}
	ht := &ir.HeaderType{Name: uniqueName(l.typeNames, name)}
	for _, f := range st.Fields {
		l.flattenHeaderField(ht, f.Name, f.Type)
	}
	if st.Decl != nil {
		l.headerTypes[st.Decl] = ht
	}
	l.prog.HeaderTypes = append(l.prog.HeaderTypes, ht)
	return ht
}

// flattenHeaderField adds a header field; a struct inside a header is
// flattened into its bit fields ("s.f"), as P4_16 allows structs of bits
// in headers.
func (l *lowerer) flattenHeaderField(ht *ir.HeaderType, name string, t types.Type) {
	switch x := types.Underlying(t).(type) {
	case *types.Struct:
		for _, f := range x.Fields {
			l.flattenHeaderField(ht, name+"."+f.Name, f.Type)
		}
		return
	case *types.Varbit:
		ht.Fields = append(ht.Fields, ir.HeaderField{Name: name, Width: x.Max, Varbit: true})
		return
	}
	st := storageType(t)
	ht.Fields = append(ht.Fields, ir.HeaderField{Name: name, Width: st.Width, Signed: st.Signed})
}

func (l *lowerer) unionType(st *types.Struct) *ir.UnionType {
	if ut, ok := l.unionTypes[st.Decl]; ok {
		return ut
	}
	ut := &ir.UnionType{Name: uniqueName(l.typeNames, st.Name)}
	for _, f := range st.Fields {
		ut.Members = append(ut.Members, ir.UnionMember{Name: f.Name, Type: l.headerType(types.Underlying(f.Type).(*types.Struct))})
	}
	l.unionTypes[st.Decl] = ut
	l.prog.UnionTypes = append(l.prog.UnionTypes, ut)
	return ut
}

// ---- allocation ----

// newHeader creates a header instance.
func (l *lowerer) newHeader(name string, st *types.Struct) *headerLoc {
	ht := l.headerType(st)
	n := uniqueName(l.headerNames, sanitize(name))
	l.prog.Headers = append(l.prog.Headers, &ir.Header{Name: n, Type: ht})
	return &headerLoc{name: n, st: st, ht: ht}
}

// sanitize keeps header instance names free of dots, which BMv2 uses to
// separate header and field names in some places.
func sanitize(name string) string {
	return strings.NewReplacer(".", "_", "[", "_", "]", "").Replace(name)
}

// newScalar adds a field to the scalars header.
func (l *lowerer) newScalar(name string, t types.Type) *fieldLoc {
	n := uniqueName(l.scalarNames, name)
	st := storageType(t)
	vb := false
	if _, ok := types.Underlying(t).(*types.Varbit); ok {
		vb = true
	}
	l.scalars.Fields = append(l.scalars.Fields, ir.HeaderField{Name: n, Width: st.Width, Signed: st.Signed, Varbit: vb})
	return &fieldLoc{hdr: "scalars", field: n, t: t}
}

// alloc gives storage to a value of type t; name is used for scalars and
// instance names.
func (l *lowerer) alloc(t types.Type, name string) any {
	switch x := types.Underlying(t).(type) {
	case *types.Struct:
		switch x.Kind {
		case ast.StructKindHeader:
			return l.newHeader(name, x)
		case ast.StructKindUnion:
			return l.newUnion(name, x)
		}
		sl := &structLoc{st: x}
		for _, f := range x.Fields {
			sl.fields = append(sl.fields, l.alloc(f.Type, name+"."+f.Name))
		}
		return sl
	case *types.Stack:
		return l.newStack(name, x)
	case *types.Tuple:
		tv := &tupleVal{}
		for i, e := range x.Elems {
			tv.elems = append(tv.elems, l.alloc(e, name+"_"+itoa(i)))
		}
		return tv
	}
	if isScalar(t) {
		return l.newScalar(name, t)
	}
	l.errorf(scanner.Pos{}, "cannot allocate storage for a value of type %s", t)
	panic(bailout{})
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }

func (l *lowerer) newUnion(name string, st *types.Struct) *unionLoc {
	ut := l.unionType(st)
	n := uniqueName(l.headerNames, sanitize(name))
	u := &unionLoc{name: n, st: st}
	iu := &ir.Union{Name: n, Type: ut}
	for _, f := range st.Fields {
		h := l.newHeader(n+"."+f.Name, types.Underlying(f.Type).(*types.Struct))
		u.members = append(u.members, h)
		iu.Headers = append(iu.Headers, l.findHeader(h.name))
	}
	l.prog.Unions = append(l.prog.Unions, iu)
	return u
}

func (l *lowerer) findHeader(name string) *ir.Header {
	for _, h := range l.prog.Headers {
		if h.Name == name {
			return h
		}
	}
	return nil
}

func (l *lowerer) newStack(name string, t *types.Stack) *stackLoc {
	n := uniqueName(l.headerNames, sanitize(name))
	s := &stackLoc{name: n, t: t}
	elem := types.Underlying(t.Elem).(*types.Struct)
	if elem.Kind == ast.StructKindUnion {
		us := &ir.UnionStack{Name: n, Type: l.unionType(elem)}
		for i := 0; i < t.Size; i++ {
			u := l.newUnion(n+"["+itoa(i)+"]", elem)
			s.elems = append(s.elems, u)
			for _, iu := range l.prog.Unions {
				if iu.Name == u.name {
					us.Unions = append(us.Unions, iu)
				}
			}
		}
		s.uir = us
		l.prog.UnionStacks = append(l.prog.UnionStacks, us)
		return s
	}
	is := &ir.Stack{Name: n, Type: l.headerType(elem)}
	for i := 0; i < t.Size; i++ {
		hn := n + "[" + itoa(i) + "]"
		l.headerNames[hn] = true
		ht := l.headerType(elem)
		h := &ir.Header{Name: hn, Type: ht}
		l.prog.Headers = append(l.prog.Headers, h)
		is.Headers = append(is.Headers, h)
		s.elems = append(s.elems, &headerLoc{name: hn, st: elem, ht: ht, stack: s, index: i})
	}
	s.ir = is
	l.prog.Stacks = append(l.prog.Stacks, is)
	return s
}

// V1Switch's header and metadata types are named in the JSON as p4c's
// BMv2 back end names them. A struct without struct-typed fields keeps
// its fields' names: header instances are called after their fields,
// metadata scalars "<type>.<field>". A struct that nests structs is
// flattened first (p4c's FlattenInterfaceStructs): every field that is
// not itself a struct, at any depth and in declaration order, is renamed
// "_" + its path joined with "_" + its index among those leaves. So
// struct H { I ingress; } with struct I { eth_h ethernet; ipv4_h ipv4; }
// has the header instances _ingress_ethernet0 and _ingress_ipv41, and a
// nested metadata scalar is "<type>._fwd_l2ptr68".

// ifaceNamer hands out those names for one type argument.
type ifaceNamer struct {
	// flat is set when the type nests structs; n counts its leaves.
	flat bool
	n    int
}

func newIfaceNamer(st *types.Struct) *ifaceNamer {
	for _, f := range st.Fields {
		if fs, ok := types.Underlying(f.Type).(*types.Struct); ok && fs.Kind == ast.StructKindStruct {
			return &ifaceNamer{flat: true}
		}
	}
	return &ifaceNamer{}
}

// leaf names the next leaf, whose field path is path.
func (n *ifaceNamer) leaf(path []string) string {
	if !n.flat {
		return strings.Join(path, ".")
	}
	name := "_" + strings.Join(path, "_") + itoa(n.n)
	n.n++
	return name
}

// allocTop allocates the headers struct H: its headers are named after
// their fields (flattened as above when H nests structs).
func (l *lowerer) allocTop(t types.Type) any {
	st, ok := types.Underlying(t).(*types.Struct)
	if !ok || st.Kind != ast.StructKindStruct {
		return l.alloc(t, "hdr")
	}
	return l.allocIface(st, st.Name, nil, newIfaceNamer(st), nil, nil)
}

// allocMeta allocates the user metadata struct M: scalars are named
// "<type>.<field>", or "<type>._<path>_<n>" when M nests structs, as in
// p4c's output.
func (l *lowerer) allocMeta(t types.Type) any {
	st, ok := types.Underlying(t).(*types.Struct)
	if !ok || st.Kind != ast.StructKindStruct {
		return l.alloc(t, "meta")
	}
	return l.allocIface(st, st.Name, nil, newIfaceNamer(st), nil, &l.metaLeaves)
}

// metaLeaf is a field of the user metadata struct M that is not itself a
// struct, with the annotations it has once M is flattened: those of the
// fields on the way to it and of the structs holding it (p4c's
// FlattenInterfaceStructs hands them down), and its own.
type metaLeaf struct {
	loc   any
	annos ast.Annotations
}

// allocIface allocates a struct of the V1Switch interface, root being
// the name of the type argument and path the fields leading to st.
// Scalars go to the scalars header as "<root>.<leaf name>"; headers,
// unions and stacks, in H or in M, become instances named after their
// leaf, as p4c names them. When leaves is not nil, every leaf is added to
// it with the annotations it inherits (outer).
func (l *lowerer) allocIface(st *types.Struct, root string, path []string, n *ifaceNamer, outer ast.Annotations, leaves *[]metaLeaf) *structLoc {
	sl := &structLoc{st: st}
	var inherited ast.Annotations
	if leaves != nil {
		if st.Decl != nil {
			inherited = append(inherited, st.Decl.Annotations...)
		}
		inherited = append(inherited, outer...)
	}
	for _, f := range st.Fields {
		p := append(append([]string(nil), path...), f.Name)
		var annos ast.Annotations
		if leaves != nil {
			annos = append(append(ast.Annotations(nil), inherited...), f.Annotations...)
		}
		if fs, ok := types.Underlying(f.Type).(*types.Struct); ok && fs.Kind == ast.StructKindStruct {
			sl.fields = append(sl.fields, l.allocIface(fs, root, p, n, annos, leaves))
			continue
		}
		name := n.leaf(p)
		var v any
		if isScalar(f.Type) {
			v = l.newScalar(root+"."+name, f.Type)
		} else {
			v = l.alloc(f.Type, name)
		}
		sl.fields = append(sl.fields, v)
		if leaves != nil {
			*leaves = append(*leaves, metaLeaf{loc: v, annos: annos})
		}
	}
	return sl
}

// allocStandard creates the standard_metadata instance from the
// architecture's struct, padded to whole bytes as BMv2 expects.
func (l *lowerer) allocStandard(t types.Type) *headerLoc {
	st, ok := types.Underlying(t).(*types.Struct)
	if !ok {
		l.errorf(scanner.Pos{}, "standard_metadata_t is not a struct")
		panic(bailout{})
	}
	ht := &ir.HeaderType{Name: "standard_metadata"}
	w := 0
	for _, f := range st.Fields {
		s := storageType(f.Type)
		ht.Fields = append(ht.Fields, ir.HeaderField{Name: f.Name, Width: s.Width})
		w += s.Width
	}
	if w%8 != 0 {
		ht.Fields = append(ht.Fields, ir.HeaderField{Name: "_padding", Width: 8 - w%8})
	}
	return &headerLoc{name: "standard_metadata", st: st, ht: ht}
}

// standardStruct presents standard_metadata as a struct of fields so that
// member access works like for any metadata struct.
func (h *headerLoc) isMetadata() bool { return h.name == "standard_metadata" }

// fieldOf returns the storage of a member of a header instance.
func (h *headerLoc) fieldOf(name string) any {
	f := h.st.FieldByName(name)
	if f == nil {
		return nil
	}
	if fs, ok := types.Underlying(f.Type).(*types.Struct); ok && fs.Kind == ast.StructKindStruct {
		// a struct inside a header: its bit fields are flattened
		return h.structIn(name, fs)
	}
	return &fieldLoc{hdr: h.name, field: name, t: f.Type}
}

func (h *headerLoc) structIn(prefix string, st *types.Struct) *structLoc {
	sl := &structLoc{st: st}
	for _, f := range st.Fields {
		if fs, ok := types.Underlying(f.Type).(*types.Struct); ok && fs.Kind == ast.StructKindStruct {
			sl.fields = append(sl.fields, h.structIn(prefix+"."+f.Name, fs))
			continue
		}
		sl.fields = append(sl.fields, &fieldLoc{hdr: h.name, field: prefix + "." + f.Name, t: f.Type})
	}
	return sl
}

// fieldIndex of a member of a struct type.
func fieldIndex(st *types.Struct, name string) int {
	for i, f := range st.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}
