package device

import (
	"sync"
	"testing"
	"time"
)

// rateArrival is a frame that reached a CPU-port subscriber.
type rateArrival struct {
	prio byte
	at   time.Time
}

// cpuLoop is a device without interfaces whose CPU port (64) sends every
// packet-out back to itself at the priority in byte 18, so that the
// traffic manager's queues can be measured without network namespaces.
func cpuLoop(t *testing.T, collect bool) (*Device, func() []rateArrival) {
	t.Helper()
	d, err := New(Config{CPUPort: 64, QueueCapacity: 1024})
	if err != nil {
		t.Fatal(err)
	}
	m := NewPortMap()
	m.Connect(64, 64)
	m.PriorityOffset = 18
	d.SetPipeline(m)
	var mu sync.Mutex
	var got []rateArrival
	if !collect {
		return d, nil
	}
	d.SubscribePacketIn(func(f []byte) {
		at := time.Now()
		mu.Lock()
		got = append(got, rateArrival{f[18], at})
		mu.Unlock()
	})
	return d, func() []rateArrival {
		mu.Lock()
		defer mu.Unlock()
		return append([]rateArrival(nil), got...)
	}
}

// TestQueueRate: set_queue_rate limits a queue to N packets per second.
// A burst of n frames is queued at once; BMv2's limiter gives the k-th of
// them a time to leave k/N after the first, so by any time T after the
// burst at most N*T+1 have left: checked on every frame, a bound the
// switch cannot pass however the machine schedules it. That the queue is
// not much slower than its limit is checked with a tolerant bound (a busy
// 2-core machine delays the pacer). A limited queue does not hold back the
// others: an unlimited lower priority goes while the higher one waits.
func TestQueueRate(t *testing.T) {
	for _, tc := range []struct {
		name           string
		port, prio     int // what set_queue_rate addresses (-1: all)
		pps            int64
		burstPrio      byte
		n              int
		limited        bool
		otherPrio      int // another priority sent beside, -1 none
		otherFirstDone bool
	}{
		{"all ports, 200 pps", -1, -1, 200, 0, 60, true, -1, false},
		{"one port, 500 pps", 64, -1, 500, 3, 100, true, -1, false},
		{"port and priority, 100 pps", 64, 7, 100, 7, 30, true, -1, false},
		{"another priority unlimited", 64, 3, 1000, 0, 200, false, -1, false},
		{"rate 0 removes the limit", 64, -1, 0, 5, 200, false, -1, false},
		{"limited high priority lets the low one go", 64, 7, 50, 7, 20, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, arrivals := cpuLoop(t, true)
			if tc.pps == 0 {
				// set, then removed
				if err := d.SetQueueRate(tc.port, tc.prio, 10); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.SetQueueRate(tc.port, tc.prio, tc.pps); err != nil {
				t.Fatal(err)
			}
			start(t, d)
			total := tc.n
			t0 := time.Now()
			for i := 0; i < tc.n; i++ {
				if err := d.InjectPacketOut(testFrame(64, uint32(i), tc.burstPrio)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.otherPrio >= 0 {
				for i := 0; i < 50; i++ {
					if err := d.InjectPacketOut(testFrame(64, uint32(1000+i), byte(tc.otherPrio))); err != nil {
						t.Fatal(err)
					}
				}
				total += 50
			}
			nominal := time.Duration(0)
			if tc.limited {
				nominal = time.Duration(int64(tc.n-1) * int64(time.Second) / tc.pps)
			}
			deadline := t0.Add(3*nominal + 2*time.Second)
			for len(arrivals()) < total && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			got := arrivals()
			if len(got) != total {
				t.Fatalf("%d of %d frames arrived by %v", len(got), total, deadline.Sub(t0))
			}
			k := 0
			var last, otherLast time.Time
			for _, a := range got {
				if a.prio != tc.burstPrio {
					otherLast = a.at
					continue
				}
				if tc.limited {
					if due := t0.Add(time.Duration(int64(k) * int64(time.Second) / tc.pps)); a.at.Before(due) {
						t.Fatalf("frame %d of the limited queue left %v after the burst, before its due %v: over %d pps",
							k, a.at.Sub(t0), due.Sub(t0), tc.pps)
					}
				}
				last = a.at
				k++
			}
			span := last.Sub(t0)
			t.Logf("%d frames of priority %d in %v (nominal %v)", k, tc.burstPrio, span, nominal)
			if tc.limited && span > 2*nominal+500*time.Millisecond {
				t.Errorf("the limited queue took %v for %d frames at %d pps (nominal %v)", span, k, tc.pps, nominal)
			}
			if !tc.limited && span > time.Second {
				t.Errorf("an unlimited queue took %v for %d frames", span, k)
			}
			if tc.otherFirstDone && !otherLast.Before(last) {
				t.Errorf("the unlimited priority %d finished at %v, after the limited one (%v)", tc.otherPrio, otherLast.Sub(t0), span)
			}
		})
	}
}

// TestQueueRateChecks: the addressing of set_queue_rate, as set_queue_depth's.
func TestQueueRateChecks(t *testing.T) {
	d, err := New(Config{CPUPort: 255, PriorityQueues: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		port, prio int
		pps        int64
		ok         bool
	}{
		{-1, -1, 1000, true},
		{255, 2, 10, true},
		{3, -1, 10, true}, // no interface: queues all the same, as BMv2's
		{511, -1, 10, false},
		{255, 4, 10, false},
		{255, 0, -1, false},
	} {
		if err := d.SetQueueRate(tc.port, tc.prio, tc.pps); (err == nil) != tc.ok {
			t.Errorf("SetQueueRate(%d, %d, %d): %v", tc.port, tc.prio, tc.pps, err)
		}
	}
	for _, tc := range []struct {
		prio int
		gap  int64
	}{{2, 100_000_000}, {1, 1_000_000}} {
		if g, ok := d.QueueRate(255, tc.prio); !ok || g != tc.gap {
			t.Errorf("priority %d: gap %d ns %v, want %d", tc.prio, g, ok, tc.gap)
		}
	}
	if err := d.SetQueueRate(255, -1, 0); err != nil {
		t.Fatal(err)
	}
	if eg := d.ports[255].Load(); eg.limited != 0 || eg.shaped.Load() {
		t.Errorf("after rate 0 everywhere: %d limited queues, shaped %v", eg.limited, eg.shaped.Load())
	}
}

// TestQueueRateBesideLineRate: a port's line rate (--port-rate, bits/s) and
// its queue's packet rate both hold; the lower one sets the pace.
func TestQueueRateBesideLineRate(t *testing.T) {
	const size = 1000
	const lineBps = 4_000_000 // 4 Mbit/s: 487 frames/s of 1000 bytes on the wire
	linePps := float64(lineBps) / float64(WireBytes(size)*8)
	for _, tc := range []struct {
		name string
		pps  int64
		want float64 // frames/s
	}{
		{"queue rate below the line", 150, 150},
		{"line below the queue rate", 5000, linePps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNet(t, 2, 1500)
			d := tn.newDevice(t, Config{QueueCapacity: 1024, Ports: []PortConfig{
				{Num: 1, Iface: tn.sw(1)}, {Num: 2, Iface: tn.sw(2), RateBps: lineBps},
			}})
			d.SetPipeline(crossConnect(2))
			h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
			start(t, d)
			if err := d.SetQueueRate(2, 0, tc.pps); err != nil {
				t.Fatal(err)
			}
			const n = 80
			for i := 0; i < n; i++ {
				h1.send(t, testFrame(size, uint32(i), 0))
			}
			var first, last time.Time
			got := 0
			for {
				f, ts := h2.recv(t, time.Second)
				if f == nil {
					break
				}
				if got == 0 {
					first = ts
				}
				last = ts
				got++
			}
			if got != n {
				t.Fatalf("%d of %d frames arrived", got, n)
			}
			rate := float64(n-1) / last.Sub(first).Seconds()
			t.Logf("%.1f frames/s (want at most %.1f)", rate, tc.want)
			// Never faster than the lower limit (1% for the receive
			// stamps); not much slower on a busy machine.
			if rate > tc.want*1.01 || rate < tc.want*0.5 {
				t.Errorf("%.1f frames/s, want %.1f (at most, and at least half)", rate, tc.want)
			}
		})
	}
}

// TestQueueRateNoAllocs: the path of a port with a limited queue allocates
// nothing per packet once warm.
func TestQueueRateNoAllocs(t *testing.T) {
	d, _ := cpuLoop(t, false)
	// 1e9 pps: every frame is due when it is queued, so the worker's own
	// call to serveDue sends it (no pacer runs here).
	if err := d.SetQueueRate(64, -1, 1_000_000_000); err != nil {
		t.Fatal(err)
	}
	n := 0
	d.SubscribePacketIn(func([]byte) { n++ })
	in := &inputPort{num: 64, iface: "t"}
	w := d.newWorker()
	f := testFrame(64, 1, 2)
	run := func() {
		d.pipeMu.RLock()
		w.receive(in, rxFrame{data: f, wireLen: len(f)})
		w.flush()
		d.pipeMu.RUnlock()
	}
	for i := 0; i < 100; i++ {
		run()
	}
	if !d.ports[64].Load().shaped.Load() {
		t.Fatal("the port is not served as shaped")
	}
	if allocs := testing.AllocsPerRun(1000, run); allocs != 0 {
		t.Errorf("%.2f allocations per packet", allocs)
	}
	if n < 1000 {
		t.Errorf("only %d packets reached port 64", n)
	}
}
