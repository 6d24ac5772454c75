// Package ast declares the syntax tree of P4_16 programs.
//
// Every node records the position of its first token. The tree is what the
// parser read, with no name resolution or typing: package types attaches
// meaning to it without changing it.
package ast

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// Pos is a source position.
type Pos = scanner.Pos

// Node is any syntax tree node.
type Node interface {
	Position() Pos
}

// Program is one compilation unit after preprocessing.
type Program struct {
	Decls []Decl
}

// Annotation is `@name` or `@name(tokens)` or `@name[structured]`.
type Annotation struct {
	Pos  Pos
	Name string
	// Tokens are the raw tokens between the parentheses (nil when the
	// annotation has no body). P4Info reproduces annotations from them.
	Tokens []scanner.Token
	// Exprs holds the body parsed as a comma-separated expression list,
	// when it parses as one.
	Exprs []Expr
	// HasBody is true when the annotation was written with parentheses.
	HasBody bool
	// Structured is true for the @name[...] form.
	Structured bool
}

// Annotations is an annotation list with lookup helpers.
type Annotations []*Annotation

// Get returns the first annotation called name, or nil.
func (as Annotations) Get(name string) *Annotation {
	for _, a := range as {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Has reports whether an annotation called name is present.
func (as Annotations) Has(name string) bool { return as.Get(name) != nil }

// StringArg returns the string argument of annotation name, if it has one.
func (as Annotations) StringArg(name string) (string, bool) {
	a := as.Get(name)
	if a == nil || len(a.Exprs) != 1 {
		return "", false
	}
	if s, ok := a.Exprs[0].(*StringLit); ok {
		return s.Value, true
	}
	return "", false
}

// ---- types as written ----

// Type is a type expression.
type Type interface {
	Node
	typeNode()
}

// NamedType refers to a declared type by name (`.name` for the top-level one).
type NamedType struct {
	Pos    Pos
	Name   string
	Global bool
}

// BitType is bit<W> or int<W> (Signed); Width is nil for the bare `bit`,
// which means bit<1>.
type BitType struct {
	Pos    Pos
	Signed bool
	Width  Expr
}

// VarbitType is varbit<W>.
type VarbitType struct {
	Pos   Pos
	Width Expr
}

// BaseType is a keyword type: bool, error, string, int, void, match_kind,
// packet_in is not a keyword, so it is a NamedType.
type BaseType struct {
	Pos  Pos
	Kind string // "bool", "error", "string", "int", "void", "match_kind"
}

// SpecializedType is Name<Args>.
type SpecializedType struct {
	Pos  Pos
	Base *NamedType
	Args []Type
}

// StackType is Elem[Size].
type StackType struct {
	Pos  Pos
	Elem Type
	Size Expr
}

// TupleType is tuple<Elems> (also list<Elem>, with List set).
type TupleType struct {
	Pos   Pos
	Elems []Type
	List  bool
}

// DontCareType is `_` in a type argument list.
type DontCareType struct{ Pos Pos }

func (t *NamedType) Position() Pos       { return t.Pos }
func (t *BitType) Position() Pos         { return t.Pos }
func (t *VarbitType) Position() Pos      { return t.Pos }
func (t *BaseType) Position() Pos        { return t.Pos }
func (t *SpecializedType) Position() Pos { return t.Pos }
func (t *StackType) Position() Pos       { return t.Pos }
func (t *TupleType) Position() Pos       { return t.Pos }
func (t *DontCareType) Position() Pos    { return t.Pos }
func (*NamedType) typeNode()             {}
func (*BitType) typeNode()               {}
func (*VarbitType) typeNode()            {}
func (*BaseType) typeNode()              {}
func (*SpecializedType) typeNode()       {}
func (*StackType) typeNode()             {}
func (*TupleType) typeNode()             {}
func (*DontCareType) typeNode()          {}

// ---- declarations ----

// Decl is a declaration.
type Decl interface {
	Node
	DeclName() string
}

// Direction of a parameter.
type Direction int

// Parameter directions. None is the directionless parameter (control-plane
// data for actions, compile-time values elsewhere).
const (
	None Direction = iota
	In
	Out
	InOut
)

func (d Direction) String() string {
	switch d {
	case In:
		return "in"
	case Out:
		return "out"
	case InOut:
		return "inout"
	}
	return ""
}

// Param is a parameter of a function, action, parser, control or method.
type Param struct {
	Pos         Pos
	Annotations Annotations
	Dir         Direction
	Type        Type
	Name        string
	Default     Expr
}

// TypeParam is a generic type variable.
type TypeParam struct {
	Pos  Pos
	Name string
}

// ConstDecl is `const T name = value;`.
type ConstDecl struct {
	Pos         Pos
	Annotations Annotations
	Type        Type
	Name        string
	Value       Expr
}

// VarDecl is `T name [= init];`.
type VarDecl struct {
	Pos         Pos
	Annotations Annotations
	Type        Type
	Name        string
	Init        Expr
}

// TypedefDecl is `typedef T name;` or `type T name;` (NewType).
type TypedefDecl struct {
	Pos         Pos
	Annotations Annotations
	Type        Type
	Name        string
	NewType     bool
}

// StructKind tells headers, unions and structs apart.
type StructKind int

// Struct-like declaration kinds.
const (
	StructKindStruct StructKind = iota
	StructKindHeader
	StructKindUnion
)

// Field is a member of a struct-like type.
type Field struct {
	Pos         Pos
	Annotations Annotations
	Type        Type
	Name        string
}

// StructDecl declares a struct, header or header_union type.
type StructDecl struct {
	Pos         Pos
	Annotations Annotations
	Kind        StructKind
	Name        string
	TypeParams  []*TypeParam
	Fields      []*Field
}

// EnumMember is one enumerator.
type EnumMember struct {
	Pos   Pos
	Name  string
	Value Expr // only for serializable enums
}

// EnumDecl is `enum [bit<W>] name { ... }`.
type EnumDecl struct {
	Pos         Pos
	Annotations Annotations
	Underlying  Type // nil for a plain enum
	Name        string
	Members     []*EnumMember
}

// ErrorDecl is `error { ... }`; several declarations add up.
type ErrorDecl struct {
	Pos     Pos
	Members []*EnumMember
}

// MatchKindDecl is `match_kind { ... }`.
type MatchKindDecl struct {
	Pos     Pos
	Members []*EnumMember
}

// FunctionProto is the signature of a function, extern function or method.
type FunctionProto struct {
	Pos         Pos
	Annotations Annotations
	ReturnType  Type // nil for constructors
	Name        string
	TypeParams  []*TypeParam
	Params      []*Param
	Abstract    bool
}

// FunctionDecl is a function with a body.
type FunctionDecl struct {
	Proto *FunctionProto
	Body  *BlockStmt
}

// ExternFuncDecl declares an extern function.
type ExternFuncDecl struct {
	Proto *FunctionProto
}

// ExternDecl declares an extern object type.
type ExternDecl struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	TypeParams  []*TypeParam
	Methods     []*FunctionProto // constructors have ReturnType nil and Name == extern name
}

// ActionDecl is an action.
type ActionDecl struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	Params      []*Param
	Body        *BlockStmt
}

