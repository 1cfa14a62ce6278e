// Package dispatch is the node's produce dispatcher (docs/internals/produce-path.md §4): it reads
// accepted records from the ingress WAL, commits them at their partition owners, and advances
// the WAL checkpoint past what is finished. It knows the cluster only through the Topology and
// Committer interfaces it defines (no meta, engine, rpc or api imports).
//
// A pass: scan [checkpoint, checkpoint + window × 16) skipping committedAhead seqs, stopping at
// window unfinished records; bucket by (topic, incarnation, partition) in WAL order; resolve
// each bucket's destination (§4.2); commit per target partition, ≤ CommitFanout at once; mark
// finished seqs; advance the checkpoint to the lowest unfinished seq (wal.Advance fsyncs it and
// compacts); prune committedAhead. Passes are sequential: a pass waits for all of its commits.
package dispatch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/wal"
)

// Pass parameters (docs/internals/produce-path.md §4, §11).
const (
	MinWindow            = 4096  // first window; lower clamp
	MaxWindow            = 65536 // upper clamp
	WindowPerPartition   = 64    // next window = 64 × distinct partitions seen
	Lookahead            = 16    // scan horizon in windows past the checkpoint
	DefaultIdlePoll      = 10 * time.Millisecond
	DefaultPartialPause  = 5 * time.Millisecond
	DefaultCommitFanout  = 16
	DefaultCommitTimeout = 30 * time.Second // a slow fsync is not a dead node
	DefaultBackoff       = time.Second      // per-destination retry pacing after a failure
	DefaultRerouteGrace  = 3 * time.Second  // from the first failure of a streak (docs/internals/produce-path.md §6)
	DefaultPassWait      = time.Second      // a pass waits this long for its commits, then leaves hung ones running
	errorLogInterval     = 10 * time.Second // a persisting WAL error is logged at most this often
)

// ErrRunning is returned by Run when the dispatcher is already running.
var ErrRunning = errors.New("dispatch: already running")

