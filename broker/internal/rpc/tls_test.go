package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"narad.dev/broker/internal/rpc/nodepb"
)

func TestLoadClusterTLSChecksFilesAndBuildsMutualConfigs(t *testing.T) {
	p := newTestPKI(t)
	notPEM := filepath.Join(p.dir, "garbage.pem")
	if err := os.WriteFile(notPEM, []byte("nothing here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name            string
		cert, key, ca   string
		wantErr         error // nil: any error when wantFail
		wantFail        bool
		wantMutual      bool
		wantClientAuth  tls.ClientAuthType
		wantClientCerts int
	}{
		{name: "mutual with CA", cert: p.certFile, key: p.keyFile, ca: p.caFile, wantMutual: true, wantClientAuth: tls.RequireAndVerifyClientCert, wantClientCerts: 1},
		{name: "server TLS only", cert: p.certFile, key: p.keyFile, wantClientAuth: tls.NoClientCert},
		{name: "missing cert", cert: filepath.Join(p.dir, "none.pem"), key: p.keyFile, wantFail: true},
		{name: "key of another pair", cert: p.certFile, key: p.rogueK, wantFail: true},
		{name: "missing CA", cert: p.certFile, key: p.keyFile, ca: filepath.Join(p.dir, "none.pem"), wantFail: true},
		{name: "CA without certificates", cert: p.certFile, key: p.keyFile, ca: notPEM, wantFail: true, wantErr: ErrNoCACertificates},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := LoadClusterTLS(tc.cert, tc.key, tc.ca)
			if tc.wantFail {
				if err == nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("LoadClusterTLS = %v, want failure %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ct.Mutual() != tc.wantMutual {
				t.Fatalf("Mutual() = %v", ct.Mutual())
			}
			srv, cli := ct.ServerConfig(), ct.ClientConfig()
			if srv.MinVersion != tls.VersionTLS12 || cli.MinVersion != tls.VersionTLS12 {
				t.Fatalf("min versions %x/%x, want TLS 1.2", srv.MinVersion, cli.MinVersion)
			}
			if srv.ClientAuth != tc.wantClientAuth || len(srv.Certificates) != 1 {
				t.Fatalf("server ClientAuth=%v certs=%d", srv.ClientAuth, len(srv.Certificates))
			}
			if len(cli.Certificates) != tc.wantClientCerts || cli.InsecureSkipVerify {
				t.Fatalf("client certs=%d skip=%v", len(cli.Certificates), cli.InsecureSkipVerify)
			}
			if (cli.RootCAs != nil) != tc.wantMutual {
				t.Fatalf("client RootCAs set = %v, want %v (nil: system roots)", cli.RootCAs != nil, tc.wantMutual)
			}
		})
	}
}

func TestMutualTLSCallNeedsACertificateOfTheClusterCA(t *testing.T) {
	secret := []byte("s3cret")
	p := newTestPKI(t)
	n := startNode(t, "127.0.0.1", secret, 0, WithTLS(p.node(t)))
	ca := x509.NewCertPool()
	caPEM, err := os.ReadFile(p.caFile)
	if err != nil || !ca.AppendCertsFromPEM(caPEM) {
		t.Fatalf("read CA: %v", err)
	}
	creds := func(ct *ClusterTLS) credentials.TransportCredentials {
		return &clusterCreds{secret: secret, nodeID: "n1", tls: ct}
	}
	cases := []struct {
		name   string
		creds  credentials.TransportCredentials
		wantOK bool
	}{
		{"cluster certificate", creds(p.node(t)), true},
		{"certificate of another CA", creds(mustLoadTLS(t, p.rogueCert, p.rogueK, p.caFile)), false},
		{"no client certificate", creds(&ClusterTLS{ca: ca}), false},
		{"server not signed by the trusted CA", creds(mustLoadTLS(t, p.certFile, p.keyFile, p.rogueCA)), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.impl.calls.Load()
			cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rep, err := nodepb.NewNodeClient(cc).NodeStatus(ctx, &nodepb.NodeStatusRequest{})
			if tc.wantOK {
				if err != nil || rep.GetStatus() != 200 {
					t.Fatalf("NodeStatus = %v, %v; want 200", rep, err)
				}
				return
			}
			if err == nil {
				t.Fatal("call succeeded, want refused")
			}
			if got := n.impl.calls.Load(); got != before {
				t.Fatalf("handler ran %d times for a refused peer", got-before)
			}
		})
	}
}

// The cluster handshake stays required under mutual TLS: a valid certificate alone is not
// enough.
func TestMutualTLSStillRequiresTheSecretProof(t *testing.T) {
	p := newTestPKI(t)
	n := startNode(t, "127.0.0.1", []byte("s3cret"), 0, WithTLS(p.node(t)))
	pool := NewPool([]byte("other"), WithTLS(p.node(t)))
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{}); err == nil {
		t.Fatal("call with a wrong secret over mTLS succeeded")
	}
	if n.impl.calls.Load() != 0 {
		t.Fatal("handler ran for a call without the secret proof")
	}
}

