// Package viap4rt is the STF runner's P4Runtime path (make conformance
// VIA=p4runtime): an stf.Backend that starts the real terrapin-switch on
// veth pairs in a network namespace of its own, pushes each program with
// SetForwardingPipelineConfig, sends the runner's control-plane commands
// as P4Runtime writes (JSON names mapped to P4Info ids), and moves packets
// through the veths, collecting what comes out once the switch has been
// quiet for a settle time.
package viap4rt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/stf"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Options configures a Device.
type Options struct {
	// Switch is the switch binary: terrapin-switch or p4lang's
	// simple_switch_grpc (both take the same command line).
	Switch string
	// Ports are the switch ports to create (STF port numbers).
	Ports []uint32
	// Namespace names the network namespace (default trptp4rt<pid>).
	Namespace string
	// Addr is the switch's gRPC address inside the namespace
	// (default 127.0.0.1:19650; the namespace has its own loopback).
	Addr string
	// Settle is how long the ports must stay quiet before the output of
	// the packets sent so far is taken as complete (default 150 ms).
	Settle time.Duration
	// Log receives the switch's output (nil: discarded).
	Log io.Writer
	// Passive leaves the switch without a primary controller (Start only
	// waits for it to answer), for a test whose own client arbitrates.
	Passive bool
	// Program is a BMv2 JSON file the switch starts with (its command
	// line's program); empty: --no-p4.
	Program string
	// Veth makes the ports veth pairs instead of TUN devices. Veths are
	// Ethernet: frames shorter than 14 bytes cannot cross them (Send pads
	// them), which changes what a few corpus programs see.
	Veth bool
}

const deviceID = 1

// Device is one running switch and its P4Runtime session.
type Device struct {
	opts Options
	ns   *namespace
	cmd  *exec.Cmd
	exit chan struct{}
	// out keeps the end of the switch's output, so that a switch that
	// dies while starting says why.
	out     *tailWriter
	waitErr error // the switch's exit status, once exit is closed
	conn    *grpc.ClientConn
	rt      p4v1.P4RuntimeClient
	cstr    context.CancelFunc
	elect   *p4v1.Uint128
	ports   map[uint32]*hostPort
	stop    chan struct{}
	wg      sync.WaitGroup

	// The PRE objects of the loaded program, so that a second write to
	// one is a MODIFY.
	groups map[uint32][]int
	clones map[uint32]bool
	// The loaded program, for RunScript.
	loaded *stf.Program
	info   *p4configv1.P4Info
}

// Start creates the namespace and veths, starts the switch, and becomes
// its primary controller. Close undoes all of it.
func Start(ctx context.Context, opts Options) (*Device, error) {
	if opts.Namespace == "" {
		opts.Namespace = fmt.Sprintf("trptp4rt%d", os.Getpid())
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:19650"
	}
	if opts.Settle == 0 {
		opts.Settle = 150 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	ports := append([]uint32(nil), opts.Ports...)
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	ns, err := newNamespace(ctx, opts.Namespace, ports, !opts.Veth)
	if err != nil {
		return nil, err
	}
	d := &Device{opts: opts, ns: ns, ports: map[uint32]*hostPort{}, stop: make(chan struct{}), exit: make(chan struct{}),
		out: &tailWriter{max: 4096}, elect: &p4v1.Uint128{High: 1}}
	// A failed start undoes what it did; d is a local, not the result, so
	// that "return nil, err" cannot leave Close a nil device (it did).
	if err := d.start(ctx, ports); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// start opens the ports, starts the switch and becomes its primary.
func (d *Device) start(ctx context.Context, ports []uint32) error {
	ns, opts := d.ns, d.opts
	// Ports first: TUN devices exist only while their descriptor is open.
	for _, p := range ports {
		hp, err := ns.openPort(ctx, p)
		if err != nil {
			return err
		}
		d.ports[p] = hp
		d.wg.Add(1)
		go func() { defer d.wg.Done(); hp.read(d.stop) }()
	}
	d.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.name, opts.Switch}, switchArgs(ns, ports, opts.Addr, opts.Program)...)...)
	w := io.MultiWriter(opts.Log, d.out)
	d.cmd.Stdout, d.cmd.Stderr = w, w
	if err := d.cmd.Start(); err != nil {
		d.cmd = nil
		return fmt.Errorf("starting %s: %w", opts.Switch, err)
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exit) }()
	var err error
	d.conn, err = grpc.NewClient("passthrough:///"+opts.Addr,
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return ns.dial(ctx, addr) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(256<<20), grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return err
	}
	d.rt = p4v1.NewP4RuntimeClient(d.conn)
	return d.arbitrate(ctx)
}

