package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/testwait"
)

// authCounts is a WithAuthObserver sink.
type authCounts struct{ accepted, refused atomic.Int64 }

func (c *authCounts) observe(ok bool) {
	if ok {
		c.accepted.Add(1)
	} else {
		c.refused.Add(1)
	}
}

func TestGRPCCallWithClusterSecretSucceeds(t *testing.T) {
	secret := []byte("s3cret")
	var counts authCounts
	n := startNode(t, "127.0.0.1", secret, 0, WithAuthObserver(counts.observe))
	pool := NewPool(secret, WithNodeID("node-a"))
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{})
	if err != nil {
		t.Fatalf("NodeStatus: %v", err)
	}
	if rep.GetStatus() != 200 || rep.GetAppliedIndex() != 7 {
		t.Fatalf("reply %+v", rep)
	}
	if n.impl.calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", n.impl.calls.Load())
	}
	if got, _ := n.impl.peerNode.Load().(string); got != "node-a" {
		t.Fatalf("handler saw peer node %q, want node-a", got)
	}
	if a, r := counts.accepted.Load(), counts.refused.Load(); a != 1 || r != 0 {
		t.Fatalf("auth observer: accepted %d refused %d, want 1 0", a, r)
	}
}

// handshakePair runs the two handshake sides over a pipe; read is what the server read.
func handshakePair(clientSecret, serverSecret []byte, id string) (gotID string, read int64, clientErr, serverErr error) {
	c, s := net.Pipe()
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		defer s.Close()
		gotID, serverErr = serverHandshake(&countingConn{Conn: s, n: &n}, serverSecret, GRPCTag)
	})
	clientErr = clientHandshake(c, clientSecret, GRPCTag, id)
	c.Close()
	wg.Wait()
	return gotID, n.Load(), clientErr, serverErr
}

// Both sides prove the secret: a client without it is refused by the server, and a server
// without it is refused by the client, which then never sends a proof of its own.
func TestHandshakeRefusesAWrongSecretBothWays(t *testing.T) {
	const helloLen = 1 + NonceSize + 1 + 2
	id, read, cErr, sErr := handshakePair([]byte("s3cret"), []byte("s3cret"), "n1")
	if cErr != nil || sErr != nil || id != "n1" || read != helloLen+32 {
		t.Fatalf("same secret: client %v, server %v, id %q, read %d", cErr, sErr, id, read)
	}
	// Server without the secret (or a client with another one): the client refuses the
	// server's proof and hangs up without sending its own; the server refuses the peer.
	for _, tc := range []struct{ name, client, server string }{
		{"client with another secret", "other", "s3cret"},
		{"server with another secret", "s3cret", "other"},
	} {
		_, read, cErr, sErr = handshakePair([]byte(tc.client), []byte(tc.server), "n1")
		if !errors.Is(cErr, ErrPeerNotAuthenticated) {
			t.Fatalf("%s: client %v, want ErrPeerNotAuthenticated", tc.name, cErr)
		}
		if !errors.Is(sErr, errHandshakeRefused) {
			t.Fatalf("%s: server %v, want refused", tc.name, sErr)
		}
		if read != helloLen {
			t.Fatalf("%s: server read %d bytes, want the %d-byte hello only (no client proof)", tc.name, read, helloLen)
		}
	}

	// The same over the cluster port, gRPC and Raft.
	var counts authCounts
	n := startNode(t, "127.0.0.1", []byte("s3cret"), 0, WithAuthObserver(counts.observe))
	pool := NewPool([]byte("other"))
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{}); err == nil {
		t.Fatal("call with a wrong secret succeeded")
	}
	if n.impl.calls.Load() != 0 {
		t.Fatal("handler ran for a peer without the secret")
	}
	if _, err := mustStreamLayerPeer(t, []byte("other")).Dial(raft.ServerAddress(n.addr), time.Second); !errors.Is(err, ErrPeerNotAuthenticated) {
		t.Fatalf("raft dial with a wrong secret: %v", err)
	}
	testwait.For(t, 5*time.Second, "refusals counted", func() bool { return counts.refused.Load() >= 2 })
	if counts.accepted.Load() != 0 {
		t.Fatalf("auth observer accepted %d peers without the secret", counts.accepted.Load())
	}
}

