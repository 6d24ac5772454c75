// Package device turns a compiled P4 pipeline into a network device: ports
// on Linux interfaces (AF_XDP sockets fed by an XDP program, or AF_PACKET
// with PACKET_MMAP rings; io.go chooses), a traffic manager with strict-priority queues and
// per-port line-rate pacing, multicast and clone replication, a CPU port
// feeding the P4Runtime server, per-port pcap files and counters.
//
// Threading, chosen for a 2-core machine: one goroutine per input port
// receives a batch, runs ingress, enqueues, and then drains the egress
// queues of unpaced ports it touched itself (run to completion: no hand-off
// between threads on the fast path). A port with a line rate gets its own
// pacer goroutine on a locked OS thread that sleeps with nanosleep, since
// Go's timers here round sleeps up to about a millisecond.
package device

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/terrapin/terrapin/toolchain/engine"
)

// PortConfig binds a switch port number to a Linux interface.
type PortConfig struct {
	Num     uint16
	Iface   string
	RateBps uint64 // line rate in bits/s; 0 = as fast as the interface takes
}

// Config configures a Device.
type Config struct {
	Ports          []PortConfig
	CPUPort        int // -1: no CPU port
	PriorityQueues int // queues per port (BMv2 --priority-queues); default 8
	QueueCapacity  int // packets per queue; default 64, as BMv2
	PcapDir        string
	Ring           RingVersion // default RingV2
	RingBytes      int         // per-port receive ring; default DefaultRingBytes
	Tx             TxMode      // transmit path; default TxRing
	// IO selects AF_PACKET (the zero value), AF_XDP, or the best of them
	// per port (IOAuto; terrapin-switch's default).
	IO IOMode
	// xdpModes overrides the XDP attach modes AF_XDP tries (tests).
	xdpModes []xdpMode
	// SpinPolls is how many empty ring checks a receive loop makes (with a
	// scheduler yield between) before it blocks in poll(2). Spinning trades
	// CPU for latency; on 2 cores the generator needs that CPU, so the
	// default is small (measured in docs/performance.md).
	SpinPolls int
	// Nice is the scheduling nice value (-20..19) of the forwarding
	// threads (each port's receive loop runs on its own OS thread); 0
	// leaves them as the process is. On a 2-core machine shared with the
	// hosts' traffic sources (Mininet), a forwarding thread at the same
	// priority as the senders gets a fraction of a core and its receive
	// ring overflows; see docs/performance.md. Needs root or CAP_SYS_NICE:
	// best effort.
	Nice int
	// RTPriority, when > 0, runs the forwarding threads SCHED_FIFO at this
	// priority (pacers one above), within a CPU budget past which they
	// fall back to Nice (sched.go, docs/switch.md). Needs root or
	// CAP_SYS_NICE: best effort.
	RTPriority int
	Logger     *slog.Logger
}

const (
	defaultQueues   = 8
	defaultCapacity = 64
	txBatch         = 32
	rxBatch         = 64
	maxHops         = 8 // resubmit/recirculate bound, so a looping program cannot spin forever
	// spinLead is how long before a paced port's link comes free a thread
	// busy-waits instead of sleeping when the next frame is from a queue
	// above the lowest (admitted traffic). A sleeping thread's wake-up was
	// measured up to milliseconds late on the target VMs (a halted vCPU's
	// timer interrupt waits for the hypervisor); a reservation's delay
	// bound leaves less slack than that. Best effort is not worth the CPU.
	spinLead = int64(500 * time.Microsecond)
	// paceSlack bounds how much transmission credit a paced port can catch
	// up after a late wake-up: lateness beyond it is lost, so a port never
	// bursts more than this much above its line rate. 10 ms keeps the rate
	// within 1% on a loaded 2-core machine where the pacer thread is
	// sometimes descheduled for several milliseconds (measured: with 2 ms,
	// up to -1.1% at 100 Mbit/s while other builds ran).
	paceSlack = 10 * time.Millisecond
	// ethOverhead is what Ethernet adds on the wire to the frame the
	// pipeline emits: FCS 4, preamble+SFD 8, inter-frame gap 12 bytes.
	ethOverhead = 24
	ethMinFrame = 60 // without FCS; shorter frames are padded on the wire
)

// WireBytes is what a frame of n bytes (as captured, without FCS) occupies
// on an Ethernet link; pacing charges this, so a port set to R bits/s
// carries R bits/s of physical-layer Ethernet.
func WireBytes(n int) int {
	if n < ethMinFrame {
		n = ethMinFrame
	}
	return n + ethOverhead
}

