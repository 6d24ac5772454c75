package p4rt_test

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// BenchmarkWriteInsert measures one exact-match INSERT per Write RPC
// through gRPC (in-memory connection) into the engine: the control-plane
// rate a controller sees when it programs entries one at a time (the entry
// is deleted again, untimed).
func BenchmarkWriteInsert(b *testing.B) {
	h := ready(b)
	id := h.ids()
	te := entry(id.l2, 0, call(id.forward, []byte{2}), exact(1, 0, 0, 0, 0, 1, 2))
	ins, del := insert(te), remove(te)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h.mustWrite(ins)
		b.StopTimer()
		h.mustWrite(del)
		b.StartTimer()
	}
}

// BenchmarkWriteBatch measures 50 INSERTs per Write into a 64-entry table
// (the batch is deleted again untimed).
func BenchmarkWriteBatch(b *testing.B) {
	h := ready(b)
	id := h.ids()
	ins := make([]*p4v1.Update, 50)
	del := make([]*p4v1.Update, 50)
	for i := range ins {
		te := entry(id.l2, 0, call(id.forward, []byte{2}), exact(1, 0, 0, 0, 0, 1, byte(i)))
		ins[i], del[i] = insert(te), remove(te)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h.mustWrite(ins...)
		b.StopTimer()
		h.mustWrite(del...)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*len(ins))/b.Elapsed().Seconds(), "entries/s")
}
