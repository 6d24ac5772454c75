// Package preproc is the C-style preprocessor P4 programs are written for:
// #include ("…" and <…>), object- and function-like #define, #undef,
// #if/#ifdef/#ifndef/#elif/#else/#endif with defined(), #error.
//
// Its output is one text with cpp-style line markers (`# LINE "FILE"`), so
// the scanner can attribute every token to its original file and line.
// Lines that directives or false conditionals remove are kept as empty lines,
// which keeps line numbers right without a marker after every directive.
package preproc

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// Config says where to find included files and which macros start defined.
type Config struct {
	IncludeDirs []string
	// Defines maps macro names to their replacement text ("1" for -DNAME).
	Defines map[string]string
	// Builtin supplies the architecture files (core.p4, v1model.p4) that
	// <…> includes find when no include directory has them.
	Builtin fs.FS
	// ReadFile reads a source file; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

type macro struct {
	name     string
	params   []string // nil for object-like macros
	variadic bool
	body     string
	funcLike bool
}

type condState struct {
	active    bool // this branch's lines are kept
	taken     bool // some branch of this #if has been kept
	parentOn  bool // the enclosing region is kept
	sawElse   bool
	directive scanner.Pos
}

// Preprocessor holds macro definitions across the files of one compilation.
type Preprocessor struct {
	cfg    Config
	macros map[string]*macro
	out    strings.Builder
	Errors scanner.ErrorList
	depth  int
	// once records files guarded by #pragma once.
	once map[string]bool
}

// Run preprocesses the file at path.
func Run(path string, cfg Config) (string, scanner.ErrorList) {
	p := &Preprocessor{cfg: cfg, macros: map[string]*macro{}, once: map[string]bool{}}
	names := make([]string, 0, len(cfg.Defines))
	for n := range cfg.Defines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p.macros[n] = &macro{name: n, body: cfg.Defines[n]}
	}
	data, err := p.read(path)
	if err != nil {
		p.Errors.Add(scanner.Pos{File: path}, "cannot read %s: %v", path, err)
		return "", p.Errors
	}
	p.file(path, string(data), false)
	return p.out.String(), p.Errors
}

func (p *Preprocessor) read(path string) ([]byte, error) {
	if p.cfg.ReadFile != nil {
		return p.cfg.ReadFile(path)
	}
	return os.ReadFile(path)
}

// logicalLines splits text into lines, joining backslash continuations; each
// entry records the physical line number it started on and how many physical
// lines it covers.
type logicalLine struct {
	text  string
	line  int
	count int
}

func splitLines(text string) []logicalLine {
	phys := strings.Split(text, "\n")
	var out []logicalLine
	for i := 0; i < len(phys); i++ {
		start := i
		cur := strings.TrimSuffix(phys[i], "\r")
		for strings.HasSuffix(cur, "\\") && i+1 < len(phys) {
			i++
			cur = cur[:len(cur)-1] + strings.TrimSuffix(phys[i], "\r")
		}
		out = append(out, logicalLine{text: cur, line: start + 1, count: i - start + 1})
	}
	return out
}

func (p *Preprocessor) marker(line int, file string) {
	fmt.Fprintf(&p.out, "# %d %s\n", line, strconv.Quote(file))
}