// Device is a running switch data plane.
type Device struct {
	cfg    Config
	log    *slog.Logger
	start  time.Time
	nq     int
	pipeMu sync.RWMutex
	pipe   Pipeline

	// ports holds each port number's egress port: an interface's, the CPU
	// port, or one without an interface (egressPort.noIface), made the
	// first time a packet is sent to it. BMv2 queues a packet for any such
	// port and runs egress on it, which may recirculate or clone it:
	// SD-Fabric recirculates UE-to-UE traffic by sending it to port 510,
	// which no interface has. What egress leaves to transmit there is
	// dropped and counted as no_such_port. port_add and port_remove
	// (ports.go) replace a number's egress port with a new one.
	ports [512]atomic.Pointer[egressPort]
	// inputs are the interfaces' receive sides; changed under runMu.
	inputs []*inputPort
	// portMu orders the changes to ports and to their queues' settings.
	portMu sync.Mutex
	// retired: egress ports port_add or port_remove replaced, kept to
	// close their pacers' eventfds and pcaps with the rest (under runMu).
	retired []*egressPort
	// rxErr takes the first receive loop's failure, which stops Run.
	rxErr chan error
	cpu   *egressPort
	cpuIn *inputPort
	injMu sync.Mutex
	// Set under injMu when the ports close: a packet-out that comes later
	// (the P4Runtime server outlives Run) must not touch unmapped rings.
	portsClosed bool
	injW        *worker
	subs        atomic.Pointer[[]*packetInSub]
	subMu       sync.Mutex
	running     atomic.Bool
	rt          *rtBudget
	// runMu guards starting pacers after Run began (set_queue_rate on a
	// port without one): runCtx and runWG are Run's, runDone is set when
	// it stops them.
	runMu   sync.Mutex
	runCtx  context.Context
	runWG   *sync.WaitGroup
	runDone bool
	linkFd  int // rtnetlink socket following the ports' links; -1: none
	// told when a port's link changes (gNMI's subscriptions)
	portWatchers portWatchers

	// drops not tied to a queue
	dropNoPipeline atomic.Uint64
	dropNoPort     atomic.Uint64
	dropPriority   atomic.Uint64
	dropIngress    atomic.Uint64 // ingress produced no job
	dropEgress     atomic.Uint64 // egress sent nothing out
}

type packetInSub struct{ fn func(frame []byte) }

// inputPort is the receive side of a port.
type inputPort struct {
	num   uint16
	iface string
	sock  portIO
	pcap  *pcapWriter
	// stop ends the port's receive loop, which closes done as it returns
	// (set when the loop starts: goReceive).
	stop func()
	done chan struct{}

	rxPackets   atomic.Uint64
	rxBytes     atomic.Uint64
	rxTruncated atomic.Uint64
	ringDrops   atomic.Uint64
	statMu      sync.Mutex
	clock       arrivalClock // receive timestamps → device clock
	// rxDelay is, per batch, how long its oldest frame waited in the ring
	// (kernel receive stamp to processing): the receive loop's lateness.
	rxDelay latencyHist
}

// queued is a job waiting in a queue, with what egress will need to know.
type queued struct {
	job      engine.Job
	pipe     Pipeline // the pipeline that made the job (pipelines can change)
	enqNs    int64
	enqDepth uint32
	// sendNs is when a rate-limited queue lets the packet go (stamped at
	// enqueue, as BMv2's QueueingLogicPriRL stamps it); 0 for a queue
	// without a rate.
	sendNs int64
}

// queue is one strict-priority FIFO of an egress port.
type queue struct {
	ring    []queued
	head, n int
	limit   int // packets it takes (set_queue_depth); len(ring) >= limit
	// gapNs is the queue's rate limit (set_queue_rate) as the time between
	// two packets, 0 for none; lastSend is the send time given to the
	// packet last queued.
	gapNs    int64
	lastSend int64
	enq      atomic.Uint64
	drops    atomic.Uint64
	depth    atomic.Int64
	maxDepth atomic.Int64
	delay    latencyHist // enqueue to dequeue
}

// egressPort is the traffic-manager side of a port.
type egressPort struct {
	num   uint16
	iface string
	sock  portIO // nil for the CPU port and ports without an interface
	pcap  *pcapWriter
	cpu   bool
	// noIface: a port number without an interface; its egress runs, and
	// the frames it would transmit are dropped.
	noIface bool
	// retired: replaced by port_add or port_remove (ports.go); it takes
	// nothing more, and its pacer ends. Set under mu.
	retired atomic.Bool

	mu       sync.Mutex
	queues   []queue
	depth    int
	maxDepth atomic.Int64
	rateBps  uint64
	// shaped: the port is served by a pacer (a line rate, or a queue with
	// a rate limit); otherwise the enqueuing worker drains it. limited
	// counts its queues with a rate limit. pacerOn: its pacer runs or is
	// to run. Set under Device.runMu; shaped is read without the lock.
	shaped   atomic.Bool
	limited  int
	pacerOn  bool
	nextFree int64 // ns since start, when the link is free again
	idle     bool  // queues ran empty since the last transmission
	remBits  uint64
	outv     [][]byte // frames of the batch being sent
	outq     []queued // their packets, released after the send

	txPackets atomic.Uint64
	txBytes   atomic.Uint64
	txErrors  atomic.Uint64
	// The link has no carrier: what is sent here is dropped and counted
	// (carrier_linux.go).
	ifindex     atomic.Int32
	noCarrier   atomic.Bool
	txNoCarrier atomic.Uint64
	// pacerLate is how much later than due the pacer woke from each sleep
	// (the OS's and the Go scheduler's delay together).
	pacerLate latencyHist
	// A paced port's pacer sleeps in ppoll on wakeFd (an eventfd), not on
	// a Go channel: a worker that leaves frames queued on an idle pacer
	// wakes its thread directly instead of through the Go scheduler's
	// hand-off between threads. pacerIdle: the pacer is blocked without a
	// deadline and must be woken for new frames.
	wakeFd    int
	wakeOne   [8]byte
	wakeBuf   [8]byte
	pacerPfd  [1]unix.PollFd
	pacerIdle atomic.Bool
	// pacerWake is when the pacer's timed sleep ends (device clock): a
	// worker that queues a packet due sooner wakes it.
	pacerWake atomic.Int64
	// spinning: a thread is busy-waiting for this link (one at a time).
	spinning atomic.Bool
}