// BlockTypeDecl declares a parser or control type (no body), used by
// architectures.
type BlockTypeDecl struct {
	Pos         Pos
	Annotations Annotations
	IsParser    bool
	Name        string
	TypeParams  []*TypeParam
	Params      []*Param
}

// PackageDecl declares a package type.
type PackageDecl struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	TypeParams  []*TypeParam
	Params      []*Param
}

// ParserDecl is a parser with states.
type ParserDecl struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	TypeParams  []*TypeParam
	Params      []*Param
	CtorParams  []*Param
	Locals      []Decl
	States      []*ParserState
}

// ControlDecl is a control with an apply block.
type ControlDecl struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	TypeParams  []*TypeParam
	Params      []*Param
	CtorParams  []*Param
	Locals      []Decl
	Body        *BlockStmt
}

// InstanceDecl is `Type(args) name;` (optionally with an initializer block
// implementing abstract methods).
type InstanceDecl struct {
	Pos         Pos
	Annotations Annotations
	Type        Type
	Args        []*Arg
	Name        string
	Init        []Decl
}

// ValueSetDecl is `value_set<T>(size) name;`.
type ValueSetDecl struct {
	Pos         Pos
	Annotations Annotations
	ElemType    Type
	Size        Expr
	Name        string
}

