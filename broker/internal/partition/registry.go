package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/errcode"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/replica"
)

// Deps is what a Registry reads from the rest of the node, fixed at construction.
type Deps struct {
	Layout           datadir.Layout // the node's data directory; every path is built there
	Codec            string         // none | zstd
	CompressionLevel string
	SegmentBytes     int64         // 0 = log default (64 MiB)
	IdleLogEviction  time.Duration // 0 disables EvictIdle's closing
	Logger           *slog.Logger
	Metrics          *metrics.Metrics
	Now              func() time.Time
	// Offsets is the consumer-offset committer every shard joins while attached.
	Offsets *consume.Committer
	// Topic is the local replica's record of a topic (cheap, hot path).
	Topic func(name string) (meta.Topic, bool)
	// Owns reports whether the local replica says this node owns (topic, p): for a
	// replicated partition, whether it is the leader.
	Owns func(topic string, p int) bool
	// Replicates reports whether the local replica names this node as one of the replicas of
	// (topic, p), leader or follower (docs/internals/replication.md §1). A follower's log is
	// opened and kept open like the owner's, but only the owner commits to it and serves it
	// to consumers. nil: no replicated partitions (only Owns counts).
	Replicates func(topic string, p int) bool
	// Leader returns the leadership this node holds for a replicated (topic, p), which
	// CommitReplicated commits under. nil: none ever.
	Leader func(topic string, p int) (*replica.Leader, bool)
	// RaiseFloor returns max(t0, newest commit time of (topic, p) in this process) and records
	// it; Commit calls it under the produce lock. The floor outlives a log's close and reopen.
	RaiseFloor func(topic string, p int, t0 int64) int64
	// Taker reports whether a local queue long-poll of topic takes the next reservable message
	// (read before local waiters are woken); Notify then tells peers' parked long-polls that
	// (topic, p) may have one, unless taken. nil: no peers to tell.
	Taker  func(topic string) bool
	Notify func(topic string, p int, taken bool)
}

// Registry owns the open partition logs of this node (docs/internals/storage-format.md §11). Get opens lazily
// and stamps access; Peek never opens and never stamps.
//
// Invariants: at most one Partition per (topic, partition) is registered; a directory of a
// topic is opened only under the topic's open guard held shared, and purged or replaced only
// under it held exclusively, so an open never recreates a purged directory.
type Registry struct {
	d    Deps
	mu   sync.Mutex
	open map[key]*Partition
	// guards is the topic open guard (docs/internals/storage-format.md §18): Get holds it shared while it
	// opens; purge holds it exclusively while it closes logs and removes directories.
	guards sync.Map // topic → *sync.RWMutex
	// closedLister lists closed partitions for a move's source without opening them.
	closedLister plog.ClosedLister
}

// New returns an empty registry over d. A nil Logger, Metrics, Now, Taker or Notify gets a
// default (discard, fresh metrics, time.Now, never taken, no-op).
func New(d Deps) *Registry {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Metrics == nil {
		d.Metrics = metrics.New()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Taker == nil {
		d.Taker = func(string) bool { return false }
	}
	if d.Notify == nil {
		d.Notify = func(string, int, bool) {}
	}
	if d.Leader == nil {
		d.Leader = func(string, int) (*replica.Leader, bool) { return nil, false }
	}
	return &Registry{d: d, open: map[key]*Partition{}}
}

// replicates is Deps.Replicates, false without it.
func (r *Registry) replicates(topic string, p int) bool {
	return r.d.Replicates != nil && r.d.Replicates(topic, p)
}

// Guard is topic's open guard: Get holds it shared while it opens a log of the topic; whoever
// closes the topic's logs and removes or replaces its directories holds it exclusively.
func (r *Registry) Guard(topic string) *sync.RWMutex {
	g, _ := r.guards.LoadOrStore(topic, &sync.RWMutex{})
	return g.(*sync.RWMutex)
}

// TopicDir is topics/<topic> under the data directory.
func (r *Registry) TopicDir(topic string) string { return r.d.Layout.TopicDir(topic) }

// PartitionDir is topics/<topic>/pNNNNN under the data directory.
func (r *Registry) PartitionDir(topic string, p int) string {
	return r.d.Layout.PartitionDir(topic, p)
}

// ListClosed lists the closed partition log in dir without opening it (a move's source),
// memoizing the boundary walk (log.ClosedLister).
func (r *Registry) ListClosed(dir string) (hwm int64, segs []plog.SegmentInfo, exact bool, err error) {
	return r.closedLister.List(dir)
}

// Get returns the open log of (t, p), opening (and recovering) it if needed.
func (r *Registry) Get(t meta.Topic, p int) (*Partition, error) {
	k := key{t.Name, p}
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
				r.ClosePartition(pt)
				continue
			}
			pt.lastAccess.Store(r.d.Now().UnixNano())
			return pt, nil
		}
		pt = &Partition{key: k, incarnation: t.Incarnation, ready: make(chan struct{}),
			labels: [2]string{t.Name, metrics.Partition(p)}}
		pt.series = r.d.Metrics.PartitionSeries(pt.labels[0], pt.labels[1])
		r.open[k] = pt
		r.mu.Unlock()

		pt.err = r.openPartition(t, pt)
		if pt.err != nil {
			r.mu.Lock()
			delete(r.open, k)
			r.mu.Unlock()
			r.d.Metrics.Errors.WithLabelValues("messaging", "partition_open").Inc()
			r.d.Logger.Error("open partition log", "topic", t.Name, "partition", p, "err", pt.err)
		} else {
			pt.lastAccess.Store(r.d.Now().UnixNano())
		}
		close(pt.ready)
		if pt.err != nil {
			return nil, pt.err
		}
		return pt, nil
	}
}