// New opens the ports. Nothing is received until Run.
func New(cfg Config) (*Device, error) {
	if cfg.PriorityQueues <= 0 {
		cfg.PriorityQueues = defaultQueues
	}
	if cfg.PriorityQueues > 32 {
		return nil, fmt.Errorf("--priority-queues %d: at most 32", cfg.PriorityQueues)
	}
	if cfg.QueueCapacity <= 0 {
		cfg.QueueCapacity = defaultCapacity
	}
	if cfg.Ring == 0 {
		cfg.Ring = RingV2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CPUPort >= DropPort {
		return nil, fmt.Errorf("cpu port %d: must be below 511 (the drop port)", cfg.CPUPort)
	}
	d := &Device{cfg: cfg, log: cfg.Logger, start: time.Now(), nq: cfg.PriorityQueues, rt: newRTBudget(cfg.RTPriority), linkFd: -1}
	ok := false
	defer func() {
		if !ok {
			d.closePorts()
		}
	}()
	seen := map[string]bool{}
	for _, pc := range cfg.Ports {
		if pc.Num >= DropPort {
			return nil, fmt.Errorf("port %d@%s: port numbers are 9-bit and %d is the drop port", pc.Num, pc.Iface, DropPort)
		}
		if int(pc.Num) == cfg.CPUPort {
			return nil, fmt.Errorf("port %d@%s: number is the CPU port", pc.Num, pc.Iface)
		}
		if d.ports[pc.Num].Load() != nil {
			return nil, fmt.Errorf("port %d given twice", pc.Num)
		}
		if seen[pc.Iface] {
			return nil, fmt.Errorf("interface %s given twice", pc.Iface)
		}
		seen[pc.Iface] = true
		in, eg, err := d.openPort(pc, cfg.PcapDir)
		if err != nil {
			return nil, err
		}
		d.inputs = append(d.inputs, in)
		d.ports[pc.Num].Store(eg)
	}
	if cfg.CPUPort > 0 {
		d.cpu = d.newEgressPort(uint16(cfg.CPUPort), "cpu", 0)
		d.cpu.cpu = true
		d.ports[cfg.CPUPort].Store(d.cpu)
		d.cpuIn = &inputPort{num: uint16(cfg.CPUPort), iface: "cpu"}
	}
	d.injW = d.newWorker()
	// Opened here, in the namespace the ports are in.
	d.initCarrier()
	if fd, err := openLinkWatch(); err != nil {
		d.log.Warn("link state: cannot follow the ports' links; a port without carrier will not be noticed", "err", err)
	} else {
		d.linkFd = fd
	}
	ok = true
	return d, nil
}

// openPort opens an interface as port pc.Num: its socket, a pacer's
// eventfd if it has a line rate, and its captures in pcapDir ("": none).
func (d *Device) openPort(pc PortConfig, pcapDir string) (*inputPort, *egressPort, error) {
	cfg := d.cfg
	mtu := interfaceMTU(pc.Iface)
	if mtu > 9000 {
		mtu = 9000
	}
	sock, err := openPortIO(pc.Iface, portOpenConfig{
		IO: cfg.IO, Ring: cfg.Ring, RingBytes: cfg.RingBytes, MaxFrame: mtu + 18,
		TxBatch: txBatch, IgnoreOutgoing: true, Tx: cfg.Tx, Log: cfg.Logger,
		xdpModes: cfg.xdpModes,
	})
	if err != nil {
		return nil, nil, err
	}
	in := &inputPort{num: pc.Num, iface: pc.Iface, sock: sock}
	eg := d.newEgressPort(pc.Num, pc.Iface, pc.RateBps)
	eg.sock = sock
	fail := func(err error) (*inputPort, *egressPort, error) {
		closeOpened(in, eg)
		return nil, nil, err
	}
	if pc.RateBps > 0 {
		if err := eg.openWake(); err != nil {
			return fail(err)
		}
		eg.shaped.Store(true)
		eg.pacerOn = true
	}
	if pcapDir != "" {
		if in.pcap, err = createPcap(pcapDir, pc.Iface+"_in.pcap"); err != nil {
			return fail(err)
		}
		if eg.pcap, err = createPcap(pcapDir, pc.Iface+"_out.pcap"); err != nil {
			return fail(err)
		}
	}
	return in, eg, nil
}

// closeOpened closes what openPort opened for a port that never forwarded.
func closeOpened(in *inputPort, eg *egressPort) {
	_ = in.pcap.close()
	_ = eg.pcap.close()
	if eg.wakeFd >= 0 {
		_ = unix.Close(eg.wakeFd)
	}
	in.sock.close()
}

// openWake makes the eventfd the port's pacer sleeps on.
func (eg *egressPort) openWake() error {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	eg.wakeFd = fd
	eg.pacerPfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	return nil
}

// egressPortFor returns the egress port a job for port num is queued on:
// the interface's, the CPU port, or one without an interface, made on first
// use; nil for the drop port and above, whose jobs are dropped.
func (d *Device) egressPortFor(num uint32) *egressPort {
	if num >= DropPort {
		return nil
	}
	if eg := d.ports[num].Load(); eg != nil {
		return eg
	}
	eg := d.newEgressPort(uint16(num), "", 0)
	eg.noIface = true
	if !d.ports[num].CompareAndSwap(nil, eg) {
		return d.ports[num].Load()
	}
	return eg
}

// egressPorts lists the egress ports: the interfaces', the CPU port, and
// the ports without an interface made so far (not on the forwarding path:
// it allocates).
func (d *Device) egressPorts() []*egressPort {
	var out []*egressPort
	for i := range d.ports {
		if eg := d.ports[i].Load(); eg != nil {
			out = append(out, eg)
		}
	}
	return out
}

// lookupEgress is the egress port of num if it exists yet, or nil.
func (d *Device) lookupEgress(num int) *egressPort {
	if num < 0 || num >= DropPort {
		return nil
	}
	return d.ports[num].Load()
}

func (d *Device) newEgressPort(num uint16, iface string, rate uint64) *egressPort {
	p := &egressPort{num: num, iface: iface, rateBps: rate, idle: true, wakeFd: -1, wakeOne: [8]byte{1}}
	p.queues = make([]queue, d.nq)
	for i := range p.queues {
		p.queues[i].ring = make([]queued, d.cfg.QueueCapacity)
		p.queues[i].limit = d.cfg.QueueCapacity
	}
	p.outv = make([][]byte, 0, txBatch)
	p.outq = make([]queued, 0, txBatch)
	return p
}

// nowNs is the device clock: nanoseconds since start, monotonic.
func (d *Device) nowNs() int64 { return int64(time.Since(d.start)) }

// NowNs is the device clock (ns since the device was created); give it to
// the engine as Options.Clock so program timestamps match the queueing
// metadata.
func (d *Device) NowNs() int64 { return d.nowNs() }

// SetPipeline installs p (nil: drop everything, as --no-p4 does until a
// pipeline is pushed). Jobs already queued finish on the pipeline that made
// them.
func (d *Device) SetPipeline(p Pipeline) {
	d.pipeMu.Lock()
	defer d.pipeMu.Unlock()
	d.pipe = p
}

// flushQueues drops everything queued (at shutdown).
func (d *Device) flushQueues() {
	for _, eg := range d.egressPorts() {
		eg.mu.Lock()
		for qi := range eg.queues {
			q := &eg.queues[qi]
			for q.n > 0 {
				e := q.pop()
				e.pipe.Release(e.job.Pkt)
			}
			q.depth.Store(0)
		}
		eg.depth = 0
		eg.mu.Unlock()
	}
}

// CurrentPipeline returns the installed pipeline, or nil.
func (d *Device) CurrentPipeline() Pipeline {
	d.pipeMu.RLock()
	defer d.pipeMu.RUnlock()
	return d.pipe
}

// SubscribePacketIn registers fn for frames the pipeline sends to the CPU
// port. fn runs on the forwarding path with a frame valid only during the
// call: copy what you keep, return quickly. The returned func unsubscribes.
func (d *Device) SubscribePacketIn(fn func(frame []byte)) (cancel func()) {
	s := &packetInSub{fn: fn}
	d.subMu.Lock()
	defer d.subMu.Unlock()
	var cur []*packetInSub
	if p := d.subs.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*packetInSub(nil), cur...), s)
	d.subs.Store(&next)
	return func() {
		d.subMu.Lock()
		defer d.subMu.Unlock()
		var cur []*packetInSub
		if p := d.subs.Load(); p != nil {
			cur = *p
		}
		var next []*packetInSub
		for _, x := range cur {
			if x != s {
				next = append(next, x)
			}
		}
		d.subs.Store(&next)
	}
}

