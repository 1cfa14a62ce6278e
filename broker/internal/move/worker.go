package move

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// Outcomes of one attempt that are not plain failures (a plain failure is retried in place
// after RetryBackoff).
var (
	// errEnded: the flip can never commit (refused, re-planned, topic gone); the worker
	// ends without a flip and disposes of its staging copy (docs/internals/moves.md §5.11).
	errEnded = errors.New("move: the flip cannot commit")
	// errBlocked: the worker stops working and holds its slot until cancelled (§5.5).
	errBlocked = errors.New("move: blocked")
	// errAgain: retry at once (a from-scratch copy after a first verify failure, or a
	// resume from the staged copy after a rename back).
	errAgain = errors.New("move: retry at once")
	// errRefreeze: the freeze lapsed or the fence was refused: arm a fresh freeze.
	errRefreeze = errors.New("move: freeze lapsed")
	// errSourceCall wraps every error of a call to the source.
	errSourceCall = errors.New("move: source call failed")
)

// worker is the destination side of one move (docs/internals/moves.md §5): it holds one copy session
// for its life and retries in place after failures.
//
// Invariant: the worker proposes the flip only with a verified, durable copy installed at
// the partition path under a freeze the source confirmed (the fence) — or, for a
// force-promote, with a copy that reaches the dead source's last listed high watermark —
// and it takes an install off the path only after a leader read confirms the flip did not
// commit.
type worker struct {
	r      *Runner
	cfg    RunnerConfig
	log    *slog.Logger
	topic  string
	p      int
	source string
	self   string
	// incarnation is the topic incarnation the local replica named when the worker started;
	// the move prepares the topic directory for it and installs only under it.
	incarnation string

	mu  sync.Mutex // guards rep
	rep transfer.Report

	// Everything below is owned by the worker goroutine.
	started time.Time
	staging string
	path    string
	sess    *session

	prepareWarned  bool
	legacyWarned   bool
	verifyFailures int
	unverifiable   bool // counted in narad_moves_blocked{copy_unverifiable}
	behind         bool // counted in narad_moves_blocked{source_dead_copy_behind}

	installed    bool   // the copy sits at the partition path, its flip unresolved
	marker       []byte // the move.marker bytes of that install
	markerStruct transfer.Marker
	tookOff      bool // an install of this worker was renamed back to staging
	firstUnknown time.Time
	lastUnknown  time.Time
	lastVerdict  verdict

	deadSince     time.Time // own-clock start of watching the source read dead
	deathLogged   bool
	unreachedLogd bool
}

func newWorker(r *Runner, k key, d want) *worker {
	w := &worker{
		r: r, cfg: r.cfg, topic: k.topic, p: k.partition, source: d.source, self: k.target,
		incarnation: d.incarnation,
		log:         r.log.With("topic", k.topic, "partition", k.partition, "from", d.source, "to", k.target),
	}
	w.started = r.cfg.Now()
	w.rep = transfer.Report{ReportedBy: r.cfg.NodeID, Phase: transfer.PhaseCopying, StartedAt: w.started.Unix()}
	return w
}

// run is the worker goroutine: attempts until the flip commits, the move ends, or ctx ends;
// then it disposes of whatever a move without a flip leaves (docs/internals/moves.md §5.11).
func (w *worker) run(ctx context.Context) {
	defer w.clearBlocked()
	defer func() {
		if !w.r.stopped.Load() {
			w.removeUnverifiableNote() // the move ended here; a process stop keeps the note
		}
	}()
	if err := w.begin(); err != nil {
		w.log.Info("move: not started", "err", err)
		return
	}
	w.log.Info("move: started", "incarnation", w.incarnation)
	if w.loop(ctx) {
		return
	}
	w.dispose()
}

// begin clears a leftover plain staging directory of this partition (never a .quarantine).
func (w *worker) begin() error {
	w.staging = w.cfg.Local.StagingDir(w.topic, w.p)
	w.path = w.cfg.Local.PartitionDir(w.topic, w.p)
	if err := os.RemoveAll(w.staging); err != nil {
		return fmt.Errorf("clear leftover staging %s: %w", w.staging, err)
	}
	w.sess = newSession(w.staging)
	if w.readUnverifiableNote() {
		// Blocked as copy_unverifiable before this node restarted: one more try, no copy
		// from scratch after it (docs/cluster.md, "A node that dies mid-move").
		w.verifyFailures = 1
		w.log.Info("move: the copy was blocked as unverifiable before the restart; trying once more")
	}
	return nil
}

// loop runs attempts; it reports whether the flip committed.
func (w *worker) loop(ctx context.Context) bool {
	for {
		err := w.attempt(ctx)
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case errors.Is(err, errEnded):
			w.log.Info("move: ended without a flip", "reason", err)
			return false
		case errors.Is(err, errBlocked):
			<-ctx.Done()
			return false
		case errors.Is(err, errAgain):
			continue
		}
		w.setErr(err)
		if w.sourceUnreachable(err) {
			w.setPhase(transfer.PhaseWaitingForSource)
			if done, perr := w.sourceDown(ctx); done {
				return true
			} else if errors.Is(perr, errBlocked) {
				<-ctx.Done()
				return false
			} else if errors.Is(perr, errEnded) {
				return false
			}
		} else {
			w.log.Debug("move: attempt failed; retrying", "err", err) // the report carries it
		}
		if clock.Sleep(ctx, w.cfg.RetryBackoff) != nil {
			return false
		}
	}
}

