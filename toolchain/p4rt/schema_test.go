package p4rt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// corpusDir is p4c's STF corpus: P4Info and BMv2 JSON both written by p4c,
// the reference for how names correspond.
const corpusDir = "../../../shared/conformance/p4c-stf"

func loadP4Info(t *testing.T, path string) *p4configv1.P4Info {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(b, info); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return info
}

// loaded is the schema of a BMv2 JSON program as the engine loads it: what
// the server checks a P4Info against.
func loaded(t *testing.T, js []byte) pipeline.Schema {
	t.Helper()
	pl, err := engine.Load(js, engine.Options{})
	if err != nil {
		t.Fatalf("loading the device config: %v", err)
	}
	return pl.Schema()
}

// Every p4c P4Info in the corpus must map onto its p4c BMv2 JSON: the name
// correspondence the server relies on holds for the reference compiler.
func TestSchemaMapsCorpus(t *testing.T) {
	infos, _ := filepath.Glob(filepath.Join(corpusDir, "*.p4info.txtpb"))
	if len(infos) == 0 {
		t.Fatalf("no P4Info files under %s", corpusDir)
	}
	tables := 0
	for _, p := range infos {
		name := strings.TrimSuffix(filepath.Base(p), ".p4info.txtpb")
		t.Run(name, func(t *testing.T) {
			js, err := os.ReadFile(filepath.Join(corpusDir, name+".p4c.json"))
			if err != nil {
				t.Skip("no p4c JSON beside this P4Info")
			}
			s, err := newSchema(loadP4Info(t, p), loaded(t, js), nil)
			if err != nil {
				t.Fatal(err)
			}
			tables += len(s.tables)
			for _, ti := range s.tables {
				for _, ce := range ti.constEntries {
					if ti.needsPriority && ce.priority <= 0 {
						t.Errorf("table %s: initial entry without a positive priority", ti.name)
					}
				}
			}
		})
	}
	if tables == 0 {
		t.Fatal("no tables mapped at all")
	}
}

func TestSchemaRejectsMismatch(t *testing.T) {
	info := loadP4Info(t, filepath.Join(corpusDir, "ternary2-bmv2.p4info.txtpb"))
	js, err := os.ReadFile(filepath.Join(corpusDir, "ternary2-bmv2.p4c.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSchema(info, loaded(t, js), nil); err != nil {
		t.Fatalf("matching pair rejected: %v", err)
	}
	other, err := os.ReadFile(filepath.Join(corpusDir, "arith-inline-bmv2.p4c.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSchema(info, loaded(t, other), nil); err == nil {
		t.Error("P4Info accepted with another program's JSON")
	}
	// Broken JSON never reaches newSchema: the device refuses to load it.
	if _, err := engine.Load([]byte("{not json"), engine.Options{}); err == nil {
		t.Error("broken JSON accepted")
	}
	if _, err := newSchema(nil, loaded(t, js), nil); err == nil {
		t.Error("missing P4Info accepted")
	}
}

func TestSchemaConstEntryPriorities(t *testing.T) {
	info := loadP4Info(t, filepath.Join(corpusDir, "table-entries-ternary-bmv2.p4info.txtpb"))
	js, err := os.ReadFile(filepath.Join(corpusDir, "table-entries-ternary-bmv2.p4c.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSchema(info, loaded(t, js), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range s.tables {
		n := len(ti.constEntries)
		for i, ce := range ti.constEntries {
			// p4c's order: N for the first entry down to 1 (spec §9.1.4).
			if want := int32(n - i); ce.priority != want {
				t.Errorf("%s entry %d priority %d, want %d", ti.name, i, ce.priority, want)
			}
		}
	}
}
