package device

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// start runs d until the test ends.
func start(t testing.TB, d *Device) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("device did not stop within 5 s")
		}
	})
}

func crossConnect(n int) *PortMap {
	m := NewPortMap()
	m.Connect(1, 2)
	m.Connect(2, 1)
	return m
}

func TestRoundTrip(t *testing.T) {
	tn := newTestNet(t, 2, 9000)
	d := tn.newDevice(t, Config{})
	d.SetPipeline(crossConnect(2))
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)

	tests := []struct {
		name string
		from *hostSock
		to   *hostSock
		size int
	}{
		{"min 1->2", h1, h2, 60},
		{"1500 1->2", h1, h2, 1514},
		{"jumbo 1->2", h1, h2, 9014},
		{"min 2->1", h2, h1, 60},
		{"jumbo 2->1", h2, h1, 9014},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testFrame(tc.size, uint32(i), 0)
			tc.from.send(t, f)
			got, _ := tc.to.recv(t, 2*time.Second)
			if got == nil {
				t.Fatalf("no frame forwarded")
			}
			if !bytes.Equal(got, f) {
				t.Fatalf("forwarded frame differs: got %d bytes, want %d", len(got), len(f))
			}
		})
	}
	// The device must not receive what it transmitted: port 2 forwarded
	// three frames but its host sent only two.
	st := d.Stats()
	for _, p := range st.Ports {
		wantRx := map[uint16]uint64{1: 3, 2: 2}[p.Port]
		if p.RxPackets != wantRx {
			t.Errorf("port %d rx = %d, want %d (own transmissions must be ignored)", p.Port, p.RxPackets, wantRx)
		}
	}
	// Nothing loops back to the sender.
	if f, _ := h1.recv(t, 100*time.Millisecond); f != nil && frameSeq(f) < 10 {
		t.Errorf("unexpected frame back on host1: seq %d", frameSeq(f))
	}
}

func TestNoPipelineDrops(t *testing.T) {
	tn := newTestNet(t, 2, 1500)
	d := tn.newDevice(t, Config{})
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)
	h1.send(t, testFrame(100, 1, 0))
	if f, _ := h2.recv(t, 200*time.Millisecond); f != nil {
		t.Fatal("forwarded without a pipeline")
	}
	waitFor(t, func() bool { return d.Stats().DropNoPipeline == 1 }, "no_pipeline drop counted")
	// A pipeline pushed at run time takes effect.
	d.SetPipeline(crossConnect(2))
	h1.send(t, testFrame(100, 2, 0))
	if f, _ := h2.recv(t, 2*time.Second); f == nil || frameSeq(f) != 2 {
		t.Fatal("not forwarded after SetPipeline")
	}
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTailDrop(t *testing.T) {
	tn := newTestNet(t, 2, 1500)
	// 1.5 Mbit/s drains a 1000-byte frame in 5.5 ms: a burst of 40 sent in
	// well under a millisecond overflows a queue of 8.
	d := tn.newDevice(t, Config{QueueCapacity: 8, Ports: []PortConfig{
		{Num: 1, Iface: tn.sw(1)}, {Num: 2, Iface: tn.sw(2), RateBps: 1_500_000},
	}})
	d.SetPipeline(crossConnect(2))
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)
	const burst = 40
	for i := 0; i < burst; i++ {
		h1.send(t, testFrame(1000, uint32(i), 0))
	}
	got := 0
	for {
		f, _ := h2.recv(t, 300*time.Millisecond)
		if f == nil {
			break
		}
		got++
	}
	st := d.Stats()
	p2 := st.Ports[1]
	drops := p2.Queues[0].Dropped
	if drops == 0 {
		t.Fatalf("no tail drops counted (received %d of %d)", got, burst)
	}
	if uint64(got)+drops != burst {
		t.Errorf("received %d + dropped %d != sent %d", got, drops, burst)
	}
	if p2.Queues[0].MaxDepth != 8 {
		t.Errorf("max depth %d, want the capacity 8", p2.Queues[0].MaxDepth)
	}
	if p2.TxPackets != uint64(got) {
		t.Errorf("tx counter %d, want %d", p2.TxPackets, got)
	}
	var sb strings.Builder
	if err := d.WriteMetrics(&sb); err != nil {
		t.Fatal(err)
	}
	want := `terrapin_queue_drops_total{port="2",queue="0"} ` + itoa(drops)
	if !strings.Contains(sb.String(), want+"\n") {
		t.Errorf("metrics lack %q", want)
	}
	// Nothing here runs real-time, so no window can have used up the budget.
	if want := "terrapin_rt_budget_exhausted_total 0\n"; !strings.Contains(sb.String(), want) {
		t.Errorf("metrics lack %q", want)
	}
}