// answers reports whether the switch serves P4Runtime yet.
func (d *Device) answers(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := d.rt.Capabilities(cctx, &p4v1.CapabilitiesRequest{})
	return err
}

// switchArgs is the switch's command line, in simple_switch_grpc's form:
// general options, then "--" and the target's own (--grpc-server-addr,
// --cpu-port), which BMv2 refuses before the "--" and terrapin-switch takes
// on either side.
func switchArgs(ns *namespace, ports []uint32, addr, program string) []string {
	if program == "" {
		program = "--no-p4"
	}
	args := []string{program, "--device-id", fmt.Sprint(deviceID),
		// BMv2's notification socket is a file (ipc://), shared by every
		// BMv2 on the machine with the same device id unless named.
		"--notifications-addr", "ipc://" + ns.notificationsPath()}
	for _, p := range ports {
		args = append(args, "-i", fmt.Sprintf("%d@%s", p, ns.switchSide(p)))
	}
	return append(args, "--", "--grpc-server-addr", addr, "--cpu-port", "255")
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// ExitReason says how the switch ended (once Alive is false) and what it
// last printed.
func (d *Device) ExitReason() string {
	msg := filepath.Base(d.opts.Switch)
	select {
	case <-d.exit:
		if d.waitErr != nil {
			msg += " exited (" + d.waitErr.Error() + ")"
		} else {
			msg += " exited"
		}
	default:
		msg += " is running"
	}
	if out := d.out.String(); out != "" {
		return msg + "; its last output:\n" + out
	}
	return msg + " without a word"
}

// arbitrate opens the stream channel, retrying while the switch starts
// (Passive: only waits until the switch answers).
func (d *Device) arbitrate(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		if d.opts.Passive {
			err := d.answers(ctx)
			if err == nil {
				return nil
			}
			if done, werr := d.waitRetry(ctx, deadline, err); done {
				return werr
			}
			continue
		}
		sctx, cancel := context.WithCancel(context.Background())
		st, err := d.rt.StreamChannel(sctx)
		if err == nil {
			err = st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{
				Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: deviceID, ElectionId: d.elect}}})
		}
		var resp *p4v1.StreamMessageResponse
		if err == nil {
			resp, err = st.Recv()
		}
		if err == nil {
			if c := resp.GetArbitration().GetStatus().GetCode(); c != 0 {
				cancel()
				return fmt.Errorf("the switch did not make us primary (status %d)", c)
			}
			d.cstr = cancel
			go func() { // keep the stream drained (PacketIn, digests)
				for {
					if _, err := st.Recv(); err != nil {
						return
					}
				}
			}()
			return nil
		}
		cancel()
		if done, werr := d.waitRetry(ctx, deadline, err); done {
			return werr
		}
	}
}

// waitRetry waits before the next start-up attempt; done says to stop
// trying, with the error to report.
func (d *Device) waitRetry(ctx context.Context, deadline time.Time, last error) (done bool, err error) {
	select {
	case <-d.exit:
		return true, fmt.Errorf("during start-up, %s", d.ExitReason())
	case <-ctx.Done():
		return true, d.noAnswer(ctx.Err())
	case <-time.After(100 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		return true, d.noAnswer(last)
	}
	return false, nil
}

// noAnswer is the error of a switch that runs but does not become our
// P4Runtime server: what went wrong last, and what the switch said.
func (d *Device) noAnswer(last error) error {
	msg := fmt.Sprintf("no P4Runtime answer from %s at %s: %v", filepath.Base(d.opts.Switch), d.opts.Addr, last)
	if out := d.out.String(); out != "" {
		msg += "; its output:\n" + out
	}
	return errors.New(msg)
}

// Close stops the switch and removes the namespace. It undoes a start that
// failed half-way as well (Start calls it then).
func (d *Device) Close() {
	if d == nil {
		return
	}
	if d.cstr != nil {
		d.cstr()
	}
	if d.conn != nil {
		d.conn.Close()
	}
	if d.cmd != nil && d.cmd.Process != nil {
		// SIGTERM: simple_switch_grpc ignores SIGINT (terrapin-switch
		// takes either).
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exit:
		case <-time.After(5 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exit
		}
	}
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	d.wg.Wait()
	for _, hp := range d.ports {
		if hp.fd >= 0 {
			_ = closeFD(hp.fd)
		}
	}
	d.ns.remove()
}

// Load pushes a program (VERIFY_AND_COMMIT: empty forwarding state) and
// forgets the previous program's control-plane state.
func (d *Device) Load(ctx context.Context, info *p4configv1.P4Info, bmv2JSON []byte) error {
	_, err := d.rt.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: deviceID, ElectionId: d.elect,
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: bmv2JSON},
	})
	if err != nil {
		return fmt.Errorf("SetForwardingPipelineConfig: %s", status.Convert(err).Message())
	}
	d.groups, d.clones = map[uint32][]int{}, map[uint32]bool{}
	// The runner resolves STF names against an engine model of the program.
	model, err := engine.Load(bmv2JSON, engine.Options{})
	if err != nil {
		return fmt.Errorf("loading the program for name resolution: %v", err)
	}
	d.loaded = &stf.Program{JSON: bmv2JSON, Model: model}
	d.info = info
	for _, hp := range d.ports {
		hp.take()
	}
	return nil
}

