package main

// video-send / video-recv: the demo's reserved channel in Go, for
// toolchain/bench/prio-latency.sh. The sender sends 30 frames/s of
// 8,000–21,680 bytes (drawn like topo/video.py's Beta(4,3)), each cut into
// packets of at most 4,500 IP bytes sent back to back, keeping to a token
// bucket (ρ, σ) and running at SCHED_FIFO as the demo's sender does. The
// receiver stamps packets with the kernel's receive time (SO_TIMESTAMPNS)
// and reports the latency of each frame's last packet against a bound,
// with the worst frames packet by packet, so a late frame shows whether its
// packets left the sender late or crossed the switch late.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"sort"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	videoFPS       = 30
	videoMinFrame  = 8000
	videoPeakFrame = 21680
	videoMaxPacket = 4500 // IP bytes
	videoIPUDP     = 28
	videoHdr       = 32 // magic 4, frame 4, index 2, count 2, start ns 8, sent ns 8, size 4
	videoMagic     = 0x54564944
)

func realtimeNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &ts)
	return ts.Nano()
}

func monoNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func sleepUntilMono(t int64) {
	for {
		now := monoNs()
		if now >= t {
			return
		}
		ts := unix.NsecToTimespec(t - now)
		_ = unix.Nanosleep(&ts, nil)
	}
}

// videoFrameSizes draws sizes between the smallest and the peak frame with
// a Beta(4,3) shape (the 4th smallest of 6 uniforms), seeded.
func videoFrameSizes(n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1995))
	out := make([]int, n)
	var u [6]float64
	for i := range out {
		for j := range u {
			u[j] = rng.Float64()
		}
		slices.Sort(u[:])
		out[i] = videoMinFrame + int(u[3]*float64(videoPeakFrame-videoMinFrame)+0.5)
	}
	return out
}

// videoSegments returns the IP sizes of a frame's packets.
func videoSegments(frame int) []int {
	room := videoMaxPacket - videoIPUDP - videoHdr
	var out []int
	for left := frame; left > 0; {
		n := min(room, left)
		out = append(out, n+videoHdr+videoIPUDP)
		left -= n
	}
	return out
}

func videoSendCmd(args []string) error {
	fs := flag.NewFlagSet("video-send", flag.ExitOnError)
	dst := fs.String("dst", "", "destination IPv4 address")
	port := fs.Int("port", 5004, "UDP port (source and destination)")
	seconds := fs.Float64("seconds", 20, "how long to send")
	rate := fs.Float64("rate", 1125000, "token bucket rate, IP bytes/s (0: no shaping)")
	burst := fs.Float64("burst", 27000, "token bucket depth, IP bytes")
	dscp := fs.Int("dscp", 46, "DSCP of the packets (46 = EF: the benchmark program's priority 6)")
	fifo := fs.Int("fifo", 10, "SCHED_FIFO priority of the sending thread (0: leave as is)")
	seed := fs.Uint64("seed", 1, "frame size seed")
	fs.Parse(args)
	ip := net.ParseIP(*dst).To4()
	if ip == nil {
		return fmt.Errorf("--dst %q: want an IPv4 address", *dst)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if *fifo > 0 {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(*fifo)}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return fmt.Errorf("SCHED_FIFO: %w", err)
		}
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TOS, *dscp<<2)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: *port}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	to := &unix.SockaddrInet4{Port: *port}
	copy(to.Addr[:], ip)
	sizes := videoFrameSizes(int(*seconds*videoFPS), *seed)
	buf := make([]byte, videoMaxPacket)
	period := int64(time.Second / videoFPS)
	first := monoNs() + int64(100*time.Millisecond)
	tokens, stamp := *burst, monoNs()
	for n, size := range sizes {
		sleepUntilMono(first + int64(n)*period)
		segs := videoSegments(size)
		if *rate > 0 {
			need := 0.0
			for _, s := range segs {
				need += float64(s)
			}
			for {
				now := monoNs()
				tokens = min(*burst, tokens+float64(now-stamp)/1e9**rate)
				stamp = now
				if tokens >= need {
					tokens -= need
					break
				}
				sleepUntilMono(now + int64((need-tokens) / *rate * 1e9))
			}
		}
		start := realtimeNs()
		for i, s := range segs {
			p := buf[:s-videoIPUDP]
			binary.BigEndian.PutUint32(p[0:], videoMagic)
			binary.BigEndian.PutUint32(p[4:], uint32(n))
			binary.BigEndian.PutUint16(p[8:], uint16(i))
			binary.BigEndian.PutUint16(p[10:], uint16(len(segs)))
			binary.BigEndian.PutUint64(p[12:], uint64(start))
			binary.BigEndian.PutUint64(p[20:], uint64(realtimeNs()))
			binary.BigEndian.PutUint32(p[28:], uint32(size))
			if err := unix.Sendto(fd, p, 0, to); err != nil {
				return fmt.Errorf("frame %d packet %d: %w", n, i, err)
			}
		}
	}
	return nil
}