func itoa(v uint64) string {
	return strings.TrimSpace(strings.Replace(string(binary.AppendUvarint(nil, 0)), "\x00", "", -1)) + fmtU(v)
}

func fmtU(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

// stampingPair starts a device crossing ports 1 and 2, port 2 paced at
// rate bit/s, whose pipeline takes a frame's priority from byte 18 and
// writes the queueing metadata it saw from byte 20; it returns the hosts'
// sockets on ports 1 and 2.
func stampingPair(t *testing.T, rate uint64) (h1, h2 *hostSock) {
	tn := newTestNet(t, 2, 1500)
	d := tn.newDevice(t, Config{Ports: []PortConfig{
		{Num: 1, Iface: tn.sw(1)}, {Num: 2, Iface: tn.sw(2), RateBps: rate},
	}})
	m := crossConnect(2)
	m.PriorityOffset = 18
	m.StampOffset = 20
	d.SetPipeline(m)
	h1, h2 = tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)
	return h1, h2
}

func TestQueueMetadata(t *testing.T) {
	const rate = 10_000_000
	h1, h2 := stampingPair(t, rate)
	const n, size = 20, 1000
	for i := 0; i < n; i++ {
		h1.send(t, testFrame(size, uint32(i), 3))
	}
	frameUs := float64(WireBytes(size)*8) / rate * 1e6
	var prevEnq uint32
	var firstDeq float64
	for i := 0; i < n; i++ {
		f, _ := h2.recv(t, 2*time.Second)
		if f == nil {
			t.Fatalf("frame %d missing", i)
		}
		if frameSeq(f) != uint32(i) {
			t.Fatalf("frame %d arrived as %d", i, frameSeq(f))
		}
		enqTs := binary.BigEndian.Uint32(f[20:])
		enqDepth := binary.BigEndian.Uint32(f[24:])
		deqDelta := binary.BigEndian.Uint32(f[28:])
		deqDepth := binary.BigEndian.Uint32(f[32:])
		qid := f[36]
		if qid != 3 {
			t.Errorf("frame %d: qid %d, want 3", i, qid)
		}
		if enqTs < prevEnq {
			t.Errorf("frame %d: enq_timestamp %d went back from %d", i, enqTs, prevEnq)
		}
		prevEnq = enqTs
		// Depth at enqueue counts the packets before it still queued; the
		// first is dequeued at once, so frame i sees at most i-1 ahead.
		if i > 1 && (enqDepth == 0 || enqDepth > uint32(i)) {
			t.Errorf("frame %d: enq_qdepth %d, want 1..%d", i, enqDepth, i)
		}
		if i == n-1 && deqDepth != 0 {
			t.Errorf("last frame: deq_qdepth %d, want 0", deqDepth)
		}
		if i > 0 && i < n-1 && deqDepth == 0 {
			t.Errorf("frame %d: deq_qdepth 0 while later frames wait", i)
		}
		// Frame i leaves i transmissions after the first: never sooner
		// (pacing), and later only by scheduling delay on a busy machine.
		// (Its dequeue time is enq_timestamp + deq_timedelta; the frames
		// need not all have been queued at once.)
		deq := float64(enqTs) + float64(deqDelta)
		if i == 0 {
			firstDeq = deq
		} else {
			want := firstDeq + float64(i)*frameUs
			if deq < want-frameUs/2 || deq > want+float64(paceSlack/time.Microsecond) {
				t.Errorf("frame %d: dequeued at %.0f µs (enq_timestamp %d + deq_timedelta %d), want about %.0f", i, deq, enqTs, deqDelta, want)
			}
		}
	}
}

