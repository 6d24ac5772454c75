package viap4rt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartFailureSaysWhy: a switch that cannot start makes Start return
// an error that carries the switch's own words, and leaves nothing behind.
// Start used to crash instead (a nil dereference in Close, which its
// failure path called on the nil device it had just returned), so the
// reason was never shown: simple_switch_grpc refused the command line.
func TestStartFailureSaysWhy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		sw      string
		timeout time.Duration
		want    []string
	}{
		{"exits at once", script("refuses", `echo "unknown option $1" >&2; exit 3`), 20 * time.Second,
			[]string{"refuses exited", "exit status 3", "unknown option --no-p4"}},
		{"exits silently", script("mute", "exit 1"), 20 * time.Second,
			[]string{"mute exited", "without a word"}},
		{"no such binary", filepath.Join(dir, "absent"), 20 * time.Second,
			[]string{"absent exited", "No such file"}},
		{"never answers", script("deaf", `echo "listening elsewhere"; exec sleep 30`), 2 * time.Second,
			[]string{"no P4Runtime answer from deaf", "listening elsewhere"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			ns := fmt.Sprintf("trptp4rtst%dx%d", os.Getpid(), i)
			d, err := Start(ctx, Options{Switch: tc.sw, Ports: []uint32{1}, Namespace: ns})
			if err == nil {
				d.Close()
				t.Fatal("Start succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat("/var/run/netns/" + ns); err == nil {
				t.Errorf("namespace %s left behind", ns)
			}
		})
	}
}
