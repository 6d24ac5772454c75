package device

import (
	"bytes"
	"testing"
	"time"
)

// newCPUOnlyDevice is a device with no interfaces, only the CPU port, so
// the forwarding path can be exercised without root: frames enter ingress
// as if received on port 1 or as packet-outs, and leave on the CPU port.
func newCPUOnlyDevice(t testing.TB, pipe Pipeline) (*Device, *[][]byte) {
	t.Helper()
	d, err := New(Config{CPUPort: 255, QueueCapacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	d.SetPipeline(pipe)
	var got [][]byte
	d.SubscribePacketIn(func(f []byte) { got = append(got, bytes.Clone(f)) })
	return d, &got
}

// FuzzDevicePath throws arbitrary frames at the receive path and the
// packet-out path: nothing may panic, every frame is either delivered
// intact or counted as dropped, and no packet buffer leaks.
func FuzzDevicePath(f *testing.F) {
	f.Add([]byte{}, byte(0))
	f.Add(make([]byte, 13), byte(1))
	f.Add(testFrame(60, 1, 7), byte(2))
	f.Add(testFrame(1514, 2, 9), byte(3))
	f.Add(bytes.Repeat([]byte{0xff}, 3000), byte(4))
	m := NewPortMap()
	m.Connect(1, 255)
	m.Connect(255, 255)
	m.PriorityOffset = 0
	m.StampOffset = 20
	d, got := newCPUOnlyDevice(f, m)
	in := &inputPort{num: 1, iface: "fuzz"}
	w := d.newWorker()
	f.Fuzz(func(t *testing.T, frame []byte, mode byte) {
		*got = (*got)[:0]
		before := d.Stats()
		switch mode % 3 {
		case 0:
			d.pipeMu.RLock()
			w.receive(in, rxFrame{data: frame, wireLen: len(frame)})
			w.flush()
			d.pipeMu.RUnlock()
		case 1:
			err := d.InjectPacketOut(frame)
			if len(frame) == 0 || len(frame) > MaxFrame {
				if err == nil {
					t.Fatalf("packet-out of %d bytes accepted", len(frame))
				}
				return
			}
			if err != nil {
				t.Fatalf("packet-out: %v", err)
			}
		case 2:
			// Truncated by the ring: must be dropped and counted.
			d.pipeMu.RLock()
			w.receive(in, rxFrame{data: frame, wireLen: len(frame) + 1})
			w.flush()
			d.pipeMu.RUnlock()
			if len(*got) != 0 || in.rxTruncated.Load() == 0 {
				t.Fatalf("truncated frame forwarded or not counted")
			}
			return
		}
		after := d.Stats()
		if len(frame) == 0 {
			return
		}
		prio := frame[0] & 7
		if len(*got) == 1 {
			out := (*got)[0]
			if len(out) != len(frame) {
				t.Fatalf("delivered %d bytes, sent %d", len(out), len(frame))
			}
			if len(frame) >= 37 && out[36] != prio {
				t.Fatalf("qid %d, want %d", out[36], prio)
			}
		} else if len(frame) <= MaxFrame && after.Ports[0].Queues[prio].Dropped == before.Ports[0].Queues[prio].Dropped {
			t.Fatalf("frame of %d bytes neither delivered nor counted as dropped", len(frame))
		}
		if n := m.Outstanding(); n != 0 {
			t.Fatalf("%d packets never released", n)
		}
	})
}

// TestNoAllocsPerPacket checks the forwarding path (receive, ingress,
// enqueue, drain, egress, transmit) allocates nothing per packet.
func TestNoAllocsPerPacket(t *testing.T) {
	m := NewPortMap()
	m.Connect(1, 255)
	d, err := New(Config{CPUPort: 255})
	if err != nil {
		t.Fatal(err)
	}
	d.SetPipeline(m)
	n := 0
	d.SubscribePacketIn(func(f []byte) { n++ })
	in := &inputPort{num: 1, iface: "t"}
	w := d.newWorker()
	frame := testFrame(100, 1, 0)
	allocs := testing.AllocsPerRun(1000, func() {
		d.pipeMu.RLock()
		w.receive(in, rxFrame{data: frame, wireLen: len(frame)})
		w.flush()
		d.pipeMu.RUnlock()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per packet, want 0", allocs)
	}
	if n < 1000 {
		t.Errorf("delivered %d packets", n)
	}
}

// BenchmarkForwardingPath measures the device's own cost per packet
// (everything but the syscalls) with the trivial PortMap pipeline.
func BenchmarkForwardingPath(b *testing.B) {
	m := NewPortMap()
	m.Connect(1, 255)
	d, err := New(Config{CPUPort: 255})
	if err != nil {
		b.Fatal(err)
	}
	d.SetPipeline(m)
	d.SubscribePacketIn(func(f []byte) {})
	in := &inputPort{num: 1, iface: "b"}
	w := d.newWorker()
	frame := testFrame(64, 1, 0)
	b.ReportAllocs()
	d.pipeMu.RLock()
	// As the receive loop does: one clock reading per batch of 32 frames,
	// each frame carrying a kernel receive stamp.
	var ts int64
	for i := 0; i < b.N; i++ {
		if i%32 == 0 {
			in.clock.beginBatch(d)
			w.now = in.clock.now
			ts = time.Now().UnixNano()
		}
		w.receive(in, rxFrame{data: frame, wireLen: len(frame), tsNs: ts})
		if i%32 == 31 {
			w.commitRx(in)
			w.flush()
		}
	}
	w.flush()
	d.pipeMu.RUnlock()
}
