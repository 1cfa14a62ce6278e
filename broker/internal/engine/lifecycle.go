package engine

import (
	"context"
	"os"
	"sync"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/metrics"
)

// purgeLoop releases expired leases every second so redelivery after a consumer death takes
// the visibility timeout, not "until someone polls" (docs/internals/consume-and-leases.md §6). It also
// closes the partitions this node no longer owns (closeLost) and re-reads this node's drain
// flag.
func (r *registry) purgeLoop(ctx context.Context) {
	every(ctx, expiryPurgeInterval, func() {
		r.e.refreshDraining()
		r.closeLost()
		for _, pt := range r.snapshot() {
			pt.shardMu.Lock()
			s := pt.shard
			pt.shardMu.Unlock()
			if s != nil {
				s.PurgeExpired()
			}
		}
	})
}

// closeLost closes every open partition whose assignment in the local replica no longer
// names this node (a move's flip applied, or the topic is gone): its log and shard close, so
// leases answer 410, its handoff freeze ends, and long-poll waiters wake and re-route
// (docs/internals/consume-and-leases.md §7, docs/internals/moves.md §3.3 rule 4).
func (r *registry) closeLost() {
	for _, pt := range r.snapshot() {
		r.closeIfLost(pt.key.topic, pt.key.p)
	}
}

// closeIfLost closes (topic, p) if it is open here and this node does not own it.
func (r *registry) closeIfLost(topic string, p int) {
	pt := r.peek(topic, p)
	if pt == nil || r.e.owns(topic, p) {
		return
	}
	r.e.log.Info("partition closed: ownership moved away", "topic", topic, "partition", p)
	r.closePartition(pt)
}

// every calls f once per interval d until ctx ends (first call after d).
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

// evictLoop closes logs untouched for IdleLogEviction once retention owes nothing and no
// lease is out (docs/internals/storage-format.md §11).
func (r *registry) evictLoop(ctx context.Context) { every(ctx, evictionScanInterval, r.evictIdle) }

func (r *registry) evictIdle() {
	idle := r.e.cfg.IdleLogEviction
	open := r.snapshot()
	defer func() { r.e.m.OpenPartitionLogs.Set(float64(len(r.snapshot()))) }()
	if idle <= 0 {
		return
	}
	now := r.e.now()
	for _, pt := range open {
		if now.Sub(time.Unix(0, pt.lastAccess.Load())) < idle {
			continue
		}
		t, ok := r.e.view.Topic(pt.key.topic)
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
		r.closePartition(pt)
		r.e.m.IdleLogsEvicted.Inc()
	}
}

// retentionLoop deletes expired sealed segments of open logs every minute and of closed
// logs owned here every five minutes, without opening them (docs/internals/storage-format.md §10).
func (r *registry) retentionLoop(ctx context.Context) {
	lastCold := r.e.now()
	every(ctx, retentionInterval, func() {
		r.retainOpen()
		if r.e.now().Sub(lastCold) >= coldRetentionInterval {
			lastCold = r.e.now()
			r.retainClosed()
		}
	})
}

func (r *registry) retainOpen() {
	now := r.e.now()
	for _, pt := range r.snapshot() {
		t, ok := r.e.view.Topic(pt.key.topic)
		if !ok || t.Incarnation != pt.incarnation {
			continue
		}
		start := time.Now()
		res, err := pt.log.ApplyRetention(t.RetentionMs, now)
		r.e.m.RetentionRunDuration.WithLabelValues(pt.labels[0], pt.labels[1]).Observe(time.Since(start).Seconds())
		if err != nil {
			r.e.log.Warn("retention", "topic", pt.key.topic, "partition", pt.key.p, "err", err)
			continue
		}
		r.countRetention(pt.labels, res)
	}
}

func (r *registry) retainClosed() {
	now := r.e.now()
	for _, t := range r.e.allTopics() {
		if t.RetentionMs == 0 {
			continue
		}
		for _, a := range r.e.view.Assignments(t.Name) {
			if a.Owner != r.e.cfg.NodeID || r.peek(t.Name, a.Partition) != nil {
				continue
			}
			g := r.guard(t.Name)
			g.Lock()
			if r.peek(t.Name, a.Partition) == nil {
				dir := r.partitionDir(t.Name, a.Partition)
				if _, err := os.Stat(dir); err == nil {
					res, err := plog.ColdRetention(dir, t.RetentionMs, now)
					if err != nil {
						r.e.log.Warn("cold retention", "topic", t.Name, "partition", a.Partition, "err", err)
					} else {
						r.countRetention([2]string{t.Name, metrics.Partition(a.Partition)}, res)
					}
				}
			}
			g.Unlock()
		}
	}
}

func (r *registry) countRetention(labels [2]string, res plog.RetentionResult) {
	if res.Segments == 0 {
		return
	}
	r.e.m.RetentionBytesDeleted.WithLabelValues(labels[0], labels[1], "age").Add(float64(res.Bytes))
	r.e.m.RetentionMessagesDeleted.WithLabelValues(labels[0], labels[1], "age").Add(float64(res.Messages))
}

// taskGroup owns the goroutines the engine starts in response to metastore events (purging a
// deleted topic, re-reading the drain flag, closing a partition that moved away): OnMetaEvent
// runs on the FSM goroutine and must not block, so the work runs beside it. The zero value is
// ready; close ends the group when the engine stops.
//
// Invariant: no task runs after close has returned. close cancels the context tasks get and
// waits for the running ones; a task submitted after close is dropped (the metastore can
// still apply entries while the process stops after the engine; startup work redoes what
// those would have done).
type taskGroup struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

// goTask runs f on its own goroutine under the group; false when the group is closed.
func (g *taskGroup) goTask(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
	g.wg.Add(1)
	go func(ctx context.Context) {
		defer g.wg.Done()
		f(ctx)
	}(g.ctx)
	return true
}

// close refuses new tasks, cancels the running ones' context and waits for them to return.
func (g *taskGroup) close() {
	g.mu.Lock()
	g.closed = true
	if g.cancel != nil {
		g.cancel()
	}
	g.mu.Unlock()
	g.wg.Wait()
}
