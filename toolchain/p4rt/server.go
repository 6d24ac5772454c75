package p4rt

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
)

// APIVersion is the P4Runtime version the server implements.
const APIVersion = "1.4.1"

// maxMessageBytes bounds gRPC messages. A BMv2 JSON for a large program is
// several MB, past gRPC's 4 MB default (the spec's §A.7 asks servers to
// take large SetForwardingPipelineConfig requests).
const maxMessageBytes = 256 << 20

// Config configures a Server.
type Config struct {
	// DeviceID is the P4Runtime device id (simple_switch_grpc --device-id).
	DeviceID uint64
	Target   Target
	// Logger receives per-request diagnostics; nil discards them.
	Logger *slog.Logger
	// Program is the BMv2 JSON the target was started with (the switch's
	// command line), nil if none: PI's legacy P4DeviceConfig without
	// device_data installs a P4Info over it (devconfig.go).
	Program []byte
	// TLS, when set, serves P4Runtime over TLS with it (and checks client
	// certificates as it says); nil serves plaintext.
	TLS *tls.Config
	// Also registers more services on the same gRPC server (the switch's
	// gNMI), as Stratum and simple_switch_grpc serve theirs beside
	// P4Runtime on one address.
	Also []func(grpc.ServiceRegistrar)
	// Translations maps the values of the P4Info's @p4runtime_translation
	// types for the URIs it names (terrapin-switch --translation-file);
	// nil, or a URI it does not name, is the identity on the number
	// (translate.go).
	Translations *Translations
}

// Server is the P4Runtime service of one device.
type Server struct {
	p4v1.UnimplementedP4RuntimeServer

	deviceID uint64
	target   Target
	log      *slog.Logger
	tls      *tls.Config
	also     []func(grpc.ServiceRegistrar)
	trans    *Translations
	// untranslatable limits the warnings about PacketIns and digests
	// dropped because the translation cannot express a value.
	untranslatable warnLimiter
	arb            *arbiter
	digests        *digestEngine
	idle           *idleNotifier

	// mu serializes writes and pipeline changes; reads share it (the spec's
	// §13.5 allows a single reader/writer lock).
	mu sync.RWMutex
	// cur is the pipeline Reads and Writes refer to: the committed one, or
	// the one a VERIFY_AND_SAVE saved (then committed is false).
	cur       *pipelineState
	committed bool
	// running is the BMv2 JSON the device forwards with (Config.Program,
	// then each committed pipeline's).
	running []byte
	// io is cur's schema, for the packet paths that must not take mu.
	io atomic.Pointer[schema]
}

// NewServer creates a server for cfg.Target and registers its sinks there.
func NewServer(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{deviceID: cfg.DeviceID, target: cfg.Target, log: log, tls: cfg.TLS, also: cfg.Also, trans: cfg.Translations, arb: newArbiter(), running: cfg.Program}
	s.digests = newDigestEngine(s)
	s.idle = newIdleNotifier(s)
	cfg.Target.SetControllerSink(s.toController)
	cfg.Target.SetDigestSink(s.digests.receive)
	return s
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { p4v1.RegisterP4RuntimeServer(g, s) }

// Serve serves P4Runtime on lis until ctx is done, then stops gracefully
// (giving open streams a second to finish).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes)}
	if s.tls != nil {
		opts = append(opts, grpc.Creds(handshakeLogger{credentials.NewTLS(s.tls.Clone()), s.log}))
	}
	g := grpc.NewServer(opts...)
	s.Register(g)
	for _, register := range s.also {
		register(g)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.digests.run(ctx)
	go s.idle.run(ctx)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		g.Stop()
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// handshakeLogger logs each failed TLS handshake once, with the client's
// address and what was wrong (a plaintext client, a certificate from
// another CA, an expired one, none): gRPC itself only closes the
// connection, and the client often sees no more than that.
type handshakeLogger struct {
	credentials.TransportCredentials
	log *slog.Logger
}

// errClientLeft stands for an EOF once the handshake has begun: the switch
// has sent its certificate and the client hung up, as gRPC's C core does
// when it does not trust that certificate.
var errClientLeft = errors.New("the client closed the connection during the handshake: it may not trust this switch's certificate (another CA, out of its dates); the client's own error says why")

func (h handshakeLogger) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	counted := &readCounter{Conn: conn}
	c, info, err := h.TransportCredentials.ServerHandshake(counted)
	switch {
	case err == nil:
		return c, info, nil
	case errors.Is(err, io.EOF) && !counted.any:
		// closed before saying anything: a port probe (a start-up script
		// waiting for the port), not a client to refuse
		h.log.Debug("P4Runtime connection closed before the TLS handshake", "client", conn.RemoteAddr().String())
	case errors.Is(err, io.EOF):
		h.log.Warn("P4Runtime TLS handshake failed", "client", conn.RemoteAddr().String(), "err", errClientLeft)
	default:
		h.log.Warn("P4Runtime TLS handshake failed", "client", conn.RemoteAddr().String(), "err", err)
	}
	return c, info, err
}

func (h handshakeLogger) Clone() credentials.TransportCredentials {
	return handshakeLogger{h.TransportCredentials.Clone(), h.log}
}

// readCounter notes whether anything was read from the connection. Only
// the handshake's goroutine writes any (the first read), and it is read
// there after the handshake.
type readCounter struct {
	net.Conn
	any bool
}

func (r *readCounter) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if n > 0 && !r.any {
		r.any = true
	}
	return n, err
}

