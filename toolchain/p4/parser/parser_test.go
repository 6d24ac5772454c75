package parser

import (
	"fmt"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/p4/ast"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// sexpr prints an expression fully parenthesised, to check precedence.
func sexpr(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IntLit:
		return x.Text
	case *ast.BoolLit:
		return fmt.Sprint(x.Value)
	case *ast.BinaryExpr:
		op := x.Op.String()
		if x.Op == ast.ShrOp {
			op = ">>"
		}
		return "(" + sexpr(x.X) + " " + op + " " + sexpr(x.Y) + ")"
	case *ast.UnaryExpr:
		return "(" + x.Op.String() + sexpr(x.X) + ")"
	case *ast.TernaryExpr:
		return "(" + sexpr(x.Cond) + " ? " + sexpr(x.Then) + " : " + sexpr(x.Else) + ")"
	case *ast.MemberExpr:
		return sexpr(x.X) + "." + x.Name
	case *ast.IndexExpr:
		return sexpr(x.X) + "[" + sexpr(x.Index) + "]"
	case *ast.SliceExpr:
		return sexpr(x.X) + "[" + sexpr(x.Hi) + ":" + sexpr(x.Lo) + "]"
	case *ast.CastExpr:
		return "(cast " + typeString(x.Type) + " " + sexpr(x.X) + ")"
	case *ast.CallExpr:
		var args []string
		for _, a := range x.Args {
			args = append(args, sexpr(a.Value))
		}
		targs := ""
		if len(x.TypeArgs) > 0 {
			var ts []string
			for _, t := range x.TypeArgs {
				ts = append(ts, typeString(t))
			}
			targs = "<" + strings.Join(ts, ",") + ">"
		}
		return sexpr(x.Fun) + targs + "(" + strings.Join(args, ",") + ")"
	case *ast.ListExpr:
		var es []string
		for _, el := range x.Elems {
			es = append(es, sexpr(el))
		}
		return "{" + strings.Join(es, ",") + "}"
	case *ast.StructExpr:
		var es []string
		for _, f := range x.Fields {
			es = append(es, f.Name+"="+sexpr(f.Value))
		}
		return "{" + strings.Join(es, ",") + "}"
	case *ast.TypeExpr:
		return typeString(x.Type)
	}
	return fmt.Sprintf("<%T>", e)
}

func typeString(t ast.Type) string {
	switch x := t.(type) {
	case *ast.NamedType:
		return x.Name
	case *ast.BitType:
		w := "1"
		if x.Width != nil {
			w = sexpr(x.Width)
		}
		if x.Signed {
			return "int<" + w + ">"
		}
		return "bit<" + w + ">"
	case *ast.BaseType:
		return x.Kind
	case *ast.SpecializedType:
		var as []string
		for _, a := range x.Args {
			as = append(as, typeString(a))
		}
		return x.Base.Name + "<" + strings.Join(as, ",") + ">"
	}
	return fmt.Sprintf("<%T>", t)
}

func TestExpressionPrecedence(t *testing.T) {
	tests := []struct{ src, want string }{
		{"a + b * c", "(a + (b * c))"},
		{"a - b - c", "((a - b) - c)"},
		{"a == b & c", "(a == (b & c))"}, // & binds tighter than == in P4
		{"a < b | c", "(a < (b | c))"},
		{"a && b || c && d", "((a && b) || (c && d))"},
		{"a ++ b + c", "((a ++ b) + c)"},
		{"a << 2 + 1", "(a << (2 + 1))"},
		{"a >> 2", "(a >> 2)"},
		{"x ? y : z ? 1 : 2", "(x ? y : (z ? 1 : 2))"},
		{"!a == b", "((!a) == b)"},
		{"-a * b", "((-a) * b)"},
		{"~a & b", "((~a) & b)"},
		{"a |+| b |-| c", "((a |+| b) |-| c)"},
		{"(bit<8>) x + 1", "((cast bit<8> x) + 1)"},
		{"(bit<8>)(x + 1)", "(cast bit<8> (x + 1))"},
		{"h.f[7:0] == 3", "(h.f[7:0] == 3)"},
		{"hs[i + 1].f", "hs[(i + 1)].f"},
		{"t.apply().hit", "t.apply().hit"},
		{"p.lookahead<bit<16>>()", "p.lookahead<bit<16>>()"},
		{"a < b > c", "((a < b) > c)"},
		{"{1, x + 1}", "{1,(x + 1)}"},
		{"{ a = 1, b = x }", "{a=1,b=x}"},
		{"error.NoError", "error.NoError"},
		{"(x)", "x"},
	}
	for _, tc := range tests {
		e, errs := ParseExpr(tc.src)
		if len(errs) > 0 {
			t.Errorf("%s: %v", tc.src, errs)
			continue
		}
		if got := sexpr(e); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.src, got, tc.want)
		}
	}
}

