package engine

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// trTCM is an independent RFC 2698 colour-blind two-rate three-colour
// marker in exact integer arithmetic, with the discretisation the engine
// shares with BMv2: time in whole microseconds since the clock origin, and
// a bucket of rate R has earned floor(t·R/10⁶) tokens by time t.
type trTCM struct {
	cfg    pipeline.MeterConfig
	tc, tp uint64 // committed and peak bucket
	lastUs int64
}

func newTrTCM(cfg pipeline.MeterConfig) *trTCM {
	return &trTCM{cfg: cfg, tc: cfg.CBurst, tp: cfg.PBurst}
}

func earned(rate uint64, fromUs, toUs int64) uint64 {
	return uint64(toUs)*rate/1e6 - uint64(fromUs)*rate/1e6
}

// tokensAt returns both buckets as they would be at tUs (no packet taken).
func (m *trTCM) tokensAt(tUs int64) (tc, tp uint64) {
	tc = min(m.cfg.CBurst, m.tc+earned(m.cfg.CIR, m.lastUs, tUs))
	tp = min(m.cfg.PBurst, m.tp+earned(m.cfg.PIR, m.lastUs, tUs))
	return tc, tp
}

// mark colours a packet of b bytes arriving at tUs (RFC 2698 §3, colour
// blind: red if Tp < B; else yellow if Tc < B, taking B from Tp; else green,
// taking B from both).
func (m *trTCM) mark(tUs int64, b uint64) uint8 {
	m.tc, m.tp = m.tokensAt(tUs)
	m.lastUs = tUs
	switch {
	case m.tp < b:
		return ColorRed
	case m.tc < b:
		m.tp -= b
		return ColorYellow
	default:
		m.tc -= b
		m.tp -= b
		return ColorGreen
	}
}

type arrival struct {
	atUs int64
	size int
}

// shaped returns n packets of random sizes (minSize..maxSize bytes) sent by
// a token-bucket shaper (rate, burst in bytes) at the earliest microsecond
// each conforms, with random idle gaps: a sender that keeps exactly to its
// envelope.
func shaped(rng *rand.Rand, n int, rate, burst uint64, minSize, maxSize int, startUs int64) []arrival {
	env := newTrTCM(pipeline.MeterConfig{CIR: rate, CBurst: burst, PIR: rate, PBurst: burst})
	env.lastUs = startUs
	t := startUs
	var out []arrival
	for len(out) < n {
		size := minSize + rng.IntN(maxSize-minSize+1)
		for {
			if tc, _ := env.tokensAt(t); tc >= uint64(size) {
				break
			}
			t++
		}
		if rng.IntN(8) == 0 {
			t += int64(rng.IntN(40_000)) // idle for up to 40 ms
		}
		env.mark(t, uint64(size))
		out = append(out, arrival{t, size})
	}
	return out
}

// bursty returns n packets offered at factor times rate on average, in
// bursts (random sizes, exponential-ish gaps).
func bursty(rng *rand.Rand, n int, rate uint64, factor float64, minSize, maxSize int, startUs int64) []arrival {
	t := startUs
	var out []arrival
	for len(out) < n {
		size := minSize + rng.IntN(maxSize-minSize+1)
		out = append(out, arrival{t, size})
		meanGapUs := float64(size) / (float64(rate) * factor) * 1e6
		if rng.IntN(3) > 0 {
			t += int64(rng.ExpFloat64() * meanGapUs * 3)
		}
	}
	return out
}