// Capabilities reports the implemented API version (spec §17).
func (s *Server) Capabilities(context.Context, *p4v1.CapabilitiesRequest) (*p4v1.CapabilitiesResponse, error) {
	return &p4v1.CapabilitiesResponse{P4RuntimeApiVersion: APIVersion}, nil
}

func (s *Server) checkDevice(id uint64) error {
	if id != s.deviceID {
		return errorf(codes.NotFound, "unknown device id %d (this switch is %d)", id, s.deviceID)
	}
	return nil
}

// checkPrimary applies the checks the spec orders before a Write or
// SetForwardingPipelineConfig: device, then primary (§12, §14).
func (s *Server) checkPrimary(deviceID uint64, role string, election *p4v1.Uint128) error {
	if err := s.checkDevice(deviceID); err != nil {
		return err
	}
	if !s.arb.knownRole(role) {
		return errorf(codes.NotFound, "unknown role %q", role)
	}
	if !s.arb.isPrimary(role, electionOf(election)) {
		return errorf(codes.PermissionDenied, "not the primary controller for role %q (send a MasterArbitrationUpdate with the highest election id first)", role)
	}
	return nil
}

// SetForwardingPipelineConfig installs a pipeline (spec §14).
func (s *Server) SetForwardingPipelineConfig(ctx context.Context, req *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	if err := s.checkPrimary(req.GetDeviceId(), req.GetRole(), req.GetElectionId()); err != nil {
		return nil, rpcError(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.setPipeline(ctx, req); err != nil {
		s.log.Info("SetForwardingPipelineConfig failed", "action", req.GetAction().String(), "err", err)
		return nil, rpcError(err)
	}
	s.log.Info("SetForwardingPipelineConfig", "action", req.GetAction().String())
	return &p4v1.SetForwardingPipelineConfigResponse{}, nil
}

func (s *Server) setPipeline(ctx context.Context, req *p4v1.SetForwardingPipelineConfigRequest) error {
	cfg := req.GetConfig()
	prepare := func() (*pipelineState, error) {
		if cfg == nil {
			return nil, invalid("config is missing")
		}
		program, err := s.programOf(req.GetAction(), decodeDeviceConfig(cfg.GetP4DeviceConfig()))
		if err != nil {
			return nil, err
		}
		if cfg.GetP4Info() == nil {
			return nil, invalid("config has no p4info")
		}
		prepared, err := s.target.PreparePipeline(ctx, program)
		if err != nil {
			return nil, invalid("device config cannot be realized: %v", err)
		}
		// The P4Info is checked against the program as the device loaded
		// it, so the device config is parsed once.
		sch, err := newSchema(cfg.GetP4Info(), prepared.Schema(), s.trans)
		if err != nil {
			prepared.Discard()
			return nil, err
		}
		// The config is kept as sent (GetForwardingPipelineConfig returns
		// it so, wrapper and all, as PI does).
		kept := proto.Clone(cfg).(*p4v1.ForwardingPipelineConfig)
		ps := newPipelineState(kept, sch, prepared)
		ps.program = program
		return ps, nil
	}
	switch req.GetAction() {
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY:
		ps, err := prepare()
		if err != nil {
			return err
		}
		ps.prepared.Discard()
		return nil
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE:
		ps, err := prepare()
		if err != nil {
			return err
		}
		// Writes from now on program the saved pipeline directly, so COMMIT
		// needs no replay: the writes are already in it.
		s.dropSaved()
		s.cur, s.committed = ps, false
		s.io.Store(ps.schema)
		return nil
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT:
		ps, err := prepare()
		if err != nil {
			return err
		}
		if err := ps.prepared.Commit(); err != nil {
			ps.prepared.Discard()
			return errorf(codes.Internal, "committing the pipeline: %v", err)
		}
		s.dropSaved()
		s.install(ps)
		return nil
	case p4v1.SetForwardingPipelineConfigRequest_COMMIT:
		if cfg != nil {
			return invalid("COMMIT takes no config")
		}
		if s.cur == nil || s.committed {
			return errorf(codes.NotFound, "no saved config to commit (VERIFY_AND_SAVE first)")
		}
		if err := s.cur.prepared.Commit(); err != nil {
			return errorf(codes.Internal, "committing the pipeline: %v", err)
		}
		s.install(s.cur)
		return nil
	case p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT:
		ps, err := prepare()
		if err != nil {
			return err
		}
		if s.cur != nil {
			s.reconcile(s.cur, ps)
		}
		if err := ps.prepared.Commit(); err != nil {
			ps.prepared.Discard()
			return errorf(codes.Internal, "committing the pipeline: %v", err)
		}
		s.dropSaved()
		s.install(ps)
		return nil
	default:
		return invalid("unknown SetForwardingPipelineConfig action %v", req.GetAction())
	}
}

// programOf is the BMv2 JSON a pipeline change installs. A P4DeviceConfig
// without device_data names none: PI then keeps the program the switch
// runs (VERIFY_AND_COMMIT only; VERIFY does not look at the device config
// at all there). Where PI would go on with no program at all — the switch
// runs none, or another action hands BMv2 the empty data — it answers OK
// and leaves a switch whose every table write fails, or one that crashes:
// those are refused here instead.
func (s *Server) programOf(action p4v1.SetForwardingPipelineConfigRequest_Action, dc deviceConfig) ([]byte, error) {
	if dc.json != nil {
		return dc.json, nil
	}
	switch action {
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY, p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT:
	default:
		return nil, invalid("p4_device_config carries no program (a P4DeviceConfig without device_data keeps the running program with VERIFY_AND_COMMIT only)")
	}
	if s.running == nil {
		return nil, errorf(codes.FailedPrecondition, "p4_device_config carries no program and the switch runs none: put the BMv2 JSON in p4_device_config (or in the P4DeviceConfig's device_data)")
	}
	return s.running, nil
}

// dropSaved discards a saved, uncommitted pipeline.
func (s *Server) dropSaved() {
	if s.cur != nil && !s.committed {
		s.cur.prepared.Discard()
		s.cur = nil
		s.io.Store(nil)
	}
}

func (s *Server) install(ps *pipelineState) {
	s.cur, s.committed, s.running = ps, true, ps.program
	s.io.Store(ps.schema)
	s.digests.reset(ps)
	s.idle.poke()
}

// PipelineReplaced tells the server that the device now forwards with
// program, a pipeline pushed by another control plane (BMv2's Thrift
// runtime: load_new_config and swap_configs), whose P4Info the server does
// not have. The server forgets its pipeline: reads, writes and PacketOut
// answer as before any SetForwardingPipelineConfig (FAILED_PRECONDITION)
// until a controller pushes one, which may keep the device's program
// (a P4DeviceConfig without device_data) now that it is program.
func (s *Server) PipelineReplaced(program []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && !s.committed {
		s.cur.prepared.Discard()
	}
	s.cur, s.committed, s.running = nil, false, program
	s.io.Store(nil)
	s.digests.forget()
}

// GetForwardingPipelineConfig returns the config as set (spec §15).
func (s *Server) GetForwardingPipelineConfig(_ context.Context, req *p4v1.GetForwardingPipelineConfigRequest) (*p4v1.GetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, rpcError(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cur == nil {
		return &p4v1.GetForwardingPipelineConfigResponse{}, nil
	}
	c := s.cur.config
	out := &p4v1.ForwardingPipelineConfig{}
	if c.GetCookie() != nil {
		out.Cookie = &p4v1.ForwardingPipelineConfig_Cookie{Cookie: c.GetCookie().GetCookie()}
	}
	switch req.GetResponseType() {
	case p4v1.GetForwardingPipelineConfigRequest_ALL:
		out.P4Info = c.GetP4Info()
		out.P4DeviceConfig = c.GetP4DeviceConfig()
	case p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY:
	case p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE:
		out.P4Info = c.GetP4Info()
	case p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE:
		out.P4DeviceConfig = c.GetP4DeviceConfig()
	default:
		return nil, rpcError(invalid("unknown response_type %v", req.GetResponseType()))
	}
	return &p4v1.GetForwardingPipelineConfigResponse{Config: out}, nil
}
