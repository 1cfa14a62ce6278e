package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// ErrNoCACertificates is returned by LoadClusterTLS for a CA file without a PEM certificate.
var ErrNoCACertificates = errors.New("rpc: cluster CA file holds no certificate")

// ClusterTLS is the TLS configuration of the cluster port (docs/internals/metastore.md §2, docs/internals/node-rpc.md §1): one
// node certificate used both to serve (gRPC and Raft) and, under mutual TLS, to dial peers.
//
// With a CA (mutual TLS) servers require a client certificate that chains to the CA
// (tls.RequireAndVerifyClientCert) and clients verify servers against the CA only, so node
// certificates need both the serverAuth and clientAuth extended key usages (or none).
// Without a CA, servers ask for no client certificate and clients verify servers against the
// system roots: nothing is ever skipped, so a self-signed node certificate needs the CA.
// Clients always check the dialed host (IP or DNS name) against the server certificate.
// TLS 1.2 is the minimum. A ClusterTLS never changes after LoadClusterTLS.
type ClusterTLS struct {
	cert tls.Certificate
	ca   *x509.CertPool // nil: no mutual TLS, system roots
}

// LoadClusterTLS reads the node certificate and key (PEM) and, if caFile is not "", the
// cluster CA (PEM, at least one certificate) that turns on mutual TLS.
func LoadClusterTLS(certFile, keyFile, caFile string) (*ClusterTLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("rpc: cluster certificate %s / key %s: %w", certFile, keyFile, err)
	}
	t := &ClusterTLS{cert: cert}
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("rpc: cluster CA: %w", err)
	}
	t.ca = x509.NewCertPool()
	if !t.ca.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s", ErrNoCACertificates, caFile)
	}
	return t, nil
}

// Mutual reports whether peers must present a certificate signed by the cluster CA.
func (t *ClusterTLS) Mutual() bool { return t.ca != nil }

// ServerConfig returns a fresh server-side configuration: the node certificate and, under
// mutual TLS, a required client certificate verified against the CA.
func (t *ClusterTLS) ServerConfig() *tls.Config {
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.cert},
	}
	if t.ca != nil {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = t.ca
	}
	return c
}

// ClientConfig returns a fresh client-side configuration: servers verified against the CA
// (system roots without one) and, under mutual TLS, the node certificate presented. Its
// ServerName is empty: gRPC fills in the dialed host; other callers must set it.
func (t *ClusterTLS) ClientConfig() *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    t.ca,
	}
	if t.ca != nil {
		c.Certificates = []tls.Certificate{t.cert}
	}
	return c
}

// clientConfigFor is ClientConfig with ServerName set to the host of addr ("host:port").
func (t *ClusterTLS) clientConfigFor(addr string) *tls.Config {
	c := t.ClientConfig()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c.ServerName = host
	return c
}

// Option configures NewMux, NewStreamLayer, NewServer and NewPool.
type Option func(*options)

// options collects the Option values; the zero value is today's plaintext behaviour.
type options struct {
	tls    *ClusterTLS
	tlsSet bool // WithTLS was given (even with nil)
	nodeID string
	authed func(accepted bool)
	served func(method string, d time.Duration)

	maxStreams uint32 // NewServer's stream cap; 0 = MaxStreamsPerConn (tests lower it)
}

// WithNodeID sets the node ID this node claims in the cluster handshake when it dials (Pool,
// StreamLayer through its Mux). At most MaxNodeIDLen bytes; peers log and count it.
func WithNodeID(id string) Option {
	return func(o *options) { o.nodeID = id }
}

// WithAuthObserver makes the Mux call f once per cluster handshake it finishes: accepted or
// refused (wrong proof, malformed hello). Connections that time out or fail TLS count as
// refused too.
func WithAuthObserver(f func(accepted bool)) Option {
	return func(o *options) { o.authed = f }
}

// WithCallObserver makes NewServer call f once per node RPC call it serves, as the call ends:
// the method's name as nodepb.Node_ServiceDesc spells it ("ReplicaFetch") and how long the
// handler ran (a stream's whole life). Only registered methods reach f: gRPC answers an
// unknown one itself.
func WithCallObserver(f func(method string, d time.Duration)) Option {
	return func(o *options) { o.served = f }
}

// WithTLS runs the cluster port, its Raft dialer, the gRPC server or the client pool over TLS
// with t. nil (or no WithTLS) keeps plaintext, except for NewStreamLayer, which without
// WithTLS dials as its Mux serves.
func WithTLS(t *ClusterTLS) Option {
	return func(o *options) { o.tls, o.tlsSet = t, true }
}

func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}
