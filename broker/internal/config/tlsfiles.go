package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
)

// checkTLSFiles enforces the TLS settings' rules: tls-cert and tls-key come together,
// cluster-tls-ca only with them, and every named file exists and parses (the certificate and
// key load as a pair, the CA holds at least one certificate). Errors name the field to fix.
func checkTLSFiles(s *Serve, origin func(string) string) error {
	switch {
	case s.TLSCertFile != "" && s.TLSKeyFile == "":
		return fieldErr(optTLSKey, "required when tls-cert is set%s", origin(optTLSCert))
	case s.TLSKeyFile != "" && s.TLSCertFile == "":
		return fieldErr(optTLSCert, "required when tls-key is set%s", origin(optTLSKey))
	case s.ClusterTLSCAFile != "" && s.TLSCertFile == "":
		return fieldErr(optClusterTLSCA, "needs tls-cert and tls-key (the node certificate the CA signs)%s", origin(optClusterTLSCA))
	case s.TLSCertFile == "":
		return nil
	}
	certPEM, err := os.ReadFile(s.TLSCertFile)
	if err != nil {
		return fieldErr(optTLSCert, "%v%s", err, origin(optTLSCert))
	}
	if n := countCertificates(certPEM); n == 0 {
		return fieldErr(optTLSCert, "%s holds no PEM certificate%s", s.TLSCertFile, origin(optTLSCert))
	}
	keyPEM, err := os.ReadFile(s.TLSKeyFile)
	if err != nil {
		return fieldErr(optTLSKey, "%v%s", err, origin(optTLSKey))
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return fieldErr(optTLSKey, "does not load with tls-cert %s: %v%s", s.TLSCertFile, err, origin(optTLSKey))
	}
	if s.ClusterTLSCAFile == "" {
		return nil
	}
	caPEM, err := os.ReadFile(s.ClusterTLSCAFile)
	if err != nil {
		return fieldErr(optClusterTLSCA, "%v%s", err, origin(optClusterTLSCA))
	}
	if !x509.NewCertPool().AppendCertsFromPEM(caPEM) {
		return fieldErr(optClusterTLSCA, "%s holds no PEM certificate%s", s.ClusterTLSCAFile, origin(optClusterTLSCA))
	}
	return nil
}

// countCertificates counts the PEM CERTIFICATE blocks of data that parse as X.509.
func countCertificates(data []byte) int {
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return n
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err == nil {
			n++
		}
	}
}
