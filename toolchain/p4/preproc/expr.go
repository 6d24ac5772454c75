package preproc

import (
	"strconv"
	"strings"

	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// evalCondition evaluates the expression of #if or #elif: defined() is
// resolved first, then macros are expanded, and any identifier left over
// counts as 0, as in C.
func (p *Preprocessor) evalCondition(text string, pos scanner.Pos) bool {
	text = p.resolveDefined(text)
	text = p.expandText(text, pos, nil)
	e := &condExpr{src: text, pos: pos, p: p}
	e.next()
	v := e.ternary()
	if e.tok != "" && !e.failed {
		p.Errors.Add(pos, "unexpected %q in preprocessor expression", e.tok)
	}
	return v != 0
}

func (p *Preprocessor) resolveDefined(text string) string {
	var b strings.Builder
	i := 0
	for i < len(text) {
		if isIdentStart(text[i]) {
			j := i
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			word := text[i:j]
			if word != "defined" {
				b.WriteString(word)
				i = j
				continue
			}
			k := j
			for k < len(text) && text[k] == ' ' {
				k++
			}
			paren := k < len(text) && text[k] == '('
			if paren {
				k++
			}
			for k < len(text) && text[k] == ' ' {
				k++
			}
			s := k
			for k < len(text) && isIdentChar(text[k]) {
				k++
			}
			name := text[s:k]
			if paren {
				for k < len(text) && text[k] == ' ' {
					k++
				}
				if k < len(text) && text[k] == ')' {
					k++
				}
			}
			if _, ok := p.macros[name]; ok {
				b.WriteString(" 1 ")
			} else {
				b.WriteString(" 0 ")
			}
			i = k
			continue
		}
		b.WriteByte(text[i])
		i++
	}
	return b.String()
}

// condExpr is a small recursive-descent evaluator over int64 values.
type condExpr struct {
	src    string
	off    int
	tok    string
	pos    scanner.Pos
	p      *Preprocessor
	failed bool
}

var condOps = []string{"||", "&&", "==", "!=", "<=", ">=", "<<", ">>", "(", ")", "!", "~",
	"+", "-", "*", "/", "%", "<", ">", "&", "|", "^", "?", ":"}

func (e *condExpr) next() {
	for e.off < len(e.src) && (e.src[e.off] == ' ' || e.src[e.off] == '\t') {
		e.off++
	}
	if e.off >= len(e.src) {
		e.tok = ""
		return
	}
	c := e.src[e.off]
	if isIdentChar(c) {
		j := e.off
		for j < len(e.src) && isIdentChar(e.src[j]) {
			j++
		}
		e.tok = e.src[e.off:j]
		e.off = j
		return
	}
	for _, op := range condOps {
		if strings.HasPrefix(e.src[e.off:], op) {
			e.tok = op
			e.off += len(op)
			return
		}
	}
	e.tok = string(c)
	e.off++
}

func (e *condExpr) fail(format string, args ...any) {
	if !e.failed {
		e.p.Errors.Add(e.pos, format, args...)
	}
	e.failed = true
}

func (e *condExpr) ternary() int64 {
	c := e.binary(0)
	if e.tok == "?" {
		e.next()
		a := e.ternary()
		if e.tok != ":" {
			e.fail("expected ':' in preprocessor expression")
			return 0
		}
		e.next()
		b := e.ternary()
		if c != 0 {
			return a
		}
		return b
	}
	return c
}

var condPrec = [][]string{
	{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", ">", "<=", ">="},
	{"<<", ">>"}, {"+", "-"}, {"*", "/", "%"},
}

func (e *condExpr) binary(level int) int64 {
	if level >= len(condPrec) {
		return e.unary()
	}
	l := e.binary(level + 1)
	for {
		op := ""
		for _, o := range condPrec[level] {
			if e.tok == o {
				op = o
			}
		}
		if op == "" {
			return l
		}
		e.next()
		r := e.binary(level + 1)
		l = applyCond(op, l, r, e)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func applyCond(op string, l, r int64, e *condExpr) int64 {
	switch op {
	case "||":
		return b2i(l != 0 || r != 0)
	case "&&":
		return b2i(l != 0 && r != 0)
	case "|":
		return l | r
	case "^":
		return l ^ r
	case "&":
		return l & r
	case "==":
		return b2i(l == r)
	case "!=":
		return b2i(l != r)
	case "<":
		return b2i(l < r)
	case ">":
		return b2i(l > r)
	case "<=":
		return b2i(l <= r)
	case ">=":
		return b2i(l >= r)
	case "<<":
		return l << uint(r&63)
	case ">>":
		return l >> uint(r&63)
	case "+":
		return l + r
	case "-":
		return l - r
	case "*":
		return l * r
	case "/", "%":
		if r == 0 {
			e.fail("division by zero in preprocessor expression")
			return 0
		}
		if op == "/" {
			return l / r
		}
		return l % r
	}
	return 0
}

func (e *condExpr) unary() int64 {
	switch e.tok {
	case "!":
		e.next()
		return b2i(e.unary() == 0)
	case "~":
		e.next()
		return ^e.unary()
	case "-":
		e.next()
		return -e.unary()
	case "+":
		e.next()
		return e.unary()
	case "(":
		e.next()
		v := e.ternary()
		if e.tok != ")" {
			e.fail("expected ')' in preprocessor expression")
			return 0
		}
		e.next()
		return v
	case "":
		e.fail("missing operand in preprocessor expression")
		return 0
	}
	t := e.tok
	e.next()
	if isDigit(t[0]) {
		s := strings.TrimRight(t, "uUlL")
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			e.fail("invalid number %q in preprocessor expression", t)
			return 0
		}
		return v
	}
	if isIdentStart(t[0]) {
		return 0 // an undefined identifier is 0
	}
	e.fail("unexpected %q in preprocessor expression", t)
	return 0
}
