package device

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// xdpAttached reports how iface's XDP hook is used, as iproute2 shows it:
// "xdp" (native), "xdpgeneric", or "" (nothing attached).
func (tn *testNet) xdpAttached(t *testing.T, iface string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", tn.name, "-d", "link", "show", "dev", iface).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show %s: %v\n%s", iface, err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		switch f {
		case "xdp", "xdpgeneric", "xdpdrv":
			return f
		}
	}
	return ""
}

// TestAFXDPForwarding forwards frames both ways over AF_XDP ports, with the
// steering program in each XDP mode, and checks the program is detached
// when the device stops.
func TestAFXDPForwarding(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mtu      int
		modes    []xdpMode
		wantIO   string
		wantHook string
	}{
		{"native", 1500, []xdpMode{xdpNative}, "afxdp/native", "xdp"},
		{"generic", 1500, []xdpMode{xdpGeneric}, "afxdp/generic", "xdpgeneric"},
		// Frames larger than a UMEM chunk travel in pieces (multi-buffer).
		{"native jumbo", 9000, []xdpMode{xdpNative}, "afxdp/native", "xdp"},
		{"generic jumbo", 9000, []xdpMode{xdpGeneric}, "afxdp/generic", "xdpgeneric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNet(t, 2, tc.mtu)
			d := tn.newDevice(t, Config{IO: IOAFXDP, xdpModes: tc.modes})
			d.SetPipeline(crossConnect(2))
			h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			defer cancel()
			for _, p := range d.Stats().Ports {
				if p.IO != tc.wantIO {
					t.Errorf("port %d: I/O %q, want %q", p.Port, p.IO, tc.wantIO)
				}
			}
			var sb strings.Builder
			if err := d.WriteMetrics(&sb); err != nil {
				t.Fatal(err)
			}
			if want := `terrapin_port_io_info{port="1",iface="sw1",io="` + tc.wantIO + `"} 1`; !strings.Contains(sb.String(), want) {
				t.Errorf("metrics lack %s", want)
			}
			if got := tn.xdpAttached(t, tn.sw(1)); got != tc.wantHook {
				t.Errorf("while running: XDP hook %q, want %q", got, tc.wantHook)
			}
			sizes := []int{60, 1514}
			if tc.mtu > 1500 {
				sizes = []int{60, 4518, tc.mtu + 14}
			}
			type send struct {
				from, to *hostSock
				size     int
			}
			var sends []send
			for _, n := range sizes {
				sends = append(sends, send{h1, h2, n}, send{h2, h1, n})
			}
			for i, c := range sends {
				f := testFrame(c.size, uint32(i), 0)
				c.from.send(t, f)
				got, _ := c.to.recv(t, 2*time.Second)
				if !bytes.Equal(got, f) {
					t.Fatalf("frame %d (%d bytes): got %d bytes back, want it unchanged", i, c.size, len(got))
				}
			}
			// The transmitting thread counts a frame after sendto returns,
			// which can be after the host has it.
			n := uint64(len(sizes))
			counted := func() bool {
				for _, p := range d.Stats().Ports {
					if p.RxPackets != n || p.TxPackets != n || p.TxErrors != 0 {
						return false
					}
				}
				return true
			}
			deadline := time.Now().Add(2 * time.Second)
			for !counted() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			for _, p := range d.Stats().Ports {
				if p.RxPackets != n || p.TxPackets != n || p.TxErrors != 0 {
					t.Errorf("port %d: rx %d tx %d tx_errors %d, want %d %d 0", p.Port, p.RxPackets, p.TxPackets, p.TxErrors, n, n)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("device did not stop")
			}
			for i := 1; i <= 2; i++ {
				if got := tn.xdpAttached(t, tn.sw(i)); got != "" {
					t.Errorf("after stop: %s still has an XDP program (%s)", tn.sw(i), got)
				}
			}
		})
	}
}

// passProgram attaches an XDP program that passes everything to iface in
// generic mode, as another tool owning the interface's XDP hook would.
func passProgram(t *testing.T, tn *testNet, iface string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	tn.do(t, func() error {
		idx, err := ifIndex(iface)
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: idx, Flags: link.XDPGenericMode})
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		return nil
	})
}

// addTun adds a TUN device (IP packets, no link-layer header) trpttun0.
func addTun(t *testing.T, tn *testNet) {
	run(t, "ip", "-n", tn.name, "tuntap", "add", "dev", "trpttun0", "mode", "tun")
	run(t, "ip", "-n", tn.name, "link", "set", "trpttun0", "up")
}

