// terrapin-partition cuts the processes of one cgroup off from some TCP
// services, as a network partition would: every packet of their sockets to
// or from the given remote ports is dropped, both ways, with no reset (their
// connections hang and time out; new ones are never answered), while the rest
// of the machine reaches those services as before. It lasts until the
// process is stopped (SIGTERM, SIGINT), and prints "partitioned" once it
// holds.
//
//	terrapin-partition --cgroup /sys/fs/cgroup/unified/terrapin-chaos/c0 --port 5432 [--port N]...
//
// Why a cgroup: the chaos run (topo/chaos) starts each controller replica in a
// cgroup of its own, and its replicas, PostgreSQL and the switches all talk
// over the loopback, where neither addresses nor interfaces tell two replicas
// apart. A socket belongs to the cgroup of the process that made it, so the
// replica must be in the cgroup before it connects: the chaos run starts it
// there.
//
// How: two BPF_PROG_TYPE_CGROUP_SKB programs (ingress and egress) compare the
// socket's remote port with each given port and drop on a match.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// remotePortOffset is offsetof(struct __sk_buff, remote_port) (linux/bpf.h):
// the socket's remote port as a 32-bit field in network byte order (the
// port's two bytes last).
const remotePortOffset = 132

const (
	verdictDrop = 0
	verdictPass = 1
)

type ports []uint16

func (p *ports) String() string {
	out := make([]string, len(*p))
	for i, v := range *p {
		out[i] = strconv.Itoa(int(v))
	}
	return strings.Join(out, ",")
}

func (p *ports) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil || v == 0 {
		return fmt.Errorf("a TCP port is 1..65535, not %q", s)
	}
	*p = append(*p, uint16(v))
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "terrapin-partition:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("terrapin-partition", flag.ContinueOnError)
	cgroup := fs.String("cgroup", "", "cgroup v2 directory whose processes are cut off")
	var blocked ports
	fs.Var(&blocked, "port", "remote TCP port to cut them off from (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cgroup == "" || len(blocked) == 0 {
		return errors.New("usage: terrapin-partition --cgroup DIR --port N [--port N]...")
	}
	if st, err := os.Stat(*cgroup); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a cgroup directory", *cgroup)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "terrapin_part",
		Type:         ebpf.CGroupSKB,
		License:      "GPL",
		Instructions: dropRemotePorts(blocked),
	})
	if err != nil {
		return fmt.Errorf("loading the program: %w", err)
	}
	defer prog.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	for _, attach := range []ebpf.AttachType{ebpf.AttachCGroupInetIngress, ebpf.AttachCGroupInetEgress} {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: *cgroup, Attach: attach, Program: prog})
		if err != nil {
			return fmt.Errorf("%s: attaching: %w", *cgroup, err)
		}
		defer l.Close()
	}
	fmt.Println("partitioned")
	<-stop
	return nil
}

// dropRemotePorts is the program: pass unless the socket's remote port is one
// of blocked.
func dropRemotePorts(blocked []uint16) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, remotePortOffset, asm.Word),
	}
	for _, p := range blocked {
		// a 32-bit comparison (JMP32): a 64-bit one would sign-extend a port whose
		// low byte is 128 or more (its word has the top bit set) and never match
		insns = append(insns, asm.JEq.Imm32(asm.R2, int32(networkOrder(p)), "drop"))
	}
	return append(insns,
		asm.Mov.Imm(asm.R0, verdictPass),
		asm.Return(),
		asm.Mov.Imm(asm.R0, verdictDrop).WithSymbol("drop"),
		asm.Return(),
	)
}

// networkOrder is the port as the kernel presents it in remote_port, read as
// a native 32-bit word: the bytes 0, 0, then the port in network order.
func networkOrder(p uint16) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint16(b[2:], p)
	return binary.NativeEndian.Uint32(b[:])
}
