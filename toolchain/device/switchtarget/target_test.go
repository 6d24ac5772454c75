package switchtarget

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/p4rt"
)

func corpusJSON(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "conformance", "p4c-stf", name))
	if err != nil {
		t.Skipf("conformance corpus not found: %v", err)
	}
	return b
}

// TestPacketOutToPacketIn pushes a program through the target as the
// P4Runtime server would, then sends a PacketOut whose header byte makes
// the program's LPM table pick port 12 — configured as the CPU port — so it
// must come back as a PacketIn. A second push replaces the pipeline.
func TestPacketOutToPacketIn(t *testing.T) {
	js := corpusJSON(t, "table-entries-lpm-bmv2.p4c.json")
	dev, err := device.New(device.Config{CPUPort: 12})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dev.Run(ctx) }()
	defer func() { cancel(); <-done }()

	tg := New(dev, EngineCompiler(dev, nil))
	defer tg.Close()
	var _ p4rt.Target = tg
	got := make(chan []byte, 4)
	tg.SetControllerSink(func(f []byte) { got <- bytes.Clone(f) })

	if err := tg.InjectPacketOut([]byte{1, 2, 3}); err == nil {
		t.Error("packet-out accepted with no pipeline")
	}
	if _, err := tg.PreparePipeline(ctx, []byte("{not json")); err == nil {
		t.Error("bad JSON accepted")
	}
	for round := 0; round < 2; round++ {
		pp, err := tg.PreparePipeline(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		if pp.Control() == nil {
			t.Fatal("no control API")
		}
		if err := pp.Commit(); err != nil {
			t.Fatal(err)
		}
		f := make([]byte, 40)
		f[1], f[3], f[5] = 0x0c, 0x12, 0xb0
		if err := tg.InjectPacketOut(f); err != nil {
			t.Fatal(err)
		}
		select {
		case in := <-got:
			if !bytes.Equal(in, f) {
				t.Errorf("packet-in % x, want % x", in, f)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: no packet-in", round)
		}
		// l=0x11 goes to port 11, which does not exist: dropped, no packet-in.
		f[3] = 0x11
		if err := tg.InjectPacketOut(f); err != nil {
			t.Fatal(err)
		}
		select {
		case in := <-got:
			t.Errorf("unexpected packet-in % x", in)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if st := dev.Stats(); st.DropNoPort != 2 {
		t.Errorf("no_such_port drops %d, want 2", st.DropNoPort)
	}
}