// TableDecl is a table with its properties.
type TableDecl struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	Properties  []TableProperty
}

// TableProperty is one property of a table.
type TableProperty interface {
	Node
	PropName() string
}

// KeyElement is one `expr : match_kind` entry.
type KeyElement struct {
	Pos         Pos
	Annotations Annotations
	Expr        Expr
	MatchKind   string
	MatchPos    Pos
}

// KeyProperty is `key = { ... }`.
type KeyProperty struct {
	Pos      Pos
	Elements []*KeyElement
}

// ActionRef is one entry of `actions = { ... }`.
type ActionRef struct {
	Pos         Pos
	Annotations Annotations
	Name        *Ident
	Args        []*Arg // nil when written without parentheses
}

// ActionsProperty is `actions = { ... }`.
type ActionsProperty struct {
	Pos     Pos
	Actions []*ActionRef
}

// Entry is one constant table entry.
type Entry struct {
	Pos         Pos
	Annotations Annotations
	Const       bool
	Priority    Expr // from `priority = N:`; @priority is in Annotations
	Keys        []Expr
	Action      *ActionRef
}

// EntriesProperty is `[const] entries = { ... }`.
type EntriesProperty struct {
	Pos     Pos
	Const   bool
	Entries []*Entry
}

// ValueProperty is any other property: `[const] name = expr;`.
type ValueProperty struct {
	Pos         Pos
	Annotations Annotations
	Const       bool
	Name        string
	Value       Expr
}

func (p *KeyProperty) Position() Pos     { return p.Pos }
func (p *ActionsProperty) Position() Pos { return p.Pos }
func (p *EntriesProperty) Position() Pos { return p.Pos }
func (p *ValueProperty) Position() Pos   { return p.Pos }
func (*KeyProperty) PropName() string    { return "key" }
func (*ActionsProperty) PropName() string {
	return "actions"
}
func (*EntriesProperty) PropName() string  { return "entries" }
func (p *ValueProperty) PropName() string  { return p.Name }
func (d *ConstDecl) Position() Pos         { return d.Pos }
func (d *VarDecl) Position() Pos           { return d.Pos }
func (d *TypedefDecl) Position() Pos       { return d.Pos }
func (d *StructDecl) Position() Pos        { return d.Pos }
func (d *EnumDecl) Position() Pos          { return d.Pos }
func (d *ErrorDecl) Position() Pos         { return d.Pos }
func (d *MatchKindDecl) Position() Pos     { return d.Pos }
func (d *FunctionDecl) Position() Pos      { return d.Proto.Pos }
func (d *ExternFuncDecl) Position() Pos    { return d.Proto.Pos }
func (d *ExternDecl) Position() Pos        { return d.Pos }
func (d *ActionDecl) Position() Pos        { return d.Pos }
func (d *BlockTypeDecl) Position() Pos     { return d.Pos }
func (d *PackageDecl) Position() Pos       { return d.Pos }
func (d *ParserDecl) Position() Pos        { return d.Pos }
func (d *ControlDecl) Position() Pos       { return d.Pos }
func (d *InstanceDecl) Position() Pos      { return d.Pos }
func (d *ValueSetDecl) Position() Pos      { return d.Pos }
func (d *TableDecl) Position() Pos         { return d.Pos }
func (d *ConstDecl) DeclName() string      { return d.Name }
func (d *VarDecl) DeclName() string        { return d.Name }
func (d *TypedefDecl) DeclName() string    { return d.Name }
func (d *StructDecl) DeclName() string     { return d.Name }
func (d *EnumDecl) DeclName() string       { return d.Name }
func (d *ErrorDecl) DeclName() string      { return "error" }
func (d *MatchKindDecl) DeclName() string  { return "match_kind" }
func (d *FunctionDecl) DeclName() string   { return d.Proto.Name }
func (d *ExternFuncDecl) DeclName() string { return d.Proto.Name }
func (d *ExternDecl) DeclName() string     { return d.Name }
func (d *ActionDecl) DeclName() string     { return d.Name }
func (d *BlockTypeDecl) DeclName() string  { return d.Name }
func (d *PackageDecl) DeclName() string    { return d.Name }
func (d *ParserDecl) DeclName() string     { return d.Name }
func (d *ControlDecl) DeclName() string    { return d.Name }
func (d *InstanceDecl) DeclName() string   { return d.Name }
func (d *ValueSetDecl) DeclName() string   { return d.Name }
func (d *TableDecl) DeclName() string      { return d.Name }

