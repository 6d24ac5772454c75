package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/servertls"
)

// options is the parsed command line.
type options struct {
	jsonPath      string
	noP4          bool
	ports         []device.PortConfig
	deviceID      uint64
	thriftPort    int  // 0: not served
	thriftPortSet bool // given on the command line (a port in use is then an error)
	thriftIP      string
	notifications string // --notifications-addr; "": none published
	logConsole    bool
	logLevel      string
	logFile       string
	pcapDir       string
	grpcAddr      string
	grpcTLS       bool
	grpcTLSFiles  servertls.Files
	cpuPort       int
	priorityQs    int
	queueCapacity int
	metricsAddr   string
	rates         map[uint16]uint64
	ring          device.RingVersion
	spinPolls     int
	tx            device.TxMode
	io            device.IOMode
	nice          int
	rtPriority    int
	ringMB        int
	translations  string // --translation-file
	restoreState  string // --restore-state
	help          bool
	version       bool
	ignored       []string
}

const usage = `terrapin-switch: runs a P4 program compiled to BMv2 JSON (v1model) on Linux
interfaces and serves P4Runtime; a drop-in for p4lang's simple_switch_grpc.

Usage:
  terrapin-switch [options] <program.json | --no-p4> [-- target options]

Target options may also be given before "--", as here.

Options (as simple_switch_grpc):
  -i, --interface PORT@IFACE   attach port number PORT to interface IFACE
                               (repeatable; PORT 0..510)
  --no-p4                      start without a program; push one with P4Runtime
                               SetForwardingPipelineConfig (frames are dropped
                               until then)
  --device-id N                P4Runtime device id (default 0)
  --thrift-port N              serve BMv2's Thrift runtime (simple_switch_CLI)
                               on port N (default 9090, as BMv2; 0: not served;
                               the default port in use is a warning, a port
                               given here in use an error)
  --thrift-ip ADDR             address the Thrift runtime listens on (default
                               127.0.0.1; BMv2 listens on every interface:
                               give 0.0.0.0 for that)
  --notifications-addr ADDR    publish BMv2's notifications (idle entries, port
                               events) on ADDR (nanomsg PUB, ipc:// or tcp://),
                               as simple_switch does (default: none, as
                               simple_switch_grpc)
  --log-console                log to stderr
  -L, --log-level LEVEL        trace, debug, info, warn, error, off (default info)
  --log-file FILE              log to FILE instead
  --pcap [DIR]                 write IFACE_in.pcap / IFACE_out.pcap per port in
                               DIR (default: current directory)
  --restore-state FILE         install the state in FILE (a state dump, as
                               serialize_state writes it, of this switch or of
                               BMv2) at start, into the program given; a dump
                               of another program or a malformed one stops the
                               switch (exit 1)
  -h, --help                   this text
  -v, --version                print the version

Target options (after "--" as in BMv2, or directly):
  --grpc-server-addr HOST:PORT P4Runtime address (default 127.0.0.1:9559;
                               simple_switch_grpc defaults to 0.0.0.0:9559 and
                               so listens on every interface: we listen on
                               loopback unless told otherwise)
  --grpc-server-ssl            serve P4Runtime (and --metrics-addr) over TLS;
                               needs --grpc-server-cert and --grpc-server-key
  --grpc-server-cert FILE      PEM certificate of the switch (its SANs name the
                               addresses and host names clients dial), then
                               any intermediates
  --grpc-server-key FILE       PEM private key of that certificate
  --grpc-server-cacert FILE    PEM certificates of the CA(s) that sign client
                               certificates (used with the next option)
  --grpc-server-with-client-auth
                               require every client to present a certificate
                               signed by --grpc-server-cacert (mutual TLS)
  --cpu-port N                 port for PacketIn/PacketOut (P4 tutorials use 255)
  --priority-queues N          strict-priority queues per port (default 8; the
                               queue is standard_metadata.priority, 0 lowest;
                               a priority >= N is dropped, as BMv2 does)

Terrapin options:
  --port-rate PORT:BITS_PER_S  line rate of a port (repeatable), e.g.
                               2:1500000 or 2:1.5M (k, M, G suffixes); pacing
                               counts Ethernet wire bytes (frame padded to 60,
                               + FCS, preamble and inter-frame gap = 24 bytes).
                               Default: unlimited
  --queue-capacity N           packets per priority queue (default 64, as BMv2)
  --metrics-addr HOST:PORT     serve per-port and per-queue counters in the
                               Prometheus text format on http://HOST:PORT/metrics
  --io auto|afxdp|afpacket     packet I/O of the ports (default auto: AF_XDP with
                               native XDP, else generic XDP, else AF_PACKET, per
                               port; the choice and why are logged at info level)
  --rx-ring v2|v3              PACKET_MMAP receive ring version (default v2: see
                               docs/switch.md)
  --spin N                     empty ring polls before sleeping (default 0)
  --rx-ring-mb N               receive ring per port in MiB (default 16)
  --tx ring|sendmmsg           transmit path (default ring: PACKET_TX_RING, one
                               send per batch; see docs/switch.md)
  --nice N                     scheduling priority of the forwarding threads
                               (default -10, as the pacers; 0: the process's own)
  --rt-priority N              run the forwarding threads SCHED_FIFO at priority
                               N (1..98; pacers at N+1) within a CPU budget (40%
                               of one CPU per 100 ms, then --nice until the
                               window ends); 0: off (default 0; see
                               docs/switch.md)
  --translation-file FILE      P4Runtime type translation (@p4runtime_translation
                               types): per translation URI, the SDN value of
                               each device value (JSON; see docs/switch.md).
                               A URI it does not name, and every URI without
                               it, maps SDN value N to device value N

Accepted and ignored for compatibility: --nanolog,
--log-flush, --debugger, --dump-packet-data, --max-port-count, --packet-in,
--dp-grpc-server-addr, --drop-port 511.
`

