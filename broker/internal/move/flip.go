package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// FaultFlipReply treats the reply of a flip that committed (CASDone) as lost: the outcome is
// unknown to the worker (MV-2, MV-22).
const FaultFlipReply = "move.flip_reply"

// verdict is what one flip proposal told the worker.
type verdict int

const (
	flipNone    verdict = iota // not proposed since the install
	flipUnknown                // no verdict: 503, timeout, transport error, lost reply
	flipDone                   // committed (done or already done)
	flipRefused                // the leader's FSM refused it (409) or knows no assignment (404)
)

// outcome labels of narad_moves_total.
const (
	outcomeCompleted     = "completed"
	outcomeForcePromoted = "force_promoted"
)

// install renames the staged copy into the partition path (docs/internals/moves.md §5.9).
func (w *worker) install(marker []byte, m transfer.Marker) error {
	w.setPhase(transfer.PhaseInstalled)
	if err := w.cfg.Local.Install(w.topic, w.p, w.incarnation, w.staging); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	w.installed, w.marker, w.markerStruct, w.lastVerdict = true, marker, m, flipNone
	w.log.Info("move: copy installed", "hwm", m.HWM, "force", m.Force)
	return nil
}

// propose sends the flip CAS once (§5.10).
func (w *worker) propose(ctx context.Context) verdict {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	res, a, err := w.cfg.Store.CompleteMove(cctx, w.topic, w.p, w.source, w.self)
	if res == meta.CASDone {
		if ferr := faults.Check(FaultFlipReply); ferr != nil {
			res, err = 0, ferr
		}
	}
	switch res {
	case meta.CASDone, meta.CASAlreadyDone:
		w.lastVerdict = flipDone
		return flipDone
	case meta.CASRefused, meta.CASNotFound:
		w.log.Info("move: flip refused", "result", res.String(), "owner", a.Owner, "target", a.Target)
		w.lastVerdict = flipRefused
		return flipRefused
	}
	w.lastVerdict = flipUnknown
	now := w.cfg.Now()
	if w.firstUnknown.IsZero() {
		w.firstUnknown = now
	}
	w.lastUnknown = now
	if err == nil {
		err = errors.New("no verdict")
	}
	w.setErr(fmt.Errorf("flip outcome unknown: %w", err))
	w.log.Warn("move: flip outcome unknown; resolving with the leader", "err", err)
	return flipUnknown
}

// flip proposes the flip of the installed copy and resolves anything but a committed answer
// (§5.10, §7). f is the freeze the copy was fenced under (nil for a force-promote).
func (w *worker) flip(ctx context.Context, f *freeze, hwm int64) error {
	if w.propose(ctx) == flipDone {
		w.completed(f)
		return nil
	}
	return w.resolve(ctx, f, hwm)
}

// completed records a committed flip.
func (w *worker) completed(f *freeze) {
	w.installed = false
	outcome := outcomeCompleted
	if w.markerStruct.Force {
		outcome = outcomeForcePromoted
	}
	now := w.cfg.Now()
	if m := w.cfg.Metrics; m != nil {
		m.MovesTotal.WithLabelValues(outcome).Inc()
		m.MovesDuration.Observe(now.Sub(w.started).Seconds())
		m.MovesBytes.Add(float64(w.copiedBytes()))
	}
	w.log.Info("move: flip committed", "outcome", outcome, "hwm", w.markerStruct.HWM,
		"copied_bytes", w.copiedBytes(), "duration", now.Sub(w.started))
}

