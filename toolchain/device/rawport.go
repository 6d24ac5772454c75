package device

import "fmt"

// RawPort exposes the device's socket layer (receive ring, batched send)
// without a pipeline. The benchmark's traffic generator, sink and reference
// reflector use it, so that "the I/O limit" is measured with exactly the
// I/O the switch uses.
type RawPort struct{ s portIO }

// RawPortConfig configures OpenRawPort.
type RawPortConfig struct {
	Ring      RingVersion
	RingBytes int
	// SeeOwn keeps frames this socket sends visible to its ring (false for
	// every real use).
	SeeOwn bool
	// Tx is the transmit path (default TxRing, as the switch's).
	Tx TxMode
	// IO is AF_PACKET (default) or AF_XDP (native XDP, else generic);
	// IOAuto falls back as the switch's ports do.
	IO IOMode
	// NoSteering opens an AF_XDP port for transmitting only: no XDP
	// program, so the interface's received frames go to the stack.
	NoSteering bool
}

// OpenRawPort opens iface (in the caller's network namespace).
func OpenRawPort(iface string, cfg RawPortConfig) (*RawPort, error) {
	if cfg.Ring == 0 {
		cfg.Ring = RingV2
	}
	mtu := interfaceMTU(iface)
	if mtu > 9000 {
		mtu = 9000
	}
	if cfg.IO != IOAFPacket && cfg.NoSteering {
		s, err := openXSKPort(iface, xskConfig{MaxFrame: mtu + 18, RingBytes: cfg.RingBytes, NoSteering: true})
		if err != nil {
			return nil, fmt.Errorf("%s: AF_XDP: %w", iface, err)
		}
		return &RawPort{s: s}, nil
	}
	s, err := openPortIO(iface, portOpenConfig{IO: cfg.IO, Ring: cfg.Ring, RingBytes: cfg.RingBytes, MaxFrame: mtu + 18, TxBatch: 64, IgnoreOutgoing: !cfg.SeeOwn, Tx: cfg.Tx})
	if err != nil {
		return nil, err
	}
	return &RawPort{s: s}, nil
}

// Next returns the next received frame and its kernel timestamp (ns,
// CLOCK_REALTIME); the frame is valid until Release.
func (p *RawPort) Next() (frame []byte, tsNs int64, ok bool) {
	f, ok := p.s.next()
	return f.data, f.tsNs, ok
}

// Release returns the frame from Next to the kernel.
func (p *RawPort) Release() { p.s.release() }

// Send transmits frames (one system call per batch); it returns how many
// the kernel took, a prefix of frames. Frames the interface cannot carry
// (see Sendable) must be left out.
func (p *RawPort) Send(frames [][]byte) (int, error) { return p.s.send(frames) }

// Sendable reports whether the interface carries an n-byte frame.
func (p *RawPort) Sendable(n int) bool { return p.s.sendable(n) }

// TxRing reports whether sends go through a PACKET_TX_RING.
func (p *RawPort) TxRing() bool {
	s, ok := p.s.(*afPacketSocket)
	return ok && s.tx != nil
}

// IO names the port's I/O: afpacket, afxdp/native, afxdp/generic.
func (p *RawPort) IO() string { return p.s.kind() }

// Wait blocks until a frame is ready or timeoutMs passes; it returns false
// when woken by Close.
func (p *RawPort) Wait(timeoutMs int) bool { return p.s.wait(timeoutMs) == nil }

// Wake makes a blocked Wait return false.
func (p *RawPort) Wake() { p.s.wakeUp() }

// RingDrops returns frames the kernel dropped for want of ring space since
// the last call.
func (p *RawPort) RingDrops() uint64 { return p.s.rxDrops() }

// Close releases the socket.
func (p *RawPort) Close() { p.s.close() }