// TestQueueDepthIsPerPriority: enq_qdepth and deq_qdepth count the packet's
// own priority queue, not the whole port, as p4lang's simple_switch reports
// them (egress_buffers.size(port, priority)). A backlog at one priority is
// invisible to a packet of another.
func TestQueueDepthIsPerPriority(t *testing.T) {
	// 1500-byte frames take 8 ms each at 1.5 Mbit/s, so the backlogs stay.
	h1, h2 := stampingPair(t, 1_500_000)
	bursts := []struct {
		prio  byte
		count int
	}{{1, 12}, {5, 4}, {3, 6}}
	seq := uint32(0)
	for _, b := range bursts {
		for i := 0; i < b.count; i++ {
			h1.send(t, testFrame(1500, seq, b.prio))
			seq++
		}
	}
	// Per priority: the most enq_qdepth any of its frames saw, and how many
	// of its frames there were.
	maxEnq := map[byte]uint32{}
	seen := map[byte]int{}
	for i := uint32(0); i < seq; i++ {
		f, _ := h2.recv(t, 2*time.Second)
		if f == nil {
			t.Fatalf("%d of %d frames arrived", i, seq)
		}
		prio := f[36]
		enqDepth := binary.BigEndian.Uint32(f[24:])
		deqDepth := binary.BigEndian.Uint32(f[32:])
		seen[prio]++
		if enqDepth > maxEnq[prio] {
			maxEnq[prio] = enqDepth
		}
		// Frames of one queue leave in order: after the k-th of n left, at
		// most n-k remain in that queue, whatever the other queues hold.
		var count int
		for _, b := range bursts {
			if b.prio == prio {
				count = b.count
			}
		}
		if left := uint32(count - seen[prio]); deqDepth > left {
			t.Errorf("priority %d frame %d: deq_qdepth %d, but only %d of its queue remain", prio, seen[prio], deqDepth, left)
		}
	}
	for _, b := range bursts {
		// The burst arrives faster than the port sends: its last frames find
		// most of it waiting, and never a frame of another priority.
		if got := maxEnq[b.prio]; got >= uint32(b.count) || got < uint32(b.count/2) {
			t.Errorf("priority %d: largest enq_qdepth %d, want %d..%d (its own queue only)", b.prio, got, b.count/2, b.count-1)
		}
	}
}

func TestStrictPriority(t *testing.T) {
	tn := newTestNet(t, 2, 1500)
	const rate = 1_500_000
	d := tn.newDevice(t, Config{Ports: []PortConfig{
		{Num: 1, Iface: tn.sw(1)}, {Num: 2, Iface: tn.sw(2), RateBps: rate},
	}})
	m := crossConnect(2)
	m.PriorityOffset = 18
	d.SetPipeline(m)
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)
	const lowSize = 1500
	lowTx := time.Duration(float64(WireBytes(lowSize)*8) / rate * float64(time.Second))
	// A backlog of 40 low-priority frames (about 330 ms at 1.5 Mbit/s).
	for i := 0; i < 40; i++ {
		h1.send(t, testFrame(lowSize, uint32(i), 0))
	}
	// High-priority frames arrive while it drains; each must leave after at
	// most the one low-priority frame being transmitted.
	type sent struct {
		seq uint32
		at  time.Time
	}
	var highs []sent
	rng := rand.New(rand.NewSource(1))
	go func() {}()
	sendTimes := make(chan sent, 8)
	go func() {
		for k := 0; k < 5; k++ {
			time.Sleep(time.Duration(20+rng.Intn(30)) * time.Millisecond)
			seq := uint32(1000 + k)
			at := time.Now()
			h1.send(t, testFrame(100, seq, 7))
			sendTimes <- sent{seq, at}
		}
		close(sendTimes)
	}()
	type arrival struct {
		seq uint32
		at  time.Time // the kernel's receive timestamp
	}
	var received []arrival
	for {
		f, ts := h2.recv(t, 500*time.Millisecond)
		if f == nil {
			break
		}
		received = append(received, arrival{frameSeq(f), ts})
	}
	for s := range sendTimes {
		highs = append(highs, s)
	}
	if len(highs) != 5 {
		t.Fatalf("sent %d high-priority frames", len(highs))
	}
	// Strict priority, counted in frames rather than time, so that a busy
	// machine (a test process descheduled for tens of milliseconds) cannot
	// fail it: between a high-priority frame's sending and its arrival, at
	// most the low-priority frame on the wire when it arrived and one more
	// (sent while the high frame was still on the host's path into the switch)
	// may leave. First come, first served would let ten or more through.
	const mostOvertaken = 2
	for _, h := range highs {
		idx := -1
		for i, a := range received {
			if a.seq == h.seq {
				idx = i
			}
		}
		if idx < 0 {
			t.Errorf("high-priority frame %d lost", h.seq)
			continue
		}
		lows := 0
		for _, a := range received[:idx] {
			if a.seq < 1000 && a.at.After(h.at) {
				lows++
			}
		}
		t.Logf("high %d delayed %v behind %d low frames (one low frame = %v)", h.seq, received[idx].at.Sub(h.at), lows, lowTx)
		if lows > mostOvertaken {
			t.Errorf("high-priority frame %d waited for %d low-priority frames, want at most %d", h.seq, lows, mostOvertaken)
		}
	}
	order := make([]uint32, len(received))
	for i, a := range received {
		order[i] = a.seq
	}
	// The backlog was still there: high frames overtook low ones.
	pos := map[uint32]int{}
	for i, s := range order {
		pos[s] = i
	}
	if p, ok := pos[1004]; !ok || p >= len(order)-1 {
		t.Errorf("last high-priority frame did not overtake the backlog (order %v)", order)
	}
}