func (r *Registry) openPartition(t meta.Topic, pt *Partition) error {
	g := r.Guard(t.Name)
	g.RLock()
	defer g.RUnlock()
	// Re-check under the guard: a caller holding an old topic record (a long-poll that spans a
	// delete) must never recreate a purged directory (docs/internals/storage-format.md §1).
	if cur, ok := r.d.Topic(t.Name); !ok || cur.Incarnation != t.Incarnation {
		return fmt.Errorf("%s: %w", t.Name, errcode.ErrTopicGone)
	}
	if !r.d.Owns(t.Name, pt.key.p) && !r.replicates(t.Name, pt.key.p) {
		return fmt.Errorf("%s/%d: %w", t.Name, pt.key.p, errcode.ErrNotOwner)
	}
	if err := r.PrepareTopicDir(t); err != nil {
		return err
	}
	pt.dir = r.PartitionDir(t.Name, pt.key.p)
	if err := durable.MkdirAll(pt.dir); err != nil {
		return err
	}
	l, err := plog.Open(pt.dir, plog.Options{
		Codec:            codecOf(r.d.Codec),
		CompressionLevel: r.d.CompressionLevel,
		SegmentBytes:     r.d.SegmentBytes,
		Logger:           r.d.Logger.With("topic", t.Name, "partition", pt.key.p),
		Observer:         &logObserver{m: r.d.Metrics, series: pt.series},
		Now:              r.d.Now,
	})
	if err != nil {
		return fmt.Errorf("open %s/%d: %w", t.Name, pt.key.p, err)
	}
	if pt.epochs, err = plog.OpenEpochs(pt.dir); err != nil {
		l.Close()
		return fmt.Errorf("open %s/%d: %w", t.Name, pt.key.p, err)
	}
	pt.log = l
	// Under the guard: a purge (which deletes the topic's series) cannot run in between.
	r.d.Metrics.InitPartition(pt.labels[0], pt.labels[1])
	return nil
}

// PrepareTopicDir creates topics/<topic> with its incarnation marker. A directory left by a
// deleted incarnation is set aside under .stale/ rather than reused (docs/internals/storage-format.md §15).
func (r *Registry) PrepareTopicDir(t meta.Topic) error {
	dir := r.TopicDir(t.Name)
	have, ok, err := datadir.ReadIncarnation(dir)
	switch {
	case err == nil && ok:
		if have == t.Incarnation {
			return nil
		}
		stale := r.d.Layout.StaleDir(t.Name, have)
		if err := durable.MkdirAll(filepath.Dir(stale)); err != nil {
			return err
		}
		if err := os.Rename(dir, stale); err != nil {
			return fmt.Errorf("set aside stale incarnation dir: %w", err)
		}
		r.d.Logger.Warn("set aside a deleted incarnation's topic dir", "topic", t.Name, "incarnation", have, "path", stale)
	case err == nil:
	default:
		return err
	}
	if err := durable.MkdirAll(dir); err != nil {
		return err
	}
	return datadir.WriteIncarnation(dir, t.Incarnation)
}