// TestIOAuto checks what --io auto settles on for devices that offer
// native XDP, only generic XDP, or no usable XDP at all (no Ethernet
// header; the XDP hook held by another program), and that --io afxdp
// refuses the last kind instead of falling back.
func TestIOAuto(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mtu    int
		iface  string // default sw1
		setup  func(t *testing.T, tn *testNet)
		io     IOMode
		want   string // the port's I/O; "" = New must fail
		errHas string
	}{
		{name: "veth: native XDP", mtu: 1500, io: IOAuto, want: "afxdp/native"},
		{name: "bridge: no native XDP, generic", mtu: 1500, io: IOAuto, want: "afxdp/generic", iface: "trptbr0",
			setup: func(t *testing.T, tn *testNet) {
				run(t, "ip", "-n", tn.name, "link", "add", "trptbr0", "up", "type", "bridge")
			}},
		{name: "jumbo MTU: multi-buffer", mtu: 9000, io: IOAuto, want: "afxdp/native"},
		{name: "TUN: no Ethernet header", mtu: 1500, io: IOAuto, want: "afpacket", iface: "trpttun0", setup: addTun},
		{name: "XDP hook taken by another program", mtu: 1500, io: IOAuto, want: "afpacket",
			setup: func(t *testing.T, tn *testNet) { passProgram(t, tn, tn.sw(1)) }},
		{name: "afxdp does not fall back", mtu: 1500, io: IOAFXDP, errHas: "not an Ethernet device", iface: "trpttun0", setup: addTun},
		{name: "afxdp, hook taken", mtu: 1500, io: IOAFXDP, errHas: "generic XDP refused",
			setup: func(t *testing.T, tn *testNet) { passProgram(t, tn, tn.sw(1)) }},
		{name: "afpacket", mtu: 1500, io: IOAFPacket, want: "afpacket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNet(t, 1, tc.mtu)
			if tc.setup != nil {
				tc.setup(t, tn)
			}
			iface := tc.iface
			if iface == "" {
				iface = tn.sw(1)
			}
			var d *Device
			var err error
			tn.do(t, func() error {
				d, err = New(Config{IO: tc.io, Ports: []PortConfig{{Num: 1, Iface: iface}}})
				return nil
			})
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("New: %v, want an error containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer d.closePorts()
			if got := d.Stats().Ports[0].IO; got != tc.want {
				t.Errorf("I/O %q, want %q", got, tc.want)
			}
		})
	}
}

// TestXSKStampsAndAllocs receives on an AF_XDP port frames sent by another
// AF_XDP port: the receive stamp comes from the steering program, and
// neither side allocates per frame.
func TestXSKStampsAndAllocs(t *testing.T) {
	tn := newTestNet(t, 1, 1500)
	var rx, tx *xskPort
	tn.do(t, func() error {
		var err error
		if rx, err = openXSKPort(tn.sw(1), xskConfig{}); err != nil {
			return err
		}
		tx, err = openXSKPort(tn.host(1), xskConfig{NoSteering: true})
		return err
	})
	defer rx.close()
	defer tx.close()
	frames := [][]byte{testFrame(64, 1, 0)}
	roundTrip := func() (rxFrame, bool) {
		if n, _ := tx.send(frames); n != 1 {
			return rxFrame{}, false
		}
		for i := 0; i < 100; i++ {
			if f, ok := rx.next(); ok {
				return f, true
			}
			_ = rx.wait(10)
		}
		return rxFrame{}, false
	}
	before := time.Now().UnixNano()
	f, ok := roundTrip()
	after := time.Now().UnixNano()
	if !ok {
		t.Fatal("frame not received")
	}
	if !bytes.Equal(f.data, frames[0]) {
		t.Errorf("received %x, want %x", f.data, frames[0])
	}
	if f.tsNs < before-int64(time.Millisecond) || f.tsNs > after+int64(time.Millisecond) {
		t.Errorf("receive stamp %d not within [%d, %d] (program metadata lost?)", f.tsNs, before, after)
	}
	rx.release()
	lost := 0
	allocs := testing.AllocsPerRun(500, func() {
		if _, ok := roundTrip(); !ok {
			lost++
			return
		}
		rx.release()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per frame sent and received, want 0", allocs)
	}
	if lost > 0 {
		t.Errorf("%d of 501 frames lost", lost)
	}
}
