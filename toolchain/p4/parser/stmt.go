package parser

import (
	"math/big"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

func newInt(v int64) *big.Int { return big.NewInt(v) }

// maxDepth bounds statement and expression nesting, so that hostile input
// cannot exhaust the stack.
const maxDepth = 500

func (ps *parser) enter() {
	ps.depth++
	if ps.depth > maxDepth {
		ps.fail("nesting too deep")
	}
}

func (ps *parser) leave() { ps.depth-- }

func (ps *parser) block() *ast.BlockStmt {
	return ps.blockWith(nil)
}

func (ps *parser) blockWith(annos ast.Annotations) *ast.BlockStmt {
	ps.enter()
	defer ps.leave()
	pos := ps.expect(scanner.LBrace).Pos
	b := &ast.BlockStmt{Pos: pos, Annotations: annos}
	for !ps.is(scanner.RBrace) {
		if ps.is(scanner.EOF) {
			ps.fail("unexpected end of file: missing }")
		}
		s := ps.statement()
		if s != nil {
			b.Stmts = append(b.Stmts, s)
		}
	}
	b.End = ps.next().Pos
	return b
}

func (ps *parser) statement() ast.Stmt {
	ps.enter()
	defer ps.leave()
	annos := ps.annotations()
	t := ps.tok()
	switch t.Kind {
	case scanner.LBrace:
		return ps.blockWith(annos)
	case scanner.Semi:
		ps.next()
		return &ast.EmptyStmt{Pos: t.Pos}
	case scanner.If:
		ps.next()
		ps.expect(scanner.LParen)
		cond := ps.expr()
		ps.expect(scanner.RParen)
		s := &ast.IfStmt{Pos: t.Pos, Cond: cond, Then: ps.statement()}
		if ps.accept(scanner.Else) {
			s.Else = ps.statement()
		}
		return s
	case scanner.Exit:
		ps.next()
		ps.expect(scanner.Semi)
		return &ast.ExitStmt{Pos: t.Pos}
	case scanner.Return:
		ps.next()
		s := &ast.ReturnStmt{Pos: t.Pos}
		if !ps.is(scanner.Semi) {
			s.Value = ps.expr()
		}
		ps.expect(scanner.Semi)
		return s
	case scanner.Break:
		ps.next()
		ps.expect(scanner.Semi)
		return &ast.BreakStmt{Pos: t.Pos}
	case scanner.Continue:
		ps.next()
		ps.expect(scanner.Semi)
		return &ast.ContinueStmt{Pos: t.Pos}
	case scanner.Switch:
		return ps.switchStmt()
	case scanner.For:
		return ps.forStmt()
	case scanner.Const:
		d := ps.constDecl(annos)
		return &ast.DeclStmt{Decl: d}
	}
	if d := ps.tryLocalDecl(annos); d != nil {
		return &ast.DeclStmt{Decl: d}
	}
	s := ps.simpleStmt()
	ps.expect(scanner.Semi)
	return s
}

// tryLocalDecl parses a variable or instance declaration if one starts
// here, and otherwise leaves the position unchanged.
func (ps *parser) tryLocalDecl(annos ast.Annotations) ast.Decl {
	if !ps.startsType() {
		return nil
	}
	save, saveErrs := ps.p, len(ps.errs)
	var typ ast.Type
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, isBail := r.(bailout); !isBail {
					panic(r)
				}
				ok = false
			}
		}()
		typ = ps.typeRef()
		return ps.is(scanner.Ident) || softKeyword(ps.tok().Kind) || ps.is(scanner.LParen)
	}()
	if !ok {
		ps.p = save
		ps.errs = ps.errs[:saveErrs]
		return nil
	}
	if ps.is(scanner.LParen) {
		return ps.instanceRest(annos, typ)
	}
	nameTok := ps.name()
	return ps.varRest(annos, typ, nameTok)
}

