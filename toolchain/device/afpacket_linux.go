package device

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RingVersion selects the PACKET_MMAP receive ring layout.
type RingVersion int

const (
	// RingV2 hands each frame to user space as soon as the kernel writes it.
	// It is the default because TPACKET_V3 only wakes the reader when a
	// block retires (full, or after the 1 ms minimum block timeout), which
	// adds up to a millisecond of latency at low rates (TestRingVersions
	// shows it); V2 reads in batches all the same when frames queue up.
	RingV2 RingVersion = 2
	// RingV3 packs variable-size frames into blocks; cheaper on memory for
	// jumbo-MTU ports, slower to deliver at low rates.
	RingV3 RingVersion = 3
)

// DefaultRingBytes is a port's receive ring unless configured: 16 MiB,
// ~10,000 slots for a 1500-byte MTU, 50 ms of 64-byte frames at 200,000/s.
// The ring is what absorbs a forwarding thread's descheduling on a busy
// machine; with 4 MiB the benchmark's zero-loss rates were 20-30% lower
// (docs/performance.md).
const DefaultRingBytes = 16 << 20

// frameHeadroom is the space reserved in front of every received frame so
// that a pipeline can push headers without moving the payload.
const frameHeadroom = 128

// MaxFrame is the largest frame the device handles (9000-byte MTU plus the
// Ethernet header and one VLAN tag), as the seeds' FDDI stand-in needs.
const MaxFrame = 9000 + 14 + 4

// afPacketSocket is one AF_PACKET socket bound to one interface: a mmap'ed
// receive ring and batched transmission with sendmmsg.
type afPacketSocket struct {
	fd      int
	ifindex int
	name    string
	version RingVersion

	ring []byte // the whole mmap'ed rx ring

	// V2 layout: frames of frameSize bytes, frameNr of them.
	frameSize int
	frameNr   int
	frameIdx  int

	// V3 layout: blocks of blockSize bytes.
	blockSize int
	blockNr   int
	blockIdx  int
	// position inside the block being consumed (V3).
	curBlock   []byte
	curLeft    int
	curOffset  int
	curPending bool

	// wake is an eventfd that makes a blocked poll return at shutdown.
	wake int
	pfd  [2]unix.PollFd

	// tx is the transmit ring; nil: sendmmsg batches.
	tx *txRing
	// maxTx is the longest frame the interface carries (MTU + Ethernet
	// header + one VLAN tag), minTx the shortest (its link-layer header).
	maxTx, minTx int

	// sendmmsg batch, preallocated so the send path does not allocate.
	msgs []unix.Mmsghdr
	iovs []unix.Iovec

	snapTruncated atomic.Uint64 // frames the ring cut short
}

// socketConfig gives the ring geometry.
type socketConfig struct {
	Version   RingVersion
	RingBytes int // total rx ring size
	MaxFrame  int // largest frame expected (MTU + L2 header)
	TxBatch   int
	// IgnoreOutgoing is false only for the bench reflector on a shared
	// interface; the switch never wants to see its own transmissions.
	IgnoreOutgoing bool
	// Tx selects how frames are sent (default TxRing).
	Tx TxMode
}

// TxMode selects the transmit path.
type TxMode int

const (
	// TxRing copies each batch into a PACKET_TX_RING and sends it with one
	// send(2) (falls back to TxSendmmsg where the kernel refuses the ring).
	TxRing TxMode = iota
	// TxSendmmsg sends each batch with one sendmmsg(2) from the frames'
	// own buffers.
	TxSendmmsg
)

// ParseTxMode parses "ring" or "sendmmsg".
func ParseTxMode(s string) (TxMode, error) {
	switch s {
	case "ring", "":
		return TxRing, nil
	case "sendmmsg", "mmsg":
		return TxSendmmsg, nil
	}
	return 0, fmt.Errorf("transmit mode %q: want ring or sendmmsg", s)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openAFPacket opens, configures and binds the socket for iface.
func openAFPacket(iface string, cfg socketConfig) (*afPacketSocket, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket for %s: %w (needs root or CAP_NET_RAW)", iface, err)
	}
	s := &afPacketSocket{fd: fd, ifindex: ifi.Index, name: iface, version: cfg.Version, wake: -1}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if cfg.IgnoreOutgoing {
		// Without this the ring would also carry every frame we send.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return nil, fmt.Errorf("%s: PACKET_IGNORE_OUTGOING: %w", iface, err)
		}
	}
	// Frames we send skip the qdisc: the traffic manager already queues and
	// paces, a second queue would only add latency.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, int(versionConst(cfg.Version))); err != nil {
		return nil, fmt.Errorf("%s: PACKET_VERSION: %w", iface, err)
	}
	if err := s.setupRing(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", iface, err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return nil, fmt.Errorf("%s: promiscuous mode: %w", iface, err)
	}
	sll := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
	if err := unix.Bind(fd, &sll); err != nil {
		return nil, fmt.Errorf("%s: bind: %w", iface, err)
	}
	s.wake, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	s.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	s.pfd[1] = unix.PollFd{Fd: int32(s.wake), Events: unix.POLLIN}
	s.maxTx = cfg.MaxFrame
	if s.maxTx <= 0 || s.maxTx > MaxFrame {
		s.maxTx = MaxFrame
	}
	s.minTx = linkHeaderLen(fd, iface)
	if cfg.Tx == TxRing {
		// Best effort: without the ring, sendmmsg does the same job slower.
		if tx, err := openTxRing(ifi.Index, s.maxTx); err == nil {
			s.tx = tx
		}
	}
	batch := cfg.TxBatch
	if batch <= 0 {
		batch = 64
	}
	s.msgs = make([]unix.Mmsghdr, batch)
	s.iovs = make([]unix.Iovec, batch)
	for i := range s.msgs {
		s.msgs[i].Hdr.Iov = &s.iovs[i]
		s.msgs[i].Hdr.Iovlen = 1
	}
	ok = true
	return s, nil
}

