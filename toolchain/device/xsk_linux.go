package device

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AF_XDP ports. Each receive queue of the interface gets an AF_XDP socket
// (XSK) with a UMEM of its own; the interface's XDP program (xdp_linux.go)
// redirects every frame to the socket of the queue it arrived on. A UMEM's
// frames are split once: the first part only ever cycles through the fill
// and RX rings (the receive goroutine's), the rest through the TX and
// completion rings (whoever holds the egress port's lock). The two sides
// share no state, so neither needs a lock, as with AF_PACKET's two rings.
//
// Frames are copied into a TX frame rather than sent from the RX frame in
// place: the pipeline already copied the frame into its packet (the engine
// parses and rewrites its own buffer), and a received frame's UMEM slot
// goes back to the fill ring at once. On veth the kernel copies in both
// directions anyway (no zero-copy driver support).

// xskConfig configures an AF_XDP port.
type xskConfig struct {
	MaxFrame  int // largest frame (MTU + Ethernet header + one VLAN tag)
	RingBytes int // UMEM given to receiving, per queue
	Modes     []xdpMode
	Log       *slog.Logger
	// NoSteering leaves out the XDP program (a TX-only port: the
	// benchmark's generator).
	NoSteering bool
}

const (
	// xskTxFrames is each queue's transmit ring (and TX frame pool): 32
	// batches of the device's 32 frames.
	xskTxFrames = 1024
	// xskMinRxFrames bounds the receive ring from below.
	xskMinRxFrames = 512
	// xskMaxRxFrames bounds it from above (the kernel caps rings too).
	xskMaxRxFrames = 1 << 15
	// xskPublishEvery is how many received frames are handed back to the
	// kernel (RX consumer and fill producer stored) at once: one shared
	// cache line written per batch instead of per frame.
	xskPublishEvery = 32
	// xskTxBudget is how many frames one transmit kick may send in copy
	// mode (the kernel's default is 32): fewer sendto calls per batch.
	xskTxBudget = 256
	// xskBindTries × 10 ms is how long a bind waits for a queue that a
	// closed socket still holds.
	xskBindTries = 100
	// xskKicks bounds the kicks for one batch while the kernel makes
	// progress; what is left goes with the next batch's kick.
	xskKicks = 16
)

// ring is the shared header of one of the four XSK rings plus the
// producer's or consumer's cached view of it.
type ring struct {
	producer, consumer, flags *uint32
	mask, size                uint32
	cachedProd, cachedCons    uint32
	mem                       []byte
}

// xskQueue is one AF_XDP socket bound to one receive queue.
type xskQueue struct {
	fd        int
	queue     int
	umem      []byte
	chunk     int
	chunkMask uint64
	fill      ring
	fillAddrs []uint64
	comp      ring
	compAddrs []uint64
	rx        ring
	rxDescs   []unix.XDPDesc
	tx        ring
	txDescs   []unix.XDPDesc
	free      []uint64 // TX frames not in flight
	pending   int      // received frames released but not yet published
}

// xskPort is a port's AF_XDP sockets and its XDP program.
type xskPort struct {
	name    string
	ifindex int
	steer   *xdpSteering
	queues  []*xskQueue
	cur     int       // queue being read
	held    *xskQueue // queue of the frame returned by next
	heldA   uint64    // its first chunk's address
	heldN   int       // how many descriptors (chunks) it spans
	// scratch assembles a frame that arrived in several chunks (ports
	// whose MTU needs multi-buffer frames; nil otherwise).
	scratch []byte
	wake    int
	pfd     []unix.PollFd
	maxTx   int
	minTx   int
	why     string
	// monoToReal converts the program's CLOCK_MONOTONIC stamps to the
	// CLOCK_REALTIME the device's arrival clock takes (arrival.go).
	monoToReal int64
	sinceSync  int
	lastDrops  uint64
}

func getsockopt(fd, level, opt int, p unsafe.Pointer, l *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, l uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), l, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rxQueueCount asks the driver (ethtool channels) how many receive queues
// iface has; 1 when it does not say. (sysfs would show the queues of the
// namespace sysfs was mounted in, not necessarily the caller's.)
func rxQueueCount(iface string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(fd)
	// struct ethtool_channels: cmd, max_rx, max_tx, max_other,
	// max_combined, rx_count, tx_count, other_count, combined_count.
	// On the heap: the kernel writes it through a pointer inside ifr.
	ch := new([9]uint32)
	ch[0] = 0x3c // ETHTOOL_GCHANNELS
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	if len(iface) >= unix.IFNAMSIZ {
		return 1
	}
	copy(ifr.name[:], iface)
	ifr.data = uintptr(unsafe.Pointer(&ch[0]))
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 1
	}
	n := int(ch[5] + ch[8])
	if n < 1 {
		return 1
	}
	return n
}

