package device

import "testing"

// fakeClocks is a wall clock (REALTIME) and a device clock the test moves.
type fakeClocks struct {
	wall, dev int64
	reads     int
}

func (f *fakeClocks) readClocks() (int64, int64) {
	f.reads++
	return f.wall, f.dev
}

// advance moves both clocks by ns, as time passing does.
func (f *fakeClocks) advance(ns int64) { f.wall += ns; f.dev += ns }

func TestArrivalClock(t *testing.T) {
	const (
		ms   = int64(1e6)
		wall = int64(1_700_000_000) * 1e9 // REALTIME when the test starts
		dev0 = 5 * ms                     // device clock then
	)
	type frame struct {
		advance  int64 // both clocks move by this first
		step     int64 // then REALTIME alone steps by this
		batch    bool  // beginBatch before this frame
		tsAgo    int64 // the frame was stamped this long before the wall clock's now (REALTIME); -1: no stamp
		want     int64 // arrival, device clock
		wantNote string
	}
	cases := []struct {
		name   string
		frames []frame
	}{
		{"late batch keeps the kernel's spacing", []frame{
			{advance: 40 * ms, batch: true, tsAgo: 30 * ms, want: dev0 + 10*ms},
			{tsAgo: 20 * ms, want: dev0 + 20*ms},
			{tsAgo: 1 * ms, want: dev0 + 39*ms},
		}},
		{"stamped after the batch began: clamped to now", []frame{
			{advance: 10 * ms, batch: true, tsAgo: 0, want: dev0 + 10*ms},
			{tsAgo: -ms / 2, want: dev0 + 10*ms, wantNote: "half a millisecond in the future"},
		}},
		{"never before the previous arrival", []frame{
			{advance: 10 * ms, batch: true, tsAgo: 2 * ms, want: dev0 + 8*ms},
			{tsAgo: 2*ms + 500e3, want: dev0 + 8*ms},
			{tsAgo: 1 * ms, want: dev0 + 9*ms},
		}},
		{"no timestamp: the device clock", []frame{
			{advance: 3 * ms, batch: true, tsAgo: -1, want: dev0 + 3*ms},
		}},
		{"REALTIME steps forward", []frame{
			{advance: 10 * ms, batch: true, tsAgo: 1 * ms, want: dev0 + 9*ms},
			// +1 hour: stamps look an hour in the future until re-measured
			{advance: 10 * ms, step: 3600e9, batch: true, tsAgo: 2 * ms, want: dev0 + 18*ms},
			{tsAgo: 1 * ms, want: dev0 + 19*ms},
		}},
		{"REALTIME steps back", []frame{
			{advance: 10 * ms, batch: true, tsAgo: 1 * ms, want: dev0 + 9*ms},
			{advance: 10 * ms, step: -3600e9, batch: true, tsAgo: 2 * ms, want: dev0 + 18*ms},
			{tsAgo: 1 * ms, want: dev0 + 19*ms},
		}},
		{"REALTIME slews: re-measured every second", []frame{
			{advance: 10 * ms, batch: true, tsAgo: 0, want: dev0 + 10*ms},
			// 0.4 ms of slew over 1.2 s: below stepTolerance, caught by the refresh
			{advance: 1200 * ms, step: 400e3, batch: true, tsAgo: 1 * ms, want: dev0 + 1209*ms},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClocks{wall: wall, dev: dev0}
			var c arrivalClock
			c.beginBatch(clk)
			for i, f := range tc.frames {
				clk.advance(f.advance)
				clk.wall += f.step
				if f.batch {
					c.beginBatch(clk)
				}
				ts := clk.wall - f.tsAgo
				if f.tsAgo == -1 {
					ts = 0
				}
				if got := c.arrival(clk, ts); got != f.want {
					t.Errorf("frame %d %s: arrival %.3f ms, want %.3f ms", i, f.wantNote, float64(got)/1e6, float64(f.want)/1e6)
				}
			}
		})
	}
}

// TestArrivalClockReads: a batch of frames stamped before it began costs
// one clock reading, not one per frame.
func TestArrivalClockReads(t *testing.T) {
	clk := &fakeClocks{wall: 1e18, dev: 1e9}
	var c arrivalClock
	c.beginBatch(clk)
	clk.advance(5e6)
	c.beginBatch(clk)
	before := clk.reads
	for i := 0; i < 64; i++ {
		c.arrival(clk, clk.wall-5e6+int64(i)*1000)
	}
	if n := clk.reads - before; n != 0 {
		t.Errorf("%d clock readings for 64 frames, want 0", n)
	}
}
