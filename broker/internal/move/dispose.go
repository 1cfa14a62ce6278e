package move

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// dispose handles the staging copy of a worker that ends without its flip committing
// (docs/internals/moves.md §5.11). An install left at the partition path with its flip unresolved is
// not touched: the stale-copy sweep judges it (§9.6).
//
//  1. Default: remove the staging copy.
//  2. The source is dead or has no member record and the copy holds records: set it aside
//     to .moves/<topic>-<N>.quarantine (it may be the last surviving copy).
//  3. This node owns the partition by then: when the copy may hold records the path lacks
//     (this worker took its install off the path, or the path holds no copy installed from
//     the source) it is set aside too; when the path holds a copy installed from the source
//     and this worker never took one off, the committed flip was an earlier attempt's and
//     the staging copy is removed.
func (w *worker) dispose() {
	if w.sess != nil {
		w.sess.waitSyncs() // no fsync of the staging copy outlives the worker
	}
	if w.installed {
		if a, ok := w.cfg.Store.Assignment(w.topic, w.p); ok && a.Owner == w.self {
			// Cancelled after the replica applied the flip, before the worker heard of it:
			// only this install's flip can have made this node the owner.
			w.completed(nil)
			return
		}
		if (w.lastVerdict == flipRefused || w.lastVerdict == flipNone) && w.lastUnknown.IsZero() {
			// No proposal of this install is outstanding and none committed (the leader's
			// FSM refused it, or none was made): the install comes off the path.
			if err := w.cfg.Local.RenameBack(w.topic, w.p, w.incarnation, w.staging, w.marker); err == nil {
				w.installed, w.tookOff = false, true
			}
		}
	}
	if w.installed {
		w.log.Error("move: ended with its install at the partition path and the flip unconfirmed; left for the stale-copy sweep",
			"path", w.path)
		return
	}
	if _, err := os.Stat(w.staging); errors.Is(err, os.ErrNotExist) {
		return
	}
	holds := w.sess != nil && w.sess.stagedBytes() > 0
	a, ok := w.cfg.Store.Assignment(w.topic, w.p)
	if ok && a.Owner == w.self {
		m, found, err := transfer.ReadMarker(w.path)
		fromSource := err == nil && found && m.From == w.source
		if w.tookOff || !fromSource {
			w.setAside("this node owns the partition and the staging copy may hold records its path lacks")
			return
		}
		w.remove()
		return
	}
	if m, found := w.sourceMember(); holds && ok && a.Owner == w.source && (!found || m.Status == meta.MemberDead) {
		w.setAside("the source is dead or not a member; the staging copy may be the last one")
		return
	}
	w.remove()
}

func (w *worker) remove() {
	if err := os.RemoveAll(w.staging); err != nil {
		w.log.Warn("move: cannot remove the staging copy", "staging", w.staging, "err", err)
		return
	}
	_ = durable.SyncDir(filepath.Dir(w.staging))
	w.log.Info("move: staging copy removed", "staging", w.staging)
}

// setAside renames the staging copy to its .quarantine name (a -<unixnano> suffix when the
// plain name is taken) and logs it at error level for an operator.
func (w *worker) setAside(why string) {
	to, err := quarantineName(w.staging, w.cfg.Now().UnixNano())
	if err == nil {
		err = os.Rename(w.staging, to)
	}
	if err == nil {
		err = durable.SyncDir(filepath.Dir(w.staging))
	}
	if err != nil {
		w.log.Error("move: cannot set the staging copy aside; left in place", "staging", w.staging, "reason", why, "err", err)
		return
	}
	w.log.Error("move: staging copy set aside for an operator", "quarantine", to, "reason", why,
		"source", w.source, "bytes", newSession(to).stagedBytes())
}

// quarantineName is the staging copy's set-aside name (datadir: <staging>.quarantine, or
// <staging>.quarantine-<nano> when that is taken).
func quarantineName(staging string, nano int64) (string, error) {
	to := datadir.QuarantineName(staging)
	if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
		return to, nil
	} else if err != nil {
		return "", fmt.Errorf("stat %s: %w", to, err)
	}
	return datadir.QuarantineNameSeq(staging, nano), nil
}
