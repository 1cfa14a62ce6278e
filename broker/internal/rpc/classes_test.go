package rpc

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"narad.dev/broker/internal/rpc/nodepb"
)

// Every method of the Node service is served by exactly one class's server.
func TestEveryMethodBelongsToExactlyOneClass(t *testing.T) {
	desc := &nodepb.Node_ServiceDesc
	seen := map[string]int{}
	for _, c := range []messageClass{controlClass, bulkClass} {
		d := serviceFor(desc, c)
		for _, m := range d.Methods {
			seen[m.MethodName]++
		}
		for _, s := range d.Streams {
			seen[s.StreamName]++
		}
	}
	all := len(desc.Methods) + len(desc.Streams)
	if len(seen) != all {
		t.Fatalf("classes serve %d of the service's %d methods", len(seen), all)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s is served by %d classes", name, n)
		}
	}
	for m := range bulkMethods {
		if !strings.HasPrefix(m, "/"+desc.ServiceName+"/") {
			t.Errorf("bulk method %q is not a method of %s", m, desc.ServiceName)
		}
	}
}

// rawClient dials n on the connection of one class with no client-side size limit, as a
// misbehaving (but authenticated) peer would.
func rawClient(t *testing.T, n *testNode, secret []byte, kind byte) nodepb.NodeClient {
	t.Helper()
	cc, err := grpc.NewClient(n.addr,
		grpc.WithTransportCredentials(&clusterCreds{secret: secret, nodeID: "n1", kind: kind}),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return nodepb.NewNodeClient(cc)
}

// A method called on the other class's connection is refused unread, both ways.
func TestAMethodOnTheOtherClassesConnectionIsUnimplemented(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	ctx := context.Background()
	control := rawClient(t, n, secret, GRPCTag)
	bulk := rawClient(t, n, secret, GRPCBulkTag)

	_, err := control.CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{Topic: "t"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("bulk method on the control connection: %v, want Unimplemented", err)
	}
	_, err = bulk.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("control method on the bulk connection: %v, want Unimplemented", err)
	}
	if got := n.impl.calls.Load(); got != 0 {
		t.Fatalf("handlers ran %d times", got)
	}
	if _, err := control.NodeStatus(ctx, &nodepb.NodeStatusRequest{}); err != nil {
		t.Fatalf("control method on its own connection: %v", err)
	}
	if _, err := bulk.CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{Topic: "t"}); err != nil {
		t.Fatalf("bulk method on its own connection: %v", err)
	}
}

// A control request over MaxControlMessageBytes is refused from its length prefix, before
// its handler runs; a bulk request of the same size is served.
func TestControlRequestsOverTheirCapAreRefused(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	ctx := context.Background()
	big := strings.Repeat("x", MaxControlMessageBytes+1)

	_, err := rawClient(t, n, secret, GRPCTag).Consume(ctx, &nodepb.ConsumeRequest{Topic: big})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized control request: %v, want ResourceExhausted", err)
	}
	if got := n.impl.calls.Load(); got != 0 {
		t.Fatalf("the oversized request reached its handler (%d calls)", got)
	}

	p := NewPool(secret)
	defer p.Close()
	c, err := p.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{
		Topic: "t", Entries: []*nodepb.ProduceEntry{{Payload: []byte(big)}},
	}); err != nil {
		t.Fatalf("bulk request of %d bytes through the pool: %v", len(big), err)
	}
	// The pool never sends an oversized control request at all.
	_, err = c.Consume(ctx, &nodepb.ConsumeRequest{Topic: big})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("pool sent an oversized control request: %v", err)
	}
	if got := n.impl.calls.Load(); got != 1 {
		t.Fatalf("handlers ran %d times, want 1 (the bulk call)", got)
	}
}
