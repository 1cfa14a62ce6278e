package move

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"narad.dev/broker/internal/reconcile"
	"narad.dev/broker/internal/transfer"
)

// ErrMisconfigured: NewRunner's config lacks a Store, Source or Local; Run returns it.
var ErrMisconfigured = errors.New("move: runner config lacks a store, source or local engine")

// topicsPage is how many topics one metastore read of a pass returns.
const topicsPage = 256

// key names one move worker (docs/internals/moves.md §2 rule 1): a re-plan to another target is a
// different worker. On one node target is always the node itself.
type key struct {
	topic     string
	partition int
	target    string
}

// Runner is the move runner of one node (docs/internals/moves.md §2): every tick it compares the
// moves targeted at this node with its running workers, starts the missing ones while the
// replica is caught up and cancels those no longer desired; every SweepEveryTicks-th tick it
// runs the stale-copy sweep.
//
// Invariant: at most one worker per partition exists at a time — a replacement starts only
// after the cancelled worker has exited (and disposed of its staging copy) — so two workers
// never share a staging directory.
type Runner struct {
	cfg RunnerConfig
	log *slog.Logger

	workers *reconcile.Workers[key, *worker] // running or stopping
	pace    *reconcile.Pacer
	sweepWG sync.WaitGroup // the sweep goroutine

	exited   atomic.Bool // a worker exited since the last full pass
	sweeping atomic.Bool // a sweep goroutine is running
	stopped  atomic.Bool // the runner is stopping: workers keep their blocked-copy notes

	// Tick state, owned by the Run goroutine.
	ticks        int
	sweepPending bool
	notesPruned  bool // the first caught-up pass pruned the blocked-copy notes

	sweeps atomic.Int64 // sweeps started (tests)
}

// NewRunner returns a Runner; Run starts it. Zero durations and counts take their defaults.
func NewRunner(cfg RunnerConfig) *Runner {
	cfg = cfg.withDefaults()
	r := &Runner{cfg: cfg, log: cfg.Logger,
		pace: &reconcile.Pacer{Tick: cfg.Tick, FullPassEvery: cfg.FullPassEvery, Now: cfg.Now}}
	r.workers = reconcile.NewWorkers[key, *worker](r.workerExited)
	return r
}

// Run reconciles every Tick until ctx ends, then cancels every worker and returns once all
// of them (and a running sweep) have exited.
func (r *Runner) Run(ctx context.Context) error {
	if r.cfg.Store == nil || r.cfg.Source == nil || r.cfg.Local == nil {
		return ErrMisconfigured
	}
	r.pace.Run(ctx, r.tick)
	r.stopAll()
	return nil
}

// tick runs one reconcile tick: the sweep on its own cadence (skipped ticks count), then a
// full pass unless the skip rule applies (docs/internals/moves.md §2 rule 2).
func (r *Runner) tick(ctx context.Context) {
	caughtUp := r.cfg.Store.AppliedCaughtUp()
	if r.ticks%r.cfg.SweepEveryTicks == 0 {
		r.sweepPending = true
	}
	r.ticks++
	if r.sweepPending && caughtUp {
		r.sweepPending = false
		r.startSweep(ctx)
	}
	r.pace.Step(r.cfg.Store.LatestDomainVersion(), r.exited.Load(), func() bool {
		r.exited.Store(false) // before reading the desired set: a later exit forces the next pass
		return r.pass(ctx, caughtUp)
	})
}

// want is one desired worker: the move's source and the topic incarnation it moves.
type want struct {
	source      string
	incarnation string
}

// desired returns the moves targeted at this node, by worker key.
func (r *Runner) desired() map[key]want {
	out := map[key]want{}
	after := ""
	for {
		ts := r.cfg.Store.Topics(after, topicsPage)
		for _, t := range ts {
			for _, a := range r.cfg.Store.Assignments(t.Name) {
				if a.Target == r.cfg.NodeID && a.Owner != r.cfg.NodeID {
					out[key{topic: a.Topic, partition: a.Partition, target: a.Target}] = want{source: a.Owner, incarnation: t.Incarnation}
				}
			}
		}
		if len(ts) < topicsPage {
			return out
		}
		after = ts[len(ts)-1].Name
	}
}

// pass is one full comparison; it reports whether it finished its work (else the next tick
// forces another). Unlike the fan-out runner's, a pass that could not start a worker because
// the replica is not caught up is unfinished (docs/internals/moves.md §2 rule 3: the next tick reads
// again).
func (r *Runner) pass(ctx context.Context, caughtUp bool) bool {
	desired := r.desired()
	if caughtUp && !r.notesPruned {
		r.notesPruned = true
		// Every staging directory (and its note) sits in the same parent (.moves; see datadir).
		pruneUnverifiableNotes(filepath.Dir(r.cfg.Local.StagingDir("x", 0)), r.cfg.NodeID, desired)
	}
	res := reconcile.Reconcile(ctx, r.workers, reconcile.Pass[key, want, *worker]{
		Want: desired, Complete: true, CaughtUp: caughtUp,
		// No longer targeted here, or the partition changed hands (or the topic was recreated)
		// under the worker: stop it and start afresh once it has exited.
		Same: func(w *worker, d want) bool { return d.source == w.source && d.incarnation == w.incarnation },
		Start: func(k key, d want) (*worker, func(context.Context)) {
			w := newWorker(r, k, d)
			return w, w.run
		},
	})
	r.setInflight()
	return !res.Draining && !res.Deferred
}

func (r *Runner) workerExited() {
	r.exited.Store(true)
	r.setInflight()
}

// setInflight publishes narad_moves_inflight.
func (r *Runner) setInflight() {
	if r.cfg.Metrics == nil {
		return
	}
	r.cfg.Metrics.MovesInflight.Set(float64(r.workers.Live()))
}

// startSweep runs the stale-copy sweep on its own goroutine unless one is still running.
func (r *Runner) startSweep(ctx context.Context) {
	if r.cfg.Sweeper == nil || !r.sweeping.CompareAndSwap(false, true) {
		return
	}
	r.sweeps.Add(1)
	r.sweepWG.Add(1)
	go func() {
		defer r.sweepWG.Done()
		defer r.sweeping.Store(false)
		if err := r.cfg.Sweeper.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("move: stale-copy sweep failed", "err", err)
		}
	}()
}

// stopAll cancels every worker and waits for all of them and the sweep to exit.
func (r *Runner) stopAll() {
	r.stopped.Store(true)
	r.workers.StopAll()
	r.sweepWG.Wait()
	r.setInflight()
}

// Report returns this node's own report of the move of topic/p (node RPC op 30), false
// when no worker runs for it here.
func (r *Runner) Report(topic string, p int) (transfer.Report, bool) {
	w, _, live := r.workers.Get(key{topic: topic, partition: p, target: r.cfg.NodeID})
	if !live {
		return transfer.Report{}, false
	}
	return w.report(), true
}

// Workers returns the number of running workers.
func (r *Runner) Workers() int { return r.workers.Live() }
