package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/errcode"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
)

// Loop cadences (docs/internals/storage-format.md §10, §11, docs/internals/consume-and-leases.md §6).
const (
	expiryPurgeInterval   = 1 * time.Second // background lease purger
	evictionScanInterval  = 1 * time.Minute // idle eviction scan
	retentionInterval     = 1 * time.Minute // reaper for open logs
	coldRetentionInterval = 5 * time.Minute // cold walk over closed logs
)

// partition is one open partition log on its owner, with its consume shard. The produce
// lock (commitMu) serializes gate checks, commit-time stamping and the log commit, so commit
// times never decrease along the partition (docs/internals/produce-path.md §9).
type partition struct {
	key         partKey
	incarnation string
	dir         string
	ready       chan struct{} // closed when open finished (err says how)
	err         error

	log        *plog.Log
	lastAccess atomic.Int64 // unix nanos of the last Get; Peek never stamps

	commitMu sync.Mutex

	// shardMu guards shard, closed and frz. Lock order: commitMu → shardMu → the shard's own.
	shardMu sync.Mutex
	shard   *consume.Shard
	closed  bool // set (under shardMu) when the partition is closed; no shard may attach after
	// frz is the move handoff freeze (handoff.go); while it is active the shard, whenever
	// one exists, is frozen. It ends when the partition closes (ownership lost, topic
	// deleted, log failed or shut down).
	frz    *freeze
	labels [2]string
	// head caches the commit time of the oldest unconsumed record for the poller, so the
	// log is read only when the consumer frontier moved (poller.go).
	head headCache
}

// registry owns the open partition logs of this node (docs/internals/storage-format.md §11). Get opens lazily
// and stamps access; Peek never opens and never stamps.
type registry struct {
	e    *Engine
	mu   sync.Mutex
	open map[partKey]*partition
	// guards is the topic open guard (docs/internals/storage-format.md §18): Get holds it shared while it
	// opens; purge holds it exclusively while it closes logs and removes directories.
	guards sync.Map // topic → *sync.RWMutex
	// closedLister lists closed partitions for a move's source without opening them.
	closedLister plog.ClosedLister
}

func newRegistry(e *Engine) *registry {
	return &registry{e: e, open: map[partKey]*partition{}}
}

func (r *registry) guard(topic string) *sync.RWMutex {
	g, _ := r.guards.LoadOrStore(topic, &sync.RWMutex{})
	return g.(*sync.RWMutex)
}

// layout is the node's data directory (datadir): every path under it is built there.
func (e *Engine) layout() datadir.Layout { return datadir.New(e.cfg.DataDir) }

func (r *registry) topicDir(topic string) string { return r.e.layout().TopicDir(topic) }

func (r *registry) partitionDir(topic string, p int) string {
	return r.e.layout().PartitionDir(topic, p)
}

// get returns the open log of (t, p), opening (and recovering) it if needed.
func (r *registry) get(t meta.Topic, p int) (*partition, error) {
	k := partKey{t.Name, p}
	for {
		r.mu.Lock()
		pt, ok := r.open[k]
		if ok {
			r.mu.Unlock()
			<-pt.ready
			if pt.err != nil {
				return nil, pt.err
			}
			if pt.incarnation != t.Incarnation {
				// A deleted incarnation's log still registered: close it and open the new one.
				r.closePartition(pt)
				continue
			}
			pt.lastAccess.Store(r.e.now().UnixNano())
			return pt, nil
		}
		pt = &partition{key: k, incarnation: t.Incarnation, ready: make(chan struct{}),
			labels: [2]string{t.Name, metrics.Partition(p)}}
		r.open[k] = pt
		r.mu.Unlock()

		pt.err = r.openPartition(t, pt)
		if pt.err != nil {
			r.mu.Lock()
			delete(r.open, k)
			r.mu.Unlock()
			r.e.m.Errors.WithLabelValues("messaging", "partition_open").Inc()
			r.e.log.Error("open partition log", "topic", t.Name, "partition", p, "err", pt.err)
		} else {
			pt.lastAccess.Store(r.e.now().UnixNano())
		}
		close(pt.ready)
		if pt.err != nil {
			return nil, pt.err
		}
		return pt, nil
	}
}