type videoFrame struct {
	count    int
	start    int64
	sent     []int64 // per packet: send time − start
	arrived  []int64 // per packet: kernel receive time − start (0: missing)
	received int
}

func (f *videoFrame) latency() int64 { return slices.Max(f.arrived) }

func videoRecvCmd(args []string) error {
	fs := flag.NewFlagSet("video-recv", flag.ExitOnError)
	port := fs.Int("port", 5004, "UDP port")
	seconds := fs.Float64("seconds", 25, "how long to receive")
	boundMs := fs.Float64("bound-ms", 2.581, "delay bound a frame is judged against")
	worst := fs.Int("worst", 5, "print this many of the latest frames packet by packet")
	markerFd := fs.Int("trace-marker-fd", -1, "at the first frame over the bound, write a note to this open fd (the kernel's trace_marker; a network namespace has no tracefs of its own, so the caller opens it)...")
	stopFd := fs.Int("trace-stop-fd", -1, "...and write 0 to this one (tracing_on), for ftrace analysis")
	fs.Parse(args)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: *port}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	frames := map[uint32]*videoFrame{}
	buf := make([]byte, 65536)
	oob := make([]byte, 128)
	deadline := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	bound := int64(*boundMs * 1e6)
	stopped := false
	for time.Now().Before(deadline) {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			continue
		}
		if n < videoHdr || binary.BigEndian.Uint32(buf) != videoMagic {
			continue
		}
		arrival := int64(0)
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
					ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
					arrival = ts.Nano()
				}
			}
		}
		if arrival == 0 {
			arrival = realtimeNs()
		}
		num := binary.BigEndian.Uint32(buf[4:])
		idx := int(binary.BigEndian.Uint16(buf[8:]))
		count := int(binary.BigEndian.Uint16(buf[10:]))
		start := int64(binary.BigEndian.Uint64(buf[12:]))
		sent := int64(binary.BigEndian.Uint64(buf[20:]))
		f := frames[num]
		if f == nil {
			f = &videoFrame{count: count, start: start, sent: make([]int64, count), arrived: make([]int64, count)}
			frames[num] = f
		}
		if idx >= f.count || f.arrived[idx] != 0 {
			continue
		}
		f.sent[idx] = sent - start
		f.arrived[idx] = arrival - start
		f.received++
		if *markerFd >= 0 && !stopped && f.received == f.count && f.latency() > bound {
			stopped = true
			msg := fmt.Sprintf("video-recv: frame %d latency %.3f ms over the bound; start %d", num, float64(f.latency())/1e6, f.start)
			_, _ = unix.Write(*markerFd, []byte(msg))
			if *stopFd >= 0 {
				_, _ = unix.Write(*stopFd, []byte("0"))
			}
		}
	}
	if len(frames) == 0 {
		return fmt.Errorf("no video packets received")
	}
	nums := make([]uint32, 0, len(frames))
	for k := range frames {
		nums = append(nums, k)
	}
	slices.Sort(nums)
	total := int(nums[len(nums)-1]) + 1
	var lats []int64
	whole, packets, got, over := 0, 0, 0, 0
	for _, k := range nums {
		f := frames[k]
		packets += f.count
		got += f.received
		if f.received == f.count {
			whole++
			lats = append(lats, f.latency())
			if f.latency() > bound {
				over++
			}
		}
	}
	over += total - whole
	slices.Sort(lats)
	q := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		i := int(float64(len(lats))*p+0.999999) - 1
		return float64(lats[max(0, min(len(lats)-1, i))]) / 1e6
	}
	fmt.Printf("video: frames=%d whole=%d packet_loss=%d/%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f bound_ms=%.3f over_bound=%d\n",
		total, whole, packets-got, packets, q(0.5), q(0.99), q(1), *boundMs, over)
	sort.Slice(nums, func(i, j int) bool {
		a, b := frames[nums[i]], frames[nums[j]]
		if (a.received == a.count) != (b.received == b.count) {
			return a.received != a.count
		}
		return a.latency() > b.latency()
	})
	for _, k := range nums[:min(*worst, len(nums))] {
		f := frames[k]
		fmt.Printf("  frame %d: %d/%d packets, latency %.3f ms; per packet sent/arrived (ms after the frame start):", k, f.received, f.count, float64(f.latency())/1e6)
		for i := range f.count {
			fmt.Printf(" %.3f/%.3f", float64(f.sent[i])/1e6, float64(f.arrived[i])/1e6)
		}
		fmt.Println()
	}
	return nil
}
