package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RaftTag is the first byte of every Raft connection on the cluster port (GRPCTag starts
// gRPC ones). Neither can begin an HTTP/2 client preface ("PRI * HTTP/2.0…", 0x50) nor a TLS
// record (0x14–0x17), so a node of an older version is refused at its first byte.
const RaftTag byte = 0x01

// HandshakeTimeout bounds how long a new connection may take from accept to the end of the
// cluster handshake (kind byte, TLS under cluster TLS, challenge-response), and how long an
// authenticated connection may wait for its listener to take it. A stalled peer holds one
// goroutine for at most this long and never blocks Accept.
const HandshakeTimeout = 5 * time.Second

// maxPendingHandshakes caps connections being authenticated at once; beyond it new
// connections are closed at once, so a connection flood costs bounded memory.
const maxPendingHandshakes = 1024

// ErrStreamLayerTaken is returned when a second StreamLayer is created on one Mux.
var ErrStreamLayerTaken = errors.New("rpc: mux already has a raft stream layer")

// Mux splits one cluster-port listener into a gRPC listener and a Raft stream (docs/internals/node-rpc.md §1). Every connection first sends a kind byte (RaftTag, GRPCTag, GRPCBulkTag or SegmentStreamTag; anything else is
// closed), then, under cluster TLS (WithTLS), runs the TLS server handshake, then the cluster
// handshake of handshake.go. Only a connection that passed all three within HandshakeTimeout
// reaches a listener: Raft's Accept, the raw segment streams' (rawsegment.go), or the gRPC listener (as the connection after TLS,
// which the server credentials of NewServer take as is). Nothing else of an unauthenticated
// peer is ever read. Run owns the accept loop; Close stops it and both sub-listeners.
type Mux struct {
	ln        net.Listener
	secret    []byte
	nodeID    string              // claimed by StreamLayer.Dial
	authed    func(accepted bool) // WithAuthObserver; never nil
	logger    *slog.Logger
	handshake time.Duration // HandshakeTimeout; shortened by tests
	tls       *ClusterTLS   // nil: plaintext
	serverTLS *tls.Config   // tls.ServerConfig(), built once; nil when plaintext

	grpc *subListener // control-class gRPC
	bulk *subListener // bulk-class gRPC (classes.go)
	seg  *subListener // raw segment streams (rawsegment.go)
	raft *subListener

	pending  chan struct{} // semaphore of in-flight classifications
	rejectIn warnLimiter   // rate of "bad proof" warnings
	tlsIn    warnLimiter   // rate of "failed TLS handshake / plaintext on TLS port" warnings
	dropIn   warnLimiter   // rate of "too many pending handshakes" warnings
	acceptIn *rate.Limiter // rate of "accepted node" info lines

	mu         sync.Mutex // guards streamTook, isClosed, handshaking and wg.Add against Close
	streamTook bool
	isClosed   bool
	// handshaking holds connections not yet classified; Close closes them so it never waits
	// out a stalled peer's handshake timeout.
	handshaking map[net.Conn]struct{}

	closed chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// NewMux wraps ln (the bound cluster listener). It takes ownership of ln: Close closes it.
// logger nil → discard. WithTLS turns on cluster TLS; without it the port is plaintext.
// Start it with Run.
func NewMux(ln net.Listener, secret []byte, logger *slog.Logger, opts ...Option) *Mux {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := collect(opts)
	authed := o.authed
	if authed == nil {
		authed = func(bool) {}
	}
	m := &Mux{
		tls:       o.tls,
		ln:        ln,
		secret:    secret,
		nodeID:    o.nodeID,
		authed:    authed,
		acceptIn:  rate.NewLimiter(rate.Every(time.Second), 20),
		logger:    logger,
		handshake: HandshakeTimeout,
		pending:   make(chan struct{}, maxPendingHandshakes),
		closed:    make(chan struct{}),

		handshaking: make(map[net.Conn]struct{}),
	}
	if o.tls != nil {
		m.serverTLS = o.tls.ServerConfig()
	}
	m.grpc = newSubListener(ln.Addr())
	m.bulk = newSubListener(ln.Addr())
	m.seg = newSubListener(ln.Addr())
	m.raft = newSubListener(ln.Addr())
	return m
}

// GRPCListener is the listener of control-class gRPC connections (Server.Serve serves it
// and bulkListener). Closing it (grpc.Server.Stop does) makes the mux close later
// connections of that class; it does not close the mux.
func (m *Mux) GRPCListener() net.Listener { return m.grpc }

// bulkListener is GRPCListener for bulk-class connections.
func (m *Mux) bulkListener() net.Listener { return m.bulk }

// segmentListener is the listener of raw segment stream connections (rawsegment.go).
func (m *Mux) segmentListener() *subListener { return m.seg }

// Addr is the address the underlying listener is bound to (may be 0.0.0.0).
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Run accepts connections until ctx is done or Close is called (then it returns nil), or
// the listener fails for good (then it returns that error after closing the mux).
// Temporary accept errors are retried with a short backoff.
func (m *Mux) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { m.Close() })
	defer stop()
	var backoff time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return nil
			default:
			}
			if isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				m.logger.Warn("rpc: cluster port accept failed; retrying", "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
					continue
				case <-m.closed:
					return nil
				}
			}
			m.Close()
			return fmt.Errorf("rpc: cluster port accept: %w", err)
		}
		backoff = 0
		select {
		case m.pending <- struct{}{}:
		default:
			if suppressed, ok := m.dropIn.allow(); ok {
				m.logger.Warn("rpc: too many pending cluster handshakes; dropping connection",
					"remote", conn.RemoteAddr().String(), "suppressed", suppressed)
			}
			conn.Close()
			continue
		}
		m.mu.Lock()
		if m.isClosed {
			m.mu.Unlock()
			<-m.pending
			conn.Close()
			return nil
		}
		m.wg.Add(1)
		m.handshaking[conn] = struct{}{}
		m.mu.Unlock()
		go func() {
			defer m.wg.Done()
			defer func() { <-m.pending }()
			m.classify(conn)
		}()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// classify authenticates conn under the handshake deadline, then hands the connection over,
