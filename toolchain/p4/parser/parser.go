// Package parser builds the syntax tree of a preprocessed P4_16 program.
//
// It is a recursive-descent parser over the scanner's tokens. Like p4c's
// grammar it needs to know which identifiers name types (to tell `T<...>`
// apart from a comparison, and a cast from a parenthesised expression), so
// it keeps a scoped set of type names as it goes: P4 requires declarations
// before use, which makes this sound.
//
// Errors are collected; after one, the parser skips to the next
// declaration and continues, so that one typo does not hide the rest.
package parser

import (
	"fmt"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// maxErrors bounds the diagnostics from one file; after that many, more
// are noise.
const maxErrors = 30

type bailout struct{}

type parser struct {
	toks   []scanner.Token
	p      int
	errs   scanner.ErrorList
	global map[string]bool
	scopes []map[string]bool
	depth  int
}

// Parse parses preprocessed source text. file names the text for positions
// before its first line marker.
func Parse(file, src string) (*ast.Program, scanner.ErrorList) {
	sc := scanner.New(file, src)
	toks := sc.All()
	ps := &parser{toks: toks, global: map[string]bool{}}
	ps.errs = append(ps.errs, sc.Errors...)
	prog := ps.program()
	return prog, ps.errs
}

// ParseExpr parses a single expression (for tests and tools).
func ParseExpr(src string) (ast.Expr, scanner.ErrorList) {
	sc := scanner.New("<expr>", src)
	ps := &parser{toks: sc.All(), global: map[string]bool{}}
	ps.errs = append(ps.errs, sc.Errors...)
	var e ast.Expr
	func() {
		defer ps.recoverBailout()
		e = ps.expr()
		if ps.tok().Kind != scanner.EOF {
			ps.errorf(ps.tok().Pos, "unexpected %s after expression", ps.tok())
		}
	}()
	return e, ps.errs
}

func (ps *parser) recoverBailout() {
	if r := recover(); r != nil {
		if _, ok := r.(bailout); !ok {
			panic(r)
		}
	}
}

func (ps *parser) tok() scanner.Token { return ps.toks[ps.p] }

func (ps *parser) peek(n int) scanner.Token {
	if ps.p+n < len(ps.toks) {
		return ps.toks[ps.p+n]
	}
	return ps.toks[len(ps.toks)-1]
}

func (ps *parser) next() scanner.Token {
	t := ps.toks[ps.p]
	if ps.p < len(ps.toks)-1 {
		ps.p++
	}
	return t
}

func (ps *parser) is(k scanner.Kind) bool { return ps.tok().Kind == k }

func (ps *parser) accept(k scanner.Kind) bool {
	if ps.is(k) {
		ps.next()
		return true
	}
	return false
}

func (ps *parser) errorf(pos scanner.Pos, format string, args ...any) {
	if len(ps.errs) < maxErrors {
		ps.errs.Add(pos, format, args...)
	}
}

// fail reports an error at the current token and abandons the current
// declaration.
func (ps *parser) fail(format string, args ...any) {
	ps.errorf(ps.tok().Pos, format, args...)
	panic(bailout{})
}

func (ps *parser) expect(k scanner.Kind) scanner.Token {
	if !ps.is(k) {
		ps.fail("expected %s, found %s", k, ps.tok())
	}
	return ps.next()
}

// name accepts an identifier, or a keyword that the grammar allows as a
// name in that position (`key`, `actions`, `entries`, `apply`, ...).
func (ps *parser) name() scanner.Token {
	t := ps.tok()
	if t.Kind == scanner.Ident || softKeyword(t.Kind) {
		return ps.next()
	}
	ps.fail("expected a name, found %s", t)
	return t
}

// softKeyword lists keywords that P4_16's grammar also accepts as names
// (nonTypeName / name in p4c's grammar).
func softKeyword(k scanner.Kind) bool {
	switch k {
	case scanner.Apply, scanner.Key, scanner.Actions, scanner.State, scanner.Entries,
		scanner.Type, scanner.Priority, scanner.List:
		return true
	}
	return false
}

func (ps *parser) pushScope() { ps.scopes = append(ps.scopes, map[string]bool{}) }
func (ps *parser) popScope()  { ps.scopes = ps.scopes[:len(ps.scopes)-1] }

func (ps *parser) declareType(name string) {
	if len(ps.scopes) > 0 {
		ps.scopes[len(ps.scopes)-1][name] = true
		return
	}
	ps.global[name] = true
}

func (ps *parser) isTypeName(name string) bool {
	for i := len(ps.scopes) - 1; i >= 0; i-- {
		if ps.scopes[i][name] {
			return true
		}
	}
	return ps.global[name]
}

func (ps *parser) program() *ast.Program {
	prog := &ast.Program{}
	// packet_in and packet_out are declared in core.p4 like any extern.
	for !ps.is(scanner.EOF) {
		if len(ps.errs) >= maxErrors {
			break
		}
		start := ps.p
		d := ps.topDecl()
		if d != nil {
			prog.Decls = append(prog.Decls, d)
		}
		if ps.p == start && !ps.is(scanner.EOF) {
			ps.next() // always make progress
		}
	}
	return prog
}

// topDecl parses one top-level declaration, recovering from errors by
// skipping to a token that can start the next one.
func (ps *parser) topDecl() (d ast.Decl) {
	ok := false
	defer func() {
		if ok {
			return
		}
		if r := recover(); r != nil {
			if _, isBail := r.(bailout); !isBail {
				panic(r)
			}
			ps.scopes = nil
			ps.depth = 0
			ps.syncTop()
			d = nil
		}
	}()
	d = ps.declaration(true)
	ok = true
	return d
}

// syncTop skips tokens to the start of the next top-level declaration: a
// declaration keyword at brace depth zero.
func (ps *parser) syncTop() {
	depth := 0
	for !ps.is(scanner.EOF) {
		switch ps.tok().Kind {
		case scanner.LBrace:
			depth++
		case scanner.RBrace:
			depth--
			if depth <= 0 {
				ps.next()
				if depth < 0 {
					depth = 0
				}
				if depth == 0 {
					ps.accept(scanner.Semi)
					return
				}
				continue
			}
		case scanner.Semi:
			if depth == 0 {
				ps.next()
				return
			}
		case scanner.Header, scanner.Struct, scanner.HeaderUnion, scanner.Control, scanner.Parser,
			scanner.Extern, scanner.Typedef, scanner.Enum, scanner.Package, scanner.Action, scanner.MatchKind:
			if depth == 0 {
				return
			}
		}
		ps.next()
	}
}

func (ps *parser) annotations() ast.Annotations {
	var as ast.Annotations
	for ps.is(scanner.At) {
		as = append(as, ps.annotation())
	}
	return as
}

func (ps *parser) annotation() *ast.Annotation {
	at := ps.expect(scanner.At)
	nameTok := ps.tok()
	if nameTok.Kind != scanner.Ident && !nameTok.Kind.IsKeyword() {
		ps.fail("expected an annotation name after @")
	}
	ps.next()
	a := &ast.Annotation{Pos: at.Pos, Name: nameTok.Text}
	if nameTok.Text == "pragma" && nameTok.Kind == scanner.Ident {
		// `@pragma NAME TOKENS...` runs to the end of its line (P4_16
		// 6.3/18.1); it is the annotation @NAME with those tokens.
		var body []scanner.Token
		for t := ps.tok(); t.Kind != scanner.EOF && t.Pos.Line == nameTok.Pos.Line && t.Pos.File == nameTok.Pos.File; t = ps.tok() {
			body = append(body, t)
			ps.next()
		}
		if len(body) == 0 {
			ps.fail("@pragma needs a name")
			return a
		}
		a.Name = body[0].Text
		if len(body) > 1 {
			a.HasBody = true
			a.Tokens = body[1:]
			a.Exprs = parseAnnotationExprs(a.Tokens)
		}
		return a
	}
	if ps.is(scanner.LParen) {
		// The body is kept as raw tokens; many annotations are not
		// expressions (P4_16 §18.1 "unstructured annotations").
		ps.next()
		a.HasBody = true
		depth := 1
		for depth > 0 {
			t := ps.tok()
			switch t.Kind {
			case scanner.EOF:
				ps.fail("unterminated annotation @%s", a.Name)
			case scanner.LParen:
				depth++
			case scanner.RParen:
				depth--
				if depth == 0 {
					ps.next()
					continue
				}
			}
			a.Tokens = append(a.Tokens, t)
			ps.next()
		}
		a.Exprs = parseAnnotationExprs(a.Tokens)
	} else if ps.is(scanner.LBracket) {
		ps.next()
		a.Structured = true
		a.HasBody = true
		depth := 1
		for depth > 0 {
			t := ps.tok()
			switch t.Kind {
			case scanner.EOF:
				ps.fail("unterminated annotation @%s", a.Name)
			case scanner.LBracket:
				depth++
			case scanner.RBracket:
				depth--
				if depth == 0 {
					ps.next()
					continue
				}
			}
			a.Tokens = append(a.Tokens, t)
			ps.next()
		}
	}
	return a
}

// parseAnnotationExprs parses an annotation body as an expression list,
// returning nil if it is not one.
func parseAnnotationExprs(toks []scanner.Token) []ast.Expr {
	if len(toks) == 0 {
		return nil
	}
	all := append(append([]scanner.Token(nil), toks...), scanner.Token{Kind: scanner.EOF, Pos: toks[len(toks)-1].Pos})
	sub := &parser{toks: all, global: map[string]bool{}}
	var out []ast.Expr
	failed := false
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(bailout); !ok {
					panic(r)
				}
				failed = true
			}
		}()
		for {
			out = append(out, sub.expr())
			if !sub.accept(scanner.Comma) {
				break
			}
		}
		if !sub.is(scanner.EOF) {
			failed = true
		}
	}()
	if failed || len(sub.errs) > 0 {
		return nil
	}
	return out
}

