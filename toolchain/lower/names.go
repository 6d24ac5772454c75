package lower

import (
	"strconv"
	"strings"

	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
)

// exprText prints an expression the way the program wrote it; p4c uses
// this text for key names and source fragments.
func exprText(e ast.Expr) string {
	var b strings.Builder
	writeExpr(&b, e)
	return b.String()
}

func writeExpr(b *strings.Builder, e ast.Expr) {
	switch x := e.(type) {
	case *ast.Ident:
		if x.Global {
			b.WriteByte('.')
		}
		b.WriteString(x.Name)
	case *ast.IntLit:
		b.WriteString(x.Text)
	case *ast.BoolLit:
		b.WriteString(strconv.FormatBool(x.Value))
	case *ast.StringLit:
		b.WriteString(strconv.Quote(x.Value))
	case *ast.MemberExpr:
		writeExpr(b, x.X)
		b.WriteByte('.')
		b.WriteString(x.Name)
	case *ast.IndexExpr:
		writeExpr(b, x.X)
		b.WriteByte('[')
		writeExpr(b, x.Index)
		b.WriteByte(']')
	case *ast.SliceExpr:
		writeExpr(b, x.X)
		b.WriteByte('[')
		writeExpr(b, x.Hi)
		b.WriteByte(':')
		writeExpr(b, x.Lo)
		b.WriteByte(']')
	case *ast.CallExpr:
		writeExpr(b, x.Fun)
		b.WriteByte('(')
		for i, a := range x.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			if a.Name != "" {
				b.WriteString(a.Name + " = ")
			}
			writeExpr(b, a.Value)
		}
		b.WriteByte(')')
	case *ast.UnaryExpr:
		b.WriteString(x.Op.String())
		writeExpr(b, x.X)
	case *ast.BinaryExpr:
		writeExpr(b, x.X)
		if x.Op == ast.ShrOp {
			b.WriteString(" >> ")
		} else {
			b.WriteString(" " + x.Op.String() + " ")
		}
		writeExpr(b, x.Y)
	case *ast.TernaryExpr:
		writeExpr(b, x.Cond)
		b.WriteString(" ? ")
		writeExpr(b, x.Then)
		b.WriteString(" : ")
		writeExpr(b, x.Else)
	case *ast.CastExpr:
		b.WriteString("(")
		b.WriteString(typeText(x.Type))
		b.WriteString(")")
		writeExpr(b, x.X)
	case *ast.ListExpr:
		b.WriteByte('{')
		for i, el := range x.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, el)
		}
		b.WriteByte('}')
	case *ast.StructExpr:
		b.WriteByte('{')
		for i, f := range x.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name + " = ")
			writeExpr(b, f.Value)
		}
		b.WriteByte('}')
	case *ast.TypeExpr:
		b.WriteString(typeText(x.Type))
	case *ast.DontCareExpr:
		b.WriteByte('_')
	case *ast.DefaultExpr:
		b.WriteString("default")
	case *ast.MaskExpr:
		writeExpr(b, x.Value)
		b.WriteString(" &&& ")
		writeExpr(b, x.Mask)
	case *ast.RangeExpr:
		writeExpr(b, x.Lo)
		b.WriteString(" .. ")
		writeExpr(b, x.Hi)
	}
}

func typeText(t ast.Type) string {
	switch x := t.(type) {
	case *ast.NamedType:
		return x.Name
	case *ast.BitType:
		w := "1"
		if x.Width != nil {
			w = exprText(x.Width)
		}
		if x.Signed {
			return "int<" + w + ">"
		}
		return "bit<" + w + ">"
	case *ast.VarbitType:
		return "varbit<" + exprText(x.Width) + ">"
	case *ast.BaseType:
		return x.Kind
	case *ast.SpecializedType:
		parts := make([]string, len(x.Args))
		for i, a := range x.Args {
			parts[i] = typeText(a)
		}
		return x.Base.Name + "<" + strings.Join(parts, ", ") + ">"
	case *ast.StackType:
		return typeText(x.Elem) + "[" + exprText(x.Size) + "]"
	case *ast.TupleType:
		parts := make([]string, len(x.Elems))
		for i, a := range x.Elems {
			parts[i] = typeText(a)
		}
		return "tuple<" + strings.Join(parts, ", ") + ">"
	}
	return "_"
}

