package engine

import (
	"context"
	"fmt"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// CommitLocal is the owner-side commit of one batch for one partition
// (docs/internals/produce-path.md §8): it refuses an empty batch or a partition out of range
// (errcode.ErrInvalid) and a topic the local replica does not have in incarnation
// (errcode.ErrTopicGone), then passes the batch to the produce gate (partition.Registry.Commit:
// owner and handoff freeze checked before the produce lock and again under it, commit time
// stamped and raised to the floor, then the log commit). It returns the first assigned offset.
func (e *Engine) CommitLocal(ctx context.Context, topic, incarnation string, p int, recs []wal.Record) (int64, error) {
	if len(recs) == 0 {
		return 0, fmt.Errorf("empty batch: %w", errcode.ErrInvalid)
	}
	t, ok := e.view.Topic(topic)
	if !ok || (incarnation != "" && t.Incarnation != incarnation) {
		return 0, fmt.Errorf("%s: %w", topic, errcode.ErrTopicGone)
	}
	if p < 0 || p >= t.Partitions {
		return 0, fmt.Errorf("partition %d of %s: %w", p, topic, errcode.ErrInvalid)
	}
	if replicated(t) {
		return e.parts.CommitReplicated(ctx, t, p, recs) // under the caller's deadline
	}
	return e.parts.Commit(t, p, recs)
}

// raiseFloor returns max(t0, newest commit time of (topic, p)) and records it (§5.2 step 7):
// the registry's Deps.RaiseFloor. The floor outlives a log's close and reopen.
func (e *Engine) raiseFloor(topic string, p int, t0 int64) int64 {
	k := partKey{topic, p}
	e.floorMu.Lock()
	defer e.floorMu.Unlock()
	if f := e.floor[k]; f > t0 {
		t0 = f
	}
	e.floor[k] = t0
	return t0
}

// owns reports whether the local replica says this node owns (topic, p).
func (e *Engine) owns(topic string, p int) bool {
	a, ok := e.view.Assignment(topic, p)
	return ok && a.Owner == e.cfg.NodeID
}

// ownedPartitions lists the partitions of t this node owns.
func (e *Engine) ownedPartitions(t meta.Topic) []int {
	var out []int
	for _, a := range e.view.Assignments(t.Name) {
		if a.Owner == e.cfg.NodeID && a.Partition < t.Partitions {
			out = append(out, a.Partition)
		}
	}
	return out
}
