package controller

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
)

// Shared test fixtures: an in-process metastore cluster on connected in-memory transports,
// a settable clock, a fake prober and a log recorder.

// fakeClock is the leader's clock in tests; it only moves when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// fakeProber answers NodeStatus from the real stores: a node's applied index, unless the
// test marks it lagging (applied index 0).
type fakeProber struct {
	mu     sync.Mutex
	stores map[string]*meta.Store
	lag    map[string]bool
	calls  int
}

func (p *fakeProber) NodeStatus(ctx context.Context, m meta.Member) (Status, error) {
	p.mu.Lock()
	p.calls++
	st, lag := p.stores[m.ClusterAddr], p.lag[m.ID]
	p.mu.Unlock()
	if lag || st == nil {
		return Status{}, nil
	}
	return Status{AppliedIndex: st.AppliedIndex(), CaughtUp: st.AppliedCaughtUp()}, nil
}

func (p *fakeProber) setLag(id string, on bool) {
	p.mu.Lock()
	p.lag[id] = on
	p.mu.Unlock()
}

func (p *fakeProber) callCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// record is one captured log record: its message and attributes.
type record struct {
	msg   string
	attrs map[string]string
}

// logRecorder is a slog handler that keeps every record (all levels) for assertions.
type logRecorder struct {
	mu      sync.Mutex
	records []record
	attrs   []slog.Attr
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	out := record{msg: rec.Message, attrs: map[string]string{}}
	for _, a := range r.attrs {
		out.attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		out.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.records = append(r.records, out)
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorderView{root: r, attrs: as}
}

func (r *logRecorder) WithGroup(string) slog.Handler { return r }

// find returns the records with message msg.
func (r *logRecorder) find(msg string) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, rec := range r.records {
		if rec.msg == msg {
			out = append(out, rec)
		}
	}
	return out
}

// index returns the position of the first record with msg and attribute key=value, or -1.
func (r *logRecorder) index(msg, key, value string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rec := range r.records {
		if rec.msg == msg && rec.attrs[key] == value {
			return i
		}
	}
	return -1
}

// dump logs every record except debug chatter.
func (r *logRecorder) dump(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		t.Logf("%s %v", rec.msg, rec.attrs)
	}
}

// teeHandler sends each record to two handlers.
type teeHandler [2]slog.Handler

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h teeHandler) Handle(ctx context.Context, rec slog.Record) error {
	_ = h[0].Handle(ctx, rec.Clone())
	return h[1].Handle(ctx, rec)
}

func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h[0].WithAttrs(as), h[1].WithAttrs(as)}
}

func (h teeHandler) WithGroup(string) slog.Handler { return h }

// logRecorderView adds attributes (logger.With) in front of the root recorder.
type logRecorderView struct {
	root  *logRecorder
	attrs []slog.Attr
}

func (v *logRecorderView) Enabled(context.Context, slog.Level) bool { return true }

func (v *logRecorderView) Handle(ctx context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(v.attrs...)
	return v.root.Handle(ctx, rec)
}

func (v *logRecorderView) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorderView{root: v.root, attrs: append(append([]slog.Attr{}, v.attrs...), as...)}
}

func (v *logRecorderView) WithGroup(string) slog.Handler { return v }