// ErrNoCPUPort is returned for a packet-out when the switch has no CPU port.
var ErrNoCPUPort = errors.New("no CPU port configured (--cpu-port)")

// InjectPacketOut runs frame through ingress as if it arrived on the CPU
// port, which is how simple_switch_grpc treats a P4Runtime PacketOut (the
// program reads its packet_out header and picks the port).
func (d *Device) InjectPacketOut(frame []byte) error {
	if d.cpuIn == nil {
		return ErrNoCPUPort
	}
	if len(frame) == 0 {
		return errors.New("packet-out: empty payload")
	}
	if len(frame) > MaxFrame {
		return fmt.Errorf("packet-out: %d bytes exceeds the %d-byte frame limit", len(frame), MaxFrame)
	}
	d.pipeMu.RLock()
	defer d.pipeMu.RUnlock()
	if d.pipe == nil {
		return errors.New("packet-out: no pipeline loaded")
	}
	d.injMu.Lock()
	defer d.injMu.Unlock()
	if d.portsClosed {
		return errors.New("packet-out: the switch is shutting down")
	}
	d.cpuIn.rxPackets.Add(1)
	d.cpuIn.rxBytes.Add(uint64(len(frame)))
	w := d.injW
	// A packet-out arrives now (as BMv2 stamps it when it takes it in).
	w.ingress(frame, d.cpuIn.num, d.nowNs())
	w.flush()
	return nil
}