// or closes it.
func (m *Mux) classify(conn net.Conn) {
	if c, ok := m.readHello(conn); ok {
		m.handOff(c.to, c.conn, c.deadline)
	}
}

// classified is a connection whose destination is known.
type classified struct {
	to       *subListener
	conn     net.Conn
	deadline time.Time
}

// readHello does classify's reading: the kind byte, TLS under cluster TLS, and the cluster
// handshake. Whatever the outcome, conn has left m.handshaking when it returns; ok=false
// means conn was closed.
func (m *Mux) readHello(conn net.Conn) (_ classified, ok bool) {
	defer func() {
		m.mu.Lock()
		delete(m.handshaking, conn)
		m.mu.Unlock()
		if !ok {
			conn.Close()
		}
	}()
	deadline := time.Now().Add(m.handshake)
	if err := conn.SetDeadline(deadline); err != nil {
		return classified{}, false
	}
	var kind [1]byte
	if _, err := io.ReadFull(conn, kind[:]); err != nil {
		m.authed(false)
		return classified{}, false
	}
	var to *subListener
	switch kind[0] {
	case RaftTag:
		to = m.raft
	case GRPCTag:
		to = m.grpc
	case GRPCBulkTag:
		to = m.bulk
	case SegmentStreamTag:
		if m.seg.closed() {
			// Not served (no SegmentSender): refused as an older node refuses the kind, so the
			// caller knows before its handshake to use the gRPC stream.
			return classified{}, false
		}
		to = m.seg
	default:
		m.authed(false)
		m.warnTLS("rpc: closed a cluster connection that did not start with a cluster handshake (a node of an older version?)", conn, nil)
		return classified{}, false
	}
	authConn := conn
	if m.tls != nil {
		tc := tls.Server(conn, m.serverTLS)
		if err := tc.Handshake(); err != nil {
			m.authed(false)
			m.warnTLS("rpc: cluster TLS handshake failed", conn, err)
			return classified{}, false
		}
		authConn = tc
	}
	nodeID, err := serverHandshake(authConn, m.secret, kind[0])
	if err != nil {
		m.authed(false)
		if errors.Is(err, errHandshakeRefused) {
			if suppressed, ok := m.rejectIn.allow(); ok {
				m.logger.Warn("rpc: refused cluster connection without a valid cluster secret proof",
					"remote", conn.RemoteAddr().String(), "claimed_node", logNodeID(nodeID), "suppressed", suppressed)
			}
		}
		return classified{}, false
	}
	m.authed(true)
	if kind[0] != SegmentStreamTag && m.acceptIn.Allow() { // a segment stream is one of many per copy
		m.logger.Info("rpc: accepted cluster connection", "remote", conn.RemoteAddr().String(),
			"node", logNodeID(nodeID), "kind", kindName(kind[0]))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return classified{}, false
	}
	if to != m.raft {
		return classified{to: to, conn: &authedConn{Conn: authConn, nodeID: nodeID}, deadline: deadline}, true
	}
	return classified{to: to, conn: authConn, deadline: deadline}, true
}