// Peek returns the open log of (topic, p) without opening it or stamping access.
func (r *Registry) Peek(topic string, p int) *Partition {
	r.mu.Lock()
	pt := r.open[key{topic, p}]
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

// ShardOf returns the consume shard of an open partition, creating it (and reading the
// consumer files) on first touch. Only the owner calls this.
func (r *Registry) ShardOf(t meta.Topic, pt *Partition) (*consume.Shard, error) {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if pt.shard != nil {
		return pt.shard, nil
	}
	if pt.closed {
		return nil, fmt.Errorf("%s/%d: %w", t.Name, pt.key.p, plog.ErrClosed)
	}
	s, err := consume.OpenShard(pt.key.p, pt.dir, logSource{l: pt.log,
		taker:  func() bool { return r.d.Taker(pt.key.topic) },
		notify: func(taken bool) { r.d.Notify(pt.key.topic, pt.key.p, taken) }}, consume.ShardOptions{
		Now:      r.d.Now,
		Logger:   r.d.Logger.With("topic", t.Name, "partition", pt.key.p),
		Observer: &shardObserver{m: r.d.Metrics, labels: pt.labels},
		Topic:    t.Name,
	})
	if err != nil {
		return nil, err
	}
	if pt.frz.active(time.Now()) {
		s.SetFrozen(true) // a shard created during a handoff freeze starts frozen
	}
	pt.shard = s
	r.d.Offsets.Add(s)
	return s, nil
}

// Snapshot returns the open partitions.
func (r *Registry) Snapshot() []*Partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Partition, 0, len(r.open))
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

// ClosePartition removes pt from the registry, checkpoints its shard and closes its log with
// a CLEAN hwm. Long-poll waiters are woken (ownership loss / close broadcast).
func (r *Registry) ClosePartition(pt *Partition) {
	r.mu.Lock()
	if r.open[pt.key] == pt {
		delete(r.open, pt.key)
	}
	r.mu.Unlock()
	pt.commitMu.Lock()
	defer pt.commitMu.Unlock()
	pt.shardMu.Lock()
	pt.closed = true
	r.endFreezeLocked(pt, "partition closed")
	if pt.shard != nil {
		r.d.Offsets.Remove(pt.shard)
		if err := pt.shard.Close(); err != nil && !errors.Is(err, durable.ErrDirMissing) {
			r.d.Logger.Warn("close consume shard", "topic", pt.key.topic, "partition", pt.key.p, "err", err)
		}
		pt.shard = nil
	}
	pt.shardMu.Unlock()
	pt.log.Broadcast()
	if err := pt.log.Close(); err != nil {
		r.d.Logger.Warn("close partition log", "topic", pt.key.topic, "partition", pt.key.p, "err", err)
	}
}

// CloseAll closes every open partition (the engine's stop).
func (r *Registry) CloseAll() {
	for _, pt := range r.Snapshot() {
		r.ClosePartition(pt)
	}
}

func codecOf(name string) plog.Codec {
	if name == "zstd" {
		return plog.CodecZstd
	}
	return plog.CodecNone
}

// MarkerMatches reports whether topics/<topic>/.incarnation names t's incarnation (an absent
// marker matches nothing: the directory belongs to no known incarnation).
func (r *Registry) MarkerMatches(t meta.Topic) bool {
	have, ok, err := datadir.ReadIncarnation(r.TopicDir(t.Name))
	return err == nil && ok && have == t.Incarnation
}

// DropOpen closes (topic, p)'s log if it is open, without waiting for an open in flight. Under
// the exclusive topic guard no open can be in flight: an opener holds the guard shared.
func (r *Registry) DropOpen(topic string, p int) {
	if pt := r.Peek(topic, p); pt != nil {
		r.ClosePartition(pt)
	}
}

// CloseRegistered closes (topic, p)'s log if it is registered, first waiting for an open in
// flight to finish (or fail); the caller must not hold the topic's guard.
func (r *Registry) CloseRegistered(topic string, p int) {
	r.mu.Lock()
	pt := r.open[key{topic, p}]
	r.mu.Unlock()
	if pt == nil {
		return
	}
	<-pt.ready // an open in flight finishes (or fails) first; the caller holds no guard
	if pt.err == nil {
		r.ClosePartition(pt)
	}
}
