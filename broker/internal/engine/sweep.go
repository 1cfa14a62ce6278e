package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// sweepInterval paces the running sweep after the one at boot.
const sweepInterval = 5 * time.Minute

// FaultSweepConfirm fires before the orphan sweep asks the leader whether an incarnation is
// gone; an injected error stands for an unconfirmed read (the data is kept).
const FaultSweepConfirm = "engine.sweep_confirm"

// SweepResult says what a sweep did.
type SweepResult struct {
	Removed     int   // topic dirs and .stale dirs deleted after the leader confirmed them gone
	Orphans     int   // topic dirs left in place: unknown topic, deletion not confirmed
	Markerless  int   // of those, dirs without an incarnation marker (narad_orphan_topic_dirs)
	Quarantined int   // quarantined copies left for an operator (p*.quarantine, .moves/*.quarantine, .stale/*)
	QuarBytes   int64 // their size
	Deferred    bool  // the replica was not caught up: nothing was looked at or done
}

// SweepOrphans is the startup sweep (boot step 6, before topic creates are accepted): it
// removes data the metastore no longer accounts for, and only with a leader-confirmed read
// behind it (docs/operating.md, "Data directory": no node deletes data on the strength of its
// local replica alone; every failure to confirm keeps the data):
//   - topics/<t> whose .incarnation names an incarnation the leader confirms gone, or with no
//     marker while the leader confirms the topic absent (S1);
//   - .stale/<t>@<inc> once the leader confirms that incarnation gone (docs/internals/storage-format.md §15).
//
// Quarantined copies are never removed by it, only counted. It needs a caught-up replica;
// otherwise it does nothing (deferring is free). It updates the narad_orphan_topic_dirs
// (marker-less dirs left in place) and narad_quarantined_* gauges. The running sweep
// (sweepLoop) does the same except that it only counts marker-less dirs, unless the startup
// sweep never ran caught up: then its first caught-up run removes them once.
//
// With sweepLoop it is the one remover of the deleted topics' data that a delete's apply did
// not purge; the stale-copy sweep (move/sweep) judges only copies of live topics and leaves
// these alone (docs/internals/data-directory.md, "Who removes what").
func (e *Engine) SweepOrphans(ctx context.Context) SweepResult {
	return e.sweepOrphans(ctx, true)
}

// runningSweep is one run of the periodic sweep.
func (e *Engine) runningSweep(ctx context.Context) SweepResult {
	return e.sweepOrphans(ctx, !e.markerlessSwept.Load())
}

// sweepOrphans is one sweep; markerless says whether marker-less dirs of unknown topics may
// be removed (the startup sweep's job) or only counted.
func (e *Engine) sweepOrphans(ctx context.Context, markerless bool) SweepResult {
	var res SweepResult
	if !e.meta.AppliedCaughtUp() {
		res.Deferred = true
		return res
	}
	if markerless {
		defer e.markerlessSwept.Store(true)
	}
	dirs := e.layout()
	if entries, err := os.ReadDir(dirs.Topics()); err == nil {
		for _, ent := range entries {
			name, ok := datadir.ParseTopicDirName(ent.Name())
			if !ent.IsDir() || !ok {
				continue
			}
			marker, hasMarker := readMarker(dirs.TopicDir(name))
			if t, ok := e.view.Topic(name); ok && (!hasMarker || t.Incarnation == marker) {
				continue // the live topic's data (or a pre-incarnation dir of a live topic)
			}
			if !hasMarker && !markerless {
				res.Orphans++ // only counted at runtime: removing it is the startup sweep's job
				res.Markerless++
				continue
			}
			if gone, err := e.confirmGone(ctx, name, marker); err == nil && gone {
				if ok, _ := e.removeUnderGuard(name, dirs.TopicDir(name), marker, hasMarker); ok {
					res.Removed++
					continue
				}
			}
			res.Orphans++
			if !hasMarker {
				res.Markerless++
			}
		}
	}
	if entries, err := os.ReadDir(dirs.StaleRoot()); err == nil {
		for _, ent := range entries {
			st, ok := datadir.ParseStaleEntry(ent.Name())
			if !ent.IsDir() || !ok {
				continue
			}
			if gone, err := e.confirmGone(ctx, st.Topic, st.Incarnation); err == nil && gone {
				if ok, _ := e.RemoveStaleDir(st.Topic, st.Incarnation); ok {
					res.Removed++
				}
			}
		}
	}
	// Quarantined copies (p*.quarantine, .moves/*.quarantine, what .stale still holds) are
	// only counted: they wait for an operator (docs/internals/storage-format.md §17).
	for _, q := range e.refreshQuarantine() {
		res.Quarantined++
		res.QuarBytes += q.Bytes
	}
	e.m.OrphanTopicDirs.Set(float64(res.Markerless))
	return res
}

// confirmGone asks the leader whether topic (with incarnation inc, "" = any) is gone.
func (e *Engine) confirmGone(ctx context.Context, topic, inc string) (bool, error) {
	if err := faults.Check(FaultSweepConfirm); err != nil {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, found, err := e.meta.ConfirmTopic(cctx, topic)
	if err != nil {
		return false, err
	}
	return !found || (inc != "" && t.Incarnation != inc), nil
}

// removeUnderGuard deletes a topic dir under the topic open guard after re-checking that no
// live incarnation claims it and its marker did not change meanwhile; logs of the topic still
// registered for another incarnation are closed first. removed=false, nil: the re-check refused.
func (e *Engine) removeUnderGuard(topic, dir, marker string, hadMarker bool) (removed bool, err error) {
	g := e.parts.Guard(topic)
	g.Lock()
	defer g.Unlock()
	now, has, err := datadir.ReadIncarnation(dir)
	if err != nil {
		return false, err
	}
	if has != hadMarker || now != marker {
		return false, nil
	}
	t, ok := e.meta.Topic(topic)
	if ok && (!has || t.Incarnation == now) {
		return false, nil
	}
	for _, pt := range e.parts.Snapshot() {
		if pt.Topic() == topic && (!ok || pt.Incarnation() != t.Incarnation) {
			e.parts.ClosePartition(pt)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		e.log.Error("remove orphan topic dir", "topic", topic, "err", err)
		return false, err
	}
	if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
		return true, err
	}
	e.refreshQuarantine()
	e.log.Info("removed orphan topic dir", "topic", topic, "incarnation", marker)
	return true, nil
}

func readMarker(topicDir string) (string, bool) {
	v, ok, err := datadir.ReadIncarnation(topicDir)
	return v, ok && err == nil
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// sweepLoop runs the running sweep every sweepInterval.
func (e *Engine) sweepLoop(ctx context.Context) {
	every(ctx, sweepInterval, func() { e.runningSweep(ctx) })
}