// A recorded connection (handshake, HTTP/2, call) replayed byte for byte on a new connection
// runs nothing: the server's nonce differs, so the recorded proof does not verify.
func TestReplayedGRPCConnectionIsRefused(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	var rec *recordingConn
	cc, err := grpc.NewClient(n.addr,
		grpc.WithTransportCredentials(&clusterCreds{secret: secret, nodeID: "n1", kind: GRPCBulkTag}),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			rec = &recordingConn{Conn: c}
			return rec, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodepb.NewNodeClient(cc).CommitProduceBatch(context.Background(), &nodepb.CommitProduceBatchRequest{
		Topic: "t", Entries: []*nodepb.ProduceEntry{{Payload: []byte("admin")}},
	}); err != nil {
		t.Fatal(err)
	}
	cc.Close()
	transcript := rec.written()
	if n.impl.calls.Load() != 1 {
		t.Fatalf("recorded call ran %d times", n.impl.calls.Load())
	}

	raw, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	go func() { _, _ = raw.Write(transcript) }()
	waitClosedByPeer(t, raw, 5*time.Second)
	if got := n.impl.calls.Load(); got != 1 {
		t.Fatalf("replayed connection ran %d more calls", got-1)
	}
}

func TestReplayedRaftHandshakeIsRefused(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	raw, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingConn{Conn: raw}
	dialer := &StreamLayer{secret: secret, nodeID: "n1"}
	good, err := dialer.hello(rec, n.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.Write([]byte("raft command")); err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("recorded raft connection not accepted")
	}
	replay, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if _, err := replay.Write(rec.written()); err != nil {
		t.Fatal(err)
	}
	waitClosedByPeer(t, replay, 5*time.Second)
	select {
	case got := <-accepted:
		t.Fatalf("replayed raft handshake reached Accept: %v", got.RemoteAddr())
	default:
	}
}

// A peer without the secret can make the server read only its hello and proof, never the
// gRPC messages behind them: before the handshake, gRPC read whole messages (up to 16 MiB
// each) before it checked anything.
func TestUnauthenticatedGRPCMessagesAreNeverRead(t *testing.T) {
	secret := []byte("s3cret")
	const body = 4 << 20
	cases := []struct {
		name    string
		maxRead int64
		send    func(t *testing.T, addr string)
	}{
		{"gRPC client without the handshake", 1, func(t *testing.T, addr string) {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err = nodepb.NewNodeClient(cc).CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{
				Topic: "t", Entries: []*nodepb.ProduceEntry{{Payload: make([]byte, body)}},
			})
			if err == nil {
				t.Fatal("call without the handshake succeeded")
			}
		}},
		{"hello with a wrong proof, then a stream of bytes", 1 + handshakeHelloMax, func(t *testing.T, addr string) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			msg := []byte{GRPCTag, handshakeVersion}
			msg = append(msg, make([]byte, NonceSize)...)
			msg = append(msg, MaxNodeIDLen)
			msg = append(msg, strings.Repeat("x", MaxNodeIDLen)...)
			msg = append(msg, make([]byte, 32)...)
			msg = append(msg, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"...)
			msg = append(msg, make([]byte, body)...)
			if err := c.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = c.Write(msg) }()
			waitClosedByPeer(t, c, 5*time.Second)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			cl := &countingListener{Listener: ln}
			n := startNodeOn(t, cl, secret, 0, nil)
			tc.send(t, n.addr)
			if got := cl.read.Load(); got > tc.maxRead {
				t.Fatalf("server read %d bytes from an unauthenticated peer, want at most %d", got, tc.maxRead)
			}
			if n.impl.calls.Load() != 0 {
				t.Fatal("handler ran for an unauthenticated peer")
			}
		})
	}
}

// One connection holds at most its stream cap of calls in the server at once; the rest wait
// and run once streams free up.
func TestConcurrentStreamsPerConnectionAreCapped(t *testing.T) {
	secret := []byte("s3cret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const streamCap = 64
	impl := &stubNode{block: make(chan struct{})}
	n := startNodeOn(t, ln, secret, 0, impl, func(o *options) { o.maxStreams = streamCap })
	pool := NewPool(secret)
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const calls = streamCap + 32
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := c.Consume(ctx, &nodepb.ConsumeRequest{})
			errs <- err
		}()
	}
	testwait.For(t, 30*time.Second, "the stream cap reached", func() bool { return impl.inflight.Load() >= streamCap })
	if got := impl.maxIn.Load(); got > streamCap {
		t.Fatalf("%d calls in the server at once on one connection, cap %d", got, streamCap)
	}
	close(impl.block)
	for range calls {
		if err := <-errs; err != nil {
			t.Fatalf("call after the cap freed: %v", err)
		}
	}
}

