package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func poolOf(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(readCert(t, path))
	return p
}

func TestNodeCertificateChainsToCAForEveryNameAndBothUsages(t *testing.T) {
	p, err := WriteTestPKI(t.TempDir(), []string{"127.0.0.1", "127.0.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	node, rogue := readCert(t, p.NodeCertFile), readCert(t, p.RogueCertFile)
	cases := []struct {
		name   string
		cert   *x509.Certificate
		roots  string
		host   string
		usage  x509.ExtKeyUsage
		wantOK bool
	}{
		{"node as server on first IP", node, p.CAFile, "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"node as server on second IP", node, p.CAFile, "127.0.0.7", x509.ExtKeyUsageServerAuth, true},
		{"node as server on localhost", node, p.CAFile, "localhost", x509.ExtKeyUsageServerAuth, true},
		{"node as client", node, p.CAFile, "", x509.ExtKeyUsageClientAuth, true},
		{"node on an IP not given", node, p.CAFile, "127.0.0.8", x509.ExtKeyUsageServerAuth, false},
		{"node against the rogue CA", node, p.RogueCAFile, "127.0.0.1", x509.ExtKeyUsageServerAuth, false},
		{"rogue against the cluster CA", rogue, p.CAFile, "127.0.0.1", x509.ExtKeyUsageClientAuth, false},
		{"rogue against its own CA", rogue, p.RogueCAFile, "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cert.Verify(x509.VerifyOptions{
				DNSName:   tc.host,
				Roots:     poolOf(t, tc.roots),
				KeyUsages: []x509.ExtKeyUsage{tc.usage},
			})
			if (err == nil) != tc.wantOK {
				t.Fatalf("Verify = %v, want ok=%v", err, tc.wantOK)
			}
		})
	}
	for _, c := range []*x509.Certificate{node, rogue, readCert(t, p.CAFile), readCert(t, p.RogueCAFile)} {
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want ECDSA P-256", c.Subject.CommonName, c.PublicKey)
		}
		if life := time.Until(c.NotAfter); life > PKIValidity || life < PKIValidity-time.Minute {
			t.Errorf("%s: expires in %v, want about %v", c.Subject.CommonName, life, PKIValidity)
		}
	}
}

func TestKeysMatchTheirCertificatesAndStayPrivate(t *testing.T) {
	p, err := WriteTestPKI(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{p.NodeCertFile, p.NodeKeyFile}, {p.RogueCertFile, p.RogueKeyFile}} {
		if _, err := tls.LoadX509KeyPair(pair[0], pair[1]); err != nil {
			t.Errorf("%s + %s: %v", pair[0], pair[1], err)
		}
		st, err := os.Stat(pair[1])
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", pair[1], st.Mode().Perm(), err)
		}
	}
	if _, err := tls.LoadX509KeyPair(p.NodeCertFile, p.RogueKeyFile); err == nil {
		t.Error("node certificate loads with the rogue key")
	}
}

func TestClientTLSTrustsTheNodeCertificateOnly(t *testing.T) {
	p, err := WriteTestPKI(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(certFile, keyFile string) string {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.ClientTLS()}, Timeout: 10 * time.Second}
	resp, err := hc.Get(serve(p.NodeCertFile, p.NodeKeyFile))
	if err != nil {
		t.Fatalf("https to the node certificate: %v", err)
	}
	resp.Body.Close()
	_, err = hc.Get(serve(p.RogueCertFile, p.RogueKeyFile))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("https to the rogue certificate: %v, want an unknown-authority error", err)
	}
}

func TestWriteTestPKIRefusesANonIP(t *testing.T) {
	if _, err := WriteTestPKI(t.TempDir(), []string{"node-0"}); err == nil {
		t.Fatal("WriteTestPKI accepted a host name as an IP")
	}
}
