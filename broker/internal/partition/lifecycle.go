package partition

import (
	"time"

	plog "narad.dev/broker/internal/log"
)

// PurgeExpired releases the expired leases of every open partition's shard (the engine's
// one-second purge loop, docs/internals/consume-and-leases.md §6).
func (r *Registry) PurgeExpired() {
	for _, pt := range r.Snapshot() {
		if s := pt.Shard(); s != nil {
			s.PurgeExpired()
		}
	}
}

// CloseLost closes every open partition whose assignment in the local replica no longer
// names this node as owner or replica (a move's flip applied, or the topic is gone): its log and shard close, so
// leases answer 410, its handoff freeze ends, and long-poll waiters wake and re-route
// (docs/internals/consume-and-leases.md §7, docs/internals/moves.md §3.3 rule 4).
func (r *Registry) CloseLost() {
	for _, pt := range r.Snapshot() {
		r.CloseIfLost(pt.key.topic, pt.key.p)
	}
}

// CloseIfLost closes (topic, p) if it is open here and this node neither owns it nor is one
// of its replicas.
func (r *Registry) CloseIfLost(topic string, p int) {
	pt := r.Peek(topic, p)
	if pt == nil || r.d.Owns(topic, p) || r.replicates(topic, p) {
		return
	}
	r.d.Logger.Info("partition closed: ownership moved away", "topic", topic, "partition", p)
	r.ClosePartition(pt)
}

// EvictIdle closes logs untouched for IdleLogEviction once retention owes nothing, no lease
// is out and no handoff freeze is active (docs/internals/storage-format.md §11), and sets
// the open-logs gauge.
func (r *Registry) EvictIdle() {
	idle := r.d.IdleLogEviction
	open := r.Snapshot()
	defer func() { r.d.Metrics.OpenPartitionLogs.Set(float64(len(r.Snapshot()))) }()
	if idle <= 0 {
		return
	}
	now := r.d.Now()
	for _, pt := range open {
		if now.Sub(time.Unix(0, pt.lastAccess.Load())) < idle {
			continue
		}
		t, ok := r.d.Topic(pt.key.topic)
		if ok && pt.log.RetentionOwed(t.RetentionMs, now) {
			continue
		}
		pt.shardMu.Lock()
		busy := pt.shard != nil && pt.shard.State().InFlight > 0
		busy = busy || pt.frz.active(time.Now()) // closing would end a move's handoff freeze
		pt.shardMu.Unlock()
		if busy {
			continue
		}
		r.ClosePartition(pt)
		r.d.Metrics.IdleLogsEvicted.Inc()
	}
}

// RetainOpen deletes the expired sealed segments of every open log of a live incarnation
// (docs/internals/storage-format.md §10).
func (r *Registry) RetainOpen() {
	now := r.d.Now()
	for _, pt := range r.Snapshot() {
		t, ok := r.d.Topic(pt.key.topic)
		if !ok || t.Incarnation != pt.incarnation {
			continue
		}
		start := time.Now()
		res, err := pt.log.ApplyRetention(t.RetentionMs, now)
		r.d.Metrics.RetentionRunDuration.WithLabelValues(pt.labels[0], pt.labels[1]).Observe(time.Since(start).Seconds())
		if err != nil {
			r.d.Logger.Warn("retention", "topic", pt.key.topic, "partition", pt.key.p, "err", err)
			continue
		}
		r.CountRetention(pt.labels, res)
	}
}

// CountRetention adds what a retention pass deleted to the retention metrics of labels.
func (r *Registry) CountRetention(labels [2]string, res plog.RetentionResult) {
	if res.Segments == 0 {
		return
	}
	r.d.Metrics.RetentionBytesDeleted.WithLabelValues(labels[0], labels[1], "age").Add(float64(res.Bytes))
	r.d.Metrics.RetentionMessagesDeleted.WithLabelValues(labels[0], labels[1], "age").Add(float64(res.Messages))
}