func versionConst(v RingVersion) int {
	if v == RingV3 {
		return unix.TPACKET_V3
	}
	return unix.TPACKET_V2
}

func roundUp(v, to int) int { return (v + to - 1) / to * to }

func (s *afPacketSocket) setupRing(cfg socketConfig) error {
	maxFrame := cfg.MaxFrame
	if maxFrame <= 0 || maxFrame > MaxFrame {
		maxFrame = MaxFrame
	}
	ringBytes := cfg.RingBytes
	if ringBytes <= 0 {
		ringBytes = DefaultRingBytes
	}
	page := unix.Getpagesize()
	switch cfg.Version {
	case RingV3:
		// A block must hold the largest frame with its headers.
		bs := page
		for bs < maxFrame+256 {
			bs <<= 1
		}
		if bs < 1<<16 {
			bs = 1 << 16
		}
		nr := ringBytes / bs
		if nr < 4 {
			nr = 4
		}
		req := unix.TpacketReq3{
			Block_size: uint32(bs), Block_nr: uint32(nr),
			Frame_size: 2048, Frame_nr: uint32(bs / 2048 * nr),
			Retire_blk_tov: 1, // ms: the smallest the kernel accepts
		}
		if err := unix.SetsockoptTpacketReq3(s.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return fmt.Errorf("PACKET_RX_RING (v3): %w", err)
		}
		s.blockSize, s.blockNr = bs, nr
	default:
		hdr := roundUp(unix.SizeofTpacket2Hdr, unix.TPACKET_ALIGNMENT) + unix.SizeofSockaddrLinklayer
		fs := roundUp(hdr+16+maxFrame, unix.TPACKET_ALIGNMENT)
		// Frames never straddle blocks; pick a block that wastes little.
		bs := page
		for bs < fs || bs%fs > bs/8 {
			bs += page
			if bs > 1<<20 {
				break
			}
		}
		perBlock := bs / fs
		nr := ringBytes / bs
		if nr < 2 {
			nr = 2
		}
		req := unix.TpacketReq{Block_size: uint32(bs), Block_nr: uint32(nr), Frame_size: uint32(fs), Frame_nr: uint32(perBlock * nr)}
		if err := unix.SetsockoptTpacketReq(s.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return fmt.Errorf("PACKET_RX_RING (v2): %w", err)
		}
		s.frameSize, s.frameNr = fs, perBlock*nr
		s.blockSize, s.blockNr = bs, nr
	}
	ring, err := unix.Mmap(s.fd, 0, s.blockSize*s.blockNr, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED|unix.MAP_POPULATE)
	if err != nil {
		ring, err = unix.Mmap(s.fd, 0, s.blockSize*s.blockNr, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return fmt.Errorf("mmap rx ring: %w", err)
		}
	}
	s.ring = ring
	return nil
}

// v2FrameAt returns the frame slot i of a V2 ring. Frames are laid out
// block by block, each block holding whole frames.
func (s *afPacketSocket) v2FrameAt(i int) []byte {
	perBlock := s.blockSize / s.frameSize
	b, f := i/perBlock, i%perBlock
	off := b*s.blockSize + f*s.frameSize
	return s.ring[off : off+s.frameSize]
}

func loadStatus(p unsafe.Pointer) uint32     { return atomic.LoadUint32((*uint32)(p)) }
func storeStatus(p unsafe.Pointer, v uint32) { atomic.StoreUint32((*uint32)(p), v) }

// rxFrame describes one received frame still inside the ring.
type rxFrame struct {
	data     []byte
	wireLen  int
	outgoing bool
	tsNs     int64 // kernel receive time, CLOCK_REALTIME
}

