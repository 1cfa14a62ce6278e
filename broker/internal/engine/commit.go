package engine

import (
	"context"
	"errors"
	"fmt"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// CommitLocal is the owner-side commit of one batch for one partition
// (docs/internals/produce-path.md §8): gates (owner, handoff freeze: checked before the produce
// lock and again under it, so a refused commit appends nothing), commit time stamped before the produce lock and
// raised under it to the newest time committed, then the log's append → fsync → verify →
// hwm persist → advance. It returns the first assigned offset.
//
// Invariant: commit times never decrease along a partition within this process.
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
	if !e.owns(topic, p) {
		return 0, fmt.Errorf("%s/%d: %w", topic, p, errcode.ErrNotOwner)
	}
	pt, err := e.parts.get(t, p)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	if pt.frozen() { // fast gate (docs/internals/moves.md §3.2): a handoff freeze refuses commits
		return 0, frozenErr(topic, p)
	}
	if err := faults.Check(FaultCommitAfterGate); err != nil {
		return 0, fmt.Errorf("commit %s/%d: %w: %v", topic, p, errcode.ErrUnavailable, err)
	}
	t0 := e.now().UnixMilli() // seed: stamped before the produce lock

	pt.commitMu.Lock()
	defer pt.commitMu.Unlock()
	if !e.owns(topic, p) { // seed: gate re-checked under the lock, nothing appended on a hit
		return 0, fmt.Errorf("%s/%d: %w", topic, p, errcode.ErrNotOwner)
	}
	if e.parts.peek(topic, p) != pt {
		return 0, fmt.Errorf("%s/%d closed during commit: %w", topic, p, errcode.ErrUnavailable)
	}
	if pt.frozen() { // seed: a freeze armed since the fast gate refuses with nothing appended
		return 0, frozenErr(topic, p)
	}
	ts := e.raiseFloor(partKey{topic, p}, t0)

	entries := make([]plog.Entry, len(recs))
	var bytes int
	for i := range recs {
		entries[i] = plog.Entry{Key: []byte(recs[i].Key), Payload: recs[i].Payload}
		bytes += len(recs[i].Payload)
	}
	taken := e.localTaker(topic) // before the commit wakes local waiters
	first, err := pt.log.Commit(entries, ts)
	if err != nil {
		e.m.Errors.WithLabelValues("messaging", "append").Inc()
		if errors.Is(err, plog.ErrFailed) || errors.Is(err, plog.ErrClosed) {
			// The log needs a reopen so recovery decides the tail; the next Get does it.
			go e.parts.closePartition(pt)
		}
		return 0, fmt.Errorf("commit %s/%d: %w: %v", topic, p, errcode.ErrUnavailable, err)
	}
	e.notifyPeers(topic, p, taken)
	e.m.MessagesProduced.WithLabelValues(pt.labels[0], pt.labels[1]).Add(float64(len(recs)))
	e.m.BytesProduced.WithLabelValues(pt.labels[0], pt.labels[1]).Add(float64(bytes))
	return first, nil
}

// frozenErr is the 503 of a commit refused by a handoff freeze.
func frozenErr(topic string, p int) error {
	return fmt.Errorf("%s/%d: %w: %w", topic, p, ErrFrozen, errcode.ErrUnavailable)
}

// raiseFloor returns max(t0, newest commit time of k) and records it (§5.2 step 7).
func (e *Engine) raiseFloor(k partKey, t0 int64) int64 {
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
