// Package types resolves names and checks types in a P4_16 syntax tree.
//
// Like go/types, it leaves the tree untouched and records what it learns in
// an Info: the type of every expression (after P4_16's implicit casts), the
// compile-time value of every constant expression, the declaration each
// name refers to, and how every call is resolved. Errors are collected with
// positions; checking continues past them.
package types

import (
	"fmt"
	"strings"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
)

// Type is a P4_16 type.
type Type interface {
	String() string
}

// Bits is bit<W> (Signed false) or int<W> (Signed true).
type Bits struct {
	Width  int
	Signed bool
}

// Varbit is varbit<Max>.
type Varbit struct{ Max int }

// Bool is bool.
type Bool struct{}

// InfInt is the arbitrary-precision `int` of compile-time constants.
type InfInt struct{}

// String is string (only in annotations and log_msg).
type String struct{}

// Void is the return type of procedures.
type Void struct{}

// ErrorType is error.
type ErrorType struct{}

// MatchKind is match_kind.
type MatchKind struct{}

// DontCare is the type of `_`.
type DontCare struct{}

// InvalidHeader is the type of `{#}` before the context gives it a header
// or header union type.
type InvalidHeader struct{}

// Field is a member of a struct-like type.
type Field struct {
	Name        string
	Type        Type
	Annotations ast.Annotations
	Decl        *ast.Field
}

// Struct is a struct, header or header_union type.
type Struct struct {
	Kind   ast.StructKind
	Name   string
	Fields []*Field
	Decl   *ast.StructDecl
	// TypeParams is set for a generic declaration (struct S<T>), which is
	// only a template for its specializations.
	TypeParams []*ast.TypeParam
	// Generic and Args describe S<T> used inside another generic
	// declaration: specialized once T is known.
	Generic *Struct
	Args    []Type
}

// Stack is a header stack T[Size].
type Stack struct {
	Elem Type
	Size int
}

// Enum is an enum; Underlying is nil for plain enums.
type Enum struct {
	Name       string
	Members    []string
	Underlying *Bits
	Decl       *ast.EnumDecl
}

// Tuple is tuple<...>, also the type of list expressions.
type Tuple struct {
	Elems []Type
}

// NewType is a type introduced with `type T N;` (distinct from T).
type NewType struct {
	Name string
	Base Type
	Decl *ast.TypedefDecl
}

// Extern is an extern object type, possibly specialized.
type Extern struct {
	Decl *ast.ExternDecl
	Args []Type
}

// Block is a parser or control type (the type of an instance).
type Block struct {
	IsParser bool
	Name     string
	Params   []*ast.Param
	// Decl is the *ast.ParserDecl, *ast.ControlDecl or *ast.BlockTypeDecl.
	Decl ast.Decl
	Args []Type
}

// Package is a package type.
type Package struct {
	Decl *ast.PackageDecl
	Args []Type
}

// TypeVar is a generic type parameter.
type TypeVar struct {
	Name string
	Decl *ast.TypeParam
}

// Table is the type of a table; ApplyResult the type of table.apply().
type Table struct{ Decl *ast.TableDecl }

// ApplyResult is the struct returned by table.apply(): hit, miss, action_run.
type ApplyResult struct{ Table *ast.TableDecl }

// ActionEnum is the type of table.apply().action_run.
type ActionEnum struct{ Table *ast.TableDecl }

// Set is the type of keyset expressions (masks, ranges, default).
type Set struct{ Elem Type }

// ValueSet is the type of a value_set instance.
type ValueSet struct {
	Elem Type
	Decl *ast.ValueSetDecl
}

// Action is the type of an action name.
type Action struct{ Decl *ast.ActionDecl }

// Function is the type of a function or extern function name.
type Function struct {
	Proto *ast.FunctionProto
}

// StateType is the type of parser state names.
type StateType struct{}

// TypeOfType marks an expression that names a type (error, an enum, a header
// type): its members are the type's members.
type TypeOfType struct{ T Type }

func (t *Bits) String() string {
	if t.Signed {
		return fmt.Sprintf("int<%d>", t.Width)
	}
	return fmt.Sprintf("bit<%d>", t.Width)
}
func (t *Varbit) String() string      { return fmt.Sprintf("varbit<%d>", t.Max) }
func (*Bool) String() string          { return "bool" }
func (*InfInt) String() string        { return "int" }
func (*String) String() string        { return "string" }
func (*Void) String() string          { return "void" }
func (*ErrorType) String() string     { return "error" }
func (*MatchKind) String() string     { return "match_kind" }
func (*DontCare) String() string      { return "_" }
func (*InvalidHeader) String() string { return "{#}" }
func (t *Struct) String() string      { return t.Name }
func (t *Stack) String() string       { return fmt.Sprintf("%s[%d]", t.Elem, t.Size) }
func (t *Enum) String() string        { return t.Name }
func (t *NewType) String() string     { return t.Name }
func (t *TypeVar) String() string     { return t.Name }
func (t *Table) String() string       { return "table " + t.Decl.Name }
func (*ApplyResult) String() string   { return "apply_result" }
func (*ActionEnum) String() string    { return "action_list" }
func (t *Set) String() string         { return fmt.Sprintf("set<%s>", t.Elem) }
func (t *ValueSet) String() string    { return fmt.Sprintf("value_set<%s>", t.Elem) }
func (t *Action) String() string      { return "action " + t.Decl.Name }
func (t *Function) String() string    { return "function " + t.Proto.Name }
func (*StateType) String() string     { return "state" }
func (t *TypeOfType) String() string {
	return "type " + t.T.String()
}
func (t *Tuple) String() string {
	parts := make([]string, len(t.Elems))
	for i, e := range t.Elems {
		parts[i] = e.String()
	}
	return "tuple<" + strings.Join(parts, ", ") + ">"
}
func (t *Extern) String() string { return withArgs(t.Decl.Name, t.Args) }
func (t *Block) String() string  { return withArgs(t.Name, t.Args) }
func (t *Package) String() string {
	return withArgs(t.Decl.Name, t.Args)
}

