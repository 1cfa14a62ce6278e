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
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

// world is the metastore the test's nodes share: one replicated topic and its assignment of
// partition 0, which the test changes.
type world struct {
	tick     time.Duration // the managers' tick; 0: 20 ms
	mu       sync.Mutex
	topic    meta.Topic
	a        meta.Assignment
	nodes    map[string]*node
	isrs     [][]string      // every ISR a proposal installed, in order
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
	stop func() // stops the manager (a kill -9 of the node, as far as replication goes)
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

func newWorld(t *testing.T, ids ...string) *world { return newWorldOf(t, ids, ids...) }

// newWorldOf runs a manager on each of ids; partition 0 starts on replicas, led by the first.
func newWorldOf(t *testing.T, replicas []string, ids ...string) *world {
	return newWorldTicking(t, 0, replicas, ids...)
}

// newWorldTicking is newWorldOf with the managers' tick (0: 20 ms).
func newWorldTicking(t *testing.T, tick time.Duration, replicas []string, ids ...string) *world {
	w := &world{tick: tick, topic: meta.Topic{Name: "t", Partitions: 1, Incarnation: "0123456789abcdef", ReplicationFactor: len(replicas),
		MinInsyncReplicas: 2}, nodes: map[string]*node{}, stopping: map[string]bool{}}
	w.a = meta.Assignment{Topic: "t", Partition: 0, Owner: replicas[0], Replicas: replicas, ISR: replicas}
	for _, id := range ids {
		w.nodes[id] = w.newNode(t, id)
	}
	for _, n := range w.nodes {
		n.start(t)
	}
	return w
}

// topicNow is the topic record; setCreated changes its CreatedAt (a topic older than a
// node that starts after the call).
func (w *world) topicNow() meta.Topic {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.topic
}

func (w *world) setCreated(at int64) {
	w.mu.Lock()
	w.topic.CreatedAt = at
	w.mu.Unlock()
}

// node returns the node that now runs as id.
func (w *world) node(id string) *node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodes[id]
}

// replace makes n the node that runs as its id (a node restarted on another data directory).
func (w *world) replace(n *node) {
	w.mu.Lock()
	w.nodes[n.id] = n
	w.mu.Unlock()
}

// newNode builds node id over a fresh data directory; start runs it.
func (w *world) newNode(t *testing.T, id string) *node {
	n := &node{id: id, host: replica.NewHost()}
	n.reg = partition.New(partition.Deps{
		Layout:     datadir.New(t.TempDir()),
		Offsets:    consume.NewCommitter(consume.CommitterOptions{}),
		Topic:      func(string) (meta.Topic, bool) { return w.topicNow(), true },
		Owns:       func(string, int) bool { return w.assignment().Owner == id },
		Replicates: func(string, int) bool { return true },
		Leader:     n.host.Leader,
		RaiseFloor: func(_ string, _ int, t0 int64) int64 { return t0 },
	})
	t.Cleanup(n.reg.CloseAll)
	tick := w.tick
	if tick == 0 {
		tick = 20 * time.Millisecond
	}
	n.m = New(Deps{
		Self: id, Partitions: n.reg, Host: n.host, Tick: tick, LagMax: 300 * time.Millisecond,
		FetchWait:  50 * time.Millisecond,
		Slots:      func() []Slot { return []Slot{{Topic: w.topicNow(), A: w.assignment()}} },
		MemberAddr: func(id string) (string, bool) { return id, true },
		Stopping: func(id string) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.stopping[id]
		},
		Source: func(addr, topic string, _ int, inc string, wait time.Duration) replica.Source {
			return source{host: w.node(addr).host, topic: topic, incarnation: inc, wait: wait}
		},
		ProposeISR: func(_ context.Context, _ string, _ int, epoch uint64, expected, next []string) (meta.CASResult, meta.Assignment, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if epoch != w.a.LeaderEpoch || !sameSet(expected, w.a.ISR) {
				return meta.CASRefused, w.a, fmt.Errorf("stale")
			}
			w.a.ISR = next
			w.isrs = append(w.isrs, next)
			return meta.CASDone, w.a, nil
		},
		ProposeElect: func(_ context.Context, _ string, _ int, epoch uint64, leader, reason string) (meta.CASResult, meta.Assignment, error) {
			w.mu.Lock()
			if epoch != w.a.LeaderEpoch || !slices.Contains(w.a.ISR, leader) || reason != meta.ElectDead {
				defer w.mu.Unlock()
				return meta.CASRefused, w.a, fmt.Errorf("refused")
			}
			a := w.a
			a.ISR = slices.DeleteFunc(slices.Clone(a.ISR), func(id string) bool { return id == a.Owner })
			a.Owner, a.LeaderEpoch = leader, a.LeaderEpoch+1
			w.mu.Unlock()
			w.set(a)
			return meta.CASDone, a, nil
		},
	})
	return n
}

