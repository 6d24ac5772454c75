package stf

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/terrapin/terrapin/toolchain/engine"
)

// JSON sources for CorpusOptions.JSON.
const (
	JSONOurs = "ours" // compile each program with the bundled compiler
	JSONP4C  = "p4c"  // use NAME.p4c.json beside each program
)

// CorpusOptions configure RunCorpus.
type CorpusOptions struct {
	Dir        string         // directory of NAME.p4 + NAME.stf pairs
	JSON       string         // JSONOurs or JSONP4C
	P4C        string         // compiler binary (JSONOurs)
	Run        *regexp.Regexp // only programs whose name matches (nil: all)
	Xfail      map[string]string
	NewBackend func() Backend // one backend per program
	// RunScript, when set, runs a whole script instead of the Backend path
	// (used by the P4Runtime path, which drives one real switch and so
	// runs programs one at a time).
	RunScript func(ctx context.Context, prog *Program, script []byte) error
	Verbose   bool
	Jobs      int // parallel programs (0: GOMAXPROCS)
	// CompileTimeout bounds one compiler run (default 60 s).
	CompileTimeout time.Duration
}

// Result is the outcome for one program.
type Result struct {
	Name       string
	Pass       bool
	Reason     string
	P4Info     string // "match", "differ: ...", or "" when not compared
	Log        string
	compileErr bool
}

// Summary is the outcome of a corpus run.
type Summary struct {
	Results         []Result
	Passed, Failed  int
	P4Match, P4Diff int
	UnexpectedFail  []string
	UnexpectedPass  []string
	P4InfoCompared  bool
}

// ReadXfail reads an expected-failures list: one "NAME  reason" per line,
// '#' comments. A missing file is an empty list.
func ReadXfail(path string) (map[string]string, error) {
	out := map[string]string{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		name, reason := nextWord(line)
		if name == "" {
			continue
		}
		out[name] = reason
	}
	return out, sc.Err()
}

// ScriptPorts returns every port the corpus's scripts send to or expect
// on (a real switch needs its interfaces before the first program runs).
func ScriptPorts(dir string, run *regexp.Regexp) ([]uint32, error) {
	names, err := Discover(dir)
	if err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	for _, n := range names {
		if run != nil && !run.MatchString(n) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, n+".stf"))
		if err != nil {
			return nil, err
		}
		cmds, err := ParseScript(f)
		f.Close()
		if err != nil {
			continue
		}
		for _, c := range cmds {
			if c.Op == "packet" || c.Op == "expect" {
				seen[c.Port] = true
			}
		}
	}
	var out []uint32
	for p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Discover lists the programs of a corpus: every NAME.p4 with a NAME.stf.
