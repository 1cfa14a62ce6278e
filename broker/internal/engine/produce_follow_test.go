package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// hangingLeader is a fakePeers commit hook: a commit sent to the frozen address hangs until
// its context ends (or release is closed); any other address commits at once.
type hangingLeader struct {
	frozen  string
	pending chan struct{} // closed when the first commit to frozen is pending
	release chan struct{} // closing it lets commits to frozen succeed
	once    sync.Once
	mu      sync.Mutex
	calls   []string
	ends    []error // per call, what it returned
}

func newHangingLeader(frozen string) *hangingLeader {
	return &hangingLeader{frozen: frozen, pending: make(chan struct{}), release: make(chan struct{})}
}

func (h *hangingLeader) commit(ctx context.Context, addr string, _ int, _ []wal.Record) error {
	h.mu.Lock()
	h.calls = append(h.calls, addr)
	i := len(h.calls) - 1
	h.ends = append(h.ends, nil)
	h.mu.Unlock()
	var err error
	if addr == h.frozen {
		h.once.Do(func() { close(h.pending) })
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-h.release:
		}
	}
	h.mu.Lock()
	h.ends[i] = err
	h.mu.Unlock()
	return err
}

func (h *hangingLeader) seen() ([]string, []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...), append([]error(nil), h.ends...)
}

// followTopic starts n1 with live members n2 (cluster address 127.0.0.1:4) and n3
// (127.0.0.1:6) and creates "fl" (R = 2, M = 1, one partition led by n2, n3 in sync).
func followTopic(t *testing.T, h *hangingLeader) (*testNode, meta.Topic) {
	t.Helper()
	fp := &fakePeers{onCommit: h.commit}
	n := startNode(t, t.TempDir(), func(c *Config) { c.Peers = fp })
	for _, m := range []meta.Member{{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "127.0.0.1:4"},
		{ID: "n3", Addr: "127.0.0.1:5", ClusterAddr: "127.0.0.1:6"}} {
		m.Status, m.LastHeartbeat = meta.MemberAlive, time.Now().Unix()
		if err := n.store.MemberJoin(n.ctx(), m); err != nil {
			t.Fatal(err)
		}
	}
	fl := meta.Topic{Name: "fl", Partitions: 1, ReplicationFactor: 2, MinInsyncReplicas: 1, Incarnation: "00112233445566cc",
		Role: meta.RoleStandalone}
	if err := n.store.CreateTopic(n.ctx(), fl, []meta.Assignment{{Topic: "fl", Partition: 0, Owner: "n2",
		Replicas: []string{"n2", "n3"}, ISR: []string{"n2", "n3"}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { _, ok := n.e.view.Topic("fl"); return ok }, "topic fl visible")
	tp, _ := n.e.view.Topic("fl")
	return n, tp
}

// produceAsync produces one record pinned to partition 0 of tp and reports the error.
func produceAsync(n *testNode, tp meta.Topic, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- n.e.Produce(ctx, tp, []service.ProduceRecord{{Partition: 0, Payload: []byte("x")}})
	}()
	return done
}

// A produce whose commit hangs at a frozen leader follows the failover: when the local
// replica shows the epoch bumped to another leader, the pending call is cancelled and the
// batch committed at the new leader, long before the client's deadline.
func TestProduceFollowsALeaderElectedWhileItsCommitHangs(t *testing.T) {
	h := newHangingLeader("127.0.0.1:4")
	n, tp := followTopic(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := produceAsync(n, tp, ctx)
	select {
	case <-h.pending:
	case err := <-done:
		t.Fatalf("produce ended before its commit was pending: %v", err)
	case <-ctx.Done():
		t.Fatal("the commit never reached the leader")
	}
	elected := time.Now()
	res, a, err := n.store.ElectLeader(n.ctx(), "fl", 0, 0, "n3", meta.ElectDead)
	if err != nil || res != meta.CASDone || a.LeaderEpoch != 1 {
		t.Fatalf("election = %v %+v %v", res, a, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("produce after the failover = %v, want committed at the new leader", err)
		}
	case <-ctx.Done():
		t.Fatal("produce still waits on the frozen leader")
	}
	if took := time.Since(elected); took > 5*time.Second {
		t.Fatalf("produce took %v after the election", took)
	}
	calls, ends := h.seen()
	if len(calls) != 2 || calls[0] != "127.0.0.1:4" || calls[1] != "127.0.0.1:6" ||
		!errors.Is(ends[0], context.Canceled) || ends[1] != nil {
		t.Fatalf("commits %v ending %v; want the frozen leader's cancelled, then the new leader's", calls, ends)
	}
}

// A change of the assignment that keeps the epoch (an ISR shrink) does not abandon the
// pending commit, and a commit that ends by itself is answered as is.
func TestProduceKeepsItsCommitWhileTheLeaderStays(t *testing.T) {
	h := newHangingLeader("127.0.0.1:4")
	n, tp := followTopic(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := produceAsync(n, tp, ctx)
	<-h.pending
	if res, _, err := n.store.SetISR(n.ctx(), "fl", 0, 0, []string{"n2", "n3"}, []string{"n2"}); err != nil || res != meta.CASDone {
		t.Fatalf("shrink = %v %v", res, err)
	}
	// The shrink is applied (and seen by the watcher) before the release.
	eventually(t, 5*time.Second, func() bool { a, _ := n.store.Assignment("fl", 0); return len(a.ISR) == 1 }, "ISR shrunk")
	select {
	case err := <-done:
		t.Fatalf("produce ended on an ISR change: %v", err)
	default:
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatalf("produce = %v, want the leader's commit", err)
	}
	if calls, _ := h.seen(); len(calls) != 1 {
		t.Fatalf("commits %v, want the one to the leader only", calls)
	}
}