// Run forwards until ctx is cancelled, then closes the ports and pcaps.
func (d *Device) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return errors.New("device already running")
	}
	d.reserveProcs()
	var wg sync.WaitGroup
	d.runMu.Lock()
	d.runCtx, d.runWG = ctx, &wg
	d.rxErr = make(chan error, 1)
	for _, in := range d.inputs {
		d.goReceive(in)
	}
	for _, eg := range d.egressPorts() {
		if eg.pacerOn {
			d.goPacer(eg)
		}
	}
	d.runMu.Unlock()
	if d.linkFd >= 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.watchCarrier(ctx, d.linkFd)
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-d.rxErr:
	}
	d.runMu.Lock()
	d.runDone = true
	for _, in := range d.inputs {
		in.stop()
	}
	for _, eg := range d.egressPorts() {
		if eg.wakeFd >= 0 {
			eg.wakePacer()
		}
	}
	d.runMu.Unlock()
	wg.Wait()
	d.flushQueues()
	if cerr := d.closePorts(); err == nil {
		err = cerr
	}
	return err
}

// goReceive starts in's receive loop under Run's wait group, until Run ends
// or the port is removed (in.stop). Caller holds runMu, Run has begun and
// not ended.
func (d *Device) goReceive(in *inputPort) {
	ctx, cancel := context.WithCancel(d.runCtx)
	in.done = make(chan struct{})
	in.stop = func() {
		cancel()
		in.sock.wakeUp()
	}
	wg := d.runWG
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(in.done)
		if err := d.receiveLoop(ctx, in); err != nil {
			select {
			case d.rxErr <- err:
			default:
			}
		}
	}()
}

// inputPorts is a copy of the interfaces' receive sides.
func (d *Device) inputPorts() []*inputPort {
	d.runMu.Lock()
	defer d.runMu.Unlock()
	return append([]*inputPort(nil), d.inputs...)
}

// goPacer starts eg's pacer under Run's wait group. Caller holds runMu,
// Run has begun and not ended.
func (d *Device) goPacer(eg *egressPort) {
	ctx, wg := d.runCtx, d.runWG
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.pacerLoop(ctx, eg)
	}()
}

// forwardingThreads is how many OS threads Run locks to its loops: one
// receive loop per port and one pacer per shaped port.
func (d *Device) forwardingThreads() int {
	d.runMu.Lock()
	defer d.runMu.Unlock()
	return d.forwardingThreadsLocked()
}

func (d *Device) forwardingThreadsLocked() int {
	n := len(d.inputs)
	for _, eg := range d.egressPorts() {
		if eg.pacerOn {
			n++
		}
	}
	return n
}

// reserveProcs raises GOMAXPROCS (never lowers it) so that every forwarding
// thread can hold a P of its own with the machine's CPUs to spare for the
// rest of the process. Each loop is locked to its OS thread and spends
// most of its time in system calls (poll, nanosleep, send); with the
// default GOMAXPROCS (the CPU count, 2 here) a thread returning from one
// found no idle P and waited for the Go scheduler to hand it one, which
// took up to the 10 ms of sysmon's preemption tick: measured with
// prio-latency.sh, pacer wake-ups up to 5–17 ms late and frames waiting up
// to 10–17 ms in receive rings, against 2.8–3.8 ms and 0.6–2.4 ms with
// GOMAXPROCS=16 (docs/performance.md). Extra Ps cost nothing while idle;
// the OS, not Go, then decides which runnable thread gets a CPU, and the
// forwarding threads' priority (Nice, real-time pacers) takes effect.
func (d *Device) reserveProcs() {
	want := d.forwardingThreads() + runtime.NumCPU()
	if runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}

func (d *Device) closePorts() error {
	d.injMu.Lock()
	d.portsClosed = true
	d.injMu.Unlock()
	var first error
	if d.linkFd >= 0 {
		_ = unix.Close(d.linkFd)
		d.linkFd = -1
	}
	d.runMu.Lock()
	inputs, retired := d.inputs, d.retired
	d.runMu.Unlock()
	for _, in := range inputs {
		if err := in.pcap.close(); err != nil && first == nil {
			first = err
		}
		in.pcap = nil
		if in.sock != nil {
			in.sock.close()
		}
	}
	for _, eg := range append(d.egressPorts(), retired...) {
		if err := eg.pcap.close(); err != nil && first == nil {
			first = err
		}
		eg.pcap = nil
		if eg.wakeFd >= 0 {
			_ = unix.Close(eg.wakeFd)
			eg.wakeFd = -1
		}
	}
	return first
}

func (d *Device) receiveLoop(ctx context.Context, in *inputPort) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := d.setupThread("rx", in.iface, d.cfg.Nice, 0)
	w := d.newWorker()
	w.thread = t
	spins := 0
	for ctx.Err() == nil {
		d.pipeMu.RLock()
		in.clock.beginBatch(d)
		w.now = in.clock.now
		t.charge(w.now)
		n := 0
		for n < rxBatch {
			f, ok := in.sock.next()
			if !ok {
				break
			}
			w.receive(in, f)
			in.sock.release()
			n++
		}
		w.commitRx(in)
		if n > 0 {
			// Before the batch leaves, so that a frame seen on an output
			// is already in the input capture.
			in.pcap.flush()
		}
		w.flush()
		d.pipeMu.RUnlock()
		if n > 0 {
			spins = 0
			continue
		}
		if spins < d.cfg.SpinPolls {
			spins++
			runtime.Gosched()
			continue
		}
		spins = 0
		err := in.sock.wait(200)
		t.woke(d.nowNs())
		if err != nil {
			if err == errWoken {
				return nil
			}
			return err
		}
	}
	return nil
}