// declaration parses a declaration at top level (top) or inside a parser or
// control (locals).
func (ps *parser) declaration(top bool) ast.Decl {
	annos := ps.annotations()
	t := ps.tok()
	switch t.Kind {
	case scanner.Semi:
		ps.next()
		return nil
	case scanner.Const:
		return ps.constDecl(annos)
	case scanner.Typedef, scanner.Type:
		return ps.typedefDecl(annos)
	case scanner.Header, scanner.Struct, scanner.HeaderUnion:
		return ps.structDecl(annos)
	case scanner.Enum:
		return ps.enumDecl(annos)
	case scanner.ErrorKw:
		if ps.peek(1).Kind == scanner.LBrace {
			ps.next()
			return &ast.ErrorDecl{Pos: t.Pos, Members: ps.memberList(false)}
		}
	case scanner.MatchKind:
		ps.next()
		return &ast.MatchKindDecl{Pos: t.Pos, Members: ps.memberList(false)}
	case scanner.Extern:
		return ps.externDecl(annos)
	case scanner.Action:
		return ps.actionDecl(annos)
	case scanner.Parser:
		return ps.parserDecl(annos)
	case scanner.Control:
		return ps.controlDecl(annos)
	case scanner.Package:
		return ps.packageDecl(annos)
	case scanner.Table:
		return ps.tableDecl(annos)
	case scanner.ValueSet:
		return ps.valueSetDecl(annos)
	}
	// A generic function may return one of its own type parameters
	// (`T f<T>(in T x)`): T is declared only after the name.
	if top && t.Kind == scanner.Ident && !ps.isTypeName(t.Text) &&
		ps.peek(1).Kind == scanner.Ident && ps.peek(2).Kind == scanner.Lt {
		ps.pushScope()
		ps.prescanTypeParams()
		typ := ps.typeRef()
		nameTok := ps.name()
		ps.popScope()
		return ps.functionRest(annos, typ, nameTok)
	}
	// A declaration that starts with a type: function, instance, variable.
	if !ps.startsType() {
		ps.fail("expected a declaration, found %s", t)
	}
	typ := ps.typeRef()
	if ps.is(scanner.LParen) {
		return ps.instanceRest(annos, typ)
	}
	nameTok := ps.name()
	if top && (ps.is(scanner.LParen) || ps.is(scanner.Lt)) {
		return ps.functionRest(annos, typ, nameTok)
	}
	return ps.varRest(annos, typ, nameTok)
}

