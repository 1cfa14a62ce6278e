// Package pki writes throw-away certificate authorities and node certificates for TLS tests
// (the broker's own tests and the black-box harness). Never use it for real deployments.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity is how long every certificate Write issues stays valid (from an hour in
// the past, to absorb clock skew).
const Validity = 24 * time.Hour

// PKI is a throw-away public key infrastructure for TLS tests, as PEM files in one directory.
// The node certificate is signed by CA and valid, as server and as client, for the IPs given
// to Write and "localhost"; the rogue pair has its own unrelated CA and the same names,
// so it fails only on trust, never on names.
type PKI struct {
	Dir string

	CAFile       string // ca.pem: the cluster CA
	NodeCertFile string // node.pem
	NodeKeyFile  string // node-key.pem

	RogueCAFile   string // rogue-ca.pem: a CA nobody trusts
	RogueCertFile string // rogue.pem, signed by the rogue CA
	RogueKeyFile  string // rogue-key.pem

	caPool *x509.CertPool
}

// Write writes a fresh PKI into dir (which must exist): ca.pem, node.pem, node-key.pem,
// rogue-ca.pem, rogue.pem, rogue-key.pem. Keys are ECDSA P-256 (PKCS #8, mode 0600).
func Write(dir string, ips []string) (PKI, error) {
	var parsed []net.IP
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return PKI{}, fmt.Errorf("pki: test PKI: %q is not an IP address", s)
		}
		parsed = append(parsed, ip)
	}
	p := PKI{
		Dir:           dir,
		CAFile:        filepath.Join(dir, "ca.pem"),
		NodeCertFile:  filepath.Join(dir, "node.pem"),
		NodeKeyFile:   filepath.Join(dir, "node-key.pem"),
		RogueCAFile:   filepath.Join(dir, "rogue-ca.pem"),
		RogueCertFile: filepath.Join(dir, "rogue.pem"),
		RogueKeyFile:  filepath.Join(dir, "rogue-key.pem"),
	}
	ca, err := issueTo(p.CAFile, "", "narad test CA", nil, nil, nil)
	if err != nil {
		return PKI{}, err
	}
	if _, err := issueTo(p.NodeCertFile, p.NodeKeyFile, "narad test node", parsed, ca.cert, ca.key); err != nil {
		return PKI{}, err
	}
	rogue, err := issueTo(p.RogueCAFile, "", "rogue test CA", nil, nil, nil)
	if err != nil {
		return PKI{}, err
	}
	if _, err := issueTo(p.RogueCertFile, p.RogueKeyFile, "rogue test node", parsed, rogue.cert, rogue.key); err != nil {
		return PKI{}, err
	}
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca.cert)
	return p, nil
}

// ClientTLS returns a client configuration trusting only the cluster CA (for https:// to a
// node serving node.pem), TLS 1.2 or later, without a client certificate.
func (p PKI) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12}
}

// issued is a certificate with its private key.
type issued struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issueTo issues a certificate and writes it to certFile (and its key to keyFile when
// not ""). parent nil makes a self-signed CA; otherwise a leaf for ips and "localhost",
// usable for both server and client authentication.
func issueTo(certFile, keyFile, cn string, ips []net.IP, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return issued{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"narad tests"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(Validity),
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = ips
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return issued{}, fmt.Errorf("pki: issue %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return issued{}, err
	}
	if err := writePEMFile(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return issued{}, err
	}
	if keyFile != "" {
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return issued{}, err
		}
		if err := writePEMFile(keyFile, "PRIVATE KEY", kb, 0o600); err != nil {
			return issued{}, err
		}
	}
	return issued{cert: cert, key: key}, nil
}

func writePEMFile(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if data == nil {
		return errors.New("pki: PEM encoding failed")
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}
