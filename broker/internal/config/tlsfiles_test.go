package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testPEM is a self-signed certificate with its key, plus a key of another pair.
type testPEM struct {
	cert, key, otherKey string // file paths
}

// writeTestPEM writes a fresh self-signed ECDSA certificate, its key and an unrelated key.
func writeTestPEM(t *testing.T) testPEM {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "config-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := func(k *ecdsa.PrivateKey) string {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b}))
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testPEM{
		cert:     writeFile(t, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))),
		key:      writeFile(t, "key.pem", keyPEM(key)),
		otherKey: writeFile(t, "other-key.pem", keyPEM(other)),
	}
}

func TestTLSFilesLoadFromFlagsEnvAliasesAndFile(t *testing.T) {
	p := writeTestPEM(t)
	want := []string{p.cert, p.key, p.cert}
	cases := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flags", []string{"--tls-cert", p.cert, "--tls-key", p.key, "--cluster-tls-ca", p.cert}, nil},
		{"canonical env", nil, map[string]string{"NARAD_TLS_CERT": p.cert, "NARAD_TLS_KEY": p.key, "NARAD_CLUSTER_TLS_CA": p.cert}},
		{"spec env aliases", nil, map[string]string{"NARAD_CLUSTER_TLS_CERT_FILE": p.cert, "NARAD_CLUSTER_TLS_KEY_FILE": p.key, "NARAD_CLUSTER_TLS_CA_FILE": p.cert}},
		{"config file", []string{"--config", writeFile(t, "c.yaml", "tls-cert: "+p.cert+"\ntls-key: "+p.key+"\ncluster-tls-ca: "+p.cert+"\n")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustLoad(t, c.args, c.env)
			if got := []string{s.TLSCertFile, s.TLSKeyFile, s.ClusterTLSCAFile}; !reflect.DeepEqual(got, want) {
				t.Fatalf("tls files = %v, want %v", got, want)
			}
		})
	}
	// Server-side TLS alone (no CA) is valid too.
	if s := mustLoad(t, []string{"--tls-cert", p.cert, "--tls-key", p.key}, nil); s.ClusterTLSCAFile != "" || s.TLSCertFile != p.cert {
		t.Fatalf("cert+key without CA: %+v", s)
	}
}

func TestTLSSettingsAreCheckedAtLoadAndNameTheField(t *testing.T) {
	p := writeTestPEM(t)
	notPEM := writeFile(t, "garbage.pem", "not a certificate\n")
	keyOnly := p.key // a PEM file without a certificate
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		field string
		want  string
	}{
		{"cert without key", []string{"--tls-cert", p.cert}, nil, "tls-key", "required when tls-cert is set (from flag --tls-cert)"},
		{"key without cert", nil, map[string]string{"NARAD_CLUSTER_TLS_KEY_FILE": p.key}, "tls-cert", "required when tls-key is set (from env NARAD_CLUSTER_TLS_KEY_FILE)"},
		{"ca without cert and key", []string{"--cluster-tls-ca", p.cert}, nil, "cluster-tls-ca", "needs tls-cert and tls-key"},
		{"missing cert file", []string{"--tls-cert", "/nonexistent/c.pem", "--tls-key", p.key}, nil, "tls-cert", "no such file"},
		{"cert file not PEM", []string{"--tls-cert", notPEM, "--tls-key", p.key}, nil, "tls-cert", "holds no PEM certificate"},
		{"cert file holds only a key", []string{"--tls-cert", keyOnly, "--tls-key", p.key}, nil, "tls-cert", "holds no PEM certificate"},
		{"missing key file", []string{"--tls-cert", p.cert, "--tls-key", "/nonexistent/k.pem"}, nil, "tls-key", "no such file"},
		{"key file not PEM", []string{"--tls-cert", p.cert, "--tls-key", notPEM}, nil, "tls-key", "does not load with tls-cert"},
		{"key of another pair", []string{"--tls-cert", p.cert, "--tls-key", p.otherKey}, nil, "tls-key", "does not load with tls-cert"},
		{"missing ca file", []string{"--tls-cert", p.cert, "--tls-key", p.key, "--cluster-tls-ca", "/nonexistent/ca.pem"}, nil, "cluster-tls-ca", "no such file"},
		{"ca without certificates", []string{"--tls-cert", p.cert, "--tls-key", p.key, "--cluster-tls-ca", notPEM}, nil, "cluster-tls-ca", "holds no PEM certificate"},
		{"ca holding only a key", []string{"--tls-cert", p.cert, "--tls-key", p.key}, map[string]string{"NARAD_CLUSTER_TLS_CA_FILE": keyOnly}, "cluster-tls-ca", "holds no PEM certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.env)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Load = %v, want a FieldError for %s", err, c.field)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: "+c.field+": ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Fatalf("message %q: want one line starting %q containing %q", msg, "config: "+c.field+": ", c.want)
			}
		})
	}
}

func TestInitialMembersAndHeartbeatsLoad(t *testing.T) {
	s := mustLoad(t, []string{"--heartbeat-interval=200ms", "--heartbeat-timeout=2s"},
		map[string]string{"NARAD_CLUSTER_INITIAL_MEMBERS": "narad-0, narad-1,narad-2"})
	if !reflect.DeepEqual(s.InitialMembers, []string{"narad-0", "narad-1", "narad-2"}) {
		t.Fatalf("InitialMembers = %v", s.InitialMembers)
	}
	if s.HeartbeatInterval != 200*time.Millisecond || s.HeartbeatTimeout != 2*time.Second {
		t.Fatalf("heartbeat interval/timeout = %s/%s", s.HeartbeatInterval, s.HeartbeatTimeout)
	}
	// The canonical env name beats the spec alias; the file list syntax works too.
	s = mustLoad(t, []string{"--config", writeFile(t, "c.yaml", "initial-members: [a, b]\n")},
		map[string]string{"NARAD_INITIAL_MEMBERS": "x"})
	if !reflect.DeepEqual(s.InitialMembers, []string{"x"}) {
		t.Fatalf("InitialMembers = %v, want [x]", s.InitialMembers)
	}
	s = mustLoad(t, []string{"--config", writeFile(t, "c.yaml", "initial-members: [a, b]\n")}, nil)
	if !reflect.DeepEqual(s.InitialMembers, []string{"a", "b"}) {
		t.Fatalf("InitialMembers from file = %v", s.InitialMembers)
	}
}
