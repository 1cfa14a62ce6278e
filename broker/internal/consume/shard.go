package consume

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ShardOptions configure one shard.
type ShardOptions struct {
	Now      func() time.Time // lease clock and nonce seed; nil → time.Now
	Logger   *slog.Logger     // nil → discard
	Observer Observer         // metric events; may be nil
	Topic    string           // for logs only
}

// reservation is one live lease.
type reservation struct {
	nonce     uint64
	expiresAt int64 // unix ms; the lease is live while now < expiresAt
}

// Shard is the in-memory consume state of one partition on its owner
// (docs/internals/consume-and-leases.md §2).
//
// Invariants, all guarded by mu:
//   - committed only moves forward; every offset ≤ committed is resolved (acked, corrupt or
//     aged out), and committed+1 is never in ackedAhead or corrupt (the run is collapsed).
//   - an offset has at most one live reservation, created before its record is read, so two
//     consumers never hold one live copy.
//   - every offset in [committed+1, fresh) is exactly one of: reserved, acked-ahead, corrupt,
//     or queued in released; offsets ≥ fresh were never reserved by this instance (after
//     recovery some may be acked-ahead).
//   - nonces are > 0 and strictly increasing; the counter starts at unix_ms×1024 (§6.2) so a
//     handle from an earlier shard for the partition never matches.
//
// All methods are safe for concurrent use. Reserve, Ack, Extend and Nack are O(log n) in the
// number of live leases (amortized) and allocate nothing beyond Reserve's result.
type Shard struct {
	partition int
	dir       string
	src       Source
	now       func() time.Time
	logger    *slog.Logger
	obs       Observer
	topic     string

	mu           sync.Mutex
	committed    int64
	reservations map[int64]reservation
	expiry       expiryHeap
	released     offsetHeap // expired or nacked offsets below fresh; stale ones dropped on pop
	fresh        int64
	ackedAhead   map[int64]struct{}
	corrupt      map[int64]struct{}
	nonce        uint64 // last nonce issued
	frozen       bool
	closed       bool
	changes      uint64 // bumped whenever committed or ackedAhead changes

	durableFrontier atomic.Int64 // frontier known to be on stable storage (journal synced or checkpoint)

	files fileState // consumer files, written by the committer and Close
}

// nonceFloor is the highest nonce issued by any closed shard in this process. A shard opened
// again within the same millisecond still starts above its predecessor.
var nonceFloor atomic.Uint64

// OpenShard creates the shard of partition whose log directory is dir, recovering the
// frontier and acked-ahead set from the consumer files (docs/internals/storage-format.md §14.3). Missing files
// or a missing dir mean frontier -1; nothing is created on disk here. The recovered frontier
// is not clamped to the source's high watermark.
func OpenShard(partition int, dir string, src Source, opts ShardOptions) (*Shard, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	logger := opts.Logger.With("topic", opts.Topic, "partition", partition)
	rec, err := readConsumerFiles(dir, logger)
	if err != nil {
		return nil, fmt.Errorf("consume: open shard %s/%d: %w", opts.Topic, partition, err)
	}
	removeCheckpointTemps(dir)
	s := &Shard{
		partition:    partition,
		dir:          dir,
		src:          src,
		now:          opts.Now,
		logger:       logger,
		obs:          opts.Observer,
		topic:        opts.Topic,
		committed:    rec.Frontier,
		reservations: make(map[int64]reservation),
		ackedAhead:   make(map[int64]struct{}, len(rec.AckedAhead)),
		corrupt:      make(map[int64]struct{}),
	}
	for _, o := range rec.AckedAhead {
		s.ackedAhead[o] = struct{}{}
	}
	s.collapseLocked()
	s.fresh = s.committed + 1
	seed := uint64(max(opts.Now().UnixMilli(), 0)) * 1024
	s.nonce = max(seed, nonceFloor.Load())
	s.durableFrontier.Store(s.committed)
	s.files.seq = rec.lastSeq
	s.files.recoveredEnd = rec.journalEnd
	s.files.journaled = s.committed
	s.files.checkpointed.Store(s.changes)
	return s, nil
}

// removeCheckpointTemps deletes consumer.offset temp files left by a crash mid-write.
func removeCheckpointTemps(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, CheckpointFile+".tmp-*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// Partition is the shard's partition number.
func (s *Shard) Partition() int { return s.partition }

// State is a point-in-time view of a shard for metrics. Lag = hwm − (Committed + 1).
type State struct {
	Committed  int64 // in-memory frontier
	Durable    int64 // frontier known to be on stable storage
	AckedAhead int   // out-of-order acks parked above the frontier
	InFlight   int   // live reservations (including expired ones not yet purged)
	Corrupt    int   // corrupt offsets above the frontier
	Frozen     bool
}

// State returns the shard's current counters.
func (s *Shard) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{
		Committed:  s.committed,
		Durable:    s.durableFrontier.Load(),
		AckedAhead: len(s.ackedAhead),
		InFlight:   len(s.reservations),
		Corrupt:    len(s.corrupt),
		Frozen:     s.frozen,
	}
}

