package rpc

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Raft transport settings (docs/internals/metastore.md §2).
const (
	RaftMaxPool = 3                // pooled outgoing connections per peer
	RaftTimeout = 10 * time.Second // per-RPC I/O deadline of the network transport

	// raftRedialEvery is how often Dial tries again a peer whose port is not open yet.
	raftRedialEvery = 100 * time.Millisecond
)

// ErrBadAdvertise is returned for an advertise address that peers cannot dial: not
// host:port, empty host, or an unspecified IP such as 0.0.0.0 or [::].
var ErrBadAdvertise = errors.New("rpc: advertise address is not dialable")

// StreamLayer is the raft.StreamLayer of the cluster port. Accept yields only connections
// that presented RaftTag and passed the cluster handshake (the Mux checks); Dial runs the
// client side. Addr is the advertise address, the one peers store in the Raft configuration,
// never the bind address. Under cluster TLS Dial writes RaftTag in plaintext, then runs the
// TLS client handshake and the cluster handshake inside TLS, as the peer's Mux expects.
type StreamLayer struct {
	mux       *Mux
	advertise advertiseAddr
	secret    []byte
	nodeID    string
	tls       *ClusterTLS // dial side; nil: plaintext

	stopWaits     chan struct{} // closed by StopDialWaits
	stopWaitsOnce sync.Once
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer claims the Raft side of m. advertise is this node's cluster address as peers
// dial it ("host:port", host may be a DNS name). One StreamLayer per Mux. Dial uses WithTLS's
// configuration when given (WithTLS(nil): plaintext), else the Mux's.
func NewStreamLayer(m *Mux, advertise string, opts ...Option) (*StreamLayer, error) {
	if err := checkAdvertise(advertise); err != nil {
		return nil, err
	}
	if !m.takeStreamLayer() {
		return nil, ErrStreamLayerTaken
	}
	t := m.tls
	if o := collect(opts); o.tlsSet {
		t = o.tls
	}
	nodeID := m.nodeID
	if o := collect(opts); o.nodeID != "" {
		nodeID = o.nodeID
	}
	return &StreamLayer{mux: m, advertise: advertiseAddr(advertise), secret: m.secret, nodeID: nodeID, tls: t,
		stopWaits: make(chan struct{})}, nil
}

func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrBadAdvertise, addr, err)
	}
	if host == "" || port == "" || port == "0" {
		return fmt.Errorf("%w: %q", ErrBadAdvertise, addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: %q is a wildcard address", ErrBadAdvertise, addr)
	}
	return nil
}

// Accept waits for the next authenticated Raft connection. After Close (or the mux's) it
// returns net.ErrClosed, which the raft transport treats as shutdown.
func (s *StreamLayer) Accept() (net.Conn, error) { return s.mux.raft.Accept() }

// Close stops Accept. The mux keeps serving gRPC; later Raft connections are closed.
func (s *StreamLayer) Close() error { return s.mux.raft.Close() }

// Addr returns the advertise address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer's cluster port and presents RaftTag, then runs the cluster
// handshake (under cluster TLS: inside TLS) within timeout.
//
// A peer that is down (its port refuses connections, its host or DNS name is not there yet) is
// dialed again every raftRedialEvery for up to timeout before Dial gives up, and the handshake
// then gets its own timeout. Raft's leader backs off from a follower after each failed call,
// doubling the pause up to about 10 s; failing at once, a follower down for a few seconds
// (a restart, a pod rescheduled) ran the count up so fast that the leader only called it
// again up to 10 s after it was back, which the returning node's boot waited out
// (docs/internals/metastore.md §2). Waiting here, a failure is counted per timeout, and a
// peer that comes back is reached within raftRedialEvery. The wait ends early when the mux
// closes or StopDialWaits is called, so a shutdown, which waits for Raft's calls in flight,
// does not wait for a dead peer.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	raw, err := s.dialUp(string(address), timeout)
	if err != nil {
		return nil, err
	}
	conn, err := s.hello(raw, string(address), timeout)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("rpc: raft handshake to %s: %w", address, err)
	}
	return conn, nil
}

// StopDialWaits makes every Dial waiting for a peer to come up give up now, and later ones
// not wait: call it before shutting Raft down.
func (s *StreamLayer) StopDialWaits() {
	s.stopWaitsOnce.Do(func() { close(s.stopWaits) })
}

// dialUp opens a TCP connection to address, trying again while the peer is down (peerDown)
// until timeout has passed, the mux closes or StopDialWaits is called.
func (s *StreamLayer) dialUp(address string, timeout time.Duration) (net.Conn, error) {
	var giveUp <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		giveUp = t.C
	}
	var closed <-chan struct{}
	if s.mux != nil {
		closed = s.mux.closed
	}
	for {
		d := net.Dialer{Timeout: timeout}
		raw, err := d.Dial("tcp", address)
		if err == nil || !peerDown(err) || timeout <= 0 {
			return raw, err
		}
		select {
		case <-time.After(raftRedialEvery):
		case <-giveUp:
			return nil, err
		case <-closed:
			return nil, err
		case <-s.stopWaits:
			return nil, err
		}
	}
}

// peerDown reports a dial error that says nothing listens at the address yet: refused, no
// route to the host, or a DNS name not (yet) published.
func peerDown(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || (errors.As(err, &dns) && dns.IsNotFound)
}

// hello does Dial's handshake on raw and returns the connection Raft should use.
func (s *StreamLayer) hello(raw net.Conn, address string, timeout time.Duration) (net.Conn, error) {
	if timeout > 0 {
		if err := raw.SetDeadline(time.Now().Add(timeout)); err != nil {
			return nil, err
		}
	}
	if _, err := raw.Write([]byte{RaftTag}); err != nil {
		return nil, err
	}
	conn := raw
	if s.tls != nil {
		tc := tls.Client(raw, s.tls.clientConfigFor(address))
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		conn = tc
	}
	if err := clientHandshake(conn, s.secret, RaftTag, s.nodeID); err != nil {
		return nil, err
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return conn, nil
}

// advertiseAddr is a net.Addr that keeps the configured text (a DNS name stays a name).
type advertiseAddr string

// Network implements net.Addr.
func (a advertiseAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a advertiseAddr) String() string { return string(a) }

// NewRaftTransport builds the Raft network transport over sl (pool 3, timeout 10 s).
// Transport logs go to logger (nil → discard) under component=raft-net.
func NewRaftTransport(sl *StreamLayer, logger *slog.Logger) raft.Transport {
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  sl,
		MaxPool: RaftMaxPool,
		Timeout: RaftTimeout,
		Logger:  newHCLogger(logger, "raft-net"),
	})
}