// ParserState is one state of a parser.
type ParserState struct {
	Pos         Pos
	Annotations Annotations
	Name        string
	Stmts       []Stmt
	Transition  *Transition // nil means reject (P4_16 §13.5: a missing transition goes to reject)
}

// Transition is `transition NAME;` or `transition select(...) {...}`.
type Transition struct {
	Pos    Pos
	Next   *Ident      // direct transition
	Select *SelectExpr // or a select
}

// SelectCase is `keyset : state;`.
type SelectCase struct {
	Pos    Pos
	Keyset Expr // a ListExpr for multi-key selects, DefaultExpr for default/_
	State  *Ident
}

// SelectExpr is `select(keys) { cases }`.
type SelectExpr struct {
	Pos   Pos
	Keys  []Expr
	Cases []*SelectCase
}

// ---- statements ----

// Stmt is a statement.
type Stmt interface {
	Node
	stmtNode()
}

// AssignStmt is `lhs = rhs;` (Op is Assign) or a compound assignment.
type AssignStmt struct {
	Pos Pos
	LHS Expr
	Op  scanner.Kind
	RHS Expr
}

// CallStmt is a method or function call used as a statement.
type CallStmt struct {
	Pos  Pos
	Call *CallExpr
}

// IfStmt is if/else.
type IfStmt struct {
	Pos  Pos
	Cond Expr
	Then Stmt
	Else Stmt
}

// BlockStmt is `{ ... }`.
type BlockStmt struct {
	Pos         Pos
	Annotations Annotations
	Stmts       []Stmt
	End         Pos
}

// ExitStmt is `exit;`.
type ExitStmt struct{ Pos Pos }

// ReturnStmt is `return [value];`.
type ReturnStmt struct {
	Pos   Pos
	Value Expr
}

// BreakStmt is `break;` inside a for loop.
type BreakStmt struct{ Pos Pos }

// ContinueStmt is `continue;` inside a for loop.
type ContinueStmt struct{ Pos Pos }

// EmptyStmt is `;`.
type EmptyStmt struct{ Pos Pos }

// DeclStmt is a declaration inside a block (variable, constant, instance).
type DeclStmt struct {
	Decl Decl
}

// SwitchCase is one case of a switch. Labels empty with Default set is the
// default label; Body nil means fall through to the next case.
type SwitchCase struct {
	Pos     Pos
	Labels  []Expr
	Default bool
	Body    *BlockStmt
}

// SwitchStmt is `switch (expr) { ... }`.
type SwitchStmt struct {
	Pos   Pos
	Expr  Expr
	Cases []*SwitchCase
}

// ForStmt is the C-style for loop of P4_16 1.2.4.
type ForStmt struct {
	Pos    Pos
	Init   []Stmt
	Cond   Expr
	Update []Stmt
	Body   Stmt
}

// ForInStmt is `for (T x in range) body`.
type ForInStmt struct {
	Pos   Pos
	Decl  *VarDecl // the loop variable (Type may be nil when it names an existing variable)
	Var   *Ident
	Range Expr
	Body  Stmt
}