func (r *registry) openPartition(t meta.Topic, pt *partition) error {
	g := r.guard(t.Name)
	g.RLock()
	defer g.RUnlock()
	// Re-check under the guard: a caller holding an old topic record (a long-poll that spans a
	// delete) must never recreate a purged directory (docs/internals/storage-format.md §1).
	if cur, ok := r.e.view.Topic(t.Name); !ok || cur.Incarnation != t.Incarnation {
		return fmt.Errorf("%s: %w", t.Name, errcode.ErrTopicGone)
	}
	if !r.e.owns(t.Name, pt.key.p) {
		return fmt.Errorf("%s/%d: %w", t.Name, pt.key.p, errcode.ErrNotOwner)
	}
	if err := r.prepareTopicDir(t); err != nil {
		return err
	}
	pt.dir = r.partitionDir(t.Name, pt.key.p)
	if err := durable.MkdirAll(pt.dir); err != nil {
		return err
	}
	l, err := plog.Open(pt.dir, plog.Options{
		Codec:            codecOf(r.e.cfg.Codec),
		CompressionLevel: r.e.cfg.CompressionLevel,
		SegmentBytes:     r.e.cfg.SegmentBytes,
		Logger:           r.e.log.With("topic", t.Name, "partition", pt.key.p),
		Observer:         &logObserver{m: r.e.m, labels: pt.labels},
		Now:              r.e.now,
	})
	if err != nil {
		return fmt.Errorf("open %s/%d: %w", t.Name, pt.key.p, err)
	}
	pt.log = l
	// Under the guard: a purge (which deletes the topic's series) cannot run in between.
	r.e.m.InitPartition(pt.labels[0], pt.labels[1])
	return nil
}

// prepareTopicDir creates topics/<topic> with its incarnation marker. A directory left by a
// deleted incarnation is set aside under .stale/ rather than reused (docs/internals/storage-format.md §15).
func (r *registry) prepareTopicDir(t meta.Topic) error {
	dir := r.topicDir(t.Name)
	have, ok, err := datadir.ReadIncarnation(dir)
	switch {
	case err == nil && ok:
		if have == t.Incarnation {
			return nil
		}
		stale := r.e.layout().StaleDir(t.Name, have)
		if err := durable.MkdirAll(filepath.Dir(stale)); err != nil {
			return err
		}
		if err := os.Rename(dir, stale); err != nil {
			return fmt.Errorf("set aside stale incarnation dir: %w", err)
		}
		r.e.log.Warn("set aside a deleted incarnation's topic dir", "topic", t.Name, "incarnation", have, "path", stale)
	case err == nil:
	default:
		return err
	}
	if err := durable.MkdirAll(dir); err != nil {
		return err
	}
	return datadir.WriteIncarnation(dir, t.Incarnation)
}

// peek returns the open log of (topic, p) without opening it or stamping access.
func (r *registry) peek(topic string, p int) *partition {
	r.mu.Lock()
	pt := r.open[partKey{topic, p}]
	r.mu.Unlock()
	if pt == nil {
		return nil
	}
	select {
	case <-pt.ready:
		if pt.err != nil {
			return nil
		}
		return pt
	default:
		return nil
	}
}

// shardOf returns the consume shard of an open partition, creating it (and reading the
// consumer files) on first touch. Only the owner calls this.
func (r *registry) shardOf(t meta.Topic, pt *partition) (*consume.Shard, error) {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if pt.shard != nil {
		return pt.shard, nil
	}
	if pt.closed {
		return nil, fmt.Errorf("%s/%d: %w", t.Name, pt.key.p, plog.ErrClosed)
	}
	s, err := consume.OpenShard(pt.key.p, pt.dir, logSource{l: pt.log,
		taker:  func() bool { return r.e.localTaker(pt.key.topic) },
		notify: func(taken bool) { r.e.notifyPeers(pt.key.topic, pt.key.p, taken) }}, consume.ShardOptions{
		Now:      r.e.now,
		Logger:   r.e.log.With("topic", t.Name, "partition", pt.key.p),
		Observer: &shardObserver{m: r.e.m, labels: pt.labels},
		Topic:    t.Name,
	})
	if err != nil {
		return nil, err
	}
	if pt.frz.active(time.Now()) {
		s.SetFrozen(true) // a shard created during a handoff freeze starts frozen
	}
	pt.shard = s
	r.e.offsets.Add(s)
	return s, nil
}

