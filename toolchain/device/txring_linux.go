package device

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// txRing is a PACKET_TX_RING (TPACKET_V2) on a transmit-only AF_PACKET
// socket: a batch of frames is copied into ring slots and handed to the
// kernel with one send(2), which builds and transmits every marked slot.
// Measured against sendmmsg it saves the per-message work (msghdr and iovec
// copies, per-call checks) of the kernel's transmit path; see
// docs/performance.md.
//
// Every frame is copied into the skb's linear area (the virtio-net header's
// hdr_len covers the whole frame). Without that the kernel would attach the
// ring page to the skb (zero copy) and mark the slot free as soon as the
// skb is orphaned — which a veth crossing network namespaces, as Mininet's
// do, does at transmit — so a frame still waiting in the peer's backlog or
// in a host socket's receive queue would change under it when the slot is
// reused.
type txRing struct {
	fd        int
	ring      []byte
	frameSize int
	perBlock  int
	blockSize int
	frameNr   int
	idx       int // next slot to fill; equals the kernel's head between sends
	maxLen    int // largest frame the interface takes (MTU + L2 header + tag)
}

const (
	// txDataOff is where a V2 TX frame's data starts in its slot without
	// PACKET_TX_HAS_OFF: TPACKET2_HDRLEN - sizeof(struct sockaddr_ll).
	txDataOff = (unix.SizeofTpacket2Hdr + unix.TPACKET_ALIGNMENT - 1) &^ (unix.TPACKET_ALIGNMENT - 1)
	// vnetHdrLen is struct virtio_net_hdr, in front of every frame.
	vnetHdrLen = 10
	// txSlots is the ring's length in frames. Slots are busy while their
	// skb is in flight (a veth in one namespace frees it only after the peer
	// has received it), so the ring holds several batches.
	txSlots = 512
)

// openTxRing opens a transmit-only socket on ifindex (protocol 0: it
// receives nothing) with a TX ring for frames up to maxLen bytes.
func openTxRing(ifindex int, maxLen int) (*txRing, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	t := &txRing{fd: fd, maxLen: maxLen}
	ok := false
	defer func() {
		if !ok {
			t.close()
		}
	}()
	for _, o := range []struct {
		name string
		opt  int
	}{
		{"PACKET_VNET_HDR", unix.PACKET_VNET_HDR},
		{"PACKET_QDISC_BYPASS", unix.PACKET_QDISC_BYPASS},
		// A frame the kernel finds malformed is skipped (and its slot
		// freed) instead of stopping the ring.
		{"PACKET_LOSS", unix.PACKET_LOSS},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, 1); err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION: %w", err)
	}
	// In-flight skbs count against the send buffer; the default (~200 KB)
	// would cap a batch of small frames well below the ring's length.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	fs := roundUp(txDataOff+vnetHdrLen+maxLen, unix.TPACKET_ALIGNMENT)
	page := unix.Getpagesize()
	bs := page
	for bs < fs || bs%fs > bs/8 {
		bs += page
		if bs > 1<<20 {
			break
		}
	}
	perBlock := bs / fs
	nr := (txSlots + perBlock - 1) / perBlock
	req := unix.TpacketReq{Block_size: uint32(bs), Block_nr: uint32(nr), Frame_size: uint32(fs), Frame_nr: uint32(perBlock * nr)}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_TX_RING: %w", err)
	}
	ring, err := unix.Mmap(fd, 0, bs*nr, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED|unix.MAP_POPULATE)
	if err != nil {
		ring, err = unix.Mmap(fd, 0, bs*nr, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("mmap tx ring: %w", err)
		}
	}
	t.ring, t.frameSize, t.perBlock, t.blockSize, t.frameNr = ring, fs, perBlock, bs, perBlock*nr
	sll := unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifindex}
	if err := unix.Bind(fd, &sll); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	ok = true
	return t, nil
}

func (t *txRing) slot(i int) []byte {
	off := (i/t.perBlock)*t.blockSize + (i%t.perBlock)*t.frameSize
	return t.ring[off : off+t.frameSize]
}

// send queues frames in the ring and transmits them with one send(2). It
// returns how many the kernel took, always a prefix of frames; the others
// (ring full of frames still in flight, the kernel out of buffers) are
// dropped by the caller, as a full transmit queue drops.
func (t *txRing) send(frames [][]byte) (int, error) {
	start, queued := t.idx, 0
	for _, fr := range frames {
		if len(fr) == 0 || len(fr) > t.maxLen {
			break // the kernel would refuse it (callers filter these out)
		}
		s := t.slot(t.idx)
		hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&s[0]))
		if loadStatus(unsafe.Pointer(&hdr.Status)) != unix.TP_STATUS_AVAILABLE {
			break // every slot is busy with frames in flight
		}
		v := s[txDataOff : txDataOff+vnetHdrLen]
		// virtio_net_hdr: no checksum or GSO work; hdr_len (little
		// endian) = the whole frame, so the kernel copies it all.
		clear(v)
		v[2], v[3] = byte(len(fr)), byte(len(fr)>>8)
		copy(s[txDataOff+vnetHdrLen:], fr)
		hdr.Len = uint32(vnetHdrLen + len(fr))
		storeStatus(unsafe.Pointer(&hdr.Status), unix.TP_STATUS_SEND_REQUEST)
		queued++
		if t.idx++; t.idx == t.frameNr {
			t.idx = 0
		}
	}
	if queued == 0 {
		return 0, unix.ENOBUFS
	}
	var errno unix.Errno
	for {
		_, _, errno = unix.Syscall6(unix.SYS_SENDTO, uintptr(t.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		if errno != unix.EINTR {
			break
		}
	}
	// The kernel sends marked slots in order from its head and stops at
	// the first it cannot; whatever it left marked is taken back, and the
	// next batch starts there, where its head stays.
	sent := queued
	for i, j := 0, start; i < queued; i++ {
		s := t.slot(j)
		hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&s[0]))
		if loadStatus(unsafe.Pointer(&hdr.Status)) == unix.TP_STATUS_SEND_REQUEST {
			sent = i
			t.idx = j
			for ; i < queued; i++ {
				storeStatus(unsafe.Pointer(&(*unix.Tpacket2Hdr)(unsafe.Pointer(&t.slot(j)[0])).Status), unix.TP_STATUS_AVAILABLE)
				if j++; j == t.frameNr {
					j = 0
				}
			}
			break
		}
		if j++; j == t.frameNr {
			j = 0
		}
	}
	if sent < queued && errno != 0 {
		return sent, errno
	}
	if sent < len(frames) {
		return sent, unix.ENOBUFS
	}
	return sent, nil
}

func (t *txRing) close() {
	if t.ring != nil {
		_ = unix.Munmap(t.ring)
		t.ring = nil
	}
	if t.fd >= 0 {
		_ = unix.Close(t.fd)
		t.fd = -1
	}
}