// resolve settles a flip that did not answer "committed" (docs/internals/moves.md §7), with the
// install in place. It re-proposes while the flip can still commit — under the re-armed,
// fenced freeze and within ReproposeLimit of the first unknown proposal, or as a
// force-promote once the source has been dead long enough (§7.8) — and takes the copy off
// the path only on a leader read that confirms the flip did not commit and started at least
// RenameBackDelay after the last unknown proposal. It returns nil when the flip committed,
// errAgain to resume the session from the staged copy, errEnded when the flip can never
// commit, or ctx's error (the install stays: answers like that never undo a flip).
func (w *worker) resolve(ctx context.Context, f *freeze, hwm int64) error {
	defer f.stop()
	force := w.markerStruct.Force
	stopped := false // no longer proposing: the freeze lapsed, the HWM moved or the limit passed
	entered := w.cfg.Now()
	for first := true; ; first = false {
		if !first {
			if err := clock.Sleep(ctx, w.cfg.RetryBackoff); err != nil {
				return err
			}
		}
		w.setPhase(transfer.PhaseUnconfirmedFlip)
		if since := cmpOr(w.firstUnknown, entered); !force && !stopped && w.cfg.Now().Sub(since) >= w.cfg.ReproposeLimit {
			// Never hold the source frozen for longer, whether or not the leader answers.
			stopped = true
			f.stop()
			w.log.Info("move: flip unresolved past the re-propose limit; letting the freeze lapse")
		}
		if !force && w.observeSource() {
			if err := w.markForce(); err != nil {
				w.setErr(err)
				continue
			}
			force, stopped = true, false
		}
		started := w.cfg.Now()
		a, found, err := w.confirm(ctx)
		if err != nil {
			w.setErr(fmt.Errorf("leader read: %w", err))
			continue // unconfirmed: leave the install in place
		}
		if found && a.Owner == w.self {
			w.completed(f)
			return nil
		}
		proposable := found && a.Owner == w.source && a.Target == w.self
		if proposable && !stopped {
			if !force {
				switch err := w.stillProposable(ctx, f, hwm); {
				case errors.Is(err, errRefreeze):
					stopped = true
					f.stop()
					w.log.Info("move: flip no longer proposable; letting the freeze lapse", "err", err)
				case err != nil:
					w.setErr(err)
					continue
				}
			}
			if !stopped {
				switch w.propose(ctx) {
				case flipDone:
					w.completed(f)
					return nil
				}
				continue
			}
		}
		// The flip did not commit and will not be proposed as it is.
		if !w.lastUnknown.IsZero() && started.Before(w.lastUnknown.Add(w.cfg.RenameBackDelay)) {
			continue // a proposal may still be on its way into the leader's log
		}
		if err := w.cfg.Local.RenameBack(w.topic, w.p, w.incarnation, w.staging, w.marker); err != nil {
			if errors.Is(err, transfer.ErrNotInstalled) {
				w.installed = false
				w.log.Error("move: the install is no longer at the partition path; nothing taken back", "err", err)
				return fmt.Errorf("%w: install gone from the path: %w", errEnded, err)
			}
			w.setErr(fmt.Errorf("rename back: %w", err))
			continue
		}
		w.installed, w.tookOff = false, true
		w.firstUnknown, w.lastUnknown = time.Time{}, time.Time{}
		w.log.Info("move: flip confirmed not committed; copy taken off the partition path",
			"owner", a.Owner, "target", a.Target, "found", found, "resume", proposable)
		if proposable {
			return fmt.Errorf("%w: resume from the staged copy", errAgain)
		}
		return fmt.Errorf("%w: owner %q target %q found %v", errEnded, a.Owner, a.Target, found)
	}
}

// stillProposable checks the conditions of re-proposing an unknown flip (§7 rule 3): the
// freeze holds (re-armed), the limit since the first unknown proposal has not passed, and
// the fence confirms the source's HWM still equals the copy's. errRefreeze when any fails.
func (w *worker) stillProposable(ctx context.Context, f *freeze, hwm int64) error {
	if f == nil || f.hasLapsed() {
		return errRefreeze
	}
	if !w.firstUnknown.IsZero() && w.cfg.Now().Sub(w.firstUnknown) >= w.cfg.ReproposeLimit {
		return fmt.Errorf("%w: re-propose limit reached", errRefreeze)
	}
	return w.fence(ctx, f, hwm)
}

// cmpOr returns t, or def when t is zero.
func cmpOr(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// confirm is the leader read of the assignment.
func (w *worker) confirm(ctx context.Context) (meta.Assignment, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	return w.cfg.Store.ConfirmAssignment(cctx, w.topic, w.p)
}

// markForce rewrites the installed copy's marker with force: true before a force flip of an
// unconfirmed install (docs/internals/moves.md §7 rule 8, our choice).
func (w *worker) markForce() error {
	m := w.markerStruct
	m.Force = true
	if err := transfer.WriteMarker(w.path, m); err != nil {
		return fmt.Errorf("rewrite the installed marker with force: %w", err)
	}
	raw, err := transfer.ReadMarkerRaw(w.path)
	if err != nil || raw == nil {
		return fmt.Errorf("read back the installed marker: %v", err)
	}
	w.marker, w.markerStruct = raw, m
	w.log.Warn("move: source dead with the flip unconfirmed; force-promoting the installed copy", "hwm", m.HWM)
	return nil
}
