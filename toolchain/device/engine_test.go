package device

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/engine"
)

// corpusJSON reads a p4c-compiled program from the shared conformance corpus
// (beside the repository, as in CI).
func corpusJSON(t *testing.T, name string) []byte {
	t.Helper()
	path := filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf", name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("conformance corpus not found: %v", err)
	}
	return b
}

// TestEngineForwarding runs a real program (an LPM table with const
// entries choosing egress_spec 11, 12 or 13 from one header byte) through
// the device on veths: the frame leaves on the port the table picked.
func TestEngineForwarding(t *testing.T) {
	js := corpusJSON(t, "table-entries-lpm-bmv2.p4c.json")
	tn := newTestNet(t, 4, 1500)
	d := tn.newDevice(t, Config{Ports: []PortConfig{
		{Num: 1, Iface: tn.sw(1)}, {Num: 11, Iface: tn.sw(2)}, {Num: 12, Iface: tn.sw(3)}, {Num: 13, Iface: tn.sw(4)},
	}})
	pl, err := engine.Load(js, engine.Options{Clock: d.NowNs, DropPort: DropPort})
	if err != nil {
		t.Fatal(err)
	}
	d.SetPipeline(NewEnginePipeline(pl))
	h1 := tn.hostSocket(t, 1)
	hosts := map[int]*hostSock{11: tn.hostSocket(t, 2), 12: tn.hostSocket(t, 3), 13: tn.hostSocket(t, 4)}
	start(t, d)
	tests := []struct {
		l    byte
		port int
	}{{0x11, 11}, {0x10, 11}, {0x12, 12}, {0xff, 13}}
	for _, tc := range tests {
		// header hdr { bit<8> e; bit<16> t; bit<8> l; bit<8> r; bit<8> v; }, then payload
		f := make([]byte, 60)
		f[0], f[1], f[3], f[5] = 0, 0x0b, tc.l, 0xb0
		for i := 6; i < len(f); i++ {
			f[i] = byte(i)
		}
		h1.send(t, f)
		got, _ := hosts[tc.port].recv(t, 2*time.Second)
		if got == nil {
			t.Fatalf("l=%#x: nothing on port %d", tc.l, tc.port)
		}
		if !bytes.Equal(got, f) {
			t.Errorf("l=%#x: frame changed: % x", tc.l, got[:8])
		}
		for p, h := range hosts {
			if p != tc.port {
				if g, _ := h.recv(t, 0); g != nil {
					t.Errorf("l=%#x: also on port %d", tc.l, p)
				}
			}
		}
	}
}

// TestEngineNoAllocs checks the device path with the engine allocates
// nothing per packet once warm.
func TestEngineNoAllocs(t *testing.T) {
	js := corpusJSON(t, "table-entries-lpm-bmv2.p4c.json")
	d, err := New(Config{CPUPort: 12})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := engine.Load(js, engine.Options{Clock: d.NowNs, DropPort: DropPort})
	if err != nil {
		t.Fatal(err)
	}
	d.SetPipeline(NewEnginePipeline(pl))
	n := 0
	d.SubscribePacketIn(func([]byte) { n++ })
	in := &inputPort{num: 1, iface: "t"}
	w := d.newWorker()
	f := make([]byte, 64)
	f[3] = 0x12 // → port 12, the CPU port here
	run := func() {
		d.pipeMu.RLock()
		w.receive(in, rxFrame{data: f, wireLen: len(f)})
		w.flush()
		d.pipeMu.RUnlock()
	}
	for i := 0; i < 100; i++ {
		run()
	}
	if allocs := testing.AllocsPerRun(1000, run); allocs != 0 {
		t.Errorf("%.2f allocations per packet", allocs)
	}
	if n < 1000 {
		t.Errorf("only %d packets reached port 12", n)
	}
}
