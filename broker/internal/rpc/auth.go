package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// authLogEvery bounds how often a rejected peer is logged: a node with the wrong secret
// retries constantly and must not flood the log.
const authLogEvery = time.Minute

// warnLimiter lets one warning through per authLogEvery and counts the ones it holds back.
// The zero value is ready; safe for concurrent use.
type warnLimiter struct {
	last    atomic.Int64 // unix nanoseconds of the last warning let through
	dropped atomic.Int64 // warnings held back since then
}

// allow reports whether to log now and, if so, how many warnings were held back before.
func (w *warnLimiter) allow() (suppressed int64, ok bool) {
	now := time.Now().UnixNano()
	last := w.last.Load()
	if last != 0 && now-last < int64(authLogEvery) || !w.last.CompareAndSwap(last, now) {
		w.dropped.Add(1)
		return 0, false
	}
	return w.dropped.Swap(0), true
}

// AuthInfo is the gRPC peer AuthInfo of a cluster connection: the node ID the peer claimed
// in the cluster handshake (proven only to belong to a holder of the cluster secret).
type AuthInfo struct {
	credentials.CommonAuthInfo
	NodeID string
}

// AuthType implements credentials.AuthInfo.
func (AuthInfo) AuthType() string { return "narad-cluster" }

// PeerNodeID returns the node ID the caller of a node RPC claimed in its cluster handshake.
func PeerNodeID(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	ai, ok := p.AuthInfo.(AuthInfo)
	if !ok || ai.NodeID == "" {
		return "", false
	}
	return ai.NodeID, true
}

// authedConn is a connection the Mux authenticated, as handed to the gRPC listener.
type authedConn struct {
	net.Conn
	nodeID string
}

func securityLevel(conn net.Conn) credentials.SecurityLevel {
	if _, ok := conn.(*tls.Conn); ok {
		return credentials.PrivacyAndIntegrity
	}
	return credentials.NoSecurity
}

// clusterCreds are the gRPC transport credentials of the cluster port. Client side: write
// the kind byte of its class (GRPCTag when zero), run TLS (with a ClusterTLS), then the cluster handshake, before gRPC writes its
// HTTP/2 preface. Server side: accept only connections the Mux already authenticated (the
// Mux ran TLS and the handshake), so gRPC never reads HTTP/2 from an unauthenticated peer.
type clusterCreds struct {
	secret []byte
	nodeID string
	tls    *ClusterTLS
	kind   byte // client side: GRPCTag or GRPCBulkTag; 0 = GRPCTag
}

var _ credentials.TransportCredentials = (*clusterCreds)(nil)

// ClientHandshake implements credentials.TransportCredentials.
func (c *clusterCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(HandshakeTimeout)
	}
	if err := raw.SetDeadline(deadline); err != nil {
		return nil, nil, err
	}
	kind := c.kind
	if kind == 0 {
		kind = GRPCTag
	}
	if _, err := raw.Write([]byte{kind}); err != nil {
		return nil, nil, err
	}
	conn := raw
	if c.tls != nil {
		tc := tls.Client(raw, c.tls.clientConfigFor(authority))
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, err
		}
		conn = tc
	}
	if err := clientHandshake(conn, c.secret, kind, c.nodeID); err != nil {
		return nil, nil, fmt.Errorf("rpc: cluster handshake with %s: %w", authority, err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, nil, err
	}
	return conn, AuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: securityLevel(conn)}}, nil
}

// errNotFromMux refuses a connection that did not come through the Mux's handshake.
var errNotFromMux = errors.New("rpc: connection did not pass the cluster handshake")

// ServerHandshake implements credentials.TransportCredentials.
func (c *clusterCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	ac, ok := conn.(*authedConn)
	if !ok {
		return nil, nil, errNotFromMux
	}
	return ac.Conn, AuthInfo{
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: securityLevel(ac.Conn)},
		NodeID:         ac.nodeID,
	}, nil
}

// Info implements credentials.TransportCredentials.
func (c *clusterCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "narad-cluster"}
}

// Clone implements credentials.TransportCredentials.
func (c *clusterCreds) Clone() credentials.TransportCredentials {
	cc := *c
	return &cc
}

// OverrideServerName implements credentials.TransportCredentials (deprecated; unused).
func (c *clusterCreds) OverrideServerName(string) error { return nil }
