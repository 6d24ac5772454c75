package viap4rt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// namespace is a network namespace the backend creates for one switch,
// named trptp4rt… (trpt is the prefix of everything the test suites create,
// so make test can judge its own leftovers), holding veth pairs tp4rt<p>s
// (the switch's port p) ↔ tp4rt<p>h (where frames are injected and
// captured). Deleting the namespace deletes the veths.
type namespace struct {
	name string
	tun  bool
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// staleName matches the namespaces this package and the p4rt tests make:
// trptp4rt, an optional tag, the creating process's pid, an optional index.
var staleName = regexp.MustCompile(`^trptp4rt[a-z]*([0-9]+)(x[0-9]+)?$`)

// SweepStale removes trptp4rt namespaces whose creating process is gone (a
// run that was killed cannot clean up after itself).
func SweepStale() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m := staleName.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() || unix.Kill(pid, 0) == nil || errors.Is(unix.Kill(pid, 0), unix.EPERM) {
			continue
		}
		(&namespace{name: f[0]}).remove()
	}
}

func newNamespace(ctx context.Context, name string, ports []uint32, tun bool) (*namespace, error) {
	SweepStale()
	_ = exec.Command("ip", "netns", "del", name).Run() // a leftover of a killed run
	if err := ipCmd(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	ns := &namespace{name: name, tun: tun}
	in := func(args ...string) error { return ipCmd(ctx, append([]string{"netns", "exec", name}, args...)...) }
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		// No IPv6 autoconfiguration noise (router solicitations, DAD) on
		// the test ports: only the test's frames may appear there.
		{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
		{"sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"},
	}
	for _, p := range ports {
		if tun {
			break // TUN ports are created with their file descriptors (openPort)
		}
		sw, host := ns.switchSide(p), ns.hostSide(p)
		steps = append(steps,
			[]string{"ip", "link", "add", sw, "type", "veth", "peer", "name", host},
			[]string{"ip", "link", "set", sw, "mtu", "9000", "up"},
			[]string{"ip", "link", "set", host, "mtu", "9000", "up"})
	}
	for _, s := range steps {
		if err := in(s...); err != nil {
			ns.remove()
			return nil, err
		}
	}
	return ns, nil
}

func (ns *namespace) switchSide(p uint32) string {
	if ns.tun {
		return fmt.Sprintf("tp4rt%dt", p)
	}
	return fmt.Sprintf("tp4rt%ds", p)
}
func (ns *namespace) hostSide(p uint32) string { return fmt.Sprintf("tp4rt%dh", p) }

func (ns *namespace) remove() {
	_ = exec.Command("ip", "netns", "del", ns.name).Run()
	_ = os.Remove(ns.notificationsPath())
}

// notificationsPath is the file of BMv2's notification socket (learning,
// ageing, port status) for the switch in this namespace: the namespace
// does not separate files, and BMv2's default path depends only on the
// device id, so two BMv2s started side by side would share one.
func (ns *namespace) notificationsPath() string {
	return filepath.Join(os.TempDir(), ns.name+"-notifications.ipc")
}

// within runs f on an OS thread switched into the namespace. Sockets
// created by f stay in the namespace after the thread switches back.
func (ns *namespace) within(f func() error) error {
	target, err := os.Open("/var/run/netns/" + ns.name)
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread is stuck in the namespace: let it die with the
			// goroutine instead of returning it to the scheduler.
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// dial opens a TCP connection to addr from inside the namespace (the
// switch's gRPC address is the namespace's loopback).
func (ns *namespace) dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.within(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// hostPort is an AF_PACKET socket on the host side of a switch port.
type hostPort struct {
	port uint32
	fd   int
	tun  bool // fd is the TUN device: frames carry a 4-byte tun_pi header

	mu     sync.Mutex
	frames [][]byte
	last   time.Time
}

const ethPAll = 0x0003

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (ns *namespace) openPort(ctx context.Context, p uint32) (*hostPort, error) {
	if ns.tun {
		return ns.openTun(ctx, p)
	}
	hp := &hostPort{port: p, fd: -1}
	err := ns.within(func() error {
		ifi, err := net.InterfaceByName(ns.hostSide(p))
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(ethPAll)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(ethPAll), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		// Wake blocked reads every 50 ms so the reader can notice close.
		tv := unix.Timeval{Usec: 50000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return err
		}
		hp.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	return hp, nil
}

// read collects frames arriving on the port until stop is closed. Frames
// the backend itself sent (PACKET_OUTGOING) are not the switch's output.
func (hp *hostPort) read(stop <-chan struct{}) {
	buf := make([]byte, 16384)
	for {
		select {
		case <-stop:
			return
		default:
		}
		var f []byte
		if hp.tun {
			ready, err := unix.Poll([]unix.PollFd{{Fd: int32(hp.fd), Events: unix.POLLIN}}, 50)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			if ready == 0 {
				continue
			}
			n, err := unix.Read(hp.fd, buf)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			if n < tunPI {
				continue
			}
			f = append([]byte(nil), buf[tunPI:n]...)
		} else {
			n, from, err := unix.Recvfrom(hp.fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			f = append([]byte(nil), buf[:n]...)
		}
		hp.mu.Lock()
		hp.frames = append(hp.frames, f)
		hp.last = time.Now()
		hp.mu.Unlock()
	}
}

func (hp *hostPort) send(frame []byte) error {
	if hp.tun {
		// tun_pi: flags 0, then a protocol no kernel handler takes (the
		// IEEE local experimental EtherType), so the frame reaches the
		// switch's packet socket and nothing else.
		pkt := append([]byte{0, 0, 0x88, 0xb5}, frame...)
		_, err := unix.Write(hp.fd, pkt)
		return err
	}
	_, err := unix.Write(hp.fd, frame)
	return err
}

// tunPI is the size of struct tun_pi, the header of TUN frames without
// IFF_NO_PI.
const tunPI = 4

// openTun creates TUN device tp4rt<p>t in the namespace: the switch binds
// it as port p; the test end is the device's file descriptor. A TUN
// device has no link-layer header, so frames of any length cross it — an
// Ethernet veth refuses frames shorter than 14 bytes, which p4c's STF
// corpus uses (BMv2 runs STF from pcap files, where any length goes).
func (ns *namespace) openTun(ctx context.Context, p uint32) (*hostPort, error) {
	hp := &hostPort{port: p, fd: -1, tun: true}
	err := ns.within(func() error {
		// Non-blocking: the reader polls, and a read after a spurious
		// wake-up must not block Close.
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(ns.switchSide(p))
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", ns.switchSide(p), err)
		}
		hp.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	in := func(args ...string) error { return ipCmd(ctx, append([]string{"netns", "exec", ns.name}, args...)...) }
	if err := in("ip", "link", "set", ns.switchSide(p), "mtu", "9000", "up"); err != nil {
		unix.Close(hp.fd)
		return nil, err
	}
	return hp, nil
}

func (hp *hostPort) take() [][]byte {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	out := hp.frames
	hp.frames = nil
	return out
}

func (hp *hostPort) lastArrival() time.Time {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return hp.last
}
