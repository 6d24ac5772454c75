// Package compiler runs terrapin-p4c's whole pipeline on one program:
// preprocess, parse, type-check, lower to the IR, and emit BMv2 JSON and
// P4Info. The command and the tests share it.
package compiler

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/terrapin/terrapin/toolchain/bmv2json"
	"github.com/terrapin/terrapin/toolchain/ir"
	"github.com/terrapin/terrapin/toolchain/lower"
	"github.com/terrapin/terrapin/toolchain/p4/parser"
	"github.com/terrapin/terrapin/toolchain/p4/preproc"
	"github.com/terrapin/terrapin/toolchain/p4/scanner"
	"github.com/terrapin/terrapin/toolchain/p4/types"
	"github.com/terrapin/terrapin/toolchain/p4include"
	"github.com/terrapin/terrapin/toolchain/p4info"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

// Options configure one compilation.
type Options struct {
	// Program is the path of the P4 source file.
	Program string
	// IncludeDirs are searched for #include files before the bundled
	// architecture files.
	IncludeDirs []string
	// Defines are -D macros (value "1" when none was given).
	Defines map[string]string
	// ReadFile overrides how files are read (tests); nil reads the disk.
	ReadFile func(string) ([]byte, error)
}

// Result is a compiled program.
type Result struct {
	IR       *ir.Program
	JSON     []byte
	P4Info   *p4v1.P4Info
	Warnings scanner.ErrorList
}

// Compile compiles a program. Errors carry positions; on error the result
// is nil.
//
// A bug in the compiler must not crash its caller: a panic is turned into
// an "internal error" diagnostic (the fuzz tests treat one as a failure).
func Compile(opts Options) (res *Result, errs scanner.ErrorList) {
	defer func() {
		if r := recover(); r != nil {
			res = nil
			errs = scanner.ErrorList{{Pos: scanner.Pos{File: opts.Program}, Msg: fmt.Sprintf("internal error: %v", r)}}
		}
	}()
	return compile(opts)
}

func compile(opts Options) (*Result, scanner.ErrorList) {
	read := opts.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	// p4c-bm2-ss defines __TARGET_BMV2__ for every program (after the
	// command line's -D and -U), so programs can tell which back end
	// compiles them.
	defines := map[string]string{}
	for k, v := range opts.Defines {
		defines[k] = v
	}
	defines["__TARGET_BMV2__"] = "1"
	src, errs := preproc.Run(opts.Program, preproc.Config{
		IncludeDirs: opts.IncludeDirs,
		Defines:     defines,
		Builtin:     p4include.Files,
		ReadFile:    read,
	})
	if len(errs) > 0 {
		return nil, sorted(errs, opts.Program)
	}
	prog, errs := parser.Parse(opts.Program, src)
	if len(errs) > 0 {
		return nil, sorted(errs, opts.Program)
	}
	info, errs := types.Check(prog)
	if len(errs) > 0 {
		return nil, sorted(errs, opts.Program)
	}
	lowered, errs := lowerChecked(info, opts.Program)
	if len(errs) > 0 {
		return nil, sorted(errs, opts.Program)
	}
	if len(info.TargetErrors) > 0 {
		return nil, sorted(info.TargetErrors, opts.Program)
	}
	js, err := bmv2json.Emit(lowered.Program)
	if err != nil {
		var l scanner.ErrorList
		l.Add(scanner.Pos{File: opts.Program}, "%v", err)
		return nil, l
	}
	pi, err := p4info.Build(lowered.Program)
	if err != nil {
		var l scanner.ErrorList
		pos := scanner.Pos{File: opts.Program}
		if ne, ok := errors.AsType[*p4info.NameError](err); ok && ne.Loc.Pos.IsValid() {
			pos = ne.Loc.Pos
		}
		l.Add(pos, "%v", err)
		return nil, l
	}
	warnings := append(append(scanner.ErrorList{}, info.Warnings...), lowered.Warnings...)
	return &Result{IR: lowered.Program, JSON: js, P4Info: pi, Warnings: warnings}, nil
}

// sorted orders diagnostics by position (the phases report in the order
// they find them, which is close but not exact); a diagnostic about the
// program as a whole names the program file.
func sorted(errs scanner.ErrorList, program string) scanner.ErrorList {
	out := append(scanner.ErrorList{}, errs...)
	for i := range out {
		if out[i].Pos.File == "" {
			out[i].Pos.File = program
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.File != b.File {
			return false
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return out
}

// lowerChecked lowers a checked program. A program the target refuses
// (info.TargetErrors) may be one the lowering cannot handle either: its
// failure then reports those errors, not an internal one.
func lowerChecked(info *types.Info, program string) (res *lower.Result, errs scanner.ErrorList) {
	if len(info.TargetErrors) > 0 {
		defer func() {
			if r := recover(); r != nil {
				res, errs = nil, info.TargetErrors
			}
		}()
	}
	res, errs = lower.Lower(info, lower.Options{SourceFile: program})
	for _, e := range errs {
		if strings.HasPrefix(e.Msg, "internal") && len(info.TargetErrors) > 0 {
			return nil, info.TargetErrors
		}
	}
	return res, errs
}
