package device

import (
	"context"
	"net"
	"sort"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A port whose link has no carrier (its cable cut, its veth peer down, the
// interface itself down) drops what the pipeline sends it, as a NIC whose
// link is down does. Handed to the kernel, the frames would wait in the
// socket's transmit ring (AF_XDP keeps them there) and leave seconds stale,
// all at once, when the link came back: a burst beyond every envelope
// admitted downstream, for traffic the controller has long moved elsewhere.
//
// The kernel says when a link changes (rtnetlink's link group); a port's
// state is read once at start and then followed from those messages.

// linkUp reports whether an interface's flags say it can carry frames: up,
// with a carrier.
func linkUp(flags uint32) bool {
	return flags&unix.IFF_UP != 0 && flags&unix.IFF_LOWER_UP != 0
}

// initCarrier reads each port's link state now.
func (d *Device) initCarrier() {
	for _, eg := range d.interfacePorts() {
		d.readCarrier(eg)
	}
}

// readCarrier reads one port's link state now.
func (d *Device) readCarrier(eg *egressPort) {
	ifi, err := net.InterfaceByName(eg.iface)
	if err != nil {
		return
	}
	eg.ifindex.Store(int32(ifi.Index))
	// net.FlagRunning is IFF_RUNNING: up with a carrier (RFC 2863 oper status).
	eg.noCarrier.Store(ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagRunning == 0)
}

// interfacePorts are the egress ports with an interface (not the CPU port,
// nor numbers without one).
func (d *Device) interfacePorts() []*egressPort {
	var out []*egressPort
	for _, eg := range d.egressPorts() {
		if !eg.cpu && !eg.noIface {
			out = append(out, eg)
		}
	}
	return out
}

// watchCarrier follows the ports' links until ctx ends. Its socket is
// opened by the caller (in the device's network namespace).
func (d *Device) watchCarrier(ctx context.Context, fd int) {
	buf := make([]byte, 1<<16)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR || err == unix.EWOULDBLOCK {
			continue // the receive timeout: look at ctx again
		}
		if err == unix.ENOBUFS {
			// Messages were lost: read every port's state again.
			d.initCarrier()
			continue
		}
		if err != nil {
			d.log.Warn("link state: netlink receive failed; ports keep their last state", "err", err)
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWLINK && m.Header.Type != unix.RTM_DELLINK {
				continue
			}
			if len(m.Data) < unix.SizeofIfInfomsg {
				continue
			}
			info := (*unix.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
			// Looked up per message: port_add and port_remove change the ports.
			eg := d.portOfIfindex(info.Index)
			if eg == nil {
				continue
			}
			down := m.Header.Type == unix.RTM_DELLINK || !linkUp(info.Flags)
			if eg.noCarrier.Swap(down) != down {
				d.log.Info("link state changed", "port", eg.num, "iface", eg.iface, "carrier", !down)
				d.portWatchers.tell(PortState{Number: eg.num, Name: eg.iface, Up: !down})
			}
		}
	}
}

// portOfIfindex is the port on the interface with index i, or nil.
func (d *Device) portOfIfindex(i int32) *egressPort {
	for n := range d.ports {
		if eg := d.ports[n].Load(); eg != nil && !eg.noIface && eg.ifindex.Load() == i {
			return eg
		}
	}
	return nil
}

// openLinkWatch opens the rtnetlink socket watchCarrier reads, with a
// receive timeout so that it sees its context end.
func openLinkWatch() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	tv := unix.NsecToTimeval(int64(200e6))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// PortState is one data port's link as the device sees it.
type PortState struct {
	Number uint16 // the P4 port number
	Name   string // the interface
	Up     bool   // up, with a carrier
	// Removed: the port was just removed (port_remove; Up is false).
	Removed bool
}

// Ports returns every data port's link state, by port number.
func (d *Device) Ports() []PortState {
	var out []PortState
	for _, eg := range d.interfacePorts() {
		out = append(out, PortState{Number: eg.num, Name: eg.iface, Up: !eg.noCarrier.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// WatchPorts calls fn with a port's new state each time its link changes,
// until cancel is called. fn runs on the link watch's goroutine: it must
// not block (gNMI's subscriptions queue what it hands them).
func (d *Device) WatchPorts(fn func(PortState)) (cancel func()) {
	return d.portWatchers.add(fn)
}

type portWatchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(PortState)
}

func (w *portWatchers) add(fn func(PortState)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(PortState){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

func (w *portWatchers) tell(p PortState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fn := range w.fns {
		fn(p)
	}
}
