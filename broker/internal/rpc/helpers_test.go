package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/peer"

	"narad.dev/broker/internal/rpc/nodepb"
)

// stubNode is a Node server that counts the calls its handlers saw and records the deadline
// each call arrived with.
type stubNode struct {
	nodepb.UnimplementedNodeServer
	calls     atomic.Int64
	remaining atomic.Int64 // time.Duration left on the last call's deadline; -1 = none
	peerNode  atomic.Value // string: the node ID the last caller claimed

	block    chan struct{} // non-nil: Consume waits until it is closed
	inflight atomic.Int64  // Consume calls inside the handler now
	maxIn    atomic.Int64  // the most Consume calls ever inside the handler at once

	statusDelay time.Duration // NodeStatus answers after this long, as a parked long poll does
}

func (s *stubNode) note(ctx context.Context) {
	s.calls.Add(1)
	if p, ok := peer.FromContext(ctx); ok {
		if ai, ok := p.AuthInfo.(AuthInfo); ok {
			s.peerNode.Store(ai.NodeID)
		}
	}
	if d, ok := ctx.Deadline(); ok {
		s.remaining.Store(int64(time.Until(d)))
	} else {
		s.remaining.Store(-1)
	}
}

func (s *stubNode) NodeStatus(ctx context.Context, _ *nodepb.NodeStatusRequest) (*nodepb.NodeStatusReply, error) {
	s.note(ctx)
	time.Sleep(s.statusDelay)
	return &nodepb.NodeStatusReply{Status: 200, AppliedIndex: 7, CaughtUp: true}, nil
}

func (s *stubNode) Consume(ctx context.Context, _ *nodepb.ConsumeRequest) (*nodepb.ConsumeReply, error) {
	s.note(ctx)
	if s.block != nil {
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		for m := s.maxIn.Load(); n > m && !s.maxIn.CompareAndSwap(m, n); m = s.maxIn.Load() {
		}
		select {
		case <-s.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &nodepb.ConsumeReply{Status: 204}, nil
}

func (s *stubNode) CommitProduceBatch(ctx context.Context, req *nodepb.CommitProduceBatchRequest) (*nodepb.CommitProduceBatchReply, error) {
	s.note(ctx)
	return &nodepb.CommitProduceBatchReply{Status: 200, FirstOffset: int64(len(req.GetEntries()))}, nil
}

// testNode is one cluster port: a mux, its gRPC server and (optionally) its stream layer.
type testNode struct {
	addr string
	mux  *Mux
	srv  *Server
	impl *stubNode
}

// startNode listens on ip:0, serves gRPC on the mux and runs it; everything stops at cleanup.
// handshake 0 keeps HandshakeTimeout. opts go to both NewMux and NewServer.
func startNode(t testing.TB, ip string, secret []byte, handshake time.Duration, opts ...Option) *testNode {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen %s: %v", ip, err)
	}
	return startNodeOn(t, ln, secret, handshake, nil, opts...)
}

// startNodeOn is startNode on a given listener; impl nil → a fresh stubNode.
func startNodeOn(t testing.TB, ln net.Listener, secret []byte, handshake time.Duration, impl *stubNode, opts ...Option) *testNode {
	t.Helper()
	m := NewMux(ln, secret, nil, opts...)
	if handshake > 0 {
		m.handshake = handshake
	}
	if impl == nil {
		impl = &stubNode{}
	}
	srv := NewServer(secret, impl, nil, opts...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(m) }()
	ran := make(chan error, 1)
	go func() { ran <- m.Run(context.Background()) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := m.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("mux close: %v", err)
		}
		if err := <-ran; err != nil {
			t.Errorf("mux run: %v", err)
		}
		<-served
	})
	return &testNode{addr: ln.Addr().String(), mux: m, srv: srv, impl: impl}
}

// countingListener counts the bytes the server read from all its connections, and the writes
// it made on them.
type countingListener struct {
	net.Listener
	read, writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read, writes: &l.writes}, nil
}

// countingConn adds the bytes read to n and counts the writes in writes (when not nil).
type countingConn struct {
	net.Conn
	n, writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.writes != nil {
		c.writes.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// recordingConn keeps a copy of everything written to it.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, p...)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *recordingConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.out...)
}

// acceptInto runs sl.Accept until it fails, sending each connection to the returned channel.
func acceptInto(sl *StreamLayer) <-chan net.Conn {
	ch := make(chan net.Conn, 16)
	go func() {
		defer close(ch)
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	return ch
}

// waitClosedByPeer reads c until EOF or error and fails if the peer keeps it open past d.
func waitClosedByPeer(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	if err := closedByPeer(c, d); err != nil {
		t.Fatal(err)
	}
}

// closedByPeer reads c until EOF or error; it returns an error if the peer keeps c open past d.
// Safe to call from any goroutine.
func closedByPeer(c net.Conn, d time.Duration) error {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("connection still open after %v", d)
		}
		return nil
	}
}
