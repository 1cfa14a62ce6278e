package harness

import "narad.dev/broker/testutil/pki"

// PKIValidity is how long every certificate WriteTestPKI issues stays valid.
const PKIValidity = pki.Validity

// PKI is a throw-away public key infrastructure for TLS tests (see narad.dev/broker/testutil/pki):
// a cluster CA with a node certificate valid for the given IPs and "localhost" as server and
// client, and an unrelated rogue CA with its own leaf for negative tests.
type PKI = pki.PKI

// WriteTestPKI writes a fresh PKI into dir (which must exist): ca.pem, node.pem, node-key.pem,
// rogue-ca.pem, rogue.pem, rogue-key.pem.
func WriteTestPKI(dir string, ips []string) (PKI, error) { return pki.Write(dir, ips) }