func (ps *parser) constDecl(annos ast.Annotations) *ast.ConstDecl {
	pos := ps.expect(scanner.Const).Pos
	typ := ps.typeRef()
	nameTok := ps.name()
	ps.expect(scanner.Assign)
	val := ps.expr()
	ps.expect(scanner.Semi)
	return &ast.ConstDecl{Pos: pos, Annotations: annos, Type: typ, Name: nameTok.Text, Value: val}
}

func (ps *parser) typedefDecl(annos ast.Annotations) *ast.TypedefDecl {
	kw := ps.next()
	typ := ps.typeRef()
	nameTok := ps.name()
	ps.expect(scanner.Semi)
	ps.declareType(nameTok.Text)
	return &ast.TypedefDecl{Pos: kw.Pos, Annotations: annos, Type: typ, Name: nameTok.Text,
		NewType: kw.Kind == scanner.Type}
}

func (ps *parser) typeParams() []*ast.TypeParam {
	if !ps.accept(scanner.Lt) {
		return nil
	}
	var tps []*ast.TypeParam
	for {
		t := ps.name()
		tps = append(tps, &ast.TypeParam{Pos: t.Pos, Name: t.Text})
		ps.declareType(t.Text)
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.Gt)
	return tps
}

func (ps *parser) structDecl(annos ast.Annotations) *ast.StructDecl {
	kw := ps.next()
	kind := ast.StructKindStruct
	switch kw.Kind {
	case scanner.Header:
		kind = ast.StructKindHeader
	case scanner.HeaderUnion:
		kind = ast.StructKindUnion
	}
	nameTok := ps.name()
	ps.declareType(nameTok.Text)
	d := &ast.StructDecl{Pos: kw.Pos, Annotations: annos, Kind: kind, Name: nameTok.Text}
	ps.pushScope()
	defer ps.popScope()
	d.TypeParams = ps.typeParams()
	ps.expect(scanner.LBrace)
	for !ps.is(scanner.RBrace) {
		fa := ps.annotations()
		pos := ps.tok().Pos
		ft := ps.typeRef()
		fn := ps.name()
		ps.expect(scanner.Semi)
		d.Fields = append(d.Fields, &ast.Field{Pos: pos, Annotations: fa, Type: ft, Name: fn.Text})
	}
	ps.expect(scanner.RBrace)
	return d
}

func (ps *parser) memberList(withValues bool) []*ast.EnumMember {
	ps.expect(scanner.LBrace)
	var ms []*ast.EnumMember
	for !ps.is(scanner.RBrace) {
		ps.annotations()
		t := ps.name()
		m := &ast.EnumMember{Pos: t.Pos, Name: t.Text}
		if withValues {
			ps.expect(scanner.Assign)
			m.Value = ps.expr()
		}
		ms = append(ms, m)
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.RBrace)
	return ms
}