func (s *AssignStmt) Position() Pos   { return s.Pos }
func (s *CallStmt) Position() Pos     { return s.Pos }
func (s *IfStmt) Position() Pos       { return s.Pos }
func (s *BlockStmt) Position() Pos    { return s.Pos }
func (s *ExitStmt) Position() Pos     { return s.Pos }
func (s *ReturnStmt) Position() Pos   { return s.Pos }
func (s *BreakStmt) Position() Pos    { return s.Pos }
func (s *ContinueStmt) Position() Pos { return s.Pos }
func (s *EmptyStmt) Position() Pos    { return s.Pos }
func (s *DeclStmt) Position() Pos     { return s.Decl.Position() }
func (s *SwitchStmt) Position() Pos   { return s.Pos }
func (s *ForStmt) Position() Pos      { return s.Pos }
func (s *ForInStmt) Position() Pos    { return s.Pos }
func (*AssignStmt) stmtNode()         {}
func (*CallStmt) stmtNode()           {}
func (*IfStmt) stmtNode()             {}
func (*BlockStmt) stmtNode()          {}
func (*ExitStmt) stmtNode()           {}
func (*ReturnStmt) stmtNode()         {}
func (*BreakStmt) stmtNode()          {}
func (*ContinueStmt) stmtNode()       {}
func (*EmptyStmt) stmtNode()          {}
func (*DeclStmt) stmtNode()           {}
func (*SwitchStmt) stmtNode()         {}
func (*ForStmt) stmtNode()            {}
func (*ForInStmt) stmtNode()          {}

// ---- expressions ----

// Expr is an expression.
type Expr interface {
	Node
	exprNode()
}

// Ident is a name; Global is set for `.name`.
type Ident struct {
	Pos    Pos
	Name   string
	Global bool
}

// IntLit is an integer literal.
type IntLit struct {
	Pos    Pos
	Value  *big.Int
	Width  int // 0: arbitrary-precision int, unless Sized (0w0: bit<0>)
	Signed bool
	Sized  bool
	Text   string
}

// BoolLit is true or false.
type BoolLit struct {
	Pos   Pos
	Value bool
}

// StringLit is a string literal.
type StringLit struct {
	Pos   Pos
	Value string
}

// MemberExpr is X.Name.
type MemberExpr struct {
	Pos  Pos // position of the member name
	X    Expr
	Name string
}

// IndexExpr is X[Index].
type IndexExpr struct {
	Pos   Pos
	X     Expr
	Index Expr
}

// SliceExpr is X[Hi:Lo].
type SliceExpr struct {
	Pos Pos
	X   Expr
	Hi  Expr
	Lo  Expr
}

// Arg is a call argument, optionally named.
type Arg struct {
	Pos   Pos
	Name  string
	Value Expr // DontCareExpr for `_`
}

// CallExpr is Fun<TypeArgs>(Args).
type CallExpr struct {
	Pos      Pos
	Fun      Expr
	TypeArgs []Type
	Args     []*Arg
}

// UnaryExpr is Op X for !, ~, -, +.
type UnaryExpr struct {
	Pos Pos
	Op  scanner.Kind
	X   Expr
}

// BinaryExpr is X Op Y. Shr is represented with Op == ShrOp.
type BinaryExpr struct {
	Pos Pos
	Op  scanner.Kind
	X   Expr
	Y   Expr
}

// ShrOp stands for `>>`, which the scanner delivers as two `>` tokens.
const ShrOp = scanner.Kind(-2)

// TernaryExpr is Cond ? Then : Else.
type TernaryExpr struct {
	Pos  Pos
	Cond Expr
	Then Expr
	Else Expr
}

// CastExpr is (Type) X.
type CastExpr struct {
	Pos  Pos
	Type Type
	X    Expr
}

// ListExpr is { a, b, ... } (a tuple or list literal, or a multi-key keyset).
type ListExpr struct {
	Pos   Pos
	Elems []Expr
}

// NamedField is one `name = value` of a struct initializer.
type NamedField struct {
	Pos   Pos
	Name  string
	Value Expr
}

// StructExpr is { f = v, ... } optionally typed: (T){...} is parsed as a cast.
type StructExpr struct {
	Pos    Pos
	Type   Type // nil when written without a type
	Fields []*NamedField
	// Rest is set when the initializer ends in `...`: the fields it does
	// not name get their default values (P4_16 §8.13, §7.3).
	Rest bool
}