func TestPacing(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate uint64
		size int
	}{
		{"1.5Mbit", 1_500_000, 1000},
		{"10Mbit", 10_000_000, 1500},
		{"100Mbit", 100_000_000, 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNet(t, 2, 1500)
			d := tn.newDevice(t, Config{QueueCapacity: 4096, Nice: -10, Ports: []PortConfig{
				{Num: 1, Iface: tn.sw(1)}, {Num: 2, Iface: tn.sw(2), RateBps: tc.rate},
			}})
			d.SetPipeline(crossConnect(2))
			h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
			start(t, d)
			// A pacer that is wrong (the wire overhead, the clock, the
			// credit) is wrong on every attempt; a test host descheduled for
			// tens of ms on a loaded 2-core machine spoils one. So the test
			// fails only when five measurements in a row miss by over 1%
			// (three in a row missed once in a make test on AF_XDP, which
			// then passed 4 runs of 4 alone; under sustained load the VM's
			// host takes several % of its CPU in stalls of up to ~20 ms).
			const attempts = 5
			for attempt := 1; ; attempt++ {
				errPct := measurePacing(t, d, h1, h2, tc.rate, tc.size)
				if errPct <= 1 && errPct >= -1 {
					return
				}
				if attempt == attempts {
					t.Fatalf("pacing off by %+.2f%% (limit 1%%) on %d attempts in a row", errPct, attempts)
				}
				t.Logf("attempt %d off by %+.2f%%: measuring again", attempt, errPct)
			}
		})
	}
}

// measurePacing sends 20% more than rate through port 1 to the paced port 2
// and returns how far the rate received on h2 is from rate, in percent.
func measurePacing(t *testing.T, d *Device, h1, h2 *hostSock, rate uint64, size int) float64 {
	t.Helper()
	// A burst of 100 ms of transmission fills the queue, then 20% more than
	// the rate for 1.3 s keeps it filling: the link stays busy even when the
	// sender is descheduled for 100 ms, so the receiver measures the pacer
	// alone.
	pps := float64(rate) * 1.2 / float64(WireBytes(size)*8)
	dur := 1300 * time.Millisecond
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		burst := max(16, int(pps/1.2/10))
		for i := 0; i < burst; i++ {
			h1.send(t, testFrame(size, uint32(1<<20+i), 0))
		}
		t0 := time.Now()
		for i := 0; ; i++ {
			due := t0.Add(time.Duration(float64(i) / pps * float64(time.Second)))
			if due.Sub(t0) > dur {
				return
			}
			if w := time.Until(due); w > 0 {
				time.Sleep(w)
			}
			h1.send(t, testFrame(size, uint32(i), 0))
		}
	}()
	// The rate is the slope of bits received against receive time (least
	// squares over every frame): a frame that leaves a few ms late, as on a
	// loaded machine the last one may, moves a first-to-last average by that
	// much over the span, but barely moves the slope.
	var first time.Time
	var bits float64
	var sx, sy, sxx, sxy, span float64
	n := 0
	for {
		f, ts := h2.recv(t, 300*time.Millisecond)
		if f == nil {
			break
		}
		if n == 0 {
			first = ts
		} else {
			bits += float64(WireBytes(len(f)) * 8)
		}
		x := ts.Sub(first).Seconds()
		sx, sy, sxx, sxy = sx+x, sy+bits, sxx+x*x, sxy+x*bits
		span = x
		n++
	}
	<-stop
	if span < 1.0 {
		t.Fatalf("measured over %.2f s only (%d frames)", span, n)
	}
	fn := float64(n)
	got := (fn*sxy - sx*sy) / (fn*sxx - sx*sx)
	errPct := (got - float64(rate)) / float64(rate) * 100
	var ps PortStats
	for _, p := range d.Stats().Ports {
		if p.Port == 2 {
			ps = p
		}
	}
	t.Logf("rate %d: measured %.0f bit/s over %.3f s (%d frames): %+.3f%% (first to last: %+.3f%%); pacer woke late by up to %.2f ms, %d times over 1 ms",
		rate, got, span, n, errPct, (bits/span-float64(rate))/float64(rate)*100,
		float64(ps.PacerLate.MaxNs)/1e6, ps.PacerLate.Over(1e6))
	return errPct
}