// start runs n's manager until stop or the end of the test. Registered after the registry's
// cleanup, so it runs first: the manager stops before the registry closes and the data
// directory goes.
func (n *node) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.m.Run(ctx) }()
	var once sync.Once
	n.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(n.stop)
}

func commit(t *testing.T, n *node, w *world, payloads ...string) error {
	t.Helper()
	recs := make([]wal.Record, len(payloads))
	for i, p := range payloads {
		recs[i] = wal.Record{Payload: []byte(p)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.reg.CommitReplicated(ctx, w.topicNow(), 0, recs)
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
	ds, _ := sh.Reserve(consume.Limits{}, 3, 0)
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
	again, _ := bsh.Reserve(consume.Limits{}, 10, 0)
	var offs []int64
	for _, d := range again {
		offs = append(offs, d.Message.Offset)
	}
	if !slices.Equal(offs, []int64{1, 3}) {
		t.Fatalf("the new leader delivers %v, want [1 3] (0 and 2 were acked on the old one)", offs)
	}
}

// The followers keep copies of the leader's fan-out cursor files (docs/internals/replication.md
// §8): a new cursor, its advance and its removal (a dissolved link) reach them.
func TestFollowersKeepTheLeadersFanoutCursors(t *testing.T) {
	const epoch = "67953471cc57a32a"
	w := newWorld(t, "a", "b", "c")
	a, b, c := w.nodes["a"], w.nodes["b"], w.nodes["c"]
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "m0", "m1", "m2"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "followers open the partition", func() bool {
		return b.reg.Peek("t", 0) != nil && c.reg.Peek("t", 0) != nil
	})
	cw, err := cursorfile.Anchor(a.reg.Peek("t", 0).Dir(), "child", epoch, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	at := func(n *node, want int64) func() bool {
		return func() bool {
			pt := n.reg.Peek("t", 0)
			if pt == nil {
				return false
			}
			st, err := cursorfile.Read(context.Background(), cursorfile.Path(pt.Dir(), "child"))
			return err == nil && st.Epoch == epoch && st.NextOffset == want
		}
	}
	testwait.For(t, 10*time.Second, "followers hold the anchored cursor", func() bool { return at(b, 0)() && at(c, 0)() })
	if err := cw.Advance(3); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "followers hold the advanced cursor", func() bool { return at(b, 3)() && at(c, 3)() })
	if err := cursorfile.Remove(cw.Path()); err != nil {
		t.Fatal(err)
	}
	gone := func(n *node) bool {
		files, err := cursorfile.List(context.Background(), n.reg.Peek("t", 0).Dir())
		return err == nil && len(files) == 0
	}
	testwait.For(t, 10*time.Second, "followers drop the dissolved link's cursor", func() bool { return gone(b) && gone(c) })

	// A new link; then b is elected and its runner resumes and advances b's copy: the copies
	// now flow from b, to the old leader a too.
	cw2, err := cursorfile.Anchor(a.reg.Peek("t", 0).Dir(), "child", epoch, 2)
	if err != nil {
		t.Fatal(err)
	}
	cw2.Close()
	testwait.For(t, 10*time.Second, "followers hold the new cursor", func() bool { return at(b, 2)() && at(c, 2)() })
	cur := w.assignment()
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "b", Replicas: cur.Replicas, ISR: []string{"b", "c"}, LeaderEpoch: 1})
	testwait.For(t, 5*time.Second, "b leads", func() bool { _, ok := b.host.Leader("t", 0); return ok })
	bw, st, err := cursorfile.Open(context.Background(), b.reg.Peek("t", 0).Dir(), "child")
	if err != nil || st.Epoch != epoch || st.NextOffset != 2 {
		t.Fatalf("b's runner opens %+v, %v; want the replicated position 2", st, err)
	}
	defer bw.Close()
	if err := bw.Advance(3); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "a and c hold b's cursor", func() bool {
		return at(a, 3)() && at(c, 3)()
	})
}

