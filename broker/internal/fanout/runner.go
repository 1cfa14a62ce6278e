package fanout

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoHost: NewRunner was given a Config without a Host.
var ErrNoHost = errors.New("fanout: config has no host")

// Runner is the fan-out reconciler of one node (R-REC): every tick it compares the desired
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

	mu      sync.Mutex
	slots   map[slot]*running         // running or stopping cursors, by cursor file
	senders map[linkKey]*sharedSender // one Sender (one HTTP client) per remote link
	wg      sync.WaitGroup

	exited atomic.Bool // a cursor exited since the last full pass
	rr     sync.Map    // child → *atomic.Uint32, keyless round-robin per child topic

	// Tick state, owned by the Run goroutine.
	ticks       int // caught-up ticks, skipped ones included (sweep cadence)
	lastVersion uint64
	lastFull    time.Time
	haveFull    bool
	forceNext   bool
	wasCaughtUp bool

	passes atomic.Int64 // full passes run (tests)
	skips  atomic.Int64 // ticks that skipped the pass (tests)
	sweeps atomic.Int64 // orphan sweeps run (tests)
}

// running is one cursor goroutine.
type running struct {
	key    key
	cur    *cursor
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine returned
	stop   bool          // cancelled by the Runner
}

// NewRunner returns a Runner; Run starts it.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Host == nil {
		return nil, ErrNoHost
	}
	cfg = cfg.withDefaults()
	return &Runner{cfg: cfg, host: cfg.Host, log: cfg.Logger, slots: map[slot]*running{},
		senders: map[linkKey]*sharedSender{}}, nil
}

// Run reconciles every Tick until ctx ends, then cancels every cursor and returns once all of
// them have exited.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Tick)
	defer t.Stop()
	for {
		r.tick(ctx)
		select {
		case <-ctx.Done():
			r.stopAll()
			return nil
		case <-t.C:
		}
	}
}

// tick runs one reconcile tick: a full pass unless the skip rule applies (R-REC 4), and the
// orphan sweep on every SweepEveryTicks-th caught-up tick (R-REC 6).
func (r *Runner) tick(ctx context.Context) {
	caughtUp := r.host.CaughtUp()
	sweep := false
	if caughtUp {
		r.ticks++
		sweep = r.ticks%r.cfg.SweepEveryTicks == 0
	}
	now := time.Now()
	version := r.host.LatestDomainVersion()
	force := !r.haveFull || r.forceNext || r.exited.Load() || sweep ||
		(caughtUp && !r.wasCaughtUp) || now.Sub(r.lastFull) >= r.cfg.ForcedPassEvery
	r.wasCaughtUp = caughtUp
	if !force && version == r.lastVersion {
		r.skips.Add(1)
		return
	}
	r.exited.Store(false) // before reading the desired set: a later exit forces the next pass
	want, ok := r.pass(ctx, caughtUp)
	r.passes.Add(1)
	r.haveFull, r.lastVersion, r.lastFull, r.forceNext = true, version, now, !ok
	if sweep && want != nil {
		r.sweep(ctx, want)
		r.sweeps.Add(1)
	}
}

// pass is one full comparison. It returns the desired cursor files (nil when the desired set
// was incomplete) and whether the pass finished its work (else the next tick forces one).
func (r *Runner) pass(ctx context.Context, caughtUp bool) (map[slot]bool, bool) {
	ds, complete := r.host.DesiredCursors()
	want := make(map[key]Desired, len(ds))
	for _, d := range ds {
		want[d.key()] = d
	}
	ok := complete
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, run := range r.slots {
		select {
		case <-run.done:
			delete(r.slots, s)
			continue
		default:
		}
		if _, in := want[run.key]; !in && complete && !run.stop {
			run.stop = true
			run.cancel()
		}
		if run.stop {
			ok = false // still draining: check again next tick
		}
	}
	for k, d := range want {
		run, busy := r.slots[k.slot()]
		switch {
		case busy && run.key == k:
		case busy:
			ok = false // the old epoch's cursor is still draining; start after it exits
		case !caughtUp:
			// R-REC 3: start only while caught up; the caught-up edge forces a pass.
		default:
			r.startLocked(ctx, d)
		}
	}
	if !complete {
		return nil, false
	}
	slots := make(map[slot]bool, len(want))
	for k := range want {
		slots[k.slot()] = true
	}
	return slots, ok
}

// startLocked starts a cursor for d. Caller holds r.mu.
func (r *Runner) startLocked(ctx context.Context, d Desired) {
	cctx, cancel := context.WithCancel(ctx)
	run := &running{key: d.key(), cancel: cancel, done: make(chan struct{})}
	r.slots[run.key.slot()] = run
	rr, _ := r.rr.LoadOrStore(d.Child, new(atomic.Uint32))
	c := &cursor{
		cfg: r.cfg, host: r.host, obs: r.cfg.Observer, d: d, rr: rr.(*atomic.Uint32),
		log: r.log.With("parent", d.Parent, "partition", d.Partition, "child", d.Child, "epoch", d.Epoch),
	}
	run.cur = c
	if d.Remote != nil {
		c.sender = r.acquireSenderLocked(d)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if d.Remote != nil {
			defer r.releaseSender(d)
		}
		defer r.exited.Store(true) // after done is closed: the forced pass sees the slot free
		defer close(run.done)
		defer cancel()
		err := c.run(cctx)
		switch {
		case err == nil:
		case errors.Is(err, ErrUnconfirmed):
			c.log.Warn("fanout cursor deferred: anchor not confirmed by the leader", "err", err)
		case errors.Is(err, errLinkGone):
			c.log.Info("fanout cursor stopped: link gone")
		default:
			c.log.Warn("fanout cursor stopped", "err", err)
		}
	}()
}

// CursorStatus reports the live state of the cursor of (parent, partition, child) on this
// node, for the children listing (spec §2.13): stalled while it retries a child partition that
// keeps failing, and a delay child's due lag in seconds. A node without such a cursor reports
// zero values.
func (r *Runner) CursorStatus(parent string, partition int, child string) (stalled bool, dueLagSeconds float64) {
	r.mu.Lock()
	run, ok := r.slots[slot{parent: parent, partition: partition, child: child}]
	r.mu.Unlock()
	if !ok || run.cur == nil {
		return false, 0
	}
	return run.cur.stalled.Load(), math.Float64frombits(run.cur.dueLag.Load())
}

// busy reports whether a cursor (running or draining) owns the cursor file s.
func (r *Runner) busy(s slot) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.slots[s]
	if !ok {
		return false
	}
	select {
	case <-run.done:
		return false
	default:
		return true
	}
}

// stopAll cancels every cursor and waits for all of them to exit.
func (r *Runner) stopAll() {
	r.mu.Lock()
	for _, run := range r.slots {
		run.stop = true
		run.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	clear(r.slots)
	r.mu.Unlock()
}

// cursorCount returns the number of live cursor goroutines (tests, diagnostics).
func (r *Runner) cursorCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, run := range r.slots {
		select {
		case <-run.done:
		default:
			n++
		}
	}
	return n
}
