// Package engine is the broker's service layer on one node: it implements the service
// interfaces api serves (topics, produce, consume, users, cluster reads) on top of the
// metastore (meta), the ingress WAL (wal), the partition registry and produce gate
// (partition) and the consume engine (consume), and it adapts the dispatcher's Topology and
// Committer to them. It also holds, for now, the node-local filesystem steps of partition
// moves: the destination's staging and install (install.go, transfer.Local) and the stale-copy
// sweep's guarded quarantine and reclaim (reclaim.go, quarantine.go).
//
// Data flows one way: api → engine → {meta, wal, partition, consume}; partition → log. The
// engine owns every long-running loop it starts (expiry purger, offset committer, idle
// eviction, retention, metrics poller, sweeps); Run stops them all when its context ends.
// The open partition logs belong to partition.Registry (the field parts): the engine reaches
// a log only through Get (opens and stamps access), Peek or Snapshot (neither), and commits only
// through Registry.Commit, which holds the gate and the produce lock.
//
// Fan-out lives in package fanout (docs/internals/fanout.md §15): the engine gives it what only
// the engine has through fanout.Node (fanoutNode in fanout.go: replica view, partition
// registry, HWM reads, the child commit through the produce path) and serves the fan-out and
// remote-children endpoints by delegating to fanout.Links; the runner is bound by BindFanout.
//
// The source side of partition moves lives in package move/source (docs/internals/moves.md
// §3, §4): the engine builds it over its partition registry and replica view (movesource.go)
// and serves node RPC ops 22–24 by delegating to it.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/credseal"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/hostlist"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/move/source"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/replication"
	"narad.dev/broker/internal/schema"
	"narad.dev/broker/internal/wal"
)

// Config holds the engine's settings (units are in the names) and its collaborators, all
// fixed at construction; the fan-out runner, built over the engine, is bound by BindFanout.
type Config struct {
	NodeID            string
	DataDir           string // <data_dir>; partitions live under <data_dir>/topics
	Codec             string // none | zstd
	CompressionLevel  string
	DefaultPartitions int
	// DefaultReplicationFactor is a new topic's replication factor when its create does not
	// say (--default-replication-factor); 0 or 1: unreplicated.
	DefaultReplicationFactor int
	// DefaultMinInsyncReplicas is a new replicated topic's min_insync_replicas when its create
	// does not say (--default-min-insync-replicas), capped at its replication factor; 0: the
	// stored default, min(2, R).
	DefaultMinInsyncReplicas int
	MaxPartitions            int
	DefaultRetentionMs       int64
	IdleLogEviction          time.Duration // 0 disables
	SegmentBytes             int64         // 0 = log default (64 MiB); tests lower it
	SecurityEnabled          bool
	Logger                   *slog.Logger
	Metrics                  *metrics.Metrics
	Now                      func() time.Time
	// RemoteAllowedHosts is --remote-allowed-hosts: remote-link targets off the list are
	// refused at attach and never contacted by a sender. The zero list allows every host.
	RemoteAllowedHosts hostlist.List
	// LinkKey seals remote-link passwords before they are proposed and opens them for this
	// node's senders (derived from the configured cluster secret). nil: no cluster secret was
	// configured; an attach with a password is refused (docs/fanout.md, Remote children).
	LinkKey *credseal.Key
	// MaxInflightAnswerBytes is the node's budget of key and payload bytes held in consume and
	// replay answers at once (--max-inflight-answer-bytes); not positive →
	// DefaultMaxInflightAnswerBytes.
	MaxInflightAnswerBytes int64
	// ReplicaLagMax is how long an in-sync follower may stay behind before its leader drops
	// it from the ISR; 0 → replication.DefaultReplicaLagMax (tests lower it).
	ReplicaLagMax time.Duration

	// The engine's collaborators, fixed at construction.

	// Peers is the node RPC client. nil: the engine serves only what this node owns and
	// leads (a node that never talks to peers; most tests).
	Peers Peers
	// PlacementLock is the controller's placement lock (docs/internals/metastore.md §12), held by the
	// leader while it places a new topic's or a partition increase's partitions. nil: a lock
	// of the engine's own (a node without a controller).
	PlacementLock sync.Locker
	// RemoteHTTPClient is the HTTP client of the remote-link attach-time target checks
	// (tests); nil → a client per check.
	RemoteHTTPClient *http.Client
}

