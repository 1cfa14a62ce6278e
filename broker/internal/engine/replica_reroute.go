package engine

import (
	"context"
	"errors"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// Keyless produce to a replicated topic (docs/internals/replication.md §2): a partition below
// min_insync_replicas refuses every produce with 503 not_enough_replicas, and a keyless record
// has no reason to be there, so it goes to a partition that can take it — as the pick already
// steers around a dead owner. Keyed and pinned records keep their partition and its 503.

// canTake reports whether the local replica shows partition p of t able to take a produce: a
// leader that is not a dead member and an ISR of at least min_insync_replicas.
func (e *Engine) canTake(t meta.Topic, p int) bool {
	a, ok := e.view.Assignment(t.Name, p)
	return ok && a.Owner != "" && len(a.InSync()) >= t.MinISR() && !e.ownerOf(t.Name, p).dead
}

// writablePartition is p when it can take a produce, else the next partition p+1, p+2, …
// mod n that can; p when none can (its leader then answers the 503).
func (e *Engine) writablePartition(t meta.Topic, p int) int {
	if e.meta == nil { // unit tests of the pick rule run without a metastore
		return p
	}
	for i := range t.Partitions {
		if q := (p + i) % t.Partitions; e.canTake(t, q) {
			return q
		}
	}
	return p
}

// commitKeyless commits a keyless batch at partition p's leader through commit; when the
// leader answers not_enough_replicas (its ISR shrank before the local replica showed it) the
// batch goes to the next partition, in p+1, p+2, … order, that the local replica shows able
// to take it and that has not refused it, until one takes it or none is left (the last
// refusal is answered). A leader that refused after appending may still commit its copy
// later: the batch may then be stored twice, as after a client's retry, never lost.
func (e *Engine) commitKeyless(ctx context.Context, t meta.Topic, p int, recs []wal.Record,
	commit func(context.Context, meta.Topic, int, []wal.Record) error) error {
	refused := map[int]bool{}
	for {
		err := commit(ctx, t, p, recs)
		if err == nil || !errors.Is(err, errcode.ErrNotEnoughReplicas) {
			return err
		}
		refused[p] = true
		next := -1
		for i := 1; i < t.Partitions && next < 0; i++ {
			if q := (p + i) % t.Partitions; !refused[q] && e.canTake(t, q) {
				next = q
			}
		}
		if next < 0 {
			return err
		}
		p = next
		for i := range recs {
			recs[i].Partition = uint32(p)
		}
	}
}