// ignoredWithValue are BMv2 options that take a value and have no meaning here.
var ignoredWithValue = map[string]bool{
	"--nanolog": true, "--dump-packet-data": true,
	"--max-port-count": true, "--packet-in": true, "--dp-grpc-server-addr": true,
	"--debugger-addr": true,
}

var ignoredFlags = map[string]bool{"--log-flush": true, "--debugger": true, "--enable-swap": true}

func parseArgs(args []string) (*options, error) {
	o := &options{grpcAddr: "127.0.0.1:9559", thriftPort: 9090, thriftIP: "127.0.0.1", cpuPort: -1, logLevel: "info", rates: map[uint16]uint64{}, ring: device.RingV2, nice: -10, io: device.IOAuto}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			continue // target options follow; we accept them anywhere
		}
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if k, v, ok := strings.Cut(a, "="); ok {
				name, val, hasVal = k, v, true
			}
		} else if strings.HasPrefix(a, "-") && len(a) > 2 && (a[1] == 'i' || a[1] == 'L') {
			name, val, hasVal = a[:2], a[2:], true
		}
		next := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "-h", "--help":
			o.help = true
		case "-v", "--version":
			o.version = true
		case "--no-p4":
			o.noP4 = true
		case "-i", "--interface":
			var v string
			if v, err = next(); err == nil {
				err = o.addInterface(v)
			}
		case "--device-id":
			var v string
			if v, err = next(); err == nil {
				o.deviceID, err = strconv.ParseUint(v, 10, 64)
			}
		case "--thrift-port":
			var v string
			if v, err = next(); err == nil {
				o.thriftPortSet = true
				if o.thriftPort, err = strconv.Atoi(v); err == nil && (o.thriftPort < 0 || o.thriftPort > 65535) {
					err = fmt.Errorf("--thrift-port %d: not a port", o.thriftPort)
				}
			}
		case "--thrift-ip":
			if o.thriftIP, err = next(); err == nil && net.ParseIP(o.thriftIP) == nil {
				err = fmt.Errorf("--thrift-ip %q: not an IP address", o.thriftIP)
			}
		case "--notifications-addr":
			if o.notifications, err = next(); err == nil && !strings.HasPrefix(o.notifications, "ipc://") && !strings.HasPrefix(o.notifications, "tcp://") {
				err = fmt.Errorf("--notifications-addr %q: not an ipc:// or tcp:// address", o.notifications)
			}
		case "--log-console":
			o.logConsole = true
		case "-L", "--log-level":
			if o.logLevel, err = next(); err == nil {
				err = checkLevel(o.logLevel)
			}
		case "--log-file":
			o.logFile, err = next()
		case "--pcap":
			o.pcapDir = "."
			if hasVal {
				o.pcapDir = val
			} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !strings.HasSuffix(args[i+1], ".json") {
				i++
				o.pcapDir = args[i]
			}
		case "--grpc-server-addr":
			if o.grpcAddr, err = next(); err == nil {
				_, _, err = net.SplitHostPort(o.grpcAddr)
			}
		case "--grpc-server-ssl":
			o.grpcTLS = true
		case "--grpc-server-cert":
			o.grpcTLSFiles.Cert, err = next()
		case "--grpc-server-key":
			o.grpcTLSFiles.Key, err = next()
		case "--grpc-server-cacert":
			o.grpcTLSFiles.CACert, err = next()
		case "--grpc-server-with-client-auth":
			o.grpcTLSFiles.RequireClientCert = true
		case "--cpu-port":
			var v string
			if v, err = next(); err == nil {
				o.cpuPort, err = strconv.Atoi(v)
				if err == nil && (o.cpuPort <= 0 || o.cpuPort >= device.DropPort) {
					err = fmt.Errorf("must be 1..510")
				}
			}
		case "--priority-queues":
			var v string
			if v, err = next(); err == nil {
				o.priorityQs, err = strconv.Atoi(v)
				if err == nil && (o.priorityQs < 1 || o.priorityQs > 32) {
					err = fmt.Errorf("must be 1..32")
				}
			}
		case "--port-rate":
			var v string
			if v, err = next(); err == nil {
				err = o.addRate(v)
			}
		case "--queue-capacity":
			var v string
			if v, err = next(); err == nil {
				o.queueCapacity, err = strconv.Atoi(v)
				if err == nil && (o.queueCapacity < 1 || o.queueCapacity > 1<<16) {
					err = fmt.Errorf("must be 1..65536")
				}
			}
		case "--metrics-addr":
			if o.metricsAddr, err = next(); err == nil {
				_, _, err = net.SplitHostPort(o.metricsAddr)
			}
		case "--rx-ring":
			var v string
			if v, err = next(); err == nil {
				switch v {
				case "v2", "2":
					o.ring = device.RingV2
				case "v3", "3":
					o.ring = device.RingV3
				default:
					err = fmt.Errorf("want v2 or v3")
				}
			}
		case "--rx-ring-mb":
			var v string
			if v, err = next(); err == nil {
				o.ringMB, err = strconv.Atoi(v)
				if err == nil && (o.ringMB < 1 || o.ringMB > 1024) {
					err = fmt.Errorf("want 1..1024")
				}
			}
		case "--nice":
			var v string
			if v, err = next(); err == nil {
				o.nice, err = strconv.Atoi(v)
				if err == nil && (o.nice < -20 || o.nice > 19) {
					err = fmt.Errorf("want -20..19")
				}
			}
		case "--rt-priority":
			var v string
			if v, err = next(); err == nil {
				o.rtPriority, err = strconv.Atoi(v)
				if err == nil && (o.rtPriority < 0 || o.rtPriority > 98) {
					err = fmt.Errorf("want 0..98")
				}
			}
		case "--tx":
			var v string
			if v, err = next(); err == nil {
				o.tx, err = device.ParseTxMode(v)
			}
		case "--io":
			var v string
			if v, err = next(); err == nil {
				o.io, err = device.ParseIOMode(v)
			}
		case "--spin":
			var v string
			if v, err = next(); err == nil {
				o.spinPolls, err = strconv.Atoi(v)
			}
		case "--translation-file":
			o.translations, err = next()
		case "--restore-state":
			o.restoreState, err = next()
		case "--drop-port":
			var v string
			if v, err = next(); err == nil && v != "511" {
				err = fmt.Errorf("only 511 is supported")
			}
		default:
			switch {
			case ignoredWithValue[name]:
				_, err = next()
				o.ignored = append(o.ignored, name)
			case ignoredFlags[name]:
				o.ignored = append(o.ignored, name)
			case strings.HasPrefix(a, "-"):
				return nil, fmt.Errorf("unknown option %s (see --help)", a)
			case o.jsonPath != "":
				return nil, fmt.Errorf("more than one program given: %s and %s", o.jsonPath, a)
			default:
				o.jsonPath = a
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if o.help || o.version {
		return o, nil
	}
	if o.jsonPath == "" && !o.noP4 {
		return nil, errors.New("no program: give a BMv2 JSON file or --no-p4")
	}
	if o.jsonPath != "" && o.noP4 {
		return nil, errors.New("both a program and --no-p4 given")
	}
	if o.restoreState != "" && o.noP4 {
		return nil, errors.New("--restore-state needs a program: the state is restored into the JSON given on the command line")
	}
	for p, r := range o.rates {
		found := false
		for i := range o.ports {
			if o.ports[i].Num == p {
				o.ports[i].RateBps = r
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--port-rate %d: no such port (give -i %d@IFACE)", p, p)
		}
	}
	return o, nil
}

func (o *options) addInterface(v string) error {
	num, iface, ok := strings.Cut(v, "@")
	if !ok || iface == "" {
		return fmt.Errorf("%q: want PORT@IFACE", v)
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n >= device.DropPort {
		return fmt.Errorf("%q: port must be 0..510", v)
	}
	o.ports = append(o.ports, device.PortConfig{Num: uint16(n), Iface: iface})
	return nil
}

func (o *options) addRate(v string) error {
	num, rate, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("%q: want PORT:BITS_PER_S", v)
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n >= device.DropPort {
		return fmt.Errorf("%q: port must be 0..510", v)
	}
	bps, err := parseRate(rate)
	if err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	o.rates[uint16(n)] = bps
	return nil
}

// parseRate reads bits/s with an optional k, M or G (decimal) suffix.
func parseRate(s string) (uint64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f*mult > 1e12 {
		return 0, fmt.Errorf("rate must be a positive number of bits/s up to 1T")
	}
	return uint64(f * mult), nil
}

func checkLevel(l string) error {
	switch l {
	case "trace", "debug", "info", "warn", "warning", "error", "critical", "off":
		return nil
	}
	return fmt.Errorf("unknown level %q", l)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
