package rpc

import (
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"narad.dev/broker/internal/rpc/nodepb"
)

// MaxMessageBytes is the largest payload a node RPC carries (spec/cluster.md §13, RPC frame
// payload max); the gRPC message limit adds messageSlack for the envelope around it.
const MaxMessageBytes = 16 << 20

// messageSlack covers protobuf framing and the other fields of a message whose payload is
// MaxMessageBytes.
const messageSlack = 64 << 10

// maxGRPCMessage is the gRPC send/receive limit on both sides.
const maxGRPCMessage = MaxMessageBytes + messageSlack

// NewServer returns a gRPC server with impl registered as the Node service, refusing every
// call whose metadata lacks the proof of secret (codes.Unauthenticated, before any handler or
// later interceptor runs). Serve it on Mux.GRPCListener. logger nil → discard. WithTLS makes
// the server do the TLS handshake (mutual under a cluster CA) on every connection; the proof
// of secret is still required on every call (defence in depth).
func NewServer(secret []byte, impl nodepb.NodeServer, logger *slog.Logger, opts ...Option) *grpc.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(secret) == 0 {
		logger.Warn("rpc: node RPC has no cluster secret; any peer can call it")
	}
	a := newAuthenticator(secret, logger)
	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.unary),
		grpc.ChainStreamInterceptor(a.stream),
		grpc.MaxRecvMsgSize(maxGRPCMessage),
		grpc.MaxSendMsgSize(maxGRPCMessage),
		grpc.ConnectionTimeout(HandshakeTimeout),
	}
	if t := collect(opts).tls; t != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(t.ServerConfig())))
	}
	s := grpc.NewServer(sopts...)
	nodepb.RegisterNodeServer(s, impl)
	return s
}
