package p4rt_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/status"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/corpus_readback.golden")

// p4cCorpus is p4c's STF corpus: P4Info and BMv2 JSON both written by p4c.
const p4cCorpus = "../../../shared/conformance/p4c-stf"

const readbackGolden = "testdata/corpus_readback.golden"

// Every P4Info/BMv2 JSON pair of p4c's corpus is installed and every table
// read back: what the program declares (its const entries, with P4Runtime
// priorities) must come back exactly as it did when the golden file was
// written, and a pair the server refused must still be refused with the
// same code. The golden file was written before p4rt took its schema from
// the loaded pipeline instead of parsing the JSON itself, so it pins that
// the move changed no read.
func TestCorpusReadBack(t *testing.T) {
	infos, _ := filepath.Glob(filepath.Join(p4cCorpus, "*.p4info.txtpb"))
	if len(infos) == 0 {
		t.Fatalf("no P4Info files under %s", p4cCorpus)
	}
	var b strings.Builder
	entries := 0
	for _, path := range infos {
		name := strings.TrimSuffix(filepath.Base(path), ".p4info.txtpb")
		js, err := os.ReadFile(filepath.Join(p4cCorpus, name+".p4c.json"))
		if err != nil {
			continue
		}
		info, err := readP4Info(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		fmt.Fprintf(&b, "program %s\n", name)
		n, err := readBackAll(t, program{json: js, info: info}, &b)
		if err != nil {
			fmt.Fprintf(&b, "  refused %s\n", status.Code(err))
		}
		entries += n
	}
	if entries == 0 {
		t.Fatal("no entry read back from the whole corpus")
	}
	if *updateGolden {
		if err := os.WriteFile(readbackGolden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(readbackGolden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("read-back differs from %s; got:\n%s", readbackGolden, got)
	}
}

// readBackAll installs prog on a fresh server and writes every table entry
// a wildcard read returns, one line each, in a stable form.
func readBackAll(t *testing.T, prog program, b *strings.Builder) (int, error) {
	h := newHarnessWith(t, prog)
	h.becomePrimary()
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		return 0, err
	}
	ents, err := h.read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}})
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		b.WriteString("  " + entryLine(e.GetTableEntry()) + "\n")
	}
	return len(ents), nil
}

// entryLine renders an entry by hand: prototext's output is deliberately
// unstable, so it cannot be compared with a file.
func entryLine(te *p4v1.TableEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %#x prio %d default %v", te.GetTableId(), te.GetPriority(), te.GetIsDefaultAction())
	for _, m := range te.GetMatch() {
		fmt.Fprintf(&b, " f%d=", m.GetFieldId())
		switch {
		case m.GetExact() != nil:
			fmt.Fprintf(&b, "exact:%x", m.GetExact().GetValue())
		case m.GetLpm() != nil:
			fmt.Fprintf(&b, "lpm:%x/%d", m.GetLpm().GetValue(), m.GetLpm().GetPrefixLen())
		case m.GetTernary() != nil:
			fmt.Fprintf(&b, "ternary:%x&%x", m.GetTernary().GetValue(), m.GetTernary().GetMask())
		case m.GetRange() != nil:
			fmt.Fprintf(&b, "range:%x-%x", m.GetRange().GetLow(), m.GetRange().GetHigh())
		case m.GetOptional() != nil:
			fmt.Fprintf(&b, "optional:%x", m.GetOptional().GetValue())
		}
	}
	if a := te.GetAction().GetAction(); a != nil {
		fmt.Fprintf(&b, " action %#x", a.GetActionId())
		for _, p := range a.GetParams() {
			fmt.Fprintf(&b, " p%d=%x", p.GetParamId(), p.GetValue())
		}
	}
	return b.String()
}
