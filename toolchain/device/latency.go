package device

import (
	"bufio"
	"fmt"
	"strconv"
	"sync/atomic"
)

// histBoundsNs are the upper bounds of a latencyHist's buckets: from what a
// forwarding thread's wake-up costs on an idle machine (~10 µs) to the
// stalls that break a reservation's delay bound (milliseconds and more).
var histBoundsNs = [...]int64{10e3, 20e3, 50e3, 100e3, 200e3, 500e3, 1e6, 2e6, 5e6, 10e6, 20e6, 50e6}

// latencyHist counts durations in fixed buckets, for the delays the device
// can observe itself: how long a frame waited in the receive ring, how late
// a pacer woke, how long a packet sat in its queue. Atomic counters only,
// so observing does not allocate or lock.
type latencyHist struct {
	counts [len(histBoundsNs) + 1]atomic.Uint64
	sumNs  atomic.Uint64
	maxNs  atomic.Int64
}

func (h *latencyHist) observe(ns int64) {
	if ns < 0 {
		ns = 0
	}
	i := 0
	for i < len(histBoundsNs) && ns > histBoundsNs[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(ns))
	if ns > h.maxNs.Load() {
		h.maxNs.Store(ns) // racy max: a concurrent larger value may be lost, never a wrong one kept long
	}
}

// LatencyStats is a snapshot of a latencyHist: Counts[i] observations at
// most BoundsNs[i] (and above the previous bound); the last count has no
// upper bound.
type LatencyStats struct {
	BoundsNs []int64
	Counts   []uint64
	SumNs    uint64
	MaxNs    int64
}

func (h *latencyHist) snapshot() LatencyStats {
	s := LatencyStats{BoundsNs: histBoundsNs[:], Counts: make([]uint64, len(h.counts)), SumNs: h.sumNs.Load(), MaxNs: h.maxNs.Load()}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// Total is the number of observations.
func (s LatencyStats) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Over is the number of observations above ns (rounded to the bucket
// bounds: ns should be one of BoundsNs).
func (s LatencyStats) Over(ns int64) uint64 {
	var n uint64
	for i, c := range s.Counts {
		if i == len(s.BoundsNs) || s.BoundsNs[i] > ns {
			n += c
		}
	}
	return n
}

// writeHistogram writes s as a Prometheus histogram sample set.
func writeHistogram(w *bufio.Writer, name, labels string, s LatencyStats) {
	var cum uint64
	for i, c := range s.Counts {
		cum += c
		le := "+Inf"
		if i < len(s.BoundsNs) {
			le = strconv.FormatFloat(float64(s.BoundsNs[i])/1e9, 'g', -1, 64)
		}
		fmt.Fprintf(w, "%s_bucket{%s,le=%q} %d\n", name, labels, le, cum)
	}
	fmt.Fprintf(w, "%s_sum{%s} %g\n", name, labels, float64(s.SumNs)/1e9)
	fmt.Fprintf(w, "%s_count{%s} %d\n", name, labels, cum)
}