func (ps *parser) enumDecl(annos ast.Annotations) *ast.EnumDecl {
	pos := ps.expect(scanner.Enum).Pos
	d := &ast.EnumDecl{Pos: pos, Annotations: annos}
	if ps.is(scanner.Bit) || ps.is(scanner.IntType) || (ps.is(scanner.Ident) && ps.isTypeName(ps.tok().Text)) {
		d.Underlying = ps.typeRef()
	}
	d.Name = ps.name().Text
	ps.declareType(d.Name)
	d.Members = ps.memberList(d.Underlying != nil)
	return d
}

func (ps *parser) externDecl(annos ast.Annotations) ast.Decl {
	pos := ps.expect(scanner.Extern).Pos
	// extern Name [<T>] { ... }  vs  extern RetType name(...);
	if ps.is(scanner.Ident) && (ps.peek(1).Kind == scanner.LBrace ||
		(ps.peek(1).Kind == scanner.Lt && !ps.isTypeName(ps.tok().Text))) {
		nameTok := ps.next()
		ps.declareType(nameTok.Text)
		d := &ast.ExternDecl{Pos: pos, Annotations: annos, Name: nameTok.Text}
		ps.pushScope()
		defer ps.popScope()
		d.TypeParams = ps.typeParams()
		ps.expect(scanner.LBrace)
		for !ps.is(scanner.RBrace) {
			ma := ps.annotations()
			mpos := ps.tok().Pos
			abstract := ps.accept(scanner.Abstract)
			// constructor: Name(params);
			if ps.is(scanner.Ident) && ps.tok().Text == d.Name && ps.peek(1).Kind == scanner.LParen {
				ps.next()
				params := ps.params()
				ps.expect(scanner.Semi)
				d.Methods = append(d.Methods, &ast.FunctionProto{Pos: mpos, Annotations: ma, Name: d.Name, Params: params})
				continue
			}
			ps.pushScope()
			ret := ps.typeRef()
			mn := ps.name()
			fp := &ast.FunctionProto{Pos: mpos, Annotations: ma, ReturnType: ret, Name: mn.Text, Abstract: abstract}
			fp.TypeParams = ps.typeParams()
			fp.Params = ps.params()
			ps.popScope()
			ps.expect(scanner.Semi)
			d.Methods = append(d.Methods, fp)
		}
		ps.expect(scanner.RBrace)
		return d
	}
	ps.pushScope()
	// the return type may mention the function's own type parameters,
	// which appear after the name: pre-scan for them.
	ps.prescanTypeParams()
	ret := ps.typeRef()
	nameTok := ps.name()
	fp := &ast.FunctionProto{Pos: pos, Annotations: annos, ReturnType: ret, Name: nameTok.Text}
	fp.TypeParams = ps.typeParams()
	fp.Params = ps.params()
	ps.popScope()
	ps.expect(scanner.Semi)
	return &ast.ExternFuncDecl{Proto: fp}
}

// prescanTypeParams looks ahead for `name <T, U> (` after a return type and
// declares T and U, so that a return type such as `T` parses as a type.
func (ps *parser) prescanTypeParams() {
	for i := ps.p; i < len(ps.toks)-2 && i < ps.p+64; i++ {
		if ps.toks[i].Kind == scanner.LParen || ps.toks[i].Kind == scanner.Semi || ps.toks[i].Kind == scanner.LBrace {
			return
		}
		if ps.toks[i].Kind == scanner.Ident && ps.toks[i+1].Kind == scanner.Lt && !ps.isTypeName(ps.toks[i].Text) {
			j := i + 2
			for j < len(ps.toks) && ps.toks[j].Kind == scanner.Ident {
				ps.declareType(ps.toks[j].Text)
				j++
				if ps.toks[j].Kind != scanner.Comma {
					break
				}
				j++
			}
			return
		}
	}
}

func (ps *parser) params() []*ast.Param {
	ps.expect(scanner.LParen)
	var out []*ast.Param
	for !ps.is(scanner.RParen) {
		annos := ps.annotations()
		pos := ps.tok().Pos
		dir := ast.None
		switch {
		case ps.accept(scanner.In):
			dir = ast.In
		case ps.accept(scanner.Out):
			dir = ast.Out
		case ps.accept(scanner.Inout):
			dir = ast.InOut
		}
		typ := ps.typeRef()
		nameTok := ps.name()
		p := &ast.Param{Pos: pos, Annotations: annos, Dir: dir, Type: typ, Name: nameTok.Text}
		if ps.accept(scanner.Assign) {
			p.Default = ps.expr()
		}
		out = append(out, p)
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.RParen)
	return out
}

func (ps *parser) actionDecl(annos ast.Annotations) *ast.ActionDecl {
	pos := ps.expect(scanner.Action).Pos
	nameTok := ps.name()
	d := &ast.ActionDecl{Pos: pos, Annotations: annos, Name: nameTok.Text}
	d.Params = ps.params()
	d.Body = ps.block()
	return d
}