func Discover(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".p4") {
			continue
		}
		base := strings.TrimSuffix(n, ".p4")
		if _, err := os.Stat(filepath.Join(dir, base+".stf")); err == nil {
			names = append(names, base)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Select keeps the program names run matches (all of them when run is nil).
func Select(names []string, run *regexp.Regexp) []string {
	if run == nil {
		return names
	}
	var keep []string
	for _, n := range names {
		if run.MatchString(n) {
			keep = append(keep, n)
		}
	}
	return keep
}

// RunCorpus runs every program of the corpus.
func RunCorpus(ctx context.Context, o CorpusOptions) (*Summary, error) {
	names, err := Discover(o.Dir)
	if err != nil {
		return nil, err
	}
	names = Select(names, o.Run)
	tmp, err := os.MkdirTemp("", "terrapin-stf-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	if o.RunScript != nil {
		jobs = 1
	}
	// Workers take the programs in name order, so that one worker (a real
	// switch) runs them in the same order every time: a switch that keeps
	// state across programs then fails the same way on every run.
	results := make([]Result, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = runOne(ctx, o, tmp, names[i])
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	s := &Summary{Results: results, P4InfoCompared: o.JSON == JSONOurs}
	for _, r := range results {
		if r.Pass {
			s.Passed++
			if _, listed := o.Xfail[r.Name]; listed {
				s.UnexpectedPass = append(s.UnexpectedPass, r.Name)
			}
		} else {
			s.Failed++
			if _, listed := o.Xfail[r.Name]; !listed {
				s.UnexpectedFail = append(s.UnexpectedFail, r.Name)
			}
		}
		switch {
		case r.P4Info == "match":
			s.P4Match++
		case strings.HasPrefix(r.P4Info, "differ"):
			s.P4Diff++
		}
	}
	return s, nil
}

func runOne(ctx context.Context, o CorpusOptions, tmp, name string) (res Result) {
	res.Name = name
	defer func() {
		if r := recover(); r != nil {
			res.Pass = false
			res.Reason = fmt.Sprintf("runner panic: %v", r)
		}
	}()
	var logb strings.Builder
	prog := &Program{Name: name}
	switch o.JSON {
	case JSONP4C:
		prog.JSONPath = filepath.Join(o.Dir, name+".p4c.json")
		if p := filepath.Join(o.Dir, name+".p4info.txtpb"); fileExists(p) {
			prog.P4InfoPath = p
		}
	default:
		out := filepath.Join(tmp, name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			res.Reason = err.Error()
			return res
		}
		prog.JSONPath = filepath.Join(out, name+".json")
		prog.P4InfoPath = filepath.Join(out, name+".p4info.txtpb")
		if err := compile(ctx, o, filepath.Join(o.Dir, name+".p4"), prog.JSONPath, prog.P4InfoPath); err != nil {
			res.Reason = "compile: " + err.Error()
			res.compileErr = true
			res.P4Info = "differ: no P4Info (compile failed)"
			if !fileExists(filepath.Join(o.Dir, name+".p4info.txtpb")) {
				res.P4Info = ""
			}
			return res
		}
		if want := filepath.Join(o.Dir, name+".p4info.txtpb"); fileExists(want) {
			res.P4Info = compareP4InfoFiles(prog.P4InfoPath, want)
		}
	}
	data, err := os.ReadFile(prog.JSONPath)
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	prog.JSON = data
	model, err := engine.Load(data, engine.Options{})
	if err != nil {
		res.Reason = "load: " + err.Error()
		return res
	}
	prog.Model = model
	script, err := os.ReadFile(filepath.Join(o.Dir, name+".stf"))
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	if o.RunScript != nil {
		if err := o.RunScript(ctx, prog, script); err != nil {
			res.Reason = err.Error()
		} else {
			res.Pass = true
		}
		return res
	}
	cmds, err := ParseScript(strings.NewReader(string(script)))
	if err != nil {
		res.Reason = "stf: " + err.Error()
		return res
	}
	b := o.NewBackend()
	if err := b.Start(prog); err != nil {
		res.Reason = "start: " + err.Error()
		return res
	}
	defer b.Stop()
	var lw io.Writer
	if o.Verbose {
		lw = &logb
	}
	if err := Run(b, prog, cmds, lw); err != nil {
		res.Reason = err.Error()
	} else {
		res.Pass = true
	}
	res.Log = logb.String()
	return res
}

func compile(ctx context.Context, o CorpusOptions, src, jsonOut, p4infoOut string) error {
	if o.P4C == "" {
		return fmt.Errorf("no compiler given (--p4c)")
	}
	to := o.CompileTimeout
	if to <= 0 {
		to = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	cmd := exec.CommandContext(cctx, o.P4C, "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
		"--p4runtime-files", p4infoOut, "-o", jsonOut, src)
	out, err := cmd.CombinedOutput()
	if cctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("timed out after %v", to)
	}
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s", msg)
	}
	if !fileExists(jsonOut) {
		return fmt.Errorf("compiler wrote no JSON")
	}
	return nil
}

func compareP4InfoFiles(got, want string) string {
	w, err := ReadP4Info(want)
	if err != nil {
		return "differ: reference: " + err.Error()
	}
	g, err := ReadP4Info(got)
	if err != nil {
		return "differ: " + err.Error()
	}
	if d := DiffP4Info(g, w); d != "" {
		return "differ: " + d
	}
	return "match"
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Report prints the summary in the format the Makefile's callers expect:
// one line per failure, the P4Info line, unexpected results, and last
// "N passed, M failed".
func (s *Summary) Report(w io.Writer, xfail map[string]string, verbose bool) {
	for _, r := range s.Results {
		if verbose && r.Log != "" {
			fmt.Fprintf(w, "== %s\n%s", r.Name, r.Log)
		}
		if !r.Pass {
			tag := "FAIL"
			if _, ok := xfail[r.Name]; ok {
				tag = "XFAIL"
			}
			fmt.Fprintf(w, "%s %s: %s\n", tag, r.Name, r.Reason)
		}
		if strings.HasPrefix(r.P4Info, "differ") {
			fmt.Fprintf(w, "P4INFO %s: %s\n", r.Name, r.P4Info)
		}
	}
	if s.P4InfoCompared {
		fmt.Fprintf(w, "P4Info: %d matched, %d differ\n", s.P4Match, s.P4Diff)
	} else {
		fmt.Fprintf(w, "P4Info: %d matched, %d differ (not compared: the JSON is p4c's)\n", 0, 0)
	}
	for _, n := range s.UnexpectedFail {
		fmt.Fprintf(w, "unexpected failure (not in the xfail list): %s\n", n)
	}
	for _, n := range s.UnexpectedPass {
		fmt.Fprintf(w, "unexpected pass (remove it from the xfail list): %s\n", n)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", s.Passed, s.Failed)
}

// OK reports whether the run matches the expected-failures list.
func (s *Summary) OK() bool { return len(s.UnexpectedFail) == 0 && len(s.UnexpectedPass) == 0 }
