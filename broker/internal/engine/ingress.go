package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/wal"
)

// Reopen pacing. A WAL that fails again soon after a reopen (the disk is still full) is
// reopened after a growing pause, so a full disk costs one reopen — one log line, one new
// segment file — per pause, not one per refused produce. Produce answers 503 meanwhile.
const (
	reopenInterval   = 1 * time.Second  // retry pace while the open itself fails
	refailWindow     = 10 * time.Second // a failure this soon after a reopen backs off
	maxReopenBackoff = 30 * time.Second
)

// Ingress owns the node's ingress WAL and the dispatcher that drains it. A WAL whose write or
// fsync failed (a full disk, an I/O error) refuses every append until it is reopened, because
// the page cache can no longer be trusted (wal.ErrFailed). Run notices the failure, stops the
// dispatcher, closes the WAL, reopens it — recovery decides the tail from the bytes on disk —
// and starts a fresh dispatcher, retrying every second. So the node recovers by itself when
// space returns, and produce answers 503 meanwhile. Records acknowledged before the failure
// were fsynced and are recovered by the reopen.
type Ingress struct {
	dir     string
	opts    wal.Options
	log     *slog.Logger
	newDisp func(*wal.WAL) *dispatch.Dispatcher

	mu   sync.Mutex // guards the swap; Append reads cur without it
	cur  atomic.Pointer[wal.WAL]
	disp atomic.Pointer[dispatch.Dispatcher]
	kick chan struct{}
}

// OpenIngress opens the WAL in dir. newDispatcher builds a dispatcher for a (re)opened WAL.
func OpenIngress(dir string, opts wal.Options, logger *slog.Logger, newDispatcher func(*wal.WAL) *dispatch.Dispatcher) (*Ingress, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w, err := wal.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	in := &Ingress{dir: dir, opts: opts, log: logger, newDisp: newDispatcher, kick: make(chan struct{}, 1)}
	in.cur.Store(w)
	return in, nil
}

// Append durably appends recs to the current WAL (group commit). On wal.ErrFailed it asks Run
// to reopen the WAL and returns the error (the caller answers 503).
func (in *Ingress) Append(ctx context.Context, recs ...wal.Record) (uint64, error) {
	w := in.cur.Load()
	if w == nil {
		return 0, fmt.Errorf("ingress wal reopening: %w", wal.ErrFailed)
	}
	seq, err := w.Append(ctx, recs...)
	if err != nil && (errors.Is(err, wal.ErrFailed) || errors.Is(err, wal.ErrClosed)) {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
	return seq, err
}

// Undispatched is the current dispatcher's backlog.
func (in *Ingress) Undispatched() uint64 {
	if d := in.disp.Load(); d != nil {
		return d.Undispatched()
	}
	if w := in.cur.Load(); w != nil {
		return w.NextSeq() - w.Checkpoint()
	}
	return 0
}

// Healthy reports whether the WAL currently accepts appends.
func (in *Ingress) Healthy() bool {
	w := in.cur.Load()
	return w != nil && !w.Stats().Failed
}

// Run runs the dispatcher and supervises the WAL until ctx ends; then it stops the dispatcher
// and closes the WAL.
func (in *Ingress) Run(ctx context.Context) error {
	var lastReopen time.Time
	var backoff time.Duration
	for {
		w := in.cur.Load()
		if w == nil {
			if !in.reopen(ctx) {
				return nil
			}
			continue
		}
		d := in.newDisp(w)
		in.disp.Store(d)
		dctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = d.Run(dctx) }()

		failed := in.waitFailure(ctx, w)
		stop()
		<-done
		in.disp.Store(nil)
		if !failed {
			return in.closeCurrent()
		}
		_ = in.closeCurrent()
		if time.Since(lastReopen) < refailWindow {
			backoff = min(max(2*backoff, reopenInterval), maxReopenBackoff)
		} else {
			backoff = 0
		}
		in.log.Error("ingress wal failed closed; reopening", "dir", in.dir, "after", backoff)
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
		}
		if !in.reopen(ctx) {
			return nil
		}
		lastReopen = time.Now()
	}
}

// waitFailure blocks until w fails (true) or ctx ends (false).
func (in *Ingress) waitFailure(ctx context.Context, w *wal.WAL) bool {
	t := time.NewTicker(reopenInterval)
	defer t.Stop()
	for {
		if w.Stats().Failed {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-in.kick:
		case <-t.C:
		}
	}
}

func (in *Ingress) closeCurrent() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	w := in.cur.Swap(nil)
	if w == nil {
		return nil
	}
	return w.Close()
}

// reopen retries opening the WAL every reopenInterval until it succeeds (true) or ctx ends.
func (in *Ingress) reopen(ctx context.Context) bool {
	for {
		w, err := wal.Open(in.dir, in.opts)
		if err == nil {
			in.mu.Lock()
			in.cur.Store(w)
			in.mu.Unlock()
			in.log.Info("ingress wal reopened", "dir", in.dir, "next_seq", w.NextSeq())
			return true
		}
		in.log.Error("reopen ingress wal", "dir", in.dir, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(reopenInterval):
		}
	}
}

// Close closes the WAL if Run never ran (error paths during boot).
func (in *Ingress) Close() error { return in.closeCurrent() }