func (ps *parser) packageDecl(annos ast.Annotations) *ast.PackageDecl {
	pos := ps.expect(scanner.Package).Pos
	nameTok := ps.name()
	ps.declareType(nameTok.Text)
	d := &ast.PackageDecl{Pos: pos, Annotations: annos, Name: nameTok.Text}
	ps.pushScope()
	defer ps.popScope()
	d.TypeParams = ps.typeParams()
	d.Params = ps.params()
	ps.expect(scanner.Semi)
	return d
}

func (ps *parser) parserDecl(annos ast.Annotations) ast.Decl {
	pos := ps.expect(scanner.Parser).Pos
	nameTok := ps.name()
	ps.declareType(nameTok.Text)
	ps.pushScope()
	defer ps.popScope()
	tps := ps.typeParams()
	params := ps.params()
	if ps.accept(scanner.Semi) {
		return &ast.BlockTypeDecl{Pos: pos, Annotations: annos, IsParser: true, Name: nameTok.Text, TypeParams: tps, Params: params}
	}
	d := &ast.ParserDecl{Pos: pos, Annotations: annos, Name: nameTok.Text, TypeParams: tps, Params: params}
	if ps.is(scanner.LParen) {
		d.CtorParams = ps.params()
	}
	ps.expect(scanner.LBrace)
	for !ps.is(scanner.RBrace) {
		if ps.is(scanner.EOF) {
			ps.fail("unexpected end of file in parser %s", d.Name)
		}
		annos := ps.annotations()
		if ps.is(scanner.State) {
			d.States = append(d.States, ps.parserState(annos))
			continue
		}
		if len(annos) > 0 {
			// put the annotations back by re-parsing: simplest is to
			// attach them to the declaration below.
			decl := ps.localDeclAfterAnnos(annos)
			if decl != nil {
				d.Locals = append(d.Locals, decl)
			}
			continue
		}
		decl := ps.declaration(false)
		if decl != nil {
			d.Locals = append(d.Locals, decl)
		}
	}
	ps.expect(scanner.RBrace)
	return d
}

// localDeclAfterAnnos parses a local declaration whose annotations have
// already been read.
func (ps *parser) localDeclAfterAnnos(annos ast.Annotations) ast.Decl {
	d := ps.declaration(false)
	if d == nil {
		return nil
	}
	switch x := d.(type) {
	case *ast.ConstDecl:
		x.Annotations = append(annos, x.Annotations...)
	case *ast.VarDecl:
		x.Annotations = append(annos, x.Annotations...)
	case *ast.InstanceDecl:
		x.Annotations = append(annos, x.Annotations...)
	case *ast.ActionDecl:
		x.Annotations = append(annos, x.Annotations...)
	case *ast.TableDecl:
		x.Annotations = append(annos, x.Annotations...)
	case *ast.ValueSetDecl:
		x.Annotations = append(annos, x.Annotations...)
	}
	return d
}

func (ps *parser) parserState(annos ast.Annotations) *ast.ParserState {
	pos := ps.expect(scanner.State).Pos
	nameTok := ps.name()
	st := &ast.ParserState{Pos: pos, Annotations: annos, Name: nameTok.Text}
	ps.expect(scanner.LBrace)
	for !ps.is(scanner.RBrace) && !ps.is(scanner.Transition) {
		if ps.is(scanner.EOF) {
			ps.fail("unexpected end of file in state %s", st.Name)
		}
		s := ps.statement()
		if s != nil {
			st.Stmts = append(st.Stmts, s)
		}
	}
	if ps.is(scanner.Transition) {
		tpos := ps.next().Pos
		tr := &ast.Transition{Pos: tpos}
		if ps.is(scanner.Select) {
			tr.Select = ps.selectExpr()
			ps.accept(scanner.Semi)
		} else {
			t := ps.name()
			tr.Next = &ast.Ident{Pos: t.Pos, Name: t.Text}
			ps.expect(scanner.Semi)
		}
		st.Transition = tr
	}
	ps.expect(scanner.RBrace)
	return st
}

func (ps *parser) selectExpr() *ast.SelectExpr {
	pos := ps.expect(scanner.Select).Pos
	se := &ast.SelectExpr{Pos: pos}
	ps.expect(scanner.LParen)
	for !ps.is(scanner.RParen) {
		se.Keys = append(se.Keys, ps.expr())
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.RParen)
	ps.expect(scanner.LBrace)
	for !ps.is(scanner.RBrace) {
		if ps.is(scanner.EOF) {
			ps.fail("unexpected end of file in select")
		}
		cpos := ps.tok().Pos
		ks := ps.keyset()
		ps.expect(scanner.Colon)
		t := ps.name()
		ps.expect(scanner.Semi)
		se.Cases = append(se.Cases, &ast.SelectCase{Pos: cpos, Keyset: ks, State: &ast.Ident{Pos: t.Pos, Name: t.Text}})
	}
	ps.expect(scanner.RBrace)
	return se
}

