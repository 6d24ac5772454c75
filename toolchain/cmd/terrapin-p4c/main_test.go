package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const prog = `#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct headers { h_t h; }
struct meta { }
parser P(packet_in p, out headers hdr, inout meta m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout meta m) { apply { } }
control I(inout headers hdr, inout meta m, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; hdr.h.a = WIDTH_CHECK; }
    table t { key = { hdr.h.a : exact; } actions = { fwd; NoAction; } }
    apply { t.apply(); }
}
control E(inout headers hdr, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
`

func writeProg(t *testing.T, dir, src string) string {
	t.Helper()
	path := filepath.Join(dir, "prog.p4")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCompileAndOutputs(t *testing.T) {
	dir := t.TempDir()
	p := writeProg(t, dir, prog)
	out := filepath.Join(dir, "out.json")
	txt, js, bin := filepath.Join(dir, "p.txtpb"), filepath.Join(dir, "p.json"), filepath.Join(dir, "p.bin")
	var stdout, stderr bytes.Buffer
	code := run([]string{"--target", "bmv2", "--arch=v1model", "--std", "p4-16", "-DWIDTH_CHECK=8w7",
		"--p4runtime-files", txt + "," + js + "," + bin, "-o", out, p}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil || !json.Valid(data) {
		t.Fatalf("BMv2 JSON: %v", err)
	}
	text, _ := os.ReadFile(txt)
	if !strings.Contains(string(text), `name: "I.t"`) {
		t.Errorf("text P4Info lacks table I.t:\n%s", text)
	}
	var fromJSON, fromBin p4v1.P4Info
	jb, _ := os.ReadFile(js)
	if err := protojson.Unmarshal(jb, &fromJSON); err != nil {
		t.Errorf("JSON P4Info: %v", err)
	}
	bb, _ := os.ReadFile(bin)
	if err := proto.Unmarshal(bb, &fromBin); err != nil {
		t.Errorf("binary P4Info: %v", err)
	}
	if !proto.Equal(&fromJSON, &fromBin) || len(fromBin.Tables) != 1 {
		t.Errorf("the three P4Info files must describe the same program")
	}
}

func TestOutputDirectoryAndSingleP4InfoFlag(t *testing.T) {
	dir := t.TempDir()
	p := writeProg(t, dir, prog)
	outDir := filepath.Join(dir, "build")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(dir, "info.out")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-b", "bmv2", "-D", "WIDTH_CHECK=1", "-I", dir, "--p4runtime-file", info, "--p4runtime-format", "json", "-o", outDir, p}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(outDir, "prog.json")); err != nil {
		t.Errorf("-o DIR should write DIR/prog.json: %v", err)
	}
	b, _ := os.ReadFile(info)
	var pi p4v1.P4Info
	if err := protojson.Unmarshal(b, &pi); err != nil {
		t.Errorf("--p4runtime-format json not honoured: %v", err)
	}
}

func TestErrorsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	// WIDTH_CHECK undefined: an undeclared identifier
	p := writeProg(t, dir, prog)
	out := filepath.Join(dir, "out.json")
	info := filepath.Join(dir, "p.txtpb")
	var stdout, stderr bytes.Buffer
	code := run([]string{"--p4runtime-files", info, "-o", out, p}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "prog.p4:11:") || !strings.Contains(stderr.String(), "error: WIDTH_CHECK: undeclared identifier") {
		t.Errorf("diagnostic: %q", stderr.String())
	}
	for _, f := range []string{out, info} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s written despite the error", f)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--target", "tofino", "x.p4"},
		{"--arch", "psa", "x.p4"},
		{"--std", "p4-14", "x.p4"},
		{"--frobnicate", "x.p4"},
		{"a.p4", "b.p4"},
		{"-o"},
		{"--p4runtime-format", "yaml", "x.p4"},
		{"missing-file.p4"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 1 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and a message", args, code, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage") {
		t.Errorf("--help: exit %d", code)
	}
}