// Engine is the node's broker runtime. All methods are safe for concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics.Metrics
	meta    *meta.Store
	view    *metaView // cached hot-path reads of meta
	wal     appender
	schemas *schema.Cache
	parts   *partition.Registry
	offsets *consume.Committer
	now     func() time.Time
	answers *answerBudget // bytes held in consume and replay answers (answers.go)

	// draining is the local decommission flag; admitted counts produces between admission
	// and answer (docs/internals/produce-path.md §2 step 1: increment before reading the flag).
	draining atomic.Bool
	admitted atomic.Int64

	rrMu sync.Mutex
	rr   map[string]*atomic.Uint32 // keyless round-robin counter per topic

	floorMu sync.Mutex
	floor   map[partKey]int64 // newest commit time per partition in this process (ms)

	ready atomic.Bool
	// markerlessSwept: a sweep that may remove marker-less topic dirs (the startup sweep, or
	// the first caught-up running sweep when the startup one was skipped) has run.
	markerlessSwept atomic.Bool
	lastCaughtUp    atomic.Int64 // unix nanos of the last AppliedCaughtUp success (readiness)
	shuttingDown    atomic.Bool
	createGate      chan struct{} // closed once creates may proceed (boot order step 7)
	gateOnce        sync.Once
	undispatched    atomic.Pointer[func() uint64] // set by DispatcherStarted; read by node RPCs already serving

	peers         Peers                // Config.Peers
	placementLock sync.Locker          // Config.PlacementLock, or a lock of its own
	notices       noticeHub            // local "reservable" notices for WatchCommits streams
	remote        remoteWake           // wakes long-polls parked on remote owners' partitions
	probeSuspects suspects             // peers benched after a failed queue probe
	drained       drainedOwners        // remote owners a queue probe last found empty
	parked        sync.Map             // topic → *atomic.Int32: queue long-polls parked here
	fan           *fanout.Links        // the links service over fanoutNode; its runner bound by BindFanout
	src           *source.Source       // the move source side (ops 22–24) over parts and view
	eventTasks    taskGroup            // goroutines started by OnMetaEvent; closed when Run ends
	host          *replica.Host        // this node's leaderships of replicated partitions
	repl          *replication.Manager // takes up leaderships, runs follower loops (replication.go)
	slotsMu       sync.Mutex
	slots         slotCache // replicatedSlots' last list

	replSeries replicationSeries // the replication gauges' series (replication_metrics.go)

	quarantineListed atomic.Bool // the startup listing of quarantined copies ran (tests wait on it)
}

// layout is the node's data directory (datadir): every path under it is built there.
func (e *Engine) layout() datadir.Layout { return datadir.New(e.cfg.DataDir) }

type partKey struct {
	topic string
	p     int
}

// appender is the ingress WAL's accept side (Ingress in production).
type appender interface {
	Append(ctx context.Context, recs ...wal.Record) (uint64, error)
}

