package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// ErrFrozen: the partition is frozen for a move's handoff (docs/internals/moves.md §3). A commit refused
// with it appended nothing; it also wraps errcode.ErrUnavailable (503), which the dispatcher and
// the fan-out cursors retry like any 503.
var ErrFrozen = errors.New("partition frozen for a move handoff")

// FaultCommitAfterGate fires in Commit after the first freeze gate, before the produce lock;
// an error there fails the commit (503) with nothing appended. (Its name predates the
// package.)
const FaultCommitAfterGate = "engine.commit_after_gate"

// Commit is the produce gate and the owner-side commit of one non-empty batch to partition p
// of t (docs/internals/produce-path.md §8). A partition of a replicated topic commits with
// CommitReplicated instead. In order:
//
//  1. this node must own (t, p) in the local replica: errcode.ErrNotOwner;
//  2. Get opens the log: a failure wraps errcode.ErrUnavailable;
//  3. the fast freeze gate: ErrFrozen (wrapping errcode.ErrUnavailable);
//  4. the commit time t0 is stamped before the produce lock;
//  5. the batch joins the partition's append group (group.go): concurrent commits go to the
//     log as one, at the latest of their commit times;
//  6. under the produce lock, ownership, registration (a log closed meanwhile wraps
//     errcode.ErrUnavailable) and the freeze are checked again, so a refused commit appends
//     nothing; the commit time is raised to the partition's floor (Deps.RaiseFloor);
//  7. the log's append → fsync → verify → hwm persist → advance, once for the group; a
//     failure wraps errcode.ErrUnavailable for every batch of it, and a failed or closed log
//     is closed so the next Get reopens it and recovery decides the tail.
//
// It returns the first assigned offset. Invariant: commit times never decrease along a
// partition within this process.
func (r *Registry) Commit(t meta.Topic, p int, recs []wal.Record) (int64, error) {
	if t.RF() >= 2 {
		// Every commit to a replicated partition (the dispatcher's, fan-out's, a peer's) waits
		// for the ISR, so the HWM never passes a record the followers lack.
		ctx, cancel := context.WithTimeout(context.Background(), ReplicatedCommitTimeout)
		defer cancel()
		return r.CommitReplicated(ctx, t, p, recs)
	}
	topic := t.Name
	if !r.d.Owns(topic, p) {
		return 0, fmt.Errorf("%s/%d: %w", topic, p, errcode.ErrNotOwner)
	}
	pt, err := r.Get(t, p)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	if pt.Frozen() { // fast gate (docs/internals/moves.md §3.2): a handoff freeze refuses commits
		return 0, frozenErr(topic, p)
	}
	if err := faults.Check(FaultCommitAfterGate); err != nil {
		return 0, fmt.Errorf("commit %s/%d: %w: %v", topic, p, errcode.ErrUnavailable, err)
	}
	t0 := r.d.Now().UnixMilli() // seed: stamped before the produce lock

	// Concurrent commits of the partition (several dispatchers, fan-out, peers) join into one
	// log commit (group.go), which re-checks the gate under the produce lock.
	taken := r.d.Taker(topic) // before the commit wakes local waiters
	b := newGroupBatch(nil, recs, t0)
	r.appendGrouped(pt, b)
	if b.err != nil {
		return 0, b.err
	}
	r.d.Notify(topic, p, taken)
	return b.first, nil
}

// frozenErr is the 503 of a commit refused by a handoff freeze.
func frozenErr(topic string, p int) error {
	return fmt.Errorf("%s/%d: %w: %w", topic, p, ErrFrozen, errcode.ErrUnavailable)
}

// ReplicatedCommitTimeout bounds Commit's wait for the ISR of a replicated partition (the
// node RPC commit's own deadline, 30 s, is the same).
const ReplicatedCommitTimeout = 30 * time.Second

// errNoLeadership: this node owns a replicated partition in the local replica but has not
// taken up its leadership yet (the replication manager does it on the assignment's apply);
// 503, retried.
var errNoLeadership = errcode.Sub("leadership not taken up yet", errcode.ErrUnavailable)

// CommitReplicated is Commit for a partition of a replicated topic
// (docs/internals/replication.md §4): the same gate, then, under the produce lock, the
// leadership's check that the ISR has min_insync_replicas members
// (errcode.ErrNotEnoughReplicas, nothing appended) and an append to the hidden tail, joined
// with the batches of concurrent callers into one append and fsync (group.go); then, outside
// the lock so appends of other producers follow at once, a wait until the HWM passes the
// batch. A failure of the wait (ISR below the minimum, leadership lost, ctx ended) means
// the outcome is unknown: the records may still become visible, and a retry may duplicate
// them. It returns the first assigned offset.
func (r *Registry) CommitReplicated(ctx context.Context, t meta.Topic, p int, recs []wal.Record) (int64, error) {
	topic := t.Name
	if !r.d.Owns(topic, p) {
		return 0, fmt.Errorf("%s/%d: %w", topic, p, errcode.ErrNotOwner)
	}
	ld, ok := r.d.Leader(topic, p)
	if !ok {
		return 0, fmt.Errorf("%s/%d: %w", topic, p, errNoLeadership)
	}
	pt, err := r.Get(t, p)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	// Before the append, as Commit reads it before its commit: a long-poll parked here now is
	// woken by the HWM advance that makes these records visible and takes them, so peers'
	// long-polls need not be woken to probe for them (docs/internals/replication.md §4). It is
	// read again after the wait: a long-poll that started here meanwhile takes them as well.
	taken := r.d.Taker(topic)
	b := newGroupBatch(ld, recs, r.d.Now().UnixMilli())
	r.appendGrouped(pt, b)
	if b.err != nil {
		return 0, b.err
	}
	if err := ld.WaitCommitted(ctx, b.end); err != nil {
		return 0, fmt.Errorf("commit %s/%d: outcome unknown: %w", topic, p, err)
	}
	r.d.Notify(topic, p, taken || r.d.Taker(topic))
	return b.first, nil
}