// Options configure a Dispatcher; zero values select the defaults.
type Options struct {
	Logger   *slog.Logger // nil → discard
	Observer Observer     // nil → none
	// Now is the clock used for failure streaks and retry pacing (monotonic differences only);
	// nil → time.Now. Tests pass a fake clock.
	Now func() time.Time
	// FailureBackoff: a failed destination is retried no sooner than this (0 → 1 s).
	FailureBackoff time.Duration
	// RerouteGrace: a destination failing this long is rerouted to a sibling (0 → 3 s).
	RerouteGrace time.Duration
	// IdlePoll: pass interval when no append wakes the dispatcher (0 → 10 ms).
	IdlePoll time.Duration
	// PartialPause: after a pass that found records but less than a window, while more were
	// accepted during it, the next pass starts no sooner than this (0 → 5 ms; negative →
	// none), so a stream gathers into fewer, larger commits instead of a commit per few
	// records. With nothing accepted during the pass there is no pause: a record that comes
	// alone (a producer waiting for each answer) is committed as soon as it is accepted.
	PartialPause time.Duration
	// CommitFanout: commits in flight at once (0 → 16).
	CommitFanout int
	// CommitTimeout bounds one Commit and one ConfirmAbsent call (0 → 30 s).
	CommitTimeout time.Duration
	// PassWait bounds how long a pass waits for its commits (0 → 1 s). A commit still running
	// then (a frozen owner: its RPC neither answers nor fails) is left running in the
	// background, its destination counts as in flight, and the pass goes on with everything
	// else, so one hung owner never stalls delivery to the others.
	PassWait time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FailureBackoff <= 0 {
		o.FailureBackoff = DefaultBackoff
	}
	if o.RerouteGrace <= 0 {
		o.RerouteGrace = DefaultRerouteGrace
	}
	if o.IdlePoll <= 0 {
		o.IdlePoll = DefaultIdlePoll
	}
	switch {
	case o.PartialPause == 0:
		o.PartialPause = DefaultPartialPause
	case o.PartialPause < 0:
		o.PartialPause = 0
	}
	if o.CommitFanout <= 0 {
		o.CommitFanout = DefaultCommitFanout
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	if o.PassWait <= 0 {
		o.PassWait = DefaultPassWait
	}
	return o
}

// Dispatcher moves accepted records from the WAL to their partition owners. One per node.
//
// Invariant: the WAL checkpoint never passes a seq that is unfinished (not committed at an
// owner with a verified commit, and not discarded after leader confirmation): it only ever
// advances to committedAhead's lowest non-member. All state except the backlog snapshot is owned
// by the Run goroutine.
type Dispatcher struct {
	w    *wal.WAL
	topo Topology
	c    Committer
	opts Options
	log  *slog.Logger

	running atomic.Bool

	// Owned by the Run goroutine.
	window   int
	partial  bool                    // the last pass found records, but less than a window
	passNext uint64                  // the WAL's next seq when the last pass began
	ahead    *seqSet                 // committedAhead; base = checkpoint
	stuck    map[partKey]*stuckState // failing destinations
	dead     map[partKey]time.Time   // dead owners already logged → last seen
	confirm  map[topicInc]time.Time  // discard confirmations: no re-ask before this time
	scratch  passScratch             // reused per pass
	hung     map[partKey]time.Time   // destinations with a detached commit in flight → its start

	lateMu   sync.Mutex
	late     []*group       // detached commits that finished, for the next pass to account
	detached sync.WaitGroup // detached commits still running (Run waits for them)

	adv       *advancer // durable checkpoint writer of the current Run
	readErrAt time.Time // last read error log (rate limit)

	snapMu    sync.Mutex
	snapCP    uint64 // checkpoint after the last pass
	snapAhead uint64 // |committedAhead| after the last pass
}

// New returns a dispatcher for w. It starts nothing: the owner calls Run, and stops Run (cancels
// its ctx and waits for it) before closing w. It resumes from w's checkpoint; committedAhead is
// memory-only, so records finished above the checkpoint before a restart are committed again
// (duplicates within at-least-once).
func New(w *wal.WAL, topo Topology, c Committer, opts Options) *Dispatcher {
	opts = opts.withDefaults()
	cp := w.Checkpoint()
	return &Dispatcher{
		w: w, topo: topo, c: c, opts: opts, log: opts.Logger,
		window:  MinWindow,
		ahead:   newSeqSet(cp),
		stuck:   map[partKey]*stuckState{},
		dead:    map[partKey]time.Time{},
		confirm: map[topicInc]time.Time{},
		hung:    map[partKey]time.Time{},
		scratch: newPassScratch(),
		snapCP:  cp,
	}
}

// Run dispatches until ctx is done, then returns nil (after the pass in flight, whose commits
// see the cancelled ctx). It returns ErrRunning if the dispatcher is already running.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer d.running.Store(false)
	defer d.detached.Wait() // detached commits see the cancelled ctx and end quickly
	d.adv = newAdvancer(d.w, d.log)
	go d.adv.run()
	defer d.adv.stop() // after the last pass: its checkpoint is written before Run returns
	idle := time.NewTimer(d.opts.IdlePoll)
	defer idle.Stop()
	for {
		appended := d.w.AppendC() // before the pass reads NextSeq: no missed wake-up
		again := d.pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if d.partial && d.opts.PartialPause > 0 && d.w.NextSeq() > d.passNext {
			// The commit of a few records costs an owner about what a window's costs; with
			// the checkpoint written off the pass's path, back-to-back passes would split a
			// steady stream into many small commits. Records accepted while the pass ran
			// are that stream; a lone record waits for no one.
			idle.Reset(d.opts.PartialPause)
			select {
			case <-ctx.Done():
				return nil
			case <-idle.C:
			}
		}
		if again {
			continue
		}
		idle.Reset(d.opts.IdlePoll)
		select {
		case <-ctx.Done():
			return nil
		case <-appended:
		case <-idle.C:
		}
	}
}

// Undispatched is the backlog of docs/internals/produce-path.md §10:
// next_seq − checkpoint − |committedAhead ∩ [checkpoint, next_seq)|. It reads the state of the
// last finished pass, so it may over-count records finished since, never under-count. Safe for
// concurrent use.
func (d *Dispatcher) Undispatched() uint64 {
	next := d.w.NextSeq()
	d.snapMu.Lock()
	cp, ahead := d.snapCP, d.snapAhead
	d.snapMu.Unlock()
	if next < cp+ahead {
		return 0
	}
	return next - cp - ahead
}

func (d *Dispatcher) publish(cp uint64, ahead int) uint64 {
	d.snapMu.Lock()
	d.snapCP, d.snapAhead = cp, uint64(ahead)
	d.snapMu.Unlock()
	return d.Undispatched()
}
