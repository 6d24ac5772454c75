package bmnotify

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/terrapin/terrapin/toolchain/compiler"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

type recorder struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (r *recorder) Send(parts ...[]byte) {
	var m []byte
	for _, p := range parts {
		m = append(m, p...)
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *recorder) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.msgs
	r.msgs = nil
	return out
}

// agedTable loads the thrift-cli suite's program (its table "aged" has
// support_timeout) on a clock the test moves, with three entries.
func agedTable(t *testing.T) (*engine.Pipeline, *atomic.Int64, int, []uint32) {
	t.Helper()
	res, errs := compiler.Compile(compiler.Options{Program: "../../scripts/thrift-cli/cli_compare.p4"})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var now atomic.Int64
	pl, err := engine.Load(res.JSON, engine.Options{Clock: now.Load})
	if err != nil {
		t.Fatal(err)
	}
	id, ok := pl.Lookup(engine.KindTable, "CliIngress.aged")
	if !ok {
		t.Fatal("no table CliIngress.aged")
	}
	noAction, ok := pl.Lookup(engine.KindAction, "NoAction")
	if !ok {
		t.Fatal("no action NoAction")
	}
	var handles []uint32
	for flow := byte(1); flow <= 3; flow++ {
		if err := pl.AddEntry(id, pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{0, flow}}},
			Action: pipeline.ActionCall{ActionID: noAction}}); err != nil {
			t.Fatal(err)
		}
	}
	es, err := pl.EntriesByHandle(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		handles = append(handles, e.Handle)
	}
	return pl, &now, id, handles
}

// TestAgeingSweeps: an entry is reported once its time since its last hit
// reaches its timeout (entries without one never are), in BMv2's message
// layout; one that stays idle is reported every other sweep, as BMv2's
// ageing monitor does; a new timeout restarts its idle time.
func TestAgeingSweeps(t *testing.T) {
	pl, now, table, h := agedTable(t)
	const ms = int64(1e6)
	if err := pl.SetEntryTimeout(table, h[0], 100); err != nil {
		t.Fatal(err)
	}
	if err := pl.SetEntryTimeout(table, h[1], 300); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a := &ageing{pub: rec, deviceID: 7}
	type sweep struct {
		at   int64 // ms
		want [][]uint32
	}
	for _, s := range []sweep{
		{50, nil},
		{100, [][]uint32{{h[0]}}},
		{200, nil},                      // h[0] reported by the sweep before
		{300, [][]uint32{{h[0], h[1]}}}, // both, h[0] again every other sweep
		{400, nil},
		{500, [][]uint32{{h[0], h[1]}}},
	} {
		now.Store(s.at * ms)
		a.sweep(pl)
		got := rec.take()
		if len(got) != len(s.want) {
			t.Fatalf("at %d ms: %d messages, want %d", s.at, len(got), len(s.want))
		}
		for i, m := range got {
			if string(m[:4]) != "AGE|" || len(m) != 32+4*len(s.want[i]) {
				t.Fatalf("at %d ms: message % x", s.at, m)
			}
			if dev, tbl, n := binary.LittleEndian.Uint64(m[4:]), int32(binary.LittleEndian.Uint32(m[24:])), binary.LittleEndian.Uint32(m[28:]); dev != 7 || int(tbl) != table || int(n) != len(s.want[i]) {
				t.Errorf("at %d ms: device %d table %d entries %d", s.at, dev, tbl, n)
			}
			for j, want := range s.want[i] {
				if got := binary.LittleEndian.Uint32(m[32+4*j:]); got != want {
					t.Errorf("at %d ms: handle %d = %d, want %d", s.at, j, got, want)
				}
			}
		}
	}
	// A timeout set anew restarts the entry's idle time.
	if err := pl.SetEntryTimeout(table, h[0], 100); err != nil {
		t.Fatal(err)
	}
	now.Store(550 * ms)
	a.sweep(pl)
	for _, m := range rec.take() {
		for j := uint32(0); j < binary.LittleEndian.Uint32(m[28:]); j++ {
			if binary.LittleEndian.Uint32(m[32+4*j:]) == h[0] {
				t.Error("an entry was reported idle 50 ms after its timeout of 100 ms was set")
			}
		}
	}
}

// TestPortMessage: BMv2's 32-byte header, then the port and its state.
func TestPortMessage(t *testing.T) {
	for _, up := range []bool{true, false} {
		m := portMessage(3, 17, up)
		if string(m[:4]) != "PRT|" || len(m) != 40 || binary.LittleEndian.Uint64(m[4:]) != 3 ||
			binary.LittleEndian.Uint32(m[12:]) != 1 || binary.LittleEndian.Uint32(m[32:]) != 17 ||
			(binary.LittleEndian.Uint32(m[36:]) == 1) != up {
			t.Errorf("up %v: % x", up, m)
		}
	}
}
