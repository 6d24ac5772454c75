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
)

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
		// The P4Runtime backend (entries over P4Runtime to a running
		// terrapin-switch, packets over veths) implements stf.Backend; it
		// is provided by the P4RT component and not part of this build yet.
		_ = sw
		fmt.Fprintln(os.Stderr, "terrapin-stf: --via p4runtime: no P4Runtime backend in this build (see stf.Backend)")
		return 2
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
