package device

import (
	"fmt"
	"log/slog"
)

// IOMode selects how a port moves frames between the interface and the
// device.
type IOMode int

const (
	// IOAFPacket is an AF_PACKET socket with PACKET_MMAP rings (the zero
	// value, so a Config without IO keeps the device's original I/O).
	IOAFPacket IOMode = iota
	// IOAFXDP is an AF_XDP socket per receive queue, fed by an XDP program
	// attached to the interface (native mode, else generic); a port that
	// cannot have it fails to open.
	IOAFXDP
	// IOAuto tries AF_XDP in native XDP mode, then in generic (skb) mode,
	// then AF_PACKET, per port, and logs what it got and why.
	IOAuto
)

// ParseIOMode parses the --io flag: afxdp, afpacket or auto.
func ParseIOMode(s string) (IOMode, error) {
	switch s {
	case "afpacket", "af_packet":
		return IOAFPacket, nil
	case "afxdp", "af_xdp", "xdp":
		return IOAFXDP, nil
	case "auto", "":
		return IOAuto, nil
	}
	return 0, fmt.Errorf("--io %q: want afxdp, afpacket or auto", s)
}

func (m IOMode) String() string {
	switch m {
	case IOAFXDP:
		return "afxdp"
	case IOAuto:
		return "auto"
	}
	return "afpacket"
}

// portIO is one port's packet I/O. The receive side (next, release, wait)
// belongs to the port's receive goroutine; send is called with the egress
// port's lock held, so each side has one user at a time.
type portIO interface {
	// next returns the next received frame, valid until release.
	next() (rxFrame, bool)
	// release hands the frame from next back to the kernel.
	release()
	// wait blocks until a frame is ready, timeoutMs passes, or wakeUp
	// (then errWoken).
	wait(timeoutMs int) error
	wakeUp()
	// send transmits frames and returns how many the kernel took, a
	// prefix of frames; each must be sendable.
	send(frames [][]byte) (int, error)
	sendable(n int) bool
	// rxDrops is how many frames the kernel dropped for want of receive
	// buffers since the previous call.
	rxDrops() uint64
	// kind names the I/O for logs and metrics: afpacket, afxdp/native,
	// afxdp/generic.
	kind() string
	close()
}

// portOpenConfig is what opening a port's I/O needs besides its interface.
type portOpenConfig struct {
	IO        IOMode
	Ring      RingVersion
	RingBytes int
	MaxFrame  int
	TxBatch   int
	Tx        TxMode
	// IgnoreOutgoing: AF_PACKET only (XDP never sees transmitted frames).
	IgnoreOutgoing bool
	Log            *slog.Logger
	// xdpModes overrides the XDP attach modes tried (tests force a
	// failing mode with it); nil: native, then generic.
	xdpModes []xdpMode
}

// openPortIO opens iface's I/O as cfg.IO asks. With IOAuto every AF_XDP
// failure is logged with its reason and the next option is tried, ending
// with AF_PACKET, which the device had before AF_XDP and which works on
// any interface.
func openPortIO(iface string, cfg portOpenConfig) (portIO, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	afpacket := func() (portIO, error) {
		s, err := openAFPacket(iface, socketConfig{
			Version: cfg.Ring, RingBytes: cfg.RingBytes, MaxFrame: cfg.MaxFrame,
			TxBatch: cfg.TxBatch, IgnoreOutgoing: cfg.IgnoreOutgoing, Tx: cfg.Tx,
		})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if cfg.IO == IOAFPacket {
		return afpacket()
	}
	p, err := openXSKPort(iface, xskConfig{MaxFrame: cfg.MaxFrame, RingBytes: cfg.RingBytes, Modes: cfg.xdpModes, Log: log})
	if err == nil {
		log.Info("port I/O", "iface", iface, "io", p.kind(), "queues", len(p.queues), "why", p.why)
		return p, nil
	}
	if cfg.IO == IOAFXDP {
		return nil, fmt.Errorf("%s: AF_XDP: %w", iface, err)
	}
	s, perr := afpacket()
	if perr != nil {
		return nil, perr
	}
	log.Info("port I/O", "iface", iface, "io", "afpacket", "why", "AF_XDP unavailable: "+err.Error())
	return s, nil
}