// next returns the next ready frame, or ok=false when the ring is empty.
// The frame stays valid until release is called.
func (s *afPacketSocket) next() (f rxFrame, ok bool) {
	if s.version == RingV3 {
		return s.nextV3()
	}
	slot := s.v2FrameAt(s.frameIdx)
	hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&slot[0]))
	if loadStatus(unsafe.Pointer(&hdr.Status))&unix.TP_STATUS_USER == 0 {
		return f, false
	}
	mac, snap := int(hdr.Mac), int(hdr.Snaplen)
	if mac+snap > len(slot) {
		snap = len(slot) - mac
	}
	f.data = slot[mac : mac+snap]
	f.wireLen = int(hdr.Len)
	f.tsNs = int64(hdr.Sec)*1e9 + int64(hdr.Nsec)
	sllOff := roundUp(unix.SizeofTpacket2Hdr, unix.TPACKET_ALIGNMENT)
	f.outgoing = slot[sllOff+10] == unix.PACKET_OUTGOING // sockaddr_ll.sll_pkttype
	if st := hdr.Status; st&unix.TP_STATUS_VLAN_VALID != 0 {
		tpid := uint16(0x8100)
		if st&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			tpid = hdr.Vlan_tpid
		}
		f = withVLAN(f, slot, mac, sllOff+unix.SizeofSockaddrLinklayer, tpid, hdr.Vlan_tci)
	}
	return f, true
}

// withVLAN puts back the 802.1Q tag the kernel took out of a received frame
// (it moves a tag into skb metadata on receive and reports it beside the
// frame in the ring header): the program must see the frame as it was on
// the wire. The tag goes in place, in the slot's padding in front of the
// frame (the kernel leaves at least 14 bytes after the sockaddr_ll): the
// two MAC addresses move 4 bytes down and the tag follows them.
func withVLAN(f rxFrame, slot []byte, mac, free int, tpid, tci uint16) rxFrame {
	if mac-4 < free || len(f.data) < 12 {
		return f // no room (never with the kernel's layout): leave untagged
	}
	copy(slot[mac-4:mac+8], slot[mac:mac+12])
	slot[mac+8], slot[mac+9] = byte(tpid>>8), byte(tpid)
	slot[mac+10], slot[mac+11] = byte(tci>>8), byte(tci)
	f.data = slot[mac-4 : mac+len(f.data)]
	f.wireLen += 4
	return f
}

// release hands the last frame returned by next back to the kernel.
func (s *afPacketSocket) release() {
	if s.version == RingV3 {
		s.releaseV3()
		return
	}
	slot := s.v2FrameAt(s.frameIdx)
	hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&slot[0]))
	storeStatus(unsafe.Pointer(&hdr.Status), unix.TP_STATUS_KERNEL)
	s.frameIdx++
	if s.frameIdx == s.frameNr {
		s.frameIdx = 0
	}
}

func (s *afPacketSocket) blockAt(i int) []byte {
	return s.ring[i*s.blockSize : (i+1)*s.blockSize]
}

func (s *afPacketSocket) nextV3() (f rxFrame, ok bool) {
	for {
		if s.curBlock == nil {
			blk := s.blockAt(s.blockIdx)
			bh := (*unix.TpacketHdrV1)(unsafe.Pointer(&blk[8]))
			if loadStatus(unsafe.Pointer(&bh.Block_status))&unix.TP_STATUS_USER == 0 {
				return f, false
			}
			s.curBlock = blk
			s.curLeft = int(bh.Num_pkts)
			s.curOffset = int(bh.Offset_to_first_pkt)
		}
		if s.curLeft == 0 {
			s.releaseBlock()
			continue
		}
		if s.curOffset+unix.SizeofTpacket3Hdr > len(s.curBlock) {
			s.releaseBlock()
			continue
		}
		hdr := (*unix.Tpacket3Hdr)(unsafe.Pointer(&s.curBlock[s.curOffset]))
		mac, snap := s.curOffset+int(hdr.Mac), int(hdr.Snaplen)
		if mac+snap > len(s.curBlock) {
			s.releaseBlock()
			continue
		}
		f.data = s.curBlock[mac : mac+snap]
		f.wireLen = int(hdr.Len)
		f.tsNs = int64(hdr.Sec)*1e9 + int64(hdr.Nsec)
		sllOff := s.curOffset + roundUp(unix.SizeofTpacket3Hdr, unix.TPACKET_ALIGNMENT)
		f.outgoing = s.curBlock[sllOff+10] == unix.PACKET_OUTGOING
		if st := hdr.Status; st&unix.TP_STATUS_VLAN_VALID != 0 {
			tpid := uint16(0x8100)
			if st&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
				tpid = hdr.Hv1.Vlan_tpid
			}
			f = withVLAN(f, s.curBlock, mac, sllOff+unix.SizeofSockaddrLinklayer, tpid, uint16(hdr.Hv1.Vlan_tci))
		}
		s.curPending = true
		return f, true
	}
}

