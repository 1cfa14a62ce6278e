package engine

import (
	"context"
	"os"
	"sync"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/metrics"
)

// Loop cadences (docs/internals/storage-format.md §10, §11, docs/internals/consume-and-leases.md §6).
const (
	expiryPurgeInterval   = 1 * time.Second // background lease purger
	evictionScanInterval  = 1 * time.Minute // idle eviction scan
	retentionInterval     = 1 * time.Minute // reaper for open logs
	coldRetentionInterval = 5 * time.Minute // cold walk over closed logs
)

// purgeLoop releases expired leases every second so redelivery after a consumer death takes
// the visibility timeout, not "until someone polls" (docs/internals/consume-and-leases.md §6). It also
// closes the partitions this node no longer owns (CloseLost) and re-reads this node's drain
// flag.
func (e *Engine) purgeLoop(ctx context.Context) {
	every(ctx, expiryPurgeInterval, func() {
		e.refreshDraining()
		e.parts.CloseLost()
		e.parts.PurgeExpired()
	})
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
func (e *Engine) evictLoop(ctx context.Context) { every(ctx, evictionScanInterval, e.parts.EvictIdle) }

// retentionLoop deletes expired sealed segments of open logs every minute and of closed
// logs owned here every five minutes, without opening them (docs/internals/storage-format.md §10).
func (e *Engine) retentionLoop(ctx context.Context) {
	lastCold := e.now()
	every(ctx, retentionInterval, func() {
		e.parts.RetainOpen()
		if e.now().Sub(lastCold) >= coldRetentionInterval {
			lastCold = e.now()
			e.retainClosed()
		}
	})
}

// retainClosed applies retention to the closed logs this node owns, under each topic's open
// guard so no open runs meanwhile.
func (e *Engine) retainClosed() {
	r := e.parts
	now := e.now()
	for _, t := range e.allTopics() {
		if t.RetentionMs == 0 {
			continue
		}
		for _, a := range e.view.Assignments(t.Name) {
			if a.Owner != e.cfg.NodeID || r.Peek(t.Name, a.Partition) != nil {
				continue
			}
			g := r.Guard(t.Name)
			g.Lock()
			if r.Peek(t.Name, a.Partition) == nil {
				dir := r.PartitionDir(t.Name, a.Partition)
				if _, err := os.Stat(dir); err == nil {
					res, err := plog.ColdRetention(dir, t.RetentionMs, now)
					if err != nil {
						e.log.Warn("cold retention", "topic", t.Name, "partition", a.Partition, "err", err)
					} else {
						r.CountRetention([2]string{t.Name, metrics.Partition(a.Partition)}, res)
					}
				}
			}
			g.Unlock()
		}
	}
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
