// Command terrapin-p4c compiles a P4_16 v1model program to BMv2 JSON and
// P4Runtime P4Info, taking the command-line flags of p4lang's p4c-bm2-ss
// and of the p4c driver:
//
//	terrapin-p4c [--target bmv2] [--arch v1model] [--std p4-16] [-I DIR]...
//	    [-D NAME[=VAL]]... [--p4runtime-files FILE[,FILE]] [-o OUT.json | -o OUTDIR]
//	    PROGRAM.p4
//
// The P4Info format follows each file's extension (.txt/.txtpb text,
// .json, .bin), or --p4runtime-format for --p4runtime-file. On error it
// prints FILE:LINE:COL: error: ... diagnostics, writes nothing and exits 1.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/terrapin/terrapin/toolchain/compiler"
	"github.com/terrapin/terrapin/toolchain/p4info"
)

const usage = `usage: terrapin-p4c [--target bmv2] [--arch v1model] [--std p4-16] [-I DIR]...
       [-D NAME[=VAL]]... [--p4runtime-files FILE[,FILE]] [-o OUT.json | -o OUTDIR] PROGRAM.p4

  -I DIR                  add DIR to the #include search path
  -D NAME[=VAL]           define a preprocessor macro
  -U NAME                 undefine a preprocessor macro
  -o OUT                  output BMv2 JSON file, or directory for PROGRAM.json
  --p4runtime-files F,... write P4Info to each file; format by extension
                          (.txt/.txtpb text, .json JSON, .bin binary)
  --p4runtime-file F      write P4Info to F, in --p4runtime-format (default text)
  --p4runtime-format FMT  text, json or binary
  --target, -b bmv2       the only target
  --arch, -a v1model      the only architecture
  --std p4-16, --p4v 16   the only language version
`

// options are the parsed command line.
type options struct {
	program     string
	includes    []string
	defines     map[string]string
	output      string
	p4info      []string
	p4infoOne   string
	p4infoFmt   string
	showVersion bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "terrapin-p4c: %v\n%s", err, usage)
		return 1
	}
	if opts == nil {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if opts.showVersion {
		fmt.Fprintln(stdout, "terrapin-p4c 1.0 (P4_16, v1model, BMv2 JSON 2.23, P4Runtime 1.4)")
		return 0
	}
	res, errs := compiler.Compile(compiler.Options{Program: opts.program, IncludeDirs: opts.includes, Defines: opts.defines})
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(stderr, e.Error())
		}
		return 1
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", w.Pos, w.Msg)
	}
	// Render everything before writing anything, so that a failure
	// leaves no partial output.
	type file struct {
		path string
		data []byte
	}
	var files []file
	files = append(files, file{jsonPath(opts), res.JSON})
	for _, p := range opts.p4info {
		b, err := p4info.Marshal(res.P4Info, p4info.FormatFor(p))
		if err != nil {
			fmt.Fprintf(stderr, "terrapin-p4c: %s: %v\n", p, err)
			return 1
		}
		files = append(files, file{p, b})
	}
	if opts.p4infoOne != "" {
		f := p4info.FormatFor(opts.p4infoOne)
		if opts.p4infoFmt != "" {
			f, err = p4info.ParseFormat(opts.p4infoFmt)
			if err != nil {
				fmt.Fprintf(stderr, "terrapin-p4c: %v\n", err)
				return 1
			}
		}
		b, err := p4info.Marshal(res.P4Info, f)
		if err != nil {
			fmt.Fprintf(stderr, "terrapin-p4c: %s: %v\n", opts.p4infoOne, err)
			return 1
		}
		files = append(files, file{opts.p4infoOne, b})
	}
	for _, f := range files {
		if err := writeAtomic(f.path, f.data); err != nil {
			fmt.Fprintf(stderr, "terrapin-p4c: %v\n", err)
			return 1
		}
	}
	return 0
}

// jsonPath is where the BMv2 JSON goes: -o FILE, or DIR/PROGRAM.json for
// -o DIR, or PROGRAM.json in the current directory.
func jsonPath(o *options) string {
	base := strings.TrimSuffix(filepath.Base(o.program), filepath.Ext(o.program)) + ".json"
	if o.output == "" {
		return base
	}
	if st, err := os.Stat(o.output); (err == nil && st.IsDir()) || strings.HasSuffix(o.output, "/") {
		return filepath.Join(o.output, base)
	}
	return o.output
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".terrapin-p4c-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// parseArgs reads the command line; it returns nil options for --help.
func parseArgs(args []string) (*options, error) {
	o := &options{defines: map[string]string{}}
	value := func(i *int, name string) (string, error) {
		a := args[*i]
		if eq := strings.IndexByte(a, '='); eq >= 0 && strings.HasPrefix(a, "--") {
			return a[eq+1:], nil
		}
		if *i+1 >= len(args) {
			return "", fmt.Errorf("%s needs a value", name)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := a
		if strings.HasPrefix(a, "--") {
			if eq := strings.IndexByte(a, '='); eq >= 0 {
				name = a[:eq]
			}
		}
		switch {
		case a == "-h" || a == "--help":
			return nil, nil
		case a == "--version" || a == "-V":
			o.showVersion = true
		case name == "--target" || a == "-b":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			if v != "bmv2" {
				return nil, fmt.Errorf("unsupported target %q (only bmv2)", v)
			}
		case name == "--arch" || a == "-a":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			if v != "v1model" {
				return nil, fmt.Errorf("unsupported architecture %q (only v1model)", v)
			}
		case name == "--std" || name == "--p4v" || a == "-x":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			switch strings.ToLower(v) {
			case "p4-16", "p4_16", "16", "p416":
			default:
				return nil, fmt.Errorf("unsupported language version %q (only P4_16)", v)
			}
		case a == "-I":
			v, err := value(&i, a)
			if err != nil {
				return nil, err
			}
			o.includes = append(o.includes, v)
		case strings.HasPrefix(a, "-I"):
			o.includes = append(o.includes, a[2:])
		case a == "-D":
			v, err := value(&i, a)
			if err != nil {
				return nil, err
			}
			o.define(v)
		case strings.HasPrefix(a, "-D"):
			o.define(a[2:])
		case a == "-U":
			v, err := value(&i, a)
			if err != nil {
				return nil, err
			}
			delete(o.defines, v)
		case strings.HasPrefix(a, "-U"):
			delete(o.defines, a[2:])
		case a == "-o" || name == "--output":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			o.output = v
		case name == "--p4runtime-files":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					o.p4info = append(o.p4info, f)
				}
			}
		case name == "--p4runtime-file":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			o.p4infoOne = v
		case name == "--p4runtime-format":
			v, err := value(&i, name)
			if err != nil {
				return nil, err
			}
			if _, err := p4info.ParseFormat(v); err != nil {
				return nil, err
			}
			o.p4infoFmt = v
		case strings.HasPrefix(a, "-") && a != "-":
			return nil, fmt.Errorf("unknown option %s", a)
		default:
			if o.program != "" {
				return nil, fmt.Errorf("more than one program given (%s and %s)", o.program, a)
			}
			o.program = a
		}
	}
	if o.program == "" && !o.showVersion {
		return nil, fmt.Errorf("no program given")
	}
	return o, nil
}

func (o *options) define(d string) {
	if eq := strings.IndexByte(d, '='); eq >= 0 {
		o.defines[d[:eq]] = d[eq+1:]
		return
	}
	o.defines[d] = "1"
}