// chunkFor returns the UMEM chunk size for frames up to maxFrame bytes and
// whether a frame may span several chunks (multi-buffer, XDP_USE_SG): a
// 2048-byte chunk holds a 1500-byte MTU's frames after the kernel's XDP
// headroom and the program's metadata; larger frames go in 4096-byte
// chunks, in pieces when they do not fit one (jumbo MTUs, christie's
// 4500-byte FDDI stand-in).
func chunkFor(maxFrame int) (chunk int, multi bool) {
	for _, c := range []int{2048, 4096} {
		if maxFrame+unix.XDP_PACKET_HEADROOM+xdpMetaLen <= c {
			return c, false
		}
	}
	return 4096, true
}

func pow2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// openXSKPort opens an AF_XDP socket on each receive queue of iface, loads
// the steering program and attaches it in the first of cfg.Modes the
// kernel accepts (default native, then generic).
func openXSKPort(iface string, cfg xskConfig) (*xskPort, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		// The kernel's AF_XDP transmit path and XDP itself assume an
		// Ethernet header; a TUN device (the STF runner's) has none.
		return nil, errors.New("not an Ethernet device")
	}
	maxFrame := cfg.MaxFrame
	if maxFrame <= 0 {
		maxFrame = ifi.MTU + 18
	}
	if maxFrame > MaxFrame {
		maxFrame = MaxFrame
	}
	chunk, multi := chunkFor(maxFrame)
	ringBytes := cfg.RingBytes
	if ringBytes <= 0 {
		ringBytes = DefaultRingBytes
	}
	rxFrames := min(max(pow2Floor(ringBytes/chunk), xskMinRxFrames), xskMaxRxFrames)
	modes := cfg.Modes
	if modes == nil {
		modes = []xdpMode{xdpNative, xdpGeneric}
	}
	p := &xskPort{name: iface, ifindex: ifi.Index, wake: -1, maxTx: maxFrame, minTx: 14}
	if multi {
		p.scratch = make([]byte, xdpMetaLen+maxFrame)
	}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()
	nq := rxQueueCount(iface)
	if cfg.NoSteering {
		nq = 1
	} else {
		if mounted, err := ensureBPFFS(); err != nil {
			cfg.Log.Warn("bpffs", "err", err)
		} else if mounted {
			cfg.Log.Info("mounted bpffs", "path", bpffsPath)
		}
		if p.steer, err = loadSteering(nq, multi); err != nil {
			return nil, err
		}
	}
	for qi := 0; qi < nq; qi++ {
		q, err := openXSKQueue(ifi.Index, qi, chunk, rxFrames, multi)
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", qi, err)
		}
		p.queues = append(p.queues, q)
		if p.steer != nil {
			if err := p.steer.addSocket(qi, q.fd); err != nil {
				return nil, fmt.Errorf("XSKMAP entry for queue %d: %w", qi, err)
			}
		}
	}
	if p.steer != nil {
		var why []string
		attached := false
		for _, m := range modes {
			if err := p.steer.attach(ifi.Index, m); err != nil {
				why = append(why, fmt.Sprintf("%s XDP refused: %v", m, err))
				continue
			}
			why = append(why, fmt.Sprintf("%s XDP attached", m))
			attached = true
			break
		}
		p.why = strings.Join(why, "; ")
		if !attached {
			return nil, errors.New(p.why)
		}
	}
	if p.wake, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	for _, q := range p.queues {
		p.pfd = append(p.pfd, unix.PollFd{Fd: int32(q.fd), Events: unix.POLLIN})
	}
	p.pfd = append(p.pfd, unix.PollFd{Fd: int32(p.wake), Events: unix.POLLIN})
	p.syncClock()
	ok = true
	return p, nil
}