// renderAnnotations prints the annotations P4Info carries: all but @name,
// @id and the documentation ones (@brief, @description).
func renderAnnotations(as ast.Annotations) []string {
	var out []string
	for _, a := range as {
		switch a.Name {
		case "name", "id", "brief", "description":
			continue
		}
		out = append(out, renderAnnotation(a))
	}
	return out
}

func renderAnnotation(a *ast.Annotation) string {
	var b strings.Builder
	b.WriteByte('@')
	b.WriteString(a.Name)
	if !a.HasBody {
		return b.String()
	}
	open, closeCh := "(", ")"
	if a.Structured {
		open, closeCh = "[", "]"
	}
	b.WriteString(open)
	if len(a.Exprs) > 0 && !a.Structured {
		for i, e := range a.Exprs {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(&b, e)
		}
	} else {
		for i, t := range a.Tokens {
			if i > 0 && t.Spaced {
				b.WriteByte(' ')
			}
			if t.Kind == scanner.String {
				b.WriteString(strconv.Quote(t.Text))
			} else {
				b.WriteString(t.Text)
			}
		}
	}
	b.WriteString(closeCh)
	return b.String()
}

// shortName is the last component of a dotted name.
func shortName(n string) string {
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		return n[i+1:]
	}
	return n
}

// typeNameForP4Info is the type name P4Info attaches to action parameters
// and metadata of user-defined types.
func typeNameForP4Info(t types.Type) string {
	if x, ok := t.(*types.NewType); ok {
		return x.Name
	}
	return ""
}

// noteNamedType records a user-defined type (a `type`, a serializable
// enum) in type_info, as p4c does for the types of match fields, action
// parameters and packet metadata.
func (l *lowerer) noteNamedType(t types.Type) {
	switch x := t.(type) {
	case *types.NewType:
		l.noteNewType(x)
	case *types.Enum:
		if x.Underlying != nil {
			l.noteEnum(x)
		}
	}
}

// p4rtWidth is the width P4Runtime gives a value of type t: that of its
// translated form for a `type` with @p4runtime_translation (0 when it is
// translated to a string), and 0 for error, which the control plane sees
// as a string.
func (l *lowerer) p4rtWidth(t types.Type) int {
	if nt, ok := t.(*types.NewType); ok {
		if tr, ok := translation(nt); ok {
			return tr.width
		}
	}
	if _, ok := types.Underlying(t).(*types.ErrorType); ok {
		return 0
	}
	return types.Width(t)
}

// sdnType is what @p4runtime_translation(uri, T) on a `type` declares
// (P4Runtime spec §8.3): the URI and the controller's representation T,
// a width given as an integer or as bit<W>, or string.
type sdnType struct {
	uri    string
	width  int
	string bool
}

// translation reads the @p4runtime_translation of a `type`, if it has
// one. Only the type itself counts: a `type` declared on a translated
// `type` without its own annotation is not translated.
func translation(nt *types.NewType) (sdnType, bool) {
	if nt.Decl == nil {
		return sdnType{}, false
	}
	a := nt.Decl.Annotations.Get("p4runtime_translation")
	if a == nil || len(a.Exprs) < 2 {
		return sdnType{}, false
	}
	var tr sdnType
	if s, ok := a.Exprs[0].(*ast.StringLit); ok {
		tr.uri = s.Value
	}
	switch x := a.Exprs[1].(type) {
	case *ast.IntLit:
		tr.width = int(x.Value.Int64())
	case *ast.TypeExpr:
		switch bt := x.Type.(type) {
		case *ast.BaseType:
			tr.string = bt.Kind == "string"
		case *ast.BitType:
			if lit, ok := bt.Width.(*ast.IntLit); ok && !bt.Signed {
				tr.width = int(lit.Value.Int64())
			}
		}
	}
	return tr, true
}

