package servertls

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/servertls/testpki"
)

type loadCase struct {
	name       string
	files      Files
	wantErr    []string // every part must be in the message
	clientAuth tls.ClientAuthType
}

func TestLoad(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	srv := ca.Issue(t, "s1", testpki.Options{Server: true, Hosts: []string{"s1"}})
	p := struct{ dir, ca, cert, key, otherKey string }{dir: ca.Dir, ca: ca.CertPath, cert: srv.CertPath, key: srv.KeyPath}
	p.otherKey = testpki.NewKeyFile(t, filepath.Join(ca.Dir, "other.key"))
	empty := filepath.Join(p.dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not PEM at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(p.dir, "unreadable.key")
	if err := os.WriteFile(unreadable, nil, 0o000); err != nil {
		t.Fatal(err)
	}
	garbled := filepath.Join(p.dir, "garbled.pem")
	testpki.WritePEM(t, garbled, "CERTIFICATE", []byte("not DER"))
	missing := filepath.Join(p.dir, "missing.pem")
	tests := []loadCase{
		{name: "server only", files: Files{Cert: p.cert, Key: p.key}, clientAuth: tls.NoClientCert},
		{name: "client auth", files: Files{Cert: p.cert, Key: p.key, CACert: p.ca, RequireClientCert: true},
			clientAuth: tls.RequireAndVerifyClientCert},
		// As simple_switch_grpc: the CA alone does not ask clients for certificates.
		{name: "CA without client auth", files: Files{Cert: p.cert, Key: p.key, CACert: p.ca}, clientAuth: tls.NoClientCert},
		{name: "no cert flag", files: Files{Key: p.key}, wantErr: []string{"--grpc-server-cert"}},
		{name: "no key flag", files: Files{Cert: p.cert}, wantErr: []string{"--grpc-server-key"}},
		{name: "missing cert", files: Files{Cert: missing, Key: p.key},
			wantErr: []string{"--grpc-server-cert", missing, "cannot read", "no such file"}},
		{name: "missing key", files: Files{Cert: p.cert, Key: missing},
			wantErr: []string{"--grpc-server-key", missing, "no such file"}},
		{name: "key is a directory", files: Files{Cert: p.cert, Key: p.dir},
			wantErr: []string{"--grpc-server-key", p.dir, "cannot read", "is a directory"}},
		{name: "key mismatch", files: Files{Cert: p.cert, Key: p.otherKey},
			wantErr: []string{"--grpc-server-key", p.otherKey, "does not match", p.cert}},
		{name: "swapped", files: Files{Cert: p.key, Key: p.cert},
			wantErr: []string{"--grpc-server-cert", "no CERTIFICATE", "swapped"}},
		{name: "cert not PEM", files: Files{Cert: empty, Key: p.key}, wantErr: []string{"--grpc-server-cert", empty, "no CERTIFICATE"}},
		{name: "cert not DER", files: Files{Cert: garbled, Key: p.key}, wantErr: []string{"--grpc-server-cert", garbled, "PEM block 1"}},
		{name: "key without key", files: Files{Cert: p.cert, Key: p.ca}, wantErr: []string{"--grpc-server-key", p.ca, "no PRIVATE KEY"}},
		{name: "CA file without certificates", files: Files{Cert: p.cert, Key: p.key, CACert: p.key, RequireClientCert: true},
			wantErr: []string{"--grpc-server-cacert", p.key, "no certificates"}},
		{name: "missing CA", files: Files{Cert: p.cert, Key: p.key, CACert: missing, RequireClientCert: true},
			wantErr: []string{"--grpc-server-cacert", missing, "no such file"}},
		{name: "client auth without CA", files: Files{Cert: p.cert, Key: p.key, RequireClientCert: true},
			wantErr: []string{"--grpc-server-with-client-auth needs --grpc-server-cacert"}},
	}
	if os.Geteuid() != 0 { // root reads a 0000 file
		tests = append(tests, loadCase{name: "unreadable key", files: Files{Cert: p.cert, Key: unreadable},
			wantErr: []string{"--grpc-server-key", unreadable, "permission denied"}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(tc.files)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("loaded; want an error naming %q", tc.wantErr)
				}
				for _, part := range tc.wantErr {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not mention %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Config.ClientAuth != tc.clientAuth {
				t.Errorf("client auth %v, want %v", s.Config.ClientAuth, tc.clientAuth)
			}
			if (s.Config.ClientCAs != nil) != (tc.clientAuth == tls.RequireAndVerifyClientCert) {
				t.Errorf("client CAs set: %v", s.Config.ClientCAs != nil)
			}
			if s.Leaf.Subject.CommonName != "s1" {
				t.Errorf("leaf %v", s.Leaf.Subject)
			}
		})
	}
}

func TestValidity(t *testing.T) {
	now := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	ca := testpki.NewCA(t, "test CA")
	srv := ca.Issue(t, "s1", testpki.Options{Server: true, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	s, err := Load(Files{Cert: srv.CertPath, Key: srv.KeyPath})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now, ""},
		{now.Add(-2 * time.Hour), "not valid before 2026-11-29T01:00:00Z"},
		{now.Add(2 * time.Hour), "expired at 2026-11-29T03:00:00Z"},
	} {
		if got := s.Validity(tc.at); got != tc.want {
			t.Errorf("at %v: %q, want %q", tc.at, got, tc.want)
		}
	}
}