// openXSKQueue creates the socket and UMEM for one queue and binds it.
func openXSKQueue(ifindex, queue, chunk, rxFrames int, multi bool) (*xskQueue, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("AF_XDP socket: %w", err)
	}
	q := &xskQueue{fd: fd, queue: queue, chunkMask: ^uint64(chunk - 1), chunk: chunk}
	ok := false
	defer func() {
		if !ok {
			q.close()
		}
	}()
	frames := rxFrames + xskTxFrames
	q.umem, err = unix.Mmap(-1, 0, frames*chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("UMEM: %w", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&q.umem[0]))), Len: uint64(len(q.umem)), Size: uint32(chunk)}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	for _, o := range []struct {
		opt, n int
	}{{unix.XDP_UMEM_FILL_RING, rxFrames}, {unix.XDP_UMEM_COMPLETION_RING, xskTxFrames}, {unix.XDP_RX_RING, rxFrames}, {unix.XDP_TX_RING, xskTxFrames}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, o.n); err != nil {
			return nil, fmt.Errorf("XSK ring size (option %d): %w", o.opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	l := uint32(unsafe.Sizeof(off))
	if err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), &l); err != nil {
		return nil, fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if q.fill, err = mapRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, rxFrames, 8); err != nil {
		return nil, err
	}
	q.fillAddrs = unsafe.Slice((*uint64)(unsafe.Pointer(&q.fill.mem[off.Fr.Desc])), rxFrames)
	if q.comp, err = mapRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, xskTxFrames, 8); err != nil {
		return nil, err
	}
	q.compAddrs = unsafe.Slice((*uint64)(unsafe.Pointer(&q.comp.mem[off.Cr.Desc])), xskTxFrames)
	if q.rx, err = mapRing(fd, unix.XDP_PGOFF_RX_RING, off.Rx, rxFrames, int(unsafe.Sizeof(unix.XDPDesc{}))); err != nil {
		return nil, err
	}
	q.rxDescs = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&q.rx.mem[off.Rx.Desc])), rxFrames)
	if q.tx, err = mapRing(fd, unix.XDP_PGOFF_TX_RING, off.Tx, xskTxFrames, int(unsafe.Sizeof(unix.XDPDesc{}))); err != nil {
		return nil, err
	}
	q.txDescs = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&q.tx.mem[off.Tx.Desc])), xskTxFrames)
	// Every receive frame starts in the fill ring; the fill ring is as
	// long as there are receive frames, so it can never overflow.
	for i := 0; i < rxFrames; i++ {
		q.fillAddrs[i] = uint64(i * chunk)
	}
	q.fill.cachedProd = uint32(rxFrames)
	atomic.StoreUint32(q.fill.producer, q.fill.cachedProd)
	q.free = make([]uint64, 0, xskTxFrames)
	for i := 0; i < xskTxFrames; i++ {
		q.free = append(q.free, uint64((rxFrames+i)*chunk))
	}
	// Best effort (kernel 6.17+): more frames per transmit kick.
	_ = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, xskTxBudget)
	flags := uint16(unix.XDP_USE_NEED_WAKEUP)
	if multi {
		flags |= unix.XDP_USE_SG
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	// A socket just closed on this queue (a restarted switch, the
	// benchmark's next generator) holds it until the kernel's deferred
	// teardown runs: EBUSY for a few milliseconds. Wait for it rather than
	// fall back to AF_PACKET.
	var err2 error
	for try := 0; try < xskBindTries; try++ {
		if err2 = unix.Bind(fd, sa); !errors.Is(err2, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err2 != nil {
		return nil, fmt.Errorf("bind AF_XDP socket to queue %d: %w", queue, err2)
	}
	ok = true
	return q, nil
}

func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, n, elem int) (ring, error) {
	size := int(off.Desc) + n*elem
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mmap XSK ring: %w", err)
	}
	return ring{
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask:     uint32(n - 1), size: uint32(n), mem: mem,
	}, nil
}

// peekRx returns the next received descriptor without consuming it.
func (q *xskQueue) peekRx() (unix.XDPDesc, bool) {
	r := &q.rx
	if r.cachedCons == r.cachedProd {
		r.cachedProd = atomic.LoadUint32(r.producer)
		if r.cachedCons == r.cachedProd {
			return unix.XDPDesc{}, false
		}
	}
	return q.rxDescs[r.cachedCons&r.mask], true
}

// rxDescAt returns the i-th received descriptor after the next one, if
// the kernel has produced it (the pieces of a multi-buffer frame).
func (q *xskQueue) rxDescAt(i uint32) (unix.XDPDesc, bool) {
	r := &q.rx
	if r.cachedProd-r.cachedCons <= i {
		r.cachedProd = atomic.LoadUint32(r.producer)
		if r.cachedProd-r.cachedCons <= i {
			return unix.XDPDesc{}, false
		}
	}
	return q.rxDescs[(r.cachedCons+i)&r.mask], true
}

// releaseRx consumes n descriptors (one frame) and gives their chunks back
// to the fill ring.
func (q *xskQueue) releaseRx(n int) {
	for i := 0; i < n; i++ {
		addr := q.rxDescs[q.rx.cachedCons&q.rx.mask].Addr
		q.rx.cachedCons++
		q.fillAddrs[q.fill.cachedProd&q.fill.mask] = addr & q.chunkMask
		q.fill.cachedProd++
	}
	q.pending += n
	if q.pending >= xskPublishEvery {
		q.publishRx()
	}
}