func (s *afPacketSocket) releaseV3() {
	if !s.curPending {
		return
	}
	s.curPending = false
	hdr := (*unix.Tpacket3Hdr)(unsafe.Pointer(&s.curBlock[s.curOffset]))
	s.curLeft--
	if s.curLeft == 0 || hdr.Next_offset == 0 {
		s.releaseBlock()
		return
	}
	s.curOffset += int(hdr.Next_offset)
}

func (s *afPacketSocket) releaseBlock() {
	bh := (*unix.TpacketHdrV1)(unsafe.Pointer(&s.curBlock[8]))
	storeStatus(unsafe.Pointer(&bh.Block_status), unix.TP_STATUS_KERNEL)
	s.curBlock = nil
	s.curPending = false
	s.blockIdx++
	if s.blockIdx == s.blockNr {
		s.blockIdx = 0
	}
}

// errWoken reports that wait returned because of wakeUp.
var errWoken = errors.New("woken")

// wait blocks until the ring has a frame, timeoutMs passes, or wakeUp is
// called (then it returns errWoken).
func (s *afPacketSocket) wait(timeoutMs int) error {
	s.pfd[0].Revents, s.pfd[1].Revents = 0, 0
	_, err := unix.Poll(s.pfd[:], timeoutMs)
	if err != nil && err != unix.EINTR {
		return err
	}
	if s.pfd[1].Revents != 0 {
		return errWoken
	}
	if s.pfd[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
		return fmt.Errorf("%s: poll error (interface gone?)", s.name)
	}
	return nil
}

func (s *afPacketSocket) wakeUp() {
	var one = [8]byte{1}
	_, _ = unix.Write(s.wake, one[:])
}

// send transmits frames with the TX ring, or in one sendmmsg call (or a
// few, if the kernel accepts only part of the batch). It returns how many
// were sent, a prefix of frames. Every frame must be minTx..maxTx bytes
// (sendable reports it).
func (s *afPacketSocket) send(frames [][]byte) (int, error) {
	if s.tx != nil {
		return s.tx.send(frames)
	}
	sent := 0
	for sent < len(frames) {
		n := len(frames) - sent
		if n > len(s.msgs) {
			n = len(s.msgs)
		}
		for i := 0; i < n; i++ {
			fr := frames[sent+i]
			s.iovs[i].Base = &fr[0]
			s.iovs[i].Len = uint64(len(fr))
		}
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msgs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
		if e != 0 {
			if e == unix.EINTR {
				continue
			}
			return sent, e
		}
		if r == 0 {
			return sent, unix.EAGAIN
		}
		sent += int(r)
	}
	return sent, nil
}

// sendable reports whether the interface can carry an n-byte frame: at most
// the MTU plus header and one VLAN tag, and at least its link-layer header
// (14 bytes on Ethernet, where the kernel refuses shorter frames; any
// length on a TUN device, as the STF corpus's short frames need).
func (s *afPacketSocket) sendable(n int) bool { return n >= s.minTx && n > 0 && n <= s.maxTx }

func (s *afPacketSocket) close() {
	if s.tx != nil {
		s.tx.close()
		s.tx = nil
	}
	if s.ring != nil {
		_ = unix.Munmap(s.ring)
		s.ring = nil
	}
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
	if s.wake >= 0 {
		_ = unix.Close(s.wake)
		s.wake = -1
	}
}

// rxDrops is the kernel's ring-overflow count since the last call
// (PACKET_STATISTICS resets on read).
func (s *afPacketSocket) rxDrops() uint64 {
	var st unix.TpacketStatsV3
	l := uint32(unix.SizeofTpacketStatsV3)
	if s.version == RingV2 {
		l = unix.SizeofTpacketStats
	}
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_PACKET, unix.PACKET_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0
	}
	return uint64(st.Drops)
}

func (s *afPacketSocket) kind() string { return "afpacket" }

// linkHeaderLen is the link-layer header the kernel insists a frame sent on
// iface carries: 14 bytes on Ethernet (including veths), none on devices
// without one (TUN). Unknown: Ethernet's.
func linkHeaderLen(fd int, iface string) int {
	ifr, err := unix.NewIfreq(iface)
	if err != nil {
		return 14
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return 14
	}
	if ifr.Uint16() == unix.ARPHRD_ETHER {
		return 14
	}
	return 1
}

// interfaceMTU returns the MTU of iface (for sizing the ring).
func interfaceMTU(iface string) int {
	ifi, err := net.InterfaceByName(iface)
	if err != nil || ifi.MTU <= 0 {
		return 1500
	}
	return ifi.MTU
}
