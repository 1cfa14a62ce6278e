package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// captureWAL is an appender that records what Produce appends; with gate set, Append blocks
// until the gate is closed.
type captureWAL struct {
	mu      sync.Mutex
	recs    []wal.Record
	gate    chan struct{}
	entered chan struct{}
}

func (c *captureWAL) Append(ctx context.Context, recs ...wal.Record) (uint64, error) {
	if c.gate != nil {
		select {
		case c.entered <- struct{}{}:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		select {
		case <-c.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, recs...)
	return uint64(len(c.recs)), nil
}

func (c *captureWAL) partitions() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, len(c.recs))
	for i, r := range c.recs {
		out[i] = int(r.Partition)
	}
	return out
}

// newAcceptEngine is an engine for the accept path only: Produce reads neither the metastore
// nor the logs, so no store is needed.
func newAcceptEngine(w appender) (*Engine, *metrics.Metrics) {
	m := metrics.New()
	return New(Config{NodeID: "n1", DataDir: "/nonexistent", Metrics: m}, nil, w), m
}

// fnv1a32 is FNV-1a, 32 bit, written out from its definition.
func fnv1a32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func TestKeyedProduceUsesFNV1a32ModPartitions(t *testing.T) {
	w := &captureWAL{}
	e, _ := newAcceptEngine(w)
	keys := []string{"a", "b", "order-1", "order-2", "customer/42", "ü", "\x00", "a-much-longer-key-that-spans-bytes"}
	for _, n := range []int{3, 7, 108} {
		top := meta.Topic{Name: "t", Partitions: n, Incarnation: "0000000000000001"}
		w.recs = nil
		for _, k := range keys {
			if err := e.Produce(context.Background(), top, []service.ProduceRecord{{Key: k, Partition: -1, Payload: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
		}
		for i, got := range w.partitions() {
			if want := int(fnv1a32(keys[i]) % uint32(n)); got != want {
				t.Errorf("n=%d key %q → partition %d, want FNV-1a-32 mod n = %d", n, keys[i], got, want)
			}
		}
	}
	// Spot-check the hash itself against published FNV-1a test vectors.
	for s, want := range map[string]uint32{"": 0x811c9dc5, "a": 0xe40c292c, "foobar": 0xbf9cf968} {
		if got := fnv1a32(s); got != want {
			t.Fatalf("fnv1a32(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestKeylessProduceRoundRobinsPerTopic(t *testing.T) {
	w := &captureWAL{}
	e, _ := newAcceptEngine(w)
	a := meta.Topic{Name: "a", Partitions: 4}
	b := meta.Topic{Name: "b", Partitions: 4}
	// Interleave two topics one record at a time: with a counter per topic each still visits
	// every partition equally; a shared counter would give each topic only every other one.
	for i := 0; i < 8; i++ {
		for _, top := range []meta.Topic{a, b} {
			if err := e.Produce(context.Background(), top, []service.ProduceRecord{{Partition: -1, Payload: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	perTopic := map[string]map[int]int{"a": {}, "b": {}}
	for _, r := range w.recs {
		perTopic[r.Topic][int(r.Partition)]++
	}
	for name, counts := range perTopic {
		for p := 0; p < 4; p++ {
			if counts[p] != 2 {
				t.Errorf("topic %s: partition counts %v, want 2 on each of 4", name, counts)
				break
			}
		}
	}
	// One batch spreads too.
	w.recs = nil
	c := meta.Topic{Name: "c", Partitions: 5}
	batch := make([]service.ProduceRecord, 10)
	for i := range batch {
		batch[i] = service.ProduceRecord{Partition: -1, Payload: []byte("x")}
	}
	if err := e.Produce(context.Background(), c, batch); err != nil {
		t.Fatal(err)
	}
	counts := map[int]int{}
	for _, p := range w.partitions() {
		counts[p]++
	}
	for p := 0; p < 5; p++ {
		if counts[p] != 2 {
			t.Fatalf("batch of 10 over 5 partitions: %v, want 2 each", counts)
		}
	}
}

func TestPinnedPartitionOverridesKey(t *testing.T) {
	w := &captureWAL{}
	e, _ := newAcceptEngine(w)
	top := meta.Topic{Name: "t", Partitions: 7, Incarnation: "00000000000000aa"}
	key := "order-1"
	pin := (int(fnv1a32(key)%7) + 3) % 7 // anywhere but where the key hashes
	if err := e.Produce(context.Background(), top, []service.ProduceRecord{{Key: key, Partition: pin, Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	r := w.recs[0]
	if int(r.Partition) != pin || r.Key != key || r.Incarnation != top.Incarnation || r.Topic != "t" || r.AcceptedAtMs == 0 {
		t.Fatalf("appended %+v, want partition %d with key, incarnation and accept time", r, pin)
	}
}

func TestDrainingRefusesProduceAndInflightReachesZeroOnlyAfterAnswers(t *testing.T) {
	w := &captureWAL{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	e, m := newAcceptEngine(w)
	top := meta.Topic{Name: "d", Partitions: 3}

	// One produce admitted and blocked inside the durable append.
	inflight := make(chan error, 1)
	go func() {
		inflight <- e.Produce(context.Background(), top, []service.ProduceRecord{{Partition: 0, Payload: []byte("x")}})
	}()
	<-w.entered
	if got := e.AdmittedInflight(); got != 1 {
		t.Fatalf("admitted in flight = %d while one produce is in its append, want 1", got)
	}

	e.SetDraining(true)
	if !e.RefusingProduce() {
		t.Fatal("RefusingProduce false after SetDraining(true)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.Produce(ctx, top, []service.ProduceRecord{{Partition: 0, Payload: []byte("y")}})
	if !errors.Is(err, errcode.ErrDraining) {
		t.Fatalf("produce while draining: %v, want ErrDraining", err)
	}
	// The refused produce is answered; the admitted one is not yet.
	if got := e.AdmittedInflight(); got != 1 {
		t.Fatalf("admitted in flight = %d with one produce unanswered, want 1", got)
	}
	close(w.gate)
	if err := <-inflight; err != nil {
		t.Fatalf("the produce admitted before draining: %v", err)
	}
	if got := e.AdmittedInflight(); got != 0 {
		t.Fatalf("admitted in flight = %d after every produce was answered, want 0", got)
	}
	if got := counterValue(t, m, "narad_produce_rejections_total", map[string]string{"topic": "d", "reason": "draining"}); got != 1 {
		t.Fatalf("narad_produce_rejections_total{reason=draining} = %v, want 1", got)
	}
	if len(w.recs) != 1 || string(w.recs[0].Payload) != "x" {
		t.Fatalf("WAL holds %+v, want only the admitted record", w.recs)
	}
}

func TestProduceAnswersUnavailableWhenTheWALRefuses(t *testing.T) {
	e, _ := newAcceptEngine(failingWAL{})
	err := e.Produce(context.Background(), meta.Topic{Name: "t", Partitions: 3}, []service.ProduceRecord{{Partition: -1, Payload: []byte("x")}})
	if !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("produce with a failed WAL: %v, want ErrUnavailable", err)
	}
	if e.AdmittedInflight() != 0 {
		t.Fatalf("admitted in flight = %d after an error answer", e.AdmittedInflight())
	}
}

type failingWAL struct{}

func (failingWAL) Append(context.Context, ...wal.Record) (uint64, error) {
	return 0, wal.ErrFailed
}

// docs/internals/moves.md §12.2, MV-49: the decommission flag in this node's own replica turns client
// produce into 503 within a moment, the flag survives a restart, and a cancel accepts again.
func TestDrainFlagInTheReplicaRefusesProduceAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "drain"})
	produce := func(n *testNode) error {
		return n.e.Produce(n.ctx(), top, []service.ProduceRecord{{Partition: 0, Payload: []byte("x")}})
	}
	if err := produce(n); err != nil {
		t.Fatalf("produce before the decommission: %v", err)
	}
	if err := n.store.SetMemberDraining(n.ctx(), "n1", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return errors.Is(produce(n), errcode.ErrDraining) }, "produce refused while draining")
	if !n.e.RefusingProduce() {
		t.Fatal("RefusingProduce is false while produce is refused")
	}
	n.stop()
	n = startNode(t, dir, nil)
	if err := produce(n); !errors.Is(err, errcode.ErrDraining) {
		t.Fatalf("produce after a restart of a draining node: %v, want ErrDraining", err)
	}
	if err := n.store.SetMemberDraining(n.ctx(), "n1", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return produce(n) == nil }, "produce accepted after the cancel")
}

// A producer to a replicated topic whose leadership moves mid-commit gets a 503 to retry,
// never a 500; the other refusals keep their status.
func TestLeaderCommitErrorsAreRetryableWhenTheLeadershipMoved(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, 200},
		{fmt.Errorf("orders/0: %w", errcode.ErrNotOwner), 503},
		{fmt.Errorf("commit: outcome unknown: %w", replica.ErrDeposed), 503},
		{fmt.Errorf("orders/0: %w", replica.ErrNotEnoughReplicas), 503},
		{fmt.Errorf("orders: %w", errcode.ErrTopicGone), errcode.HTTPStatus(errcode.ErrTopicGone)},
	}
	for _, c := range cases {
		got := leaderCommitError(c.err)
		if st := errcode.HTTPStatus(got); st != c.want {
			t.Errorf("%v → %v: status %d, want %d", c.err, got, st, c.want)
		}
	}
	if !errors.Is(leaderCommitError(replica.ErrNotEnoughReplicas), errcode.ErrNotEnoughReplicas) {
		t.Fatal("not_enough_replicas lost its identity")
	}
}