// Frontier returns the in-memory frontier and acked-ahead set (ascending): what a checkpoint
// would hold, and what a move's transfer listing reports (docs/internals/consume-and-leases.md §9).
func (s *Shard) Frontier() Checkpoint {
	c, _ := s.frontierSnapshot()
	return c
}

func (s *Shard) frontierSnapshot() (Checkpoint, uint64) {
	s.mu.Lock()
	c := Checkpoint{Frontier: s.committed}
	if len(s.ackedAhead) > 0 {
		c.AckedAhead = make([]int64, 0, len(s.ackedAhead))
		for o := range s.ackedAhead {
			c.AckedAhead = append(c.AckedAhead, o)
		}
	}
	changes := s.changes
	s.mu.Unlock()
	slices.Sort(c.AckedAhead)
	return c, changes
}

// Dirty reports whether the frontier or acked-ahead set changed since the last checkpoint.
func (s *Shard) Dirty() bool {
	s.mu.Lock()
	changes := s.changes
	s.mu.Unlock()
	return changes != s.files.checkpointedChanges()
}

// SetFrozen arms or lifts the handoff freeze (docs/internals/moves.md §3): while frozen Reserve hands out
// nothing (Frozen); acks, extends and nacks keep working. Lifting it wakes waiters.
func (s *Shard) SetFrozen(on bool) {
	s.mu.Lock()
	was := s.frozen
	s.frozen = on
	s.mu.Unlock()
	if was && !on {
		s.src.Broadcast()
	}
}

// Close drops every lease (later acks get ErrStale, as for an unknown shard), then appends
// and syncs the journal and writes a final checkpoint. A missing partition dir is not an
// error and is never recreated. Close is idempotent.
func (s *Shard) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.reservations = nil
	s.expiry = nil
	s.released = nil
	last := s.nonce
	s.mu.Unlock()
	for {
		f := nonceFloor.Load()
		if f >= last || nonceFloor.CompareAndSwap(f, last) {
			break
		}
	}
	s.src.Broadcast()
	return s.closeFiles(s.now())
}

// nextNonceLocked issues the next nonce. Caller holds mu.
func (s *Shard) nextNonceLocked() uint64 {
	s.nonce++
	return s.nonce
}

// collapseLocked advances committed over the contiguous run of acked-ahead and corrupt
// offsets above it. Caller holds mu.
func (s *Shard) collapseLocked() {
	for {
		n := s.committed + 1
		if _, ok := s.ackedAhead[n]; ok {
			delete(s.ackedAhead, n)
		} else if _, ok := s.corrupt[n]; ok {
			delete(s.corrupt, n)
		} else {
			return
		}
		s.committed = n
		s.changes++
	}
}

// advanceLocked sets committed to to (which must be ahead) and collapses. Caller holds mu.
func (s *Shard) advanceLocked(to int64) {
	if to <= s.committed {
		panic(fmt.Sprintf("consume: frontier of %s/%d would move back from %d to %d", s.topic, s.partition, s.committed, to))
	}
	s.committed = to
	s.changes++
	s.collapseLocked()
	if s.fresh <= s.committed {
		s.fresh = s.committed + 1
	}
}

// ageOutLocked resolves offsets below the source's oldest retained offset: committed jumps
// to oldest−1. It returns how many of the skipped offsets were never resolved (dropped
// messages). Caller holds mu.
func (s *Shard) ageOutLocked() int64 {
	oldest := s.src.OldestOffset()
	if oldest-1 <= s.committed {
		return 0
	}
	to := oldest - 1
	dropped := to - s.committed
	for o := range s.ackedAhead {
		if o <= to {
			delete(s.ackedAhead, o)
			dropped--
		}
	}
	for o := range s.corrupt {
		if o <= to {
			delete(s.corrupt, o)
			dropped--
		}
	}
	s.advanceLocked(to)
	return max(dropped, 0)
}

// purgeLocked releases every lease whose deadline has passed and returns how many it
// released. Heap entries left by extend, ack and nack no longer match their reservation's
// nonce and deadline and are discarded. Caller holds mu.
func (s *Shard) purgeLocked(nowMs int64) int {
	n := 0
	for len(s.expiry) > 0 && s.expiry[0].expiresAt <= nowMs {
		e := s.expiry.pop()
		r, ok := s.reservations[e.offset]
		if !ok || r.nonce != e.nonce || r.expiresAt != e.expiresAt {
			continue
		}
		delete(s.reservations, e.offset)
		s.released.push(e.offset)
		n++
	}
	return n
}

// pushExpiryLocked records a lease deadline, compacting the heap when stale entries dominate
// so its size stays proportional to the live leases (amortized O(1) per push).
func (s *Shard) pushExpiryLocked(e expiryEntry) {
	if len(s.expiry) >= 2*len(s.reservations)+1024 {
		live := s.expiry[:0]
		for _, x := range s.expiry {
			if r, ok := s.reservations[x.offset]; ok && r.nonce == x.nonce && r.expiresAt == x.expiresAt {
				live = append(live, x)
			}
		}
		clear(s.expiry[len(live):])
		s.expiry = live
		s.expiry.init()
	}
	s.expiry.push(e)
}
