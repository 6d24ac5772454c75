// Package ir is the small target-neutral program representation between
// the front end and the emitters: header layouts and instances, a parse
// graph, straight-line actions (with structured if/loop inside), and
// control flow as a graph of table applications and conditions. Every
// name, width and constant is resolved; nothing refers back to the syntax
// tree, so the BMv2 JSON and P4Info emitters read only this.
package ir

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// Pos is a source position (for diagnostics and source_info).
type Pos = scanner.Pos

// Source locates an object in the P4 program.
type Source struct {
	Pos      Pos
	Fragment string
}

// Program is a whole compiled v1model program.
type Program struct {
	SourceFile string

	HeaderTypes []*HeaderType
	Headers     []*Header
	Stacks      []*Stack
	UnionTypes  []*UnionType
	Unions      []*Union
	UnionStacks []*UnionStack

	Errors []ErrorCode
	Enums  []*Enum

	Parsers   []*Parser
	ValueSets []*ValueSet
	Deparsers []*Deparser

	Counters  []*Counter
	Meters    []*Meter
	Registers []*Register

	Calculations []*Calculation
	FieldLists   []*FieldList
	LearnLists   []*LearnList

	Actions   []*Action
	Pipelines []*Pipeline
	Checksums []*Checksum

	FieldAliases []FieldAlias

	// ActionProfiles are the action profiles and selectors of all
	// pipelines (also listed in their pipelines).
	ActionProfiles []*ActionProfile

	// Control-plane only: what P4Info describes beyond the above.
	ControllerHeaders []*ControllerHeader
	Digests           []*Digest
	// ControlActions lists the actions the control plane sees: every P4
	// action the program uses (by a table or a direct call), once, by its
	// fully qualified name.
	ControlActions []*Action
	// TypeInfo collects the named types P4Info describes.
	TypeInfo *TypeInfo
	// HasTypeInfo reports that p4c would emit a (possibly empty)
	// type_info message: it does for programs with tables, action
	// parameters or calls to generic externs.
	HasTypeInfo bool
}

// ---- data layout ----

// HeaderField is one field of a header type.
type HeaderField struct {
	Name   string
	Width  int
	Signed bool
	Varbit bool // width is the maximum
}

// HeaderType is the layout of a header or a metadata block.
type HeaderType struct {
	Name   string
	Fields []HeaderField
}

// MaxLengthBytes is the largest size of a header of this type.
func (t *HeaderType) MaxLengthBytes() int {
	w := 0
	for _, f := range t.Fields {
		w += f.Width
	}
	return (w + 7) / 8
}

// HasVarbit reports whether the type has a varbit field.
func (t *HeaderType) HasVarbit() bool {
	for _, f := range t.Fields {
		if f.Varbit {
			return true
		}
	}
	return false
}

