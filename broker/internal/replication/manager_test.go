package replication

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

// world is the metastore the test's nodes share: one replicated topic and its assignment of
// partition 0, which the test changes.
type world struct {
	mu       sync.Mutex
	topic    meta.Topic
	a        meta.Assignment
	nodes    map[string]*node
	stopping map[string]bool // members in a controlled shutdown
}

func (w *world) setStopping(id string, on bool) {
	w.mu.Lock()
	w.stopping[id] = on
	w.mu.Unlock()
}

func (w *world) assignment() meta.Assignment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.a
}

func (w *world) set(a meta.Assignment) {
	w.mu.Lock()
	w.a = a
	w.mu.Unlock()
	for _, n := range w.nodes {
		n.m.Kick()
	}
}

// node is one broker's registry, host and manager over its own data directory.
type node struct {
	id   string
	reg  *partition.Registry
	host *replica.Host
	m    *Manager
}

// source reaches another node's host in-process, as node RPC would.
type source struct {
	host               *replica.Host
	topic, incarnation string
	wait               time.Duration
}

func (s source) Fetch(ctx context.Context, req replica.FetchRequest) (replica.FetchReply, error) {
	return s.host.Fetch(ctx, s.topic, 0, s.incarnation, req, s.wait)
}

func (s source) EndOffset(ctx context.Context, leaderEpoch, epoch uint64) (uint64, int64, bool, error) {
	return s.host.EndOffset(ctx, s.topic, 0, s.incarnation, leaderEpoch, epoch)
}

func newWorld(t *testing.T, ids ...string) *world {
	w := &world{topic: meta.Topic{Name: "t", Partitions: 1, Incarnation: "0123456789abcdef", ReplicationFactor: len(ids),
		MinInsyncReplicas: 2}, nodes: map[string]*node{}, stopping: map[string]bool{}}
	w.a = meta.Assignment{Topic: "t", Partition: 0, Owner: ids[0], Replicas: ids, ISR: ids}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, id := range ids {
		n := &node{id: id, host: replica.NewHost()}
		n.reg = partition.New(partition.Deps{
			Layout:     datadir.New(t.TempDir()),
			Offsets:    consume.NewCommitter(consume.CommitterOptions{}),
			Topic:      func(string) (meta.Topic, bool) { return w.topic, true },
			Owns:       func(string, int) bool { return w.assignment().Owner == id },
			Replicates: func(string, int) bool { return true },
			Leader:     n.host.Leader,
			RaiseFloor: func(_ string, _ int, t0 int64) int64 { return t0 },
		})
		t.Cleanup(n.reg.CloseAll)
		n.m = New(Deps{
			Self: id, Partitions: n.reg, Host: n.host, Tick: 20 * time.Millisecond, LagMax: 300 * time.Millisecond,
			FetchWait:  50 * time.Millisecond,
			Slots:      func() []Slot { return []Slot{{Topic: w.topic, A: w.assignment()}} },
			MemberAddr: func(id string) (string, bool) { return id, true },
			Stopping: func(id string) bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.stopping[id]
			},
			Source: func(addr, topic string, _ int, inc string, wait time.Duration) replica.Source {
				return source{host: w.nodes[addr].host, topic: topic, incarnation: inc, wait: wait}
			},
			ProposeISR: func(_ context.Context, _ string, _ int, epoch uint64, expected, next []string) (meta.CASResult, meta.Assignment, error) {
				w.mu.Lock()
				defer w.mu.Unlock()
				if epoch != w.a.LeaderEpoch || !sameSet(expected, w.a.ISR) {
					return meta.CASRefused, w.a, fmt.Errorf("stale")
				}
				w.a.ISR = next
				return meta.CASDone, w.a, nil
			},
		})
		w.nodes[id] = n
	}
	for _, n := range w.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.m.Run(ctx) }()
	}
	// Registered last, so it runs first: the managers stop before the registries close and
	// the data directories go.
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

func commit(t *testing.T, n *node, w *world, payloads ...string) error {
	t.Helper()
	recs := make([]wal.Record, len(payloads))
	for i, p := range payloads {
		recs[i] = wal.Record{Payload: []byte(p)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.reg.CommitReplicated(ctx, w.topic, 0, recs)
	return err
}

func hwm(n *node) int64 {
	if pt := n.reg.Peek("t", 0); pt != nil {
		return pt.Log().HighWatermark()
	}
	return -1
}

// The leader commits once the followers hold a batch; a lagging follower leaves the ISR and
// comes back; a new leader of a later epoch takes over and the old one follows it.
func TestManagerRunsLeadershipAndFollowersThroughAnElection(t *testing.T) {
	w := newWorld(t, "a", "b", "c")
	a, b, c := w.nodes["a"], w.nodes["b"], w.nodes["c"]
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "x1", "x2"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "followers learn the HWM", func() bool { return hwm(b) == 2 && hwm(c) == 2 })

	// c stops following (its manager is told it is no replica): a shrinks the ISR to [a b].
	w.mu.Lock()
	w.a.Replicas = []string{"a", "b", "c"}
	w.mu.Unlock()
	c.m.mu.Lock()
	for k, r := range c.m.roles {
		c.m.end(k, r)
	}
	c.m.d.Slots = func() []Slot { return nil }
	c.m.mu.Unlock()
	testwait.For(t, 5*time.Second, "c leaves the isr", func() bool { return sameSet(w.assignment().ISR, []string{"a", "b"}) })
	if err := commit(t, a, w, "x3"); err != nil {
		t.Fatalf("commit with c out of the isr: %v", err)
	}

	// b is elected at epoch 1 (a dead leader leaves the ISR); a follows it.
	cur := w.assignment()
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "b", Replicas: cur.Replicas, ISR: []string{"b"}, LeaderEpoch: 1})
	testwait.For(t, 5*time.Second, "b leads at epoch 1", func() bool {
		ld, ok := b.host.Leader("t", 0)
		return ok && ld.Epoch() == 1
	})
	testwait.For(t, 5*time.Second, "a no longer serves its leadership of epoch 0", func() bool {
		_, ok := a.host.Leader("t", 0)
		return !ok
	})
	testwait.For(t, 5*time.Second, "a back in the isr", func() bool { return sameSet(w.assignment().ISR, []string{"a", "b"}) })
	if err := commit(t, b, w, "y1"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "a follows b to the new HWM", func() bool { return hwm(a) == 4 })
	pa, pb := a.reg.Peek("t", 0), b.reg.Peek("t", 0)
	for off := range int64(4) {
		ra, err := pa.Log().Read(off)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := pb.Log().Read(off)
		if err != nil || string(ra.Payload) != string(rb.Payload) {
			t.Fatalf("offset %d: %q on a, %q on b (%v)", off, ra.Payload, rb.Payload, err)
		}
	}
	if got := pa.Epochs().Entries(); len(got) != 2 || got[1].Epoch != 1 || got[1].Start != 3 {
		t.Fatalf("a's leader epochs %v, want epoch 1 from offset 3", got)
	}
}