func withArgs(name string, args []Type) string {
	if len(args) == 0 {
		return name
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = a.String()
	}
	return name + "<" + strings.Join(parts, ", ") + ">"
}

// FieldByName returns a struct member.
func (t *Struct) FieldByName(name string) *Field {
	for _, f := range t.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// IsHeader reports whether t is a header type.
func IsHeader(t Type) bool {
	s, ok := t.(*Struct)
	return ok && s.Kind == ast.StructKindHeader
}

// IsUnion reports whether t is a header_union type.
func IsUnion(t Type) bool {
	s, ok := t.(*Struct)
	return ok && s.Kind == ast.StructKindUnion
}

// IsStruct reports whether t is a struct type.
func IsStruct(t Type) bool {
	s, ok := t.(*Struct)
	return ok && s.Kind == ast.StructKindStruct
}

// Underlying strips `type` wrappers down to the representation type.
func Underlying(t Type) Type {
	for {
		nt, ok := t.(*NewType)
		if !ok {
			return t
		}
		t = nt.Base
	}
}

// BitsOf returns t's representation as bits, for bit<W>, int<W>, bool (as
// bit<1>) and serializable enums, or nil.
func BitsOf(t Type) *Bits {
	switch x := Underlying(t).(type) {
	case *Bits:
		return x
	case *Enum:
		return x.Underlying
	case *Bool:
		return &Bits{Width: 1}
	}
	return nil
}

// Width returns the number of bits a value of t occupies in a header or
// metadata (0 if it has no fixed width). Plain enums and errors take 32
// bits, as in BMv2.
func Width(t Type) int {
	switch x := Underlying(t).(type) {
	case *Bits:
		return x.Width
	case *Bool:
		return 1
	case *Varbit:
		return x.Max
	case *Enum:
		if x.Underlying != nil {
			return x.Underlying.Width
		}
		return 32
	case *ErrorType:
		return 32
	case *Struct:
		w := 0
		for _, f := range x.Fields {
			if x.Kind == ast.StructKindUnion {
				if fw := Width(f.Type); fw > w {
					w = fw
				}
				continue
			}
			w += Width(f.Type)
		}
		return w
	case *Stack:
		return x.Size * Width(x.Elem)
	case *Tuple:
		w := 0
		for _, e := range x.Elems {
			w += Width(e)
		}
		return w
	}
	return 0
}

// Identical reports whether two types are the same type.
func Identical(a, b Type) bool {
	if a == b {
		return true
	}
	switch x := a.(type) {
	case *Bits:
		y, ok := b.(*Bits)
		return ok && x.Width == y.Width && x.Signed == y.Signed
	case *Varbit:
		y, ok := b.(*Varbit)
		return ok && x.Max == y.Max
	case *Bool:
		_, ok := b.(*Bool)
		return ok
	case *InfInt:
		_, ok := b.(*InfInt)
		return ok
	case *String:
		_, ok := b.(*String)
		return ok
	case *Void:
		_, ok := b.(*Void)
		return ok
	case *ErrorType:
		_, ok := b.(*ErrorType)
		return ok
	case *MatchKind:
		_, ok := b.(*MatchKind)
		return ok
	case *Struct:
		y, ok := b.(*Struct)
		return ok && x.Decl == y.Decl && x.Name == y.Name
	case *Stack:
		y, ok := b.(*Stack)
		return ok && x.Size == y.Size && Identical(x.Elem, y.Elem)
	case *Enum:
		y, ok := b.(*Enum)
		return ok && x.Decl == y.Decl
	case *NewType:
		y, ok := b.(*NewType)
		return ok && x.Decl == y.Decl
	case *Tuple:
		y, ok := b.(*Tuple)
		if !ok || len(x.Elems) != len(y.Elems) {
			return false
		}
		for i := range x.Elems {
			if !Identical(x.Elems[i], y.Elems[i]) {
				return false
			}
		}
		return true
	case *Extern:
		y, ok := b.(*Extern)
		return ok && x.Decl == y.Decl && identicalList(x.Args, y.Args)
	case *Block:
		y, ok := b.(*Block)
		return ok && x.Decl == y.Decl
	case *TypeVar:
		y, ok := b.(*TypeVar)
		return ok && x.Decl == y.Decl
	case *ActionEnum:
		y, ok := b.(*ActionEnum)
		return ok && x.Table == y.Table
	case *DontCare:
		return true
	}
	return false
}

func identicalList(a, b []Type) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !Identical(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Subst replaces type variables by their bindings.
func Subst(t Type, env map[*ast.TypeParam]Type) Type {
	if len(env) == 0 || t == nil {
		return t
	}
	switch x := t.(type) {
	case *TypeVar:
		if b, ok := env[x.Decl]; ok && b != nil {
			return b
		}
	case *Stack:
		return &Stack{Elem: Subst(x.Elem, env), Size: x.Size}
	case *Tuple:
		out := &Tuple{Elems: make([]Type, len(x.Elems))}
		for i, e := range x.Elems {
			out.Elems[i] = Subst(e, env)
		}
		return out
	case *Extern:
		out := &Extern{Decl: x.Decl, Args: make([]Type, len(x.Args))}
		for i, e := range x.Args {
			out.Args[i] = Subst(e, env)
		}
		return out
	case *Set:
		return &Set{Elem: Subst(x.Elem, env)}
	}
	return t
}
