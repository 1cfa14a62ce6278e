package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"narad.dev/broker/internal/rpc/nodepb"
)

// stubNode is a Node server that counts the calls its handlers saw and records the deadline
// each call arrived with.
type stubNode struct {
	nodepb.UnimplementedNodeServer
	calls     atomic.Int64
	remaining atomic.Int64 // time.Duration left on the last call's deadline; -1 = none
}

func (s *stubNode) note(ctx context.Context) {
	s.calls.Add(1)
	if d, ok := ctx.Deadline(); ok {
		s.remaining.Store(int64(time.Until(d)))
	} else {
		s.remaining.Store(-1)
	}
}

func (s *stubNode) NodeStatus(ctx context.Context, _ *nodepb.NodeStatusRequest) (*nodepb.NodeStatusReply, error) {
	s.note(ctx)
	return &nodepb.NodeStatusReply{Status: 200, AppliedIndex: 7, CaughtUp: true}, nil
}

func (s *stubNode) Consume(ctx context.Context, _ *nodepb.ConsumeRequest) (*nodepb.ConsumeReply, error) {
	s.note(ctx)
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
	srv  *grpc.Server
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
	m := NewMux(ln, secret, nil, opts...)
	if handshake > 0 {
		m.handshake = handshake
	}
	impl := &stubNode{}
	srv := NewServer(secret, impl, nil, opts...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(m.GRPCListener()) }()
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

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
