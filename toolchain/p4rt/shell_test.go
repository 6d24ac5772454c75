package p4rt_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/stf/viap4rt"
)

// TestP4RuntimeShellDrivesSwitch is the end-to-end check of issue "part 2":
// the real terrapin-switch, on veth pairs in a network namespace of its own,
// driven by p4runtime-shell from PyPI (testdata/shell_session.py): push a
// pipeline compiled by terrapin-p4c, insert/read/modify/delete entries,
// meters, counters, PacketOut, PacketIn, multicast — with real frames.
// It needs root (namespaces) and PyPI (p4runtime-shell's venv, created once
// by scripts/p4rt-shell.sh).
func TestP4RuntimeShellDrivesSwitch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	// Build the binaries from this tree, so the test never runs stale ones.
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.CommandContext(ctx, gobin, "build", "-o", tmp+"/", "./cmd/terrapin-switch", "./cmd/terrapin-p4c")
	build.Dir = filepath.Join(repo, "toolchain")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building terrapin-switch and terrapin-p4c: %v\n%s", err, out)
	}
	jsonPath, infoPath := filepath.Join(tmp, "p4rt_test.json"), filepath.Join(tmp, "p4rt_test.p4info.txtpb")
	run(filepath.Join(tmp, "terrapin-p4c"), "--target", "bmv2", "--arch", "v1model",
		"--p4runtime-files", infoPath, "-o", jsonPath, "testdata/p4rt_test.p4")
	run("bash", filepath.Join(repo, "scripts/p4rt-shell.sh"), "--setup-only")

	viap4rt.SweepStale()
	ns := fmt.Sprintf("trptp4rtsh%d", os.Getpid())
	_ = exec.Command("ip", "netns", "del", ns).Run()
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	nsRun := func(args ...string) string { return run("ip", append([]string{"netns", "exec", ns}, args...)...) }
	nsRun("ip", "link", "set", "lo", "up")
	var hostIfaces []string
	swArgs := []string{"netns", "exec", ns, filepath.Join(tmp, "terrapin-switch"),
		"--device-id", "0", "--grpc-server-addr", "127.0.0.1:19601", "--cpu-port", "255", "--no-p4"}
	for p := 1; p <= 3; p++ {
		sw, host := fmt.Sprintf("tp4rt%ds", p), fmt.Sprintf("tp4rt%dh", p)
		nsRun("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
		for _, i := range []string{sw, host} {
			nsRun("ip", "link", "set", i, "up")
			// No IPv6 chatter (router solicitations) on the test ports.
			nsRun("sysctl", "-qw", "net.ipv6.conf."+i+".disable_ipv6=1")
		}
		swArgs = append(swArgs, "-i", fmt.Sprintf("%d@%s", p, sw))
		hostIfaces = append(hostIfaces, host)
	}

	var swLog bytes.Buffer
	sw := exec.CommandContext(ctx, "ip", swArgs...)
	sw.Stdout, sw.Stderr = &swLog, &swLog
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	swExited := make(chan struct{})
	var swErr error
	go func() { swErr = sw.Wait(); close(swExited) }()
	t.Cleanup(func() {
		_ = sw.Process.Signal(os.Interrupt)
		select {
		case <-swExited:
		case <-time.After(5 * time.Second):
			_ = sw.Process.Kill()
			<-swExited
		}
	})

	python := filepath.Join(repo, "build/venv-p4rtshell/bin/python")
	session := exec.CommandContext(ctx, "ip", "netns", "exec", ns, python, "testdata/shell_session.py",
		"--addr", "127.0.0.1:19601", "--p4info", infoPath, "--json", jsonPath,
		"--ports", strings.Join(hostIfaces, ","))
	out, err := session.CombinedOutput()
	t.Logf("p4runtime-shell session:\n%s", out)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "FAIL ") {
			t.Errorf("%s", line)
		}
	}
	if err != nil {
		t.Errorf("session exited with %v; switch log:\n%s", err, swLog.String())
	}
	select {
	case <-swExited:
		t.Errorf("the switch exited during the session (%v):\n%s", swErr, swLog.String())
	default:
	}
}