const program = `
#line 1 "prog.p4"
header h_t { bit<8> a; int<4> b; varbit<16> v; }
struct s_t { h_t h; bit<1> flag; }
typedef bit<9> port_t;
type bit<32> addr_t;
enum bit<8> E { A = 1, B = 2 }
enum Plain { X, Y }
error { Oops }
match_kind { special }
extern thing<T> {
    thing(bit<32> n);
    T get(in T x);
    abstract void cb();
}
extern void f<T>(in T x);
const bit<8> K = 8w3;
parser P(packet_in p, out s_t s) {
    value_set<bit<8>>(4) vs;
    state start {
        p.extract(s.h);
        transition select(s.h.a, s.h.b) {
            (1, _): next;
            (2 &&& 3, 0 .. 5): accept;
            (vs, default): reject;
            default: accept;
        }
    }
    state next { transition accept; }
}
control C(inout s_t s)(bit<8> k) {
    action a(bit<8> x) { s.h.a = x + k; }
    table t {
        key = { s.h.a : exact @name("A"); }
        actions = { a; @defaultonly NoAction; }
        const entries = { 1 : a(2); priority = 3 : 2 : a(4) @priority(1); }
        default_action = a(0);
        size = 16;
    }
    apply {
        bit<8> tmp = 1;
        if (t.apply().hit) { tmp = tmp |+| 1; } else if (tmp > 2) { exit; }
        switch (t.apply().action_run) { a: { } default: { return; } }
        for (bit<8> i = 0; i < 4; i = i + 1) { tmp += i; }
        @atomic { s.flag = (bit<1>) true; }
    }
}
control D(inout s_t s);
package Pkg(C c);
Pkg(C(8w1)) main;
`

func TestProgram(t *testing.T) {
	prog, errs := Parse("prog.p4", program)
	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	var kinds []string
	for _, d := range prog.Decls {
		kinds = append(kinds, fmt.Sprintf("%T:%s", d, d.DeclName()))
	}
	want := []string{"*ast.StructDecl:h_t", "*ast.StructDecl:s_t", "*ast.TypedefDecl:port_t", "*ast.TypedefDecl:addr_t",
		"*ast.EnumDecl:E", "*ast.EnumDecl:Plain", "*ast.ErrorDecl:error", "*ast.MatchKindDecl:match_kind",
		"*ast.ExternDecl:thing", "*ast.ExternFuncDecl:f", "*ast.ConstDecl:K", "*ast.ParserDecl:P",
		"*ast.ControlDecl:C", "*ast.BlockTypeDecl:D", "*ast.PackageDecl:Pkg", "*ast.InstanceDecl:main"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("declarations:\n got %v\nwant %v", kinds, want)
	}
	ctl := prog.Decls[12].(*ast.ControlDecl)
	if len(ctl.CtorParams) != 1 || len(ctl.Locals) != 2 || len(ctl.Body.Stmts) != 5 {
		t.Errorf("control C: %d ctor params, %d locals, %d statements", len(ctl.CtorParams), len(ctl.Locals), len(ctl.Body.Stmts))
	}
	tbl := ctl.Locals[1].(*ast.TableDecl)
	if len(tbl.Properties) != 5 {
		t.Errorf("table t has %d properties, want 5", len(tbl.Properties))
	}
	entries := tbl.Properties[2].(*ast.EntriesProperty)
	if !entries.Const || len(entries.Entries) != 2 || entries.Entries[1].Priority == nil || !entries.Entries[1].Annotations.Has("priority") {
		t.Errorf("entries not parsed as expected: %+v", entries)
	}
	p := prog.Decls[11].(*ast.ParserDecl)
	sel := p.States[0].Transition.Select
	if len(sel.Keys) != 2 || len(sel.Cases) != 4 {
		t.Errorf("select: %d keys, %d cases", len(sel.Keys), len(sel.Cases))
	}
	if pos := p.States[0].Pos; pos.File != "prog.p4" || pos.Line != 18 {
		t.Errorf("state start at %v, want prog.p4:18", pos)
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, src string
		pos       scanner.Pos
		msg       string
	}{
		{"missing semicolon", "const bit<8> x = 1\nconst bit<8> y = 2;", scanner.Pos{File: "e.p4", Line: 2, Col: 1}, "expected ;"},
		{"bad field", "header h { bit<8> ; }", scanner.Pos{File: "e.p4", Line: 1, Col: 19}, "expected a name"},
		{"unclosed block", "control c() { apply { x = 1; }", scanner.Pos{File: "e.p4", Line: 1, Col: 31}, "expected }"},
		{"bad expression", "control c() { apply { x = 1 + ; } }", scanner.Pos{File: "e.p4", Line: 1, Col: 31}, "expected an expression"},
		{"not a statement", "control c() { apply { 1 + 2; } }", scanner.Pos{File: "e.p4", Line: 1, Col: 25}, "expected an assignment or a call"},
		{"no apply", "control c() { }", scanner.Pos{File: "e.p4", Line: 1, Col: 15}, "has no apply block"},
		{"stray token", "header h { bit<8> f; } $", scanner.Pos{File: "e.p4", Line: 1, Col: 24}, "unexpected character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Parse("e.p4", tc.src)
			if len(errs) == 0 {
				t.Fatal("no error reported")
			}
			if errs[0].Pos != tc.pos || !strings.Contains(errs[0].Msg, tc.msg) {
				t.Errorf("got %v, want %v: ...%s...", errs[0], tc.pos, tc.msg)
			}
		})
	}
}

