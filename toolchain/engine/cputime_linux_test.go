package engine

import (
	"runtime"
	"syscall"
	"testing"
)

// threadCPU measures the CPU time of the benchmark's own thread, so that the
// engine's cost can be read even on a machine busy with other work (wall
// time then includes time the thread spent descheduled).
type threadCPU struct{ start int64 }

func startThreadCPU() threadCPU {
	runtime.LockOSThread()
	return threadCPU{start: threadCPUNanos()}
}

func (t threadCPU) report(b *testing.B) {
	ns := threadCPUNanos() - t.start
	runtime.UnlockOSThread()
	if b.N > 0 {
		b.ReportMetric(float64(ns)/float64(b.N), "cpu-ns/op")
	}
}

func threadCPUNanos() int64 {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