func kindName(k byte) string {
	switch k {
	case RaftTag:
		return "raft"
	case GRPCBulkTag:
		return "grpc-bulk"
	case SegmentStreamTag:
		return "segment"
	}
	return "grpc"
}

// warnTLS logs a refused connection of the TLS cluster port, at most once per authLogEvery.
func (m *Mux) warnTLS(msg string, conn net.Conn, err error) {
	suppressed, ok := m.tlsIn.allow()
	if !ok {
		return
	}
	attrs := []any{"remote", conn.RemoteAddr().String(), "suppressed", suppressed}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	m.logger.Warn(msg, attrs...)
}

// handOff gives conn to l's Accept, or closes it if nobody takes it before deadline or the
// mux or l closes.
func (m *Mux) handOff(l *subListener, conn net.Conn, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case l.conns <- conn:
	case <-l.done:
		conn.Close()
	case <-m.closed:
		conn.Close()
	case <-t.C:
		m.logger.Warn("rpc: cluster connection not accepted in time; closing",
			"remote", conn.RemoteAddr().String())
		conn.Close()
	}
}

// Close stops the accept loop, closes the underlying listener, both sub-listeners and every
// connection still in its handshake, and waits for the classifying goroutines to finish. Connections already handed over belong to
// their servers. Close is idempotent.
func (m *Mux) Close() error {
	m.mu.Lock()
	first := !m.isClosed
	m.isClosed = true
	for c := range m.handshaking {
		c.Close() // unblocks its classify goroutine at once
	}
	m.mu.Unlock()
	var err error
	if first {
		close(m.closed)
		err = m.ln.Close()
		m.grpc.Close()
		m.bulk.Close()
		m.seg.Close()
		m.raft.Close()
	}
	m.wg.Wait()
	return err
}

// takeStreamLayer marks the Raft side as claimed; false if it already was.
func (m *Mux) takeStreamLayer() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.streamTook {
		return false
	}
	m.streamTook = true
	return true
}

// subListener is a net.Listener fed by the mux. Accept returns net.ErrClosed once it or the
// mux is closed.
type subListener struct {
	addr      net.Addr
	conns     chan net.Conn
	closeOnce sync.Once
	done      chan struct{}
}

func newSubListener(addr net.Addr) *subListener {
	return &subListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next connection the mux classified for this listener.
func (l *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; later connections for this listener are closed by the mux.
func (l *subListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// closed reports whether Close was called.
func (l *subListener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Addr is the bound address of the cluster listener.
func (l *subListener) Addr() net.Addr { return l.addr }
