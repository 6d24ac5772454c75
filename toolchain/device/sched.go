package device

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Scheduling of the forwarding threads (receive loops and pacers).
//
// On the 2-vCPU machines the project targets, the switch shares its CPUs
// with the hosts' traffic sources, and a reservation's delay bound leaves
// well under a millisecond of slack for the switch. Measured causes of
// late packets, and what this file does about them (docs/switch.md,
// docs/performance.md):
//
//   - A forwarding thread at nice -10 still waits behind other processes:
//     with autogroup scheduling (sched_autogroup_enabled, the default) a
//     thread's nice value only counts inside its session's group, and
//     Mininet starts every host process and the switch in sessions of
//     their own. A real-time thread is outside that fair share. So with
//     RTPriority > 0 the forwarding threads run SCHED_FIFO.
//   - A real-time thread that kept running would starve the machine. The
//     threads' real-time time is therefore metered against a budget shared
//     by all of them (rtBudget): past rtBudgetShare of one CPU within a
//     window of rtWindow, every forwarding thread drops to SCHED_OTHER at
//     the configured nice value for the rest of the window. The loops
//     block in the kernel whenever they have nothing to do, so the budget
//     is only reached under overload (bench-switch at saturation), where
//     the threads then share the CPUs as before. The kernel's own limit on
//     real-time time (sched_rt_runtime_us, 95% by default) stays as the
//     last resort.
//   - The budget meters CPU time, not the time between a thread's wake-up
//     and its next charge: a thread preempted in between (by a pacer one
//     level up, or by the hypervisor stalling the vCPU, up to 129 ms on
//     these VMs) did not run, and charging that wall time exhausted the
//     budget 50 times in 30 minutes of chaos (docs/deployment.md), each
//     time demoting every forwarding thread for the rest of the window
//     just when the backlog of the stall needed them most. Reading the
//     thread's CPU clock is a system call, so short intervals are charged
//     at their wall time (which is never less than the CPU time in them)
//     and only an interval longer than cpuCheckAfter reads the clock.

const (
	// rtWindow is the accounting window of the real-time budget.
	rtWindow = int64(100e6) // 100 ms
	// rtBudgetShare is how much of one CPU, summed over all forwarding
	// threads, may run at real-time priority within a window: 40 ms of
	// every 100 ms. The demo's load (two 100 Mbit/s floods and a video
	// through a 100 Mbit/s port) needs about a quarter of a CPU.
	rtBudgetShare = 0.4
	// cpuCheckAfter is the longest interval charged at its wall time
	// without reading the thread's CPU clock: longer than one batch takes,
	// so a thread that runs is rarely checked, and short enough that a
	// preemption cannot charge much.
	cpuCheckAfter = int64(200e3) // 200 µs
)

// rtBudget meters the real-time running time of a device's forwarding
// threads.
type rtBudget struct {
	prio        int   // SCHED_FIFO priority; 0: real-time scheduling off
	limit       int64 // ns of real-time running per window
	windowStart atomic.Int64
	used        atomic.Int64
	// exhausted is the window (its start) in which the budget ran out.
	exhausted atomic.Int64
	demotions atomic.Uint64
}

func newRTBudget(prio int) *rtBudget {
	b := &rtBudget{prio: prio, limit: int64(rtBudgetShare * float64(rtWindow))}
	b.exhausted.Store(-1)
	return b
}

// fwdThread is the scheduling state of one forwarding thread (owned by it).
type fwdThread struct {
	b         *rtBudget
	nice      int
	boost     int   // added to the budget's real-time priority
	rt        bool  // running SCHED_FIFO now
	failed    bool  // the kernel refused SCHED_FIFO (no privilege): stop trying
	busySince int64 // device clock when it last woke or was charged
	// cpuClock reads the thread's CPU time in ns (threadCPUNs; tests give
	// their own). cpuAt is its last reading and wallSince the wall time
	// charged since then.
	cpuClock  func() int64
	cpuAt     int64
	wallSince int64
}

// threadCPUNs is the calling OS thread's CPU time (the forwarding loops
// are locked to their threads).
func threadCPUNs() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return -1
	}
	return ts.Nano()
}

