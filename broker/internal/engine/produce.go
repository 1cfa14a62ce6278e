package engine

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync/atomic"

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