var compoundOps = map[scanner.Kind]scanner.Kind{
	scanner.AddAssign: scanner.Add, scanner.SubAssign: scanner.Sub, scanner.MulAssign: scanner.Mul,
	scanner.DivAssign: scanner.Div, scanner.ModAssign: scanner.Mod, scanner.ShlAssign: scanner.Shl,
	scanner.ShrAssign: ast.ShrOp, scanner.AndAssign: scanner.And, scanner.OrAssign: scanner.Or,
	scanner.XorAssign: scanner.Xor, scanner.SatAddAssign: scanner.SatAdd, scanner.SatSubAssign: scanner.SatSub,
}

// simpleStmt parses an assignment or a call, without the semicolon.
func (ps *parser) simpleStmt() ast.Stmt {
	pos := ps.tok().Pos
	lhs := ps.unary()
	if ps.is(scanner.Assign) {
		p := ps.next().Pos
		rhs := ps.expr()
		return &ast.AssignStmt{Pos: p, LHS: lhs, Op: scanner.Assign, RHS: rhs}
	}
	if op, ok := compoundOps[ps.tok().Kind]; ok {
		p := ps.next().Pos
		rhs := ps.expr()
		return &ast.AssignStmt{Pos: p, LHS: lhs, Op: op, RHS: rhs}
	}
	if call, ok := lhs.(*ast.CallExpr); ok {
		return &ast.CallStmt{Pos: pos, Call: call}
	}
	ps.fail("expected an assignment or a call, found %s", ps.tok())
	return nil
}

func (ps *parser) switchStmt() ast.Stmt {
	pos := ps.expect(scanner.Switch).Pos
	ps.expect(scanner.LParen)
	e := ps.expr()
	ps.expect(scanner.RParen)
	ps.expect(scanner.LBrace)
	s := &ast.SwitchStmt{Pos: pos, Expr: e}
	for !ps.is(scanner.RBrace) {
		if ps.is(scanner.EOF) {
			ps.fail("unexpected end of file in switch")
		}
		c := &ast.SwitchCase{Pos: ps.tok().Pos}
		if ps.accept(scanner.Default) {
			c.Default = true
		} else {
			c.Labels = append(c.Labels, ps.expr())
		}
		ps.expect(scanner.Colon)
		if ps.is(scanner.LBrace) {
			c.Body = ps.block()
		}
		s.Cases = append(s.Cases, c)
	}
	ps.expect(scanner.RBrace)
	return s
}

func (ps *parser) forStmt() ast.Stmt {
	pos := ps.expect(scanner.For).Pos
	ps.expect(scanner.LParen)
	// for (T x in e) / for (x in e)
	if fi := ps.tryForIn(pos); fi != nil {
		return fi
	}
	s := &ast.ForStmt{Pos: pos}
	for !ps.is(scanner.Semi) {
		if d := ps.tryForDecl(); d != nil {
			s.Init = append(s.Init, &ast.DeclStmt{Decl: d})
		} else {
			s.Init = append(s.Init, ps.simpleStmt())
		}
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.Semi)
	if !ps.is(scanner.Semi) {
		s.Cond = ps.expr()
	}
	ps.expect(scanner.Semi)
	for !ps.is(scanner.RParen) {
		s.Update = append(s.Update, ps.simpleStmt())
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.RParen)
	s.Body = ps.statement()
	return s
}

// tryForDecl parses `T x = e` in a for-loop initializer.
func (ps *parser) tryForDecl() *ast.VarDecl {
	if !ps.startsType() {
		return nil
	}
	save := ps.p
	saveErrs := len(ps.errs)
	var typ ast.Type
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, isBail := r.(bailout); !isBail {
					panic(r)
				}
				ok = false
			}
		}()
		typ = ps.typeRef()
		return ps.is(scanner.Ident)
	}()
	if !ok {
		ps.p = save
		ps.errs = ps.errs[:saveErrs]
		return nil
	}
	nameTok := ps.name()
	d := &ast.VarDecl{Pos: typ.Position(), Type: typ, Name: nameTok.Text}
	if ps.accept(scanner.Assign) {
		d.Init = ps.expr()
	}
	return d
}

