// Package toolchain_test checks the shape of the module as a whole: which
// package may import which.
package toolchain_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/terrapin/terrapin/toolchain/"

// layers is the intended shape, lowest first: a package imports only
// packages of lower layers. The compiler reads front end → lower → IR →
// emitters, with the IR, the contract lower writes and the emitters read,
// below both, and the driver above every stage it drives. The run-time
// side stands beside it: the vocabulary, the engine, the device and the
// P4Runtime server, with the adapters that join them and the commands on
// top; difftest (terrapin-p4c against p4c's JSON) drives the compiler, the
// engine and the STF runner together; the servers' TLS set-up (and its test PKI)
// sits beside the device, needing nothing of the module, and so do BMv2's
// Thrift services generated from its IDL and BMv2's state dump format
// (bmthrift/bmstate) and nanomsg's pub/sub protocol; BMv2's notifications
// (bmnotify) read the engine and the device; the Thrift runtime server
// (bmthrift) drives the engine and the device through the switch target. Non-test files only: a test may drive a package from above (the
// engine's differential tests run the STF corpus).
var layers = [][]string{
	{"p4/scanner", "p4include"},
	{"p4/ast", "p4/preproc"},
	{"p4/parser"},
	{"p4/types"},
	{"ir"},
	{"lower"},
	{"bmv2json", "p4info"},
	{"compiler"},
	{"pipeline"},
	{"engine"},
	{"device", "p4rt", "servertls", "servertls/testpki", "bmthrift/gen/standard", "bmthrift/gen/simple_pre_lag", "bmthrift/gen/simple_switch", "bmthrift/bmstate", "nanomsg"},
	{"p4rt/enginetarget"},
	{"device/switchtarget", "stf", "gnmiports", "bmnotify"},
	{"stf/viap4rt", "difftest", "bmthrift"},
	{"cmd/terrapin-p4c", "cmd/terrapin-stf", "cmd/terrapin-switch", "cmd/terrapin-trafgen", "cmd/terrapin-cut", "cmd/terrapin-partition"},
}

// readsOnly narrows some packages further, to what they are documented to
// read: the emitters only the IR (so either can be checked against p4c's
// output alone); the engine and the P4Runtime server only the runtime
// vocabulary (the engine takes BMv2 JSON from any compiler, and the server
// is a thin translation onto a device it knows through its Target).
var readsOnly = map[string][]string{
	"ir":                {"p4/scanner"},
	"bmv2json":          {"ir"},
	"p4info":            {"ir"},
	"pipeline":          {},
	"engine":            {"pipeline"},
	"p4rt":              {"pipeline"},
	"device":            {"engine"},
	"gnmiports":         {"device"}, // the ports' state, served; nothing of the pipeline
	"servertls":         {},
	"servertls/testpki": {},
	// BMv2's Thrift services, generated from its IDL: the Thrift library only
	"bmthrift/gen/standard":       {},
	"bmthrift/gen/simple_pre_lag": {},
	"bmthrift/gen/simple_switch":  {},
	// BMv2's state dump format: nothing of the module
	"bmthrift/bmstate": {},
	// nanomsg's pub/sub protocol: nothing of the module
	"nanomsg": {},
	// BMv2's notifications: what the engine's entries and the device's ports say
	"bmnotify": {"device", "engine"},
}

func TestImportsFollowLayers(t *testing.T) {
	imports := moduleImports(t)
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layerOf[p] = i
		}
	}
	for pkg, deps := range imports {
		li, ok := layerOf[pkg]
		if !ok {
			t.Errorf("package %s has no layer: place it in layers", pkg)
			continue
		}
		for _, d := range deps {
			if ld, ok := layerOf[d]; ok && ld >= li {
				t.Errorf("%s imports %s, which is not below it", pkg, d)
			}
			if only, ok := readsOnly[pkg]; ok && !slices.Contains(only, d) {
				t.Errorf("%s imports %s; it may import only %v", pkg, d, only)
			}
		}
	}
	for p := range layerOf {
		if _, ok := imports[p]; !ok {
			t.Errorf("layers names %s, which has no Go files", p)
		}
	}
}

// moduleImports is, per package of the module (by its path in it), the
// module's packages its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || (strings.HasPrefix(name, ".") && path != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, spec := range f.Imports {
			ip, _ := strconv.Unquote(spec.Path.Value)
			if dep, ok := strings.CutPrefix(ip, module); ok && !slices.Contains(out[pkg], dep) {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
