// Command terrapin-switch runs a BMv2 JSON (v1model) program on Linux
// interfaces and serves P4Runtime: flags in, device running, nothing else.
// See docs/switch.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"google.golang.org/grpc"

	"github.com/terrapin/terrapin/toolchain/bmnotify"
	"github.com/terrapin/terrapin/toolchain/bmthrift"
	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/device/switchtarget"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/gnmiports"
	"github.com/terrapin/terrapin/toolchain/nanomsg"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/servertls"
)

const version = "terrapin-switch 0.1 (simple_switch_grpc compatible, v1model)"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "terrapin-switch: %v\n", err)
		return 2
	}
	if o.help {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if o.version {
		fmt.Fprintln(stdout, version)
		return 0
	}
	log, closeLog, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "terrapin-switch: %v\n", err)
		return 2
	}
	defer closeLog()
	tlsServer, err := loadTLS(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "terrapin-switch: %v\n", err)
		return 1
	}
	var translations *p4rt.Translations
	if o.translations != "" {
		// Read before anything starts, so a bad file stops the switch with
		// a message naming it.
		if translations, err = p4rt.LoadTranslationFile(o.translations); err != nil {
			fmt.Fprintf(stderr, "terrapin-switch: --translation-file %v\n", err)
			return 1
		}
	}
	if err := serve(o, log, tlsServer, translations); err != nil {
		fmt.Fprintf(stderr, "terrapin-switch: %v\n", err)
		return 1
	}
	return 0
}

// loadTLS reads and checks the TLS files before anything starts, so a bad
// one stops the switch with a message naming it. Without --grpc-server-ssl
// the files are ignored with a warning, as simple_switch_grpc does.
func loadTLS(o *options, stderr io.Writer) (*servertls.Server, error) {
	f := o.grpcTLSFiles
	if !o.grpcTLS {
		if f.Cert != "" || f.Key != "" || f.CACert != "" || f.RequireClientCert {
			fmt.Fprintln(stderr, "terrapin-switch: warning: --grpc-server-ssl is not given, so P4Runtime is served "+
				"in plaintext and the other --grpc-server-* TLS options are ignored")
		}
		return nil, nil
	}
	s, err := servertls.Load(f)
	if err != nil {
		return nil, err
	}
	if problem := s.Validity(time.Now()); problem != "" {
		fmt.Fprintf(stderr, "terrapin-switch: warning: %s %s is %s: clients will refuse it\n",
			servertls.FlagCert, f.Cert, problem)
	}
	return s, nil
}

func newLogger(o *options, stderr io.Writer) (*slog.Logger, func(), error) {
	var w io.Writer
	closeFn := func() {}
	switch {
	case o.logFile != "":
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, err
		}
		w, closeFn = f, func() { f.Close() }
	case o.logConsole:
		w = stderr
	default:
		// Like BMv2 without --log-console: quiet, but errors still show.
		return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})), closeFn, nil
	}
	lvl := slog.LevelInfo
	switch o.logLevel {
	case "trace", "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error", "critical":
		lvl = slog.LevelError
	case "off":
		lvl = slog.LevelError + 100
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), closeFn, nil
}

