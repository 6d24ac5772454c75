package scanner

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Error is one diagnostic with its position.
type Error struct {
	Pos Pos
	Msg string
}

func (e Error) Error() string { return fmt.Sprintf("%s: error: %s", e.Pos, e.Msg) }

// ErrorList collects diagnostics in the order they were found.
type ErrorList []Error

// Add appends an error.
func (l *ErrorList) Add(pos Pos, format string, args ...any) {
	*l = append(*l, Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns nil for an empty list, so callers can write `return errs.Err()`.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Scanner produces tokens from one preprocessed text.
type Scanner struct {
	src  string
	off  int
	file string
	line int
	col  int
	// atLineStart is true while only white space has been seen on the
	// current line; line markers are recognised only there.
	atLineStart bool
	Errors      ErrorList
}

// New returns a scanner for src. file names the text for positions until
// the first line marker says otherwise.
func New(file, src string) *Scanner {
	return &Scanner{src: src, file: file, line: 1, col: 1, atLineStart: true}
}

// All scans the whole text, ending with an EOF token.
func (s *Scanner) All() []Token {
	var toks []Token
	for {
		t := s.Next()
		toks = append(toks, t)
		if t.Kind == EOF {
			return toks
		}
	}
}

func (s *Scanner) peekByte(n int) byte {
	if s.off+n < len(s.src) {
		return s.src[s.off+n]
	}
	return 0
}

func (s *Scanner) advance(n int) {
	for i := 0; i < n && s.off < len(s.src); i++ {
		if s.src[s.off] == '\n' {
			s.line++
			s.col = 1
			s.atLineStart = true
		} else {
			s.col++
		}
		s.off++
	}
}

// skipSpace skips white space, comments and line markers, reporting
// whether anything was skipped.
func (s *Scanner) skipSpace() bool {
	skipped := false
	for s.off < len(s.src) {
		c := s.src[s.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			s.advance(1)
		case c == '\n':
			s.advance(1)
		case c == '/' && s.peekByte(1) == '/':
			for s.off < len(s.src) && s.src[s.off] != '\n' {
				s.advance(1)
			}
		case c == '/' && s.peekByte(1) == '*':
			start := s.pos()
			s.advance(2)
			closed := false
			for s.off < len(s.src) {
				if s.src[s.off] == '*' && s.peekByte(1) == '/' {
					s.advance(2)
					closed = true
					break
				}
				s.advance(1)
			}
			if !closed {
				s.Errors.Add(start, "unterminated comment")
			}
		case c == '#' && s.atLineStart:
			s.lineMarker()
		default:
			return skipped
		}
		skipped = true
	}
	return skipped
}

// lineMarker consumes a `# LINE "FILE"` line (as cpp writes them) and
// moves the position to it. Other `#` lines (a stray directive the
// preprocessor did not consume) are reported.
func (s *Scanner) lineMarker() {
	start := s.pos()
	end := strings.IndexByte(s.src[s.off:], '\n')
	var text string
	if end < 0 {
		text = s.src[s.off:]
	} else {
		text = s.src[s.off : s.off+end]
	}
	fields := strings.Fields(strings.TrimPrefix(text, "#"))
	if len(fields) > 0 && fields[0] == "line" {
		fields = fields[1:]
	}
	line, err := 0, error(nil)
	if len(fields) > 0 {
		line, err = strconv.Atoi(fields[0])
	}
	if len(fields) == 0 || err != nil {
		s.Errors.Add(start, "unexpected preprocessor directive %q", strings.TrimSpace(text))
		s.advance(len(text))
		return
	}
	file := s.file
	if len(fields) > 1 {
		if f, err := strconv.Unquote(fields[1]); err == nil && f != "" {
			file = f
		}
	}
	if line < 1 {
		line = 1
	}
	s.advance(len(text))
	if s.off < len(s.src) {
		s.advance(1) // the newline
	}
	s.file = file
	s.line = line
	s.col = 1
}

func (s *Scanner) pos() Pos { return Pos{File: s.file, Line: s.line, Col: s.col} }

func isLetter(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// three- and two-character operators, longest first.
var operators = []struct {
	text string
	kind Kind
}{
	{"{#}", InvalidHeader}, {"...", Ellipsis}, {"|+|=", SatAddAssign}, {"|-|=", SatSubAssign},
	{"&&&", Mask}, {"|+|", SatAdd}, {"|-|", SatSub}, {"<<=", ShlAssign}, {">>=", ShrAssign},
	{"&&", AndAnd}, {"||", OrOr}, {"==", Eq}, {"!=", Ne}, {"<=", Le}, {">=", Ge},
	{"<<", Shl}, {"++", Concat}, {"..", DotDot}, {"+=", AddAssign}, {"-=", SubAssign},
	{"*=", MulAssign}, {"/=", DivAssign}, {"%=", ModAssign}, {"&=", AndAssign},
	{"|=", OrAssign}, {"^=", XorAssign},
	{"(", LParen}, {")", RParen}, {"{", LBrace}, {"}", RBrace}, {"[", LBracket},
	{"]", RBracket}, {";", Semi}, {",", Comma}, {".", Dot}, {":", Colon}, {"?", Question},
	{"@", At}, {"=", Assign}, {"<", Lt}, {">", Gt}, {"+", Add}, {"-", Sub}, {"*", Mul},
	{"/", Div}, {"%", Mod}, {"&", And}, {"|", Or}, {"^", Xor}, {"!", Not}, {"~", Compl},
}

// Next returns the next token.
func (s *Scanner) Next() Token {
	spaced := s.skipSpace()
	s.atLineStart = false
	p := s.pos()
	if s.off >= len(s.src) {
		return Token{Kind: EOF, Pos: p, Spaced: spaced}
	}
	c := s.src[s.off]
	start := s.off
	switch {
	case isLetter(c):
		for s.off < len(s.src) && (isLetter(s.src[s.off]) || isDigit(s.src[s.off])) {
			s.advance(1)
		}
		text := s.src[start:s.off]
		// A width-prefixed literal never starts with a letter, so a
		// letter always starts an identifier or keyword.
		if text == "_" {
			return Token{Kind: Underscore, Pos: p, Text: text, Spaced: spaced}
		}
		return Token{Kind: Lookup(text), Pos: p, Text: text, Spaced: spaced}
	case isDigit(c):
		s.scanNumber()
		return Token{Kind: Int, Pos: p, Text: s.src[start:s.off], Spaced: spaced}
	case c == '"':
		return s.scanString(p, spaced)
	}
	for _, op := range operators {
		if strings.HasPrefix(s.src[s.off:], op.text) {
			s.advance(len(op.text))
			return Token{Kind: op.kind, Pos: p, Text: op.text, Spaced: spaced}
		}
	}
	s.advance(1)
	s.Errors.Add(p, "unexpected character %q", c)
	return Token{Kind: Illegal, Pos: p, Text: string(c), Spaced: spaced}
}

func (s *Scanner) scanNumber() {
	// digits, then optionally w/s and a based value; letters and digits
	// and underscores are all consumed and validated by ParseInt.
	for s.off < len(s.src) && (isDigit(s.src[s.off]) || isLetter(s.src[s.off])) {
		s.advance(1)
	}
}

func (s *Scanner) scanString(p Pos, spaced bool) Token {
	s.advance(1)
	var b strings.Builder
	for {
		if s.off >= len(s.src) || s.src[s.off] == '\n' {
			s.Errors.Add(p, "unterminated string literal")
			return Token{Kind: String, Pos: p, Text: b.String(), Spaced: spaced}
		}
		c := s.src[s.off]
		if c == '"' {
			s.advance(1)
			return Token{Kind: String, Pos: p, Text: b.String(), Spaced: spaced}
		}
		if c == '\\' && s.off+1 < len(s.src) {
			n := s.src[s.off+1]
			switch n {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\', '"':
				b.WriteByte(n)
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			s.advance(2)
			continue
		}
		b.WriteByte(c)
		s.advance(1)
	}
}

// IntLit is a decoded integer literal.
type IntLit struct {
	Value  *big.Int
	Width  int  // 0 when the literal has no width prefix (type int)
	Signed bool // true for `Ns` literals
	// Sized is set for a width prefix, so that 0w0 (bit<0>) differs
	// from 0 (int).
	Sized bool
}

// ParseInt decodes an integer literal spelling such as `42`, `0x2A`,
// `8w0b1010`, `16s-3`-style prefixes are not literals (the minus is an
// operator). Underscores between digits are allowed.
func ParseInt(text string) (IntLit, error) {
	lit := IntLit{}
	body := text
	// Width prefix: decimal digits followed by w or s.
	for i := 0; i < len(text); i++ {
		c := text[i]
		if isDigit(c) {
			continue
		}
		if (c == 'w' || c == 's') && i > 0 {
			w, err := strconv.Atoi(text[:i])
			if err != nil || w < 0 || (w == 0 && c == 's') {
				return lit, fmt.Errorf("invalid width in literal %q", text)
			}
			if w > 1<<16 {
				return lit, fmt.Errorf("width of literal %q is too large", text)
			}
			lit.Width = w
			lit.Sized = true
			lit.Signed = c == 's'
			body = text[i+1:]
		}
		break
	}
	base := 10
	if len(body) > 2 && body[0] == '0' {
		switch body[1] {
		case 'x', 'X':
			base = 16
		case 'b', 'B':
			base = 2
		case 'o', 'O':
			base = 8
		case 'd', 'D':
			base = 10
		}
		if base != 10 || body[1] == 'd' || body[1] == 'D' {
			body = body[2:]
		}
	}
	digits := strings.ReplaceAll(body, "_", "")
	if digits == "" {
		return lit, fmt.Errorf("invalid integer literal %q", text)
	}
	v, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return lit, fmt.Errorf("invalid integer literal %q", text)
	}
	lit.Value = v
	return lit, nil
}