// setupThread names the calling locked OS thread, sets its nice value and,
// if configured, makes it real-time. boost raises the real-time priority:
// pacers get one level above receive loops (a pacer's work per wake-up is
// one frame, and its timing is the link's).
func (d *Device) setupThread(role, iface string, nice, boost int) *fwdThread {
	nameThread(role, iface)
	t := &fwdThread{b: d.rt, nice: nice, boost: boost, busySince: d.nowNs(), cpuClock: threadCPUNs}
	t.cpuAt = t.cpuClock()
	if err := setOther(t.nice); err != nil && t.nice != 0 {
		d.log.Debug("forwarding thread priority not set", "thread", role+"-"+iface, "nice", t.nice, "err", err)
	}
	if t.b.prio > 0 {
		if err := setFIFO(t.b.prio + boost); err != nil {
			d.log.Debug("forwarding thread not real-time", "thread", role+"-"+iface, "err", err)
			t.failed = true
		} else {
			t.rt = true
		}
	}
	return t
}

// setFIFO and setOther set the calling thread's policy with
// SCHED_FLAG_RESET_ON_FORK: the Go runtime starts new threads from whichever
// thread happens to need one, and without the flag a thread started from a
// forwarding thread inherits its real-time priority (or nice value) and
// runs the scheduler's spinning, the garbage collector or the P4Runtime
// server at it. Measured before the flag: the demo's video sender
// (SCHED_FIFO 10) starved for 32 and 79 ms under forwarding threads at 20.
func setFIFO(prio int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio), Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	return unix.SchedSetAttr(0, &attr, 0)
}

func setOther(nice int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: int32(nice), Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	return unix.SchedSetAttr(0, &attr, 0)
}

// woke records that the thread returned from blocking at now.
func (t *fwdThread) woke(now int64) {
	t.busySince = now
	t.adjust(t.b.roll(now))
}

// charge adds the thread's running time since it woke (or was last
// charged) to the budget. Loops call it before they block and between
// batches, so that one that never blocks is metered too.
func (t *fwdThread) charge(now int64) {
	b := t.b
	ws := b.roll(now)
	if b.used.Add(t.ran(now)) > b.limit && b.exhausted.Load() != ws {
		b.exhausted.Store(ws)
		b.demotions.Add(1)
	}
	t.busySince = now
	t.adjust(ws)
}

// ran is the CPU time to charge for the interval from busySince to now:
// its wall time when short; when long, what the thread's CPU clock says it
// ran since the last reading beyond what was charged since then (the
// charges since the last reading add up to no less than its CPU time).
func (t *fwdThread) ran(now int64) int64 {
	wall := now - t.busySince
	if wall <= cpuCheckAfter || t.cpuClock == nil {
		t.wallSince += wall
		return wall
	}
	cpu := t.cpuClock()
	if cpu < 0 {
		return wall
	}
	run := cpu - t.cpuAt - t.wallSince
	t.cpuAt, t.wallSince = cpu, 0
	return max(run, 0)
}

// adjust moves the thread in or out of real-time scheduling as the budget
// of window ws allows (a system call only on a change).
func (t *fwdThread) adjust(ws int64) {
	b := t.b
	if b.prio == 0 || t.failed {
		return
	}
	spent := b.exhausted.Load() == ws
	switch {
	case t.rt && spent:
		if setOther(t.nice) == nil {
			t.rt = false
		}
	case !t.rt && !spent:
		if setFIFO(b.prio+t.boost) == nil {
			t.rt = true
		}
	}
}

// roll starts a new window when the current one is over and returns the
// current window's start.
func (b *rtBudget) roll(now int64) int64 {
	ws := b.windowStart.Load()
	if now-ws >= rtWindow {
		if b.windowStart.CompareAndSwap(ws, now) {
			b.used.Store(0)
		}
		ws = b.windowStart.Load()
	}
	return ws
}

// mayBusyWait reports whether the thread may spin instead of sleeping:
// only while the budget, to which the spinning is charged, lasts.
func (t *fwdThread) mayBusyWait(now int64) bool {
	return t != nil && t.b.exhausted.Load() != t.b.roll(now)
}

// nameThread names the calling (locked) OS thread "tp-ROLE-IFACE", so that
// top -H, perf and ftrace tell the forwarding threads apart. The kernel keeps
// 15 bytes; a long interface name keeps its end, where Mininet's names
// ("terrapin-eth1") differ.
func nameThread(role, iface string) {
	var name [16]byte
	n := copy(name[:15], threadName(role, iface))
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), uintptr(n), 0, 0)
}

func threadName(role, iface string) string {
	prefix := "tp-" + role + "-"
	if room := 15 - len(prefix); len(iface) > room {
		iface = iface[len(iface)-room:]
	}
	return prefix + iface
}
