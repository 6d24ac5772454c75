package engine

import "testing"

// Component costs of the IPv4 LPM path (for profiling the engine; the
// figure of record is BenchmarkIPv4LPM).
func BenchmarkComponents(b *testing.B) {
	pl := loadFixture(b, "ipv4_lpm.json", Options{})
	for i := 0; i < 256; i++ {
		addRoute(b, pl, 0x0a000000|uint32(i)<<8, 24, 0x020000000000|uint64(i), uint16(i%8))
	}
	frame := ipv4Frame(0x0a002a01, 64, make([]byte, 64-34))
	p := pl.acquire()
	p.load(frame)
	p.resetAll()
	pl.parser.run(p)
	runControl(p, pl.ingress) // the routed packet: TTL and MACs changed
	b.Run("acquire+release", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			q := pl.acquire()
			q.Release()
		}
	})
	b.Run("load+reset", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p.load(frame)
			p.resetAll()
		}
	})
	b.Run("parse", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p.start = headroom
			pl.parser.run(p)
		}
	})
	b.Run("ingress-control", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runControl(p, pl.ingress)
		}
	})
	b.Run("checksum-update", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pl.updateChecksums(p)
		}
	})
	// checksum update and in-place write-back of the changed fields
	// (repeatable: the headers stay where the parser found them)
	b.Run("deparse", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pl.deparse(p)
		}
	})
}
