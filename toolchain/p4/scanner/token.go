// Package scanner turns preprocessed P4_16 source text into tokens.
//
// The scanner understands the line markers the preprocessor leaves behind
// (`# LINE "FILE"`), so every token carries the position in the original
// file it came from, not the position in the expanded text. Errors are
// collected, never panicked: a bad character becomes an Illegal token and an
// entry in the error list.
package scanner

import "fmt"

// Pos is a position in an original source file. Line and Col count from 1;
// the zero Pos means "unknown".
type Pos struct {
	File string
	Line int
	Col  int
}

// IsValid reports whether p names a real position.
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	if !p.IsValid() {
		if p.File != "" {
			return p.File
		}
		return "-"
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Kind classifies a token.
type Kind int

// Token kinds. Keywords are kinds of their own so that the parser can switch
// on them; identifiers that only have meaning in some places (key, size,
// default_action, ...) stay identifiers, as in the P4_16 grammar.
const (
	Illegal Kind = iota
	EOF
	Ident
	Int
	String

	// punctuation and operators
	LParen        // (
	RParen        // )
	LBrace        // {
	RBrace        // }
	LBracket      // [
	RBracket      // ]
	Semi          // ;
	Comma         // ,
	Dot           // .
	DotDot        // ..
	Ellipsis      // ...
	InvalidHeader // {#}, the invalid header or header union (P4_16 §8.26)
	Colon         // :
	Question      // ?
	At            // @
	Assign        // =
	Eq            // ==
	Ne            // !=
	Lt            // <
	Le            // <=
	Gt            // >
	Ge            // >=
	Shl           // <<
	Add           // +
	Sub           // -
	Mul           // *
	Div           // /
	Mod           // %
	SatAdd        // |+|
	SatSub        // |-|
	And           // &
	Or            // |
	Xor           // ^
	Not           // !
	Compl         // ~
	AndAnd        // &&
	OrOr          // ||
	Mask          // &&&
	Concat        // ++
	AddAssign
	SubAssign
	MulAssign
	DivAssign
	ModAssign
	ShlAssign
	ShrAssign
	AndAssign
	OrAssign
	XorAssign
	SatAddAssign
	SatSubAssign
	Underscore // _ (don't care)

	keywordStart
	Abstract
	Action
	Actions
	Apply
	Bit
	Bool
	Break
	Const
	Continue
	Control
	Default
	Else
	Entries
	Enum
	ErrorKw
	Exit
	Extern
	False
	For
	Header
	HeaderUnion
	If
	In
	Inout
	IntType
	Key
	List
	MatchKind
	Out
	Package
	Parser
	Priority
	Return
	Select
	State
	StringType
	Struct
	Switch
	Table
	This
	Transition
	True
	Tuple
	Type
	Typedef
	Varbit
	ValueSet
	Void
	keywordEnd
)

var kindNames = map[Kind]string{
	Illegal: "illegal token", EOF: "end of file", Ident: "identifier", Int: "integer", String: "string",
	LParen: "(", RParen: ")", LBrace: "{", RBrace: "}", LBracket: "[", RBracket: "]",
	Semi: ";", Comma: ",", Dot: ".", DotDot: "..", Ellipsis: "...", InvalidHeader: "{#}", Colon: ":", Question: "?", At: "@",
	Assign: "=", Eq: "==", Ne: "!=", Lt: "<", Le: "<=", Gt: ">", Ge: ">=", Shl: "<<",
	Add: "+", Sub: "-", Mul: "*", Div: "/", Mod: "%", SatAdd: "|+|", SatSub: "|-|",
	And: "&", Or: "|", Xor: "^", Not: "!", Compl: "~", AndAnd: "&&", OrOr: "||",
	Mask: "&&&", Concat: "++", AddAssign: "+=", SubAssign: "-=", MulAssign: "*=",
	DivAssign: "/=", ModAssign: "%=", ShlAssign: "<<=", ShrAssign: ">>=", AndAssign: "&=",
	OrAssign: "|=", XorAssign: "^=", SatAddAssign: "|+|=", SatSubAssign: "|-|=", Underscore: "_",
}

var keywords = map[string]Kind{
	"abstract": Abstract, "action": Action, "actions": Actions, "apply": Apply, "bit": Bit,
	"bool": Bool, "break": Break, "const": Const, "continue": Continue, "control": Control,
	"default": Default, "else": Else, "entries": Entries, "enum": Enum, "error": ErrorKw,
	"exit": Exit, "extern": Extern, "false": False, "for": For, "header": Header,
	"header_union": HeaderUnion, "if": If, "in": In, "inout": Inout, "int": IntType,
	"key": Key, "list": List, "match_kind": MatchKind, "out": Out, "package": Package,
	"parser": Parser, "priority": Priority, "return": Return, "select": Select, "state": State,
	"string": StringType, "struct": Struct, "switch": Switch, "table": Table, "this": This,
	"transition": Transition, "true": True, "tuple": Tuple, "type": Type, "typedef": Typedef,
	"varbit": Varbit, "value_set": ValueSet, "void": Void,
}

// KeywordText maps keyword kinds back to their spelling.
var keywordText = func() map[Kind]string {
	m := make(map[Kind]string, len(keywords))
	for s, k := range keywords {
		m[k] = s
	}
	return m
}()

// IsKeyword reports whether k is a reserved word.
func (k Kind) IsKeyword() bool { return k > keywordStart && k < keywordEnd }

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	if s, ok := keywordText[k]; ok {
		return s
	}
	return fmt.Sprintf("token(%d)", int(k))
}

// Lookup returns the keyword kind for an identifier spelling, or Ident.
func Lookup(s string) Kind {
	if k, ok := keywords[s]; ok {
		return k
	}
	return Ident
}

// Token is one lexical token.
type Token struct {
	Kind Kind
	Pos  Pos
	Text string // source spelling (for identifiers, literals, and operators)
	// Spaced reports whether white space (or a comment) preceded the token;
	// the parser needs it to tell `>>` (shift) from `> >` (two closing
	// angle brackets), as p4c's grammar does.
	Spaced bool
}

func (t Token) String() string {
	switch t.Kind {
	case Ident, Int, String:
		return fmt.Sprintf("%s %q", t.Kind, t.Text)
	}
	return t.Kind.String()
}