// InvalidExpr is `{#}`, an invalid header or header union (P4_16 §8.26).
type InvalidExpr struct{ Pos Pos }

// MaskExpr is Value &&& Mask in a keyset.
type MaskExpr struct {
	Pos   Pos
	Value Expr
	Mask  Expr
}

// RangeExpr is Lo .. Hi in a keyset.
type RangeExpr struct {
	Pos Pos
	Lo  Expr
	Hi  Expr
}

// DefaultExpr is `default` in a keyset.
type DefaultExpr struct{ Pos Pos }

// DontCareExpr is `_`.
type DontCareExpr struct{ Pos Pos }

// TypeExpr is a type used where an expression is expected, such as the
// `error` in `error.NoError` or a type in `T.minSizeInBits()`.
type TypeExpr struct {
	Pos  Pos
	Type Type
}

// ThisExpr is `this` (inside abstract method implementations).
type ThisExpr struct{ Pos Pos }

func (e *Ident) Position() Pos        { return e.Pos }
func (e *IntLit) Position() Pos       { return e.Pos }
func (e *BoolLit) Position() Pos      { return e.Pos }
func (e *StringLit) Position() Pos    { return e.Pos }
func (e *MemberExpr) Position() Pos   { return e.Pos }
func (e *IndexExpr) Position() Pos    { return e.Pos }
func (e *SliceExpr) Position() Pos    { return e.Pos }
func (e *CallExpr) Position() Pos     { return e.Pos }
func (e *UnaryExpr) Position() Pos    { return e.Pos }
func (e *BinaryExpr) Position() Pos   { return e.Pos }
func (e *TernaryExpr) Position() Pos  { return e.Pos }
func (e *CastExpr) Position() Pos     { return e.Pos }
func (e *ListExpr) Position() Pos     { return e.Pos }
func (e *StructExpr) Position() Pos   { return e.Pos }
func (e *MaskExpr) Position() Pos     { return e.Pos }
func (e *RangeExpr) Position() Pos    { return e.Pos }
func (e *DefaultExpr) Position() Pos  { return e.Pos }
func (e *DontCareExpr) Position() Pos { return e.Pos }
func (e *TypeExpr) Position() Pos     { return e.Pos }
func (e *ThisExpr) Position() Pos     { return e.Pos }
func (e *InvalidExpr) Position() Pos  { return e.Pos }
func (*Ident) exprNode()              {}
func (*IntLit) exprNode()             {}
func (*BoolLit) exprNode()            {}
func (*StringLit) exprNode()          {}
func (*MemberExpr) exprNode()         {}
func (*IndexExpr) exprNode()          {}
func (*SliceExpr) exprNode()          {}
func (*CallExpr) exprNode()           {}
func (*UnaryExpr) exprNode()          {}
func (*BinaryExpr) exprNode()         {}
func (*TernaryExpr) exprNode()        {}
func (*CastExpr) exprNode()           {}
func (*ListExpr) exprNode()           {}
func (*StructExpr) exprNode()         {}
func (*MaskExpr) exprNode()           {}
func (*RangeExpr) exprNode()          {}
func (*DefaultExpr) exprNode()        {}
func (*DontCareExpr) exprNode()       {}
func (*TypeExpr) exprNode()           {}
func (*ThisExpr) exprNode()           {}
func (*InvalidExpr) exprNode()        {}

// Position implements Node for parameters, type parameters and members.
func (p *Param) Position() Pos { return p.Pos }

// Position implements Node.
func (p *TypeParam) Position() Pos { return p.Pos }

// Position implements Node.
func (m *EnumMember) Position() Pos { return m.Pos }

// Position implements Node.
func (f *Field) Position() Pos { return f.Pos }

// Position implements Node.
func (s *ParserState) Position() Pos { return s.Pos }

// Position implements Node.
func (a *ActionRef) Position() Pos { return a.Pos }

// Position implements Node.
func (e *Entry) Position() Pos { return e.Pos }

// Position implements Node.
func (k *KeyElement) Position() Pos { return k.Pos }
