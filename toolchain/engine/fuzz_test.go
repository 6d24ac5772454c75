package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// fuzzPrograms are the programs packets are thrown at: the IPv4 fixture,
// a program with arithmetic/varbit-free parsing of many field widths, and,
// when the shared conformance corpus is present, every p4c JSON in it.
func fuzzPrograms(t testing.TB) [][]byte {
	fixture, err := os.ReadFile("testdata/ipv4_lpm.json")
	if err != nil {
		t.Fatal(err)
	}
	progs := [][]byte{fixture}
	tp := testProg{
		fields: [][]any{u("a", 3), u("b", 13), s("c", 8), u("d", 72), u("e", 8)},
		prims: []any{
			tAssign(tF("h", "d"), tE("+", tF("h", "d"), tF("h", "b"))),
			tAssign(tF("h", "e"), tE(">>", tF("h", "a"), tF("h", "e"))),
			tAssign(tF("standard_metadata", "egress_spec"), tF("h", "b")),
		},
		parserOps: []any{map[string]any{"op": "advance", "parameters": []any{tE("&", tF("h", "e"), tH("0x38"))}}},
	}
	progs = append(progs, tp.json())
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf", "*.p4c.json"))
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		progs = append(progs, data)
	}
	return progs
}

// fuzzOptions: one fixed clock, so that timestamps and meters agree
// between a program and its reference.
var fuzzOptions = Options{RandomSeed: 1, Clock: func() int64 { return 1_000_000_000 }}

// fuzzPipelines loads every fuzz program twice: as Load compiles it and
// with the fast paths off (the reference).
func fuzzPipelines(t testing.TB) (pls, refs []*Pipeline) {
	for i, prog := range fuzzPrograms(t) {
		pl, err := Load(prog, fuzzOptions)
		if err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		ref, err := load(prog, fuzzOptions, true)
		if err != nil {
			t.Fatalf("program %d (reference): %v", i, err)
		}
		pls, refs = append(pls, pl), append(refs, ref)
	}
	return pls, refs
}

type fuzzOut struct {
	port  uint32
	frame []byte
}

func collect(pl *Pipeline, frame []byte, port uint32) []fuzzOut {
	var outs []fuzzOut
	pl.ProcessPacket(frame, port, func(p uint32, out []byte) {
		outs = append(outs, fuzzOut{p, append([]byte(nil), out...)})
	})
	return outs
}

// checkAgainstReference processes frame on a program and its reference
// and requires the same frames, of sane sizes.
func checkAgainstReference(t *testing.T, pl, ref *Pipeline, frame []byte, port uint32) {
	got, want := collect(pl, frame, port), collect(ref, frame, port)
	for _, o := range got {
		if len(o.frame) > len(frame)+4096 {
			t.Fatalf("output frame of %d bytes from %d", len(o.frame), len(frame))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("frame %x: %d frames out, reference %d", frame, len(got), len(want))
	}
	for i := range got {
		if got[i].port != want[i].port || !bytes.Equal(got[i].frame, want[i].frame) {
			t.Fatalf("frame %x: out %d: port %d %x, reference port %d %x", frame, i, got[i].port, got[i].frame, want[i].port, want[i].frame)
		}
	}
}

// FuzzProcessPacket throws arbitrary bytes at every program: processing
// must never panic, every frame that leaves must be a sane size, and the
// fast paths must give what the reference paths give.
func FuzzProcessPacket(f *testing.F) {
	pls, refs := fuzzPipelines(f)
	f.Add(uint16(0), uint16(1), ipv4Frame(0x0a000001, 64, []byte("x")))
	f.Add(uint16(1), uint16(0), []byte{0x45})
	f.Add(uint16(7), uint16(511), []byte{})
	f.Add(uint16(3), uint16(2), make([]byte, 300))
	f.Fuzz(func(t *testing.T, which uint16, port uint16, frame []byte) {
		if len(frame) > 9216 {
			frame = frame[:9216]
		}
		i := int(which) % len(pls)
		checkAgainstReference(t, pls[i], refs[i], frame, uint32(port)&0x1ff)
	})
}

// FuzzLoad feeds corrupted program JSON to Load: it must return an error or
// a pipeline, never panic.
func FuzzLoad(f *testing.F) {
	data, err := os.ReadFile("testdata/ipv4_lpm.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"header_types":[{"name":"x","fields":[["a","*"]]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		pl, err := Load(b, Options{})
		if err == nil && pl != nil {
			pl.ProcessPacket(make([]byte, 64), 1, nil)
		}
	})
}

// TestFuzzSeeds runs the fuzz seeds plus deterministic pseudo-random frames
// through every program as an ordinary test.
func TestFuzzSeeds(t *testing.T) {
	pls, refs := fuzzPipelines(t)
	rng := uint64(12345)
	next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
	for i, pl := range pls {
		for k := 0; k < 200; k++ {
			n := int(next() % 200)
			frame := make([]byte, n)
			for j := range frame {
				frame[j] = byte(next())
			}
			checkAgainstReference(t, pl, refs[i], frame, uint32(next()%512))
		}
	}
}
