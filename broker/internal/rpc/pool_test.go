package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/rpc/nodepb"
)

func TestPoolReusesOneConnPerAddress(t *testing.T) {
	secret := []byte("s3cret")
	a := startNode(t, "127.0.0.1", secret, 0)
	b := startNode(t, "127.0.0.2", secret, 0)
	p := NewPool(secret)
	defer p.Close()
	for range 3 {
		for _, n := range []*testNode{a, b} {
			c, err := p.Client(n.addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.mu.Lock()
	conns := len(p.conns)
	p.mu.Unlock()
	if conns != 2 {
		t.Fatalf("pool holds %d connections, want 2", conns)
	}
	if err := p.Drop(a.addr); err != nil {
		t.Fatal(err)
	}
	c, err := p.Client(a.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{}); err != nil {
		t.Fatalf("call after Drop: %v", err)
	}
}

func TestPoolRefusesAfterCloseAndEmptyAddress(t *testing.T) {
	p := NewPool(nil)
	if _, err := p.Client(""); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("empty address: %v", err)
	}
	if _, err := p.Client("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Client("127.0.0.1:1"); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("after close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestUnimplementedOpMapsTo400OthersTo503(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	p := NewPool(secret)
	defer p.Close()
	c, err := p.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	// The stub does not implement GetTopic: an older peer, as far as the caller can tell.
	_, err = c.GetTopic(context.Background(), &nodepb.GetTopicRequest{Name: "t"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("got %v, want Unimplemented", err)
	}
	cases := []struct {
		err  error
		want int32
	}{
		{nil, 0},
		{err, 400},
		{status.Error(codes.Unauthenticated, "x"), 503},
		{status.Error(codes.DeadlineExceeded, "x"), 503},
		{status.Error(codes.Unavailable, "x"), 503},
		{context.Canceled, 503},
		{fmt.Errorf("wrapped: %w", errors.New("boom")), 503},
	}
	for _, tc := range cases {
		if got := errcode.TransportStatus(tc.err); got != tc.want {
			t.Errorf("TransportStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// gateListener drops every connection while closed: a peer that is down as far as a dialer
// can tell, on an address that stays reserved.
type gateListener struct {
	net.Listener
	open atomic.Bool
}

func (g *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil || g.open.Load() {
			return c, err
		}
		c.Close()
	}
}

// A connection whose dial failed (the peer was down) waits out its reconnect backoff, failing
// every call meanwhile; ResetBackoff (the peer is known to be back) makes it dial at once.
func TestResetBackoffReachesARestartedPeerAtOnce(t *testing.T) {
	old := reconnectBackoff
	reconnectBackoff.Backoff.BaseDelay = time.Hour // only ResetBackoff can end the wait
	reconnectBackoff.Backoff.MaxDelay = time.Hour
	t.Cleanup(func() { reconnectBackoff = old })

	secret := []byte("s3cret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := &gateListener{Listener: ln}
	n := startNodeOn(t, gate, secret, 0, nil)
	p := NewPool(secret)
	defer p.Close()
	call := func() error { // a client per call, as every caller of the pool takes one
		c, err := p.Client(n.addr)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = c.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
		return err
	}
	if err := call(); err == nil {
		t.Fatal("a call to a peer that is down succeeded")
	}
	gate.open.Store(true) // the peer is back
	if err := call(); err == nil {
		t.Fatal("the call succeeded before the backoff was reset: the test does not hold the connection in backoff")
	}
	p.ResetBackoff("127.0.0.1:1") // an address the pool never dialed: nothing happens
	var last error
	for range 50 { // a fresh dial may still fail once (the peer's mux was refusing a moment ago)
		p.ResetBackoff(n.addr)
		if last = call(); last == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("calls still fail after ResetBackoff: %v", last)
	}
	// A ready connection is kept: a reset now leaves the pool's pair as it is.
	p.mu.Lock()
	before := p.conns[n.addr]
	p.mu.Unlock()
	p.ResetBackoff(n.addr)
	p.mu.Lock()
	after := p.conns[n.addr]
	p.mu.Unlock()
	if before == nil || after != before {
		t.Fatal("ResetBackoff replaced a ready connection")
	}
}

// A small call that waits before it answers (as a follower's fetch waits for records) costs
// the server one write, its answer: node RPC's connections have fixed flow-control windows,
// so neither end sends a bandwidth-estimating PING (and its answer) for the DATA frames of
// every call, which gRPC's default does.
func TestASmallCallCostsTheServerOneWrite(t *testing.T) {
	secret := []byte("s3cret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := &countingListener{Listener: ln}
	n := startNodeOn(t, wl, secret, 0, &stubNode{statusDelay: 2 * time.Millisecond})
	p := NewPool(secret)
	defer p.Close()
	c, err := p.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	call := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // the connection's setup (settings, their acks) is not counted
		call()
	}
	time.Sleep(50 * time.Millisecond)
	const calls = 200
	before := wl.writes.Load()
	for range calls {
		call()
	}
	time.Sleep(50 * time.Millisecond) // a PING answered late still counts
	// With the PINGs each call costs the server at least two writes (its answer and a PING
	// ack). Without them it is one, but on a busy machine gRPC's writer sometimes sends an
	// answer's headers before its message is queued, in a write of their own (1.44 writes per
	// call seen once under load): the bound lies between the two.
	if got := wl.writes.Load() - before; got > calls*7/4 {
		t.Fatalf("the server wrote %d times for %d calls, want about one write per call", got, calls)
	}
}
