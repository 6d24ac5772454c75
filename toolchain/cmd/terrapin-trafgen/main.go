// Command terrapin-trafgen is the switch benchmark's traffic generator and
// sink, plus the reference forwarders it compares the switch with.
//
//	terrapin-trafgen reflect --in IF --out IF [--io afxdp]   minimal AF_PACKET (or AF_XDP) forwarder
//	terrapin-trafgen xdp-reflect --in IF --out IF  XDP_REDIRECT from IF to IF, no user space (the kernel's limit)
//	terrapin-trafgen forward --in IF --out IF     the device without P4 (ports + traffic manager)
//	terrapin-trafgen bench --tx IF --rx IF --label NAME [--sizes 64,512,1500]
//	terrapin-trafgen video-send --dst IP / video-recv    the demo's reserved channel (video.go)
//
// bench sends UDP/IPv4 frames on --tx and receives them on --rx (both in
// its own network namespace), with a sequence number and the send time in
// the payload; it finds the saturation rate and the zero-loss rate, then
// measures one-way latency at 10/50/90% of the zero-loss rate, and prints
// one line per frame size.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/terrapin/terrapin/toolchain/device"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: terrapin-trafgen reflect|forward|bench|video-send|video-recv [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "reflect":
		err = reflectCmd(ctx, os.Args[2:])
	case "xdp-reflect":
		err = xdpReflectCmd(ctx, os.Args[2:])
	case "forward":
		err = forwardCmd(ctx, os.Args[2:])
	case "bench":
		err = benchCmd(ctx, os.Args[2:])
	case "video-send":
		err = videoSendCmd(os.Args[2:])
	case "video-recv":
		err = videoRecvCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "terrapin-trafgen:", err)
		os.Exit(1)
	}
}

// reflectCmd forwards every frame from --in to --out: one copy out of the
// receive ring (or UMEM) into the transmit batch, no lookup.
func reflectCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reflect", flag.ExitOnError)
	in := fs.String("in", "", "input interface")
	out := fs.String("out", "", "output interface")
	txMode := txFlag(fs)
	nice := niceFlag(fs)
	ioName := ioFlag(fs, "afpacket")
	fs.Parse(args)
	mode, err := device.ParseTxMode(*txMode)
	if err != nil {
		return err
	}
	io, err := device.ParseIOMode(*ioName)
	if err != nil {
		return err
	}
	// The forwarding loop gets the switch's thread priority, so that the
	// limit is measured under the same scheduling.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if *nice != 0 {
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), *nice)
	}
	rx, err := device.OpenRawPort(*in, device.RawPortConfig{Tx: mode, IO: io})
	if err != nil {
		return err
	}
	defer rx.Close()
	// The output only transmits: with AF_XDP it needs no XDP program.
	tx, err := device.OpenRawPort(*out, device.RawPortConfig{Tx: mode, IO: io, NoSteering: true})
	if err != nil {
		return err
	}
	defer tx.Close()
	fmt.Fprintf(os.Stderr, "reflect: %s -> %s, I/O %s -> %s\n", *in, *out, rx.IO(), tx.IO())
	go func() { <-ctx.Done(); rx.Wake() }()
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, device.MaxFrame)
	}
	batch := make([][]byte, 0, 64)
	for ctx.Err() == nil {
		batch = batch[:0]
		for len(batch) < len(bufs) {
			f, _, ok := rx.Next()
			if !ok {
				break
			}
			if tx.Sendable(len(f)) {
				n := copy(bufs[len(batch)], f)
				batch = append(batch, bufs[len(batch)][:n])
			}
			rx.Release()
		}
		if len(batch) > 0 {
			_, _ = tx.Send(batch)
			continue
		}
		if !rx.Wait(200) {
			return nil
		}
	}
	return nil
}

// xdpReflectCmd redirects every frame from --in to --out in XDP until
// stopped: the kernel's own forwarding limit on these interfaces, with no
// socket and no user space.
func xdpReflectCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("xdp-reflect", flag.ExitOnError)
	in := fs.String("in", "", "input interface")
	out := fs.String("out", "", "output interface")
	fs.Parse(args)
	r, err := device.AttachXDPRedirect(*in, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "xdp-reflect: %s -> %s, %s XDP\n", *in, *out, r.Mode)
	<-ctx.Done()
	return r.Close()
}