// typeSpec describes a P4 type for P4Info, recording named types in the
// program's type_info.
func (l *lowerer) typeSpec(t types.Type) *ir.TypeSpec {
	switch x := t.(type) {
	case *types.NewType:
		l.noteNewType(x)
		return &ir.TypeSpec{Kind: "new_type", Name: x.Name}
	}
	switch x := types.Underlying(t).(type) {
	case *types.Bits:
		return &ir.TypeSpec{Kind: "bitstring", Width: x.Width, Signed: x.Signed}
	case *types.Varbit:
		return &ir.TypeSpec{Kind: "bitstring", Width: x.Max, Varbit: true}
	case *types.Bool:
		return &ir.TypeSpec{Kind: "bool"}
	case *types.ErrorType:
		// p4c lists every error member, in declaration order
		ti := l.typeInfo()
		ti.HasError = true
		ti.Errors = append([]string(nil), l.info.Errors...)
		return &ir.TypeSpec{Kind: "error"}
	case *types.Enum:
		if x.Underlying != nil {
			l.noteEnum(x)
			return &ir.TypeSpec{Kind: "serializable_enum", Name: x.Name}
		}
		l.notePlainEnum(x)
		return &ir.TypeSpec{Kind: "enum", Name: x.Name}
	case *types.Struct:
		l.noteStruct(x)
		switch x.Kind {
		case ast.StructKindHeader:
			return &ir.TypeSpec{Kind: "header", Name: x.Name}
		case ast.StructKindUnion:
			return &ir.TypeSpec{Kind: "header_union", Name: x.Name}
		}
		return &ir.TypeSpec{Kind: "struct", Name: x.Name}
	case *types.Tuple:
		ts := &ir.TypeSpec{Kind: "tuple"}
		for _, e := range x.Elems {
			ts.Elems = append(ts.Elems, l.typeSpec(e))
		}
		return ts
	case *types.Stack:
		ts := l.typeSpec(x.Elem)
		return &ir.TypeSpec{Kind: "header_stack", Name: ts.Name, Width: x.Size}
	}
	return &ir.TypeSpec{Kind: "bitstring"}
}

func (l *lowerer) typeInfo() *ir.TypeInfo {
	if l.prog.TypeInfo == nil {
		l.prog.TypeInfo = &ir.TypeInfo{}
	}
	return l.prog.TypeInfo
}

func (l *lowerer) noteStruct(st *types.Struct) {
	ti := l.typeInfo()
	list := &ti.Structs
	switch st.Kind {
	case ast.StructKindHeader:
		list = &ti.Headers
	case ast.StructKindUnion:
		list = &ti.Unions
	}
	for _, n := range *list {
		if n.Name == st.Name {
			return
		}
	}
	nt := &ir.NamedType{Name: st.Name}
	*list = append(*list, nt)
	if st.Kind == ast.StructKindHeader {
		// a header's struct-typed fields appear flattened, named
		// "s.f8", as in p4c's type_info (a header member is bits only)
		nt.Members = l.headerMembers("", st)
		return
	}
	for _, f := range st.Fields {
		nt.Members = append(nt.Members, ir.NamedMember{Name: f.Name, Spec: l.typeSpec(f.Type)})
	}
}

func (l *lowerer) headerMembers(prefix string, st *types.Struct) []ir.NamedMember {
	var out []ir.NamedMember
	for _, f := range st.Fields {
		if sub, ok := types.Underlying(f.Type).(*types.Struct); ok && sub.Kind == ast.StructKindStruct {
			out = append(out, l.headerMembers(prefix+f.Name+".", sub)...)
			continue
		}
		out = append(out, ir.NamedMember{Name: prefix + f.Name, Spec: l.typeSpec(f.Type)})
	}
	return out
}

func (l *lowerer) noteEnum(e *types.Enum) {
	ti := l.typeInfo()
	for _, x := range ti.Enums {
		if x.Name == e.Name {
			return
		}
	}
	se := &ir.SerializableEnum{Name: e.Name, Width: e.Underlying.Width}
	for _, m := range e.Decl.Members {
		if ev, ok := l.info.ConstValues[m].(*types.EnumValue); ok && ev.Value != nil {
			se.Members = append(se.Members, ir.EnumMember{Name: m.Name, Value: ev.Value})
		}
	}
	ti.Enums = append(ti.Enums, se)
}