// TestMeterAtArrival: packets stamped with their arrival times (IngressAt)
// but executed in one late batch are metered by when they arrived — a
// sender within its (rho, sigma) envelope stays green, others are coloured
// exactly as RFC 2698 colours their arrival process — for direct and
// indirect meters; ingress_global_timestamp is the arrival time. Ingress
// (processing time, as BMv2) on the same late batch turns the conforming
// sender red, which is what IngressAt exists to prevent.
func TestMeterAtArrival(t *testing.T) {
	// The end-to-end scenario: a video sender's envelope, rho = 1,125,000
	// B/s, sigma = 27,000 B, packets up to 4,500 B. Rates are exact in
	// binary per microsecond (1.125, 1.5), so the float arithmetic the
	// meter shares with BMv2 cannot round differently from the reference.
	const rho, sigma = 1_125_000, 27_000
	envelope := pipeline.MeterConfig{CIR: rho, CBurst: sigma, PIR: rho, PBurst: sigma}
	twoRate := pipeline.MeterConfig{CIR: 1_000_000, CBurst: 20_000, PIR: 1_500_000, PBurst: 30_000}
	const startUs = 1_000_000 // well after the meter was configured
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name      string
		cfg       pipeline.MeterConfig
		pkts      []arrival
		allGreen  bool
		wantMixed bool // the reference must show yellow and red
	}{
		{"envelope-keeping sender", envelope, shaped(rng, 400, rho, sigma, 64, 4500, startUs), true, false},
		{"sender at three times its envelope", envelope, bursty(rng, 400, rho, 3, 64, 4500, startUs), false, false},
		{"two rates, offered 1.4x CIR", twoRate, bursty(rng, 400, 1_000_000, 1.4, 64, 4500, startUs), false, true},
	}
	for _, kind := range []string{"direct", "indirect"} {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				last := tc.pkts[len(tc.pkts)-1].atUs
				lateNs := (last + 50_000) * 1000 // the batch runs 50 ms after the last arrival
				pl, configure := meterProg(t, kind, func() int64 { return lateNs })
				configure(&tc.cfg)
				ref := newTrTCM(tc.cfg)
				ref.lastUs = 0
				var counts, refCounts [3]int
				for i, a := range tc.pkts {
					want := ref.mark(a.atUs, uint64(a.size))
					refCounts[want]++
					color, tsUs := runAt(t, pl, a.size, a.atUs*1000+int64(i%1000), true)
					counts[color&3]++
					if color != want {
						t.Fatalf("packet %d (%d B at %d us): colour %d, RFC 2698 says %d", i, a.size, a.atUs, color, want)
					}
					if tsUs != uint64(a.atUs) {
						t.Fatalf("packet %d: ingress_global_timestamp %d, want its arrival %d us", i, tsUs, a.atUs)
					}
				}
				t.Logf("green/yellow/red %v", counts)
				if tc.allGreen && counts[ColorGreen] != len(tc.pkts) {
					t.Errorf("envelope-keeping sender: %v, want all green", counts)
				}
				if !tc.allGreen && counts[ColorRed] == 0 {
					t.Errorf("no red packet: the case does not exercise the meter")
				}
				if tc.wantMixed && (refCounts[ColorYellow] == 0 || refCounts[ColorRed] == 0) {
					t.Errorf("reference colours %v: want yellow and red", refCounts)
				}

				if !tc.allGreen {
					return
				}
				// The same late batch metered at processing time (Ingress).
				pl2, configure2 := meterProg(t, kind, func() int64 { return lateNs })
				configure2(&tc.cfg)
				red := 0
				for _, a := range tc.pkts {
					if c, _ := runAt(t, pl2, a.size, 0, false); c == ColorRed {
						red++
					}
				}
				if red == 0 {
					t.Errorf("processing-time metering of the late batch gave no red: the batch does not exceed the envelope")
				}
				t.Logf("the same batch metered at processing time: %d of %d red", red, len(tc.pkts))
			})
		}
	}
}