func fastRaft(c *raft.Config) {
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

// slowRaft keeps a follower from ever starting an election during a test.
func slowRaft(c *raft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, 50*time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

// testCluster is a set of in-process stores; voters[0] leads.
type testCluster struct {
	t      *testing.T
	ids    []string
	stores map[string]*meta.Store
	trans  map[string]*raft.InmemTransport
	clock  *fakeClock
	prober *fakeProber
	log    *logRecorder // every store's and controller's logs; printed when the test fails
}

// openCluster starts voters (bootstrapped together; voters[0] with fast timeouts leads, the
// others never start an election) and joiners (join-only, admitted as non-voters by the
// leader), and registers every node's member record at the clock's time.
func openCluster(t *testing.T, voters []string, joiners ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, stores: map[string]*meta.Store{}, trans: map[string]*raft.InmemTransport{},
		clock: newClock(), log: &logRecorder{}}
	t.Cleanup(func() {
		if t.Failed() {
			c.log.dump(t)
		}
	})
	c.ids = append(append([]string{}, voters...), joiners...)
	c.prober = &fakeProber{stores: c.stores, lag: map[string]bool{}}
	for _, id := range c.ids {
		_, c.trans[id] = raft.NewInmemTransport(raft.ServerAddress(id))
	}
	for _, a := range c.ids {
		for _, b := range c.ids {
			if a != b {
				c.trans[a].Connect(raft.ServerAddress(b), c.trans[b])
			}
		}
	}
	t.Cleanup(func() {
		for _, tr := range c.trans {
			_ = tr.Close()
		}
	})
	var servers []raft.Server
	for _, id := range voters {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
	}
	for i, id := range c.ids {
		cfg := meta.Config{Dir: t.TempDir(), NodeID: id, Transport: c.trans[id], RaftConfig: slowRaft,
			Logger: slog.New(c.log)}
		if i < len(voters) {
			cfg.Bootstrap, cfg.BootstrapServers = true, servers
		}
		if i == 0 {
			cfg.RaftConfig = fastRaft
		}
		s, err := meta.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		c.prober.mu.Lock()
		c.stores[id] = s
		c.prober.mu.Unlock()
	}
	ctx := ctxT(t)
	leader := c.leader()
	if err := leader.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if !leader.IsLeader() {
		t.Fatalf("%s did not become the leader", voters[0])
	}
	for _, id := range joiners {
		if err := leader.AddNonvoter(ctx, id, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.ids {
		if err := c.stores[id].WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.join(c.ids...)
	return c
}

func (c *testCluster) leader() *meta.Store { return c.stores[c.ids[0]] }

// join registers members (alive, heartbeat now) through the leader.
func (c *testCluster) join(ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		m := meta.Member{ID: id, Addr: id + ":7942", ClusterAddr: id, LastHeartbeat: c.clock.Now().Unix()}
		if err := c.leader().MemberJoin(ctxT(c.t), m); err != nil {
			c.t.Fatal(err)
		}
	}
}

// beat heartbeats members at the clock's time through the leader.
func (c *testCluster) beat(ids ...string) {
	c.t.Helper()
	c.beatAt(c.clock.Now(), ids...)
}

func (c *testCluster) beatAt(at time.Time, ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		if err := c.leader().MemberHeartbeat(ctxT(c.t), id, at.Unix()); err != nil {
			c.t.Fatal(err)
		}
	}
}

// advance moves the clock by d. The alive members heartbeat at the new time before the clock
// moves, so no pass ever sees them silent.
func (c *testCluster) advance(d time.Duration, alive ...string) time.Time {
	c.t.Helper()
	c.beatAt(c.clock.Now().Add(d), alive...)
	return c.clock.Advance(d)
}

// expireSilent moves the clock past DeadAfter while the given members keep heartbeating.
func (c *testCluster) expireSilent(alive ...string) {
	c.t.Helper()
	c.advance(DefaultDeadAfter+time.Second, alive...)
}

// start runs a controller on node id until the test ends.
func (c *testCluster) start(id string, log *logRecorder, tweak func(*Config)) *Controller {
	c.t.Helper()
	cfg := Config{Store: c.stores[id], Prober: c.prober, Tick: 20 * time.Millisecond,
		Resync: 50 * time.Millisecond, CatchUpWait: 100 * time.Millisecond, Now: c.clock.Now}
	cfg.Logger = slog.New(c.log).With("node", id)
	if log != nil {
		cfg.Logger = slog.New(teeHandler{log, c.log}).With("node", id)
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ctl := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	c.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			c.t.Errorf("controller %s Run = %v", id, err)
		}
	})
	return ctl
}

// kill stops node id: it is cut off from every transport and its store closed.
func (c *testCluster) kill(id string) {
	c.t.Helper()
	for _, other := range c.ids {
		if other != id {
			c.trans[other].Disconnect(raft.ServerAddress(id))
		}
	}
	c.trans[id].DisconnectAll()
	if err := c.stores[id].Close(); err != nil {
		c.t.Fatal(err)
	}
}

// voters returns the IDs of the Raft configuration's voters, as the leader sees it.
func (c *testCluster) voters() []string {
	c.t.Helper()
	conf, err := c.leader().Configuration()
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, s := range conf {
		if s.Voter {
			out = append(out, s.ID)
		}
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// settle waits until ctl has completed n more passes (each started after the call), so
// every duty has seen the state as it is now.
func settle(t *testing.T, ctl *Controller, n uint64) {
	t.Helper()
	target := ctl.passes.Load() + n + 1
	testwait.For(t, 15*time.Second, "controller passes", func() bool { return ctl.passes.Load() >= target })
}