// The server announces the stream cap in its first HTTP/2 SETTINGS frame, right after the
// handshake: SETTINGS_MAX_CONCURRENT_STREAMS = MaxStreamsPerConn.
func TestServerAnnouncesTheStreamCap(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	c, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{GRPCTag}); err != nil {
		t.Fatal(err)
	}
	if err := clientHandshake(c, secret, GRPCTag, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
		t.Fatal(err)
	}
	var head [9]byte // length(3) type(1) flags(1) stream(4)
	if _, err := io.ReadFull(c, head[:]); err != nil {
		t.Fatal(err)
	}
	length := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
	if head[3] != 0x4 || length%6 != 0 || length > 1024 {
		t.Fatalf("first server frame: type %d length %d, want SETTINGS", head[3], length)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < length; i += 6 {
		id := uint16(body[i])<<8 | uint16(body[i+1])
		v := uint32(body[i+2])<<24 | uint32(body[i+3])<<16 | uint32(body[i+4])<<8 | uint32(body[i+5])
		if id == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			if v != MaxStreamsPerConn {
				t.Fatalf("max concurrent streams %d, want %d", v, MaxStreamsPerConn)
			}
			return
		}
	}
	t.Fatal("server SETTINGS carry no max concurrent streams (unlimited)")
}

func TestLogNodeIDIsSanitizedAndBounded(t *testing.T) {
	if got := logNodeID("node-1.a_b"); got != "node-1.a_b" {
		t.Fatalf("plain id logged as %q", got)
	}
	if got := logNodeID("a\nb\x1b[31m\"c"); got != "a?b??31m?c" {
		t.Fatalf("control characters logged as %q", got)
	}
	long := logNodeID(strings.Repeat("z", 255))
	if len(long) > 70 || !strings.HasSuffix(long, "...") {
		t.Fatalf("long id logged as %d bytes %q", len(long), long)
	}
}

// A hello claims at most MaxNodeIDLen bytes: the client refuses longer IDs, and the server
// reads a one-byte length, so a peer cannot make it read more than handshakeHelloMax.
func TestHandshakeNodeIDIsBounded(t *testing.T) {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	if err := clientHandshake(c, []byte("x"), GRPCTag, strings.Repeat("n", MaxNodeIDLen+1)); err == nil {
		t.Fatal("client claimed a node ID over the limit")
	}
	id, _, cErr, sErr := handshakePair([]byte("x"), []byte("x"), strings.Repeat("n", MaxNodeIDLen))
	if cErr != nil || sErr != nil || len(id) != MaxNodeIDLen {
		t.Fatalf("longest node ID: client %v server %v len %d", cErr, sErr, len(id))
	}
}

// A handshake message of an unknown version is refused before anything else is read.
func TestHandshakeRefusesUnknownVersion(t *testing.T) {
	c, s := net.Pipe()
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := serverHandshake(s, []byte("x"), RaftTag)
		s.Close()
		errc <- err
	}()
	hello := append([]byte{handshakeVersion + 1}, make([]byte, NonceSize+1)...)
	go func() { _, _ = c.Write(hello) }()
	if err := <-errc; !errors.Is(err, errHandshakeRefused) {
		t.Fatalf("unknown version: %v", err)
	}
	if n, _ := io.Copy(io.Discard, c); n != 0 {
		t.Fatalf("server answered %d bytes to an unknown version", n)
	}
}

func TestRejectionWarningsAreRateLimited(t *testing.T) {
	var w warnLimiter
	if n, ok := w.allow(); !ok || n != 0 {
		t.Fatalf("first warning: ok=%v suppressed=%d", ok, n)
	}
	for range 3 {
		if _, ok := w.allow(); ok {
			t.Fatal("warning let through within authLogEvery")
		}
	}
	w.last.Store(time.Now().Add(-2 * authLogEvery).UnixNano())
	if n, ok := w.allow(); !ok || n != 3 {
		t.Fatalf("after the interval: ok=%v suppressed=%d, want true 3", ok, n)
	}
}