// TestMeterStampsOutOfOrder: a packet stamped before its meter cell's last
// update (another port's batch ran first) earns no tokens and does not
// panic, nor does a stamp before the clock origin; later stamps meter on.
func TestMeterStampsOutOfOrder(t *testing.T) {
	cfg := pipeline.MeterConfig{CIR: 1000, CBurst: 2000, PIR: 1000, PBurst: 2000} // bytes: 1 B/ms
	for _, kind := range []string{"direct", "indirect"} {
		t.Run(kind, func(t *testing.T) {
			pl, configure := meterProg(t, kind, func() int64 { return 10e9 })
			configure(&cfg)
			steps := []struct {
				atNs  int64
				size  int
				color uint8
			}{
				{100e6, 1000, ColorGreen},
				{100e6, 1000, ColorGreen}, // bucket now empty
				{50e6, 1000, ColorRed},    // 50 ms earlier: earns nothing
				{-5e6, 1000, ColorRed},    // before the origin
				{600e6, 500, ColorGreen},  // 500 ms after 100 ms: 500 B earned
				{600e6, 10, ColorRed},
				{1600e6, 1000, ColorGreen},
			}
			for i, s := range steps {
				if c, _ := runAt(t, pl, s.size, s.atNs, true); c != s.color {
					t.Errorf("step %d (%d B stamped %d ms): colour %d, want %d", i, s.size, s.atNs/1e6, c, s.color)
				}
			}
		})
	}
}

// meterProg loads a program whose table (key h.k) or action meters every
// packet in bytes into h.c and copies ingress_global_timestamp into h.ts;
// configure sets the meter (the entry's direct meter, or cell 0).
func meterProg(t *testing.T, kind string, clock func() int64) (*Pipeline, func(*pipeline.MeterConfig)) {
	t.Helper()
	ts := tAssign(tF("h", "ts"), tF("standard_metadata", "ingress_global_timestamp"))
	fields := [][]any{u("k", 8), u("c", 8), u("ts", 48)}
	if kind == "direct" {
		tp := testProg{
			fields:    fields,
			keys:      []any{keyDef("exact", "k")},
			actions:   []map[string]any{{"name": "fwd", "id": 1, "runtime_data": []any{}, "primitives": []any{tAssign(tF("standard_metadata", "egress_spec"), tH("0x2")), ts}}},
			tableMore: map[string]any{"direct_meters": "dm"},
			extra: map[string]any{
				"meter_arrays": []any{map[string]any{"name": "dm", "id": 0, "type": "bytes", "rate_count": 2, "size": 1024, "is_direct": true, "binding": "ingress.t", "result_target": []string{"h", "c"}}},
			},
		}
		pl := tp.load(t, Options{Clock: clock})
		tid, _ := pl.Lookup(KindTable, "ingress.t")
		return pl, func(cfg *pipeline.MeterConfig) {
			if err := pl.AddEntry(tid, pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{7}}}, Action: pipeline.ActionCall{ActionID: 1}, Meter: cfg}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tp := testProg{
		fields: fields,
		prims:  []any{tPrim("execute_meter", named("meter_array", "m"), tH("0x0"), tF("h", "c")), ts},
		extra:  map[string]any{"meter_arrays": []any{map[string]any{"name": "m", "id": 0, "type": "bytes", "rate_count": 2, "size": 4, "is_direct": false}}},
	}
	pl := tp.load(t, Options{Clock: clock})
	return pl, func(cfg *pipeline.MeterConfig) {
		if err := pl.SetMeter(0, 0, cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// runAt sends one packet of size bytes (key 7) through ingress — stamped
// atNs with IngressAt, or at the clock with Ingress — and egress, and
// returns the colour and ingress_global_timestamp it carries out.
func runAt(t *testing.T, pl *Pipeline, size int, atNs int64, stamped bool) (color uint8, tsUs uint64) {
	t.Helper()
	frame := make([]byte, size)
	frame[0] = 7
	var jobs []Job
	if stamped {
		jobs = pl.IngressAt(frame, 0, atNs, nil)
	} else {
		jobs = pl.Ingress(frame, 0, nil)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(jobs))
	}
	out, _ := pl.Egress(jobs[0], QueueMeta{}, nil)
	if out.Pkt == nil || len(out.Frame) < 8 {
		t.Fatalf("no output frame")
	}
	defer out.Pkt.Release()
	var b [8]byte
	copy(b[2:], out.Frame[2:8])
	return out.Frame[1], binary.BigEndian.Uint64(b[:])
}
