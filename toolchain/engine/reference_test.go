package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
	"github.com/terrapin/terrapin/toolchain/stf"
)

// TestFastPathsMatchReference runs every program of the shared conformance
// corpus (p4c's JSON) twice, once as Load compiles it and once with every
// fast path disabled (LoadReference: full deparse, checksums over packed
// fields, generic extraction and actions), and requires the same frames
// from both, for the STF script's packets and for variants of each packet
// (truncated, extended, bytes flipped) that reach parser errors and
// other header combinations. The STF expectations must hold as well.
func TestFastPathsMatchReference(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "conformance", "p4c-stf")
	if d := os.Getenv("ENGINE_DIFF_CORPUS"); d != "" {
		dir = d // e.g. the corpus with terrapin-p4c's JSON as NAME.p4c.json
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no conformance corpus at %s", dir)
	}
	sum, err := stf.RunCorpus(context.Background(), stf.CorpusOptions{
		Dir:        dir,
		JSON:       stf.JSONP4C,
		NewBackend: func() stf.Backend { return &diffBackend{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Results {
		if !r.Pass {
			t.Errorf("%s: %s", r.Name, r.Reason)
		}
	}
	if len(sum.Results) == 0 {
		t.Error("no programs found")
	}
}

// diffBackend drives four pipelines with the same control-plane commands:
// main and mainRef see exactly the script's packets (main's outputs are
// what the script checks), vari and variRef also see variants of them.
type diffBackend struct {
	main, mainRef, vari, variRef *engine.Pipeline
	nowNs                        int64
	out                          []stf.OutPacket
}

func (b *diffBackend) all() []*engine.Pipeline {
	return []*engine.Pipeline{b.main, b.mainRef, b.vari, b.variRef}
}

func (b *diffBackend) Start(prog *stf.Program) error {
	opts := engine.Options{RandomSeed: 1, Clock: func() int64 { return b.nowNs }}
	var err error
	if b.main, err = engine.Load(prog.JSON, opts); err != nil {
		return err
	}
	if b.vari, err = engine.Load(prog.JSON, opts); err != nil {
		return err
	}
	if b.mainRef, err = engine.LoadReference(prog.JSON, opts); err != nil {
		return err
	}
	b.variRef, err = engine.LoadReference(prog.JSON, opts)
	return err
}

// each applies a control-plane call to every pipeline; they must agree.
func (b *diffBackend) each(f func(pl *engine.Pipeline) error) error {
	var first error
	for i, pl := range b.all() {
		err := f(pl)
		if i == 0 {
			first = err
		} else if (err == nil) != (first == nil) {
			return fmt.Errorf("pipelines disagree: %v vs %v", first, err)
		}
	}
	return first
}

func (b *diffBackend) AddEntry(t pipeline.TableInfo, e pipeline.TableEntry) error {
	return b.each(func(pl *engine.Pipeline) error { return pl.AddEntry(t.ID, e) })
}

func (b *diffBackend) DeleteEntry(t pipeline.TableInfo, m []pipeline.Match, prio int32) error {
	return b.each(func(pl *engine.Pipeline) error { return pl.DeleteEntry(t.ID, m, prio) })
}

func (b *diffBackend) SetDefault(t pipeline.TableInfo, a pipeline.ActionCall) error {
	return b.each(func(pl *engine.Pipeline) error { return pl.SetDefaultAction(t.ID, a) })
}

func (b *diffBackend) SetCloneSession(id uint32, s pipeline.CloneSession) error {
	return b.each(func(pl *engine.Pipeline) error { return pl.SetCloneSession(id, s) })
}

func (b *diffBackend) SetMulticastGroup(g uint32, r []pipeline.Replica) error {
	return b.each(func(pl *engine.Pipeline) error { return pl.SetMulticastGroup(g, r) })
}

func (b *diffBackend) ReadCounter(c pipeline.CounterInfo, index int) (pipeline.CounterData, error) {
	d, err := b.main.ReadCounter(c.ID, index)
	r, rerr := b.mainRef.ReadCounter(c.ID, index)
	if err == nil && rerr == nil && d != r {
		return d, fmt.Errorf("counter %s[%d]: %+v, reference %+v", c.Name, index, d, r)
	}
	return d, err
}

func (b *diffBackend) ReadDirectCounter(t pipeline.TableInfo, m []pipeline.Match, prio int32) (pipeline.CounterData, error) {
	d, err := b.main.ReadDirectCounter(t.ID, m, prio)
	r, rerr := b.mainRef.ReadDirectCounter(t.ID, m, prio)
	if err == nil && rerr == nil && d != r {
		return d, fmt.Errorf("direct counter of %s: %+v, reference %+v", t.Name, d, r)
	}
	return d, err
}

func run(pl *engine.Pipeline, port uint32, frame []byte) []stf.OutPacket {
	var out []stf.OutPacket
	pl.ProcessPacket(frame, port, func(p uint32, f []byte) {
		out = append(out, stf.OutPacket{Port: p, Data: append([]byte(nil), f...)})
	})
	return out
}

func sameOutputs(a, b []stf.OutPacket) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d frames, reference %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Port != b[i].Port || !bytes.Equal(a[i].Data, b[i].Data) {
			return fmt.Errorf("frame %d: port %d %x, reference port %d %x", i, a[i].Port, a[i].Data, b[i].Port, b[i].Data)
		}
	}
	return nil
}

// variants of a frame: every prefix length down to a few bytes in steps,
// a longer frame, and single bytes flipped across the first 64.
func variants(frame []byte) [][]byte {
	var vs [][]byte
	for n := len(frame) - 1; n >= 0; n -= 1 + n/8 {
		vs = append(vs, frame[:n])
	}
	vs = append(vs, append(append([]byte(nil), frame...), 0x5a, 0xa5, 0x0f, 0xf0))
	for i := 0; i < len(frame) && i < 64; i += 3 {
		v := append([]byte(nil), frame...)
		v[i] ^= 0xff - byte(i)
		vs = append(vs, v)
	}
	return vs
}

func (b *diffBackend) Send(port uint32, frame []byte) error {
	b.nowNs += 1_000_000
	got, ref := run(b.main, port, frame), run(b.mainRef, port, frame)
	if err := sameOutputs(got, ref); err != nil {
		return fmt.Errorf("fast path differs from reference: %v", err)
	}
	b.out = append(b.out, got...)
	for _, v := range append([][]byte{frame}, variants(frame)...) {
		if err := sameOutputs(run(b.vari, port, v), run(b.variRef, port, v)); err != nil {
			return fmt.Errorf("fast path differs from reference on variant %x: %v", v, err)
		}
	}
	return nil
}

func (b *diffBackend) Wait() error { return nil }

func (b *diffBackend) Outputs() ([]stf.OutPacket, error) {
	out := b.out
	b.out = nil
	return out, nil
}

func (b *diffBackend) Stop() error { return nil }
