package rpc

import (
	"context"
	"testing"
	"time"

	"narad.dev/broker/internal/rpc/nodepb"
)

// Every client call carries a deadline: the op's default, or the caller's own.
func TestEveryCallGetsItsDeadline(t *testing.T) {
	secret := []byte("s3cret")
	n := startNode(t, "127.0.0.1", secret, 0)
	pool := NewPool(secret)
	defer pool.Close()
	c, err := pool.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		callerTO time.Duration // 0: caller sets no deadline
		call     func(ctx context.Context) error
		want     time.Duration
	}{
		{"default op 5s", 0, func(ctx context.Context) error {
			_, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
			return err
		}, DefaultCallTimeout},
		{"commit 30s", 0, func(ctx context.Context) error {
			_, err := c.CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{})
			return err
		}, CommitCallTimeout},
		{"consume wait plus 2s", 0, func(ctx context.Context) error {
			_, err := c.Consume(ctx, &nodepb.ConsumeRequest{WaitMs: 7000, Partition: NoPartition, Offset: NoOffset})
			return err
		}, 7*time.Second + ConsumeCallSlack},
		{"consume negative wait is 2s", 0, func(ctx context.Context) error {
			_, err := c.Consume(ctx, &nodepb.ConsumeRequest{WaitMs: -5})
			return err
		}, ConsumeCallSlack},
		{"caller deadline wins", 1500 * time.Millisecond, func(ctx context.Context) error {
			_, err := c.CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{})
			return err
		}, 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.callerTO > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.callerTO)
				defer cancel()
			}
			if err := tc.call(ctx); err != nil {
				t.Fatal(err)
			}
			got := time.Duration(n.impl.remaining.Load())
			// The server sees the deadline minus transit; allow a generous second for -race.
			if got > tc.want || got < tc.want-time.Second {
				t.Fatalf("server saw %v left, want about %v", got, tc.want)
			}
		})
	}
}
