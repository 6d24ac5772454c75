// Package bmthrift serves BMv2's Thrift runtime on terrapin-switch: the
// services simple_switch_CLI (runtime_CLI.py, sswitch_CLI.py), p4utils and
// BMv2 scripts call — "standard" (tables, action profiles, counters,
// meters, registers, parser value sets, config swap, management),
// "simple_pre_lag" (the multicast engine, mc_*) and "simple_switch"
// (mirroring, egress queues, the clock) — over Thrift's multiplexed binary
// protocol on a buffered socket, as BMv2 serves them.
//
// The Go code of the services is generated from BMv2's own IDL files by
// the Apache Thrift compiler (gen/, gen/generate.sh); this package only
// implements the handlers, over the same engine pipeline and device the
// P4Runtime server drives, so what one control plane writes the other
// reads (docs/switch.md, "BMv2's Thrift runtime").
package bmthrift

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/terrapin/terrapin/toolchain/bmthrift/bmstate"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/simple_pre_lag"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/simple_switch"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/device/switchtarget"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Config configures the Thrift runtime server.
type Config struct {
	Target   *switchtarget.Target
	Device   *device.Device
	DeviceID uint64
	// ThriftPort is what bm_mgmt_get_info reports (switch_info).
	ThriftPort int
	// NotificationsSocket is where BMv2's notifications are published
	// (switch_info's notifications_socket); "": not published.
	NotificationsSocket string
	Logger              *slog.Logger
	// PipelineReplaced is called after swap_configs made the device
	// forward with a new program (the P4Runtime server forgets its
	// pipeline: p4rt.Server.PipelineReplaced).
	PipelineReplaced func(program []byte)
}

// Server is BMv2's Thrift runtime over one switch.
type Server struct {
	cfg Config
	log *slog.Logger

	// mu serializes the handlers (BMv2's runtime takes per-object locks;
	// a CLI session is one request at a time anyway) and guards the state
	// only this server keeps (per pipeline: view).
	mu      sync.Mutex
	view    *view
	pendCfg pendingConfig // load_new_config's, until swap_configs
}

type pendingConfig struct {
	prepared interface {
		Commit() error
		Discard()
	}
	json []byte
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log}
}

// SetPipelineReplaced sets Config.PipelineReplaced (before Serve).
func (s *Server) SetPipelineReplaced(f func(program []byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.PipelineReplaced = f
}

// Listen opens the server's socket on addr (host:port), so that an
// address in use is reported before the switch runs.
func Listen(addr string) (*thrift.TServerSocket, error) {
	sock, err := thrift.NewTServerSocket(addr)
	if err != nil {
		return nil, err
	}
	if err := sock.Listen(); err != nil {
		return nil, err
	}
	return sock, nil
}

// Addr is the address sock listens on.
func Addr(sock *thrift.TServerSocket) net.Addr { return sock.Addr() }

// Serve serves the three services on sock until ctx is done. Clients still
// connected then are given a second.
func (s *Server) Serve(ctx context.Context, sock *thrift.TServerSocket) error {
	mux := thrift.NewTMultiplexedProcessor()
	mux.RegisterProcessor("standard", standard.NewStandardProcessor(&std{s}))
	mux.RegisterProcessor("simple_pre_lag", simple_pre_lag.NewSimplePreLAGProcessor(&pre{s}))
	mux.RegisterProcessor("simple_switch", simple_switch.NewSimpleSwitchProcessor(&sswitch{s}))
	srv := thrift.NewTSimpleServer4(mux, sock, thrift.NewTBufferedTransportFactory(8192),
		thrift.NewTBinaryProtocolFactoryConf(&thrift.TConfiguration{MaxMessageSize: 256 << 20}))
	srv.SetLogger(func(msg string) { s.log.Debug("thrift", "msg", msg) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		_ = srv.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		// A CLI left open in interactive mode: its connection goroutine
		// ends with the process.
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendCfg.prepared != nil {
		s.pendCfg.prepared.Discard()
		s.pendCfg = pendingConfig{}
	}
	return nil
}

var errNoPipeline = errors.New("no pipeline")

// current returns the forwarding pipeline and this server's view of it,
// starting a new view when the pipeline changed (a P4Runtime push, a
// swap). Callers hold s.mu.
func (s *Server) current() (*view, error) {
	c, js, ok := s.cfg.Target.Current()
	if !ok || c.Engine == nil {
		return nil, errNoPipeline
	}
	if s.view == nil || s.view.pl != c.Engine {
		s.view = newView(c.Engine, js)
	}
	return s.view, nil
}

// view is the server's own state for one pipeline: what BMv2 keeps and the
// engine does not (the multicast engine's nodes and LAGs, keys as
// written).
type view struct {
	pl   *engine.Pipeline
	json []byte
	// written: per table, per entry handle, the key as a Thrift client
	// wrote it where it differs from the engine's normalized one (an lpm
	// value with bits past its prefix: BMv2 keeps them and dumps them).
	written map[int]map[uint32]writtenKey
	mc      *mcState
	// the program's state dump layout (state.go), read when first needed
	lay    *bmstate.Layout
	layErr error
	// the program's const entries by table name, as the JSON gives them
	// (tables.go, declaredKey), read when first needed
	declared map[string][]pipeline.TableEntry
}

type writtenKey struct {
	params standard.BmMatchParams
	norm   string // the engine's normalized key, to tell a reused handle
}

func newView(pl *engine.Pipeline, js []byte) *view {
	return &view{pl: pl, json: js, written: map[int]map[uint32]writtenKey{}, mc: newMCState()}
}