// pacerLoop serves one rate-limited port: strict priority at each dequeue,
// and the next dequeue only once the previous frame's wire time has passed
// (non-preemptive, like a real serial link).
func (d *Device) pacerLoop(ctx context.Context, eg *egressPort) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A pacer that wakes late loses line rate beyond paceSlack; on a busy
	// 2-core machine a better nice value keeps it on time (it sleeps most
	// of the time, so it cannot starve anyone). Needs root; best effort.
	nice := d.cfg.Nice
	if nice == 0 {
		nice = -10
	}
	t := d.setupThread("tx", eg.iface, nice, 1)
	// The default 50 µs timer slack would be a third of a 1500-byte frame
	// time at 100 Mbit/s (a real-time thread has none anyway).
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	w := d.newWorker()
	w.thread = t
	for ctx.Err() == nil && !eg.retired.Load() {
		d.pipeMu.RLock()
		wait, urgent := w.serveDue(eg, true)
		if len(w.deferred) > 0 {
			w.flush()
		}
		d.pipeMu.RUnlock()
		now := d.nowNs()
		t.charge(now)
		if wait > 0 {
			due := now + wait
			if urgent && wait > spinLead && t.mayBusyWait(now) {
				// Wake early and busy-wait the rest in serveDue.
				wait -= spinLead
			}
			timedOut := eg.sleep(wait)
			after := d.nowNs()
			t.woke(after)
			if timedOut {
				eg.pacerLate.observe(after - due)
			}
			continue
		}
		// Nothing queued: sleep until a worker leaves frames behind. The
		// flag goes up before the last look at the queues, and workers
		// read it after queueing, so a frame queued meanwhile is seen by
		// one side or the other.
		eg.pacerIdle.Store(true)
		eg.mu.Lock()
		empty := eg.depth == 0
		eg.mu.Unlock()
		if empty && ctx.Err() == nil && !eg.retired.Load() {
			eg.sleep(-1)
			t.woke(d.nowNs())
		}
		eg.pacerIdle.Store(false)
	}
}

// sleep blocks the pacer until ns have passed (ns < 0: until woken) or
// wakePacer is called; it reports whether the time ran out.
func (eg *egressPort) sleep(ns int64) (timedOut bool) {
	var ts *unix.Timespec
	var t unix.Timespec
	if ns >= 0 {
		t = unix.NsecToTimespec(ns)
		ts = &t
	}
	eg.pacerPfd[0].Revents = 0
	n, err := unix.Ppoll(eg.pacerPfd[:], ts, nil)
	if n > 0 {
		_, _ = unix.Read(eg.wakeFd, eg.wakeBuf[:]) // reset the eventfd
		return false
	}
	return err == nil
}

// wakePacer interrupts the pacer's sleep.
func (eg *egressPort) wakePacer() {
	_, _ = unix.Write(eg.wakeFd, eg.wakeOne[:])
}

// serveDue sends the frames of a shaped port whose time has come and
// returns how long until the next one may go, or 0 when the queues are
// empty; urgent reports that the next one is from a queue above the lowest
// and waits only for the link. A frame may go when the link is free (a
// port with a line rate: the previous frame's wire time has passed) and
// its queue's rate limit lets it (its sendNs has come); among the queues
// whose head may go, the highest priority goes first, as in BMv2's
// QueueingLogicPriRL. Both the pacer (pacer true) and an enqueuing worker
// call it, so a frame reaching an idle link leaves at once instead of
// waiting for the pacer thread to wake. When the next frame is urgent and
// the link comes free within spinLead, the caller busy-waits for it (one
// thread at a time, within the real-time budget) rather than sleeping:
// this is the path of admitted traffic, whose delay bound a late wake-up
// would break.
func (w *worker) serveDue(eg *egressPort, pacer bool) (wait int64, urgent bool) {
	d := w.d
	eg.mu.Lock()
	for eg.depth > 0 {
		now := d.nowNs()
		if eg.rateBps > 0 {
			if eg.idle {
				// The link sat idle: no credit was earned meanwhile.
				if eg.nextFree < now {
					eg.nextFree = now
				}
				eg.idle = false
			}
			if wt := eg.nextFree - now; wt > 0 {
				urgent = eg.urgentHead()
				if !urgent || wt > spinLead || !w.thread.mayBusyWait(now) || !eg.spinning.CompareAndSwap(false, true) {
					if pacer {
						eg.pacerWake.Store(now + wt)
					}
					eg.mu.Unlock()
					return wt, urgent
				}
				free := eg.nextFree
				eg.mu.Unlock()
				for d.nowNs() < free {
				}
				w.thread.charge(d.nowNs())
				eg.mu.Lock()
				eg.spinning.Store(false)
				continue
			}
			if now-eg.nextFree > int64(paceSlack) {
				eg.nextFree = now - int64(paceSlack)
			}
		}
		qi, wt := eg.eligible(now)
		if qi < 0 {
			// Every queued frame waits for its queue's rate: the link
			// idles meanwhile and earns no credit.
			eg.idle = true
			if len(eg.outv) > 0 {
				d.transmit(eg)
			}
			if pacer {
				eg.pacerWake.Store(now + wt)
			}
			eg.mu.Unlock()
			return wt, false
		}
		e := eg.dequeueFrom(qi)
		if eg.rateBps == 0 {
			// No line to pace: gather what may go into one send.
			w.egress(eg, e, now)
			if len(eg.outv) < txBatch && eg.depth > 0 {
				continue
			}
			d.transmit(eg)
			continue
		}
		eg.outv, eg.outq = eg.outv[:0], eg.outq[:0]
		if l := w.egress(eg, e, now); l > 0 {
			d.transmit(eg)
			eg.advance(l)
		}
	}
	if len(eg.outv) > 0 {
		d.transmit(eg)
	}
	eg.idle = true
	eg.mu.Unlock()
	return 0, false
}

