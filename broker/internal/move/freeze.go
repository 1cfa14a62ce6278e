package move

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/transfer"
)

// freeze is one handoff freeze this worker armed on the source (docs/internals/moves.md §3, §5.4).
// While it is held, a goroutine presents its token every RearmEvery; a refused re-arm marks
// it lapsed, and whoever relies on it goes back to arming a fresh one.
type freeze struct {
	token   string
	legacy  bool      // the source returned no token (older release): no fence
	armedAt time.Time // for narad_moves_freeze_seconds
	lapsed  atomic.Bool

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// hasLapsed reports whether a re-arm was refused.
func (f *freeze) hasLapsed() bool { return f != nil && f.lapsed.Load() }

// stop ends the re-arm goroutine; the freeze then lapses on its TTL unless the flip ends it.
func (f *freeze) stop() {
	if f == nil {
		return
	}
	f.stopOnce.Do(func() {
		f.cancel()
		<-f.done
	})
}

// arm arms a fresh freeze (PrepareHandoff without a token): the reply is the listing read
// under the source's produce lock, plus the token.
func (w *worker) arm(ctx context.Context) (*freeze, transfer.Listing, error) {
	w.setPhase(transfer.PhaseFreezing)
	l, err := w.prepare(ctx, transfer.PrepareRequest{TTL: w.cfg.FreezeTTL})
	if err != nil {
		return nil, transfer.Listing{}, fmt.Errorf("arm: %w", err)
	}
	l = w.noteListing(l)
	rctx, cancel := context.WithCancel(ctx)
	f := &freeze{token: l.Token, legacy: l.Token == "", armedAt: w.cfg.Now(), cancel: cancel, done: make(chan struct{})}
	if f.legacy && !w.legacyWarned {
		w.legacyWarned = true
		w.log.Warn("move: source returned no freeze token (older release); re-arming without a fence")
	}
	go w.rearmLoop(rctx, f)
	return f, l, nil
}

// rearmLoop presents the token every RearmEvery until stopped, so no single long pass can
// outlive the TTL (§5.4 rule 2). A source without tokens is armed again instead.
func (w *worker) rearmLoop(ctx context.Context, f *freeze) {
	defer close(f.done)
	t := time.NewTicker(w.cfg.RearmEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req := transfer.PrepareRequest{Token: f.token, TTL: w.cfg.FreezeTTL}
		if f.legacy {
			req.Token = ""
		}
		_, err := w.prepare(ctx, req)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case transfer.FenceRefused(err) || errors.Is(err, transfer.ErrNotOwner):
			w.log.Info("move: freeze re-arm refused; the freeze lapsed", "err", err)
			f.lapsed.Store(true)
			return
		default:
			w.log.Debug("move: freeze re-arm failed; retrying", "err", err)
		}
	}
}

func (w *worker) prepare(ctx context.Context, req transfer.PrepareRequest) (transfer.Listing, error) {
	addr, err := w.sourceAddr()
	if err != nil {
		return transfer.Listing{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	l, err := w.cfg.Source.Prepare(cctx, addr, w.topic, w.p, req)
	if err != nil {
		return transfer.Listing{}, fmt.Errorf("%w: prepare handoff: %w", errSourceCall, err)
	}
	return l, nil
}

// drain runs Finalize's passes under the freeze (§5.4 rule 3), starting with the arm
// listing, until two consecutive passes copy nothing and report the same HWM: a single
// quiet pass can see a segment before an append and the HWM after it. It returns the last
// listing, whose HWM the copy must reproduce.
func (w *worker) drain(ctx context.Context, f *freeze, armed transfer.Listing) (transfer.Listing, error) {
	w.setPhase(transfer.PhaseFinalizing)
	copied, complete, err := w.copyPass(ctx, armed)
	w.addPass(copied)
	if err != nil {
		return transfer.Listing{}, err
	}
	prev, prevQuiet := armed, copied == 0 && complete
	for {
		if f.hasLapsed() {
			return transfer.Listing{}, errRefreeze
		}
		l, err := w.list(ctx)
		if err != nil {
			return transfer.Listing{}, err
		}
		copied, complete, err := w.copyPass(ctx, l)
		w.addPass(copied)
		if err != nil {
			return transfer.Listing{}, err
		}
		quiet := copied == 0 && complete
		if quiet && prevQuiet && l.HighWatermark == prev.HighWatermark {
			return l, nil
		}
		prev, prevQuiet = l, quiet
	}
}

// fence presents the token once more right before the install (§5.8): the source must
// still hold that freeze and report hwm; it renews the TTL. A token-less source is not
// fenced (warned at arm).
func (w *worker) fence(ctx context.Context, f *freeze, hwm int64) error {
	if f.legacy {
		return nil
	}
	if f.hasLapsed() {
		return errRefreeze
	}
	_, err := w.prepare(ctx, transfer.PrepareRequest{Token: f.token, Fence: true, ExpectHWM: hwm, TTL: w.cfg.FreezeTTL})
	if transfer.FenceRefused(err) {
		w.log.Info("move: fence refused; freezing again", "hwm", hwm, "err", err)
		return fmt.Errorf("%w: %w", errRefreeze, err)
	}
	return err
}

// finalize freezes the source and finishes the move under that freeze; a lapsed freeze or a
// refused fence arms a fresh one and drains again (§5.4, §5.8).
func (w *worker) finalize(ctx context.Context) error {
	for {
		f, armed, err := w.arm(ctx)
		if err != nil {
			return err
		}
		err = w.finishUnder(ctx, f, armed)
		f.stop()
		if errors.Is(err, errRefreeze) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		return err
	}
}

// finishUnder drains, writes positions, verifies, makes the copy durable, fences, installs
// and flips, all while f is re-armed.
func (w *worker) finishUnder(ctx context.Context, f *freeze, armed transfer.Listing) error {
	l, err := w.drain(ctx, f, armed)
	if err != nil {
		return err
	}
	hwm := l.HighWatermark
	if err := w.writePositions(l, hwm, false); err != nil {
		return err
	}
	if err := w.verify(hwm); err != nil {
		if f.hasLapsed() {
			return errRefreeze // not a drain under a freeze that held
		}
		return w.verifyFailed(err)
	}
	w.stampAges(l)
	marker, m, err := w.seal(hwm, false)
	if err != nil {
		return err
	}
	if err := w.fence(ctx, f, hwm); err != nil {
		return err
	}
	if err := w.install(marker, m); err != nil {
		return err
	}
	return w.flip(ctx, f, hwm)
}
