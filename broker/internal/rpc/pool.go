package rpc

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
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

// Pool caches one gRPC client connection per peer cluster address. Connections are created
// lazily (the first RPC dials) and reconnect on their own; every connection runs the cluster
// handshake before its first call, and every call carries a deadline (see callTimeout). Safe
// for concurrent use. The transport is plaintext unless NewPool got WithTLS; then every
// connection verifies the dialed host against the server certificate (and presents the node
// certificate under mutual TLS).
type Pool struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewPool returns an empty pool whose connections prove knowledge of secret and claim
// WithNodeID's node ID, over TLS with WithTLS's configuration, else plaintext.
func NewPool(secret []byte, opts ...Option) *Pool {
	o := collect(opts)
	return &Pool{
		opts: []grpc.DialOption{
			grpc.WithTransportCredentials(&clusterCreds{secret: secret, nodeID: o.nodeID, tls: o.tls}),
			grpc.WithChainUnaryInterceptor(deadlineInterceptor),
			grpc.WithDefaultCallOptions(
				grpc.MaxCallRecvMsgSize(maxGRPCMessage),
				grpc.MaxCallSendMsgSize(maxGRPCMessage),
			),
			grpc.WithConnectParams(reconnectBackoff),
			experimental.WithBufferPool(Buffers),
		},
		conns: make(map[string]*grpc.ClientConn),
	}
}

// Client returns a Node client for the peer at addr ("host:port"), creating its connection
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
	cc, ok := p.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, p.opts...)
		if err != nil {
			return nil, fmt.Errorf("rpc: client for %s: %w", addr, err)
		}
		p.conns[addr] = cc
	}
	return nodepb.NewNodeClient(cc), nil
}

// Drop closes and forgets the connection to addr (a removed member); calls in flight on it
// fail. A later Client(addr) starts afresh.
func (p *Pool) Drop(addr string) error {
	p.mu.Lock()
	cc, ok := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	if !ok {
		return nil
	}
	return cc.Close()
}

// Close closes every connection; later Client calls return ErrPoolClosed. Idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = make(map[string]*grpc.ClientConn)
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
