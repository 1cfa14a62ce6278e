package rpc

import (
	"log/slog"

	"google.golang.org/grpc"

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
// later interceptor runs). Serve it on Mux.GRPCListener. logger nil → discard.
func NewServer(secret []byte, impl nodepb.NodeServer, logger *slog.Logger) *grpc.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(secret) == 0 {
		logger.Warn("rpc: node RPC has no cluster secret; any peer can call it")
	}
	a := newAuthenticator(secret, logger)
	s := grpc.NewServer(
		grpc.ChainUnaryInterceptor(a.unary),
		grpc.ChainStreamInterceptor(a.stream),
		grpc.MaxRecvMsgSize(maxGRPCMessage),
		grpc.MaxSendMsgSize(maxGRPCMessage),
		grpc.ConnectionTimeout(HandshakeTimeout),
	)
	nodepb.RegisterNodeServer(s, impl)
	return s
}
