// terrapin-cut cuts links silently for tests and experiments: every frame
// arriving on the named interfaces is dropped (an XDP program that returns
// XDP_DROP, in generic mode so that any interface takes it) while their
// carrier and administrative state stay up, as when a transceiver fails or a
// middlebox swallows a link's traffic. Run on both ends of a veth pair it
// cuts the link both ways. The cut lasts until the process is stopped
// (SIGTERM, SIGINT); it prints "cut" once every interface is cut.
//
// Why not take the interfaces down: simple_switch_grpc stops handing frames
// to its controller on every port while one of its own interfaces is
// administratively down (docs/bmv2.md), so a cut made that way also silences
// the switch's other trunks.
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

const xdpDrop = 1

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "terrapin-cut:", err)
		os.Exit(1)
	}
}

func run(ifaces []string) error {
	if len(ifaces) == 0 || ifaces[0] == "-h" || ifaces[0] == "--help" {
		return fmt.Errorf("usage: terrapin-cut IFACE... (drops every frame arriving on each until stopped)")
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "terrapin_cut",
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpDrop), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("loading the XDP program: %w", err)
	}
	defer prog.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var links []link.Link
	defer func() {
		for _, l := range links {
			_ = l.Close()
		}
	}()
	for _, name := range ifaces {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPGenericMode})
		if err != nil {
			return fmt.Errorf("%s: attaching the XDP program: %w", name, err)
		}
		links = append(links, l)
	}
	fmt.Println("cut")
	<-stop
	return nil
}