// notePlainEnum records an enum without representation, which type_info
// describes by its members' names.
func (l *lowerer) notePlainEnum(e *types.Enum) {
	ti := l.typeInfo()
	for _, x := range ti.PlainEnums {
		if x.Name == e.Name {
			return
		}
	}
	ti.PlainEnums = append(ti.PlainEnums, &ir.PlainEnum{Name: e.Name, Members: append([]string(nil), e.Members...)})
}

func (l *lowerer) noteNewType(nt *types.NewType) {
	ti := l.typeInfo()
	for _, x := range ti.NewTypes {
		if x.Name == nt.Name {
			return
		}
	}
	info := &ir.NewTypeInfo{Name: nt.Name, Spec: l.typeSpec(nt.Base)}
	if tr, ok := translation(nt); ok {
		info.Translation, info.SDNWidth, info.SDNString = tr.uri, tr.width, tr.string
	}
	ti.NewTypes = append(ti.NewTypes, info)
}

// controllerFields lists the metadata of a controller header as p4c's
// P4Info has them: its fields, or, when the header holds structs, its
// fields flattened (FlattenHeader): every bit field at any depth, named
// by its dotted path (whatever its @name), with the annotations of the
// fields on the way, the innermost winning. @hidden ones take an id but
// are not described.
func (l *lowerer) controllerFields(st *types.Struct) []ir.ControllerField {
	nested := false
	for _, f := range st.Fields {
		if fs, ok := types.Underlying(f.Type).(*types.Struct); ok && fs.Kind == ast.StructKindStruct {
			nested = true
		}
	}
	var out []ir.ControllerField
	var walk func(st *types.Struct, path []string, outer ast.Annotations)
	walk = func(st *types.Struct, path []string, outer ast.Annotations) {
		for _, f := range st.Fields {
			p := append(append([]string(nil), path...), f.Name)
			annos := mergeAnnotations(outer, f.Annotations)
			if fs, ok := types.Underlying(f.Type).(*types.Struct); ok && fs.Kind == ast.StructKindStruct {
				walk(fs, p, annos)
				continue
			}
			name := strings.Join(p, ".")
			if !nested {
				if n, ok := f.Annotations.StringArg("name"); ok {
					name = n
				}
			}
			l.noteNamedType(f.Type)
			out = append(out, ir.ControllerField{Name: name, Width: l.p4rtWidth(f.Type), Annotations: renderAnnotations(annos),
				TypeName: typeNameForP4Info(f.Type), ExplicitID: explicitID(annos), Hidden: annos.Has("hidden")})
		}
	}
	walk(st, nil, nil)
	return out
}

// mergeAnnotations is outer's annotations with inner's: one of each name,
// inner's when both have it, inner's first.
func mergeAnnotations(outer, inner ast.Annotations) ast.Annotations {
	if len(outer) == 0 {
		return inner
	}
	out := append(ast.Annotations(nil), inner...)
	for _, a := range outer {
		if !inner.Has(a.Name) {
			out = append(out, a)
		}
	}
	return out
}

// collectTypeInfo records types P4Info describes even when unused by
// digests: controller headers.
func (l *lowerer) collectTypeInfo() {
	for _, st := range l.info.Structs {
		if st.Kind != ast.StructKindHeader || st.Decl == nil {
			continue
		}
		a := st.Decl.Annotations.Get("controller_header")
		if a == nil {
			continue
		}
		name, _ := st.Decl.Annotations.StringArg("controller_header")
		typeName := st.Name
		if n, ok := st.Decl.Annotations.StringArg("name"); ok {
			typeName = n
		}
		// p4c keeps @controller_header itself among the preamble's
		// annotations (as in every P4Info it writes for packet I/O)
		ch := &ir.ControllerHeader{Name: name, TypeName: typeName, ExplicitID: explicitID(st.Decl.Annotations),
			Annotations: renderAnnotations(st.Decl.Annotations), Hidden: st.Decl.Annotations.Has("hidden")}
		ch.Fields = l.controllerFields(st)
		l.prog.ControllerHeaders = append(l.prog.ControllerHeaders, ch)
	}
}
