package fanout

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/reconcile"
)

// ErrNoHost: NewRunner was given a Config without a Host.
var ErrNoHost = errors.New("fanout: config has no host")

// Runner is the fan-out reconciler of one node (docs/internals/fanout.md §4): every tick it compares the desired
// cursors (Host.DesiredCursors) with the running ones, starts the missing ones while the
// replica is caught up and stops those no longer desired.
//
// Invariant: at most one cursor goroutine per cursor file (parent, partition, child) exists at
// a time — a replacement (re-attach under a new epoch) starts only after the cancelled cursor has
// exited — so two cursors never write the same file.
type Runner struct {
	cfg  Config
	host Host
	log  *slog.Logger

	cursors *reconcile.Workers[slot, *cursor] // running or stopping cursors, by cursor file
	pace    *reconcile.Pacer

	mu      sync.Mutex                // guards senders
	senders map[linkKey]*sharedSender // one Sender (one HTTP client) per remote link

	exited atomic.Bool // a cursor exited since the last full pass
	rr     sync.Map    // child → *atomic.Uint32, keyless round-robin per child topic

	// Tick state, owned by the Run goroutine.
	ticks       int // caught-up ticks, skipped ones included (sweep cadence)
	wasCaughtUp bool

	sweeps atomic.Int64 // orphan sweeps run (tests)
}

// NewRunner returns a Runner; Run starts it.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Host == nil {
		return nil, ErrNoHost
	}
	cfg = cfg.withDefaults()
	r := &Runner{cfg: cfg, host: cfg.Host, log: cfg.Logger, senders: map[linkKey]*sharedSender{},
		pace: &reconcile.Pacer{Tick: cfg.Tick, FullPassEvery: cfg.ForcedPassEvery, Now: time.Now}}
	// After the cursor's slot reads free: the forced pass it causes can start a replacement.
	r.cursors = reconcile.NewWorkers[slot, *cursor](func() { r.exited.Store(true) })
	return r, nil
}

// Run reconciles every Tick until ctx ends, then cancels every cursor and returns once all of
// them have exited.
func (r *Runner) Run(ctx context.Context) error {
	r.pace.Run(ctx, r.tick)
	r.stopAll()
	return nil
}

// tick runs one reconcile tick: a full pass unless the skip rule applies (docs/internals/fanout.md §4 item 4), and the
// orphan sweep on every SweepEveryTicks-th caught-up tick (docs/internals/fanout.md §4 item 6).
func (r *Runner) tick(ctx context.Context) {
	caughtUp := r.host.CaughtUp()
	sweep := false
	if caughtUp {
		r.ticks++
		sweep = r.ticks%r.cfg.SweepEveryTicks == 0
	}
	force := r.exited.Load() || sweep || (caughtUp && !r.wasCaughtUp)
	r.wasCaughtUp = caughtUp
	var want map[slot]bool
	ran := r.pace.Step(r.host.LatestDomainVersion(), force, func() bool {
		r.exited.Store(false) // before reading the desired set: a later exit forces the next pass
		var ok bool
		want, ok = r.pass(ctx, caughtUp)
		return ok
	})
	if ran && sweep && want != nil {
		r.sweep(ctx, want)
		r.sweeps.Add(1)
	}
}

// pass is one full comparison. It returns the desired cursor files (nil when the desired set
// was incomplete) and whether the pass finished its work (else the next tick forces one). A
// pass that could not start cursors because the replica is not caught up counts as finished:
// the caught-up edge forces the next pass (docs/internals/fanout.md §4 item 3).
func (r *Runner) pass(ctx context.Context, caughtUp bool) (map[slot]bool, bool) {
	ds, complete := r.host.DesiredCursors()
	want := make(map[slot]Desired, len(ds))
	for _, d := range ds {
		want[d.key().slot()] = d
	}
	res := reconcile.Reconcile(ctx, r.cursors, reconcile.Pass[slot, Desired, *cursor]{
		Want: want, Complete: complete, CaughtUp: caughtUp,
		// A re-attach under a new epoch (or a new delay) is another cursor of the same file:
		// it starts after the old epoch's cursor has exited.
		Same:  func(c *cursor, d Desired) bool { return c.d.key() == d.key() },
		Start: func(_ slot, d Desired) (*cursor, func(context.Context)) { return r.newCursor(d) },
	})
	if !complete {
		return nil, false
	}
	slots := make(map[slot]bool, len(want))
	for s := range want {
		slots[s] = true
	}
	return slots, !res.Draining
}

// newCursor builds the cursor of d and the body of its goroutine.
func (r *Runner) newCursor(d Desired) (*cursor, func(context.Context)) {
	rr, _ := r.rr.LoadOrStore(d.Child, new(atomic.Uint32))
	c := &cursor{
		cfg: r.cfg, host: r.host, obs: r.cfg.Observer, d: d, rr: rr.(*atomic.Uint32),
		log: r.log.With("parent", d.Parent, "partition", d.Partition, "child", d.Child, "epoch", d.Epoch),
	}
	if d.Remote != nil {
		r.mu.Lock()
		c.sender = r.acquireSenderLocked(d)
		r.mu.Unlock()
	}
	return c, func(ctx context.Context) {
		if d.Remote != nil {
			defer r.releaseSender(d)
		}
		err := c.run(ctx)
		switch {
		case err == nil:
		case errors.Is(err, ErrUnconfirmed):
			c.log.Warn("fanout cursor deferred: anchor not confirmed by the leader", "err", err)
		case errors.Is(err, errLinkGone):
			c.log.Info("fanout cursor stopped: link gone")
		default:
			c.log.Warn("fanout cursor stopped", "err", err)
		}
	}
}

// CursorStatus reports the live state of the cursor of (parent, partition, child) on this
// node, for the children listing (docs/internals/http-api.md §2.13): stalled while it retries a child partition that
// keeps failing, and a delay child's due lag in seconds. A node without such a cursor reports
// zero values.
func (r *Runner) CursorStatus(parent string, partition int, child string) (stalled bool, dueLagSeconds float64) {
	c, ok, _ := r.cursors.Get(slot{parent: parent, partition: partition, child: child})
	if !ok {
		return false, 0
	}
	return c.stalled.Load(), math.Float64frombits(c.dueLag.Load())
}

// busy reports whether a cursor (running or draining) owns the cursor file s.
func (r *Runner) busy(s slot) bool {
	_, _, live := r.cursors.Get(s)
	return live
}

// stopAll cancels every cursor and waits for all of them to exit.
func (r *Runner) stopAll() { r.cursors.StopAll() }

// cursorCount returns the number of live cursor goroutines (tests, diagnostics).
func (r *Runner) cursorCount() int { return r.cursors.Live() }