func TestPcapFiles(t *testing.T) {
	tn := newTestNet(t, 2, 1500)
	dir := t.TempDir()
	d := tn.newDevice(t, Config{PcapDir: dir})
	d.SetPipeline(crossConnect(2))
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)
	var sent [][]byte
	for i := 0; i < 5; i++ {
		f := testFrame(60+i*100, uint32(i), 0)
		sent = append(sent, f)
		h1.send(t, f)
		if g, _ := h2.recv(t, 2*time.Second); g == nil {
			t.Fatalf("frame %d not forwarded", i)
		}
	}
	for _, name := range []string{tn.sw(1) + "_in.pcap", tn.sw(2) + "_out.pcap"} {
		// The output capture is written after the send returns: a reader
		// may be a moment ahead of the last record.
		var frames [][]byte
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			frames = readPcap(t, filepath.Join(dir, name))
			if len(frames) >= len(sent) || time.Now().After(deadline) {
				break
			}
		}
		if len(frames) != len(sent) {
			t.Fatalf("%s: %d records, want %d", name, len(frames), len(sent))
		}
		for i := range sent {
			if !bytes.Equal(frames[i], sent[i]) {
				t.Errorf("%s record %d differs", name, i)
			}
		}
	}
	if frames := readPcap(t, filepath.Join(dir, tn.sw(2)+"_in.pcap")); len(frames) != 0 {
		t.Errorf("%s_in.pcap has %d records, want 0", tn.sw(2), len(frames))
	}
}

// readPcap parses a classic pcap file strictly.
func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("%s: bad pcap global header", path)
	}
	var out [][]byte
	b = b[24:]
	for len(b) > 0 {
		if len(b) < 16 {
			t.Fatalf("%s: truncated record header", path)
		}
		usec := binary.LittleEndian.Uint32(b[4:])
		incl, orig := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
		if usec >= 1e6 || incl != orig || int(incl) > len(b)-16 {
			t.Fatalf("%s: bad record header", path)
		}
		out = append(out, b[16:16+incl])
		b = b[16+incl:]
	}
	return out
}

func TestMalformedFrames(t *testing.T) {
	tn := newTestNet(t, 2, 9000)
	d := tn.newDevice(t, Config{CPUPort: 255})
	m := crossConnect(2)
	m.PriorityOffset = 14 // garbage decides the queue
	m.StampOffset = 40
	d.SetPipeline(m)
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 500; i++ {
		n := 14 + rng.Intn(200)
		if i%50 == 0 {
			n = 14 + rng.Intn(9000-14)
		}
		f := make([]byte, n)
		rng.Read(f)
		h1.send(t, f)
	}
	// Runts through the packet-out path too (the kernel will not put a
	// frame shorter than an Ethernet header on a veth).
	for n := 1; n < 14; n++ {
		if err := d.InjectPacketOut(make([]byte, n)); err != nil {
			t.Fatalf("packet-out of %d bytes: %v", n, err)
		}
	}
	// The burst may still fill the receive ring (jumbo slots, a busy
	// machine), which drops frames as a full ring must; the device has to
	// forward again once it has caught up.
	for try := 0; ; try++ {
		if try == 5 {
			t.Fatal("device stopped forwarding after malformed frames")
		}
		h2.drain(t)
		h1.send(t, testFrame(100, 42, 0))
		got := false
		for !got {
			g, _ := h2.recv(t, time.Second)
			if g == nil {
				break
			}
			got = frameSeq(g) == 42
		}
		if got {
			break
		}
	}
}