// eligible returns the highest-priority queue whose head may leave at now
// (its queue's rate limit lets it), or -1 and how long until the first
// may. Caller holds eg.mu and knows eg.depth > 0.
func (eg *egressPort) eligible(now int64) (int, int64) {
	if eg.limited == 0 {
		return eg.headQueue(), 0
	}
	next := int64(-1)
	for i := len(eg.queues) - 1; i >= 0; i-- {
		q := &eg.queues[i]
		if q.n == 0 {
			continue
		}
		s := q.ring[q.head].sendNs
		if s <= now {
			return i, 0
		}
		if next < 0 || s < next {
			next = s
		}
	}
	return -1, next - now
}

// urgentHead reports whether a queue above the lowest holds a packet (so
// the next to leave is admitted traffic). Caller holds eg.mu.
func (eg *egressPort) urgentHead() bool {
	for i := len(eg.queues) - 1; i > 0; i-- {
		if eg.queues[i].n > 0 {
			return true
		}
	}
	return false
}

// advance moves the link's free time by the wire time of an n-byte frame,
// carrying the remainder so rounding never drifts the rate.
func (eg *egressPort) advance(n int) {
	bits := uint64(WireBytes(n))*8*1e9 + eg.remBits
	eg.nextFree += int64(bits / eg.rateBps)
	eg.remBits = bits % eg.rateBps
}

// setLimit makes the queue take n packets; packets already queued beyond
// a smaller n stay (BMv2's set_queue_depth). Caller holds the port's lock.
func (q *queue) setLimit(n int) {
	if n > len(q.ring) {
		ring := make([]queued, n)
		for i := 0; i < q.n; i++ {
			j := q.head + i
			if j >= len(q.ring) {
				j -= len(q.ring)
			}
			ring[i] = q.ring[j]
		}
		q.ring, q.head = ring, 0
	}
	q.limit = n
}

// queuePorts returns the ports set_queue_depth or set_queue_rate address:
// port -1 is every port; a priority past the ports' queues is an error.
func (d *Device) queuePorts(port, priority int) ([]*egressPort, error) {
	if priority >= d.nq {
		return nil, fmt.Errorf("priority %d: the ports have %d priority queues", priority, d.nq)
	}
	if port < 0 {
		return d.egressPorts(), nil
	}
	if port >= DropPort {
		return nil, fmt.Errorf("port %d: no such port (%d is the drop port)", port, DropPort)
	}
	// BMv2 keeps queues for any port number; so does the device, for a
	// port without an interface (what egress leaves there is dropped).
	return []*egressPort{d.egressPortFor(uint32(port))}, nil
}

// SetQueueDepth sets how many packets the egress queue of port at priority
// takes (BMv2's set_queue_depth): port -1 is every port, priority -1 every
// priority of the port. A port number without an interface has queues
// too, as in BMv2; -1 reaches the ports that exist so far (the interfaces',
// the CPU port, and numbers without an interface already used).
func (d *Device) SetQueueDepth(port, priority, packets int) error {
	if packets < 0 {
		return fmt.Errorf("queue depth %d: negative", packets)
	}
	d.portMu.Lock() // not lost to a port_add replacing the port meanwhile
	defer d.portMu.Unlock()
	ports, err := d.queuePorts(port, priority)
	if err != nil {
		return err
	}
	for _, eg := range ports {
		eg.mu.Lock()
		for i := range eg.queues {
			if priority < 0 || i == priority {
				eg.queues[i].setLimit(packets)
			}
		}
		eg.mu.Unlock()
	}
	return nil
}

