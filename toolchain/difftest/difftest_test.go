package difftest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/stf"
)

// make test runs the bounded check; make bench-diff passes a larger
// -diff.packets (and -diff.seed, -diff.run to repeat one difference).
var (
	flagPackets = flag.Int("diff.packets", 200, "random packets per program")
	flagSeed    = flag.Uint64("diff.seed", 1, "base seed of the packet streams")
	flagRun     = flag.String("diff.run", "", "only programs whose name matches this regexp")
	flagCorpus  = flag.String("diff.corpus", filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf"),
		"the corpus (NAME.p4, NAME.stf, NAME.p4c.json)")
)

func corpusDir(t *testing.T) string {
	t.Helper()
	dir := *flagCorpus
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance corpus not present (%s)", dir)
	}
	return dir
}

// TestCorpus is the differential check: every program with p4c's JSON,
// the same packets through both JSONs, no difference that
// known-differences.txt does not list and argue.
func TestCorpus(t *testing.T) {
	dir := corpusDir(t)
	known, err := readKnown("known-differences.txt")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: dir, Packets: *flagPackets, Seed: *flagSeed, Known: known}
	if *flagRun != "" {
		o.Run = regexp.MustCompile(*flagRun)
	}
	start := time.Now()
	results, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 {
		t.Fatal("no program with p4c's JSON in the corpus")
	}
	sent, clean, knownDiffs := 0, 0, 0
	for _, r := range results {
		sent += r.Sent
		if r.KnownFirst != nil {
			knownDiffs += r.Known
			t.Logf("known (%d differing packets, of kinds known-differences.txt lists): %s", r.Known, r.KnownFirst)
		}
		switch {
		case r.Err != nil:
			t.Errorf("%s: not checked: %v", r.Program, r.Err)
		case len(r.Differences) > 0:
			for _, d := range r.Differences {
				t.Errorf("difference: %s", d)
			}
			t.Logf("repeat with: make bench-diff DIFF_RUN='^%s$' DIFF_SEED=%d DIFF_PACKETS=%d", r.Program, *flagSeed, *flagPackets)
		case r.Known == 0:
			clean++
			if _, listed := known[r.Program]; listed {
				t.Logf("%s is listed in known-differences.txt but showed no difference in this run", r.Program)
			}
		}
	}
	t.Logf("%d programs, %d packets each way (seed %d, %d random per program): %d agree on every packet, %d known differences, in %v",
		len(results), sent, *flagSeed, *flagPackets, clean, knownDiffs, time.Since(start).Round(time.Millisecond))
	for name := range known {
		if !hasProgram(results, name) && o.Run == nil {
			t.Errorf("known-differences.txt lists %s, which is not a corpus program with p4c's JSON", name)
		}
	}
}

// readKnown reads known-differences.txt: "NAME  KINDS  reason" per line,
// KINDS the packet kinds (walk, truncated, mutant, garbage, stf; "*" for
// all) whose differences the reason covers, comma-separated.
func readKnown(path string) (map[string][]string, error) {
	raw, err := stf.ReadXfail(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for name, rest := range raw {
		kinds, reason, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s: %s: no reason given (NAME  KINDS  reason)", path, name)
		}
		for _, k := range strings.Split(kinds, ",") {
			switch k {
			case "walk", "truncated", "mutant", "garbage", "stf", "*":
				out[name] = append(out[name], k)
			default:
				return nil, fmt.Errorf("%s: %s: unknown packet kind %q (NAME  KINDS  reason)", path, name, k)
			}
		}
	}
	return out, nil
}

func hasProgram(rs []Result, name string) bool {
	for _, r := range rs {
		if r.Program == name {
			return true
		}
	}
	return false
}

// TestCatchesPlantedMiscompile plants miscompiles in our JSON — a wrong
// operator, a wrong constant on a path behind two parser selects, a wrong
// parser case — and requires each to be reported with the program, seed,
// packet and both outputs. The parser case is also planted with the
// script's packets withheld from the generator: the walk of the parser
// alone must reach it.
func TestCatchesPlantedMiscompile(t *testing.T) {
	dir := corpusDir(t)
	cases := []struct {
		name, program string
		in            string // "actions" or "parse_states"
		object        string // the action's or state's name
		old, new      string // first occurrence replaced, in the object's JSON
		noSeeds       bool
	}{
		{"operator", "arith2-bmv2", "actions", "ingress.compare", `"op":"<"`, `"op":"<="`, false},
		{"constant", "checksum-l4-bmv2", "actions", "cIngress.foou", `"value":"0x0001"`, `"value":"0x0002"`, false},
		{"parser case", "header-stack-ops-bmv2", "parse_states", "parse_h2", `"value":"0x02"`, `"value":"0x04"`, false},
		{"parser case, walk only", "header-stack-ops-bmv2", "parse_states", "parse_h2", `"value":"0x02"`, `"value":"0x04"`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			planted := false
			o := Options{Dir: dir, Packets: 200, Seed: 1, NoSeeds: tc.noSeeds,
				Mutate: func(_ string, js []byte) []byte {
					out, ok := replaceIn(t, js, tc.in, tc.object, tc.old, tc.new)
					planted = ok
					return out
				}}
			res := RunProgram(o, tc.program)
			if !planted {
				t.Fatalf("%s in %s of our JSON for %s has no %s: the planted change needs updating", tc.object, tc.in, tc.program, tc.old)
			}
			if res.Err != nil {
				t.Fatalf("not checked: %v", res.Err)
			}
			if len(res.Differences) == 0 {
				t.Fatalf("the planted miscompile (%s -> %s) went unnoticed in %d packets", tc.old, tc.new, res.Sent)
			}
			d := res.Differences[0]
			msg := d.String()
			for _, want := range []string{tc.program, "seed 1", "p4c:", "ours:", strings.ToUpper(hex.EncodeToString(d.Packet))} {
				if !strings.Contains(msg, want) {
					t.Errorf("report %q lacks %q", msg, want)
				}
			}
			if d.Setup != "" || d.P4C.equal(d.Ours) {
				t.Errorf("not a packet's difference: %s", msg)
			}
			// The same seed gives the same report.
			again := RunProgram(o, tc.program)
			if len(again.Differences) == 0 || again.Differences[0].String() != msg {
				t.Errorf("a second run differs from the first")
			}
			t.Log(msg)
		})
	}
}

// replaceIn replaces the first occurrence of old by new in the compact
// JSON of one action or parse state of a BMv2 JSON program.
func replaceIn(t *testing.T, js []byte, in, object, old, new string) ([]byte, bool) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	var list []any
	switch in {
	case "actions":
		list, _ = doc["actions"].([]any)
	case "parse_states":
		if ps, _ := doc["parsers"].([]any); len(ps) > 0 {
			list, _ = ps[0].(map[string]any)["parse_states"].([]any)
		}
	}
	for i, x := range list {
		m, _ := x.(map[string]any)
		if m["name"] != object {
			continue
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		b := bytes.TrimSpace(buf.Bytes())
		if !strings.Contains(string(b), old) {
			return js, false
		}
		var changed any
		if err := json.Unmarshal([]byte(strings.Replace(string(b), old, new, 1)), &changed); err != nil {
			t.Fatal(err)
		}
		list[i] = changed
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return out, true
	}
	return js, false
}