// keyset parses a select or entry keyset: default, _, a simple keyset, or a
// parenthesised tuple of them.
func (ps *parser) keyset() ast.Expr {
	if ps.is(scanner.LParen) && ps.keysetTupleAhead() {
		pos := ps.next().Pos
		l := &ast.ListExpr{Pos: pos}
		for !ps.is(scanner.RParen) {
			l.Elems = append(l.Elems, ps.simpleKeyset())
			if !ps.accept(scanner.Comma) {
				break
			}
		}
		ps.expect(scanner.RParen)
		return l
	}
	return ps.simpleKeyset()
}

// keysetTupleAhead decides whether a `(` opens a keyset tuple rather than a
// parenthesised expression: it does when a top-level comma appears before
// the matching `)`, or when the parenthesis holds a lone default/_.
func (ps *parser) keysetTupleAhead() bool {
	depth := 0
	for i := ps.p; i < len(ps.toks); i++ {
		switch ps.toks[i].Kind {
		case scanner.LParen, scanner.LBrace, scanner.LBracket:
			depth++
		case scanner.RParen, scanner.RBrace, scanner.RBracket:
			depth--
			if depth == 0 {
				// `(x)` followed by `:` is a one-element tuple only if
				// it contains default or _.
				inner := ps.toks[ps.p+1 : i]
				return len(inner) == 1 && (inner[0].Kind == scanner.Default || inner[0].Kind == scanner.Underscore)
			}
		case scanner.Comma:
			if depth == 1 {
				return true
			}
		case scanner.EOF:
			return false
		}
	}
	return false
}

func (ps *parser) simpleKeyset() ast.Expr {
	t := ps.tok()
	switch t.Kind {
	case scanner.Default:
		ps.next()
		return &ast.DefaultExpr{Pos: t.Pos}
	case scanner.Underscore:
		ps.next()
		return &ast.DontCareExpr{Pos: t.Pos}
	}
	e := ps.expr()
	switch {
	case ps.is(scanner.Mask):
		p := ps.next().Pos
		m := ps.expr()
		return &ast.MaskExpr{Pos: p, Value: e, Mask: m}
	case ps.is(scanner.DotDot):
		p := ps.next().Pos
		h := ps.expr()
		return &ast.RangeExpr{Pos: p, Lo: e, Hi: h}
	}
	return e
}

func (ps *parser) controlDecl(annos ast.Annotations) ast.Decl {
	pos := ps.expect(scanner.Control).Pos
	nameTok := ps.name()
	ps.declareType(nameTok.Text)
	ps.pushScope()
	defer ps.popScope()
	tps := ps.typeParams()
	params := ps.params()
	if ps.accept(scanner.Semi) {
		return &ast.BlockTypeDecl{Pos: pos, Annotations: annos, Name: nameTok.Text, TypeParams: tps, Params: params}
	}
	d := &ast.ControlDecl{Pos: pos, Annotations: annos, Name: nameTok.Text, TypeParams: tps, Params: params}
	if ps.is(scanner.LParen) {
		d.CtorParams = ps.params()
	}
	ps.expect(scanner.LBrace)
	for !ps.is(scanner.Apply) {
		if ps.is(scanner.EOF) || ps.is(scanner.RBrace) {
			ps.fail("control %s has no apply block", d.Name)
		}
		annos := ps.annotations()
		var decl ast.Decl
		if len(annos) > 0 {
			decl = ps.localDeclAfterAnnos(annos)
		} else {
			decl = ps.declaration(false)
		}
		if decl != nil {
			d.Locals = append(d.Locals, decl)
		}
	}
	ps.expect(scanner.Apply)
	d.Body = ps.block()
	ps.expect(scanner.RBrace)
	return d
}

func (ps *parser) valueSetDecl(annos ast.Annotations) *ast.ValueSetDecl {
	pos := ps.expect(scanner.ValueSet).Pos
	ps.expect(scanner.Lt)
	et := ps.typeRef()
	ps.expectCloseAngle()
	ps.expect(scanner.LParen)
	size := ps.expr()
	ps.expect(scanner.RParen)
	nameTok := ps.name()
	ps.expect(scanner.Semi)
	return &ast.ValueSetDecl{Pos: pos, Annotations: annos, ElemType: et, Size: size, Name: nameTok.Text}
}

func (ps *parser) tableDecl(annos ast.Annotations) *ast.TableDecl {
	pos := ps.expect(scanner.Table).Pos
	nameTok := ps.name()
	d := &ast.TableDecl{Pos: pos, Annotations: annos, Name: nameTok.Text}
	ps.expect(scanner.LBrace)
	for !ps.is(scanner.RBrace) {
		if ps.is(scanner.EOF) {
			ps.fail("unexpected end of file in table %s", d.Name)
		}
		d.Properties = append(d.Properties, ps.tableProperty())
	}
	ps.expect(scanner.RBrace)
	return d
}

