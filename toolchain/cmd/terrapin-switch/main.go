// Command terrapin-switch runs a BMv2 JSON (v1model) program on Linux
// interfaces and serves P4Runtime: flags in, device running, nothing else.
// See docs/switch.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/device/switchtarget"
	"github.com/terrapin/terrapin/toolchain/p4rt"
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
	if err := serve(o, log); err != nil {
		fmt.Fprintf(stderr, "terrapin-switch: %v\n", err)
		return 1
	}
	return 0
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

func serve(o *options, log *slog.Logger) error {
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
		SpinPolls: o.spinPolls, Tx: o.tx, Nice: o.nice, RTPriority: o.rtPriority, RingBytes: o.ringMB << 20, Logger: log,
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
	for _, ig := range o.ignored {
		log.Warn("option accepted for compatibility and ignored", "option", ig)
	}
	if o.thriftPort != 0 {
		log.Warn("the Thrift runtime is not served; use P4Runtime", "thrift-port", o.thriftPort)
	}

	lis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		return fmt.Errorf("--grpc-server-addr: %w", err)
	}
	srv := p4rt.NewServer(p4rt.Config{DeviceID: o.deviceID, Target: target, Logger: log, Program: jsonBytes})

	errc := make(chan error, 3)
	go func() { errc <- dev.Run(ctx) }()
	go func() { errc <- srv.Serve(ctx, lis) }()
	running := 2
	var httpSrv *http.Server
	if o.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", dev.MetricsHandler())
		httpSrv = &http.Server{Addr: o.metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		mlis, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			stop()
			for ; running > 0; running-- {
				<-errc
			}
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		go func() {
			if err := httpSrv.Serve(mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	log.Info("terrapin-switch running", "ports", len(o.ports), "grpc", lis.Addr().String(), "device_id", o.deviceID, "cpu_port", o.cpuPort)

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