// TestRingVersions forwards through both receive ring layouts and records
// the one-frame latency each gives at a low rate (V3's block timeout).
func TestRingVersions(t *testing.T) {
	for _, ring := range []RingVersion{RingV2, RingV3} {
		t.Run(map[RingVersion]string{RingV2: "v2", RingV3: "v3"}[ring], func(t *testing.T) {
			tn := newTestNet(t, 2, 9000)
			d := tn.newDevice(t, Config{Ring: ring})
			d.SetPipeline(crossConnect(2))
			h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
			start(t, d)
			var worst time.Duration
			for i := 0; i < 20; i++ {
				f := testFrame(60+i*400, uint32(i), 0)
				sent := time.Now()
				h1.send(t, f)
				got, at := h2.recv(t, 2*time.Second)
				if !bytes.Equal(got, f) {
					t.Fatalf("frame %d not forwarded intact", i)
				}
				if l := at.Sub(sent); l > worst {
					worst = l
				}
				time.Sleep(3 * time.Millisecond)
			}
			t.Logf("ring %v: worst one-frame latency at low rate %v", ring, worst)
		})
	}
}

// A port whose link loses its carrier drops what is sent to it instead of
// holding it for the link's return (carrier_linux.go): after the peer comes
// back up, nothing sent during the outage arrives, and the drops are counted.
func TestCarrierLossDropsInsteadOfHolding(t *testing.T) {
	for _, io := range []IOMode{IOAFPacket, IOAuto} {
		t.Run(io.String(), func(t *testing.T) {
			tn := newTestNet(t, 2, 1500)
			d := tn.newDevice(t, Config{IO: io})
			d.SetPipeline(crossConnect(2))
			h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
			told := make(chan PortState, 16)
			defer d.WatchPorts(func(p PortState) { told <- p })()
			start(t, d)
			carrier := func(want bool) {
				t.Helper()
				deadline := time.Now().Add(3 * time.Second)
				for time.Now().Before(deadline) {
					for _, p := range d.Stats().Ports {
						if p.Port == 2 && p.NoCarrier != want {
							return
						}
					}
					time.Sleep(5 * time.Millisecond)
				}
				t.Fatalf("port 2 never showed carrier %v", want)
			}
			h1.send(t, testFrame(100, 1, 0))
			if got, _ := h2.recv(t, 2*time.Second); got == nil || frameSeq(got) != 1 {
				t.Fatalf("no frame forwarded before the cut")
			}
			run(t, "ip", "-n", tn.name, "link", "set", tn.host(2), "down")
			carrier(false)
			select {
			case p := <-told:
				if p.Number != 2 || p.Up || p.Name == "" {
					t.Fatalf("watchers told %+v", p)
				}
			case <-time.After(time.Second):
				t.Fatal("the port's watchers were not told it lost its link")
			}
			if ps := d.Ports(); len(ps) != 2 || ps[1].Up || !ps[0].Up {
				t.Fatalf("Ports() = %+v, want port 1 up and port 2 down", ps)
			}
			const held = 200
			for i := 0; i < held; i++ {
				h1.send(t, testFrame(100, uint32(100+i), 0))
			}
			deadline := time.Now().Add(3 * time.Second)
			for noCarrier(d, 2) < held && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := noCarrier(d, 2); n != held {
				t.Fatalf("%d frames counted as dropped for no carrier, want %d", n, held)
			}
			run(t, "ip", "-n", tn.name, "link", "set", tn.host(2), "up")
			carrier(true)
			h2.clearError()
			h1.send(t, testFrame(100, 1000, 0))
			for {
				got, _ := h2.recv(t, 2*time.Second)
				if got == nil {
					t.Fatalf("nothing forwarded after the link came back")
				}
				if seq := frameSeq(got); seq >= 100 && seq < 100+held {
					t.Fatalf("frame %d, sent while the link was down, arrived after it came back", seq)
				} else if seq == 1000 {
					break
				}
			}
		})
	}
}

func noCarrier(d *Device, port uint16) uint64 {
	for _, p := range d.Stats().Ports {
		if p.Port == port {
			return p.TxNoCarrier
		}
	}
	return 0
}