// A replica that comes back empty (its data directory lost) while the metastore still holds it
// in the ISR takes itself out before anything else: the leader dying before it copied the log
// must not be succeeded by the empty copy, although it comes first in replica order.
func TestAnEmptyReplicaOfAnOlderTopicLeavesTheISR(t *testing.T) {
	w := newWorld(t, "a", "c", "b")
	a := w.node("a")
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "x1", "x2"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "followers learn the HWM", func() bool { return hwm(w.node("b")) == 2 && hwm(w.node("c")) == 2 })
	w.setCreated(time.Now().Add(-time.Hour).Unix())

	// a dies; c comes back on an empty data directory before a new leader is elected.
	a.stop()
	w.node("c").stop()
	c := w.newNode(t, "c")
	w.replace(c)
	c.start(t)
	testwait.For(t, 5*time.Second, "the empty c leaves the isr", func() bool { return sameSet(w.assignment().ISR, []string{"a", "b"}) })

	// The controller elects the first replica in order that is in the ISR and alive: b.
	cur := w.assignment()
	var next string
	for _, id := range cur.Replicas {
		if id != "a" && slices.Contains(cur.ISR, id) && next == "" {
			next = id
		}
	}
	if next != "b" {
		t.Fatalf("elected %q from isr %v, want b (c is empty)", next, cur.ISR)
	}
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "b", Replicas: cur.Replicas, ISR: []string{"b"}, LeaderEpoch: 1})
	b := w.node("b")
	testwait.For(t, 5*time.Second, "b leads", func() bool { _, ok := b.host.Leader("t", 0); return ok })
	testwait.For(t, 5*time.Second, "c copies b and rejoins", func() bool { return sameSet(w.assignment().ISR, []string{"b", "c"}) })
	if err := commit(t, b, w, "y1"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "c holds all three records", func() bool { return hwm(c) == 3 })
	pc := c.reg.Peek("t", 0)
	for off, want := range []string{"x1", "x2", "y1"} {
		r, err := pc.Log().Read(int64(off))
		if err != nil || string(r.Payload) != want {
			t.Fatalf("c's offset %d: %q, %v; want %q", off, r.Payload, err, want)
		}
	}
}

// A leader that comes back empty before the controller noticed it was gone (it restarts within
// the failover time, so it still leads in the metastore) hands its leadership to an in-sync
// replica instead of serving an empty log, and copies the records back as a follower. Topic
// creation times are whole seconds: a topic created in the second the node restarts counts
// as older than the process (the r8 black-box spec did all of it within one second).
func TestAnEmptyLeaderHandsItsLeadershipOn(t *testing.T) {
	t.Run("topic an hour older", func(t *testing.T) { testEmptyLeaderHandsOn(t, false) })
	t.Run("topic created in the second of the restart", func(t *testing.T) { testEmptyLeaderHandsOn(t, true) })
}

func testEmptyLeaderHandsOn(t *testing.T, sameSecond bool) {
	w := newWorld(t, "a", "b", "c")
	a := w.node("a")
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "x1", "x2"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "followers learn the HWM", func() bool { return hwm(w.node("b")) == 2 && hwm(w.node("c")) == 2 })
	if !sameSecond {
		w.setCreated(time.Now().Add(-time.Hour).Unix())
	}

	a.stop()
	a = w.newNode(t, "a")
	if sameSecond {
		w.setCreated(a.m.started.Unix())
	}
	w.replace(a)
	a.start(t)
	testwait.For(t, 5*time.Second, "the empty a hands p0 to b", func() bool {
		cur := w.assignment()
		return cur.Owner == "b" && cur.LeaderEpoch == 1
	})
	if _, ok := a.host.Leader("t", 0); ok {
		t.Fatal("the empty a leads")
	}
	b := w.node("b")
	testwait.For(t, 5*time.Second, "b leads", func() bool { _, ok := b.host.Leader("t", 0); return ok })
	testwait.For(t, 5*time.Second, "a copies b and rejoins", func() bool { return sameSet(w.assignment().ISR, []string{"a", "b", "c"}) })
	if err := commit(t, b, w, "y1"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "a holds all three records", func() bool { return hwm(a) == 3 })
	pa := a.reg.Peek("t", 0)
	for off, want := range []string{"x1", "x2", "y1"} {
		r, err := pa.Log().Read(int64(off))
		if err != nil || string(r.Payload) != want {
			t.Fatalf("a's offset %d: %q, %v; want %q", off, r.Payload, err, want)
		}
	}
}

