// Package servertls builds the TLS configuration terrapin-switch serves
// P4Runtime and its metrics with, from simple_switch_grpc's flags
// (--grpc-server-cert, --grpc-server-key, --grpc-server-cacert,
// --grpc-server-with-client-auth). Every file is read and checked when the
// switch starts, so a missing or unreadable file, a key that does not match
// its certificate or a CA file without certificates stops the switch with a
// message naming the flag and the file, instead of failing each handshake
// later. See docs/switch.md and docs/deployment.md.
package servertls

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Files names the PEM files of a TLS server, as simple_switch_grpc's flags do.
type Files struct {
	// Cert is the server's certificate, optionally followed by the
	// intermediates that lead to the CA (--grpc-server-cert).
	Cert string
	// Key is the server's private key (--grpc-server-key).
	Key string
	// CACert holds the certificates a client's certificate must chain to
	// (--grpc-server-cacert). Used only with RequireClientCert, as in
	// simple_switch_grpc, which does not ask for a client certificate
	// otherwise; still checked when given, so a bad file is never silent.
	CACert string
	// RequireClientCert asks every client for a certificate signed by a CA
	// of CACert and refuses the connection without one
	// (--grpc-server-with-client-auth).
	RequireClientCert bool
}

// Flag names, for the messages.
const (
	FlagCert       = "--grpc-server-cert"
	FlagKey        = "--grpc-server-key"
	FlagCACert     = "--grpc-server-cacert"
	FlagClientAuth = "--grpc-server-with-client-auth"
)

// Server is a loaded configuration.
type Server struct {
	// Config serves with the certificate and, when required, checks client
	// certificates. Clone it per listener: gRPC and net/http each add
	// their own ALPN protocols.
	Config *tls.Config
	// Leaf is the server's own certificate.
	Leaf *x509.Certificate
}

// Load reads and checks the files.
func Load(f Files) (*Server, error) {
	if f.Cert == "" {
		return nil, fmt.Errorf("TLS needs the server's certificate: give %s", FlagCert)
	}
	if f.Key == "" {
		return nil, fmt.Errorf("TLS needs the server's private key: give %s", FlagKey)
	}
	certPEM, err := readPEM(FlagCert, f.Cert)
	if err != nil {
		return nil, err
	}
	chain, err := certificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", FlagCert, f.Cert, err)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s %s: no CERTIFICATE block in the file%s", FlagCert, f.Cert, holdsKey(certPEM))
	}
	keyPEM, err := readPEM(FlagKey, f.Key)
	if err != nil {
		return nil, err
	}
	if !hasPrivateKey(keyPEM) {
		return nil, fmt.Errorf("%s %s: no PRIVATE KEY block in the file", FlagKey, f.Key)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Errorf("%s %s does not match the certificate in %s %s (its public key is another key's)",
				FlagKey, f.Key, FlagCert, f.Cert)
		}
		return nil, fmt.Errorf("%s %s with %s %s: %w", FlagCert, f.Cert, FlagKey, f.Key, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		// gRPC's C core, which simple_switch_grpc uses, speaks TLS 1.2 and 1.3.
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.NoClientCert,
	}
	if f.CACert != "" {
		pool, err := loadCAs(f.CACert)
		if err != nil {
			return nil, err
		}
		if f.RequireClientCert {
			cfg.ClientCAs = pool
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	} else if f.RequireClientCert {
		// simple_switch_grpc would check client certificates against the
		// system's roots; a switch should trust only its own CA.
		return nil, fmt.Errorf("%s needs %s: the CA that signs the clients' certificates", FlagClientAuth, FlagCACert)
	}
	return &Server{Config: cfg, Leaf: chain[0]}, nil
}

// Validity says what is wrong with the server certificate's dates at now,
// or "" if nothing: clients refuse a certificate outside them.
func (s *Server) Validity(now time.Time) string {
	switch {
	case now.Before(s.Leaf.NotBefore):
		return fmt.Sprintf("not valid before %s", s.Leaf.NotBefore.UTC().Format(time.RFC3339))
	case now.After(s.Leaf.NotAfter):
		return fmt.Sprintf("expired at %s", s.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

func readPEM(flag, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("%s %s: cannot read it: %w", flag, path, err)
	}
	return b, nil
}

// certificates parses every CERTIFICATE block of b.
func certificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		out = append(out, c)
	}
}

func hasPrivateKey(b []byte) bool {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return false
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			return true
		}
	}
}

func holdsKey(b []byte) string {
	if hasPrivateKey(b) {
		return " (it holds a private key: are the certificate and key files swapped?)"
	}
	return ""
}

func loadCAs(path string) (*x509.CertPool, error) {
	b, err := readPEM(FlagCACert, path)
	if err != nil {
		return nil, err
	}
	cas, err := certificates(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", FlagCACert, path, err)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("%s %s: no certificates in the file", FlagCACert, path)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	return pool, nil
}
