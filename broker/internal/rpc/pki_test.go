package rpc

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

// testPKI is a cluster CA with one node certificate for 127.0.0.1-3 and "localhost", and an
// unrelated rogue CA with a leaf for the same names, all as PEM files.
type testPKI struct {
	dir                        string
	caFile, certFile, keyFile  string
	rogueCA, rogueCert, rogueK string
}

// newTestPKI writes a fresh PKI into a temp dir.
func newTestPKI(t testing.TB) testPKI {
	t.Helper()
	dir := t.TempDir()
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	p := testPKI{dir: dir}
	caCert, caKey := writeTestCA(t, dir, "ca.pem", "narad test CA")
	p.caFile = filepath.Join(dir, "ca.pem")
	p.certFile, p.keyFile = writeTestLeaf(t, dir, "node", caCert, caKey, ips)
	rogueCert, rogueKey := writeTestCA(t, dir, "rogue-ca.pem", "rogue CA")
	p.rogueCA = filepath.Join(dir, "rogue-ca.pem")
	p.rogueCert, p.rogueK = writeTestLeaf(t, dir, "rogue", rogueCert, rogueKey, ips)
	return p
}

// node is the cluster's mutual-TLS configuration.
func (p testPKI) node(t testing.TB) *ClusterTLS {
	t.Helper()
	return mustLoadTLS(t, p.certFile, p.keyFile, p.caFile)
}

func mustLoadTLS(t testing.TB, cert, key, ca string) *ClusterTLS {
	t.Helper()
	ct, err := LoadClusterTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func writeTestCA(t testing.TB, dir, name, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name), "CERTIFICATE", der)
	return cert, key
}

// writeTestLeaf writes <base>.pem and <base>-key.pem: a leaf signed by ca, valid for ips and
// "localhost", usable as server and client.
func writeTestLeaf(t testing.TB, dir, base string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, ips []string) (certFile, keyFile string) {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: base},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kb)
	return certFile, keyFile
}

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
