package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/servertls/testpki"
)

// TestTLSStartUp checks that bad TLS input stops the switch before it
// starts anything, with exit status 1 and one message naming what is wrong,
// and what is only warned about.
func TestTLSStartUp(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	s1 := ca.Issue(t, "s1", testpki.Options{Server: true, Hosts: []string{"s1"}})
	otherKey := testpki.NewKeyFile(t, filepath.Join(ca.Dir, "other.key"))
	missing := filepath.Join(ca.Dir, "missing.key")
	tests := []struct {
		name string
		args string
		want []string
	}{
		{"missing key", "--grpc-server-ssl --grpc-server-cert " + s1.CertPath + " --grpc-server-key " + missing,
			[]string{"--grpc-server-key " + missing + ": cannot read it: no such file or directory"}},
		{"key of another certificate", "--grpc-server-ssl --grpc-server-cert " + s1.CertPath + " --grpc-server-key " + otherKey,
			[]string{"--grpc-server-key " + otherKey + " does not match the certificate in --grpc-server-cert " + s1.CertPath}},
		{"CA file without certificates", "--grpc-server-ssl --grpc-server-cert " + s1.CertPath + " --grpc-server-key " + s1.KeyPath +
			" --grpc-server-cacert " + s1.KeyPath + " --grpc-server-with-client-auth",
			[]string{"--grpc-server-cacert " + s1.KeyPath + ": no certificates"}},
		{"no key flag", "--grpc-server-ssl --grpc-server-cert " + s1.CertPath, []string{"give --grpc-server-key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"--no-p4"}, strings.Fields(tc.args)...), &stdout, &stderr)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "terrapin-switch: ") {
				t.Errorf("want one line of error, got %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestTLSWarnings(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	now := time.Now()
	old := ca.Issue(t, "old", testpki.Options{Server: true, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
	tests := []struct {
		name    string
		args    string
		on      bool
		warning string
	}{
		{"files without --grpc-server-ssl", "--grpc-server-cert " + old.CertPath, false, "P4Runtime is served in plaintext"},
		{"expired server certificate", "--grpc-server-ssl --grpc-server-cert " + old.CertPath + " --grpc-server-key " + old.KeyPath,
			true, "--grpc-server-cert " + old.CertPath + " is expired at "},
		{"plaintext", "", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(append([]string{"--no-p4"}, strings.Fields(tc.args)...))
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			s, err := loadTLS(o, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if (s != nil) != tc.on {
				t.Errorf("TLS on: %v, want %v", s != nil, tc.on)
			}
			if got := stderr.String(); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
				t.Errorf("warning %q, want one with %q", got, tc.warning)
			}
		})
	}
}