func (ps *parser) tryForIn(pos scanner.Pos) ast.Stmt {
	// scan to the matching `)` looking for a top-level `in` before any `;`
	depth := 0
	found := false
	for i := ps.p; i < len(ps.toks); i++ {
		k := ps.toks[i].Kind
		if k == scanner.LParen {
			depth++
		}
		if k == scanner.RParen {
			if depth == 0 {
				break
			}
			depth--
		}
		if k == scanner.Semi || k == scanner.EOF {
			break
		}
		if k == scanner.In && depth == 0 {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	fi := &ast.ForInStmt{Pos: pos}
	if ps.peek(1).Kind == scanner.In {
		// P4_16's grammar declares the loop variable: for (T x in e)
		// (§12.8.2); p4c's parser refuses a bare name here
		t := ps.name()
		ps.errorf(ps.peek(0).Pos, "syntax error, unexpected in: a for-in loop declares its variable, for (T %s in ...)", t.Text)
		fi.Var = &ast.Ident{Pos: t.Pos, Name: t.Text}
	} else {
		annos := ps.annotations()
		typ := ps.typeRef()
		t := ps.name()
		fi.Decl = &ast.VarDecl{Pos: typ.Position(), Annotations: annos, Type: typ, Name: t.Text}
		fi.Var = &ast.Ident{Pos: t.Pos, Name: t.Text}
	}
	ps.expect(scanner.In)
	fi.Range = ps.rangeOrExpr()
	ps.expect(scanner.RParen)
	fi.Body = ps.statement()
	return fi
}

func (ps *parser) rangeOrExpr() ast.Expr {
	e := ps.expr()
	if ps.is(scanner.DotDot) {
		p := ps.next().Pos
		return &ast.RangeExpr{Pos: p, Lo: e, Hi: ps.expr()}
	}
	return e
}

// ---- expressions ----

func (ps *parser) expr() ast.Expr {
	ps.enter()
	defer ps.leave()
	c := ps.binary(0)
	if ps.is(scanner.Question) {
		p := ps.next().Pos
		th := ps.expr()
		ps.expect(scanner.Colon)
		el := ps.expr()
		return &ast.TernaryExpr{Pos: p, Cond: c, Then: th, Else: el}
	}
	return c
}

// binary precedence levels, loosest first, as in p4c's grammar (note that
// &, ^ and | bind tighter than comparisons, unlike C).
var binaryLevels = [][]scanner.Kind{
	{scanner.OrOr},
	{scanner.AndAnd},
	{scanner.Eq, scanner.Ne},
	{scanner.Lt, scanner.Gt, scanner.Le, scanner.Ge},
	{scanner.Or},
	{scanner.Xor},
	{scanner.And},
	{scanner.Shl, ast.ShrOp},
	{scanner.Concat, scanner.Add, scanner.Sub, scanner.SatAdd, scanner.SatSub},
	{scanner.Mul, scanner.Div, scanner.Mod},
}

// currentBinaryOp returns the operator at the current position, folding two
// adjacent `>` tokens into a right shift.
func (ps *parser) currentBinaryOp() (scanner.Kind, int) {
	t := ps.tok()
	if t.Kind == scanner.Gt {
		n := ps.peek(1)
		if n.Kind == scanner.Gt && !n.Spaced && n.Pos.Line == t.Pos.Line && n.Pos.Col == t.Pos.Col+1 {
			return ast.ShrOp, 2
		}
	}
	return t.Kind, 1
}

func (ps *parser) binary(level int) ast.Expr {
	if level >= len(binaryLevels) {
		return ps.unary()
	}
	x := ps.binary(level + 1)
	for {
		op, n := ps.currentBinaryOp()
		found := false
		for _, k := range binaryLevels[level] {
			if k == op {
				found = true
			}
		}
		if !found {
			return x
		}
		pos := ps.tok().Pos
		for i := 0; i < n; i++ {
			ps.next()
		}
		y := ps.binary(level + 1)
		x = &ast.BinaryExpr{Pos: pos, Op: op, X: x, Y: y}
	}
}

func (ps *parser) unary() ast.Expr {
	ps.enter()
	defer ps.leave()
	t := ps.tok()
	switch t.Kind {
	case scanner.Not, scanner.Compl, scanner.Sub, scanner.Add:
		ps.next()
		return &ast.UnaryExpr{Pos: t.Pos, Op: t.Kind, X: ps.unary()}
	case scanner.LParen:
		if c := ps.tryCast(); c != nil {
			return c
		}
	}
	return ps.postfix(ps.primary())
}

// tryCast parses `(Type) expr` when the parenthesis holds a type.
func (ps *parser) tryCast() ast.Expr {
	save, saveErrs := ps.p, len(ps.errs)
	lp := ps.next()
	if !ps.startsType() {
		ps.p = save
		return nil
	}
	var typ ast.Type
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, isBail := r.(bailout); !isBail {
					panic(r)
				}
				ok = false
			}
		}()
		typ = ps.typeRef()
		return ps.is(scanner.RParen)
	}()
	if !ok {
		ps.p = save
		ps.errs = ps.errs[:saveErrs]
		return nil
	}
	ps.next() // )
	return &ast.CastExpr{Pos: lp.Pos, Type: typ, X: ps.unary()}
}