// The controller may elect an empty replica before its own ISR exit is applied (the leader
// died in that moment): the empty leader then hands the leadership on at once.
func TestAnEmptyReplicaElectedBeforeItLeftTheISRHandsOn(t *testing.T) {
	w := newWorld(t, "a", "c", "b")
	a := w.node("a")
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	if err := commit(t, a, w, "x1", "x2"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "followers learn the HWM", func() bool { return hwm(w.node("b")) == 2 && hwm(w.node("c")) == 2 })
	w.setCreated(time.Now().Add(-time.Hour).Unix())

	// a dies and c loses its disk; the controller elects c (first in order, still in the ISR)
	// before c is back.
	a.stop()
	w.node("c").stop()
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "c", Replicas: []string{"a", "c", "b"}, ISR: []string{"c", "b"}, LeaderEpoch: 1})
	c := w.newNode(t, "c")
	w.replace(c)
	c.start(t)
	testwait.For(t, 5*time.Second, "the empty c hands p0 to b", func() bool {
		cur := w.assignment()
		return cur.Owner == "b" && cur.LeaderEpoch == 2
	})
	b := w.node("b")
	testwait.For(t, 5*time.Second, "b leads", func() bool { _, ok := b.host.Leader("t", 0); return ok })
	testwait.For(t, 5*time.Second, "c copies b and rejoins", func() bool { return sameSet(w.assignment().ISR, []string{"b", "c"}) })
	if err := commit(t, b, w, "y1"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "c holds all three records", func() bool { return hwm(c) == 3 })
}

// A replica added by a reassignment (op 25, same epoch) is installed in the running
// leadership: it may fetch, catches up and the leader expands the ISR to it; one dropped
// again is forgotten and shrunk out.
func TestALeadershipFollowsReplicaChangesUnderOneEpoch(t *testing.T) {
	w := newWorldOf(t, []string{"a", "b"}, "a", "b", "c")
	a, c := w.nodes["a"], w.nodes["c"]
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	// b may be shrunk out before its first fetch (lag max 300 ms): retry until it is in sync.
	testwait.For(t, 10*time.Second, "a commits with b in sync", func() bool { return commit(t, a, w, "x1") == nil })
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "a", Replicas: []string{"a", "b", "c"}, ISR: w.assignment().ISR})
	testwait.For(t, 10*time.Second, "c joins the isr", func() bool { return sameSet(w.assignment().ISR, []string{"a", "b", "c"}) })
	testwait.For(t, 10*time.Second, "a commits with c in sync", func() bool { return commit(t, a, w, "x2") == nil })
	testwait.For(t, 5*time.Second, "c learns the HWM", func() bool { return hwm(c) == hwm(a) && hwm(a) >= 2 })
	ld, _ := a.host.Leader("t", 0)
	if ld.Epoch() != 0 {
		t.Fatalf("the leadership changed epoch: %d", ld.Epoch())
	}
	w.set(meta.Assignment{Topic: "t", Partition: 0, Owner: "a", Replicas: []string{"a", "c"}, ISR: []string{"a", "c"}})
	testwait.For(t, 5*time.Second, "the leadership forgets b", func() bool { return ld.Configured([]string{"a", "c"}, 2) })
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
		return slices.Contains(ld.ExpandCandidates(time.Minute), "c")
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

// A follower that catches up is added back to the ISR when its fetch reports it, not at the
// leader's next tick (an hour here): the leadership calls OnISRDue, which kicks a pass.
func TestACaughtUpFollowerRejoinsTheISRBeforeTheTick(t *testing.T) {
	w := newWorldTicking(t, time.Hour, []string{"a", "b", "c"}, "a", "b")
	a := w.nodes["a"]
	testwait.For(t, 5*time.Second, "a leads", func() bool { _, ok := a.host.Leader("t", 0); return ok })
	ld, _ := a.host.Leader("t", 0)
	w.mu.Lock()
	w.a.ISR = []string{"a", "b"} // c is down
	w.mu.Unlock()
	a.m.Kick()
	testwait.For(t, 5*time.Second, "a installs the isr without c", func() bool { return sameSet(ld.ISR(), []string{"a", "b"}) })
	for i := range 5 {
		if err := commit(t, a, w, fmt.Sprintf("x%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	c := w.newNode(t, "c")
	w.replace(c)
	c.start(t)
	testwait.For(t, 5*time.Second, "c back in the isr", func() bool {
		return sameSet(w.assignment().ISR, []string{"a", "b", "c"})
	})
	if got, want := hwm(c), hwm(a); got != want {
		t.Fatalf("c's hwm %d, the leader's %d", got, want)
	}
	if err := commit(t, a, w, "y"); err != nil { // the leadership installed the expand
		t.Fatal(err)
	}
	if !sameSet(ld.ISR(), []string{"a", "b", "c"}) {
		t.Fatalf("the leadership's isr %v", ld.ISR())
	}
}
