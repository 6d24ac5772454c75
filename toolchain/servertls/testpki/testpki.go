// Package testpki makes throw-away certificate authorities and
// certificates for tests of TLS servers and clients: ECDSA P-256, PEM files
// in a test's temporary directory. For tests only; topo/pki.py makes the
// PKI of a deployment.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose files are in Dir.
type CA struct {
	Name     string
	Dir      string
	CertPath string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	serial   int64
}

// Leaf is an issued certificate and its key.
type Leaf struct {
	CertPath, KeyPath string
	Cert              *x509.Certificate
}

// Options shape a leaf certificate.
type Options struct {
	// Server makes a server certificate (serverAuth), else a client one
	// (clientAuth).
	Server bool
	// Hosts are the DNS names and IP addresses of a server.
	Hosts []string
	// NotBefore and NotAfter default to an hour either side of now.
	NotBefore, NotAfter time.Time
}

// NewCA makes a self-signed CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	ca := &CA{Name: name, Dir: dir, cert: cert, key: key, serial: 1}
	ca.CertPath = WritePEM(tb, filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate for name and writes it as NAME.pem and its key
// as NAME.key in the CA's directory.
func (ca *CA) Issue(tb testing.TB, name string, o Options) Leaf {
	tb.Helper()
	key := newKey(tb)
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(time.Hour)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: o.NotBefore, NotAfter: o.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if o.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range o.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return Leaf{
		CertPath: WritePEM(tb, filepath.Join(ca.Dir, name+".pem"), "CERTIFICATE", der),
		KeyPath:  WriteKey(tb, filepath.Join(ca.Dir, name+".key"), key),
		Cert:     cert,
	}
}

// Pool holds the CA's certificate, for a client's roots.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// NewKeyFile writes a fresh key that matches no certificate.
func NewKeyFile(tb testing.TB, path string) string {
	tb.Helper()
	return WriteKey(tb, path, newKey(tb))
}

// WriteKey writes key as a PKCS #8 PEM file, mode 0600.
func WriteKey(tb testing.TB, path string, key *ecdsa.PrivateKey) string {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return WritePEM(tb, path, "PRIVATE KEY", der)
}

// WritePEM writes one PEM block of type typ, mode 0600.
func WritePEM(tb testing.TB, path, typ string, der []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}