// New builds an engine over an open metastore and the node's ingress. Call Run to start its
// loops.
func New(cfg Config, store *meta.Store, w appender) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DefaultPartitions == 0 {
		cfg.DefaultPartitions = meta.DefaultPartitions
	}
	if cfg.MaxPartitions == 0 {
		cfg.MaxPartitions = meta.MaxPartitions
	}
	e := &Engine{
		cfg:        cfg,
		log:        cfg.Logger,
		m:          cfg.Metrics,
		meta:       store,
		view:       newMetaView(store),
		wal:        w,
		schemas:    schema.NewCache(1024),
		now:        cfg.Now,
		rr:         map[string]*atomic.Uint32{},
		floor:      map[partKey]int64{},
		createGate: make(chan struct{}),
		peers:      cfg.Peers,
		answers:    newAnswerBudget(cfg.MaxInflightAnswerBytes),
	}
	e.offsets = consume.NewCommitter(consume.CommitterOptions{Logger: cfg.Logger, Now: cfg.Now})
	e.parts = partition.New(partition.Deps{
		Layout:           e.layout(),
		Codec:            cfg.Codec,
		CompressionLevel: cfg.CompressionLevel,
		SegmentBytes:     cfg.SegmentBytes,
		IdleLogEviction:  cfg.IdleLogEviction,
		Logger:           cfg.Logger,
		Metrics:          cfg.Metrics,
		Now:              cfg.Now,
		Offsets:          e.offsets,
		Topic:            e.view.Topic,
		Owns:             e.owns,
		Replicates:       e.replicates,
		Leader:           func(topic string, p int) (*replica.Leader, bool) { return e.host.Leader(topic, p) },
		RaiseFloor:       e.raiseFloor,
		Taker:            e.localTaker,
		Notify:           e.notifyPeers,
	})
	e.placementLock = cfg.PlacementLock
	if e.placementLock == nil {
		e.placementLock = &sync.Mutex{}
	}
	e.newReplication()
	e.remote.init()
	e.fan = newFanoutLinks(e)
	e.src = newMoveSource(e)
	return e
}

// OpenCreateGate lets topic creates proceed (boot order step 7).
func (e *Engine) OpenCreateGate() { e.gateOnce.Do(func() { close(e.createGate) }) }

// SetReady marks the node ready (or not) for /readyz.
func (e *Engine) SetReady(ok bool) {
	if ok {
		e.refreshDraining() // the replica is current: a draining node refuses produce from the start
	}
	e.ready.Store(ok)
}

// BeginShutdown marks the start of the graceful shutdown: /healthz answers 503 from now on.
func (e *Engine) BeginShutdown() { e.shuttingDown.Store(true) }

// DispatcherStarted records that the ingress dispatcher runs now; backlog reports its backlog
// (NodeStatus, metrics). Until it is called, Undispatched is 0. It is runtime state, not a
// dependency: the ingress exists before the engine, but its backlog counts only once the
// dispatcher runs.
func (e *Engine) DispatcherStarted(backlog func() uint64) { e.undispatched.Store(&backlog) }

// SetDraining sets the local draining flag (decommission).
func (e *Engine) SetDraining(on bool) { e.draining.Store(on) }

// refreshDraining copies this node's drain flag from its own replica into the accept path:
// a node marked for decommission refuses client produce with 503 (docs/internals/moves.md §12.2), also
// after a restart, since the flag survives re-registration. Called on member events for this
// node, at start and every second.
func (e *Engine) refreshDraining() {
	if e.meta == nil {
		return
	}
	on := e.DrainingSeen()
	if e.draining.Swap(on) != on {
		e.log.Info("drain flag changed: client produce is "+map[bool]string{true: "refused", false: "accepted"}[on], "draining", on)
	}
}

// AdmittedInflight is the number of produces admitted and not yet answered.
func (e *Engine) AdmittedInflight() int64 { return e.admitted.Load() }

// Ready implements api.Backend.
func (e *Engine) Ready() error {
	if e.shuttingDown.Load() {
		return errors.New("shutting down")
	}
	if !e.ready.Load() {
		return errors.New("starting")
	}
	if !e.caughtUpForReadiness() {
		return errors.New("metastore replica not caught up")
	}
	if h, ok := e.wal.(interface{ Healthy() bool }); ok && !h.Healthy() {
		return errors.New("ingress wal unavailable (disk full or I/O error); retrying")
	}
	return nil
}

// readyGrace is how long readiness tolerates AppliedCaughtUp being false since it last held.
// The strict check is false for the microseconds an entry spends being applied (a heartbeat
// every 5 s), which must not flap /readyz; a replica that really fell behind (lost leader
// contact for 5 s, or is replaying) stays false and turns readiness off after this grace.
const readyGrace = 2 * time.Second

