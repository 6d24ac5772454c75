package p4rt_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/p4rt/enginetarget"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/prototext"
)

// program is a P4 program of testdata compiled by terrapin-p4c: the server
// is tested with the toolchain's own output, as the switch runs it.
type program struct {
	json []byte
	info *p4configv1.P4Info
	err  error
}

// Test programs: mainProgram has one object of most kinds, profileProgram
// has action profiles, selectors and a parser value set.
const (
	mainProgram    = "testdata/p4rt_test.p4"
	profileProgram = "testdata/p4rt_profiles.p4"
)

var (
	compileMu sync.Mutex
	compiled  = map[string]program{}
)

func testProgram(tb testing.TB) program { return testProgramFile(tb, mainProgram) }

// testProgramFile compiles path once per test binary.
func testProgramFile(tb testing.TB, path string) program {
	tb.Helper()
	compileMu.Lock()
	p, ok := compiled[path]
	if !ok {
		p = compileProgram(path)
		compiled[path] = p
	}
	compileMu.Unlock()
	if p.err != nil {
		tb.Fatalf("compiling %s: %v", path, p.err)
	}
	return p
}

func compileProgram(path string) program {
	dir, err := os.MkdirTemp("", "p4rt-test")
	if err != nil {
		return program{err: err}
	}
	defer os.RemoveAll(dir)
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(gobin, "build", "-o", dir+"/", "./cmd/terrapin-p4c")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return program{err: errors.New("building terrapin-p4c: " + err.Error() + "\n" + string(out))}
	}
	jsonPath, infoPath := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.p4info.txtpb")
	cmd := exec.Command(filepath.Join(dir, "terrapin-p4c"), "--target", "bmv2", "--arch", "v1model",
		"--p4runtime-files", infoPath, "-o", jsonPath, path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return program{err: errors.New(err.Error() + "\n" + string(out))}
	}
	js, err := os.ReadFile(jsonPath)
	if err != nil {
		return program{err: err}
	}
	info, err := readP4Info(infoPath)
	if err != nil {
		return program{err: err}
	}
	return program{json: js, info: info}
}

// readP4Info reads a P4Info text file.
func readP4Info(path string) (*p4configv1.P4Info, error) {
	txt, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	info := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(txt, info); err != nil {
		return nil, err
	}
	return info, nil
}

// bugLog records log records at error level: the server logs a recovered
// panic as "BUG", which a test must treat as a failure.
type bugLog struct {
	mu   sync.Mutex
	bugs []string
}

func (b *bugLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (b *bugLog) Handle(_ context.Context, r slog.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	b.bugs = append(b.bugs, msg)
	return nil
}
func (b *bugLog) WithAttrs([]slog.Attr) slog.Handler { return b }
func (b *bugLog) WithGroup(string) slog.Handler      { return b }

func (b *bugLog) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.bugs
	b.bugs = nil
	return out
}

// harness is a server over the in-process engine target, reached through
// an in-memory gRPC connection.
type harness struct {
	t      testing.TB
	prog   program
	target *enginetarget.Loopback
	srv    *p4rt.Server
	client p4v1.P4RuntimeClient
	bugs   *bugLog
	ctx    context.Context
	// primary is the election id the harness's own stream holds.
	primary *p4v1.Uint128
}

const deviceID = 7

func newHarness(tb testing.TB) *harness { return newHarnessFor(tb, mainProgram) }

// newHarnessFor is a harness whose config is the program at path.
func newHarnessFor(tb testing.TB, path string) *harness {
	tb.Helper()
	return newHarnessWith(tb, testProgramFile(tb, path))
}

// newHarnessWith is a harness whose config is prog (a program compiled
// elsewhere, e.g. a corpus pair written by p4c).
func newHarnessWith(tb testing.TB, prog program) *harness {
	tb.Helper()
	return newHarnessConfig(tb, prog, nil)
}

// newHarnessConfig is newHarnessWith whose server configuration set
// adjusts (nil: none).
func newHarnessConfig(tb testing.TB, prog program, set func(*p4rt.Config)) *harness {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	bugs := &bugLog{}
	target := enginetarget.NewLoopback()
	cfg := p4rt.Config{DeviceID: deviceID, Target: target, Logger: slog.New(bugs)}
	if set != nil {
		set(&cfg)
	}
	srv := p4rt.NewServer(cfg)
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(served) }()
	tb.Cleanup(func() { cancel(); <-served })
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	h := &harness{t: tb, prog: prog, target: target, srv: srv, client: p4v1.NewP4RuntimeClient(conn), bugs: bugs, ctx: ctx}
	tb.Cleanup(func() {
		for _, b := range bugs.take() {
			tb.Errorf("server logged an error: %s", b)
		}
	})
	return h
}

// session is one StreamChannel.
type session struct {
	stream p4v1.P4Runtime_StreamChannelClient
	in     chan *p4v1.StreamMessageResponse
	cancel context.CancelFunc
}

func (h *harness) open(election *p4v1.Uint128, role string) (*session, *p4v1.MasterArbitrationUpdate) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	st, err := h.client.StreamChannel(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	s := &session{stream: st, in: make(chan *p4v1.StreamMessageResponse, 256), cancel: cancel}
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				close(s.in)
				return
			}
			s.in <- m
		}
	}()
	h.t.Cleanup(cancel)
	m := &p4v1.MasterArbitrationUpdate{DeviceId: deviceID, ElectionId: election}
	if role != "" {
		m.Role = &p4v1.Role{Name: role}
	}
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: m}}); err != nil {
		h.t.Fatal(err)
	}
	return s, s.nextArbitration(h.t)
}

