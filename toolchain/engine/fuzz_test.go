package engine

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// fuzzPipelines loads the programs packets are thrown at: the IPv4 fixture,
// a program with arithmetic/varbit-free parsing of many field widths, and,
// when the shared conformance corpus is present, every p4c JSON in it.
func fuzzPipelines(t testing.TB) []*Pipeline {
	var pls []*Pipeline
	pls = append(pls, loadFixture(t, "ipv4_lpm.json", Options{}))
	tp := testProg{
		fields: [][]any{u("a", 3), u("b", 13), s("c", 8), u("d", 72), u("e", 8)},
		prims: []any{
			tAssign(tF("h", "d"), tE("+", tF("h", "d"), tF("h", "b"))),
			tAssign(tF("h", "e"), tE(">>", tF("h", "a"), tF("h", "e"))),
			tAssign(tF("standard_metadata", "egress_spec"), tF("h", "b")),
		},
		parserOps: []any{map[string]any{"op": "advance", "parameters": []any{tE("&", tF("h", "e"), tH("0x38"))}}},
	}
	pls = append(pls, tp.load(t, Options{}))
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf", "*.p4c.json"))
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pl, err := Load(data, Options{RandomSeed: 1})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pls = append(pls, pl)
	}
	return pls
}

// FuzzProcessPacket throws arbitrary bytes at every program: processing
// must never panic, and every frame that leaves must be a sane size.
func FuzzProcessPacket(f *testing.F) {
	pls := fuzzPipelines(f)
	f.Add(uint16(0), uint16(1), ipv4Frame(0x0a000001, 64, []byte("x")))
	f.Add(uint16(1), uint16(0), []byte{0x45})
	f.Add(uint16(7), uint16(511), []byte{})
	f.Add(uint16(3), uint16(2), make([]byte, 300))
	f.Fuzz(func(t *testing.T, which uint16, port uint16, frame []byte) {
		if len(frame) > 9216 {
			frame = frame[:9216]
		}
		pl := pls[int(which)%len(pls)]
		pl.ProcessPacket(frame, uint32(port)&0x1ff, func(_ uint32, out []byte) {
			if len(out) > len(frame)+4096 {
				t.Fatalf("output frame of %d bytes from %d", len(out), len(frame))
			}
		})
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
	pls := fuzzPipelines(t)
	rng := uint64(12345)
	next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
	for i, pl := range pls {
		for k := 0; k < 200; k++ {
			n := int(next() % 200)
			frame := make([]byte, n)
			for j := range frame {
				frame[j] = byte(next())
			}
			pl.ProcessPacket(frame, uint32(next()%512), nil)
		}
		_ = i
	}
}
