package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental"

	"narad.dev/broker/internal/rpc/nodepb"
)

// Sentinel errors of the client pool.
var (
	// ErrPoolClosed is returned by Client after Close.
	ErrPoolClosed = errors.New("rpc: client pool closed")
	// ErrNoAddress is returned by Client for an empty address.
	ErrNoAddress = errors.New("rpc: empty peer address")
)

// reconnectBackoff keeps a restarted peer reachable within seconds: gRPC's default backoff
// grows to 2 minutes, far longer than a node restart or a Raft failover.
var reconnectBackoff = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   2 * time.Second,
	},
	MinConnectTimeout: DefaultCallTimeout,
}

// Pool caches the gRPC client connections to each peer cluster address: one per message
// class (classes.go), so every call goes out on the connection of its method's class.
// Connections are created lazily (the first RPC dials) and reconnect on their own; every
// connection runs the cluster handshake before its first call, and every call carries a
// deadline (see callTimeout). Safe for concurrent use. The transport is plaintext unless
// NewPool got WithTLS; then every connection verifies the dialed host against the server
// certificate (and presents the node certificate under mutual TLS).
type Pool struct {
	control, bulk []grpc.DialOption
	segment       *clusterCreds // the handshake of raw segment streams (rawsegment.go)

	mu     sync.Mutex
	conns  map[string]*peerConn
	closed bool
}

// NewPool returns an empty pool whose connections prove knowledge of secret and claim
// WithNodeID's node ID, over TLS with WithTLS's configuration, else plaintext.
func NewPool(secret []byte, opts ...Option) *Pool {
	o := collect(opts)
	dialOpts := func(c messageClass) []grpc.DialOption {
		return []grpc.DialOption{
			grpc.WithTransportCredentials(&clusterCreds{secret: secret, nodeID: o.nodeID, tls: o.tls, kind: c.tag}),
			grpc.WithChainUnaryInterceptor(deadlineInterceptor),
			grpc.WithDefaultCallOptions(
				grpc.MaxCallRecvMsgSize(maxGRPCMessage),
				grpc.MaxCallSendMsgSize(c.maxRecv),
			),
			grpc.WithConnectParams(reconnectBackoff),
			grpc.WithStaticStreamWindowSize(streamWindow),
			grpc.WithStaticConnWindowSize(connWindow),
			experimental.WithBufferPool(Buffers),
		}
	}
	return &Pool{
		control: dialOpts(controlClass),
		bulk:    dialOpts(bulkClass),
		segment: &clusterCreds{secret: secret, nodeID: o.nodeID, tls: o.tls, kind: SegmentStreamTag},
		conns:   make(map[string]*peerConn),
	}
}

// peerConn is the pair of connections to one peer. As a grpc.ClientConnInterface it sends
// each call on the connection of its method's class.
type peerConn struct {
	control, bulk *grpc.ClientConn
}

var _ grpc.ClientConnInterface = (*peerConn)(nil)

func (pc *peerConn) pick(method string) *grpc.ClientConn {
	if classOf(method) == bulkClass {
		return pc.bulk
	}
	return pc.control
}

// Invoke implements grpc.ClientConnInterface.
func (pc *peerConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return pc.pick(method).Invoke(ctx, method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface.
func (pc *peerConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return pc.pick(method).NewStream(ctx, desc, method, opts...)
}

func (pc *peerConn) close() error {
	return errors.Join(pc.control.Close(), pc.bulk.Close())
}

// Client returns a Node client for the peer at addr ("host:port"), creating its connections
// on first use. It does not dial: connection errors surface on the first call.
func (p *Pool) Client(addr string) (nodepb.NodeClient, error) {
	if addr == "" {
		return nil, ErrNoAddress
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	pc, ok := p.conns[addr]
	if !ok {
		control, err := grpc.NewClient(addr, p.control...)
		if err != nil {
			return nil, fmt.Errorf("rpc: client for %s: %w", addr, err)
		}
		bulk, err := grpc.NewClient(addr, p.bulk...)
		if err != nil {
			control.Close()
			return nil, fmt.Errorf("rpc: client for %s: %w", addr, err)
		}
		pc = &peerConn{control: control, bulk: bulk}
		p.conns[addr] = pc
	}
	return nodepb.NewNodeClient(pc), nil
}

// Drop closes and forgets the connections to addr (a removed member); calls in flight on
// them fail. A later Client(addr) starts afresh.
func (p *Pool) Drop(addr string) error {
	p.mu.Lock()
	pc, ok := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	if !ok {
		return nil
	}
	return pc.close()
}

// ResetBackoff lets calls to addr reach it at once when its connections are waiting out their
// reconnect backoff (the peer is known to be up again: its heartbeat just applied). Until the
// next attempt every call on such a connection fails at once with the last dial error. A
// pair of which either connection is in TRANSIENT_FAILURE is closed and forgotten, as Drop
// does, and the next Client(addr) dials afresh; a connecting, ready or idle pair is not
// touched. (grpc.ClientConn.ResetConnectBackoff would do it in place, but it iterates the
// connection's subchannels outside its lock, a data race with a subchannel being created.)
func (p *Pool) ResetBackoff(addr string) {
	p.mu.Lock()
	pc, ok := p.conns[addr]
	if ok && pc.failing() {
		delete(p.conns, addr)
	} else {
		pc = nil
	}
	p.mu.Unlock()
	if pc != nil {
		_ = pc.close() // no call can be in flight on it: a failing connection has no transport
	}
}

// failing reports whether either connection is waiting out a reconnect backoff.
func (pc *peerConn) failing() bool {
	return pc.control.GetState() == connectivity.TransientFailure ||
		pc.bulk.GetState() == connectivity.TransientFailure
}

// Close closes every connection; later Client calls return ErrPoolClosed. Idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = make(map[string]*peerConn)
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, pc := range conns {
		if err := pc.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
