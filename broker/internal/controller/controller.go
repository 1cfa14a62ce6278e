// Package controller runs the Raft leader's cluster duties (docs/internals/metastore.md §12): liveness
// (C1), placement of unassigned partitions (C2), voter promotion and demotion (C3), clearing
// the targets of moves aimed at gone or dead destinations (C4), the rebalance planner (C5),
// decommission (C6), the blocked-move and blocked-decommission metrics (C7), seeding the
// root admin (C8), garbage collection of member records (C9), and the leader elections of
// replicated partitions: failover (C10) and preferred leaders (C11), and the replica
// reassignment of replicated partitions (C12; docs/internals/replication.md §7, §9). The API's decommission
// calls (Decommission, CancelDecommission, EvaluateDecommission, DecommissionBlocked) are
// answered by the controller on the leader.
//
// Every node runs a Controller; only the one on the Raft leader acts. Its proposals use
// meta.LeaderOnly, so a deposed leader's last decisions fail instead of being forwarded to
// its successor.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
)

// Controller timing and policy constants (docs/internals/metastore.md §14).
const (
	DefaultTick            = 10 * time.Second // ReconcileInterval: one pass per tick while leader
	DefaultResync          = 5 * time.Second  // IsLeader re-check: LeaderCh may coalesce edges
	DefaultDeadAfter       = 30 * time.Second // heartbeat silence before a member is marked dead
	DefaultRemoveDeadAfter = time.Hour        // C9: dead this long on the leader's clock → record GC
	DefaultProbeTimeout    = 5 * time.Second  // one NodeStatus call (default peer RPC timeout)
	DefaultCatchUpWait     = time.Second      // how long a non-voter may take to reach the commit index
	// MinVoters is the default voter target once that many eligible servers exist, and the
	// fewest voters a decommission may leave (Config.MinVoters; odd).
	MinVoters = 3

	// DeadTargetAbortAfter: a move's target dead this long on the leader's own clock has its
	// target cleared (C4, docs/internals/moves.md §10).
	DeadTargetAbortAfter = 2 * time.Minute
	// MaxInFlightMoves bounds the moves with a target set at once (C5, docs/internals/moves.md §11).
	MaxInFlightMoves = 8
	// DefaultReplicaFailoverAfter: a replicated partition's leader silent this long on the
	// leader's clock loses its partitions to a live in-sync replica (C10,
	// docs/internals/replication.md §7). Shorter than DeadAfter, which stays the member verdict.
	DefaultReplicaFailoverAfter = 10 * time.Second
	// DefaultFailoverCheck: how often, between passes, the leader looks for a failed leader
	// of a replicated partition and runs C10 at once (checkFailover).
	DefaultFailoverCheck = time.Second
)

// Status is what a node reports about itself (NodeStatus, node RPC op 29, docs/internals/node-rpc.md §6) as far as the controller's duties need it.
type Status struct {
	AppliedIndex        uint64 // the node's applied Raft index
	CaughtUp            bool   // the node's own AppliedCaughtUp
	DrainingSeen        bool   // the node's own replica shows it draining
	RefusingProduce     bool   // its accept path answers client produce with 503
	AdmittedInflight    int64  // produce requests admitted and not yet answered
	IngressUndispatched int64  // ingress WAL records not yet committed at their owners
}

// ZeroBacklog reports docs/internals/node-rpc.md §6: the node has seen its drain, refuses produce, and
// holds neither an unanswered admitted produce nor an undispatched WAL record.
func (s Status) ZeroBacklog() bool {
	return s.DrainingSeen && s.RefusingProduce && s.AdmittedInflight == 0 && s.IngressUndispatched == 0
}

// Membership is the Raft configuration surface that target clearing and decommission use
// (C4, C6). *meta.Store implements it; tests put fakes behind it for multi-node behaviour
// (voter removal, leader transfer). Calls come from the controller goroutine and from the
// decommission API calls, and honour ctx.
type Membership interface {
	Configuration() ([]meta.RaftServer, error)
	RemoveServer(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id, addr string) error
}

// Prober asks a node about itself. It is implemented over node RPC by the server; calls come
// from the controller goroutine only and honour ctx (bounded by Config.ProbeTimeout).
type Prober interface {
	NodeStatus(ctx context.Context, m meta.Member) (Status, error)
}

