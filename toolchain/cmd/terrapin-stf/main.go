// Command terrapin-stf runs a corpus of p4lang STF packet tests (NAME.p4 +
// NAME.stf) against the Terrapin engine and reports pass/fail against an
// expected-failures list.
//
//	terrapin-stf --corpus DIR --json ours|p4c --via engine|p4runtime
//	             [--p4c PATH] [--switch PATH] [--switch-log FILE] [--xfail FILE]
//	             [--run REGEX] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"

	"github.com/terrapin/terrapin/toolchain/stf"
	"github.com/terrapin/terrapin/toolchain/stf/viap4rt"
)

// viaP4Runtime starts one switch (terrapin-switch or p4lang's
// simple_switch_grpc; stf/viap4rt: its own network namespace and ports) and
// makes the corpus run each program through it. A program that kills the
// switch fails with the switch's last words, and the next program gets a
// new switch.
func viaP4Runtime(ctx context.Context, opts *stf.CorpusOptions, switchBin string, log io.Writer) (func(), error) {
	if switchBin == "" {
		return nil, fmt.Errorf("--switch is required")
	}
	ports, err := stf.ScriptPorts(opts.Dir, opts.Run)
	if err != nil {
		return nil, err
	}
	devOpts := viap4rt.Options{Switch: switchBin, Ports: ports, Log: log}
	dev, err := viap4rt.Start(ctx, devOpts)
	if err != nil {
		return nil, err
	}
	opts.RunScript = func(ctx context.Context, prog *stf.Program, script []byte) error {
		if dev == nil || !dev.Alive() {
			dev.Close()
			if dev, err = viap4rt.Start(ctx, devOpts); err != nil {
				return fmt.Errorf("restarting the switch: %v", err)
			}
		}
		err := runProgram(ctx, dev, prog, script)
		if err != nil && !dev.Alive() {
			err = fmt.Errorf("%v; the switch died: %s", err, dev.ExitReason())
		}
		if dev.WrotePRE() {
			// The next program gets a fresh switch: BMv2 would hand it
			// this one's multicast groups and clone sessions.
			dev.Close()
			dev = nil
		}
		return err
	}
	return func() { dev.Close() }, nil
}

func runProgram(ctx context.Context, dev *viap4rt.Device, prog *stf.Program, script []byte) error {
	// Programs without a P4Info file (some corpus programs have none) get
	// one made from their JSON's names.
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

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("terrapin-stf", flag.ContinueOnError)
	corpus := fs.String("corpus", "", "directory of NAME.p4 + NAME.stf test pairs")
	jsonSrc := fs.String("json", stf.JSONOurs, "whose BMv2 JSON to run: ours (compile with --p4c) or p4c (NAME.p4c.json)")
	via := fs.String("via", "engine", "how to reach the switch: engine (in-process) or p4runtime")
	p4c := fs.String("p4c", "", "compiler binary for --json ours")
	sw := fs.String("switch", "", "switch binary for --via p4runtime: terrapin-switch or simple_switch_grpc")
	swLog := fs.String("switch-log", "", "append the switch's output to this file (--via p4runtime)")
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
		var log io.Writer
		if *swLog != "" {
			f, err := os.OpenFile(*swLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				fmt.Fprintf(os.Stderr, "terrapin-stf: %v\n", err)
				return 2
			}
			defer f.Close()
			log = f
		}
		closeFn, err := viaP4Runtime(ctx, &opts, *sw, log)
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
