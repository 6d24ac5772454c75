package device

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// TestMeterJudgesArrivals: a sender that keeps to its token-bucket envelope
// stays green even when the device is stalled and then processes everything
// that arrived meanwhile in one late batch, because the meter runs at each
// frame's kernel arrival time; bursts beyond the envelope still go red. The
// program (testdata/arrival_meter.p4) writes the colour and
// ingress_global_timestamp into each frame.
func TestMeterJudgesArrivals(t *testing.T) {
	js, err := os.ReadFile("testdata/arrival_meter.json")
	if err != nil {
		t.Fatal(err)
	}
	tn := newTestNetPrefix(t, "trptperf", 2, 1500)
	d := tn.newDevice(t, Config{QueueCapacity: 512})
	pl, err := engine.Load(js, engine.Options{Clock: d.NowNs, DropPort: DropPort})
	if err != nil {
		t.Fatal(err)
	}
	tid, ok1 := pl.Lookup(engine.KindTable, "I.police")
	aid, ok2 := pl.Lookup(engine.KindAction, "I.forward")
	if !ok1 || !ok2 {
		t.Fatal("program lacks I.police or I.forward")
	}
	// Envelope: rho = 1,000,000 B/s, sigma = 10,000 B (ten 1000-byte frames).
	const (
		frameLen = 1000
		sigma    = 10
	)
	env := &pipeline.MeterConfig{CIR: 1_000_000, CBurst: sigma * frameLen, PIR: 1_000_000, PBurst: sigma * frameLen}
	if err := pl.AddEntry(tid, pipeline.TableEntry{
		Match:  []pipeline.Match{{Value: []byte{0, 1}}},
		Action: pipeline.ActionCall{ActionID: aid, Params: [][]byte{{0, 2}}},
		Meter:  env,
	}); err != nil {
		t.Fatal(err)
	}
	d.SetPipeline(NewEnginePipeline(pl))
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)

	seq := uint32(0)
	// sendBursts sends bursts of n frames, each burst at least gap after the
	// previous one ended (a late sender only helps conformance), while the
	// device's receive loops are stalled; it returns when the stall ends.
	sendBursts := func(bursts, n int, gap time.Duration) (sent int, stallEnd time.Time) {
		d.pipeMu.Lock() // receive loops block before their next batch
		for b := 0; b < bursts; b++ {
			if b > 0 {
				time.Sleep(gap)
			}
			for i := 0; i < n; i++ {
				h1.send(t, testFrame(frameLen, seq, 0))
				seq++
				sent++
			}
		}
		time.Sleep(20 * time.Millisecond)
		stallEnd = time.Now()
		d.pipeMu.Unlock()
		return sent, stallEnd
	}
	type result struct {
		seq   uint32
		color byte
		tsUs  uint64
		at    time.Time
	}
	collect := func(n int) []result {
		var rs []result
		for len(rs) < n {
			f, at := h2.recv(t, 3*time.Second)
			if f == nil {
				t.Fatalf("received %d of %d frames", len(rs), n)
			}
			if len(f) < 25 {
				t.Fatalf("short frame %d bytes", len(f))
			}
			var ts [8]byte
			copy(ts[2:], f[19:25])
			rs = append(rs, result{frameSeq(f), f[18], binary.BigEndian.Uint64(ts[:]), at})
		}
		return rs
	}
	// stalled checks that the batch really was late: every frame left the
	// switch after the stall, yet the timestamps keep the arrivals' spread.
	stalled := func(rs []result, stallEnd time.Time, minSpread time.Duration) {
		t.Helper()
		for _, r := range rs {
			if r.at.Before(stallEnd.Add(-time.Millisecond)) {
				t.Fatalf("frame %d left %v before the stall ended: the device was not stalled", r.seq, stallEnd.Sub(r.at))
			}
		}
		spread := time.Duration(rs[len(rs)-1].tsUs-rs[0].tsUs) * time.Microsecond
		if spread < minSpread {
			t.Errorf("ingress_global_timestamp spread %v over the late batch, want >= %v (the arrival spread)", spread, minSpread)
		}
	}

	// Conforming: bursts of 8 frames (80% of sigma) at least 30 ms apart
	// (the bucket refills them in 8 ms, so even a kernel that stamps a
	// burst 20 ms late keeps it conforming): all green, although processed
	// together.
	n, end := sendBursts(10, 8, 30*time.Millisecond)
	rs := collect(n)
	stalled(rs, end, 150*time.Millisecond)
	var notGreen []uint32
	for _, r := range rs {
		if r.color != engine.ColorGreen {
			notGreen = append(notGreen, r.seq)
		}
	}
	t.Logf("conforming: %d/%d green after a late batch", n-len(notGreen), n)
	if len(notGreen) > 0 {
		t.Errorf("conforming frames not green: %v", notGreen)
	}

	// Beyond the envelope: bursts of 2 sigma, 30 ms apart. The bucket is
	// full at each burst's start, so its first sigma frames are green; of
	// the rest, all but what the bucket refills during the burst (a frame's
	// worth per millisecond) are red.
	time.Sleep(30 * time.Millisecond)
	const bursts = 4
	n, end = sendBursts(bursts, 2*sigma, 30*time.Millisecond)
	rs = collect(n)
	stalled(rs, end, 60*time.Millisecond)
	red := 0
	notGreen = notGreen[:0]
	for i, r := range rs {
		if i%(2*sigma) < sigma && r.color != engine.ColorGreen {
			notGreen = append(notGreen, r.seq)
		}
		if r.color == engine.ColorRed {
			red++
		}
	}
	if len(notGreen) > 0 {
		t.Errorf("frames within sigma of their burst's start not green: %v", notGreen)
	}
	t.Logf("2-sigma bursts: %d/%d red (%d expected unless the sender was descheduled mid-burst)", red, n, bursts*sigma)
	if red < bursts*sigma/2 || red > bursts*sigma {
		t.Errorf("%d red of %d, want %d..%d", red, n, bursts*sigma/2, bursts*sigma)
	}
}