// Write sends updates; a failure names the first failing update's error.
func (d *Device) Write(ctx context.Context, updates ...*p4v1.Update) error {
	_, err := d.rt.Write(ctx, &p4v1.WriteRequest{DeviceId: deviceID, ElectionId: d.elect, Updates: updates})
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	for i, det := range st.Details() {
		if pe, ok := det.(*p4v1.Error); ok && pe.GetCanonicalCode() != 0 {
			return fmt.Errorf("update %d: %s", i, pe.GetMessage())
		}
	}
	return fmt.Errorf("write: %s", st.Message())
}

// minFrame is the shortest frame an Ethernet interface carries: the
// kernel refuses to send less than a link-layer header (dev_validate_header).
const minFrame = 14

// Send injects frame on port's veth. Frames shorter than an Ethernet
// header cannot cross a veth; they are zero-padded to 14 bytes, so the
// switch sees the padding as payload (docs/p4runtime.md).
func (d *Device) Send(port uint32, frame []byte) error {
	hp, ok := d.ports[port]
	if !ok {
		return fmt.Errorf("port %d was not created (Options.Ports)", port)
	}
	if !hp.tun && len(frame) < minFrame {
		frame = append(append(make([]byte, 0, minFrame), frame...), make([]byte, minFrame-len(frame))...)
	}
	return hp.send(frame)
}

// Collect waits until no frame has arrived on any port for the settle time
// (at most max), then returns and clears everything received per port.
func (d *Device) Collect(max time.Duration) map[uint32][][]byte {
	d.waitQuiet(max)
	out := map[uint32][][]byte{}
	for p, hp := range d.ports {
		if f := hp.take(); len(f) > 0 {
			out[p] = f
		}
	}
	return out
}

// waitQuiet returns once no frame has arrived for the settle time (the
// frames are kept for Collect), or after max.
func (d *Device) waitQuiet(max time.Duration) {
	start := time.Now()
	for time.Since(start) < max {
		quiet := true
		for _, hp := range d.ports {
			if time.Since(hp.lastArrival()) < d.opts.Settle {
				quiet = false
			}
		}
		if quiet && time.Since(start) >= d.opts.Settle {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Read reads entities; a per-entity failure becomes the error.
func (d *Device) Read(ctx context.Context, entities ...*p4v1.Entity) ([]*p4v1.Entity, error) {
	st, err := d.rt.Read(ctx, &p4v1.ReadRequest{DeviceId: deviceID, Entities: entities})
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read: %s", status.Convert(err).Message())
		}
		out = append(out, r.GetEntities()...)
	}
}

// WrotePRE reports whether the program last loaded has written multicast
// groups or clone sessions. simple_switch_grpc keeps those in its
// replication engine across SetForwardingPipelineConfig while PI forgets
// them, so the next program's group of the same id gets their replicas on
// top of its own (p4c's ipv6-switch-ml-bmv2 after v1model-special-ops-bmv2:
// every frame twice); terrapin-switch clears them, as VERIFY_AND_COMMIT
// should.
func (d *Device) WrotePRE() bool { return len(d.groups) > 0 || len(d.clones) > 0 }

// Alive reports whether the switch process is still running.
func (d *Device) Alive() bool {
	select {
	case <-d.exit:
		return false
	default:
		return true
	}
}

// RunScript runs an STF script against the program last loaded with Load,
// through the conformance runner (stf.Run: the same name resolution and
// output comparison as the engine path) with this device as its backend.
func (d *Device) RunScript(ctx context.Context, script string) error {
	if d.loaded == nil {
		return errors.New("no program loaded")
	}
	cmds, err := stf.ParseScript(strings.NewReader(script))
	if err != nil {
		return err
	}
	b := &Backend{dev: d, prog: d.loaded, info: d.info}
	defer b.Stop()
	return stf.Run(b, d.loaded, cmds, nil)
}

// Client is the device's P4Runtime client; Primary is the election id
// under which the device's stream is primary (for Write requests).
func (d *Device) Client() p4v1.P4RuntimeClient { return d.rt }

// Primary returns the election id of the device's primary stream.
func (d *Device) Primary() *p4v1.Uint128 { return d.elect }

// DeviceID is the P4Runtime device id the switch is started with.
const DeviceID = deviceID