// forwardCmd runs the device with a fixed port map: the switch's I/O and
// traffic manager without a P4 pipeline.
func forwardCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("forward", flag.ExitOnError)
	in := fs.String("in", "", "input interface (port 1)")
	out := fs.String("out", "", "output interface (port 2)")
	txMode := txFlag(fs)
	nice := niceFlag(fs)
	ioName := ioFlag(fs, "auto")
	fs.Parse(args)
	mode, err := device.ParseTxMode(*txMode)
	if err != nil {
		return err
	}
	io, err := device.ParseIOMode(*ioName)
	if err != nil {
		return err
	}
	d, err := device.New(device.Config{Tx: mode, IO: io, Nice: *nice, Ports: []device.PortConfig{{Num: 1, Iface: *in}, {Num: 2, Iface: *out}}})
	if err != nil {
		return err
	}
	m := device.NewPortMap()
	m.Connect(1, 2)
	m.Connect(2, 1)
	d.SetPipeline(m)
	if path := os.Getenv("TRAFGEN_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if os.Getenv("TRAFGEN_STATS") != "" {
		go func() {
			for ctx.Err() == nil {
				time.Sleep(time.Second)
				for _, p := range d.Stats().Ports {
					fmt.Fprintf(os.Stderr, "port %d: rx %d ring_drops %d tx %d tx_errors %d queue_drops %d max_depth %d\n",
						p.Port, p.RxPackets, p.RxRingDrops, p.TxPackets, p.TxErrors, p.Queues[0].Dropped, p.MaxDepth)
				}
			}
		}()
	}
	return d.Run(ctx)
}

const (
	payloadOff = 14 + 20 + 8  // Ethernet, IPv4, UDP
	magic      = 0x7465727261 // "terra"
)

// buildFrame makes a UDP/IPv4 frame of size bytes including the 4-byte FCS
// the veth does not carry (RFC 2544 frame sizes).
func buildFrame(size int) []byte {
	n := size - 4
	if n < payloadOff+32 {
		n = payloadOff + 32
	}
	f := make([]byte, n)
	copy(f[0:6], []byte{0x02, 0x00, 0x00, 0x00, 0x02, 0x02})
	copy(f[6:12], []byte{0x02, 0x00, 0x00, 0x00, 0x01, 0x01})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 1, 1})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 10000)
	binary.BigEndian.PutUint16(udp[2:], 20000)
	binary.BigEndian.PutUint16(udp[4:], uint16(n-34))
	return f
}

// trial is one timed run at one offered rate.
type trial struct {
	sent, received uint64
	seconds        float64
	lat            []int64 // one-way latency samples, ns
}

type bench struct {
	tx, rx *device.RawPort
	id     atomic.Uint32
}

// run offers pps frames/s (0 = as fast as possible) of size bytes for dur.
func (b *bench) run(size int, pps float64, dur time.Duration, wantLat bool) trial {
	id := b.id.Add(1)
	var tr trial
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var recvd atomic.Uint64
	lat := make([]int64, 0, 1<<16)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			f, ts, ok := b.rx.Next()
			if !ok {
				select {
				case <-stop:
					return
				default:
				}
				b.rx.Wait(5)
				continue
			}
			if len(f) >= payloadOff+24 && binary.BigEndian.Uint64(f[payloadOff:]) == magic && binary.BigEndian.Uint32(f[payloadOff+8:]) == id {
				recvd.Add(1)
				if wantLat && len(lat) < cap(lat) {
					sentNs := int64(binary.BigEndian.Uint64(f[payloadOff+16:]))
					lat = append(lat, ts-sentNs)
				}
			}
			b.rx.Release()
		}
	}()
	// Generator on a locked thread with fine timer slack, so low rates are
	// sent evenly rather than in bursts.
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		// AF_XDP takes bigger batches: one kick then sends up to the
		// socket's transmit budget (device/xsk_linux.go).
		batchMax := 64
		if strings.HasPrefix(b.tx.IO(), "afxdp") {
			batchMax = 256
		}
		frames := make([][]byte, batchMax)
		for i := range frames {
			frames[i] = buildFrame(size)
			binary.BigEndian.PutUint64(frames[i][payloadOff:], magic)
			binary.BigEndian.PutUint32(frames[i][payloadOff+8:], id)
		}
		start := time.Now()
		var seq uint64
		for {
			el := time.Since(start)
			if el >= dur {
				break
			}
			n := batchMax
			if pps > 0 {
				due := int64(el.Seconds()*pps) + 1 - int64(seq)
				if due <= 0 {
					next := time.Duration(float64(seq) / pps * 1e9)
					if w := next - el; w > 20*time.Microsecond {
						ts := unix.NsecToTimespec(int64(w - 10*time.Microsecond))
						unix.Nanosleep(&ts, nil)
					}
					continue
				}
				if due < int64(n) {
					n = int(due)
				}
			}
			now := time.Now().UnixNano()
			for i := 0; i < n; i++ {
				binary.BigEndian.PutUint32(frames[i][payloadOff+12:], uint32(seq)+uint32(i))
				binary.BigEndian.PutUint64(frames[i][payloadOff+16:], uint64(now))
			}
			k, _ := b.tx.Send(frames[:n])
			seq += uint64(k)
			if k < n {
				runtime.Gosched()
			}
		}
		tr.sent = seq
		tr.seconds = time.Since(start).Seconds()
	}()
	<-done
	time.Sleep(150 * time.Millisecond) // stragglers
	close(stop)
	b.rx.Wake()
	wg.Wait()
	tr.received = recvd.Load()
	tr.lat = lat
	return tr
}

func pct(xs []int64, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	i := int(float64(len(xs)-1) * p)
	return time.Duration(xs[i])
}

func benchCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	txIf := fs.String("tx", "", "interface to send on")
	rxIf := fs.String("rx", "", "interface to receive on")
	label := fs.String("label", "dut", "name printed on each line")
	sizes := fs.String("sizes", "64,512,1500", "frame sizes (bytes incl. FCS)")
	trialDur := fs.Duration("trial", time.Second, "length of one trial")
	steps := fs.Int("steps", 7, "binary-search steps for the zero-loss rate")
	satOnly := fs.Bool("sat-only", false, "measure the saturation rate only (quick tuning runs)")
	fixed := fs.Float64("fixed-pps", 0, "offer this rate for one trial and print what arrived (cost measurements)")
	txMode := txFlag(fs)
	ioName := ioFlag(fs, "afpacket")
	fs.Parse(args)
	mode, err := device.ParseTxMode(*txMode)
	if err != nil {
		return err
	}
	io, err := device.ParseIOMode(*ioName)
	if err != nil {
		return err
	}
	// With AF_XDP the generator's port only sends (no XDP program on it) and
	// the sink's program steers every frame to its socket; the sink's
	// stamp is then taken in XDP, as early as AF_PACKET's.
	tx, err := device.OpenRawPort(*txIf, device.RawPortConfig{Tx: mode, IO: io, NoSteering: true})
	if err != nil {
		return err
	}
	defer tx.Close()
	rx, err := device.OpenRawPort(*rxIf, device.RawPortConfig{RingBytes: 32 << 20, IO: io})
	if err != nil {
		return err
	}
	defer rx.Close()
	fmt.Fprintf(os.Stderr, "bench %s: generator %s on %s, sink %s on %s\n", *label, tx.IO(), *txIf, rx.IO(), *rxIf)
	b := &bench{tx: tx, rx: rx}
	b.run(64, 1000, 200*time.Millisecond, false) // warm up (ARP-free L2 path, page faults)
	for _, s := range strings.Split(*sizes, ",") {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		size, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || size < 64 || size > 9018 {
			return fmt.Errorf("bad size %q", s)
		}
		if *fixed > 0 {
			tr := b.run(size, *fixed, *trialDur, true)
			slices.Sort(tr.lat)
			fmt.Printf("%-10s size=%-5d offered_pps=%.0f received_pps=%.0f lost=%d lat=%v/%v\n", *label, size,
				float64(tr.sent)/tr.seconds, float64(tr.received)/tr.seconds, int64(tr.sent)-int64(tr.received),
				us(pct(tr.lat, 0.5)), us(pct(tr.lat, 0.99)))
			continue
		}
		sat := b.run(size, 0, *trialDur, false)
		satPPS := float64(sat.received) / sat.seconds
		offered := float64(sat.sent) / sat.seconds
		if *satOnly {
			fmt.Printf("%-10s size=%-5d offered_sat=%.0f sat_pps=%.0f\n", *label, size, offered, satPPS)
			continue
		}
		// Zero loss: binary search between 0 and the saturation rate.
		lo, hi := 0.0, satPPS*1.05
		for i := 0; i < *steps && ctx.Err() == nil; i++ {
			mid := (lo + hi) / 2
			tr := b.run(size, mid, *trialDur, false)
			if tr.received >= tr.sent && float64(tr.sent) >= mid*tr.seconds*0.97 {
				lo = mid
			} else {
				hi = mid
			}
		}
		zl := lo
		if zl == 0 {
			fmt.Printf("%-10s size=%-5d offered_sat=%.0f sat_pps=%.0f zero_loss_pps=0 (no loss-free rate found)\n", *label, size, offered, satPPS)
			continue
		}
		var lats [3][2]time.Duration
		for i, f := range []float64{0.1, 0.5, 0.9} {
			tr := b.run(size, zl*f, *trialDur, true)
			slices.Sort(tr.lat)
			lats[i] = [2]time.Duration{pct(tr.lat, 0.5), pct(tr.lat, 0.99)}
		}
		fmt.Printf("%-10s size=%-5d offered_sat=%.0f sat_pps=%.0f zero_loss_pps=%.0f lat10=%v/%v lat50=%v/%v lat90=%v/%v\n",
			*label, size, offered, satPPS, zl,
			us(lats[0][0]), us(lats[0][1]), us(lats[1][0]), us(lats[1][1]), us(lats[2][0]), us(lats[2][1]))
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}

// txFlag is the transmit path option shared by the commands: the same
// choice as terrapin-switch --tx, so that the limit is measured with the
// switch's own I/O.
func txFlag(fs *flag.FlagSet) *string {
	return fs.String("tx-mode", "ring", "transmit path: ring (PACKET_TX_RING) or sendmmsg")
}

// ioFlag is the packet I/O option (terrapin-switch --io).
func ioFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("io", def, "packet I/O: afpacket, afxdp (native XDP, else generic) or auto")
}

// niceFlag is the forwarding threads' priority, terrapin-switch --nice.
func niceFlag(fs *flag.FlagSet) *int {
	return fs.Int("nice", -10, "nice value of the forwarding thread (as terrapin-switch --nice; 0: unchanged)")
}

func us(d time.Duration) string { return fmt.Sprintf("%.1fus", float64(d)/1e3) }