// serve runs the device and its servers; tlsServer, when not nil, is the
// TLS both P4Runtime and the metrics are served with; translations (nil:
// none) the P4Runtime type translation file's mappings.
func serve(o *options, log *slog.Logger, tlsServer *servertls.Server, translations *p4rt.Translations) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if o.pcapDir != "" {
		if err := os.MkdirAll(o.pcapDir, 0o755); err != nil {
			return fmt.Errorf("--pcap: %w", err)
		}
	}
	var jsonBytes []byte
	if o.jsonPath != "" {
		b, err := os.ReadFile(o.jsonPath)
		if err != nil {
			return err
		}
		jsonBytes = b
	}
	dev, err := device.New(device.Config{
		Ports: o.ports, CPUPort: o.cpuPort, PriorityQueues: o.priorityQs,
		QueueCapacity: o.queueCapacity, PcapDir: o.pcapDir, Ring: o.ring,
		SpinPolls: o.spinPolls, Tx: o.tx, IO: o.io, Nice: o.nice, RTPriority: o.rtPriority, RingBytes: o.ringMB << 20, Logger: log,
	})
	if err != nil {
		return err
	}
	target := switchtarget.New(dev, switchtarget.EngineCompiler(dev, func(msg string) { log.Info("log_msg", "msg", msg) }))
	defer target.Close()
	if jsonBytes != nil {
		pp, err := target.PreparePipeline(ctx, jsonBytes)
		if err != nil {
			return fmt.Errorf("%s: %w", o.jsonPath, err)
		}
		if err := pp.Commit(); err != nil {
			return err
		}
		log.Info("program loaded", "json", o.jsonPath)
	}
	// BMv2's notifications (idle entries, port events), published where
	// --notifications-addr says, as simple_switch publishes them.
	// simple_switch_grpc publishes none (its notifications go to PI), and
	// without the option neither does terrapin-switch.
	notifySocket := ""
	if o.notifications != "" {
		pub, err := nanomsg.ListenPub(o.notifications)
		if err != nil {
			return fmt.Errorf("--notifications-addr: %w", err)
		}
		defer pub.Close()
		notifySocket = pub.Addr()
		current := func() *engine.Pipeline {
			if c, _, ok := target.Current(); ok {
				return c.Engine
			}
			return nil
		}
		go bmnotify.Run(ctx, pub, o.deviceID, bmnotify.Source{Pipeline: current, WatchPorts: dev.WatchPorts})
		log.Info("BMv2's notifications", "addr", notifySocket)
	}
	// BMv2's Thrift runtime's state; it restores a state dump before
	// anything serves, as BMv2 does.
	tsrv := bmthrift.New(bmthrift.Config{Target: target, Device: dev, DeviceID: o.deviceID, ThriftPort: o.thriftPort,
		NotificationsSocket: notifySocket, Logger: log})
	if o.restoreState != "" {
		b, err := os.ReadFile(o.restoreState)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("--restore-state %s: %w", o.restoreState, err)
		}
		if err := tsrv.RestoreState(b); err != nil {
			return fmt.Errorf("--restore-state %s: %w", o.restoreState, err)
		}
		log.Info("state restored", "file", o.restoreState)
	}
	if translations != nil {
		log.Info("P4Runtime type translation file", "file", o.translations, "uris", strings.Join(translations.URIs(), ","))
	}
	for _, ig := range o.ignored {
		log.Warn("option accepted for compatibility and ignored", "option", ig)
	}
	// BMv2's Thrift runtime: opened before anything serves, so a port
	// given on the command line and in use stops the switch.
	var thriftSock *thrift.TServerSocket
	if o.thriftPort != 0 {
		addr := net.JoinHostPort(o.thriftIP, strconv.Itoa(o.thriftPort))
		if thriftSock, err = bmthrift.Listen(addr); err != nil {
			if o.thriftPortSet {
				return fmt.Errorf("--thrift-port: %w", err)
			}
			log.Warn("the Thrift runtime is not served: its default port is taken (give --thrift-port)", "addr", addr, "err", err)
		}
	}

	lis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		return fmt.Errorf("--grpc-server-addr: %w", err)
	}
	pcfg := p4rt.Config{DeviceID: o.deviceID, Target: target, Logger: log, Program: jsonBytes,
		// The ports' link state, for controllers that follow it (finsy, ONOS).
		Also:         []func(grpc.ServiceRegistrar){gnmiports.New(dev, log).Register},
		Translations: translations}
	if tlsServer != nil {
		pcfg.TLS = tlsServer.Config
	}
	srv := p4rt.NewServer(pcfg)

	errc := make(chan error, 4)
	go func() { errc <- dev.Run(ctx) }()
	go func() { errc <- srv.Serve(ctx, lis) }()
	running := 2
	if thriftSock != nil {
		tsrv.SetPipelineReplaced(srv.PipelineReplaced)
		go func() { errc <- tsrv.Serve(ctx, thriftSock) }()
		running++
		log.Info("Thrift runtime", "addr", bmthrift.Addr(thriftSock).String())
	}
	var httpSrv *http.Server
	if o.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", dev.MetricsHandler())
		httpSrv = &http.Server{Addr: o.metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second,
			// one line per refused TLS handshake ("http: TLS handshake error from ...")
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		if tlsServer != nil {
			httpSrv.TLSConfig = tlsServer.Config.Clone()
		}
		mlis, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			stop()
			for ; running > 0; running-- {
				<-errc
			}
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		go func() {
			serveHTTP := httpSrv.Serve
			if tlsServer != nil {
				serveHTTP = func(l net.Listener) error { return httpSrv.ServeTLS(l, "", "") }
			}
			if err := serveHTTP(mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	log.Info("terrapin-switch running", "ports", len(o.ports), "grpc", lis.Addr().String(), "tls", tlsMode(o),
		"device_id", o.deviceID, "cpu_port", o.cpuPort)

	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
		running--
	}
	stop()
	if httpSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = httpSrv.Shutdown(sctx)
		cancel()
	}
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	log.Info("terrapin-switch stopped")
	return first
}

func tlsMode(o *options) string {
	switch {
	case !o.grpcTLS:
		return "off"
	case o.grpcTLSFiles.RequireClientCert:
		return "client certificates required"
	}
	return "server only"
}
