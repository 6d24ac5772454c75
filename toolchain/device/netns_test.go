package device

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tests build their own network namespace with veth pairs: the switch
// side of each pair is a device port, the host side is driven by the test
// through a plain AF_PACKET socket. Everything is named trptdev<pid>… (the
// arrival-time tests: trptperf<pid>…; trpt is the prefix of everything the
// test suites create, which make test judges for leftovers) and removed on
// cleanup, also when a test fails; TestMain sweeps leftovers of test
// processes that died.

var nsCounter atomic.Int32

// testIO is the I/O the netns tests' devices use unless a test sets one:
// TERRAPIN_TEST_IO=afxdp|auto|afpacket (default afpacket), so that the
// same tests cover both I/O paths (make test runs a selection on auto).
var testIO = func() IOMode {
	m, err := ParseIOMode(os.Getenv("TERRAPIN_TEST_IO"))
	if err != nil || os.Getenv("TERRAPIN_TEST_IO") == "" {
		return IOAFPacket
	}
	return m
}()

func TestMain(m *testing.M) {
	sweepStaleNamespaces()
	os.Exit(m.Run())
}

func sweepStaleNamespaces() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var rest string
		switch {
		case strings.HasPrefix(f[0], "trptdev"):
			rest = strings.TrimPrefix(f[0], "trptdev")
		case strings.HasPrefix(f[0], "trptperf"):
			rest = strings.TrimPrefix(f[0], "trptperf")
		default:
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "x")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue // its test process is alive
		}
		_ = exec.Command("ip", "netns", "del", f[0]).Run()
	}
}

// testNet is a namespace holding veth pairs sw<i> <-> host<i>.
type testNet struct {
	name  string
	nsFd  int
	pairs int
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, AF_PACKET)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
}

func run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newTestNet creates the namespace and n veth pairs with the given MTU.
func newTestNet(t testing.TB, n, mtu int) *testNet {
	return newTestNetPrefix(t, "trptdev", n, mtu)
}

// newTestNetPrefix is newTestNet with the namespace named prefix<pid>x<n>
// (prefix "trptdev" or "trptperf"; TestMain sweeps both).
func newTestNetPrefix(t testing.TB, prefix string, n, mtu int) *testNet {
	requireRoot(t)
	name := fmt.Sprintf("%s%dx%d", prefix, os.Getpid()%100000, nsCounter.Add(1))
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	// No IPv6 autoconfiguration chatter on the test links.
	run(t, "ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	tn := &testNet{name: name, pairs: n}
	for i := 1; i <= n; i++ {
		run(t, "ip", "-n", name, "link", "add", tn.sw(i), "mtu", strconv.Itoa(mtu), "type", "veth", "peer", "name", tn.host(i), "mtu", strconv.Itoa(mtu))
		run(t, "ip", "-n", name, "link", "set", tn.sw(i), "up")
		run(t, "ip", "-n", name, "link", "set", tn.host(i), "up")
	}
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tn.nsFd = fd
	t.Cleanup(func() { unix.Close(fd) })
	return tn
}

func (tn *testNet) sw(i int) string   { return fmt.Sprintf("sw%d", i) }
func (tn *testNet) host(i int) string { return fmt.Sprintf("host%d", i) }

// do runs fn on an OS thread inside the namespace. Sockets created there
// stay in the namespace afterwards, whichever thread uses them.
func (tn *testNet) do(t testing.TB, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(tn.nsFd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime discards it at exit.
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// newDevice creates a device with ports 1..n on sw1..swn inside the namespace.
func (tn *testNet) newDevice(t testing.TB, cfg Config) *Device {
	t.Helper()
	if cfg.Ports == nil {
		for i := 1; i <= tn.pairs; i++ {
			cfg.Ports = append(cfg.Ports, PortConfig{Num: uint16(i), Iface: tn.sw(i)})
		}
	}
	if cfg.IO == IOAFPacket {
		cfg.IO = testIO
	}
	var d *Device
	tn.do(t, func() error {
		var err error
		d, err = New(cfg)
		return err
	})
	return d
}

// hostSock is a test host's raw socket on host<i>.
type hostSock struct {
	fd int
}

func (tn *testNet) hostSocket(t testing.TB, i int) *hostSock {
	t.Helper()
	var hs *hostSock
	tn.do(t, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		idx, err := ifIndex(tn.host(i))
		if err != nil {
			unix.Close(fd)
			return err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16<<20)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: idx}); err != nil {
			unix.Close(fd)
			return err
		}
		hs = &hostSock{fd: fd}
		return nil
	})
	t.Cleanup(func() { unix.Close(hs.fd) })
	return hs
}

func ifIndex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

func (h *hostSock) send(t testing.TB, frame []byte) {
	t.Helper()
	for {
		_, err := unix.Write(h.fd, frame)
		if err == unix.ENOBUFS || err == unix.EAGAIN {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		return
	}
}

// recv waits up to timeout for a frame; it returns the frame and its kernel
// receive timestamp, or nil on timeout.
// clearError takes the error the kernel left pending on the socket when its
// interface went down, so the next recv reports frames, not the old ENETDOWN.
func (h *hostSock) clearError() {
	_, _ = unix.GetsockoptInt(h.fd, unix.SOL_SOCKET, unix.SO_ERROR)
}

func (h *hostSock) recv(t testing.TB, timeout time.Duration) ([]byte, time.Time) {
	t.Helper()
	tv := unix.NsecToTimeval(int64(timeout))
	if timeout <= 0 {
		tv = unix.Timeval{Usec: 1}
	}
	_ = unix.SetsockoptTimeval(h.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 10000)
	oob := make([]byte, 128)
	deadline := time.Now().Add(timeout)
	n, oobn, _, _, err := unix.Recvmsg(h.fd, buf, oob, 0)
	for err == unix.EINTR && time.Now().Before(deadline) {
		// The Go runtime's preemption signal interrupts blocking calls.
		n, oobn, _, _, err = unix.Recvmsg(h.fd, buf, oob, 0)
	}
	if err == unix.EAGAIN || err == unix.EWOULDBLOCK || err == unix.EINTR {
		return nil, time.Time{}
	}
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	ts := time.Now()
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
				sp := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				ts = time.Unix(sp.Sec, sp.Nsec)
			}
		}
	}
	return buf[:n], ts
}

// drain discards whatever is queued on the socket.
func (h *hostSock) drain(t testing.TB) {
	for {
		f, _ := h.recv(t, 0)
		if f == nil {
			return
		}
	}
}

// testFrame builds an Ethernet frame of n bytes with a sequence number at
// bytes 14..17 and the priority byte at 18.
func testFrame(n int, seq uint32, prio byte) []byte {
	f := make([]byte, n)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	f[12], f[13] = 0x88, 0xb5 // IEEE local experimental ethertype
	if n >= 18 {
		f[14], f[15], f[16], f[17] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	}
	if n >= 19 {
		f[18] = prio
	}
	for i := 19; i < n; i++ {
		f[i] = byte(i)
	}
	return f
}

func frameSeq(f []byte) uint32 {
	if len(f) < 18 {
		return ^uint32(0)
	}
	return uint32(f[14])<<24 | uint32(f[15])<<16 | uint32(f[16])<<8 | uint32(f[17])
}