// publishRx tells the kernel which RX slots are free and which frames
// are back in the fill ring.
func (q *xskQueue) publishRx() {
	if q.pending == 0 {
		return
	}
	atomic.StoreUint32(q.fill.producer, q.fill.cachedProd)
	atomic.StoreUint32(q.rx.consumer, q.rx.cachedCons)
	q.pending = 0
}

// reclaim takes the frames the kernel has finished sending back into the
// free pool.
func (q *xskQueue) reclaim() {
	c := &q.comp
	prod := atomic.LoadUint32(c.producer)
	if prod == c.cachedCons {
		return
	}
	for c.cachedCons != prod {
		q.free = append(q.free, q.compAddrs[c.cachedCons&c.mask]&q.chunkMask)
		c.cachedCons++
	}
	atomic.StoreUint32(c.consumer, c.cachedCons)
}

// send copies frames into TX frames, publishes them and kicks the kernel
// once for the whole batch. It returns how many went into the TX ring.
func (q *xskQueue) send(frames [][]byte) int {
	q.reclaim()
	t := &q.tx
	n := 0
	for _, f := range frames {
		// A frame longer than a chunk goes in pieces (multi-buffer), each
		// but the last marked XDP_PKT_CONTD.
		pieces := (len(f) + q.chunk - 1) / q.chunk
		if len(q.free) < pieces {
			break
		}
		if t.size-(t.cachedProd-t.cachedCons) < uint32(pieces) {
			t.cachedCons = atomic.LoadUint32(t.consumer)
			if t.size-(t.cachedProd-t.cachedCons) < uint32(pieces) {
				break
			}
		}
		for off := 0; off < len(f); off += q.chunk {
			a := q.free[len(q.free)-1]
			q.free = q.free[:len(q.free)-1]
			end := min(off+q.chunk, len(f))
			copy(q.umem[a:], f[off:end])
			d := unix.XDPDesc{Addr: a, Len: uint32(end - off)}
			if end < len(f) {
				d.Options = unix.XDP_PKT_CONTD
			}
			q.txDescs[t.cachedProd&t.mask] = d
			t.cachedProd++
		}
		n++
	}
	if n > 0 {
		atomic.StoreUint32(t.producer, t.cachedProd)
	}
	q.kick()
	return n
}

// kick makes the kernel transmit what is in the TX ring. With need_wakeup
// the kernel says when it needs the system call (in copy mode, always);
// a kick sends at most the socket's budget, so it repeats while the
// kernel makes progress. Whatever it leaves goes with the next kick.
func (q *xskQueue) kick() {
	t := &q.tx
	for i := 0; i < xskKicks; i++ {
		cons := atomic.LoadUint32(t.consumer)
		if cons == t.cachedProd || atomic.LoadUint32(t.flags)&unix.XDP_RING_NEED_WAKEUP == 0 {
			return
		}
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(q.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		if e != 0 && e != unix.EAGAIN && e != unix.EBUSY && e != unix.EINTR && e != unix.ENOBUFS {
			return
		}
		if atomic.LoadUint32(t.consumer) == cons && e != unix.EINTR {
			return // no progress: the device is busy
		}
	}
}

func (q *xskQueue) stats() unix.XDPStatistics {
	var st unix.XDPStatistics
	l := uint32(unsafe.Sizeof(st))
	_ = getsockopt(q.fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), &l)
	return st
}

func (q *xskQueue) close() {
	for _, r := range []*ring{&q.fill, &q.comp, &q.rx, &q.tx} {
		if r.mem != nil {
			_ = unix.Munmap(r.mem)
			r.mem = nil
		}
	}
	if q.fd >= 0 {
		_ = unix.Close(q.fd)
		q.fd = -1
	}
	if q.umem != nil {
		_ = unix.Munmap(q.umem)
		q.umem = nil
	}
}

// syncClock measures CLOCK_REALTIME minus CLOCK_MONOTONIC.
func (p *xskPort) syncClock() {
	var r, m unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m)
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r)
	p.monoToReal = r.Nano() - m.Nano()
	p.sinceSync = 0
}

