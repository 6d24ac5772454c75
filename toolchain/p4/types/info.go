package types

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// Value is a compile-time value: *big.Int (an integer of the expression's
// type), bool, string, *EnumValue, *ErrorValue, *TupleValue, *StructValue
// or *MatchKindValue.
type Value any

// EnumValue is a member of an enum.
type EnumValue struct {
	Enum   *Enum
	Member string
	// Value is the numeric value of a serializable enum member.
	Value *big.Int
}

// ErrorValue is a member of error.
type ErrorValue struct{ Name string }

// MatchKindValue is a member of match_kind.
type MatchKindValue struct{ Name string }

// TupleValue is a list or tuple of values.
type TupleValue struct{ Elems []Value }

// StructValue is a struct or header value built from constants.
type StructValue struct {
	Type   *Struct
	Fields map[string]Value
	Valid  bool
}

// CallKind says what a call invokes.
type CallKind int

// Call kinds.
const (
	CallAction CallKind = iota
	CallFunction
	CallExternFunction
	CallExternMethod
	CallTableApply
	CallBlockApply
	CallBuiltin
	CallConstructor
)

// Call describes a resolved call expression.
type Call struct {
	Kind     CallKind
	Action   *ast.ActionDecl
	Function *ast.FunctionDecl
	// Proto is the signature of an extern function or method, or of a
	// constructor.
	Proto *ast.FunctionProto
	Table *ast.TableDecl
	// Block is the parser or control being applied (CallBlockApply) or
	// constructed (CallConstructor of a parser/control type).
	Block *Block
	// Extern is the receiver's type for extern methods, or the type being
	// constructed.
	Extern *Extern
	// Package is the package being constructed.
	Package *Package
	// Builtin names a built-in method: isValid, setValid, setInvalid,
	// push_front, pop_front, minSizeInBits, minSizeInBytes, maxSizeInBits,
	// maxSizeInBytes.
	Builtin string
	// Recv is the object a method is called on.
	Recv ast.Expr
	// Params and ParamTypes describe the callee's parameters; Args holds
	// the argument for each parameter (nil when an optional parameter is
	// omitted), in parameter order.
	Params     []*ast.Param
	ParamTypes []Type
	Args       []ast.Expr
	// TypeArgs binds the callee's type parameters.
	TypeArgs map[*ast.TypeParam]Type
	Result   Type
}

// Info records what the checker learned about a program.
type Info struct {
	Program *ast.Program
	// Types is the type of each expression, after implicit conversions.
	Types map[ast.Expr]Type
	// Values holds the value of each expression known at compile time.
	Values map[ast.Expr]Value
	// Uses maps each identifier to the declaration it names. Declarations
	// are the AST nodes themselves (*ast.VarDecl, *ast.Param, ...); error
	// and enum members are *ast.EnumMember.
	Uses map[*ast.Ident]ast.Node
	// Calls resolves every call expression.
	Calls map[*ast.CallExpr]*Call
	// InstanceCalls binds the constructor arguments of each instance of a
	// parser, control or extern to its parameters (named arguments by
	// name, left out ones to their default values, nil for a left-out
	// @optional one).
	InstanceCalls map[*ast.InstanceDecl]*Call
	// DeclTypes gives the type of declared objects: variables, constants,
	// parameters, instances, tables, value sets.
	DeclTypes map[ast.Node]Type
	// ConstValues gives the value of each constant declaration and of
	// each serializable enum member.
	ConstValues map[ast.Node]Value
	// TypeExprs gives the type each written type denotes.
	TypeExprs map[ast.Type]Type
	// Errors lists the members of error in declaration order (their
	// numbering in BMv2 follows this order).
	Errors []string
	// Enums lists every enum type declared.
	Enums []*Enum
	// Structs lists every struct-like type declared, in order.
	Structs []*Struct
	// Main is the top-level package instance named "main".
	Main *ast.InstanceDecl
	// StateOwner maps each parser state to its parser.
	StateOwner map[*ast.ParserState]*ast.ParserDecl
	// AcceptState and RejectState are the built-in parser states.
	AcceptState, RejectState *ast.ParserState
	// ActionRefs resolves action references in tables (actions lists,
	// entries, default actions). Args are aligned with the action's
	// parameters; nil where the table or control plane supplies the value.
	ActionRefs map[*ast.ActionRef]*Call
	// DefaultActions holds the default_action of each table that has one.
	DefaultActions map[*ast.TableDecl]*ast.ActionRef
	// Warnings are diagnostics that do not stop compilation.
	// TargetErrors are what BMv2 and v1model refuse in a program the
	// language accepts (Check's own errors are the language's). The
	// caller reports them once the program has passed its other checks,
	// as p4c's back end only sees what its front and mid ends passed: the
	// first error is then the one p4c names.
	TargetErrors scanner.ErrorList
	Warnings     scanner.ErrorList
	// ParentOf maps local declarations (actions, tables, instances,
	// variables) to the parser or control declaring them (nil for
	// top-level declarations).
	ParentOf map[ast.Node]ast.Decl
}

// TypeOf returns the recorded type of an expression, or nil.
func (in *Info) TypeOf(e ast.Expr) Type { return in.Types[e] }

// ValueOf returns the compile-time value of an expression, if it has one.
func (in *Info) ValueOf(e ast.Expr) (Value, bool) {
	v, ok := in.Values[e]
	return v, ok
}
