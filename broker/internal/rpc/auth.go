package rpc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// AuthContext is the HMAC message whose MAC under the cluster secret proves a peer knows the
// secret (spec/cluster.md §10.2). Changing it splits every mixed-version cluster.
const AuthContext = "narad-cluster-auth-v1"

// AuthMetadataKey is the gRPC metadata key carrying the hex-encoded proof on every call.
const AuthMetadataKey = "x-narad-cluster-auth"

// ProofSize is the length of a raw proof in bytes (HMAC-SHA256).
const ProofSize = sha256.Size

// authLogEvery bounds how often a rejected peer is logged: a node with the wrong secret
// retries constantly and must not flood the log.
const authLogEvery = time.Minute

// SecretProof returns HMAC-SHA256(secret, AuthContext), the 32-byte proof a node presents to
// its peers. The proof is the same on every call, so it is a bearer credential: it is only as
// private as the cluster network (or TLS, when configured). An empty secret yields a proof
// anyone can compute; the server wiring refuses cluster mode without a secret.
func SecretProof(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(AuthContext))
	return m.Sum(nil)
}

// validProof reports whether got equals want, in time independent of their contents.
func validProof(got, want []byte) bool {
	return len(got) == len(want) && hmac.Equal(got, want)
}

// authenticator checks the metadata proof of incoming gRPC calls. It is safe for concurrent
// use; it keeps only the expected proof and the rate limiter of its rejection log.
type authenticator struct {
	proof    []byte
	logger   *slog.Logger
	rejectIn warnLimiter
}

// newAuthenticator expects secret's proof on every call; logger nil → discard.
func newAuthenticator(secret []byte, logger *slog.Logger) *authenticator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &authenticator{proof: SecretProof(secret), logger: logger}
}

// check returns nil when ctx's metadata carries the right proof, else an Unauthenticated
// status error. It never says which part was wrong.
func (a *authenticator) check(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(AuthMetadataKey)
	if len(vals) == 1 {
		got, err := hex.DecodeString(vals[0])
		if err == nil && validProof(got, a.proof) {
			return nil
		}
	}
	a.logRejection(ctx, method)
	return status.Error(codes.Unauthenticated, "cluster authentication failed")
}

func (a *authenticator) logRejection(ctx context.Context, method string) {
	suppressed, ok := a.rejectIn.allow()
	if !ok {
		return
	}
	remote := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	a.logger.Warn("rpc: rejected call without a valid cluster secret proof",
		"remote", remote, "method", method, "suppressed", suppressed)
}

// warnLimiter lets one warning through per authLogEvery and counts the ones it holds back.
// The zero value is ready; safe for concurrent use.
type warnLimiter struct {
	last    atomic.Int64 // unix nanoseconds of the last warning let through
	dropped atomic.Int64 // warnings held back since then
}

// allow reports whether to log now and, if so, how many warnings were held back before.
func (w *warnLimiter) allow() (suppressed int64, ok bool) {
	now := time.Now().UnixNano()
	last := w.last.Load()
	if last != 0 && now-last < int64(authLogEvery) || !w.last.CompareAndSwap(last, now) {
		w.dropped.Add(1)
		return 0, false
	}
	return w.dropped.Swap(0), true
}

// unary is the server interceptor that refuses unauthenticated calls before any handler runs.
func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream is unary's twin for streaming calls.
func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// proofCredentials attaches the hex proof to every outgoing call.
type proofCredentials struct {
	md map[string]string
}

var _ credentials.PerRPCCredentials = proofCredentials{}

func newProofCredentials(secret []byte) proofCredentials {
	return proofCredentials{md: map[string]string{AuthMetadataKey: hex.EncodeToString(SecretProof(secret))}}
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c proofCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return c.md, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials. The proof travels in
// plaintext until cluster TLS is configured (spec/cluster.md §11: a guard, not a substitute
// for network policy).
func (proofCredentials) RequireTransportSecurity() bool { return false }
