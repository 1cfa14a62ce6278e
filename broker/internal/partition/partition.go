package partition

import (
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/consume"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/metrics"
)

// key names a partition of a topic.
type key struct {
	topic string
	p     int
}

// Partition is one open partition log on its owner, with its consume shard. The produce
// lock (commitMu) serializes gate checks, commit-time stamping and the log commit, so commit
// times never decrease along the partition (docs/internals/produce-path.md §9).
//
// Invariants: the lock order is commitMu → shardMu → the shard's own lock. Once closed is
// set (under shardMu) no shard attaches. The log, directory, incarnation and labels never
// change after the open finished; a Partition a Registry hands out has opened successfully.
type Partition struct {
	key         key
	incarnation string
	dir         string
	ready       chan struct{} // closed when open finished (err says how)
	err         error

	log        *plog.Log
	epochs     *plog.Epochs // the leader-epoch file (empty for an R = 1 partition)
	lastAccess atomic.Int64 // unix nanos of the last Get; Peek never stamps

	commitMu sync.Mutex
	// group joins concurrent commits of the partition into one append (group.go).
	group appendGroup

	// shardMu guards shard, closed and frz. Lock order: commitMu → shardMu → the shard's own.
	shardMu sync.Mutex
	shard   *consume.Shard
	closed  bool // set (under shardMu) when the partition is closed; no shard may attach after
	// frz is the move handoff freeze (freeze.go); while it is active the shard, whenever
	// one exists, is frozen. It ends when the partition closes (ownership lost, topic
	// deleted, log failed or shut down).
	frz    *freeze
	labels [2]string
	series *metrics.PartitionSeries // the hot-path series of labels
	// head caches the commit time of the oldest unconsumed record for the engine's metrics
	// poller, so the log is read only when the consumer frontier moved.
	head HeadCache
}

// Topic is the partition's topic name.
func (pt *Partition) Topic() string { return pt.key.topic }

// Index is the partition's number within its topic.
func (pt *Partition) Index() int { return pt.key.p }

// Incarnation is the topic incarnation the log was opened for.
func (pt *Partition) Incarnation() string { return pt.incarnation }

// Dir is the partition directory (topics/<topic>/pNNNNN).
func (pt *Partition) Dir() string { return pt.dir }

// Log is the open partition log.
func (pt *Partition) Log() *plog.Log { return pt.log }

// Epochs is the partition's leader-epoch file (docs/internals/storage-format.md §19).
func (pt *Partition) Epochs() *plog.Epochs { return pt.epochs }

// Labels are the metric labels (topic, partition) of the partition's series.
func (pt *Partition) Labels() [2]string { return pt.labels }

// Series are the partition's hot-path metric series (produced, consumed, storage timings).
func (pt *Partition) Series() *metrics.PartitionSeries { return pt.series }

// LastAccess is the time of the last Registry.Get that returned pt (Peek never stamps).
func (pt *Partition) LastAccess() time.Time { return time.Unix(0, pt.lastAccess.Load()) }

// Head is the poller's cache of the oldest unconsumed record's commit time.
func (pt *Partition) Head() *HeadCache { return &pt.head }

// Shard is the consume shard attached to pt, nil if none is (yet, or any more).
func (pt *Partition) Shard() *consume.Shard {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	return pt.shard
}

// Closed reports whether pt was closed (no shard can attach any more).
func (pt *Partition) Closed() bool {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	return pt.closed
}

// LockCommits takes the produce lock: no commit is between its gate and its append until
// UnlockCommits. Lock order: the produce lock before anything else of pt.
func (pt *Partition) LockCommits() { pt.commitMu.Lock() }

// UnlockCommits releases the produce lock.
func (pt *Partition) UnlockCommits() { pt.commitMu.Unlock() }

// HeadCache is the commit time (unix ms) of the first readable record at or after offset;
// offset −1 means empty. Safe for concurrent use.
type HeadCache struct {
	mu     sync.Mutex
	offset int64
	atMs   int64
}

// At returns the cached commit time for head, calling read (under the cache's lock) only
// when head moved since the value was cached or nothing is cached. ok=false: read failed and
// the cache is unchanged.
func (h *HeadCache) At(head int64, read func(head int64) (atMs int64, ok bool)) (atMs int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.atMs == 0 || h.offset != head {
		at, ok := read(head)
		if !ok {
			return 0, false
		}
		h.offset, h.atMs = head, at
	}
	return h.atMs, true
}
