// Command terrapin-stf runs a corpus of p4lang STF packet tests (NAME.p4 +
// NAME.stf) against the Terrapin engine and reports pass/fail against an
// expected-failures list.
//
//	terrapin-stf --corpus DIR --json ours|p4c --via engine|p4runtime
//	             [--p4c PATH] [--switch PATH] [--xfail FILE] [--run REGEX] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"

	"github.com/terrapin/terrapin/toolchain/stf"
	"github.com/terrapin/terrapin/toolchain/stf/viap4rt"
)

// viaP4Runtime starts one terrapin-switch (stf/viap4rt: its own network
// namespace and veths) and makes the corpus run each program through it.
func viaP4Runtime(ctx context.Context, opts *stf.CorpusOptions, switchBin string) (func(), error) {
	if switchBin == "" {
		return nil, fmt.Errorf("--switch is required")
	}
	ports, err := stf.ScriptPorts(opts.Dir, opts.Run)
	if err != nil {
		return nil, err
	}
	dev, err := viap4rt.Start(ctx, viap4rt.Options{Switch: switchBin, Ports: ports})
	if err != nil {
		return nil, err
	}
	opts.RunScript = func(ctx context.Context, prog *stf.Program, script []byte) error {
		// Programs without a P4Info file (some corpus programs have none)
		// get one made from their JSON's names.
		info := stf.P4InfoFromModel(prog.Model)
		if prog.P4InfoPath != "" {
			var err error
			if info, err = stf.ReadP4Info(prog.P4InfoPath); err != nil {
				return err
			}
		}
		if err := dev.Load(ctx, info, prog.JSON); err != nil {
			return err
		}
		return dev.RunScript(ctx, string(script))
	}
	return dev.Close, nil
}

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("terrapin-stf", flag.ContinueOnError)
	corpus := fs.String("corpus", "", "directory of NAME.p4 + NAME.stf test pairs")
	jsonSrc := fs.String("json", stf.JSONOurs, "whose BMv2 JSON to run: ours (compile with --p4c) or p4c (NAME.p4c.json)")
	via := fs.String("via", "engine", "how to reach the switch: engine (in-process) or p4runtime")
	p4c := fs.String("p4c", "", "compiler binary for --json ours")
	sw := fs.String("switch", "", "switch binary for --via p4runtime")
	xfailPath := fs.String("xfail", "", "expected-failures list (NAME  reason per line)")
	runRE := fs.String("run", "", "only run programs whose name matches this regular expression")
	verbose := fs.Bool("v", false, "print each command and every output packet")
	jobs := fs.Int("j", 0, "programs run in parallel (default: number of CPUs)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *corpus == "" {
		fmt.Fprintln(os.Stderr, "terrapin-stf: --corpus is required")
		return 2
	}
	if *jsonSrc != stf.JSONOurs && *jsonSrc != stf.JSONP4C {
		fmt.Fprintf(os.Stderr, "terrapin-stf: --json must be ours or p4c, not %q\n", *jsonSrc)
		return 2
	}
	opts := stf.CorpusOptions{Dir: *corpus, JSON: *jsonSrc, P4C: *p4c, Verbose: *verbose, Jobs: *jobs}
	switch *via {
	case "engine":
		opts.NewBackend = func() stf.Backend { return stf.NewEngineBackend() }
	case "p4runtime":
		// Handled below, once the program list (and so the ports) is known.
	default:
		fmt.Fprintf(os.Stderr, "terrapin-stf: --via must be engine or p4runtime, not %q\n", *via)
		return 2
	}
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			fmt.Fprintf(os.Stderr, "terrapin-stf: --run: %v\n", err)
			return 2
		}
		opts.Run = re
	}
	xfail := map[string]string{}
	if *xfailPath != "" {
		var err error
		if xfail, err = stf.ReadXfail(*xfailPath); err != nil {
			fmt.Fprintf(os.Stderr, "terrapin-stf: %v\n", err)
			return 2
		}
	}
	opts.Xfail = xfail
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *via == "p4runtime" {
		closeFn, err := viaP4Runtime(ctx, &opts, *sw)
		if err != nil {
			fmt.Fprintf(os.Stderr, "terrapin-stf: --via p4runtime: %v\n", err)
			return 2
		}
		defer closeFn()
	}
	sum, err := stf.RunCorpus(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "terrapin-stf: %v\n", err)
		return 2
	}
	sum.Report(os.Stdout, xfail, *verbose)
	if !sum.OK() {
		return 1
	}
	return 0
}
