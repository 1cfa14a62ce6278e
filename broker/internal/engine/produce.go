package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// Produce is the accept path on any node (docs/internals/produce-path.md §2): admit, refuse if
// draining, resolve partitions from the local replica (no liveness check), and append every
// record to the ingress WAL under one fsync. It returns only after the records are durable.
func (e *Engine) Produce(ctx context.Context, t meta.Topic, recs []service.ProduceRecord) error {
	e.admitted.Add(1) // seed: increment before reading the draining flag
	defer e.admitted.Add(-1)
	if e.draining.Load() {
		e.m.ProduceRejections.WithLabelValues(t.Name, "draining").Inc()
		return fmt.Errorf("%w", errcode.ErrDraining)
	}
	if replicated(t) {
		return e.produceReplicated(ctx, t, recs)
	}
	now := e.now().UnixMilli()
	out := make([]wal.Record, len(recs))
	for i, r := range recs {
		out[i] = wal.Record{
			Topic:        t.Name,
			Incarnation:  t.Incarnation,
			Key:          r.Key,
			Partition:    uint32(e.pickPartition(t, r)),
			AcceptedAtMs: now,
			Payload:      r.Payload,
		}
	}
	if _, err := e.wal.Append(ctx, out...); err != nil {
		e.m.Errors.WithLabelValues("ingress", "append").Inc()
		// The client learns only that it may retry; paths and causes go to the log (the WAL
		// logs each failure once, when it fails closed).
		return fmt.Errorf("%w: the node cannot write its ingress log right now (disk full or I/O error); retry", errcode.ErrUnavailable)
	}
	return nil
}

// produceReplicated is the accept path of a replicated topic (docs/internals/replication.md
// §4): the records of each partition are committed at its leader, here or over node RPC, and
// Produce returns only once every batch is below its partition's HWM, so fsynced on at least
// min_insync_replicas replicas. The ingress WAL is not used: it would make the answering node's
// disk the durability point. The partitions' batches are committed concurrently; a failure of
// one (the first in pick order is answered) leaves the others committed (a retry duplicates
// them); a failed wait means the outcome of that batch is unknown.
//
// The keyless records of one request all go to one partition, the next in the topic's
// round-robin: one leader commit and one replication round trip for the batch instead of one
// per partition, in larger groups (per-record round-robin would spread a batch of 100 over
// every leader and make it wait for the slowest). Successive requests still take the
// partitions in turn.
//
// Keyless records avoid partitions that cannot take them (replica_reroute.go): the pick skips
// a partition whose ISR, in the local replica, is below min_insync_replicas, and a keyless
// batch its leader refuses with not_enough_replicas goes to another partition. Keyed and
// pinned records keep their partition and its 503.
func (e *Engine) produceReplicated(ctx context.Context, t meta.Topic, recs []service.ProduceRecord) error {
	now := e.now().UnixMilli()
	type group struct {
		p     int
		loose bool // keyless: may go to another partition
	}
	groups := map[group][]wal.Record{}
	var order []group
	keyless := -1 // the one partition of this request's keyless records
	for _, r := range recs {
		g := group{loose: r.Partition < 0 && r.Key == ""}
		switch {
		case !g.loose:
			g.p = e.pickPartition(t, r)
		case keyless < 0:
			keyless = e.writablePartition(t, e.pickPartition(t, r))
			fallthrough
		default:
			g.p = keyless
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], wal.Record{Topic: t.Name, Incarnation: t.Incarnation, Key: r.Key,
			Partition: uint32(g.p), AcceptedAtMs: now, Payload: r.Payload})
	}
	commit := func(g group) error {
		if g.loose {
			return e.commitKeyless(ctx, t, g.p, groups[g], e.commitAtLeader)
		}
		return e.commitAtLeader(ctx, t, g.p, groups[g])
	}
	if len(order) == 1 {
		return commit(order[0])
	}
	// The partitions' commits run at once: each waits for its own ISR, so a batch spread
	// over n partitions costs one replication round trip, not n.
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, g := range order {
		wg.Go(func() { errs[i] = commit(g) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// commitAtLeader commits recs to partition p of replicated topic t at its leader and waits for
// the HWM to pass them. A remote commit follows the leadership when it moves while the call is
// pending (commitRemoteFollowing), at most maxLeaderFollows times.
func (e *Engine) commitAtLeader(ctx context.Context, t meta.Topic, p int, recs []wal.Record) error {
	for follows := 0; ; follows++ {
		var epoch uint64 // read before the destination: a change in between is seen as a move
		if a, ok := e.view.Assignment(t.Name, p); ok {
			epoch = a.LeaderEpoch
		}
		d := e.Topology().Destination(t.Name, p)
		switch d.Kind {
		case dispatch.DestLocal:
			_, err := e.parts.CommitReplicated(ctx, t, p, recs)
			return leaderCommitError(err)
		case dispatch.DestRemote:
			if e.peers == nil {
				return fmt.Errorf("%s/%d: %w", t.Name, p, errcode.ErrOwnerDown)
			}
			moved, err := e.commitRemoteFollowing(ctx, t, p, d.Addr, epoch, recs)
			if !moved {
				return leaderCommitError(err)
			}
			if follows == maxLeaderFollows {
				return fmt.Errorf("%s/%d: %w", t.Name, p, errLeaderMoved)
			}
			e.log.Debug("produce follows a partition leadership that moved", "topic", t.Name, "partition", p,
				"from", d.Node, "epoch", epoch)
			continue
		}
		return fmt.Errorf("%s/%d: leader %s: %w", t.Name, p, d.Node, errcode.ErrOwnerDown)
	}
}

// leaderCommitError is what a producer is told of a failed commit at a leader: a leadership
// that moved or ended during the commit (not the owner, deposed) is a 503 to retry, like an
// owner that is down; its outcome may be unknown, never a loss.
func leaderCommitError(err error) error {
	if err != nil && errors.Is(err, errcode.ErrNotOwner) && !errors.Is(err, errcode.ErrUnavailable) {
		return fmt.Errorf("%w: the partition's leadership moved: %v", errcode.ErrUnavailable, err)
	}
	return err
}

// pickPartition: pinned → it; keyed → FNV-1a-32(key) mod n; keyless → round-robin, one
// counter per topic. Keyed and keyless picks skip partitions whose owner the local replica
// shows dead (the next partition p+1, p+2, … mod n with a live owner), so new records do not
// queue behind a dead owner; the dispatcher still reroutes what was accepted before the owner
// died. Per-key order across such a skip is lost (docs/internals/http-api.md §4.3).
func (e *Engine) pickPartition(t meta.Topic, r service.ProduceRecord) int {
	n := t.Partitions
	var p int
	switch {
	case r.Partition >= 0:
		return r.Partition
	case r.Key != "":
		p = keyPartition(r.Key, n)
	default:
		p = int(e.roundRobin(t.Name).Add(1) % uint32(n))
	}
	if e.meta == nil { // unit tests of the pick rule run without a metastore
		return p
	}
	for i := 0; i < n; i++ {
		q := (p + i) % n
		if !e.ownerOf(t.Name, q).dead {
			return q
		}
	}
	return p // every owner dead: the dispatcher holds the records until one returns
}

// keyPartition is the partition a key hashes to among n (FNV-1a), before dead owners are
// skipped.
func keyPartition(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

func (e *Engine) roundRobin(topic string) *atomic.Uint32 {
	e.rrMu.Lock()
	defer e.rrMu.Unlock()
	c := e.rr[topic]
	if c == nil {
		c = new(atomic.Uint32)
		e.rr[topic] = c
	}
	return c
}
