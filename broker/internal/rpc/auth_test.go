package rpc

import (
	"bytes"
	"context"
	"encoding/hex"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"narad.dev/broker/internal/rpc/nodepb"
)

func TestSecretProofDependsOnSecretOnly(t *testing.T) {
	a1, a2 := SecretProof([]byte("alpha")), SecretProof([]byte("alpha"))
	b := SecretProof([]byte("beta"))
	if len(a1) != ProofSize {
		t.Fatalf("proof length %d, want %d", len(a1), ProofSize)
	}
	if !bytes.Equal(a1, a2) {
		t.Fatal("same secret gave different proofs")
	}
	if bytes.Equal(a1, b) {
		t.Fatal("different secrets gave the same proof")
	}
	if bytes.Contains(a1, []byte("alpha")) {
		t.Fatal("proof leaks the secret")
	}
}

func TestGRPCCallWithClusterSecretSucceeds(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	pool := NewPool(secret)
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
}

// CL-12: a call without the right proof is refused before any handler runs.
func TestGRPCWithoutClusterSecretIsUnauthenticatedBeforeHandler(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	right := hex.EncodeToString(SecretProof(secret))
	cases := []struct {
		name string
		md   []string // outgoing metadata pairs on a client without credentials
		pool []byte   // when set, call through a Pool with this secret instead
	}{
		{name: "wrong secret", pool: []byte("other")},
		{name: "empty secret", pool: []byte{}},
		{name: "no metadata"},
		{name: "malformed hex", md: []string{AuthMetadataKey, "zz" + right[2:]}},
		{name: "truncated proof", md: []string{AuthMetadataKey, right[:62]}},
		{name: "raw secret instead of proof", md: []string{AuthMetadataKey, hex.EncodeToString(secret)}},
		{name: "right proof twice", md: []string{AuthMetadataKey, right, AuthMetadataKey, right}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.impl.calls.Load()
			var c nodepb.NodeClient
			if tc.pool != nil {
				p := NewPool(tc.pool)
				defer p.Close()
				var err error
				if c, err = p.Client(n.addr); err != nil {
					t.Fatal(err)
				}
			} else {
				cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				c = nodepb.NewNodeClient(cc)
			}
			ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
			defer cancel()
			if len(tc.md) > 0 {
				ctx = metadata.AppendToOutgoingContext(ctx, tc.md...)
			}
			_, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("got %v, want Unauthenticated", err)
			}
			if got := n.impl.calls.Load(); got != before {
				t.Fatalf("handler ran %d times for an unauthenticated call", got-before)
			}
		})
	}
}

type fakeServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeServerStream) Context() context.Context { return s.ctx }

func TestStreamInterceptorRefusesBeforeHandler(t *testing.T) {
	secret := []byte("s3cret")
	a := newAuthenticator(secret, nil)
	info := &grpc.StreamServerInfo{FullMethod: "/narad.node.v1.Node/Future"}
	cases := []struct {
		name  string
		proof string
		want  codes.Code
	}{
		{"right proof runs handler", hex.EncodeToString(SecretProof(secret)), codes.OK},
		{"wrong proof refused", hex.EncodeToString(SecretProof([]byte("x"))), codes.Unauthenticated},
		{"missing proof refused", "", codes.Unauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := metadata.MD{}
			if tc.proof != "" {
				md.Set(AuthMetadataKey, tc.proof)
			}
			ctx := metadata.NewIncomingContext(context.Background(), md)
			ran := false
			err := a.stream(nil, fakeServerStream{ctx: ctx}, info, func(any, grpc.ServerStream) error {
				ran = true
				return nil
			})
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if ran != (tc.want == codes.OK) {
				t.Fatalf("handler ran=%v", ran)
			}
		})
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