// FieldIndex returns the position of a field, or -1.
func (t *HeaderType) FieldIndex(name string) int {
	for i, f := range t.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Header is a header or metadata instance.
type Header struct {
	Name     string
	Type     *HeaderType
	Metadata bool
}

// Stack is a header stack: an array of header instances.
type Stack struct {
	Name    string
	Type    *HeaderType
	Headers []*Header
}

// UnionType is a header_union type: named member headers.
type UnionType struct {
	Name    string
	Members []UnionMember
}

// UnionMember is one header of a union type.
type UnionMember struct {
	Name string
	Type *HeaderType
}

// Union is a header_union instance.
type Union struct {
	Name    string
	Type    *UnionType
	Headers []*Header // one per member, in member order
}

// UnionStack is a stack of header unions.
type UnionStack struct {
	Name   string
	Type   *UnionType
	Unions []*Union
}

// ErrorCode is one member of error with its numeric value.
type ErrorCode struct {
	Name  string
	Value int
}

// Enum is an enum and its member values.
type Enum struct {
	Name    string
	Members []EnumMember
}

// EnumMember is a member and its value.
type EnumMember struct {
	Name  string
	Value *big.Int
}

// FieldAlias maps a target-defined metadata name to a field.
type FieldAlias struct {
	Alias  string
	Header string
	Field  string
}

// ---- expressions ----

// Expr is a side-effect-free expression. Its Type says whether it is a
// boolean or a bit string of some width.
type Expr interface {
	Type() Type
}

// Type is the type of an IR expression.
type Type struct {
	Bool   bool
	Width  int
	Signed bool
	// Varbit marks a varbit field (Width is its maximum).
	Varbit bool
}

// BoolType is the type of conditions.
var BoolType = Type{Bool: true}

// Bits returns a bit-string type.
func Bits(w int, signed bool) Type { return Type{Width: w, Signed: signed} }

// FieldRef reads or writes one field of a header instance.
type FieldRef struct {
	Header string
	Field  string
	T      Type
}

// Const is a constant bit string (T.Width bits; Value is normalized into
// the type's range) or an unsized integer (Width 0).
type Const struct {
	Value *big.Int
	T     Type
}

// BoolConst is true or false.
type BoolConst struct{ Value bool }

// ActionParam is the value of an action parameter supplied by the control
// plane (BMv2 "runtime_data").
type ActionParam struct {
	Index int
	T     Type
}

// Valid is the validity bit of a header or union instance.
type Valid struct {
	Header string
	Union  bool
}

// Unary operators.
const (
	OpNot   = "not" // boolean negation
	OpCompl = "~"   // bitwise complement
	OpNeg   = "neg" // arithmetic negation
)

// Unary applies a unary operator.
type Unary struct {
	Op string
	X  Expr
	T  Type
}

// Binary operators use BMv2's spelling: + - * / % << >> & | ^ == != < <= >
// >= and or, plus "++"-free forms (concatenation is lowered to shifts).
type Binary struct {
	Op string
	X  Expr
	Y  Expr
	T  Type
}

// Mux is cond ? then : else.
type Mux struct {
	Cond Expr
	Then Expr
	Else Expr
	T    Type
}

// Truncate keeps the low T.Width bits of X, as unsigned (P4's wrap-around
// for bit<W> arithmetic and narrowing casts).
type Truncate struct {
	X Expr
	T Type
}

// SignWrap reinterprets the low T.Width bits of X as a two's complement
// number (int<W> arithmetic and casts to int<W>).
type SignWrap struct {
	X Expr
	T Type
}

// Saturate clamps X into the range of T (saturating arithmetic).
type Saturate struct {
	X Expr
	T Type
}

// BoolToBit turns a condition into bit<1>; BitToBool the reverse.
type BoolToBit struct{ X Expr }

// BitToBool is X != 0 for a bit<1> value.
type BitToBool struct{ X Expr }

// StackField reads a field of a header stack element chosen at run time.
type StackField struct {
	Stack string
	Index Expr
	Field string
	// FieldIndex is the position of the field in the element type.
	FieldIndex int
	T          Type
}

// StackElemValid is the validity of a stack element chosen at run time.
type StackElemValid struct {
	Stack string
	Index Expr
}

// LastField reads a field of the last extracted element of a stack
// (stack.last.f in a parser).
type LastField struct {
	Stack string
	Field string
	T     Type
}

// LastIndex is stack.lastIndex.
type LastIndex struct{ Stack string }

// Lookahead reads bits ahead of the parser's cursor without consuming
// them: Width bits starting Offset bits ahead.
type Lookahead struct {
	Offset int
	Width  int
}

func (e *FieldRef) Type() Type     { return e.T }
func (e *Const) Type() Type        { return e.T }
func (*BoolConst) Type() Type      { return BoolType }
func (e *ActionParam) Type() Type  { return e.T }
func (*Valid) Type() Type          { return BoolType }
func (e *Unary) Type() Type        { return e.T }
func (e *Binary) Type() Type       { return e.T }
func (e *Mux) Type() Type          { return e.T }
func (e *Truncate) Type() Type     { return e.T }
func (e *SignWrap) Type() Type     { return e.T }
func (e *Saturate) Type() Type     { return e.T }
func (*BoolToBit) Type() Type      { return Bits(1, false) }
func (*BitToBool) Type() Type      { return BoolType }
func (e *StackField) Type() Type   { return e.T }
func (*StackElemValid) Type() Type { return BoolType }
func (e *LastField) Type() Type    { return e.T }
func (*LastIndex) Type() Type      { return Bits(32, false) }
func (e *Lookahead) Type() Type    { return Bits(e.Width, false) }

// ---- statements (in actions and parser states) ----

// Stmt is a statement of an action body or a parser state.
type Stmt interface{ stmt() }

// Assign stores Src into the field Dst (a *FieldRef or *StackField).
type Assign struct {
	Dst Expr
	Src Expr
	Loc Source
}

// HeaderRef names a header instance, or a stack element chosen at run time
// (Stack set, Index the element).
type HeaderRef struct {
	Header string
	Stack  string
	Index  Expr
}

// AssignHeader copies a whole header, validity included.
type AssignHeader struct {
	Dst, Src HeaderRef
	Loc      Source
}

// AssignUnion copies a whole header union.
type AssignUnion struct {
	Dst, Src string
	Loc      Source
}

// AssignStack copies a whole header stack.
type AssignStack struct {
	Dst, Src string
	Loc      Source
}

// SetValid marks a header valid (Valid) or invalid.
type SetValid struct {
	Header HeaderRef
	Valid  bool
	Loc    Source
}

// PushFront / PopFront shift a header stack.
type PushFront struct {
	Stack string
	Count int
	Loc   Source
}

// PopFront removes Count elements from the front of a stack.
type PopFront struct {
	Stack string
	Count int
	Loc   Source
}

// ArgKind classifies extern call arguments.
type ArgKind int

// Kinds of extern arguments.
const (
	ArgExpr        ArgKind = iota // a value (Expr)
	ArgHeader                     // a header instance (Name)
	ArgCounter                    // a counter array (Name)
	ArgMeter                      // a meter array
	ArgRegister                   // a register array
	ArgCalculation                // a hash calculation
	ArgFieldList                  // a field list (Int: its id)
	ArgLearnList                  // a learn list (Int: its id)
	ArgString                     // a string (log messages)
	ArgExprList                   // a list of values (log_msg arguments)
	ArgStack                      // a header stack (Name)
)

// Arg is an argument of an extern primitive.
type Arg struct {
	Kind ArgKind
	Expr Expr
	Name string
	Int  int
	List []Expr
}

// Primitive invokes a target primitive by its BMv2 name: mark_to_drop,
// count, execute_meter, register_read, register_write,
// modify_field_with_hash_based_offset, modify_field_rng_uniform,
// clone_ingress_pkt_to_egress, clone_egress_pkt_to_egress, resubmit,
// recirculate, generate_digest, truncate, log_msg, assert, assume.
type Primitive struct {
	Name string
	Args []Arg
	Loc  Source
}

// If is a conditional inside an action or function body.
type If struct {
	Cond Expr
	Then []Stmt
	Else []Stmt
	Loc  Source
}

// Loop runs Body while Cond holds, running Update after each iteration
// (and on continue).
type Loop struct {
	Cond   Expr
	Body   []Stmt
	Update []Stmt
}

// Break leaves the innermost Loop; Continue starts its next iteration.
type Break struct{}

// Continue jumps to the innermost Loop's update.
type Continue struct{}

// Block is a labelled group; Leave with the same label jumps past it.
type Block struct {
	Label int
	Body  []Stmt
}

// Leave jumps to the end of the enclosing Block with the same label.
type Leave struct{ Label int }

// Exit ends the current pipeline (P4 `exit`).
type Exit struct{ Loc Source }

// Extract, parser only: extract the next header from the packet; Stack
// set means the stack's next element. VarbitBits, when set, is the size in
// bits of the header's varbit field.
type Extract struct {
	Header string
	Stack  string
	// Member is set for the next element of a header union stack: the
	// union member to extract.
	Member     string
	VarbitBits Expr
	Loc        Source
}

// Advance, parser only: skip Bits bits.
type Advance struct {
	Bits Expr
	Loc  Source
}

// Verify, parser only: reject with Error unless Cond holds.
type Verify struct {
	Cond  Expr
	Error int
	// ErrorExpr is used when the error is not a constant.
	ErrorExpr Expr
	Loc       Source
}

func (*Assign) stmt()       {}
func (*AssignHeader) stmt() {}
func (*AssignUnion) stmt()  {}
func (*AssignStack) stmt()  {}
func (*SetValid) stmt()     {}
func (*PushFront) stmt()    {}
func (*PopFront) stmt()     {}
func (*Primitive) stmt()    {}
func (*If) stmt()           {}
func (*Loop) stmt()         {}
func (*Break) stmt()        {}
func (*Continue) stmt()     {}
func (*Block) stmt()        {}
func (*Leave) stmt()        {}
func (*Exit) stmt()         {}
func (*Extract) stmt()      {}
func (*Advance) stmt()      {}
func (*Verify) stmt()       {}

// ---- parsers ----

// Parser is a parse graph.
type Parser struct {
	Name   string
	Init   string
	States []*ParseState
}

// KeysetElem is one component of a select case: a value with a mask
// (Mask nil means all bits), a range, or a wildcard.
type KeysetElem struct {
	Value    *big.Int
	Mask     *big.Int
	Hi       *big.Int // set for a range Value..Hi
	Wildcard bool
	Width    int
}

// Transition is one select case; Default matches anything and ValueSet
// names a value set to match against.
type Transition struct {
	Keys     []KeysetElem
	Default  bool
	ValueSet string
	Next     string // "" means accept; RejectState means reject
}

// RejectState is the name transitions use for the reject state.
const RejectState = "\x00reject"

// ParseState is one state: operations, then a select on Key.
type ParseState struct {
	Name        string
	Ops         []Stmt
	Key         []Expr
	Transitions []Transition
	Loc         Source
}

// ValueSet is a parser value set filled by the control plane.
type ValueSet struct {
	Name string // fully qualified
	// Widths of the value's components (the select keys it matches).
	Widths      []int
	Size        int
	Annotations []string
	ExplicitID  uint32 // P4Info id (0: not yet assigned)
	Loc         Source
	// MatchFields describes the value set's fields for P4Info.
	MatchFields []MatchField
}

// Deparser emits valid headers in order.
type Deparser struct {
	Name  string
	Order []string
	Loc   Source
}

// ---- controls ----

// ActionParamDecl describes one control-plane parameter of an action.
type ActionParamDecl struct {
	Name string
	// Width is the control plane's (P4Runtime's) width: a translated
	// `type`'s SDN width (0 when translated to a string).
	Width int
	// DeviceWidth is the data plane's width where it differs from Width
	// (a translated type's underlying bit<W>), 0 otherwise: what the BMv2
	// JSON's runtime_data says, as the switch stores the value.
	DeviceWidth int
	Annotations []string
	// TypeName is the P4 type name when it is a `type` (for P4Info).
	TypeName string
	// ExplicitID is the parameter's @id, if any.
	ExplicitID uint32
}

// Action is an action: parameters from the control plane and a body.
type Action struct {
	Name   string // fully qualified control-plane name
	Params []ActionParamDecl
	Body   []Stmt
	// Hidden actions are synthesized by the compiler (straight-line code
	// of an apply block) and are not part of the control plane. Among
	// Program.ControlActions, Hidden marks an action written @hidden: it
	// has a P4Runtime id and takes part in aliases, but P4Info does not
	// describe it (p4c's rule).
	Hidden      bool
	Annotations []string
	// ID is the P4Info id.
	ExplicitID uint32
	Loc        Source
}

// Node is a step of a pipeline: *Table or *Conditional; nil ends it.
type Node interface{ nodeName() string }

// MatchKind of a key field.
type MatchKind string

// Match kinds.
const (
	MatchExact    MatchKind = "exact"
	MatchTernary  MatchKind = "ternary"
	MatchLPM      MatchKind = "lpm"
	MatchRange    MatchKind = "range"
	MatchOptional MatchKind = "optional"
	MatchSelector MatchKind = "selector"
)

// KeyField is one component of a table key.
type KeyField struct {
	Match MatchKind
	// Name is the control-plane name (P4Info match field name).
	Name string
	// Expr is the matched value: a field, a validity bit, or (when Mask
	// is set) a field under a mask.
	Expr  Expr
	Mask  *big.Int
	Width int
	// Annotations, @id, type name and width as P4Info describes them.
	Annotations []string
	ExplicitID  uint32
	TypeName    string
	P4RTWidth   int
}

// MatchField describes a value-set field for P4Info.
type MatchField struct {
	ExplicitID  uint32
	Name        string
	Width       int
	Match       MatchKind
	Annotations []string
}

// ActionRef is an action a table can run, with P4Info scope.
type ActionRef struct {
	Action      *Action
	DefaultOnly bool
	TableOnly   bool
	Annotations []string
}

// EntryKey is one key component of a constant entry.
type EntryKey struct {
	Match     MatchKind
	Value     *big.Int
	Mask      *big.Int // ternary
	PrefixLen int      // lpm
	Hi        *big.Int // range: Value..Hi
	Width     int
	// Wildcard is set for `_`/default in an entry (matches anything).
	Wildcard bool
}

// Entry is a constant table entry.
type Entry struct {
	Keys     []EntryKey
	Action   *Action
	Args     []*big.Int
	Priority int
	// PrioritySet reports an explicit priority.
	PrioritySet bool
	Loc         Source
}

// DefaultEntry is a table's default action.
type DefaultEntry struct {
	Action *Action
	Args   []*big.Int
	// Const: the control plane may not change it.
	Const bool
}

// Table is a match-action table.
type Table struct {
	Name         string // fully qualified control-plane name
	Key          []KeyField
	Actions      []ActionRef
	Size         int
	SizeSet      bool
	Default      *DefaultEntry
	Entries      []*Entry
	ConstEntries bool
	// Hidden tables run synthesized straight-line code, or are written
	// @hidden (then UserHidden is set too): neither is described in
	// P4Info, but a @hidden table of the program has a P4Runtime id and
	// takes part in aliases, as in p4c, and so do its direct resources.
	Hidden     bool
	UserHidden bool
	// DirectCounter and DirectMeter name direct resources attached to
	// the table.
	DirectCounter *Counter
	DirectMeter   *Meter
	// Implementation is an action profile or selector.
	Implementation *ActionProfile
	SupportTimeout bool
	Annotations    []string
	ExplicitID     uint32
	Loc            Source

	// Next says where control goes after the table: by action run (when
	// the table's result is switched on), by hit/miss, or always to
	// BaseNext.
	NextByAction map[*Action]Node
	HitNext      Node
	MissNext     Node
	UseHitMiss   bool
	BaseNext     Node
}

func (t *Table) nodeName() string { return t.Name }

// Conditional branches on a condition.
type Conditional struct {
	Name  string
	Cond  Expr
	True  Node
	False Node
	Loc   Source
}

func (c *Conditional) nodeName() string { return c.Name }

// ActionProfile is an action profile or (with Selector) action selector.
type ActionProfile struct {
	Name        string
	Size        int
	Selector    *Selector
	ExplicitID  uint32
	Tables      []*Table
	Annotations []string
	// What P4Runtime's ActionProfile says of a selector's groups, from
	// the instance's annotations (not kept among Annotations):
	// @max_group_size(N), and @selector_size_semantics("sum_of_members"
	// or "sum_of_weights") with @max_member_weight(N). SizeSemantics is
	// "" when P4Info says nothing of it.
	MaxGroupSize    int
	SizeSemantics   string
	MaxMemberWeight int
}

// Selector describes how an action selector picks a member.
type Selector struct {
	Algorithm string
	Input     []Expr
	// OutputWidth of the hash (v1model action_selector's outputWidth).
	OutputWidth int
}

// Pipeline is a control block: a graph of tables and conditionals.
type Pipeline struct {
	Name         string
	Init         Node
	Tables       []*Table
	Conditionals []*Conditional
	Profiles     []*ActionProfile
	Loc          Source
}

// ---- stateful externs ----

// CounterKind says what a counter counts.
type CounterKind string

// Counter kinds.
const (
	CountPackets         CounterKind = "packets"
	CountBytes           CounterKind = "bytes"
	CountPacketsAndBytes CounterKind = "packets_and_bytes"
)

// Counter is a counter array, or a direct counter (Direct, bound to Table).
type Counter struct {
	Name        string
	Size        int
	Kind        CounterKind
	Direct      bool
	Table       string
	Annotations []string
	ExplicitID  uint32
	Loc         Source
}

// Meter is a meter array or a direct meter.
type Meter struct {
	Name   string
	Size   int
	Bytes  bool // MeterType.bytes (else packets)
	Direct bool
	Table  string
	// Result is where a direct meter writes its colour.
	Result      *FieldRef
	RateCount   int
	Annotations []string
	ExplicitID  uint32
	Loc         Source
}

// Register is a register array.
type Register struct {
	Name        string
	Size        int
	Width       int
	Annotations []string
	ExplicitID  uint32
	// TypeName is the element's P4 type name for P4Info type_info.
	Loc Source
}

// ---- checksums, hashes, field lists ----

// CalcInput is one input of a calculation: a value, or the payload.
type CalcInput struct {
	Expr    Expr
	Payload bool
}

// Calculation is a hash or checksum over a list of values.
type Calculation struct {
	Name      string
	Algorithm string
	Inputs    []CalcInput
	Loc       Source
}

// Checksum verifies or updates a field with a calculation.
type Checksum struct {
	Name        string
	Target      *FieldRef
	Calculation *Calculation
	Verify      bool
	Update      bool
	Cond        Expr
	Loc         Source
}

// FieldList is a list of fields (metadata preserved by clone, resubmit,
// recirculate).
type FieldList struct {
	ID     int
	Name   string
	Fields []*FieldRef
}

// LearnList is the data of a digest.
type LearnList struct {
	ID     int
	Name   string
	Fields []Expr
}

// ---- control-plane descriptions ----

// ControllerHeader is a header type with @controller_header, for packet
// I/O metadata in P4Info.
type ControllerHeader struct {
	Name        string // the annotation's argument: packet_in / packet_out
	TypeName    string // the header type's name (what its id is hashed from)
	Fields      []ControllerField
	Annotations []string
	ExplicitID  uint32
	// Hidden: written @hidden; a P4Runtime symbol, not described.
	Hidden bool
}

// ControllerField is one metadata field of a controller header.
type ControllerField struct {
	Name        string
	Width       int
	Annotations []string
	TypeName    string
	ExplicitID  uint32
	// Hidden: written @hidden; it takes a field id but is not described.
	Hidden bool
}

// Digest is a digest type sent to the control plane.
type Digest struct {
	Name       string
	ExplicitID uint32
	LearnID    int
	TypeSpec   *TypeSpec
}

// TypeSpec is a P4 data type description for P4Info.
type TypeSpec struct {
	// Kind: "bitstring", "bool", "struct", "header", "tuple",
	// "serializable_enum", "new_type", "error", "header_union".
	Kind   string
	Width  int
	Signed bool
	Varbit bool
	Name   string
	Elems  []*TypeSpec
}

// TypeInfo holds the named types P4Info describes.
type TypeInfo struct {
	Structs []*NamedType
	Headers []*NamedType
	Unions  []*NamedType
	Enums   []*SerializableEnum
	// PlainEnums are enums without an underlying type (members only).
	PlainEnums []*PlainEnum
	NewTypes   []*NewTypeInfo
	Errors     []string
	HasError   bool
}

// NamedType is a struct or header with its members for type_info.
type NamedType struct {
	Name    string
	Members []NamedMember
}

// NamedMember is a member of a NamedType.
type NamedMember struct {
	Name string
	Spec *TypeSpec
}

// SerializableEnum describes an enum with an underlying type.
type SerializableEnum struct {
	Name    string
	Width   int
	Members []EnumMember
}

// PlainEnum describes an enum without an underlying type.
type PlainEnum struct {
	Name    string
	Members []string
}

// NewTypeInfo describes a `type` declaration.
type NewTypeInfo struct {
	Name        string
	Spec        *TypeSpec
	Translation string // @p4runtime_translation URI
	SDNWidth    int
	SDNString   bool
}