func (ps *parser) primary() ast.Expr {
	t := ps.tok()
	switch t.Kind {
	case scanner.Int:
		ps.next()
		return ps.intLit(t)
	case scanner.True, scanner.False:
		ps.next()
		return &ast.BoolLit{Pos: t.Pos, Value: t.Kind == scanner.True}
	case scanner.String:
		ps.next()
		return &ast.StringLit{Pos: t.Pos, Value: t.Text}
	case scanner.This:
		ps.next()
		return &ast.ThisExpr{Pos: t.Pos}
	case scanner.Underscore:
		ps.next()
		return &ast.DontCareExpr{Pos: t.Pos}
	case scanner.Dot:
		ps.next()
		n := ps.name()
		return &ast.Ident{Pos: t.Pos, Name: n.Text, Global: true}
	case scanner.Ident:
		ps.next()
		return &ast.Ident{Pos: t.Pos, Name: t.Text}
	case scanner.LParen:
		ps.next()
		e := ps.expr()
		ps.expect(scanner.RParen)
		return e
	case scanner.LBrace:
		return ps.braceExpr()
	case scanner.InvalidHeader:
		ps.next()
		return &ast.InvalidExpr{Pos: t.Pos}
	case scanner.ErrorKw, scanner.Bit, scanner.IntType, scanner.Varbit, scanner.Bool, scanner.StringType, scanner.Tuple:
		typ := ps.typeRef()
		return &ast.TypeExpr{Pos: t.Pos, Type: typ}
	}
	if softKeyword(t.Kind) {
		ps.next()
		return &ast.Ident{Pos: t.Pos, Name: t.Text}
	}
	ps.fail("expected an expression, found %s", t)
	return nil
}

func (ps *parser) braceExpr() ast.Expr {
	pos := ps.expect(scanner.LBrace).Pos
	// struct initializer: { name = value, ... }
	if (ps.is(scanner.Ident) || softKeyword(ps.tok().Kind)) && ps.peek(1).Kind == scanner.Assign || ps.is(scanner.Ellipsis) {
		se := &ast.StructExpr{Pos: pos}
		for !ps.is(scanner.RBrace) {
			if ps.accept(scanner.Ellipsis) {
				se.Rest = true
				break
			}
			n := ps.name()
			ps.expect(scanner.Assign)
			v := ps.expr()
			se.Fields = append(se.Fields, &ast.NamedField{Pos: n.Pos, Name: n.Text, Value: v})
			if !ps.accept(scanner.Comma) {
				break
			}
		}
		ps.expect(scanner.RBrace)
		return se
	}
	l := &ast.ListExpr{Pos: pos}
	for !ps.is(scanner.RBrace) {
		l.Elems = append(l.Elems, ps.expr())
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.RBrace)
	return l
}