// file preprocesses one file; builtin marks the architecture files, whose
// own "..." includes resolve among themselves.
func (p *Preprocessor) file(path, text string, builtin bool) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 64 {
		p.Errors.Add(scanner.Pos{File: path, Line: 1, Col: 1}, "#include nested too deeply")
		return
	}
	p.marker(1, path)
	lines := splitLines(text)
	var conds []condState
	on := func() bool { return len(conds) == 0 || conds[len(conds)-1].active }
	inComment := false
	for li := 0; li < len(lines); li++ {
		ll := lines[li]
		pos := scanner.Pos{File: path, Line: ll.line, Col: 1}
		trimmed := strings.TrimLeft(ll.text, " \t")
		if !inComment && strings.HasPrefix(trimmed, "#") {
			col := len(ll.text) - len(trimmed) + 1
			pos.Col = col
			name, rest := directive(trimmed)
			rest = stripComments(rest)
			switch name {
			case "if", "ifdef", "ifndef":
				parent := on()
				c := condState{parentOn: parent, directive: pos}
				if parent {
					var v bool
					switch name {
					case "if":
						v = p.evalCondition(rest, pos)
					case "ifdef":
						_, v = p.macros[firstWord(rest)]
					default:
						_, v = p.macros[firstWord(rest)]
						v = !v
					}
					c.active, c.taken = v, v
				}
				conds = append(conds, c)
			case "elif":
				if len(conds) == 0 {
					p.Errors.Add(pos, "#elif without #if")
					break
				}
				c := &conds[len(conds)-1]
				if c.sawElse {
					p.Errors.Add(pos, "#elif after #else")
				}
				if c.parentOn && !c.taken {
					v := p.evalCondition(rest, pos)
					c.active, c.taken = v, v
				} else {
					c.active = false
				}
			case "else":
				if len(conds) == 0 {
					p.Errors.Add(pos, "#else without #if")
					break
				}
				c := &conds[len(conds)-1]
				if c.sawElse {
					p.Errors.Add(pos, "#else after #else")
				}
				c.sawElse = true
				c.active = c.parentOn && !c.taken
				c.taken = true
			case "endif":
				if len(conds) == 0 {
					p.Errors.Add(pos, "#endif without #if")
					break
				}
				conds = conds[:len(conds)-1]
			default:
				if !on() {
					break
				}
				switch name {
				case "include":
					p.include(rest, path, pos, builtin)
					p.marker(ll.line+ll.count, path)
					continue
				case "define":
					p.define(rest, pos)
				case "undef":
					delete(p.macros, firstWord(rest))
				case "error":
					p.Errors.Add(pos, "#error %s", strings.TrimSpace(rest))
				case "warning", "pragma", "line", "":
					// #pragma once is honoured; other pragmas and warnings
					// do not change the program.
					if name == "pragma" && strings.TrimSpace(rest) == "once" {
						if p.once[path] {
							return
						}
						p.once[path] = true
					}
				default:
					p.Errors.Add(pos, "unknown preprocessor directive #%s", name)
				}
			}
			p.out.WriteString(strings.Repeat("\n", ll.count))
			continue
		}
		if !on() {
			// A skipped line can still open or close a comment that
			// matters for what follows; track it.
			inComment = commentStateAfter(ll.text, inComment)
			p.out.WriteString(strings.Repeat("\n", ll.count))
			continue
		}
		// Macro calls may span lines: gather following lines while the
		// parentheses of a function-like macro call are unbalanced.
		text := ll.text
		count := ll.count
		for li+1 < len(lines) && p.needsMoreLines(text, inComment) {
			li++
			text += " " + lines[li].text
			count += lines[li].count
		}
		expanded, endComment := p.expandLine(text, inComment, pos)
		inComment = endComment
		p.out.WriteString(expanded)
		p.out.WriteString(strings.Repeat("\n", count))
	}
	for _, c := range conds {
		p.Errors.Add(c.directive, "unterminated conditional directive")
	}
}

func directive(line string) (name, rest string) {
	s := strings.TrimLeft(line[1:], " \t")
	i := 0
	for i < len(s) && (isIdentChar(s[i])) {
		i++
	}
	return s[:i], s[i:]
}

func firstWord(s string) string {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && isIdentChar(s[i]) {
		i++
	}
	return s[:i]
}

func isIdentChar(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// stripComments removes // and /* */ comments from a directive's text.
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				j = len(s) - 1
			}
			b.WriteString(s[i : j+1])
			i = j
			continue
		}
		if s[i] == '/' && i+1 < len(s) && s[i+1] == '/' {
			break
		}
		if s[i] == '/' && i+1 < len(s) && s[i+1] == '*' {
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				break
			}
			b.WriteByte(' ')
			i += end + 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func commentStateAfter(s string, inComment bool) bool {
	for i := 0; i < len(s); i++ {
		if inComment {
			if s[i] == '*' && i+1 < len(s) && s[i+1] == '/' {
				inComment = false
				i++
			}
			continue
		}
		if s[i] == '/' && i+1 < len(s) {
			if s[i+1] == '/' {
				return false
			}
			if s[i+1] == '*' {
				inComment = true
				i++
			}
		}
	}
	return inComment
}