// TestRecovery checks that an error in one declaration does not hide
// errors in later ones.
func TestRecovery(t *testing.T) {
	src := "header h { bit<8> }\nstruct s { h x; }\nconst bit<8> c = ;\n"
	prog, errs := Parse("r.p4", src)
	if len(errs) != 2 {
		t.Fatalf("got %d errors (%v), want 2", len(errs), errs)
	}
	if errs[0].Pos.Line != 1 || errs[1].Pos.Line != 3 {
		t.Errorf("errors at lines %d and %d, want 1 and 3", errs[0].Pos.Line, errs[1].Pos.Line)
	}
	if len(prog.Decls) != 1 {
		t.Errorf("the struct between the errors should still be parsed; got %d declarations", len(prog.Decls))
	}
}

func TestDeepNesting(t *testing.T) {
	src := "const bit<8> x = " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + ";"
	_, errs := Parse("deep.p4", src)
	if len(errs) == 0 || !strings.Contains(errs[0].Msg, "nesting too deep") {
		t.Errorf("want a nesting error, got %v", errs)
	}
}

// TestPragma: `@pragma NAME ...` takes the rest of its line as the
// annotation @NAME's body; the next line starts a new declaration.
func TestPragma(t *testing.T) {
	tests := []struct {
		name, src string
		anno      string
		body      int // tokens in the body
	}{
		{"with body", "@pragma my_note 1 2\nheader h { bit<8> f; }", "my_note", 2},
		{"name only", "@pragma keep_me\nheader h { bit<8> f; }", "keep_me", 0},
		{"string body", "@pragma doc \"x y\"\nheader h { bit<8> f; }", "doc", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog, errs := Parse("p.p4", tc.src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if len(prog.Decls) != 1 {
				t.Fatalf("%d declarations", len(prog.Decls))
			}
			sd, ok := prog.Decls[0].(*ast.StructDecl)
			if !ok || len(sd.Annotations) != 1 {
				t.Fatalf("declaration %T with annotations %v", prog.Decls[0], sd)
			}
			a := sd.Annotations[0]
			if a.Name != tc.anno || len(a.Tokens) != tc.body || a.HasBody != (tc.body > 0) {
				t.Errorf("annotation @%s with %d tokens, want @%s with %d", a.Name, len(a.Tokens), tc.anno, tc.body)
			}
		})
	}
	if _, errs := Parse("p.p4", "@pragma\nheader h { bit<8> f; }"); len(errs) == 0 {
		t.Errorf("@pragma without a name must be an error")
	}
}
