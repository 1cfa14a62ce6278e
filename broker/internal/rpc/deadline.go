package rpc

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"narad.dev/broker/internal/rpc/nodepb"
)

// Client call deadlines (docs/internals/node-rpc.md §4, docs/internals/metastore.md §14). A caller's own earlier deadline wins;
// a call without one gets these.
const (
	DefaultCallTimeout = 5 * time.Second  // every op unless listed below
	CommitCallTimeout  = 30 * time.Second // CommitProduceBatch: a slow fsync is not a dead node
	ConsumeCallSlack   = 2 * time.Second  // Consume: wait_ms + this
)

// Sentinel values of ConsumeRequest's optional fields.
const (
	NoPartition int32 = -1 // ConsumeRequest.Partition: any partition (queue mode)
	NoOffset    int64 = -1 // ConsumeRequest.Offset: reserve, not replay
)

// callTimeout is the deadline a call to method with request req gets by default.
func callTimeout(method string, req any) time.Duration {
	switch method {
	case nodepb.Node_CommitProduceBatch_FullMethodName:
		return CommitCallTimeout
	case nodepb.Node_Consume_FullMethodName:
		if r, ok := req.(*nodepb.ConsumeRequest); ok {
			return WaitDeadline(r.GetWaitMs())
		}
	case nodepb.Node_ReplicaFetch_FullMethodName:
		if r, ok := req.(*nodepb.ReplicaFetchRequest); ok {
			return WaitDeadline(r.GetWaitMs())
		}
	}
	return DefaultCallTimeout
}

// WaitDeadline is the deadline of a long poll that may wait waitMs (an op 2 or op 34 call;
// a follower's op 37 fetch is given the same): the wait plus
// ConsumeCallSlack, the wait capped at an hour (a nonsense wait keeps a finite deadline).
func WaitDeadline(waitMs int64) time.Duration {
	return min(time.Duration(max(waitMs, 0))*time.Millisecond, time.Hour) + ConsumeCallSlack
}

// deadlineInterceptor gives every unary call without a deadline its default one.
func deadlineInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout(method, req))
		defer cancel()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
