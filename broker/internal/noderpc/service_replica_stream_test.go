package noderpc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/log"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
)

// servedCalls counts the node RPC calls a server saw end, by method (rpc.WithCallObserver).
type servedCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *servedCalls) observe(method string, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[method]++
}

func (c *servedCalls) get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// leadingHost leads orders/0 (incarnation inc1, epoch 3, ISR a and b) over a new log of n
// records of size bytes each, at offsets 0 to n-1, and returns the host and the leader's log.
func leadingHost(t testing.TB, n, size int) (*replica.Host, replicaNode) {
	t.Helper()
	leader := openReplicaNode(t)
	if err := leader.epochs.Assign(3, 0); err != nil {
		t.Fatal(err)
	}
	ld, err := replica.NewLeader(replica.LeaderConfig{Self: "a", Epoch: 3, Replicas: []string{"a", "b"},
		ISR: []string{"a", "b"}, MinISR: 2, Log: leader.log})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, _, err := leader.log.Append([]log.Entry{{Payload: make([]byte, size)}}, 7); err != nil {
			t.Fatal(err)
		}
	}
	host := replica.NewHost()
	host.Lead("orders", 0, "inc1", ld, leader.log, leader.epochs)
	return host, leader
}

// fetchEach fetches the records of orders/0 one at a time from src, as a follower that appends
// each answer would, and returns the offset after the last.
func fetchEach(t *testing.T, ctx context.Context, src replica.Source, n int) int64 {
	t.Helper()
	var at int64
	for range n {
		rep, err := src.Fetch(ctx, replica.FetchRequest{Epoch: 3, Offset: at, MaxBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Next <= at {
			t.Fatalf("fetch from %d ended at %d", at, rep.Next)
		}
		at = rep.Next
		if rep.Release != nil {
			rep.Release()
		}
	}
	return at
}

// A follower's fetches share one op 37 stream for as long as the context that opened it.
func TestAFollowersFetchesShareOneStream(t *testing.T) {
	calls := &servedCalls{n: map[string]int{}}
	host, _ := leadingHost(t, 5, 100)
	addr, peers := replicaLoopbackServing(t, NewService(Deps{Replicas: host}), "b",
		rpc.WithCallObserver(calls.observe))
	src := peers.ReplicaSource(addr, "orders", 0, "inc1", 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	if at := fetchEach(t, ctx, src, 5); at == 0 {
		t.Fatal("fetched nothing")
	}
	// A refusal is an answer on the stream, not its end.
	if _, err := src.Fetch(ctx, replica.FetchRequest{Epoch: 2}); !errors.Is(err, errcode.ErrStaleEpoch) {
		t.Fatalf("fetch of another epoch: %v, want stale epoch", err)
	}
	if got := calls.get("ReplicaFetchStream"); got != 0 {
		t.Fatalf("%d streams ended while the follower fetched", got)
	}
	cancel()
	waitFor(t, func() bool { return calls.get("ReplicaFetchStream") == 1 })
	if got := calls.get("ReplicaFetch"); got != 0 {
		t.Fatalf("%d op 34 calls besides the stream", got)
	}
}

// noStreamLeader is a leader of a release without op 37.
type noStreamLeader struct{ *Service }

func (noStreamLeader) ReplicaFetchStream(nodepb.Node_ReplicaFetchStreamServer) error {
	return status.Error(codes.Unimplemented, "unknown method ReplicaFetchStream")
}

// A leader without op 37 is fetched from with op 34, and the stream is not tried again.
func TestAFollowerOfALeaderWithoutTheStreamFetchesWithOp34(t *testing.T) {
	calls := &servedCalls{n: map[string]int{}}
	host, _ := leadingHost(t, 5, 100)
	addr, peers := replicaLoopbackServing(t, noStreamLeader{NewService(Deps{Replicas: host})}, "b",
		rpc.WithCallObserver(calls.observe))
	src := peers.ReplicaSource(addr, "orders", 0, "inc1", 50*time.Millisecond)
	fetchEach(t, context.Background(), src, 5)
	if s, u := calls.get("ReplicaFetchStream"), calls.get("ReplicaFetch"); s != 1 || u != 5 {
		t.Fatalf("streams %d, op 34 calls %d; want 1 refused stream and 5 calls", s, u)
	}
}

// silentHost is a ReplicaHost whose fetches hang until their context ends while mute is set,
// and otherwise answer at once with nothing.
type silentHost struct {
	mu    sync.Mutex
	mute  bool
	ended int // hung fetches whose context ended
}

func (h *silentHost) Fetch(ctx context.Context, _ string, _ int, _ string, req replica.FetchRequest, _ time.Duration) (replica.FetchReply, error) {
	h.mu.Lock()
	mute := h.mute
	h.mu.Unlock()
	if !mute {
		return replica.FetchReply{Next: req.Offset}, nil
	}
	<-ctx.Done()
	h.mu.Lock()
	h.ended++
	h.mu.Unlock()
	return replica.FetchReply{}, ctx.Err()
}

func (h *silentHost) EndOffset(context.Context, string, int, string, uint64, uint64) (uint64, int64, bool, error) {
	return 0, 0, false, nil
}
func (h *silentHost) EpochOf(string, int) uint64                 { return 3 }
func (h *silentHost) Leader(string, int) (*replica.Leader, bool) { return nil, false }
func (h *silentHost) set(mute bool)                              { h.mu.Lock(); h.mute = mute; h.mu.Unlock() }
func (h *silentHost) hungEnded() int                             { h.mu.Lock(); defer h.mu.Unlock(); return h.ended }

// A leader that stops answering fails the fetch after the wait plus rpc.ConsumeCallSlack, as
// op 34's deadline does; the stream is ended (the leader's handler stops waiting) and the next
// fetch opens another.
func TestAFetchTheLeaderLeavesUnansweredFailsAtTheDeadline(t *testing.T) {
	host := &silentHost{mute: true}
	addr, peers := replicaLoopback(t, host, "b")
	src := peers.ReplicaSource(addr, "orders", 0, "inc1", 0)
	start := time.Now()
	_, err := src.Fetch(context.Background(), replica.FetchRequest{Epoch: 3})
	if !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("unanswered fetch: %v, want unavailable", err)
	}
	if waited := time.Since(start); waited < rpc.ConsumeCallSlack {
		t.Fatalf("unanswered fetch failed after %v, before its deadline", waited)
	}
	waitFor(t, func() bool { return host.hungEnded() == 1 })
	host.set(false)
	if _, err := src.Fetch(context.Background(), replica.FetchRequest{Epoch: 3}); err != nil {
		t.Fatalf("fetch after the stream was ended: %v", err)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