func (p *xskPort) next() (rxFrame, bool) {
	for range p.queues {
		q := p.queues[p.cur]
		if d, ok := q.peekRx(); ok {
			f := rxFrame{data: q.umem[d.Addr : d.Addr+uint64(d.Len) : d.Addr+uint64(d.Len)], wireLen: int(d.Len)}
			n := 1
			if d.Options&unix.XDP_PKT_CONTD != 0 {
				if f, n, ok = p.gather(q, f); !ok {
					return rxFrame{}, false
				}
			}
			p.held, p.heldA, p.heldN = q, d.Addr, n
			if d.Addr&^q.chunkMask >= xdpMetaLen {
				if ts := *(*int64)(unsafe.Pointer(&q.umem[d.Addr-xdpMetaLen])); ts > 0 {
					f.tsNs = ts + p.monoToReal
				}
			}
			return f, true
		}
		q.publishRx()
		if p.cur++; p.cur == len(p.queues) {
			p.cur = 0
		}
	}
	return rxFrame{}, false
}

// gather copies a frame that arrived in several chunks into p.scratch;
// first is its first piece. It returns the frame and how many descriptors
// it took, or ok=false if the kernel has not produced them all yet (it
// publishes a frame's pieces together, so this is not expected). A frame
// longer than the scratch (never, with the port's MTU) is reported
// truncated: wireLen beyond data, which the receive path counts and drops.
func (p *xskPort) gather(q *xskQueue, first rxFrame) (rxFrame, int, bool) {
	buf := p.scratch
	if buf == nil {
		buf = make([]byte, xdpMetaLen+MaxFrame) // a port opened without multi-buffer never gets here
		p.scratch = buf
	}
	n := copy(buf, first.data)
	total := len(first.data)
	for i := uint32(1); ; i++ {
		d, ok := q.rxDescAt(i)
		if !ok {
			return rxFrame{}, 0, false
		}
		n += copy(buf[n:], q.umem[d.Addr:d.Addr+uint64(d.Len)])
		total += int(d.Len)
		if d.Options&unix.XDP_PKT_CONTD == 0 {
			return rxFrame{data: buf[:n:n], wireLen: total}, int(i) + 1, true
		}
	}
}

func (p *xskPort) release() {
	q := p.held
	if q == nil {
		return
	}
	// Clear the stamp: a frame the program could not stamp must not
	// inherit the previous one's.
	if p.heldA&^q.chunkMask >= xdpMetaLen {
		*(*int64)(unsafe.Pointer(&q.umem[p.heldA-xdpMetaLen])) = 0
	}
	q.releaseRx(p.heldN)
	p.held = nil
	if p.sinceSync++; p.sinceSync >= 1<<16 {
		p.syncClock() // NTP slews REALTIME against MONOTONIC
	}
}

func (p *xskPort) wait(timeoutMs int) error {
	for _, q := range p.queues {
		q.publishRx()
	}
	for i := range p.pfd {
		p.pfd[i].Revents = 0
	}
	_, err := unix.Poll(p.pfd, timeoutMs)
	if err != nil && err != unix.EINTR {
		return err
	}
	if p.pfd[len(p.pfd)-1].Revents != 0 {
		return errWoken
	}
	for _, pf := range p.pfd[:len(p.pfd)-1] {
		if pf.Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
			return fmt.Errorf("%s: poll error on AF_XDP socket (interface gone?)", p.name)
		}
	}
	p.syncClock()
	return nil
}

func (p *xskPort) wakeUp() {
	var one = [8]byte{1}
	_, _ = unix.Write(p.wake, one[:])
}

// send transmits on the first queue's socket (one TX ring per port keeps
// the frames of a port in order).
func (p *xskPort) send(frames [][]byte) (int, error) {
	n := p.queues[0].send(frames)
	if n < len(frames) {
		return n, unix.ENOBUFS
	}
	return n, nil
}

func (p *xskPort) sendable(n int) bool { return n >= p.minTx && n <= p.maxTx }

// rxDrops sums what the kernel could not deliver on every queue (no fill
// frame, RX ring full): XDP_STATISTICS counts since the socket opened.
func (p *xskPort) rxDrops() uint64 {
	var total uint64
	for _, q := range p.queues {
		st := q.stats()
		total += st.Rx_dropped + st.Rx_ring_full
	}
	d := total - p.lastDrops
	p.lastDrops = total
	return d
}

func (p *xskPort) kind() string {
	if p.steer == nil || p.steer.lnk == nil {
		return "afxdp"
	}
	return "afxdp/" + p.steer.mode.String()
}

// close detaches the program before closing the sockets, so that no frame
// is redirected to a socket that is going away.
func (p *xskPort) close() {
	if p.steer != nil {
		p.steer.close()
		p.steer = nil
	}
	for _, q := range p.queues {
		q.close()
	}
	p.queues = nil
	if p.wake >= 0 {
		_ = unix.Close(p.wake)
		p.wake = -1
	}
}