// caughtUpForReadiness is AppliedCaughtUp debounced by readyGrace. Before the first success
// (boot) it is false. Destructive steps keep using the strict AppliedCaughtUp.
func (e *Engine) caughtUpForReadiness() bool {
	now := time.Now().UnixNano()
	if e.meta.AppliedCaughtUp() {
		e.lastCaughtUp.Store(now)
		return true
	}
	last := e.lastCaughtUp.Load()
	return last != 0 && time.Duration(now-last) < readyGrace
}

// ReplicaCurrent implements api.ReplicaStatus: the node finished booting and its metadata
// replica is caught up (debounced like readiness).
func (e *Engine) ReplicaCurrent() bool { return e.ready.Load() && e.caughtUpForReadiness() }

// ShuttingDown implements api.Backend.
func (e *Engine) ShuttingDown() bool { return e.shuttingDown.Load() }

// Run starts the engine's background loops and blocks until ctx ends, then waits for the
// loops and for the goroutines metastore events started, closes every open partition log
// cleanly (CLEAN hwm) and flushes consumer offsets.
func (e *Engine) Run(ctx context.Context) error {
	e.refreshDraining()
	var wg sync.WaitGroup
	loops := []func(context.Context){
		func(ctx context.Context) { _ = e.offsets.Run(ctx) },
		e.purgeLoop,
		e.evictLoop,
		e.retentionLoop,
		e.pollLoop,
		e.sweepLoop,
		e.fan.ResealRemoteLinks,
		func(ctx context.Context) { _ = e.repl.Run(ctx) },
	}
	for _, loop := range loops {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	<-ctx.Done()
	wg.Wait()
	e.eventTasks.close()
	e.parts.CloseAll()
	return e.offsets.FlushAll()
}

// OnMetaEvent is installed as the metastore's OnApply hook. It runs on the FSM goroutine and
// must not block: the work (purging a deleted topic's local data, for one) runs on goroutines
// of e.eventTasks, which Run waits for when it ends; events after that start nothing.
func (e *Engine) OnMetaEvent(ev meta.Event) {
	if ev.Op != meta.OpMemberHeartbeat {
		e.repl.Kick() // an assignment or topic may have changed (docs/internals/replication.md §4)
	}
	switch {
	case ev.Op == meta.OpDeleteTopic:
		e.eventTasks.goTask(func(context.Context) { e.purgeTopic(ev.Topic, ev.Incarnation) })
	case ev.Op == meta.OpRestore || (ev.Member == e.cfg.NodeID &&
		(ev.Op == meta.OpSetMemberDraining || ev.Op == meta.OpMemberJoin || ev.Op == meta.OpRemoveMember)):
		e.eventTasks.goTask(func(context.Context) { e.refreshDraining() })
	case ev.Op == meta.OpCompleteMove && ev.Partition >= 0 && ev.Member != e.cfg.NodeID:
		// The flip applied: stop serving the partition now (ending its freeze), not on the
		// next 1 s ownership scan.
		e.eventTasks.goTask(func(context.Context) { e.parts.CloseIfLost(ev.Topic, ev.Partition) })
	}
}

// MemberClusterAddr returns member id's cluster address as the local replica has it.
func (e *Engine) MemberClusterAddr(id string) (string, bool) {
	m, ok := e.view.Member(id)
	return m.ClusterAddr, ok && m.ClusterAddr != ""
}

// DrainingSeen reports whether this node's own replica shows it draining (NodeStatus).
func (e *Engine) DrainingSeen() bool {
	m, ok := e.view.Member(e.cfg.NodeID)
	return ok && m.Draining
}

// RefusingProduce reports whether the accept path now answers 503 for draining.
func (e *Engine) RefusingProduce() bool { return e.draining.Load() }

// Undispatched is the ingress backlog (docs/internals/produce-path.md §10); 0 before the
// dispatcher starts.
func (e *Engine) Undispatched() uint64 {
	if f := e.undispatched.Load(); f != nil {
		return (*f)()
	}
	return 0
}