func TestPlaintextClientToTLSMuxIsRefused(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0, WithTLS(newTestPKI(t).node(t)))
	pool := NewPool(secret)
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{}); err == nil {
		t.Fatal("plaintext gRPC call to a TLS cluster port succeeded")
	}
	if n.impl.calls.Load() != 0 {
		t.Fatal("handler ran for a plaintext call")
	}
	// The mux itself closes a plaintext first byte at once, before any gRPC handling.
	raw, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitClosedByPeer(t, raw, 5*time.Second)
}

// The client checks the dialed host against the server certificate: a node reached on an
// address its certificate does not name is refused even though the CA signed it.
func TestPoolRefusesServerCertificateNotNamingTheDialedHost(t *testing.T) {
	secret := []byte("s3cret")
	p := newTestPKI(t) // certificate names 127.0.0.1-3 and localhost only
	n := startNode(t, "127.0.0.4", secret, 0, WithTLS(p.node(t)))
	pool := NewPool(secret, WithTLS(p.node(t)))
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{}); err == nil {
		t.Fatal("call to a host the certificate does not name succeeded")
	}
	// A node on an address its certificate names answers the same pool.
	good := startNode(t, "127.0.0.1", secret, 0, WithTLS(p.node(t)))
	c, err = pool.Client(good.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{}); err != nil {
		t.Fatalf("call to a named host: %v", err)
	}
}

// tlsStreamPeer returns a stream layer of a fresh mux (not running) on 127.0.0.2 whose Dial
// uses opts.
func tlsStreamPeer(t *testing.T, secret []byte, opts ...Option) *StreamLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, secret, nil)
	t.Cleanup(func() { m.Close() })
	sl, err := NewStreamLayer(m, ln.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

func TestRaftDialerWithoutTheClusterCertificateIsRefusedByTLSMux(t *testing.T) {
	secret := []byte("s3cret")
	p := newTestPKI(t)
	n := startNode(t, "127.0.0.1", secret, time.Second, WithTLS(p.node(t)))
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	cases := []struct {
		name string
		opt  Option
	}{
		{"plaintext dialer", WithTLS(nil)},
		{"certificate of another CA", WithTLS(mustLoadTLS(t, p.rogueCert, p.rogueK, p.caFile))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tlsStreamPeer(t, secret, tc.opt).Dial(raft.ServerAddress(n.addr), 2*time.Second)
			if err == nil {
				// TLS 1.3 and plaintext dialers finish writing before the server decides;
				// the refusal shows as the peer closing the connection.
				defer c.Close()
				waitClosedByPeer(t, c, 5*time.Second)
			}
			select {
			case got := <-accepted:
				t.Fatalf("refused dialer reached Accept: %v", got.RemoteAddr())
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
	// A dialer with the cluster certificate gets through, and bytes flow inside TLS.
	good, err := tlsStreamPeer(t, secret, WithTLS(p.node(t))).Dial(raft.ServerAddress(n.addr), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, ok := good.(*tls.Conn); !ok {
		t.Fatalf("dialed %T, want *tls.Conn", good)
	}
	select {
	case got := <-accepted:
		defer got.Close()
		if _, ok := got.(*tls.Conn); !ok {
			t.Fatalf("accepted %T, want *tls.Conn", got)
		}
		if _, err := good.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if err := got.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("read %q, %v", buf, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("raft dialer with the cluster certificate never accepted")
	}
}

// A TLS dialer to a plaintext mux fails too: its ClientHello is no valid handshake.
func TestTLSRaftDialerToPlaintextMuxIsRefused(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, time.Second)
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	c, err := tlsStreamPeer(t, secret, WithTLS(newTestPKI(t).node(t))).Dial(raft.ServerAddress(n.addr), 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("TLS raft dial to a plaintext mux succeeded")
	}
	select {
	case got := <-accepted:
		t.Fatalf("TLS dialer reached a plaintext Accept: %v", got.RemoteAddr())
	case <-time.After(100 * time.Millisecond):
	}
}

// A peer that sends RaftTag and never starts its TLS handshake neither blocks other
// connections nor outlives the handshake timeout.
func TestStalledRaftTLSHandshakeDoesNotBlockAccept(t *testing.T) {
	secret := []byte("s3cret")
	p := newTestPKI(t)
	n := startNode(t, "127.0.0.1", secret, 300*time.Millisecond, WithTLS(p.node(t)))
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	stalled, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte{RaftTag}); err != nil {
		t.Fatal(err)
	}
	good, err := tlsStreamPeer(t, secret, WithTLS(p.node(t))).Dial(raft.ServerAddress(n.addr), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("raft connection not accepted while a TLS handshake stalls")
	}
	waitClosedByPeer(t, stalled, 5*time.Second)
}
