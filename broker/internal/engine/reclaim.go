package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

// FaultReclaimBeforeRemove fires after a stale copy was judged removable, before it is
// removed.
const FaultReclaimBeforeRemove = "engine.reclaim_before_remove"

// ErrCopyClaimed refuses a reclaim of a partition that the local replica says this node owns
// or is the move target of: its path holds (or is about to hold) live data.
var ErrCopyClaimed = errors.New("partition is owned by or moving to this node")

// The stale-copy sweep's guarded filesystem steps (docs/internals/moves.md §9). Each one closes the
// partition's log and drops its consumer state, then acts under the topic's open guard and only
// while (a) the local replica says the partition is neither owned by nor targeted at this
// node, and (b) the topic directory's marker is absent or names the incarnation the caller
// read from the metastore before it checked ownership. A delete and recreate in between, with
// this node opening the successor's partition under the path, thus refuses the step instead
// of removing the successor's directory (transfer.ErrIncarnationChanged).

// SetAsideCopy is the quarantine WITHOUT recovery of docs/internals/moves.md §9.3: when the local copy
// of (topic, partition) holds records retention has not expired (retentionMs, segment mtimes;
// 0 keeps everything) it is renamed to pNNNNN.quarantine[-N] untouched, else it is removed.
// It returns the quarantine path, "" when the copy was removed.
func (e *Engine) SetAsideCopy(topic string, partition int, incarnation string, retentionMs int64) (quarantinedTo string, err error) {
	err = e.withStaleCopy(topic, partition, incarnation, func(path string) error {
		u, err := plog.UnexpiredRecords(path, retentionMs, e.now())
		if err != nil {
			return err
		}
		if !u.Any() {
			return e.removeCopy(path)
		}
		quarantinedTo, err = e.quarantineDir(path)
		return err
	})
	return quarantinedTo, err
}

// ReclaimCopy is the guarded reclaim of docs/internals/moves.md §9.4: a copy without unexpired records
// is removed without recovery; otherwise the copy is recovered (opened as a log and closed)
// and removed when its next offset is at most vouched, the position the owner vouches for,
// or quarantined when it is ahead (records the owner never got; an operator reconciles).
// A copy that fails to recover is quarantined too. It returns the quarantine path ("" when
// removed) and the recovered next offset (-1 when the copy was not recovered).
func (e *Engine) ReclaimCopy(topic string, partition int, incarnation string, retentionMs, vouched int64) (quarantinedTo string, next int64, err error) {
	next = -1
	err = e.withStaleCopy(topic, partition, incarnation, func(path string) error {
		u, err := plog.UnexpiredRecords(path, retentionMs, e.now())
		if err != nil {
			return err
		}
		if !u.Any() {
			return e.removeCopy(path)
		}
		l, err := plog.Open(path, plog.Options{Logger: e.log.With("topic", topic, "partition", partition), Now: e.now})
		if err != nil {
			// A copy that cannot be recovered cannot be judged: set it aside, never delete it.
			e.log.Warn("stale copy does not recover; quarantining it", "topic", topic, "partition", partition,
				"path", path, "err", err)
			quarantinedTo, err = e.quarantineDir(path)
			return err
		}
		next = l.NextOffset()
		if err := l.Close(); err != nil {
			return fmt.Errorf("close recovered %s: %w", path, err)
		}
		if next <= vouched {
			return e.removeCopy(path)
		}
		quarantinedTo, err = e.quarantineDir(path)
		return err
	})
	return quarantinedTo, next, err
}

// withStaleCopy runs act on the partition path under the checks shared by the reclaim steps.
func (e *Engine) withStaleCopy(topic string, partition int, incarnation string, act func(path string) error) error {
	if e.claimed(topic, partition) {
		return fmt.Errorf("%s/%d: %w", topic, partition, ErrCopyClaimed)
	}
	e.DropConsumerState(topic, partition)
	r := e.parts
	g := r.Guard(topic)
	g.Lock()
	defer g.Unlock()
	if e.claimed(topic, partition) { // again under the guard: a flip or target may have landed
		return fmt.Errorf("%s/%d: %w", topic, partition, ErrCopyClaimed)
	}
	have, ok, err := datadir.ReadIncarnation(r.TopicDir(topic))
	if err != nil {
		return err
	}
	if ok && have != incarnation {
		return fmt.Errorf("%s/%d: topic dir marker %q, read %q: %w", topic, partition, have, incarnation, transfer.ErrIncarnationChanged)
	}
	path := r.PartitionDir(topic, partition)
	if _, err := os.Lstat(path); err != nil {
		return fmt.Errorf("%s/%d: %w", topic, partition, err)
	}
	r.DropOpen(topic, partition)
	return act(path)
}

// claimed reports whether the local replica gives (topic, partition) to this node: it owns
// it, is one of its replicas (docs/internals/replication.md §1) or is the target of its move.
func (e *Engine) claimed(topic string, partition int) bool {
	a, ok := e.meta.Assignment(topic, partition)
	return ok && (a.Owner == e.cfg.NodeID || a.Target == e.cfg.NodeID || slices.Contains(a.ReplicaSet(), e.cfg.NodeID))
}

// removeCopy deletes a partition copy and fsyncs its parent.
func (e *Engine) removeCopy(path string) error {
	if err := faults.Check(FaultReclaimBeforeRemove); err != nil {
		return err
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// RemoveStaleDir removes .stale/<topic>@<incarnation>, a deleted incarnation's directory set
// aside by a preparation (docs/internals/storage-format.md §15). The caller has the leader's confirmation that
// incarnation is gone; under the topic open guard this re-checks that the local record does
// not name it.
func (e *Engine) RemoveStaleDir(topic, incarnation string) (removed bool, err error) {
	g := e.parts.Guard(topic)
	g.Lock()
	defer g.Unlock()
	if t, ok := e.meta.Topic(topic); ok && t.Incarnation == incarnation {
		return false, nil
	}
	dir := e.layout().StaleDir(topic, incarnation)
	if _, err := os.Lstat(dir); err != nil {
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
		return true, err
	}
	e.refreshQuarantine()
	e.log.Info("removed a deleted incarnation's data", "topic", topic, "incarnation", incarnation, "path", dir)
	return true, nil
}