func (ps *parser) postfix(x ast.Expr) ast.Expr {
	for {
		t := ps.tok()
		switch t.Kind {
		case scanner.Dot:
			ps.next()
			n := ps.tok()
			if n.Kind != scanner.Ident && !n.Kind.IsKeyword() {
				ps.fail("expected a member name after '.', found %s", n)
			}
			ps.next()
			x = &ast.MemberExpr{Pos: n.Pos, X: x, Name: n.Text}
		case scanner.LBracket:
			ps.next()
			i := ps.expr()
			if ps.accept(scanner.Colon) {
				lo := ps.expr()
				ps.expect(scanner.RBracket)
				x = &ast.SliceExpr{Pos: t.Pos, X: x, Hi: i, Lo: lo}
				continue
			}
			ps.expect(scanner.RBracket)
			x = &ast.IndexExpr{Pos: t.Pos, X: x, Index: i}
		case scanner.LParen:
			x = &ast.CallExpr{Pos: exprStart(x), Fun: x, Args: ps.args()}
		case scanner.Lt:
			targs, ok := ps.tryTypeArgsCall()
			if !ok {
				return x
			}
			x = &ast.CallExpr{Pos: exprStart(x), Fun: x, TypeArgs: targs, Args: ps.args()}
		default:
			return x
		}
	}
}

// exprStart is the position a call expression is reported at: that of the
// called expression's first token.
func exprStart(e ast.Expr) scanner.Pos {
	for {
		switch x := e.(type) {
		case *ast.MemberExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.CallExpr:
			e = x.Fun
		default:
			return e.Position()
		}
	}
}

// tryTypeArgsCall parses `<types>` when it is followed by `(`, as in
// `b.lookahead<bit<8>>()`; otherwise it restores the position and reports
// false, leaving `<` to be a comparison.
func (ps *parser) tryTypeArgsCall() ([]ast.Type, bool) {
	save, saveErrs := ps.p, len(ps.errs)
	var targs []ast.Type
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, isBail := r.(bailout); !isBail {
					panic(r)
				}
				ok = false
			}
		}()
		ps.expect(scanner.Lt)
		for !ps.is(scanner.Gt) {
			if !ps.startsType() && !ps.is(scanner.Underscore) {
				return false
			}
			targs = append(targs, ps.typeArg())
			if !ps.accept(scanner.Comma) {
				break
			}
		}
		ps.expect(scanner.Gt)
		return ps.is(scanner.LParen)
	}()
	if !ok {
		ps.p = save
		ps.errs = ps.errs[:saveErrs]
		return nil, false
	}
	return targs, true
}

func (ps *parser) args() []*ast.Arg {
	ps.expect(scanner.LParen)
	var args []*ast.Arg
	for !ps.is(scanner.RParen) {
		t := ps.tok()
		a := &ast.Arg{Pos: t.Pos}
		if (t.Kind == scanner.Ident || softKeyword(t.Kind)) && ps.peek(1).Kind == scanner.Assign {
			ps.next()
			ps.next()
			a.Name = t.Text
		}
		if ps.is(scanner.Underscore) && (ps.peek(1).Kind == scanner.Comma || ps.peek(1).Kind == scanner.RParen) {
			a.Value = &ast.DontCareExpr{Pos: ps.next().Pos}
		} else {
			a.Value = ps.expr()
		}
		args = append(args, a)
		if !ps.accept(scanner.Comma) {
			break
		}
	}
	ps.expect(scanner.RParen)
	return args
}