func (s *session) next(tb testing.TB, want func(*p4v1.StreamMessageResponse) bool) *p4v1.StreamMessageResponse {
	tb.Helper()
	return s.nextWithin(tb, 3*time.Second, want)
}

// nextWithin waits up to d for a matching message (nil if none came).
func (s *session) nextWithin(tb testing.TB, d time.Duration, want func(*p4v1.StreamMessageResponse) bool) *p4v1.StreamMessageResponse {
	tb.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-s.in:
			if !ok {
				return nil
			}
			if want(m) {
				return m
			}
		case <-timeout:
			return nil
		}
	}
}

func (s *session) nextArbitration(tb testing.TB) *p4v1.MasterArbitrationUpdate {
	tb.Helper()
	m := s.next(tb, func(m *p4v1.StreamMessageResponse) bool { return m.GetArbitration() != nil })
	return m.GetArbitration()
}

// becomePrimary opens the harness's own controller stream.
func (h *harness) becomePrimary() {
	h.t.Helper()
	h.primary = &p4v1.Uint128{High: 1}
	_, a := h.open(h.primary, "")
	if codes.Code(a.GetStatus().GetCode()) != codes.OK {
		h.t.Fatalf("not primary: %v", a)
	}
}

func (h *harness) config() *p4v1.ForwardingPipelineConfig {
	return &p4v1.ForwardingPipelineConfig{P4Info: h.prog.info, P4DeviceConfig: h.prog.json,
		Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 42}}
}

func (h *harness) setPipeline(action p4v1.SetForwardingPipelineConfigRequest_Action, cfg *p4v1.ForwardingPipelineConfig) error {
	_, err := h.client.SetForwardingPipelineConfig(h.ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: deviceID, ElectionId: h.primary, Action: action, Config: cfg})
	return err
}

// ready is a harness whose stream is primary and whose pipeline is set.
func ready(tb testing.TB) *harness { return readyFor(tb, mainProgram) }

func readyFor(tb testing.TB, path string) *harness {
	h := newHarnessFor(tb, path)
	h.becomePrimary()
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		tb.Fatalf("SetForwardingPipelineConfig: %v", err)
	}
	return h
}

// write sends updates and returns the per-update codes (all OK on success).
func (h *harness) write(updates ...*p4v1.Update) ([]codes.Code, error) {
	_, err := h.client.Write(h.ctx, &p4v1.WriteRequest{DeviceId: deviceID, ElectionId: h.primary, Updates: updates})
	out := make([]codes.Code, len(updates))
	if err == nil {
		return out, nil
	}
	st := status.Convert(err)
	if st.Code() != codes.Unknown {
		return nil, err
	}
	if len(st.Details()) != len(updates) {
		h.t.Fatalf("%d error details for %d updates: %v", len(st.Details()), len(updates), err)
	}
	for i, d := range st.Details() {
		pe, ok := d.(*p4v1.Error)
		if !ok {
			h.t.Fatalf("detail %d is %T, not p4.v1.Error", i, d)
		}
		out[i] = codes.Code(pe.GetCanonicalCode())
	}
	return out, nil
}

// mustWrite fails the test unless every update succeeds.
func (h *harness) mustWrite(updates ...*p4v1.Update) {
	h.t.Helper()
	cs, err := h.write(updates...)
	if err != nil {
		h.t.Fatalf("write: %v", err)
	}
	for i, c := range cs {
		if c != codes.OK {
			h.t.Fatalf("update %d: %v", i, c)
		}
	}
}

func (h *harness) read(entities ...*p4v1.Entity) ([]*p4v1.Entity, error) {
	st, err := h.client.Read(h.ctx, &p4v1.ReadRequest{DeviceId: deviceID, Entities: entities})
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for {
		r, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, r.GetEntities()...)
	}
}

// Ids by name from the compiled P4Info.
func (h *harness) tableID(name string) uint32 {
	for _, t := range h.prog.info.GetTables() {
		if t.GetPreamble().GetName() == name {
			return t.GetPreamble().GetId()
		}
	}
	h.t.Fatalf("no table %s in P4Info", name)
	return 0
}

func (h *harness) actionID(name string) uint32 {
	for _, a := range h.prog.info.GetActions() {
		if a.GetPreamble().GetName() == name {
			return a.GetPreamble().GetId()
		}
	}
	h.t.Fatalf("no action %s in P4Info", name)
	return 0
}

func (h *harness) objectID(kind, name string) uint32 {
	var pres []*p4configv1.Preamble
	switch kind {
	case "counter":
		for _, c := range h.prog.info.GetCounters() {
			pres = append(pres, c.GetPreamble())
		}
	case "direct_counter":
		for _, c := range h.prog.info.GetDirectCounters() {
			pres = append(pres, c.GetPreamble())
		}
	case "meter":
		for _, c := range h.prog.info.GetMeters() {
			pres = append(pres, c.GetPreamble())
		}
	case "direct_meter":
		for _, c := range h.prog.info.GetDirectMeters() {
			pres = append(pres, c.GetPreamble())
		}
	case "register":
		for _, c := range h.prog.info.GetRegisters() {
			pres = append(pres, c.GetPreamble())
		}
	case "digest":
		for _, c := range h.prog.info.GetDigests() {
			pres = append(pres, c.GetPreamble())
		}
	case "action_profile":
		for _, c := range h.prog.info.GetActionProfiles() {
			pres = append(pres, c.GetPreamble())
		}
	case "value_set":
		for _, c := range h.prog.info.GetValueSets() {
			pres = append(pres, c.GetPreamble())
		}
	}
	for _, p := range pres {
		if p.GetName() == name || strings.HasSuffix(p.GetName(), "."+name) {
			return p.GetId()
		}
	}
	h.t.Fatalf("no %s %s in P4Info", kind, name)
	return 0
}
