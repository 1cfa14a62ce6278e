package sweep

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/engine"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/transfer"
	"narad.dev/broker/testutil/logrec"
)

var _ Engine = (*engine.Engine)(nil)

const (
	self  = "n1"
	owner = "n2"
	incA  = "aaaaaaaaaaaaaaaa"
	incB  = "bbbbbbbbbbbbbbbb"
)

// fakeStore is the metastore as the sweep sees it: a local replica whose maps also answer the
// leader-confirmed reads. Hooks let a test change state between reads.
type fakeStore struct {
	mu           sync.Mutex
	caughtUp     bool
	topics       map[string]meta.Topic
	assigns      map[string]meta.Assignment
	members      map[string]meta.Member
	confirmErr   error
	afterConfirm func(*fakeStore) // runs once after ConfirmAssignment answered
}

func newFakeStore() *fakeStore {
	return &fakeStore{caughtUp: true, topics: map[string]meta.Topic{}, assigns: map[string]meta.Assignment{},
		members: map[string]meta.Member{owner: {ID: owner, ClusterAddr: "127.0.0.1:7002", Status: meta.MemberAlive}}}
}

func akey(topic string, p int) string { return fmt.Sprintf("%s/%d", topic, p) }

func (s *fakeStore) AppliedCaughtUp() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.caughtUp }
func (s *fakeStore) Topic(name string) (meta.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	return t, ok
}
func (s *fakeStore) Assignment(topic string, p int) (meta.Assignment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.assigns[akey(topic, p)]
	return a, ok
}
func (s *fakeStore) Member(id string) (meta.Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[id]
	return m, ok
}
func (s *fakeStore) ConfirmAssignment(_ context.Context, topic string, p int) (meta.Assignment, bool, error) {
	s.mu.Lock()
	if s.confirmErr != nil {
		s.mu.Unlock()
		return meta.Assignment{}, false, s.confirmErr
	}
	a, ok := s.assigns[akey(topic, p)]
	hook := s.afterConfirm
	s.afterConfirm = nil
	s.mu.Unlock()
	if hook != nil {
		hook(s)
	}
	return a, ok, nil
}

// fakeSource answers owner listings from a map; lists counts the calls.
type fakeSource struct {
	mu       sync.Mutex
	listings map[string]transfer.Listing
	err      error
	lists    int
}

func (f *fakeSource) List(_ context.Context, addr, topic string, p int) (transfer.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.err != nil {
		return transfer.Listing{}, f.err
	}
	l, ok := f.listings[akey(topic, p)]
	if !ok {
		return transfer.Listing{}, transfer.ErrNotOwner
	}
	return l, nil
}
func (f *fakeSource) Fetch(context.Context, string, string, int, int64, int64, int) ([]byte, error) {
	return nil, transfer.ErrUnavailable
}
func (f *fakeSource) Stream(context.Context, string, string, int, int64, int64, int64, int) (transfer.SegmentStream, error) {
	return nil, transfer.ErrUnavailable
}
func (f *fakeSource) Prepare(context.Context, string, string, int, transfer.PrepareRequest) (transfer.Listing, error) {
	return transfer.Listing{}, transfer.ErrUnavailable
}

// testClock is a settable wall clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Step(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one node's data dir with a real engine (its own single-node metastore holds no
// topics, so the engine's under-guard re-checks see nothing claimed), a fake sweep Store and
// Source, and a captured log.
type env struct {
	t     *testing.T
	dir   string
	store *fakeStore
	src   *fakeSource
	eng   *engine.Engine
	m     *metrics.Metrics
	clock *testClock
	logs  *logrec.Sink
	sw    *Sweeper
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ms, err := meta.Open(meta.Config{Dir: filepath.Join(t.TempDir(), "metastore"), NodeID: self, Bootstrap: true,
		RaftConfig: func(c *raft.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
			c.CommitTimeout = 5 * time.Millisecond
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Close() })
	e := &env{t: t, dir: t.TempDir(), store: newFakeStore(), src: &fakeSource{listings: map[string]transfer.Listing{}},
		m: metrics.New(), clock: &testClock{t: time.Now()}, logs: &logrec.Sink{}}
	logger := e.logs.Logger()
	e.eng = engine.New(engine.Config{NodeID: self, DataDir: e.dir, Logger: logger, Metrics: e.m, Now: e.clock.Now}, ms, nil)
	e.sw = New(Config{NodeID: self, DataDir: e.dir, Store: e.store, Source: e.src, Engine: e.eng,
		Logger: logger, Now: e.clock.Now})
	return e
}

func (e *env) sweep() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.sw.Sweep(ctx); err != nil {
		e.t.Fatalf("Sweep: %v", err)
	}
}

// topic registers topic name (incarnation inc, retention) in the replica with partition 0
// owned by owner.
func (e *env) topic(name, inc string, retentionMs int64) {
	e.store.mu.Lock()
	defer e.store.mu.Unlock()
	e.store.topics[name] = meta.Topic{Name: name, Partitions: 1, Incarnation: inc, RetentionMs: retentionMs}
	e.store.assigns[akey(name, 0)] = meta.Assignment{Topic: name, Partition: 0, Owner: owner}
}

func (e *env) topicDir(name string) string { return filepath.Join(e.dir, "topics", name) }
func (e *env) partDir(name string) string  { return filepath.Join(e.topicDir(name), "p00000") }

// localCopy writes topics/<name>/.incarnation (unless inc is "") and a closed log of n records
// at p00000, one record per segment, plus a temp file that only a recovery removes.
func (e *env) localCopy(name, inc string, n int) string {
	e.t.Helper()
	if err := os.MkdirAll(e.topicDir(name), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if inc != "" {
		if err := os.WriteFile(filepath.Join(e.topicDir(name), ".incarnation"), []byte(inc+"\n"), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	dir := e.partDir(name)
	l, err := plog.Open(dir, plog.Options{SegmentBytes: 200})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Commit([]plog.Entry{{Payload: []byte(strings.Repeat("x", 250))}}, 1); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe.tmp-recovery"), nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// mirror returns a listing whose segments equal the local copy's files (the last one is the
// unsealed boundary segment).
func (e *env) mirror(name, inc string, hwm int64) transfer.Listing {
	e.t.Helper()
	ents, err := os.ReadDir(e.partDir(name))
	if err != nil {
		e.t.Fatal(err)
	}
	l := transfer.Listing{HighWatermark: hwm, Incarnation: inc, CommittedOffset: -1}
	for _, ent := range ents {
		base, ok := plog.ParseSegmentFileName(ent.Name())
		if !ok {
			continue
		}
		fi, _ := ent.Info()
		l.Segments = append(l.Segments, transfer.Segment{Base: base, Size: fi.Size(), Sealed: true})
	}
	if n := len(l.Segments); n > 0 {
		l.Segments[n-1].Sealed = false
	}
	return l
}

func markerBytes(from string, hwm int64, installedAt time.Time, durable bool) []byte {
	m := transfer.Marker{Topic: "t", Partition: 0, Incarnation: incA, From: from, To: owner, HWM: hwm,
		InstalledAtMs: installedAt.UnixMilli()}
	if durable {
		m.DurableAtMs = installedAt.UnixMilli()
	}
	return transfer.EncodeMarker(m)
}

func (e *env) setListing(name string, l transfer.Listing) {
	e.src.mu.Lock()
	e.src.listings[akey(name, 0)] = l
	e.src.mu.Unlock()
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }
