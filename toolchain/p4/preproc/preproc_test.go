package preproc

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/terrapin/terrapin/toolchain/p4/scanner"
)

// files is a fake file system for #include tests.
type files map[string]string

func (f files) read(path string) ([]byte, error) {
	if s, ok := f[path]; ok {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("no such file")
}

// tokens runs the preprocessor and returns the program's tokens as text.
func tokens(t *testing.T, fs files, cfg Config) (string, scanner.ErrorList) {
	t.Helper()
	cfg.ReadFile = fs.read
	out, errs := Run("main.p4", cfg)
	sc := scanner.New("main.p4", out)
	var parts []string
	for _, tok := range sc.All() {
		if tok.Kind == scanner.EOF {
			break
		}
		parts = append(parts, tok.Text)
	}
	return strings.Join(parts, " "), append(errs, sc.Errors...)
}

func TestExpansion(t *testing.T) {
	tests := []struct {
		name, src, want string
		defines         map[string]string
	}{
		{"object macro", "#define N 8\nbit<N> x;", "bit < 8 > x ;", nil},
		{"nested macros", "#define A B\n#define B 3\nA;", "3 ;", nil},
		{"function macro", "#define ADD(a, b) ((a) + (b))\nx = ADD(1, y);", "x = ( ( 1 ) + ( y ) ) ;", nil},
		{"macro args across lines", "#define F(a, b) a b\nF(x,\n  y);", "x y ;", nil},
		{"no expansion in strings", "#define X 1\nlog(\"X\");", "log ( X ) ;", nil},
		{"no expansion in comments", "#define X 1\n// X\n/* X */ y;", "y ;", nil},
		{"literal letters are not macros", "#define w 7\n8w5;", "8w5 ;", nil},
		{"self reference stops", "#define X X + 1\nX;", "X + 1 ;", nil},
		{"undef", "#define X 1\n#undef X\nX;", "X ;", nil},
		{"command-line define", "V;", "42 ;", map[string]string{"V": "42"}},
		{"stringify and paste", "#define S(x) #x\n#define C(a, b) a ## b\nS(hi); C(fo, o);", "hi ; foo ;", nil},
		{"ifdef", "#define A\n#ifdef A\nyes;\n#else\nno;\n#endif", "yes ;", nil},
		{"ifndef", "#ifndef A\nyes;\n#endif", "yes ;", nil},
		{"if elif else", "#define V 2\n#if V == 1\none;\n#elif V == 2\ntwo;\n#else\nother;\n#endif", "two ;", nil},
		{"defined()", "#define A\n#if defined(A) && !defined(B)\nok;\n#endif", "ok ;", nil},
		{"arithmetic", "#if (1 << 4) + 3 * 2 == 22 && 7 % 4 == 3\nok;\n#endif", "ok ;", nil},
		{"nested conditionals", "#if 0\n#if 1\nno;\n#endif\n#else\nyes;\n#endif", "yes ;", nil},
		{"undefined name is 0", "#if UNDEFINED\nno;\n#else\nyes;\n#endif", "yes ;", nil},
		{"line continuation", "#define LONG a \\\n b\nLONG;", "a b ;", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := tokens(t, files{"main.p4": tc.src}, Config{Defines: tc.defines})
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIncludes(t *testing.T) {
	fs := files{
		"main.p4":         "#include \"dir/a.p4\"\n#include <sys.p4>\nmain;",
		"dir/a.p4":        "#include \"b.p4\"\na;",
		"dir/b.p4":        "b;",
		"/inc/sys.p4":     "sys;",
		"once.p4":         "#pragma once\nonce;",
		"twice.p4":        "#include \"once.p4\"\n#include \"once.p4\"\n",
		"guard.p4":        "#ifndef G\n#define G\nguarded;\n#endif\n",
		"guardtwice.p4":   "#include \"guard.p4\"\n#include \"guard.p4\"\n",
		"builtin_user.p4": "#include <core.p4>\nuser;",
	}
	got, errs := tokens(t, fs, Config{IncludeDirs: []string{"/inc"}})
	if len(errs) > 0 || got != "b ; a ; sys ; main ;" {
		t.Errorf("includes: got %q, errors %v", got, errs)
	}
	fs["main.p4"] = "#include \"twice.p4\"\n#include \"guardtwice.p4\"\n"
	got, errs = tokens(t, fs, Config{})
	if len(errs) > 0 || got != "once ; guarded ;" {
		t.Errorf("include guards: got %q, errors %v", got, errs)
	}
	fs["main.p4"] = "#include <core.p4>\nx;"
	got, errs = tokens(t, fs, Config{Builtin: fstest.MapFS{"core.p4": {Data: []byte("core;")}}})
	if len(errs) > 0 || got != "core ; x ;" {
		t.Errorf("builtin include: got %q, errors %v", got, errs)
	}
}

// TestPositions checks that tokens keep their original file and line
// through includes and removed lines.
func TestPositions(t *testing.T) {
	fs := files{
		"main.p4": "#define X 1\n#include \"inc.p4\"\n#if 0\nno;\n#endif\nhere;",
		"inc.p4":  "\n\nincluded;",
	}
	out, errs := Run("main.p4", Config{ReadFile: fs.read})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	toks := scanner.New("main.p4", out).All()
	want := []scanner.Pos{{File: "inc.p4", Line: 3, Col: 1}, {File: "main.p4", Line: 6, Col: 1}}
	if toks[0].Pos != want[0] || toks[2].Pos != want[1] {
		t.Errorf("positions: got %v and %v, want %v", toks[0].Pos, toks[2].Pos, want)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"missing include", "x;\n#include \"nope.p4\"", 2, "cannot find include file"},
		{"unterminated if", "#ifdef A\nx;", 1, "unterminated conditional"},
		{"endif without if", "x;\n#endif", 2, "#endif without #if"},
		{"else after else", "#if 1\n#else\n#else\n#endif", 3, "#else after #else"},
		{"error directive", "#error stop here", 1, "#error stop here"},
		{"unknown directive", "#frobnicate", 1, "unknown preprocessor directive"},
		{"bad expression", "#if 1 +\n#endif", 1, "missing operand"},
		{"wrong macro arity", "#define F(a) a\nF(1, 2);", 2, "expects 1 arguments"},
		{"division by zero", "#if 1 / 0\n#endif", 1, "division by zero"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Run("main.p4", Config{ReadFile: files{"main.p4": tc.src}.read})
			if len(errs) == 0 {
				t.Fatalf("no error")
			}
			if errs[0].Pos.Line != tc.line || !strings.Contains(errs[0].Msg, tc.msg) {
				t.Errorf("got %v, want line %d containing %q", errs[0], tc.line, tc.msg)
			}
		})
	}
}