// Config configures a Controller. Durations ≤ 0 take their defaults.
type Config struct {
	Store  *meta.Store
	NodeID string // this node's ID; "" → Store.NodeID()
	// Prober reports non-voters' applied indexes for promotion; nil → never promote.
	Prober Prober
	// SeedRoot seeds the root admin (C8). It is called on each pass while the metastore has
	// no seeded root user; nil → C8 is skipped. It must propose with the ctx it is given.
	SeedRoot func(ctx context.Context) error
	Logger   *slog.Logger // nil → discard
	// Audit receives the audit records of the membership changes the controller makes
	// (voter promotion and demotion, removal from the Raft configuration, member record
	// removal); nil → discard.
	Audit *audit.Logger
	// Membership reads and changes the Raft configuration for C4 and C6; nil → Store.
	Membership Membership
	// Metrics receives C7's gauges (narad_moves_blocked source_dead/target_dead,
	// narad_decommission_blocked) and C10/C11's narad_leader_elections_total; nil → none.
	Metrics *metrics.Metrics

	Tick            time.Duration // between passes while leader (10 s)
	Resync          time.Duration // leadership re-check (5 s)
	DeadAfter       time.Duration // heartbeat silence → dead (30 s)
	RemoveDeadAfter time.Duration // C9 (1 h)
	ProbeTimeout    time.Duration // one NodeStatus call (5 s)
	CatchUpWait     time.Duration // a non-voter's time to reach the commit index (1 s)
	// DeadTargetAbortAfter: C4 clears a move whose target has been dead this long (2 min).
	DeadTargetAbortAfter time.Duration
	MaxInFlightMoves     int // C5's budget of moves in flight (8)
	// ReplicaFailoverAfter: C10 elects a new leader for a replicated partition whose leader
	// has not heartbeated for this long, and C10/C11 elect only members that have (10 s).
	// It must exceed the heartbeat interval, or live leaders would be deposed between beats.
	ReplicaFailoverAfter time.Duration
	// FailoverCheck: between passes, C10 runs this often when an election is due (1 s).
	FailoverCheck time.Duration
	// ReReplicateAfter: C12 replaces the replicas of a member dead this long on this leader's
	// clock (docs/internals/replication.md §9); 0 = never (the exception to the defaults rule:
	// it is not defaulted here; the server passes --re-replicate-after).
	ReReplicateAfter time.Duration
	// BalanceReplicas runs C13, the replica balance of replicated partitions
	// (docs/internals/replication.md §9); false → C13 is skipped (not defaulted here: the
	// server sets it).
	BalanceReplicas bool
	// MinVoters is C3's voter target and C6's floor (min_voters): odd, default 3. Every node
	// should be given the same value; the leader's applies.
	MinVoters int
	Now       func() time.Time // the leader's clock; nil → time.Now (monotonic)
}

