package rpc

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"narad.dev/broker/internal/rpc/nodepb"
)

// MaxMessageBytes is the largest payload a node RPC carries (docs/internals/metastore.md §14, RPC frame
// payload max); the gRPC message limit adds messageSlack for the envelope around it.
const MaxMessageBytes = 16 << 20

// messageSlack covers protobuf framing and the other fields of a message whose payload is
// MaxMessageBytes.
const messageSlack = 64 << 10

// maxGRPCMessage is the gRPC send/receive limit on both sides.
const maxGRPCMessage = MaxMessageBytes + messageSlack

// Server limits of the node RPC. An authenticated peer is another node of the cluster: the
// limits bound what one connection can hold, not what a call may legitimately need.
const (
	// MaxStreamsPerConn caps concurrent calls on one connection; a node keeps one connection
	// per peer, so this is the most calls one peer has in flight here, forwarded long-poll
	// consumes (up to max-consume-wait each) included. Further calls wait on the client side
	// for a free stream.
	MaxStreamsPerConn = 4096
	// ConnMaxIdle closes a connection that has had no call for this long; the peer's pool
	// reconnects on its next call.
	ConnMaxIdle = 5 * time.Minute
	// keepaliveTime and keepaliveTimeout: the server pings a quiet connection and closes it
	// when the ping is not answered, so a vanished peer does not hold a connection.
	keepaliveTime    = time.Minute
	keepaliveTimeout = 20 * time.Second
	// keepaliveMinTime is the shortest client ping interval tolerated (pings more often end
	// the connection with GOAWAY).
	keepaliveMinTime = 10 * time.Second
)

// Server is the node RPC server: one gRPC server per message class (classes.go), served on
// the Mux's matching listeners.
type Server struct {
	control, bulk *grpc.Server
	seg           *segmentServer // nil: impl serves no raw segment streams
}

// NewServer returns the node RPC server with impl registered as the Node service, each
// method on the server of its class. Its transport credentials take only connections the
// Mux authenticated (cluster handshake, and TLS under WithTLS): serve it with Serve on a Mux,
// never on a bare listener. logger nil → discard. The peer's claimed node ID is in the call
// context's peer.AuthInfo (AuthInfo).
func NewServer(secret []byte, impl nodepb.NodeServer, logger *slog.Logger, opts ...Option) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(secret) == 0 {
		logger.Warn("rpc: node RPC has no cluster secret; any peer can call it")
	}
	o := collect(opts)
	if o.maxStreams == 0 {
		o.maxStreams = MaxStreamsPerConn
	}
	s := &Server{
		control: newClassServer(secret, impl, o, controlClass),
		bulk:    newClassServer(secret, impl, o, bulkClass),
	}
	if sender, ok := impl.(SegmentSender); ok {
		s.seg = newSegmentServer(sender, o.served)
	}
	return s
}

func newClassServer(secret []byte, impl nodepb.NodeServer, o options, c messageClass) *grpc.Server {
	sopts := []grpc.ServerOption{
		grpc.Creds(&clusterCreds{secret: secret, tls: o.tls}),
		grpc.MaxRecvMsgSize(c.maxRecv),
		grpc.MaxSendMsgSize(maxGRPCMessage),
		grpc.MaxConcurrentStreams(o.maxStreams),
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: ConnMaxIdle,
			Time:              keepaliveTime,
			Timeout:           keepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             keepaliveMinTime,
			PermitWithoutStream: true,
		}),
	}
	if o.served != nil {
		sopts = append(sopts, grpc.ChainUnaryInterceptor(observeUnary(o.served)),
			grpc.ChainStreamInterceptor(observeStream(o.served)))
	}
	s := grpc.NewServer(sopts...)
	s.RegisterService(serviceFor(&nodepb.Node_ServiceDesc, c), impl)
	return s
}

// Serve serves both classes, and the raw segment streams when impl sends them, on m's
// listeners until Stop, GracefulStop or m's Close; it returns the first error (nil after
// Stop). Without a SegmentSender the mux closes raw segment stream connections at once, and
// their callers use the gRPC stream.
func (s *Server) Serve(m *Mux) error {
	bulk := make(chan error, 1)
	go func() { bulk <- s.bulk.Serve(m.bulkListener()) }()
	seg := make(chan error, 1)
	if s.seg != nil {
		go func() { seg <- s.seg.serve(m.segmentListener()) }()
	} else {
		m.segmentListener().Close()
		seg <- nil
	}
	err := s.control.Serve(m.GRPCListener())
	if bulkErr := <-bulk; err == nil {
		err = bulkErr
	}
	if segErr := <-seg; err == nil {
		err = segErr
	}
	return err
}

// Stop closes every connection and listener at once; calls in flight fail.
func (s *Server) Stop() {
	s.control.Stop()
	s.bulk.Stop()
	s.stopSegments()
}

// stopSegments ends the raw segment streams being served, and makes the serve loop return.
func (s *Server) stopSegments() {
	if s.seg != nil {
		s.seg.stop()
	}
}

// GracefulStop stops taking calls and waits for those in flight.
func (s *Server) GracefulStop() {
	s.control.GracefulStop()
	s.bulk.GracefulStop()
	s.stopSegments()
}

// observeUnary reports each served unary call to f (WithCallObserver).
func observeUnary(f func(string, time.Duration)) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		t0 := time.Now()
		resp, err := h(ctx, req)
		f(methodName(info.FullMethod), time.Since(t0))
		return resp, err
	}
}

// observeStream reports each served stream to f when it ends (WithCallObserver).
func observeStream(f func(string, time.Duration)) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		t0 := time.Now()
		err := h(srv, ss)
		f(methodName(info.FullMethod), time.Since(t0))
		return err
	}
}

// methodName is the last element of a gRPC full method name ("/pkg.Service/Method").
func methodName(full string) string {
	return full[strings.LastIndexByte(full, '/')+1:]
}
