package device

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// xdpMode is where an XDP program runs: in the driver's receive path
// (native) or after the kernel has built an skb (generic, any device).
type xdpMode int

const (
	xdpNative xdpMode = iota
	xdpGeneric
)

func (m xdpMode) String() string {
	if m == xdpGeneric {
		return "generic"
	}
	return "native"
}

func (m xdpMode) flags() link.XDPAttachFlags {
	if m == xdpGeneric {
		return link.XDPGenericMode
	}
	return link.XDPDriverMode
}

// xdpMetaLen is the metadata the steering program puts in front of every
// frame: its CLOCK_MONOTONIC receive time (8 bytes, host order). AF_XDP has
// no receive timestamp of its own, and meters judge arrivals (arrival.go):
// the program stamps the frame when the interface hands it over, as the
// kernel stamps an AF_PACKET ring slot. The kernel copies the metadata
// into UMEM just before the frame.
const xdpMetaLen = 8

// xdpSteering is one interface's XDP program and its XSKMAP (one entry per
// receive queue). Closing it detaches the program: it is attached through a
// bpf_link, which the kernel also releases if the process dies.
type xdpSteering struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	lnk  link.Link
	mode xdpMode
}

// steeringInstructions is the program: stamp the frame's arrival time
// into its metadata (best effort), then redirect it to the AF_XDP socket of
// the queue it arrived on; XDP_PASS (bpf_redirect_map's fallback action)
// for a queue without a socket, so nothing is lost to a misconfiguration.
// Written with cilium/ebpf's assembler so that nothing is compiled at run
// time (no clang on the target).
func steeringInstructions(xsksFD int) asm.Instructions {
	const (
		offData     = 0  // struct xdp_md: data
		offDataMeta = 8  // data_meta
		offRxQueue  = 16 // rx_queue_index
		xdpPass     = 2
	)
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1), // ctx survives the calls in R6
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, -xdpMetaLen),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, "redirect"),
		asm.LoadMem(asm.R2, asm.R6, offDataMeta, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, offData, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, xdpMetaLen),
		asm.JGT.Reg(asm.R4, asm.R3, "redirect"), // the verifier's bounds check
		asm.StoreMem(asm.R2, 0, asm.R7, asm.DWord),
		asm.LoadMem(asm.R2, asm.R6, offRxQueue, asm.Word).WithSymbol("redirect"),
		asm.LoadMapPtr(asm.R1, xsksFD),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

// loadSteering creates the XSKMAP and program for an interface with
// queues receive queues. The program is attached by attach.
// With frags, the program is marked as handling multi-buffer frames
// (BPF_F_XDP_HAS_FRAGS), which a port needs for frames larger than a UMEM
// chunk: the kernel refuses native XDP on a veth whose MTU exceeds a page
// otherwise, and delivers such frames to an AF_XDP socket in pieces only to
// a frags-aware program.
func loadSteering(queues int, frags bool) (*xdpSteering, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "tp_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(queues),
	})
	if err != nil {
		return nil, fmt.Errorf("XSKMAP: %w", err)
	}
	var flags uint32
	if frags {
		flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "tp_xsk_steer", Type: ebpf.XDP, License: "GPL", Flags: flags,
		Instructions: steeringInstructions(m.FD()),
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("XDP program: %w", err)
	}
	return &xdpSteering{xsks: m, prog: prog}, nil
}

// attach attaches the program to ifindex in mode.
func (s *xdpSteering) attach(ifindex int, mode xdpMode) error {
	l, err := link.AttachXDP(link.XDPOptions{Program: s.prog, Interface: ifindex, Flags: mode.flags()})
	if err != nil {
		return err
	}
	s.lnk, s.mode = l, mode
	return nil
}

// addSocket steers queue's frames to the AF_XDP socket fd.
func (s *xdpSteering) addSocket(queue, fd int) error {
	return s.xsks.Put(uint32(queue), uint32(fd))
}

func (s *xdpSteering) close() {
	if s.lnk != nil {
		_ = s.lnk.Close()
		s.lnk = nil
	}
	if s.prog != nil {
		_ = s.prog.Close()
		s.prog = nil
	}
	if s.xsks != nil {
		_ = s.xsks.Close()
		s.xsks = nil
	}
}

// bpffsPath is where the BPF filesystem is conventionally mounted.
const bpffsPath = "/sys/fs/bpf"

// ensureBPFFS mounts the BPF filesystem at /sys/fs/bpf when nothing is
// mounted there. The switch pins nothing (its program and map live as long
// as their file descriptors, so a crash leaves nothing behind), but bpftool
// and the kernel's own tools expect bpffs, and a minimal container or VM
// often lacks it. It reports whether it mounted it.
func ensureBPFFS() (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(bpffsPath, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return false, nil
	}
	if err := os.MkdirAll(bpffsPath, 0o700); err != nil {
		return false, fmt.Errorf("mkdir %s: %w", bpffsPath, err)
	}
	if err := unix.Mount("bpf", bpffsPath, "bpf", 0, "mode=0700"); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return false, nil
		}
		return false, fmt.Errorf("mount bpffs on %s: %w", bpffsPath, err)
	}
	return true, nil
}

// XDPRedirect is an XDP program that sends every frame arriving on one
// interface out of another (XDP_REDIRECT), with no user space at all: the
// benchmark's kernel-limit reference ("xdp-reflector").
type XDPRedirect struct {
	prog *ebpf.Program
	lnk  link.Link
	// Mode is the XDP mode it got: native or generic.
	Mode string
}

// AttachXDPRedirect attaches the redirect from in to out, native mode if
// the driver has it, else generic. A veth delivers redirected frames only
// if its peer runs NAPI (an XDP program or GRO on the peer).
func AttachXDPRedirect(in, out string) (*XDPRedirect, error) {
	inIf, err := net.InterfaceByName(in)
	if err != nil {
		return nil, err
	}
	outIf, err := net.InterfaceByName(out)
	if err != nil {
		return nil, err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "tp_redirect", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R1, int32(outIf.Index)),
			asm.Mov.Imm(asm.R2, 0),
			asm.FnRedirect.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("XDP program: %w", err)
	}
	var errs []error
	for _, m := range []xdpMode{xdpNative, xdpGeneric} {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: inIf.Index, Flags: m.flags()})
		if err == nil {
			return &XDPRedirect{prog: prog, lnk: l, Mode: m.String()}, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m, err))
	}
	prog.Close()
	return nil, errors.Join(errs...)
}

// Close detaches the program.
func (r *XDPRedirect) Close() error {
	err := r.lnk.Close()
	r.prog.Close()
	return err
}