func (ps *parser) tableProperty() ast.TableProperty {
	annos := ps.annotations()
	pos := ps.tok().Pos
	isConst := ps.accept(scanner.Const)
	t := ps.tok()
	switch t.Kind {
	case scanner.Key:
		ps.next()
		ps.expect(scanner.Assign)
		ps.expect(scanner.LBrace)
		kp := &ast.KeyProperty{Pos: pos}
		for !ps.is(scanner.RBrace) {
			ka := ps.annotations()
			epos := ps.tok().Pos
			e := ps.expr()
			ps.expect(scanner.Colon)
			mk := ps.name()
			ka = append(ka, ps.annotations()...)
			ps.expect(scanner.Semi)
			kp.Elements = append(kp.Elements, &ast.KeyElement{Pos: epos, Annotations: ka, Expr: e, MatchKind: mk.Text, MatchPos: mk.Pos})
		}
		ps.expect(scanner.RBrace)
		ps.accept(scanner.Semi)
		return kp
	case scanner.Actions:
		ps.next()
		ps.expect(scanner.Assign)
		ps.expect(scanner.LBrace)
		ap := &ast.ActionsProperty{Pos: pos}
		for !ps.is(scanner.RBrace) {
			ap.Actions = append(ap.Actions, ps.actionRef(true))
			ps.expect(scanner.Semi)
		}
		ps.expect(scanner.RBrace)
		ps.accept(scanner.Semi)
		return ap
	case scanner.Entries:
		ps.next()
		ps.expect(scanner.Assign)
		ps.expect(scanner.LBrace)
		ep := &ast.EntriesProperty{Pos: pos, Const: isConst}
		for !ps.is(scanner.RBrace) {
			if ps.is(scanner.EOF) {
				ps.fail("unexpected end of file in entries")
			}
			ep.Entries = append(ep.Entries, ps.entry())
		}
		ps.expect(scanner.RBrace)
		ps.accept(scanner.Semi)
		return ep
	}
	nameTok := ps.name()
	ps.expect(scanner.Assign)
	val := ps.expr()
	ps.expect(scanner.Semi)
	return &ast.ValueProperty{Pos: pos, Annotations: annos, Const: isConst, Name: nameTok.Text, Value: val}
}

func (ps *parser) actionRef(allowAnnos bool) *ast.ActionRef {
	var annos ast.Annotations
	if allowAnnos {
		annos = ps.annotations()
	}
	pos := ps.tok().Pos
	global := ps.accept(scanner.Dot)
	t := ps.name()
	ar := &ast.ActionRef{Pos: pos, Annotations: annos, Name: &ast.Ident{Pos: t.Pos, Name: t.Text, Global: global}}
	if ps.is(scanner.LParen) {
		ar.Args = ps.args()
		if ar.Args == nil {
			ar.Args = []*ast.Arg{}
		}
	}
	return ar
}

func (ps *parser) entry() *ast.Entry {
	annos := ps.annotations()
	pos := ps.tok().Pos
	e := &ast.Entry{Pos: pos, Annotations: annos}
	e.Const = ps.accept(scanner.Const)
	if ps.is(scanner.Priority) {
		ps.next()
		ps.expect(scanner.Assign)
		e.Priority = ps.expr()
		ps.expect(scanner.Colon)
	}
	ks := ps.keyset()
	if l, ok := ks.(*ast.ListExpr); ok {
		e.Keys = l.Elems
	} else {
		e.Keys = []ast.Expr{ks}
	}
	ps.expect(scanner.Colon)
	e.Action = ps.actionRef(false)
	e.Annotations = append(e.Annotations, ps.annotations()...)
	ps.expect(scanner.Semi)
	return e
}

func (ps *parser) instanceRest(annos ast.Annotations, typ ast.Type) *ast.InstanceDecl {
	args := ps.args()
	nameTok := ps.name()
	d := &ast.InstanceDecl{Pos: typ.Position(), Annotations: annos, Type: typ, Args: args, Name: nameTok.Text}
	if ps.is(scanner.Assign) {
		// abstract method implementations: `= { ... }`
		ps.next()
		ps.expect(scanner.LBrace)
		for !ps.is(scanner.RBrace) {
			if ps.is(scanner.EOF) {
				ps.fail("unexpected end of file in instance initializer")
			}
			fa := ps.annotations()
			ft := ps.typeRef()
			fn := ps.name()
			d.Init = append(d.Init, ps.functionRest(fa, ft, fn))
		}
		ps.expect(scanner.RBrace)
	}
	ps.expect(scanner.Semi)
	return d
}

func (ps *parser) functionRest(annos ast.Annotations, ret ast.Type, nameTok scanner.Token) *ast.FunctionDecl {
	ps.pushScope()
	defer ps.popScope()
	fp := &ast.FunctionProto{Pos: ret.Position(), Annotations: annos, ReturnType: ret, Name: nameTok.Text}
	fp.TypeParams = ps.typeParams()
	fp.Params = ps.params()
	return &ast.FunctionDecl{Proto: fp, Body: ps.block()}
}

func (ps *parser) varRest(annos ast.Annotations, typ ast.Type, nameTok scanner.Token) *ast.VarDecl {
	d := &ast.VarDecl{Pos: typ.Position(), Annotations: annos, Type: typ, Name: nameTok.Text}
	if ps.accept(scanner.Assign) {
		d.Init = ps.expr()
	}
	ps.expect(scanner.Semi)
	return d
}

