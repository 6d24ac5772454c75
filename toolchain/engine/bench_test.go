package engine

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// BenchmarkIPv4LPM is the engine's cost per packet for IPv4 LPM forwarding
// (testdata/ipv4_lpm.p4): parse Ethernet+IPv4, one LPM lookup in a table of
// routes with several prefix lengths, TTL decrement, IPv4 checksum update,
// deparse; ingress and egress passes as the device runs them.
func BenchmarkIPv4LPM(b *testing.B) {
	pl := loadFixture(b, "ipv4_lpm.json", Options{})
	for i := 0; i < 256; i++ {
		addRoute(b, pl, 0x0a000000|uint32(i)<<8, 24, 0x020000000000|uint64(i), uint16(i%8))
	}
	addRoute(b, pl, 0x0a000000, 8, 0x0200000000ff, 9)
	addRoute(b, pl, 0x0a010000, 16, 0x0200000000fe, 10)
	addRoute(b, pl, 0, 0, 0x0200000000fd, 11)
	frame := ipv4Frame(0x0a002a01, 64, make([]byte, 64-34))
	jobs := make([]Job, 0, 4)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	cpu := startThreadCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		jobs = pl.Ingress(frame, 1, jobs[:0])
		for _, j := range jobs {
			out, _ := pl.Egress(j, QueueMeta{}, nil)
			if out.Pkt != nil {
				out.Pkt.Release()
			}
		}
	}
	b.StopTimer()
	cpu.report(b)
}

// BenchmarkIPv4LPMParallel runs the same path on every CPU at once.
func BenchmarkIPv4LPMParallel(b *testing.B) {
	pl := loadFixture(b, "ipv4_lpm.json", Options{})
	for i := 0; i < 256; i++ {
		addRoute(b, pl, 0x0a000000|uint32(i)<<8, 24, 0x020000000000|uint64(i), uint16(i%8))
	}
	frame := ipv4Frame(0x0a002a01, 64, make([]byte, 64-34))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		jobs := make([]Job, 0, 4)
		for pb.Next() {
			jobs = pl.Ingress(frame, 1, jobs[:0])
			for _, j := range jobs {
				out, _ := pl.Egress(j, QueueMeta{}, nil)
				if out.Pkt != nil {
					out.Pkt.Release()
				}
			}
		}
	})
}

// BenchmarkIPv4LPMWithWriter measures packet cost while another goroutine
// keeps adding and deleting routes (the control plane's lock in action).
func BenchmarkIPv4LPMWithWriter(b *testing.B) {
	pl := loadFixture(b, "ipv4_lpm.json", Options{})
	for i := 0; i < 256; i++ {
		addRoute(b, pl, 0x0a000000|uint32(i)<<8, 24, 0x020000000000|uint64(i), uint16(i%8))
	}
	tid, _ := pl.Lookup(KindTable, "MyIngress.ipv4_lpm")
	fwd, _ := pl.Lookup(KindAction, "MyIngress.ipv4_forward")
	var stop atomic.Bool
	var writes atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		v := make([]byte, 4)
		for i := 0; !stop.Load(); i++ {
			binary.BigEndian.PutUint32(v, 0x0b000000|uint32(i%4096)<<8)
			m := []pipeline.Match{{Value: v, PrefixLen: 24}}
			_ = pl.AddEntry(tid, pipeline.TableEntry{Match: m, Action: pipeline.ActionCall{ActionID: fwd, Params: [][]byte{{1}, {1}}}})
			_ = pl.DeleteEntry(tid, m, 0)
			writes.Add(2)
		}
	}()
	frame := ipv4Frame(0x0a002a01, 64, make([]byte, 64-34))
	jobs := make([]Job, 0, 4)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		jobs = pl.Ingress(frame, 1, jobs[:0])
		for _, j := range jobs {
			out, _ := pl.Egress(j, QueueMeta{}, nil)
			if out.Pkt != nil {
				out.Pkt.Release()
			}
		}
	}
	b.StopTimer()
	stop.Store(true)
	<-done
	b.ReportMetric(float64(writes.Load())/b.Elapsed().Seconds(), "writes/s")
	// allocs/op counts the writer's allocations too (the statistics are
	// process-wide); TestPacketsAllocateNothingWhileRoutesChange shows the
	// packets' share is zero.
	b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
}