// Controller is the leader-only reconcile loop.
//
// Invariant: it proposes only while this node is the Raft leader, after a barrier in the
// same pass; dead_since entries are observations made on this node's clock during its
// current leadership and are dropped when leadership is lost, as are the decommission
// findings and the leader's move gauges (zeroed, series deleted). Configuration changes
// (voter removal, leadership transfer) go through Membership, and C6 makes them under the
// placement lock.
type Controller struct {
	cfg        Config
	store      *meta.Store
	membership Membership
	logger     *slog.Logger
	duties     []duty

	placement sync.Mutex // docs/internals/metastore.md §12; see PlacementLock

	mu          sync.Mutex
	leading     bool
	term        uint64               // the term this leadership started in
	leaderSince time.Time            // when this leadership started (Config.Now)
	deadSince   map[string]time.Time // member → first observed dead during this leadership
	noted       map[string]bool      // once-per-leadership log keys
	// decomBlocked is C6's latest finding: draining node → reasons its decommission cannot
	// progress ([] when none); only draining nodes have entries. Cleared with leadership.
	decomBlocked map[string][]string

	// exported is the narad_decommission_blocked series C7 has set (node → reasons), so the
	// ones that cleared can be deleted.
	expMu    sync.Mutex
	exported map[string]map[string]bool

	passes atomic.Uint64 // completed passes (tests, diagnostics)
	checks atomic.Uint64 // failover checks between passes (tests, diagnostics)
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.NodeID == "" && cfg.Store != nil {
		cfg.NodeID = cfg.Store.NodeID()
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{{&cfg.Tick, DefaultTick}, {&cfg.Resync, DefaultResync}, {&cfg.DeadAfter, DefaultDeadAfter},
		{&cfg.RemoveDeadAfter, DefaultRemoveDeadAfter}, {&cfg.ProbeTimeout, DefaultProbeTimeout},
		{&cfg.CatchUpWait, DefaultCatchUpWait}, {&cfg.DeadTargetAbortAfter, DeadTargetAbortAfter},
		{&cfg.ReplicaFailoverAfter, DefaultReplicaFailoverAfter}, {&cfg.FailoverCheck, DefaultFailoverCheck}}
	for _, x := range defaults {
		if *x.d <= 0 {
			*x.d = x.def
		}
	}
	if cfg.MaxInFlightMoves <= 0 {
		cfg.MaxInFlightMoves = MaxInFlightMoves
	}
	if cfg.MinVoters <= 0 {
		cfg.MinVoters = MinVoters
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{cfg: cfg, store: cfg.Store, membership: cfg.Membership,
		logger:    logger.With("component", "controller"),
		deadSince: map[string]time.Time{}, noted: map[string]bool{},
		decomBlocked: map[string][]string{}, exported: map[string]map[string]bool{}}
	if c.membership == nil && cfg.Store != nil {
		c.membership = cfg.Store
	}
	c.duties = c.dutyList()
	return c
}

// PlacementLock is the leader-side placement mutex (docs/internals/metastore.md §12). The controller
// holds it while a placement duty reads placement and proposes; the leader's topic create
// and partition increase take it around choosing and proposing their assignments.
func (c *Controller) PlacementLock() *sync.Mutex { return &c.placement }

// DeadSince reports when this leader first observed member id dead, on its own clock
// (docs/internals/metastore.md §11); false when it is not dead, not yet observed, or this node does not
// lead. Later duties (DeadTargetAbortAfter) use it so a new leader never acts on an
// inherited stamp.
func (c *Controller) DeadSince(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.deadSince[id]
	return t, ok
}

// Run runs the loop until ctx ends (then it returns nil): it follows the store's leadership
// (LeadershipChanges plus an IsLeader re-check every Resync), runs a pass at once on gaining
// leadership and then every Tick, and forgets its observations on losing it. Between passes
// it runs C10 alone every FailoverCheck when a failover is due (checkFailover).
func (c *Controller) Run(ctx context.Context) error {
	if c.store == nil {
		return errors.New("controller: no metastore")
	}
	changes, unsubscribe := c.store.LeadershipChanges()
	defer unsubscribe()
	resync := time.NewTicker(c.cfg.Resync)
	defer resync.Stop()
	tick := time.NewTicker(c.cfg.Tick)
	defer tick.Stop()
	check := time.NewTicker(c.cfg.FailoverCheck)
	defer check.Stop()
	defer c.setLeading(false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case v := <-changes:
			if c.setLeading(v && c.store.IsLeader()) {
				c.runPass(ctx)
				tick.Reset(c.cfg.Tick)
			}
		case <-resync.C:
			if c.setLeading(c.store.IsLeader()) {
				c.runPass(ctx)
				tick.Reset(c.cfg.Tick)
			}
		case <-tick.C:
			c.setLeading(c.store.IsLeader())
			if c.isLeading() {
				c.runPass(ctx)
			}
		case <-check.C:
			c.checkFailover(ctx)
		}
	}
}

// setLeading records the leadership state and reports whether leadership was just gained
// (including a new term noticed while leading: LeaderCh may have coalesced a loss).
func (c *Controller) setLeading(v bool) (gained bool) {
	gained, lost := c.switchLeading(v)
	if gained || lost {
		c.resetLeaderMetrics() // C7's gauges belong to one leadership
	}
	return gained
}

func (c *Controller) switchLeading(v bool) (gained, lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	term := uint64(0)
	if v {
		term = c.store.Term()
	}
	switch {
	case v && (!c.leading || term != c.term):
		c.leading, c.term, c.leaderSince = true, term, c.cfg.Now()
		clear(c.deadSince)
		clear(c.noted)
		clear(c.decomBlocked)
		c.logger.Info("controller leading", "term", term)
		return true, false
	case !v && c.leading:
		c.leading = false
		clear(c.deadSince)
		clear(c.noted)
		clear(c.decomBlocked)
		c.logger.Info("controller standing by")
		return false, true
	}
	return false, false
}

func (c *Controller) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// noteOnce reports whether key was not yet noted during this leadership (and notes it).
func (c *Controller) noteOnce(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noted[key] {
		return false
	}
	c.noted[key] = true
	return true
}

// forgetNote clears key so the condition logs again if it recurs.
func (c *Controller) forgetNote(key string) {
	c.mu.Lock()
	delete(c.noted, key)
	c.mu.Unlock()
}

// stopsPass reports an error after which the rest of the pass is pointless: leadership is
// gone or the metastore is closing or unresponsive.
func stopsPass(err error) bool {
	return errors.Is(err, meta.ErrNoLeader) || errors.Is(err, meta.ErrNotLeader) ||
		errors.Is(err, meta.ErrClosed) || errors.Is(err, meta.ErrTimeout) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// audit records a membership change the controller made on member id: ok when err is nil,
// else unknown (a timed-out configuration change may still commit).
func (c *Controller) audit(ctx context.Context, event, id string, err error, attrs ...any) {
	outcome := audit.OK
	if err != nil {
		outcome, attrs = audit.Unknown, append(attrs, "err", err)
	}
	c.cfg.Audit.Record(ctx, audit.Event{Name: event, Actor: audit.ActorController, Target: id, Outcome: outcome, Attrs: attrs})
}