// ---- types ----

// startsType reports whether the current token can begin a type.
func (ps *parser) startsType() bool {
	t := ps.tok()
	switch t.Kind {
	case scanner.Bit, scanner.IntType, scanner.Varbit, scanner.Bool, scanner.ErrorKw,
		scanner.StringType, scanner.Void, scanner.Tuple, scanner.MatchKind:
		return true
	case scanner.List:
		return ps.peek(1).Kind == scanner.Lt
	case scanner.Dot:
		n := ps.peek(1)
		return n.Kind == scanner.Ident && ps.isTypeName(n.Text)
	case scanner.Ident:
		return ps.isTypeName(t.Text)
	}
	return false
}

func (ps *parser) expectCloseAngle() {
	ps.expect(scanner.Gt)
}

func (ps *parser) typeRef() ast.Type {
	t := ps.tok()
	var typ ast.Type
	switch t.Kind {
	case scanner.Bit, scanner.IntType:
		ps.next()
		bt := &ast.BitType{Pos: t.Pos, Signed: t.Kind == scanner.IntType}
		if ps.is(scanner.Lt) {
			ps.next()
			bt.Width = ps.widthExpr()
			ps.expectCloseAngle()
		} else if t.Kind == scanner.IntType {
			typ = &ast.BaseType{Pos: t.Pos, Kind: "int"}
			break
		}
		typ = bt
	case scanner.Varbit:
		ps.next()
		ps.expect(scanner.Lt)
		vt := &ast.VarbitType{Pos: t.Pos, Width: ps.widthExpr()}
		ps.expectCloseAngle()
		typ = vt
	case scanner.Bool, scanner.ErrorKw, scanner.StringType, scanner.Void, scanner.MatchKind:
		ps.next()
		typ = &ast.BaseType{Pos: t.Pos, Kind: t.Text}
	case scanner.Tuple, scanner.List:
		ps.next()
		tt := &ast.TupleType{Pos: t.Pos, List: t.Kind == scanner.List}
		ps.expect(scanner.Lt)
		for !ps.is(scanner.Gt) {
			tt.Elems = append(tt.Elems, ps.typeArg())
			if !ps.accept(scanner.Comma) {
				break
			}
		}
		ps.expectCloseAngle()
		typ = tt
	case scanner.Underscore:
		ps.next()
		return &ast.DontCareType{Pos: t.Pos}
	case scanner.Dot, scanner.Ident:
		global := ps.accept(scanner.Dot)
		nt := ps.tok()
		if nt.Kind != scanner.Ident {
			ps.fail("expected a type, found %s", nt)
		}
		ps.next()
		named := &ast.NamedType{Pos: t.Pos, Name: nt.Text, Global: global}
		typ = named
		if ps.is(scanner.Lt) {
			ps.next()
			st := &ast.SpecializedType{Pos: t.Pos, Base: named}
			for !ps.is(scanner.Gt) {
				st.Args = append(st.Args, ps.typeArg())
				if !ps.accept(scanner.Comma) {
					break
				}
			}
			ps.expectCloseAngle()
			typ = st
		}
	default:
		ps.fail("expected a type, found %s", t)
	}
	for ps.is(scanner.LBracket) {
		p := ps.next().Pos
		size := ps.expr()
		ps.expect(scanner.RBracket)
		typ = &ast.StackType{Pos: p, Elem: typ, Size: size}
	}
	return typ
}

func (ps *parser) typeArg() ast.Type {
	if ps.is(scanner.Underscore) {
		return &ast.DontCareType{Pos: ps.next().Pos}
	}
	return ps.typeRef()
}

// widthExpr parses the width in bit<...>: an integer, a parenthesised
// expression, or a constant name.
func (ps *parser) widthExpr() ast.Expr {
	t := ps.tok()
	switch t.Kind {
	case scanner.Int:
		ps.next()
		return ps.intLit(t)
	case scanner.LParen:
		ps.next()
		e := ps.expr()
		ps.expect(scanner.RParen)
		return e
	case scanner.Ident:
		ps.next()
		return &ast.Ident{Pos: t.Pos, Name: t.Text}
	case scanner.Dot:
		ps.next()
		n := ps.name()
		return &ast.Ident{Pos: t.Pos, Name: n.Text, Global: true}
	}
	ps.fail("expected a width, found %s", t)
	return nil
}

func (ps *parser) intLit(t scanner.Token) *ast.IntLit {
	lit, err := scanner.ParseInt(t.Text)
	if err != nil {
		ps.errorf(t.Pos, "%v", err)
		return &ast.IntLit{Pos: t.Pos, Value: newInt(0), Text: t.Text}
	}
	return &ast.IntLit{Pos: t.Pos, Value: lit.Value, Width: lit.Width, Signed: lit.Signed, Sized: lit.Sized, Text: t.Text}
}

func (ps *parser) String() string { return fmt.Sprintf("parser at %s", ps.tok().Pos) }
