package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"narad.dev/broker/internal/durable"
)

// sweepInterval paces the running sweep after the one at boot.
const sweepInterval = 5 * time.Minute

// SweepResult says what a sweep did.
type SweepResult struct {
	Removed     int   // topic dirs and .stale dirs deleted after the leader confirmed them gone
	Orphans     int   // topic dirs left in place: unknown topic, deletion not confirmed
	Quarantined int   // .stale dirs still set aside
	QuarBytes   int64 // their size
}

// SweepOrphans removes data the metastore no longer accounts for, and only with a
// leader-confirmed read behind it (spec/cluster.md §9: no node deletes data on the strength of
// its local replica alone; every failure to confirm keeps the data):
//   - topics/<t> whose .incarnation names an incarnation the leader confirms gone, or with no
//     marker while the leader confirms the topic absent (S1);
//   - .stale/<t>@<inc> once the leader confirms that incarnation gone (spec/storage.md §14).
//
// It needs a caught-up replica; otherwise it does nothing (deferring is free). It updates the
// narad_orphan_topic_dirs and narad_quarantined_* gauges.
func (e *Engine) SweepOrphans(ctx context.Context) SweepResult {
	var res SweepResult
	if !e.meta.AppliedCaughtUp() {
		return res
	}
	topicsDir := filepath.Join(e.cfg.DataDir, "topics")
	if entries, err := os.ReadDir(topicsDir); err == nil {
		for _, ent := range entries {
			if !ent.IsDir() || durable.IsTemp(ent.Name()) {
				continue
			}
			name := ent.Name()
			marker, hasMarker := readMarker(filepath.Join(topicsDir, name))
			if t, ok := e.view.Topic(name); ok && (!hasMarker || t.Incarnation == marker) {
				continue // the live topic's data (or a pre-incarnation dir of a live topic)
			}
			if gone, err := e.confirmGone(ctx, name, marker); err != nil || !gone {
				res.Orphans++
				continue
			}
			if e.removeUnderGuard(name, filepath.Join(topicsDir, name), marker, hasMarker) {
				res.Removed++
			} else {
				res.Orphans++
			}
		}
	}
	staleDir := filepath.Join(e.cfg.DataDir, ".stale")
	if entries, err := os.ReadDir(staleDir); err == nil {
		for _, ent := range entries {
			topic, inc, ok := strings.Cut(ent.Name(), "@")
			if !ent.IsDir() || !ok {
				continue
			}
			path := filepath.Join(staleDir, ent.Name())
			if gone, err := e.confirmGone(ctx, topic, inc); err == nil && gone {
				if err := os.RemoveAll(path); err == nil {
					_ = durable.SyncDir(staleDir)
					res.Removed++
					e.log.Info("removed a deleted incarnation's data", "topic", topic, "incarnation", inc)
					continue
				}
			}
			res.Quarantined++
			res.QuarBytes += dirSize(path)
		}
	}
	e.m.OrphanTopicDirs.Set(float64(res.Orphans))
	e.m.QuarantinedCopies.Set(float64(res.Quarantined))
	e.m.QuarantinedBytes.Set(float64(res.QuarBytes))
	return res
}

// confirmGone asks the leader whether topic (with incarnation inc, "" = any) is gone.
func (e *Engine) confirmGone(ctx context.Context, topic, inc string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, found, err := e.meta.ConfirmTopic(cctx, topic)
	if err != nil {
		return false, err
	}
	return !found || (inc != "" && t.Incarnation != inc), nil
}

// removeUnderGuard deletes a topic dir under the topic open guard after re-checking that no
// live incarnation claims it and its marker did not change meanwhile.
func (e *Engine) removeUnderGuard(topic, dir, marker string, hadMarker bool) bool {
	g := e.parts.guard(topic)
	g.Lock()
	defer g.Unlock()
	now, has := readMarker(dir)
	if has != hadMarker || now != marker {
		return false
	}
	if t, ok := e.view.Topic(topic); ok && (!has || t.Incarnation == now) {
		return false
	}
	if err := os.RemoveAll(dir); err != nil {
		e.log.Error("remove orphan topic dir", "topic", topic, "err", err)
		return false
	}
	_ = durable.SyncDir(filepath.Dir(dir))
	e.log.Info("removed orphan topic dir", "topic", topic, "incarnation", marker)
	return true
}

func readMarker(topicDir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(topicDir, incarnationFile))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
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

// sweepLoop runs SweepOrphans every sweepInterval.
func (e *Engine) sweepLoop(ctx context.Context) {
	every(ctx, sweepInterval, func() { e.SweepOrphans(ctx) })
}