// attempt is one pass through the state machine: prepare, CatchUp, then freeze and finalize.
func (w *worker) attempt(ctx context.Context) error {
	if err := w.cfg.Local.PrepareTopicDir(w.topic, w.incarnation); err != nil {
		if !w.prepareWarned {
			w.prepareWarned = true
			w.log.Warn("move: topic directory preparation refused; retrying", "incarnation", w.incarnation, "err", err)
		}
		return fmt.Errorf("prepare topic dir: %w", err)
	}
	if err := w.sess.ensureDir(); err != nil {
		return err
	}
	if err := w.catchUp(ctx); err != nil {
		return err
	}
	return w.finalize(ctx)
}

// sourceUnreachable reports whether err says the source could not be asked (as opposed to
// a refusal it answered).
func (w *worker) sourceUnreachable(err error) bool {
	return errors.Is(err, errSourceCall) && !errors.Is(err, transfer.ErrNotOwner) &&
		!errors.Is(err, transfer.ErrNotFound) && !transfer.FenceRefused(err)
}

// sourceAddr returns the source's cluster address from the local replica.
func (w *worker) sourceAddr() (string, error) {
	m, ok := w.cfg.Store.Member(w.source)
	if !ok || m.ClusterAddr == "" {
		return "", fmt.Errorf("%w: %w: no member record for %s", errSourceCall, transfer.ErrUnavailable, w.source)
	}
	return m.ClusterAddr, nil
}

// links returns the topic's child links with their attach epochs from the local replica.
func (w *worker) links() []transfer.Link {
	t, ok := w.cfg.Store.Topic(w.topic)
	if !ok {
		return nil
	}
	out := make([]transfer.Link, 0, len(t.Children))
	for _, c := range t.Children {
		ct, ok := w.cfg.Store.Topic(c)
		epoch := ""
		if ok {
			epoch = ct.AttachEpoch
		}
		out = append(out, transfer.Link{Child: c, Epoch: epoch})
	}
	return out
}

// sourceMember returns the source's member record.
func (w *worker) sourceMember() (meta.Member, bool) { return w.cfg.Store.Member(w.source) }

// ---- report ----

func (w *worker) report() transfer.Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rep
}

// setPhase reports p. While the worker is blocked behind a dead source, or watches it read
// dead, retries do not change the phase it reports.
func (w *worker) setPhase(p string) {
	switch {
	case w.behind && p != transfer.PhaseBlocked:
		return
	case !w.deadSince.IsZero() && (p == transfer.PhaseCopying || p == transfer.PhaseFreezing):
		p = transfer.PhaseWaitingForSource
	}
	w.mu.Lock()
	w.rep.Phase = p
	if p != transfer.PhaseBlocked {
		w.rep.BlockedReason = ""
	}
	w.mu.Unlock()
}

func (w *worker) setBlocked(reason string) {
	w.mu.Lock()
	w.rep.Phase, w.rep.BlockedReason = transfer.PhaseBlocked, reason
	w.mu.Unlock()
}

func (w *worker) setErr(err error) {
	w.mu.Lock()
	w.rep.LastError = err.Error()
	w.mu.Unlock()
}

func (w *worker) addPass(copied int64) {
	w.mu.Lock()
	w.rep.Passes++
	w.rep.CopiedBytes += copied
	w.mu.Unlock()
}

func (w *worker) setSourceHWM(h int64) {
	w.mu.Lock()
	w.rep.SourceHWM = h
	w.mu.Unlock()
}

func (w *worker) setCopyNext(n int64) {
	w.mu.Lock()
	w.rep.CopyNextOffset = n
	w.mu.Unlock()
}

func (w *worker) copiedBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rep.CopiedBytes
}

// ---- blocked gauges ----

func (w *worker) markUnverifiable() {
	w.setBlocked(transfer.BlockedCopyUnverifiable)
	if !w.unverifiable {
		w.unverifiable = true
		w.blockedGauge(transfer.BlockedCopyUnverifiable, 1)
		w.writeUnverifiableNote()
	}
}

func (w *worker) markBehind(on bool) {
	if on == w.behind {
		return
	}
	w.behind = on
	if on {
		w.setBlocked(transfer.BlockedSourceDeadCopyBehind)
		w.blockedGauge(transfer.BlockedSourceDeadCopyBehind, 1)
	} else {
		w.blockedGauge(transfer.BlockedSourceDeadCopyBehind, -1)
	}
}

// clearBlocked takes the worker out of every blocked gauge when it ends.
func (w *worker) clearBlocked() {
	if w.unverifiable {
		w.unverifiable = false
		w.blockedGauge(transfer.BlockedCopyUnverifiable, -1)
	}
	w.markBehind(false)
}

func (w *worker) blockedGauge(reason string, d float64) {
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.MovesBlocked.WithLabelValues(reason).Add(d)
	}
}