func (p *Preprocessor) include(rest, from string, pos scanner.Pos, fromBuiltin bool) {
	rest = strings.TrimSpace(rest)
	if rest != "" && rest[0] != '"' && rest[0] != '<' {
		rest = strings.TrimSpace(p.expandText(rest, pos, nil))
	}
	if len(rest) < 2 {
		p.Errors.Add(pos, "#include expects \"FILE\" or <FILE>")
		return
	}
	var name string
	angle := rest[0] == '<'
	closeCh := byte('"')
	if angle {
		closeCh = '>'
	}
	end := strings.IndexByte(rest[1:], closeCh)
	if end < 0 {
		p.Errors.Add(pos, "#include expects \"FILE\" or <FILE>")
		return
	}
	name = rest[1 : end+1]
	if fromBuiltin && p.cfg.Builtin != nil {
		if data, err := fs.ReadFile(p.cfg.Builtin, name); err == nil {
			p.file(name, string(data), true)
			return
		}
	}
	var candidates []string
	if !angle {
		candidates = append(candidates, filepath.Join(filepath.Dir(from), name))
	}
	for _, d := range p.cfg.IncludeDirs {
		candidates = append(candidates, filepath.Join(d, name))
	}
	if filepath.IsAbs(name) {
		candidates = append([]string{name}, candidates...)
	}
	for _, c := range candidates {
		data, err := p.read(c)
		if err == nil {
			if p.once[c] {
				return
			}
			p.file(c, string(data), false)
			return
		}
	}
	if p.cfg.Builtin != nil {
		if data, err := fs.ReadFile(p.cfg.Builtin, name); err == nil {
			p.file(name, string(data), true)
			return
		}
	}
	p.Errors.Add(pos, "cannot find include file %q", name)
}

func (p *Preprocessor) define(rest string, pos scanner.Pos) {
	s := strings.TrimLeft(rest, " \t")
	name := firstWord(s)
	if name == "" || !isIdentStart(name[0]) {
		p.Errors.Add(pos, "#define expects a macro name")
		return
	}
	s = s[len(name):]
	m := &macro{name: name}
	if strings.HasPrefix(s, "(") {
		end := strings.IndexByte(s, ')')
		if end < 0 {
			p.Errors.Add(pos, "unterminated parameter list in #define %s", name)
			return
		}
		m.funcLike = true
		m.params = []string{}
		for _, prm := range strings.Split(s[1:end], ",") {
			prm = strings.TrimSpace(prm)
			if prm == "" {
				continue
			}
			if prm == "..." {
				m.variadic = true
				prm = "__VA_ARGS__"
			}
			m.params = append(m.params, prm)
		}
		s = s[end+1:]
	}
	m.body = strings.TrimSpace(s)
	p.macros[name] = m
}

// needsMoreLines reports whether text ends inside the argument list of a
// function-like macro call.
func (p *Preprocessor) needsMoreLines(text string, inComment bool) bool {
	depth := 0
	pending := false
	i := 0
	for i < len(text) {
		c := text[i]
		if inComment {
			if c == '*' && i+1 < len(text) && text[i+1] == '/' {
				inComment = false
				i += 2
				continue
			}
			i++
			continue
		}
		switch {
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			i = len(text)
			continue
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			inComment = true
			i += 2
			continue
		case c == '"':
			i = skipString(text, i)
			continue
		case isIdentStart(c):
			j := i
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			if m, ok := p.macros[text[i:j]]; ok && m.funcLike && depth == 0 {
				k := j
				for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
					k++
				}
				if k == len(text) {
					return false // a name at line end: not a call we can see
				}
				if text[k] == '(' {
					pending = true
				}
			}
			i = j
			continue
		case c == '(':
			if pending || depth > 0 {
				depth++
			}
			pending = false
		case c == ')':
			if depth > 0 {
				depth--
			}
		}
		i++
	}
	return depth > 0
}

func skipString(text string, i int) int {
	j := i + 1
	for j < len(text) && text[j] != '"' {
		if text[j] == '\\' {
			j++
		}
		j++
	}
	return j + 1
}

// expandLine expands macros in one line of program text, leaving comments
// and strings untouched.
func (p *Preprocessor) expandLine(text string, inComment bool, pos scanner.Pos) (string, bool) {
	var b strings.Builder
	var code strings.Builder
	flush := func() {
		if code.Len() > 0 {
			b.WriteString(p.expandText(code.String(), pos, nil))
			code.Reset()
		}
	}
	i := 0
	for i < len(text) {
		c := text[i]
		if inComment {
			end := strings.Index(text[i:], "*/")
			if end < 0 {
				b.WriteString(strings.Repeat(" ", len(text)-i))
				i = len(text)
				break
			}
			b.WriteString(strings.Repeat(" ", end+2))
			i += end + 2
			inComment = false
			continue
		}
		if c == '/' && i+1 < len(text) && text[i+1] == '/' {
			flush()
			i = len(text)
			break
		}
		if c == '/' && i+1 < len(text) && text[i+1] == '*' {
			flush()
			b.WriteString("  ")
			i += 2
			inComment = true
			continue
		}
		if c == '"' {
			j := skipString(text, i)
			if j > len(text) {
				j = len(text)
			}
			code.WriteString(text[i:j])
			i = j
			continue
		}
		code.WriteByte(c)
		i++
	}
	flush()
	return b.String(), inComment
}

