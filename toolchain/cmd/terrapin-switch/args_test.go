package main

import (
	"bytes"
	"crypto/md5"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/compiler"
	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/servertls"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		wantErr string
		check   func(t *testing.T, o *options)
	}{
		{
			name: "tutorial style, target options after --",
			args: "-i 1@s1-eth1 -i 2@s1-eth2 --pcap /tmp/pcaps --nanolog ipc:///tmp/bm-0-log.ipc --device-id 3 build/basic.json --log-console --thrift-port 9090 -- --grpc-server-addr 0.0.0.0:50051 --cpu-port 255",
			check: func(t *testing.T, o *options) {
				if len(o.ports) != 2 || o.ports[1] != (device.PortConfig{Num: 2, Iface: "s1-eth2"}) {
					t.Errorf("ports %+v", o.ports)
				}
				if o.jsonPath != "build/basic.json" || o.deviceID != 3 || o.pcapDir != "/tmp/pcaps" || !o.logConsole || o.thriftPort != 9090 {
					t.Errorf("got %+v", o)
				}
				if o.grpcAddr != "0.0.0.0:50051" || o.cpuPort != 255 {
					t.Errorf("target options: %s %d", o.grpcAddr, o.cpuPort)
				}
			},
		},
		{
			name: "defaults",
			args: "--no-p4",
			check: func(t *testing.T, o *options) {
				if o.grpcAddr != "127.0.0.1:9559" || o.cpuPort != -1 || o.priorityQs != 0 || !o.noP4 || o.io != device.IOAuto {
					t.Errorf("got %+v", o)
				}
				if o.thriftPort != 9090 || o.thriftPortSet || o.thriftIP != "127.0.0.1" {
					t.Errorf("Thrift: port %d (set %v) ip %s, want 9090 on 127.0.0.1, not set", o.thriftPort, o.thriftPortSet, o.thriftIP)
				}
			},
		},
		{
			name: "Thrift runtime address",
			args: "--no-p4 --thrift-port 39090 --thrift-ip 0.0.0.0",
			check: func(t *testing.T, o *options) {
				if o.thriftPort != 39090 || !o.thriftPortSet || o.thriftIP != "0.0.0.0" {
					t.Errorf("got port %d set %v ip %s", o.thriftPort, o.thriftPortSet, o.thriftIP)
				}
			},
		},
		{
			name: "Thrift runtime off",
			args: "--no-p4 --thrift-port 0",
			check: func(t *testing.T, o *options) {
				if o.thriftPort != 0 {
					t.Errorf("got port %d", o.thriftPort)
				}
			},
		},
		{name: "bad Thrift port", args: "--no-p4 --thrift-port 70000", wantErr: "--thrift-port 70000: not a port"},
		{name: "bad Thrift address", args: "--no-p4 --thrift-ip localhost", wantErr: `--thrift-ip "localhost": not an IP address`},
		{
			name: "ours, = forms, attached short values",
			args: "-i1@veth0 --interface=2@veth1 --port-rate 2:1.5M --port-rate=1:10000000 --queue-capacity=100 --priority-queues 4 -Ldebug --metrics-addr 127.0.0.1:19500 --pcap prog.json",
			check: func(t *testing.T, o *options) {
				if o.ports[0].RateBps != 10_000_000 || o.ports[1].RateBps != 1_500_000 {
					t.Errorf("rates %+v", o.ports)
				}
				if o.queueCapacity != 100 || o.priorityQs != 4 || o.logLevel != "debug" || o.metricsAddr != "127.0.0.1:19500" {
					t.Errorf("got %+v", o)
				}
				if o.pcapDir != "." || o.jsonPath != "prog.json" {
					t.Errorf("--pcap without dir: pcap %q json %q", o.pcapDir, o.jsonPath)
				}
			},
		},
		{
			name: "real-time forwarding threads",
			args: "--no-p4 --rt-priority 20 --nice -5",
			check: func(t *testing.T, o *options) {
				if o.rtPriority != 20 || o.nice != -5 {
					t.Errorf("rt %d nice %d", o.rtPriority, o.nice)
				}
			},
		},
		{
			name: "TLS, as simple_switch_grpc",
			args: "--no-p4 -- --grpc-server-ssl --grpc-server-cert s1.pem --grpc-server-key=s1.key --grpc-server-cacert ca.pem --grpc-server-with-client-auth",
			check: func(t *testing.T, o *options) {
				want := servertls.Files{Cert: "s1.pem", Key: "s1.key", CACert: "ca.pem", RequireClientCert: true}
				if !o.grpcTLS || o.grpcTLSFiles != want {
					t.Errorf("TLS %v %+v", o.grpcTLS, o.grpcTLSFiles)
				}
			},
		},
		{
			name: "I/O afxdp",
			args: "--no-p4 --io afxdp",
			check: func(t *testing.T, o *options) {
				if o.io != device.IOAFXDP {
					t.Errorf("io %v", o.io)
				}
			},
		},
		{
			name: "I/O afpacket, = form",
			args: "--no-p4 --io=afpacket",
			check: func(t *testing.T, o *options) {
				if o.io != device.IOAFPacket {
					t.Errorf("io %v", o.io)
				}
			},
		},
		{
			name: "translation file",
			args: "--no-p4 -- --translation-file ports.json",
			check: func(t *testing.T, o *options) {
				if o.translations != "ports.json" {
					t.Errorf("translation file %q", o.translations)
				}
			},
		},
		{name: "translation file missing its value", args: "--no-p4 --translation-file", wantErr: "--translation-file needs a value"},
		{
			name: "restore state, before the program",
			args: "--restore-state s1.state build/basic.json",
			check: func(t *testing.T, o *options) {
				if o.restoreState != "s1.state" || o.jsonPath != "build/basic.json" {
					t.Errorf("restore %q json %q", o.restoreState, o.jsonPath)
				}
			},
		},
		{
			name: "restore state, = form after --",
			args: "build/basic.json -- --restore-state=/tmp/s1.state",
			check: func(t *testing.T, o *options) {
				if o.restoreState != "/tmp/s1.state" {
					t.Errorf("restore %q", o.restoreState)
				}
			},
		},
		{name: "restore state missing its value", args: "a.json --restore-state", wantErr: "--restore-state needs a value"},
		{name: "restore state without a program", args: "--no-p4 --restore-state s1.state", wantErr: "--restore-state needs a program"},
		{name: "I/O unknown", args: "--no-p4 --io dpdk", wantErr: "want afxdp, afpacket or auto"},
		{name: "TLS file missing its value", args: "--no-p4 --grpc-server-ssl --grpc-server-key", wantErr: "--grpc-server-key needs a value"},
		{name: "rt priority too high", args: "--no-p4 --rt-priority 99", wantErr: "0..98"},
		{name: "rt priority negative", args: "--no-p4 --rt-priority -1", wantErr: "0..98"},
		{name: "no program", args: "-i 1@a", wantErr: "no program"},
		{name: "both", args: "--no-p4 a.json", wantErr: "both"},
		{name: "bad interface", args: "--no-p4 -i eth0", wantErr: "PORT@IFACE"},
		{name: "drop port", args: "--no-p4 -i 511@eth0", wantErr: "0..510"},
		{name: "rate without port", args: "--no-p4 -i 1@a --port-rate 2:1000", wantErr: "no such port"},
		{name: "bad rate", args: "--no-p4 -i 1@a --port-rate 1:fast", wantErr: "rate must be"},
		{name: "unknown option", args: "--no-p4 --frobnicate", wantErr: "unknown option"},
		{name: "missing value", args: "--no-p4 --device-id", wantErr: "needs a value"},
		{name: "two programs", args: "a.json b.json", wantErr: "more than one"},
		{name: "bad level", args: "--no-p4 -L loud", wantErr: "unknown level"},
		{name: "bad cpu port", args: "--no-p4 --cpu-port 511", wantErr: "1..510"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(strings.Fields(tc.args))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

func TestHelpDocumentsEveryOption(t *testing.T) {
	for _, opt := range []string{"--interface", "--no-p4", "--device-id", "--thrift-port", "--thrift-ip", "--log-console", "--log-level",
		"--pcap", "--grpc-server-addr", "--cpu-port", "--priority-queues", "--port-rate", "--queue-capacity", "--metrics-addr", "--nice", "--rt-priority", "--tx", "--io",
		"--grpc-server-ssl", "--grpc-server-cert", "--grpc-server-key", "--grpc-server-cacert", "--grpc-server-with-client-auth", "--translation-file", "--restore-state"} {
		if !strings.Contains(usage, opt) {
			t.Errorf("--help does not mention %s", opt)
		}
	}
}

// TestTranslationFileStartUp: a translation file that cannot be read or
// is wrong stops the switch before it starts anything, exit status 1, with
// one line naming the file and what is wrong.
func TestTranslationFileStartUp(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "ports.json")
	if err := os.WriteFile(bad, []byte(`{"tna/PortId_t": [{"sdn": 1, "device": 1}, {"sdn": 2, "device": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, tc := range []struct{ file, want string }{
		{bad, bad + `: "tna/PortId_t": pair 2: device value 1 is mapped twice`},
		{missing, missing + ": no such file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"--no-p4", "--translation-file", tc.file}, &stdout, &stderr); code != 1 {
			t.Errorf("%s: exit %d, want 1", tc.file, code)
		}
		msg := stderr.String()
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "terrapin-switch: --translation-file ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%q, want one line saying %q", msg, tc.want)
		}
	}
}

// TestRestoreStateStartUp: a state dump that cannot be read, is of another
// program or is malformed stops the switch before it serves anything, exit
// status 1, with one line naming the file and what is wrong.
func TestRestoreStateStartUp(t *testing.T) {
	dir := t.TempDir()
	res, errs := compiler.Compile(compiler.Options{Program: "../../../scripts/thrift-cli/cli_compare.p4"})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	prog := filepath.Join(dir, "prog.json")
	if err := os.WriteFile(prog, res.JSON, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(res.JSON)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := md5.Sum([]byte("{}"))
	for _, tc := range []struct{ name, file, want string }{
		{"missing", filepath.Join(dir, "missing.state"), "no such file"},
		{"another program", write("other.state", "06062016_0\n"+string(other[:])+"\n"), "does not match the program"},
		{"another version", write("version.state", "06062017_0\n"+string(sum[:])+"\n"), "incompatible version"},
		{"truncated", write("short.state", "06062016_0\n"+string(sum[:])+"\n"), "ends early"},
		{"garbage", write("garbage.state", "06062016_0\n"+string(sum[:])+"\nnot a table\n"), "names table"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{prog, "--thrift-port", "0", "--restore-state", tc.file}, &stdout, &stderr)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", tc.name, code)
		}
		msg := stderr.String()
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "terrapin-switch: --restore-state ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want one line saying %q", tc.name, msg, tc.want)
		}
	}
}