// snapshot returns the open partitions.
func (r *registry) snapshot() []*partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*partition, 0, len(r.open))
	for _, pt := range r.open {
		select {
		case <-pt.ready:
			if pt.err == nil {
				out = append(out, pt)
			}
		default:
		}
	}
	return out
}

// closePartition removes pt from the registry, checkpoints its shard and closes its log with
// a CLEAN hwm. Long-poll waiters are woken (ownership loss / close broadcast).
func (r *registry) closePartition(pt *partition) {
	r.mu.Lock()
	if r.open[pt.key] == pt {
		delete(r.open, pt.key)
	}
	r.mu.Unlock()
	pt.commitMu.Lock()
	defer pt.commitMu.Unlock()
	pt.shardMu.Lock()
	pt.closed = true
	r.e.endFreezeLocked(pt, "partition closed")
	if pt.shard != nil {
		r.e.offsets.Remove(pt.shard)
		if err := pt.shard.Close(); err != nil && !errors.Is(err, durable.ErrDirMissing) {
			r.e.log.Warn("close consume shard", "topic", pt.key.topic, "partition", pt.key.p, "err", err)
		}
		pt.shard = nil
	}
	pt.shardMu.Unlock()
	pt.log.Broadcast()
	if err := pt.log.Close(); err != nil {
		r.e.log.Warn("close partition log", "topic", pt.key.topic, "partition", pt.key.p, "err", err)
	}
}

func (r *registry) closeAll() {
	for _, pt := range r.snapshot() {
		r.closePartition(pt)
	}
}

// purgeTopic closes the deleted incarnation's logs and removes its data. The applied delete is
// the confirmation (docs/internals/metastore.md §13): the directory goes only if its marker names the
// deleted incarnation or is absent.
func (e *Engine) purgeTopic(topic, incarnation string) {
	r := e.parts
	g := r.guard(topic)
	g.Lock()
	defer g.Unlock()
	for _, pt := range r.snapshot() {
		if pt.key.topic == topic && (incarnation == "" || pt.incarnation == incarnation) {
			r.closePartition(pt)
		}
	}
	dir := r.topicDir(topic)
	have, ok, err := datadir.ReadIncarnation(dir)
	if err != nil {
		e.log.Error("purge topic: read marker", "topic", topic, "err", err)
		return
	}
	if ok && incarnation != "" && have != incarnation {
		return // a newer incarnation's data
	}
	if err := os.RemoveAll(dir); err != nil {
		e.log.Error("purge topic data", "topic", topic, "err", err)
		return
	}
	_ = durable.SyncDir(filepath.Dir(dir))
	e.floorMu.Lock()
	for k := range e.floor {
		if k.topic == topic {
			delete(e.floor, k)
		}
	}
	e.floorMu.Unlock()
	e.rrMu.Lock()
	delete(e.rr, topic)
	e.rrMu.Unlock()
	e.m.DeleteTopic(topic)
	e.log.Info("topic data purged", "topic", topic, "incarnation", incarnation)
}

func codecOf(name string) plog.Codec {
	if name == "zstd" {
		return plog.CodecZstd
	}
	return plog.CodecNone
}

// markerMatches reports whether topics/<topic>/.incarnation names t's incarnation (an absent
// marker matches nothing: the directory belongs to no known incarnation).
func (r *registry) markerMatches(t meta.Topic) bool {
	have, ok, err := datadir.ReadIncarnation(r.topicDir(t.Name))
	return err == nil && ok && have == t.Incarnation
}