// expandText performs macro replacement on code text (no comments).
// active holds the macros being expanded, which are not expanded again.
func (p *Preprocessor) expandText(text string, pos scanner.Pos, active map[string]bool) string {
	if len(p.macros) == 0 {
		return text
	}
	var b strings.Builder
	i := 0
	for i < len(text) {
		c := text[i]
		if c == '"' {
			j := skipString(text, i)
			if j > len(text) {
				j = len(text)
			}
			b.WriteString(text[i:j])
			i = j
			continue
		}
		if isIdentStart(c) {
			j := i
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			word := text[i:j]
			// a literal such as 8w5 is scanned as digits first, so an
			// identifier here is a real word.
			m, ok := p.macros[word]
			if !ok || active[word] {
				b.WriteString(word)
				i = j
				continue
			}
			if !m.funcLike {
				b.WriteString(p.expandText(m.body, pos, with(active, word)))
				i = j
				continue
			}
			k := j
			for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
				k++
			}
			if k >= len(text) || text[k] != '(' {
				b.WriteString(word)
				i = j
				continue
			}
			args, end, ok := splitArgs(text, k)
			if !ok {
				p.Errors.Add(pos, "unterminated call of macro %s", word)
				b.WriteString(text[i:])
				return b.String()
			}
			b.WriteString(p.expandText(p.substitute(m, args, pos, active), pos, with(active, word)))
			i = end
			continue
		}
		if isDigit(c) {
			// skip a whole number token such as 32w0x10 so its letters are
			// not taken for macro names.
			j := i
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			b.WriteString(text[i:j])
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func with(active map[string]bool, name string) map[string]bool {
	m := make(map[string]bool, len(active)+1)
	for k := range active {
		m[k] = true
	}
	m[name] = true
	return m
}

// splitArgs splits the parenthesised argument list starting at text[open].
func splitArgs(text string, open int) ([]string, int, bool) {
	depth := 0
	var args []string
	start := open + 1
	for i := open; i < len(text); i++ {
		switch text[i] {
		case '"':
			i = skipString(text, i) - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				args = append(args, text[start:i])
				return args, i + 1, true
			}
		case ',':
			if depth == 1 {
				args = append(args, text[start:i])
				start = i + 1
			}
		}
	}
	return nil, len(text), false
}

func (p *Preprocessor) substitute(m *macro, args []string, pos scanner.Pos, active map[string]bool) string {
	if len(args) == 1 && strings.TrimSpace(args[0]) == "" && len(m.params) == 0 {
		args = nil
	}
	if m.variadic {
		fixed := len(m.params) - 1
		if len(args) > fixed {
			rest := strings.Join(args[fixed:], ",")
			args = append(args[:fixed:fixed], rest)
		}
		for len(args) < len(m.params) {
			args = append(args, "")
		}
	}
	if len(args) != len(m.params) {
		p.Errors.Add(pos, "macro %s expects %d arguments, got %d", m.name, len(m.params), len(args))
		return ""
	}
	vals := map[string]string{}
	for i, prm := range m.params {
		vals[prm] = strings.TrimSpace(args[i])
	}
	body := m.body
	var b strings.Builder
	i := 0
	for i < len(body) {
		c := body[i]
		if c == '"' {
			j := skipString(body, i)
			if j > len(body) {
				j = len(body)
			}
			b.WriteString(body[i:j])
			i = j
			continue
		}
		if c == '#' && i+1 < len(body) && body[i+1] == '#' {
			// token pasting: drop the operator and surrounding spaces
			s := strings.TrimRight(b.String(), " \t")
			b.Reset()
			b.WriteString(s)
			i += 2
			for i < len(body) && (body[i] == ' ' || body[i] == '\t') {
				i++
			}
			continue
		}
		if c == '#' {
			j := i + 1
			for j < len(body) && body[j] == ' ' {
				j++
			}
			k := j
			for k < len(body) && isIdentChar(body[k]) {
				k++
			}
			if v, ok := vals[body[j:k]]; ok && k > j {
				b.WriteString(strconv.Quote(v))
				i = k
				continue
			}
		}
		if isIdentStart(c) {
			j := i
			for j < len(body) && isIdentChar(body[j]) {
				j++
			}
			if v, ok := vals[body[i:j]]; ok {
				b.WriteString(p.expandText(v, pos, active))
			} else {
				b.WriteString(body[i:j])
			}
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}
