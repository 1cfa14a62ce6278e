package rpc

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/testwait"
)

// CL-12: a Raft connection without a valid handshake is closed and never reaches Accept.
func TestRaftConnWithoutValidProofIsClosedNeverAccepted(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	hello := append(append([]byte{RaftTag, handshakeVersion}, make([]byte, NonceSize)...), 2, 'n', '1')
	cases := []struct {
		name  string
		hello []byte
	}{
		{"all-zero proof", append(append([]byte{}, hello...), make([]byte, 32)...)},
		{"raw secret as proof", append(append(append([]byte{}, hello...), secret...), make([]byte, 32-len(secret))...)},
		{"short proof then EOF", append(append([]byte{}, hello...), make([]byte, 16)...)},
		{"hello cut short then EOF", hello[:10]},
		{"unknown version", append([]byte{RaftTag, handshakeVersion + 1}, make([]byte, 40)...)},
		{"tag only then EOF", []byte{RaftTag}},
		{"old node's constant proof", append([]byte{RaftTag}, make([]byte, 32)...)},
		{"unknown kind byte", []byte{0x03, handshakeVersion}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", n.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.hello); err != nil {
				t.Fatal(err)
			}
			// The mux may have closed it already (a bad kind byte is refused at once).
			_ = c.(*net.TCPConn).CloseWrite()
			waitClosedByPeer(t, c, 5*time.Second)

			// A good connection made afterwards is the first and only one Accept yields.
			other := mustStreamLayerPeer(t, secret)
			good, err := other.Dial(raft.ServerAddress(n.addr), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer good.Close()
			select {
			case got := <-accepted:
				defer got.Close()
				if got.RemoteAddr().String() != good.LocalAddr().String() {
					t.Fatalf("Accept yielded %v, want the good connection %v", got.RemoteAddr(), good.LocalAddr())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("good raft connection never accepted")
			}
		})
	}
}

// mustStreamLayerPeer returns a stream layer of a fresh mux (not running) to dial with secret.
func mustStreamLayerPeer(t *testing.T, secret []byte) *StreamLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, secret, nil)
	t.Cleanup(func() { m.Close() })
	sl, err := NewStreamLayer(m, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

func TestRaftDialWithOtherSecretIsRefused(t *testing.T) {
	n := startNode(t, "127.0.0.1", []byte("s3cret"), 0)
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	c, err := mustStreamLayerPeer(t, []byte("other")).Dial(raft.ServerAddress(n.addr), time.Second)
	if err == nil {
		c.Close()
		t.Fatal("raft dial with another secret succeeded")
	}
	select {
	case got := <-accepted:
		t.Fatalf("connection with a wrong proof reached Accept: %v", got.RemoteAddr())
	default:
	}
}

// A connection that never sends its first byte neither blocks other connections nor lives
// past the handshake timeout.
func TestStalledConnectionDoesNotBlockAccept(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 300*time.Millisecond)
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptInto(sl)
	stalled := make([]net.Conn, 0, 3)
	for range 3 {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stalled = append(stalled, c)
	}
	// Half a Raft handshake stalls too.
	half, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	if _, err := half.Write([]byte{RaftTag, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	stalled = append(stalled, half)
	// So does a gRPC hello that never sends its proof.
	halfGRPC, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer halfGRPC.Close()
	if _, err := halfGRPC.Write(append(append([]byte{GRPCTag, handshakeVersion}, make([]byte, NonceSize)...), 0)); err != nil {
		t.Fatal(err)
	}
	stalled = append(stalled, halfGRPC)

	good, err := mustStreamLayerPeer(t, secret).Dial(raft.ServerAddress(n.addr), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("raft connection not accepted while others stall")
	}
	pool := NewPool(secret)
	defer pool.Close()
	client, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{}); err != nil {
		t.Fatalf("gRPC call while others stall: %v", err)
	}
	for _, c := range stalled {
		waitClosedByPeer(t, c, 5*time.Second)
	}
}

func TestStreamLayerAddrIsAdvertiseNeverWildcard(t *testing.T) {
	cases := []struct {
		advertise string
		ok        bool
	}{
		{"10.1.2.3:7943", true},
		{"narad-0.narad-headless.default.svc:7943", true},
		{"[fd00::1]:7943", true},
		{"0.0.0.0:7943", false},
		{"[::]:7943", false},
		{":7943", false},
		{"10.1.2.3", false},
		{"10.1.2.3:0", false},
		{"", false},
	}
	for _, tc := range cases {
		t.Run(tc.advertise, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			m := NewMux(ln, nil, nil)
			defer m.Close()
			sl, err := NewStreamLayer(m, tc.advertise)
			if !tc.ok {
				if !errors.Is(err, ErrBadAdvertise) {
					t.Fatalf("got %v, want ErrBadAdvertise", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sl.Addr().String(); got != tc.advertise {
				t.Fatalf("Addr() = %q, want %q", got, tc.advertise)
			}
			if got := NewRaftTransport(sl, nil).LocalAddr(); string(got) != tc.advertise {
				t.Fatalf("transport LocalAddr() = %q, want %q", got, tc.advertise)
			}
		})
	}
}

func TestMuxHasOneStreamLayer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, nil)
	defer m.Close()
	if _, err := NewStreamLayer(m, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStreamLayer(m, "127.0.0.1:1"); !errors.Is(err, ErrStreamLayerTaken) {
		t.Fatalf("second stream layer: got %v, want ErrStreamLayerTaken", err)
	}
}

func TestMuxCloseStopsRunAndListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, nil)
	sl, err := NewStreamLayer(m, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if _, err := sl.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("raft Accept after close: %v", err)
	}
	if _, err := m.GRPCListener().Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("gRPC Accept after close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("listener still accepts after close")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestMuxCloseDoesNotWaitOutStalledHandshakes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, nil) // default HandshakeTimeout: 5 s
	ran := make(chan error, 1)
	go func() { ran <- m.Run(context.Background()) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testwait.For(t, 5*time.Second, "the stalled connection to be in its handshake", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.handshaking) == 1
	})
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > HandshakeTimeout/2 {
		t.Fatalf("Close took %v: it waited for the stalled handshake", took)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	waitClosedByPeer(t, c, time.Second)
}