// What consumers acked on the old leader is known to the new one: the followers keep a copy of
// the leader's consumer state, which seeds the shard the new leader opens.
func TestANewLeaderStartsFromTheConsumerStateTheOldOneHad(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, b := w.nodes["a"], w.nodes["b"]
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "m0", "m1", "m2", "m3"); err != nil {
		t.Fatal(err)
	}
	pt := a.reg.Peek("t", 0)
	sh, err := a.reg.ShardOf(w.topic, pt)
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := sh.Reserve(consume.Limits{}, 3)
	if len(ds) != 3 {
		t.Fatalf("reserved %d", len(ds))
	}
	for _, d := range []consume.Delivery{ds[0], ds[1], ds[2]} {
		if d.Message.Offset == 1 {
			continue // offset 1 stays leased: 0 is the frontier, 2 is acked ahead
		}
		if err := sh.Ack(d.Handle.Offset, d.Handle.Nonce, consume.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	bdir := b.reg.Peek("t", 0).Dir()
	testwait.For(t, 10*time.Second, "b holds a's consumer state", func() bool {
		raw, err := os.ReadFile(filepath.Join(bdir, consume.CheckpointFile))
		if err != nil {
			return false
		}
		c, err := consume.DecodeCheckpoint(raw)
		return err == nil && c.Frontier == 0 && slices.Equal(c.AckedAhead, []int64{2})
	})

	cur := w.assignment()
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "b", Replicas: cur.Replicas, ISR: []string{"b"}, LeaderEpoch: 1})
	testwait.For(t, 5*time.Second, "b leads", func() bool { _, ok := b.host.Leader("t", 0); return ok })
	bpt := b.reg.Peek("t", 0)
	bsh, err := b.reg.ShardOf(w.topic, bpt)
	if err != nil {
		t.Fatal(err)
	}
	if f := bsh.Frontier(); f.Frontier != 0 || !slices.Equal(f.AckedAhead, []int64{2}) {
		t.Fatalf("the new leader starts from %+v, want frontier 0 with 2 acked ahead", f)
	}
	again, _ := bsh.Reserve(consume.Limits{}, 10)
	var offs []int64
	for _, d := range again {
		offs = append(offs, d.Message.Offset)
	}
	if !slices.Equal(offs, []int64{1, 3}) {
		t.Fatalf("the new leader delivers %v, want [1 3] (0 and 2 were acked on the old one)", offs)
	}
}

// A member in a controlled shutdown that left the ISR (docs/internals/replication.md §9) is not
// expanded back while it still fetches and is caught up; once it is no longer stopping (it
// restarted) the leader adds it back.
func TestALeaderDoesNotExpandTheISRToAStoppingMember(t *testing.T) {
	w := newWorld(t, "a", "b", "c")
	a := w.nodes["a"]
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "x1"); err != nil {
		t.Fatal(err)
	}
	w.setStopping("c", true)
	w.mu.Lock()
	w.a.ISR = []string{"a", "b"} // c's own op 23 on its way out
	w.mu.Unlock()
	a.m.Kick()
	ld, _ := a.host.Leader("t", 0)
	testwait.For(t, 5*time.Second, "a installs the isr without c", func() bool { return sameSet(ld.ISR(), []string{"a", "b"}) })
	for i := range 3 {
		if err := commit(t, a, w, fmt.Sprintf("y%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 5*time.Second, "c caught up: an expand candidate", func() bool {
		return slices.Contains(ld.ExpandCandidates(), "c")
	})
	for i := range 3 {
		if err := commit(t, a, w, fmt.Sprintf("z%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if isr := w.assignment().ISR; !sameSet(isr, []string{"a", "b"}) {
		t.Fatalf("isr = %v while c is stopping, want [a b]", isr)
	}
	w.setStopping("c", false)
	testwait.For(t, 5*time.Second, "c back in the isr once not stopping", func() bool {
		return sameSet(w.assignment().ISR, []string{"a", "b", "c"})
	})
}
