package meta

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"narad.dev/broker/internal/testwait"
)

// fastRaft shortens Raft's timeouts for tests (production keeps the library defaults).
func fastRaft(c *raft.Config) {
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) { l.mu.Lock(); l.events = append(l.events, e); l.mu.Unlock() }

func (l *eventLog) list() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

func openSingle(t *testing.T, dir string, ev *eventLog) *Store {
	t.Helper()
	cfg := Config{Dir: dir, NodeID: "n1", Bootstrap: true, RaftConfig: fastRaft}
	if ev != nil {
		cfg.OnApply = ev.add
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// With raft's default timings a bootstrapped single node elects itself and is caught up
// within ~2–3 s of Open.
func TestSingleNodeIsCaughtUpSoonAfterOpen(t *testing.T) {
	start := time.Now()
	s, err := Open(Config{Dir: t.TempDir(), NodeID: "n1", Bootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("not caught up 3 s after Open: %v", err)
	}
	if !s.IsLeader() {
		t.Fatal("single node is not leader")
	}
	if id, addr := s.Leader(); id != "n1" || addr != "n1" {
		t.Fatalf("Leader() = %q %q", id, addr)
	}
	t.Logf("caught up after %v", time.Since(start))
}

// Full store: propose, close, reopen → state intact and no entry re-applied.
func TestStoreReopenKeepsStateWithoutReapplying(t *testing.T) {
	dir := t.TempDir()
	var ev eventLog
	s := openSingle(t, dir, &ev)
	ctx := ctxT(t)
	if err := s.MemberJoin(ctx, Member{ID: "n1", Addr: "127.0.0.1:7942", ClusterAddr: "n1", LastHeartbeat: 1}); err != nil {
		t.Fatal(err)
	}
	top := newTopic("orders", 3)
	if err := s.CreateTopic(ctx, top, []Assignment{{Topic: "orders", Partition: 0, Owner: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.PutSchema(ctx, "orders", json.RawMessage(`{"type":"object"}`)); err != nil || v != 1 {
		t.Fatalf("PutSchema = %d, %v", v, err)
	}
	if seeded, err := s.SeedRootUser(ctx, User{Username: "admin", PasswordHash: "h"}); err != nil || !seeded {
		t.Fatalf("SeedRootUser = %v, %v", seeded, err)
	}
	if n := len(ev.list()); n != 4 {
		t.Fatalf("%d events for 4 state-changing proposals", n)
	}
	applied := s.fsm.applied()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Topic("orders"); ok {
		t.Fatal("read after Close returned data")
	}
	if err := s.MemberDead(ctx, "n1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("proposal after Close = %v, want ErrClosed", err)
	}

	var ev2 eventLog
	s2 := openSingle(t, dir, &ev2)
	if got, ok := s2.Topic("orders"); !ok || got.Incarnation != top.Incarnation || got.SchemaVersion != 1 {
		t.Fatalf("after reopen Topic = %+v, %v", got, ok)
	}
	if a, ok := s2.Assignment("orders", 0); !ok || a.Owner != "n1" {
		t.Fatalf("after reopen assignment %+v %v", a, ok)
	}
	if !s2.RootSeeded() || s2.TopicCount() != 1 || len(s2.Members()) != 1 {
		t.Fatal("after reopen: state lost")
	}
	if got := s2.fsm.applied(); got != applied {
		t.Fatalf("fsm applied %d after reopen, want %d", got, applied)
	}
	if e := ev2.list(); len(e) != 0 {
		t.Fatalf("reopen re-applied entries: %+v", e)
	}
	if s2.AppliedIndex() < applied {
		t.Fatalf("AppliedIndex %d < %d", s2.AppliedIndex(), applied)
	}
	if err := s2.CreateTopic(ctx, newTopic("orders", 3), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("re-create after reopen = %v, want ErrExists", err)
	}
}

// fsmBehindSnapshot leaves a closed single-node metastore whose log holds topic "before" in
// its latest snapshot and topic "after" in an entry past it, with the FSM wiped: a restart
// restores "before" from the snapshot and must replay "after". It returns the directory.
func fsmBehindSnapshot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := openSingle(t, dir, nil)
	ctx := ctxT(t)
	if err := s.CreateTopic(ctx, newTopic("before", 3), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(ctx, newTopic("after", 3), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "fsm")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// §2.3 rule 4b: an FSM behind the latest snapshot (here: wiped) is restored from it at start,
// and Raft then replays the entries after the snapshot.
func TestStartupRestoresFSMBehindLatestSnapshot(t *testing.T) {
	dir, ctx := fsmBehindSnapshot(t), ctxT(t)
	s2, err := Open(Config{Dir: dir, NodeID: "n1", Bootstrap: true, RaftConfig: fastRaft})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, ok := s2.Topic("before"); !ok {
		t.Fatal("topic from the snapshot missing right after Open: start-up restore did not run")
	}
	if err := s2.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Topic("after"); !ok {
		t.Fatal("entry after the snapshot was not replayed")
	}
}

// heldLogs holds every append to the Raft log until release is closed.
type heldLogs struct {
	raft.LogStore
	release chan struct{}
	held    atomic.Int32 // appends waiting
}

func (h *heldLogs) StoreLog(l *raft.Log) error { return h.StoreLogs([]*raft.Log{l}) }

func (h *heldLogs) StoreLogs(logs []*raft.Log) error {
	h.held.Add(1)
	<-h.release
	return h.LogStore.StoreLogs(logs)
}

// §5.1/§5.2: a restarted single node leads at once, but until the first entry of its term is
// committed it does not know the entries after its snapshot are committed, and has not applied
// them. It must not read caught up in that window: here the window is held open by holding the
// append of that first entry.
func TestAFreshLeaderIsNotCaughtUpBeforeItCommitsAnEntryOfItsTerm(t *testing.T) {
	dir, ctx := fsmBehindSnapshot(t), ctxT(t)
	hold := &heldLogs{release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(hold.release)
		}
	}
	s2, err := Open(Config{Dir: dir, NodeID: "n1", Bootstrap: true, RaftConfig: fastRaft,
		wrapLogs: func(l raft.LogStore) raft.LogStore { hold.LogStore = l; return hold }})
	if err != nil {
		release()
		t.Fatal(err)
	}
	defer s2.Close()
	defer release() // before Close: a held append would keep Raft from shutting down
	testwait.For(t, 10*time.Second, "n1 leads with the first entry of its term held", func() bool { return s2.IsLeader() && hold.held.Load() > 0 })
	if _, ok := s2.Topic("after"); ok {
		t.Fatal("the entry after the snapshot was applied before the new term committed anything: the window this test needs is gone")
	}
	if s2.AppliedCaughtUp() {
		t.Fatal("a fresh leader whose entries after the snapshot are not applied reads caught up")
	}
	release()
	if err := s2.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Topic("after"); !ok {
		t.Fatal("caught up, but the entry after the snapshot is not applied")
	}
}

func TestProposalsMapOutcomesToSentinels(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ctx := ctxT(t)
	if err := s.CreateTopic(ctx, newTopic("orders", 3), []Assignment{{Partition: 0, Owner: "n1"}}); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"create exists", s.CreateTopic(ctx, newTopic("orders", 3), nil), ErrExists},
		{"create invalid", s.CreateTopic(ctx, Topic{Name: "a b"}, nil), ErrInvalid},
		{"schema not JSON", func() error { _, err := s.PutSchema(ctx, "orders", json.RawMessage(`{`)); return err }(), ErrInvalid},
		{"delete missing", func() error { _, err := s.DeleteTopic(ctx, "nope"); return err }(), ErrNotFound},
		{"attach to itself", s.AttachChild(ctx, "orders", "orders", "e", 0, nil), ErrInvalid},
		{"detach missing", s.DetachChild(ctx, "orders", "nope"), ErrNotFound},
		{"heartbeat unknown", s.MemberHeartbeat(ctx, "nx", 1), ErrNotFound},
		{"delete unknown user", s.DeleteUser(ctx, "nobody"), ErrNotFound},
		{"assign taken", s.AssignPartition(ctx, Assignment{Topic: "orders", Partition: 0, Owner: "n2"}), ErrExists},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}

	res, a, err := s.SetAssignmentTarget(ctx, "orders", 0, "n2", "n1")
	if err != nil || res != CASDone || a.Target != "n2" {
		t.Fatalf("SetAssignmentTarget = %v %+v %v", res, a, err)
	}
	res, a, err = s.CompleteMove(ctx, "orders", 0, "n3", "n2")
	if !errors.Is(err, ErrConflict) || res != CASRefused || a.Owner != "n1" {
		t.Fatalf("refused flip = %v %+v %v", res, a, err)
	}
	if res, a, err = s.CompleteMove(ctx, "orders", 0, "n1", "n2"); err != nil || res != CASDone || a.Owner != "n2" {
		t.Fatalf("flip = %v %+v %v", res, a, err)
	}
	if res, _, err = s.CompleteMove(ctx, "orders", 0, "n1", "n2"); err != nil || res != CASAlreadyDone {
		t.Fatalf("retried flip = %v %v, want already_done", res, err)
	}
	if res, _, err = s.CompleteMove(ctx, "orders", 2, "n1", "n2"); !errors.Is(err, ErrNotFound) || res != CASNotFound {
		t.Fatalf("flip of an unassigned partition = %v %v", res, err)
	}
	if res, _, err = s.AbortMove(ctx, "orders", 0, "n9"); err != nil || res != CASNoop {
		t.Fatalf("mismatched abort = %v %v", res, err)
	}
	deleted, err := s.DeleteTopic(ctx, "orders")
	if err != nil || deleted.Name != "orders" || deleted.Incarnation == "" {
		t.Fatalf("DeleteTopic = %+v %v", deleted, err)
	}
}

func TestProposalHonoursCancelledContext(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CreateTopic(ctx, newTopic("orders", 3), nil); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("proposal with a cancelled ctx = %v", err)
	}
}

func TestConfirmTopicOnLeader(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ctx := ctxT(t)
	if err := s.CreateTopic(ctx, newTopic("orders", 3), nil); err != nil {
		t.Fatal(err)
	}
	if top, found, err := s.ConfirmTopic(ctx, "orders"); err != nil || !found || top.Name != "orders" {
		t.Fatalf("ConfirmTopic = %+v %v %v", top, found, err)
	}
	if _, found, err := s.ConfirmTopic(ctx, "nope"); err != nil || found {
		t.Fatalf("ConfirmTopic(absent) = %v %v, want authoritative absence", found, err)
	}
	if _, _, term, err := s.LeaderReadTopic(ctx, "orders"); err != nil || term == 0 {
		t.Fatalf("LeaderReadTopic term %d err %v", term, err)
	}
	if err := s.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLeadershipChangesStartsWithCurrentState(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ch, cancel := s.LeadershipChanges()
	defer cancel()
	select {
	case v := <-ch:
		if !v {
			t.Fatal("first value false on the leader")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no initial leadership value")
	}
}

func TestOpenRequiresDirAndNodeID(t *testing.T) {
	if _, err := Open(Config{NodeID: "n1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open without Dir = %v", err)
	}
	if _, err := Open(Config{Dir: t.TempDir()}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open without NodeID = %v", err)
	}
}
