package p4rt_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/p4rt/enginetarget"
	"github.com/terrapin/terrapin/toolchain/servertls"
	"github.com/terrapin/terrapin/toolchain/servertls/testpki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// warnLog keeps the server's warnings: a refused handshake is one.
type warnLog struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func (w *warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.mu.Lock()
	w.lines = append(w.lines, msg)
	w.mu.Unlock()
	select {
	case w.added <- struct{}{}:
	default:
	}
	return nil
}
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnLog) WithGroup(string) slog.Handler      { return w }

// waitFor returns the first line from line number from on that holds every
// part, waiting for the server's handshake goroutine, which may log after
// the client has given up.
func (w *warnLog) waitFor(t *testing.T, from int, parts ...string) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		w.mu.Lock()
		for _, l := range w.lines[from:] {
			if containsAll(l, parts) {
				w.mu.Unlock()
				return l
			}
		}
		got := strings.Join(w.lines, "\n")
		w.mu.Unlock()
		select {
		case <-w.added:
		case <-deadline:
			t.Fatalf("the server logged no line with %q; it logged:\n%s", parts, got)
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func (w *warnLog) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lines)
}

// TestTLS serves P4Runtime with client certificates required, as
// terrapin-switch --grpc-server-ssl --grpc-server-with-client-auth does,
// and checks who gets in and what the server says about who does not.
func TestTLS(t *testing.T) {
	ca := testpki.NewCA(t, "terrapin test CA")
	other := testpki.NewCA(t, "another CA")
	srvCert := ca.Issue(t, "s1", testpki.Options{Server: true, Hosts: []string{"s1", "127.0.0.1"}})
	cfg, err := servertls.Load(servertls.Files{Cert: srvCert.CertPath, Key: srvCert.KeyPath, CACert: ca.CertPath, RequireClientCert: true})
	if err != nil {
		t.Fatal(err)
	}
	log := &warnLog{added: make(chan struct{}, 1)}
	srv := p4rt.NewServer(p4rt.Config{DeviceID: deviceID, Target: enginetarget.NewLoopback(), Logger: slog.New(log), TLS: cfg.Config})
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(served) }()
	t.Cleanup(func() { cancel(); <-served })

	now := time.Now()
	good := ca.Issue(t, "controller", testpki.Options{})
	expired := ca.Issue(t, "expired", testpki.Options{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
	early := ca.Issue(t, "early", testpki.Options{NotBefore: now.Add(time.Hour), NotAfter: now.Add(2 * time.Hour)})
	foreign := other.Issue(t, "controller", testpki.Options{})
	tlsCreds := func(serverName string, client *testpki.Leaf) credentials.TransportCredentials {
		c := &tls.Config{RootCAs: ca.Pool(), ServerName: serverName}
		if client != nil {
			pair, err := tls.LoadX509KeyPair(client.CertPath, client.KeyPath)
			if err != nil {
				t.Fatal(err)
			}
			// Sent whatever CAs the server names, as gRPC's C core (the
			// Python client's) does; Go's own client would send none.
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		return credentials.NewTLS(c)
	}
	tests := []struct {
		name  string
		creds credentials.TransportCredentials
		// clientErr must be in the client's error ("" when it gets in);
		// serverLog and serverLogAlso in the line the server logs. When
		// the server refuses, the client's error depends on whether the
		// server's alert arrives before the connection closes, so only the
		// server's log is sure to say why.
		clientErr, serverLog, serverLogAlso string
	}{
		{name: "right CA and client certificate", creds: tlsCreds("s1", &good)},
		{name: "by address", creds: tlsCreds("127.0.0.1", &good)},
		{name: "plaintext client", creds: insecure.NewCredentials(),
			serverLog: "first record does not look like a TLS handshake"},
		{name: "no client certificate", creds: tlsCreds("s1", nil),
			serverLog: "client didn't provide a certificate"},
		{name: "client certificate of another CA", creds: tlsCreds("s1", &foreign),
			serverLog: "certificate signed by unknown authority"},
		{name: "expired client certificate", creds: tlsCreds("s1", &expired),
			serverLog:     "certificate has expired or is not yet valid",
			serverLogAlso: "is after"},
		{name: "client certificate not yet valid", creds: tlsCreds("s1", &early),
			serverLog:     "certificate has expired or is not yet valid",
			serverLogAlso: "is before"},
		{name: "wrong host name", creds: tlsCreds("s2", &good),
			clientErr: "certificate is valid for s1, not s2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logged := log.count()
			conn, err := grpc.NewClient("passthrough:///bufnet",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			defer ccancel()
			resp, err := p4v1.NewP4RuntimeClient(conn).Capabilities(cctx, &p4v1.CapabilitiesRequest{})
			if tc.clientErr == "" && tc.serverLog == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if resp.P4RuntimeApiVersion != p4rt.APIVersion {
					t.Errorf("version %q", resp.P4RuntimeApiVersion)
				}
				if n := log.count(); n != logged {
					t.Errorf("the server logged %d lines for a client it let in", n-logged)
				}
				return
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("got %v, want the connection refused (Unavailable)", err)
			}
			if !strings.Contains(err.Error(), tc.clientErr) {
				t.Errorf("client error %q does not say %q", err, tc.clientErr)
			}
			if tc.serverLog != "" {
				log.waitFor(t, logged, "P4Runtime TLS handshake failed", tc.serverLog, tc.serverLogAlso)
			}
		})
	}
	t.Run("a port probe is not a refused client", func(t *testing.T) {
		logged := log.count()
		probe, err := lis.Dial()
		if err != nil {
			t.Fatal(err)
		}
		probe.Close()
		// a refusal after it: the probe's handshake ended first, so had
		// it been logged, it would be logged by now
		conn, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, _ = p4v1.NewP4RuntimeClient(conn).Capabilities(cctx, &p4v1.CapabilitiesRequest{})
		log.waitFor(t, logged, "first record does not look like a TLS handshake")
		log.mu.Lock()
		defer log.mu.Unlock()
		for _, l := range log.lines[logged:] {
			if strings.Contains(l, "EOF") {
				t.Errorf("the probe was logged: %q", l)
			}
		}
	})
	t.Run("a client that does not trust the switch hangs up", func(t *testing.T) {
		// as gRPC's C core does: no alert, the connection closed
		logged := log.count()
		raw, err := lis.Dial()
		if err != nil {
			t.Fatal(err)
		}
		c := tls.Client(&helloOnly{Conn: raw}, &tls.Config{RootCAs: other.Pool(), ServerName: "s1"})
		if err := c.Handshake(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("handshake: %v", err)
		}
		raw.Close()
		log.waitFor(t, logged, "P4Runtime TLS handshake failed", "the client closed the connection during the handshake")
	})
}

// helloOnly sends only its first write (a TLS ClientHello).
type helloOnly struct {
	net.Conn
	sent bool
}

func (h *helloOnly) Write(b []byte) (int, error) {
	if h.sent {
		return len(b), nil
	}
	h.sent = true
	return h.Conn.Write(b)
}
