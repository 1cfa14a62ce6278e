package noderpc

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/engine"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// newNodeService builds the node-RPC service over a real single-node metastore and engine,
// with a second live member "n2" so placement puts some partitions elsewhere.
func newNodeService(t *testing.T) (*Service, *engine.Engine, *meta.Store) {
	t.Helper()
	return newNodeServiceWith(t, nil)
}

// newNodeServiceWith is newNodeService with mod adjusting the engine's config.
func newNodeServiceWith(t *testing.T, mod func(*engine.Config)) (*Service, *engine.Engine, *meta.Store) {
	t.Helper()
	dir := t.TempDir()
	var eng atomic.Pointer[engine.Engine]
	store, err := meta.Open(meta.Config{
		Dir: filepath.Join(dir, "metastore"), NodeID: "n1", Bootstrap: true,
		RaftConfig: func(c *raft.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
			c.CommitTimeout = 5 * time.Millisecond
		},
		OnApply: func(ev meta.Event) {
			if e := eng.Load(); e != nil {
				e.OnMetaEvent(ev)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := store.WaitCaughtUp(ctx); err != nil {
		store.Close()
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2"} {
		if err := store.MemberJoin(ctx, meta.Member{ID: id, Addr: "127.0.0.1:1", ClusterAddr: "127.0.0.1:2",
			Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
			store.Close()
			t.Fatal(err)
		}
	}
	var e *engine.Engine
	in, err := engine.OpenIngress(filepath.Join(dir, "ingress", "produce"), wal.Options{}, nil, func(w *wal.WAL) *dispatch.Dispatcher {
		return dispatch.New(w, e.Topology(), e.Committer(nil), dispatch.Options{})
	})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	cfg := engine.Config{NodeID: "n1", DataDir: dir}
	if mod != nil {
		mod(&cfg)
	}
	e = engine.New(cfg, store, in)
	eng.Store(e)
	e.DispatcherStarted(in.Undispatched)
	e.OpenCreateGate()
	e.SetReady(true)
	ectx, stopEng := context.WithCancel(context.Background())
	ictx, stopIn := context.WithCancel(context.Background())
	engDone, inDone := make(chan error, 1), make(chan error, 1)
	go func() { engDone <- e.Run(ectx) }()
	go func() { inDone <- in.Run(ictx) }()
	t.Cleanup(func() {
		stopIn()
		<-inDone
		stopEng()
		if err := <-engDone; err != nil {
			t.Errorf("engine Run: %v", err)
		}
		store.Close()
	})
	return &Service{e: e, store: store, log: nil}, e, store
}

func createTopic(t *testing.T, e *engine.Engine, name string) meta.Topic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	top, err := e.CreateTopic(ctx, service.CreateTopicRequest{Name: name, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func TestGetTopicLeaderReadOnTheLeaderIsConfirmed(t *testing.T) {
	s, e, _ := newNodeService(t)
	top := createTopic(t, e, "orders")
	ctx := context.Background()

	rep, err := s.GetTopic(ctx, &nodepb.GetTopicRequest{Name: "orders", LeaderRead: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != 200 || !rep.Found || !rep.LeaderRead || rep.Term == 0 {
		t.Fatalf("leader read: %+v, want 200 found leader_read with a term", rep)
	}
	var got meta.Topic
	if err := json.Unmarshal(rep.TopicJson, &got); err != nil || got.Name != "orders" || got.Incarnation != top.Incarnation {
		t.Fatalf("topic_json %s (err %v), want orders@%s", rep.TopicJson, err, top.Incarnation)
	}

	rep, err = s.GetTopic(ctx, &nodepb.GetTopicRequest{Name: "missing", LeaderRead: true})
	if err != nil || rep.Status != 404 || rep.Found || !rep.LeaderRead {
		t.Fatalf("leader read of a missing topic: %+v (err %v), want 404 not found, leader_read", rep, err)
	}
	rep, err = s.GetTopic(ctx, &nodepb.GetTopicRequest{Name: "orders"})
	if err != nil || rep.Status != 200 || !rep.Found || rep.LeaderRead {
		t.Fatalf("local read: %+v (err %v)", rep, err)
	}
}

func TestCommitProduceBatchStatusesFollowOwnership(t *testing.T) {
	s, e, store := newNodeService(t)
	top := createTopic(t, e, "batches")
	ctx := context.Background()
	owned, foreign := -1, -1
	for _, a := range store.Assignments(top.Name) {
		switch a.Owner {
		case "n1":
			owned = a.Partition
		case "n2":
			foreign = a.Partition
		}
	}
	if owned < 0 || foreign < 0 {
		t.Fatalf("placement %+v does not split across n1 and n2", store.Assignments(top.Name))
	}
	entries := []*nodepb.ProduceEntry{{Key: []byte("k"), Payload: []byte("x"), AcceptedAtMs: 1}, {Payload: []byte("y"), AcceptedAtMs: 2}}

	for _, tc := range []struct {
		name        string
		topic, inc  string
		partition   int
		wantStatus  int32
		wantVisible int64 // hwm of the owned partition afterwards
	}{
		{"partition owned by another node", top.Name, top.Incarnation, foreign, 421, 0},
		{"unknown topic", "nope", "", owned, 404, 0},
		{"another incarnation", top.Name, "ffffffffffffffff", owned, 404, 0},
		{"partition out of range", top.Name, top.Incarnation, 3, 400, 0},
		{"owned partition", top.Name, top.Incarnation, owned, 200, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := s.CommitProduceBatch(ctx, &nodepb.CommitProduceBatchRequest{Topic: tc.topic, Incarnation: tc.inc,
				Partition: int32(tc.partition), Entries: entries})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rep.Status, rep.Error, tc.wantStatus)
			}
			st := e.PartitionStats(ctx, top, owned)
			if len(st) != 1 || st[0].HighWatermark != tc.wantVisible {
				t.Fatalf("owned partition stats %+v, want hwm %d", st, tc.wantVisible)
			}
		})
	}
	msgs, err := e.Consume(ctx, top, service.ConsumeRequest{Partition: owned, Offset: 0, Max: 10})
	if err != nil || len(msgs) != 2 || string(msgs[0].Key) != "k" || string(msgs[1].Payload) != "y" {
		t.Fatalf("committed batch replays as %+v (err %v)", msgs, err)
	}
}

func TestNodeStatusReportsIdleCaughtUpNode(t *testing.T) {
	s, _, store := newNodeService(t)
	ctx := context.Background()
	rep, err := s.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != 200 || !rep.CaughtUp || rep.AdmittedInflight != 0 || rep.RefusingProduce || rep.DrainingSeen || rep.AppliedIndex == 0 {
		t.Fatalf("node status %+v, want 200 caught up, nothing in flight, not draining", rep)
	}
	// The drain flag as a decommission sets it: in the node's own member record. (Setting
	// only the engine's copy raced with its refresh from the replica, every second.)
	if err := store.SetMemberDraining(ctx, "n1", true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err = s.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
		if err == nil && rep.RefusingProduce && rep.DrainingSeen && rep.AdmittedInflight == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node status while draining: %+v (err %v), want refusing produce with 0 in flight", rep, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A queue probe (op 2, local_only) adds no message that would take the answer it is for past
// its byte bound: taken_bytes is what that answer holds already, read as none when negative.
func TestQueueProbeAddsOnlyWhatFitsTheAnswer(t *testing.T) {
	s, e, store := newNodeService(t)
	top := createTopic(t, e, "probed")
	ctx := context.Background()
	owned := ownedPartition(store, top.Name)
	if err := e.Produce(ctx, top, []service.ProduceRecord{{Partition: owned, Payload: []byte("0123456789")}}); err != nil {
		t.Fatal(err)
	}
	// Wait until the record is committed, without leasing it: a probe before the commit finds
	// nothing whatever its bound, which would pass the first checks and fail the last.
	deadline := time.Now().Add(10 * time.Second)
	for e.PartitionStats(ctx, top, owned)[0].HighWatermark < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the record was not committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	probe := func(taken int64) *nodepb.ConsumeReply {
		t.Helper()
		rep, err := s.Consume(ctx, &nodepb.ConsumeRequest{Topic: top.Name, Partition: -1, Offset: -1, LocalOnly: true,
			MaxMessages: 10, TakenBytes: taken})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, taken := range []int64{consume.DefaultMaxBytes - 9, consume.DefaultMaxBytes, 1 << 40} {
		if rep := probe(taken); rep.Status != 204 {
			t.Fatalf("probe for an answer holding %d bytes: %d with %d messages, want 204", taken, rep.Status, len(rep.Messages))
		}
	}
	if rep := probe(-1); rep.Status != 200 || len(rep.Messages) != 1 {
		t.Fatalf("probe with a negative taken_bytes: %d with %d messages, want the record", rep.Status, len(rep.Messages))
	}
}

// A probe's messages go back to the owner's answer budget once the reply is built: five
// probes for 1 MiB messages each are answered by a node whose budget holds three.
func TestQueueProbesGiveTheirAnswerBudgetBack(t *testing.T) {
	s, e, store := newNodeServiceWith(t, func(c *engine.Config) { c.MaxInflightAnswerBytes = 3 << 20 })
	top := createTopic(t, e, "probed")
	ctx := context.Background()
	owned := ownedPartition(store, top.Name)
	mib := make([]byte, 1<<20)
	for range 5 {
		if err := e.Produce(ctx, top, []service.ProduceRecord{{Partition: owned, Payload: mib}}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < 5 {
		rep, err := s.Consume(ctx, &nodepb.ConsumeRequest{Topic: top.Name, Partition: -1, Offset: -1, LocalOnly: true, MaxMessages: 1})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rep.Status == 200:
			got += len(rep.Messages)
		case rep.Status != 204 || time.Now().After(deadline):
			t.Fatalf("probe %d: status %d (%s), want the next message", got+1, rep.Status, rep.Error)
		default:
			time.Sleep(5 * time.Millisecond) // not dispatched yet
		}
	}
}

// A probe whose caller gave up while the owner read is answered with an error, and the
// messages it leased are free again at once, not stranded until their leases expire.
func TestAProbeAbandonedByItsCallerLeavesNothingLeased(t *testing.T) {
	s, e, store := newNodeService(t)
	top := createTopic(t, e, "abandoned")
	owned := ownedPartition(store, top.Name)
	if err := e.Produce(context.Background(), top, []service.ProduceRecord{{Partition: owned, Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	probe := func(ctx context.Context) *nodepb.ConsumeReply {
		t.Helper()
		rep, err := s.Consume(ctx, &nodepb.ConsumeRequest{Topic: top.Name, Partition: int32(owned), Offset: -1, LocalOnly: true,
			MaxMessages: 1, WaitMs: 5000})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// Wait until the record is committed, without leasing it.
	deadline := time.Now().Add(10 * time.Second)
	for e.PartitionStats(context.Background(), top, owned)[0].HighWatermark < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the record was not committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A caller gone by the time the owner found the record (its context ended; the owner
	// reads without waiting on it, as a probe's deadline can pass while a disk is slow).
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if rep := probe(gone); rep.Status == 200 {
		t.Fatalf("abandoned probe answered 200 with %d messages", len(rep.Messages))
	}
	rep := probe(context.Background())
	if rep.Status != 200 || len(rep.Messages) != 1 || rep.Messages[0].Offset != 0 {
		t.Fatalf("next probe: %d %+v, want offset 0 again at once", rep.Status, rep.Messages)
	}
}

// ownedPartition is a partition of topic that n1 owns (-1: none).
func ownedPartition(store *meta.Store, topic string) int {
	owned := -1
	for _, a := range store.Assignments(topic) {
		if a.Owner == "n1" {
			owned = a.Partition
		}
	}
	return owned
}
