package main

// The compile corpus (../shared/conformance/p4c-compile, README there):
// p4c's own v1model programs, those p4c-bm2-ss compiles (accept/) and those
// it refuses (reject/). `make conformance-compile` runs this test alone and
// prints its summary line; the go suite runs it too.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/engine"
)

// knownAcceptFailures are accept/ programs terrapin-p4c does not compile
// yet, each with the issue that tracks it. None today. A program on it that
// compiles and loads fails the test, so the list cannot go stale.
var knownAcceptFailures = map[string]bool{}

// compileCorpus is the corpus directory: P4C_COMPILE_CORPUS, else the
// shared one beside the project.
func compileCorpus(t *testing.T) string {
	dir := os.Getenv("P4C_COMPILE_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "conformance", "p4c-compile")
	}
	if _, err := os.Stat(filepath.Join(dir, "accept")); err != nil {
		if os.Getenv("P4C_COMPILE_CORPUS") != "" {
			t.Fatalf("compile corpus: %v", err)
		}
		t.Skipf("no compile corpus at %s", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// corpusIncludes are the -I flags for the corpus. A few programs include
// "../p4_16_samples/NAME.p4"; p4_16_samples is a link to include/ in p4c's
// tree (a plain file in the copy), so a temporary tree supplies the link.
func corpusIncludes(t *testing.T, corpus string) []string {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "inc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(corpus, "include"), filepath.Join(root, "p4_16_samples")); err != nil {
		t.Fatal(err)
	}
	return []string{"-I", filepath.Join(root, "inc"), "-I", filepath.Join(corpus, "include")}
}

func corpusPrograms(t *testing.T, dir string) []string {
	names, err := filepath.Glob(filepath.Join(dir, "*.p4"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// expectedErrorAt reads p4c's expected stderr beside a reject/ program: the
// file and line of its first error, or "" when it names none.
func expectedErrorAt(program string) (file string, line int) {
	data, err := os.ReadFile(program + "-stderr")
	if err != nil {
		return "", 0
	}
	re := regexp.MustCompile(`^(\S+)\((\d+)\):\s*(?:\[[^\]]*\]\s*)?(?:error|syntax error)`)
	for _, l := range strings.Split(string(data), "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			return m[1], n
		}
	}
	return "", 0
}

// firstError finds terrapin-p4c's first FILE:LINE:COL: error diagnostic.
var diagRE = regexp.MustCompile(`(?m)^(\S+?):(\d+):(\d+): error: (.*)$`)

// parallel runs f over items on as many workers as there are CPUs.
func parallel(items []string, f func(string)) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				f(it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

func TestConformanceCompile(t *testing.T) {
	corpus := compileCorpus(t)
	incs := corpusIncludes(t, corpus)
	bmv2 := os.Getenv("SIMPLE_SWITCH")

	type outcome struct {
		name  string
		fail  string // "" passed
		xfail bool   // failed as knownAcceptFailures expects
	}
	var mu sync.Mutex
	var refused, accepted []outcome
	record := func(list *[]outcome, name, fail string) {
		mu.Lock()
		*list = append(*list, outcome{name: name, fail: fail})
		mu.Unlock()
	}

	rejects := corpusPrograms(t, filepath.Join(corpus, "reject"))
	parallel(rejects, func(p string) {
		name := strings.TrimSuffix(filepath.Base(p), ".p4")
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr bytes.Buffer
		args := append(append([]string{}, incs...), "-o", filepath.Join(out, name+".json"),
			"--p4runtime-files", filepath.Join(out, name+".p4info.txtpb"), p)
		code := run(args, &stdout, &stderr)
		if code == 0 {
			record(&refused, name, "compiled; p4c refuses it")
			return
		}
		if entries, _ := os.ReadDir(out); len(entries) > 0 {
			record(&refused, name, fmt.Sprintf("refused but wrote %d files", len(entries)))
			return
		}
		m := diagRE.FindStringSubmatch(stderr.String())
		if m == nil {
			record(&refused, name, "refused without a FILE:LINE:COL: error diagnostic: "+firstLine(stderr.String()))
			return
		}
		// p4c's line is checked in the program itself; an error it finds
		// in an architecture file (v1model.p4) must be in that file,
		// whose bundled copy has other line numbers
		wantFile, wantLine := expectedErrorAt(p)
		if wantFile == name+".p4" && filepath.Base(m[1]) == wantFile {
			if got, _ := strconv.Atoi(m[2]); got != wantLine {
				record(&refused, name, fmt.Sprintf("first error at line %d, p4c's at %d: %s", got, wantLine, m[0]))
				return
			}
		} else if wantFile != "" && filepath.Base(m[1]) != wantFile {
			record(&refused, name, fmt.Sprintf("first error in %s, p4c's in %s: %s", m[1], wantFile, m[0]))
			return
		}
		record(&refused, name, "")
	})

	accepts := corpusPrograms(t, filepath.Join(corpus, "accept"))
	parallel(accepts, func(p string) {
		name := strings.TrimSuffix(filepath.Base(p), ".p4")
		dir := t.TempDir()
		js := filepath.Join(dir, name+".json")
		var stdout, stderr bytes.Buffer
		args := append(append([]string{}, incs...), "-o", js, "--p4runtime-files", filepath.Join(dir, name+".p4info.txtpb"), p)
		fail := ""
		if code := run(args, &stdout, &stderr); code != 0 {
			fail = "refused: " + firstLine(stderr.String())
		} else if data, err := os.ReadFile(js); err != nil {
			fail = err.Error()
		} else if _, err := engine.Load(data, engine.Options{}); err != nil {
			fail = "terrapin-switch's loader refuses the JSON: " + err.Error()
		} else if bmv2 != "" {
			if err := loadOnBMv2(bmv2, js); err != nil {
				fail = "simple_switch refuses the JSON: " + err.Error()
			}
		}
		switch {
		case fail != "" && knownAcceptFailures[name]:
			mu.Lock()
			accepted = append(accepted, outcome{name: name, xfail: true})
			mu.Unlock()
			return
		case fail == "" && knownAcceptFailures[name]:
			fail = "compiles and loads now: remove it from knownAcceptFailures"
		}
		record(&accepted, name, fail)
	})

	failed := 0
	report := func(list []outcome, what string) int {
		sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
		n := 0
		for _, o := range list {
			switch {
			case o.xfail:
			case o.fail != "":
				t.Errorf("%s %s: %s", what, o.name, o.fail)
				failed++
			default:
				n++
			}
		}
		return n
	}
	okRefused := report(refused, "reject/")
	okAccepted := report(accepted, "accept/")
	loaded := "terrapin-switch"
	if bmv2 != "" {
		loaded += ", simple_switch"
	}
	xfail := ""
	if len(knownAcceptFailures) > 0 {
		var names []string
		for n := range knownAcceptFailures {
			names = append(names, n)
		}
		sort.Strings(names)
		xfail = fmt.Sprintf("; expected failures (knownAcceptFailures): %s", strings.Join(names, " "))
	}
	fmt.Printf("conformance-compile: %d/%d compiled and loaded (%s), %d/%d refused%s\n",
		okAccepted, len(accepts), loaded, okRefused, len(rejects), xfail)
	// expected failures count neither way
	fmt.Printf("%d passed, %d failed\n", okAccepted+okRefused, failed)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// loadOnBMv2 starts p4lang's simple_switch on a JSON file with no
// interfaces, as BMv2 validates a program when it loads it: it either exits
// with the reason, or goes on to start its Thrift server, which it logs.
// Ports and the notification socket are its own, so runs go side by side.
func loadOnBMv2(bin, js string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := filepath.Dir(js)
	// a safety net against a switch that neither loads nor exits; not a
	// measure of anything
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--log-console", "--log-level", "info", "--thrift-port", strconv.Itoa(port),
		"--device-id", strconv.Itoa(port), "--notifications-addr", "ipc://"+filepath.Join(dir, "notify.ipc"), js)
	// the log and the reasons for a refusal, on whichever stream they go
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	var log []string
	sc := bufio.NewScanner(stdout)
	loaded := false
	for sc.Scan() {
		log = append(log, sc.Text())
		if strings.Contains(sc.Text(), "Thrift server was started") {
			loaded = true
			break
		}
	}
	if loaded {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil
	}
	werr := cmd.Wait()
	tail := log
	if len(tail) > 5 {
		tail = tail[len(tail)-5:]
	}
	return fmt.Errorf("%v: %s", werr, strings.Join(tail, " | "))
}

// TestLoadOnBMv2Verdicts runs loadOnBMv2 on stand-ins for simple_switch: one
// that loads (logs that its Thrift server started, then keeps running, as
// the real one does) and one that refuses the JSON and exits.
func TestLoadOnBMv2Verdicts(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "p.json")
	if err := os.WriteFile(js, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	loads := fake("loads", `echo "[info] Starting Thrift server on port 9"; echo "[info] Thrift server was started"; exec sleep 600`)
	refuses := fake("refuses", `echo "Invalid 'type' in expression" >&2; exit 1`)
	if err := loadOnBMv2(loads, js); err != nil {
		t.Errorf("a switch that started: %v", err)
	}
	err := loadOnBMv2(refuses, js)
	if err == nil || !strings.Contains(err.Error(), "Invalid 'type' in expression") {
		t.Errorf("a switch that refused the JSON: got %v, want its reason", err)
	}
}