// SetQueueRate limits the egress queue of port at priority to pps packets
// per second (BMv2's set_queue_rate; 0 removes the limit): port -1 is every
// port, priority -1 every priority of the port. A queue's packets are
// given their times to leave as they are queued, each 1/pps after the one
// before; among the queues whose head may leave, the highest priority goes
// first. A port with a limited queue is served by a pacer thread, started
// here if it has none (a port with --port-rate has one); its line rate
// still applies. Ports are addressed as by SetQueueDepth.
func (d *Device) SetQueueRate(port, priority int, pps int64) error {
	if pps < 0 {
		return fmt.Errorf("queue rate %d: negative", pps)
	}
	d.portMu.Lock() // not lost to a port_add replacing the port meanwhile
	defer d.portMu.Unlock()
	ports, err := d.queuePorts(port, priority)
	if err != nil {
		return err
	}
	var gap int64
	if pps > 0 {
		gap = max(int64(time.Second)/pps, 1)
	}
	d.runMu.Lock()
	defer d.runMu.Unlock()
	for _, eg := range ports {
		if gap > 0 && !eg.pacerOn && !d.runDone {
			if eg.wakeFd < 0 {
				if err := eg.openWake(); err != nil {
					return err
				}
			}
			eg.pacerOn = true
			if d.runCtx != nil {
				d.goPacer(eg)
				if want := d.forwardingThreadsLocked() + runtime.NumCPU(); runtime.GOMAXPROCS(0) < want {
					runtime.GOMAXPROCS(want)
				}
			}
		}
		eg.mu.Lock()
		for i := range eg.queues {
			if priority < 0 || i == priority {
				q := &eg.queues[i]
				if (q.gapNs > 0) != (gap > 0) {
					if gap > 0 {
						eg.limited++
					} else {
						eg.limited--
					}
				}
				q.gapNs = gap
			}
		}
		eg.shaped.Store(eg.rateBps > 0 || (eg.limited > 0 && eg.pacerOn))
		eg.mu.Unlock()
	}
	return nil
}

// QueueRate returns the rate limit set for port's queue at priority in
// packets per second (0: none), as the time between packets it keeps.
func (d *Device) QueueRate(port, priority int) (gapNs int64, ok bool) {
	eg := d.lookupEgress(port)
	if eg == nil || priority < 0 || priority >= d.nq {
		return 0, false
	}
	eg.mu.Lock()
	defer eg.mu.Unlock()
	return eg.queues[priority].gapNs, true
}

// QueueDepth returns the depth set for port's queue at priority.
func (d *Device) QueueDepth(port, priority int) (int, bool) {
	eg := d.lookupEgress(port)
	if eg == nil || priority < 0 || priority >= d.nq {
		return 0, false
	}
	eg.mu.Lock()
	defer eg.mu.Unlock()
	return eg.queues[priority].limit, true
}

// PriorityQueues is the number of priority queues per port.
func (d *Device) PriorityQueues() int { return d.nq }

func (q *queue) push(pk queued) {
	i := q.head + q.n
	if i >= len(q.ring) {
		i -= len(q.ring)
	}
	q.ring[i] = pk
	q.n++
}

func (q *queue) pop() queued {
	pk := q.ring[q.head]
	q.ring[q.head] = queued{}
	q.head++
	if q.head == len(q.ring) {
		q.head = 0
	}
	q.n--
	return pk
}

// headQueue is the highest non-empty priority queue. Caller holds eg.mu
// and knows eg.depth > 0.
func (eg *egressPort) headQueue() int {
	for i := len(eg.queues) - 1; i >= 0; i-- {
		if eg.queues[i].n > 0 {
			return i
		}
	}
	return 0
}

// dequeue takes the head of the highest non-empty priority queue.
// Caller holds eg.mu and knows eg.depth > 0.
func (eg *egressPort) dequeue() queued {
	return eg.dequeueFrom(eg.headQueue())
}

// dequeueFrom takes the head of queue i, which is not empty. Caller holds
// eg.mu.
func (eg *egressPort) dequeueFrom(i int) queued {
	q := &eg.queues[i]
	pk := q.pop()
	q.depth.Store(int64(q.n))
	eg.depth--
	return pk
}

// transmit sends the frames collected in eg.outv, then releases their
// packets. Caller holds eg.mu.
func (d *Device) transmit(eg *egressPort) {
	frames := eg.outv
	if len(frames) == 0 {
		return
	}
	if eg.cpu {
		var subs []*packetInSub
		if p := d.subs.Load(); p != nil {
			subs = *p
		}
		for _, f := range frames {
			eg.txPackets.Add(1)
			eg.txBytes.Add(uint64(len(f)))
			for _, s := range subs {
				s.fn(f)
			}
		}
	} else if eg.noIface || eg.retired.Load() {
		// Nowhere to send it, as BMv2 drops what egress leaves for a port
		// it has no interface for.
		d.dropNoPort.Add(uint64(len(frames)))
	} else if eg.noCarrier.Load() {
		// No link: dropped, as a NIC drops (carrier_linux.go).
		eg.txNoCarrier.Add(uint64(len(frames)))
	} else {
		sent, _ := eg.sock.send(frames)
		var bytes uint64
		for _, f := range frames[:sent] {
			bytes += uint64(len(f))
		}
		if eg.pcap != nil {
			now := time.Now()
			for _, f := range frames[:sent] {
				eg.pcap.write(now, f)
			}
		}
		eg.txPackets.Add(uint64(sent))
		eg.txBytes.Add(bytes)
		if sent < len(frames) {
			// The kernel refused the rest (peer backlog full, interface
			// down): count and drop rather than block the forwarding loop.
			eg.txErrors.Add(uint64(len(frames) - sent))
		}
		eg.pcap.flush()
	}
	for i := range eg.outq {
		eg.outq[i].pipe.Release(eg.outq[i].job.Pkt)
		eg.outq[i] = queued{}
	}
	eg.outv, eg.outq = eg.outv[:0], eg.outq[:0]
}
