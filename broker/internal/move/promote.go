package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// observeSource reads the source's member record and reports whether it has been dead long
// enough to force-promote (docs/internals/moves.md §8 rule 2): the leader's heartbeat stamp is older
// than ForcePromoteAfter AND this worker has itself watched it read dead that long on its
// own clock. The own clock starts at the first dead reading and restarts when the source
// reads alive; a source with no member record reads dead with no stamp.
func (w *worker) observeSource() bool {
	m, found := w.sourceMember()
	now := w.cfg.Now()
	if found && m.Status != meta.MemberDead {
		w.sourceAlive()
		return false
	}
	if w.deadSince.IsZero() {
		w.deadSince = now
		w.log.Warn("move: source reads dead; waiting for it", "member", found)
	}
	stampOld := !found || now.Sub(time.Unix(m.LastHeartbeat, 0)) >= w.cfg.ForcePromoteAfter
	return stampOld && now.Sub(w.deadSince) >= w.cfg.ForcePromoteAfter
}

// sourceAlive restarts the own-clock observation: the source read alive or answered.
func (w *worker) sourceAlive() {
	w.deadSince = time.Time{}
	w.deathLogged, w.unreachedLogd = false, false
	w.markBehind(false)
}

// sourceDown runs after an attempt could not reach the source: the worker keeps waiting for
// it (the source's disk is authoritative) and force-promotes once it has been dead long
// enough and the gates pass. done reports a committed flip; errBlocked and errEnded end the
// waiting, any other error keeps it.
func (w *worker) sourceDown(ctx context.Context) (done bool, err error) {
	if !w.observeSource() {
		return false, nil
	}
	err = w.forcePromote(ctx)
	return err == nil, err
}

// errBehind: a force-promote gate failed; the worker keeps waiting for the source.
var errBehind = errors.New("move: cannot force-promote")

// forcePromote promotes the staged copy of a dead source (docs/internals/moves.md §8 rules 3–5): only
// if the session reached the source and the copy recovers to at least the source's last
// listed HWM (and, so that a gap in a sealed segment cannot hide behind a later one, holds
// every byte that listing reported). It skips the freeze, works from the last listing, cuts the copy to its HWM,
// clamps positions, verifies, makes the copy durable, marks it force and installs and flips.
func (w *worker) forcePromote(ctx context.Context) error {
	last := w.sess.last
	if last == nil {
		if !w.unreachedLogd {
			w.unreachedLogd = true
			w.log.Error("move: the source is dead and was never reached by this move, so it cannot force-promote")
		}
		w.setBlocked(transfer.BlockedSourceDeadCopyBehind)
		return fmt.Errorf("%w: the source was never reached", errBehind)
	}
	hwm := last.HighWatermark
	next := int64(-1)
	if err := w.sess.ensureDir(); err == nil {
		if n, _, err := w.openStaged(); err == nil {
			next = n
		} else {
			w.setErr(fmt.Errorf("open the staged copy: %w", err))
		}
	}
	w.setCopyNext(next)
	if next < hwm || !w.sess.holdsAll(*last) {
		if !w.deathLogged {
			w.deathLogged = true
			w.log.Error("move: the source is dead and this node's copy is behind its last high watermark, so it cannot force-promote",
				"copy_next_offset", next, "source_hwm", hwm)
		}
		w.markBehind(true)
		return fmt.Errorf("%w: copy next offset %d below the source's last hwm %d", errBehind, next, hwm)
	}
	w.markBehind(false)
	if next > hwm {
		if _, err := plog.CutTail(w.sess.dir, hwm); err != nil {
			return fmt.Errorf("cut the staged copy to the last hwm: %w", err)
		}
	}
	w.log.Warn("move: the source is dead; force-promoting the staged copy", "hwm", hwm, "copy_next_offset", next)
	if err := w.writePositions(*last, hwm, true); err != nil {
		return err
	}
	if err := w.verify(hwm); err != nil {
		w.log.Error("move: staged copy cannot be verified; not freezing the source again", "err", err, "force", true)
		w.setErr(err)
		w.markUnverifiable()
		return fmt.Errorf("%w: %w", errBlocked, err)
	}
	w.stampAges(*last)
	marker, m, err := w.seal(hwm, true)
	if err != nil {
		return err
	}
	if err := w.install(marker, m); err != nil {
		return err
	}
	return w.flip(ctx, nil, hwm)
}
