package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Committer defaults (docs/internals/consume-and-leases.md §9, docs/internals/storage-format.md §14).
const (
	DefaultCommitTick         = 100 * time.Millisecond // journal append cadence for dirty shards
	DefaultSyncInterval       = time.Second            // journal fdatasync cadence: bounds acks lost to power failure
	DefaultCheckpointInterval = 30 * time.Second       // per dirty shard; the journal is truncated after each
)

// CommitterOptions configure the node's offset committer. Zero durations take the defaults.
type CommitterOptions struct {
	Tick               time.Duration    // journal append cadence
	SyncInterval       time.Duration    // journal fdatasync cadence
	CheckpointInterval time.Duration    // minimum spacing of consumer.offset writes per shard
	Logger             *slog.Logger     // nil → discard
	Now                func() time.Time // nil → time.Now
}

// Committer is the node's single offset committer: it persists every registered shard's
// frontier to its consumer files. Offsets on disk only move forward; a missing partition dir
// (deleted topic) is skipped silently and never recreated; any other write error leaves the
// value pending for the next tick.
//
// Add and Remove may be called from any goroutine, concurrently with Run and FlushAll. Run
// and FlushAll serialize with each other.
type Committer struct {
	opts   CommitterOptions
	logger *slog.Logger

	mu     sync.Mutex
	shards map[*Shard]struct{}

	runMu    sync.Mutex // serializes passes
	lastSync time.Time
	failing  map[*Shard]bool // shards whose last pass failed (log on transitions only)
	batch    []*Shard
}

// NewCommitter returns a committer; start it with Run.
func NewCommitter(opts CommitterOptions) *Committer {
	if opts.Tick <= 0 {
		opts.Tick = DefaultCommitTick
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Committer{
		opts:    opts,
		logger:  opts.Logger,
		shards:  make(map[*Shard]struct{}),
		failing: make(map[*Shard]bool),
	}
}

// Add registers s; its changes are persisted from the next tick on.
func (c *Committer) Add(s *Shard) {
	c.mu.Lock()
	c.shards[s] = struct{}{}
	c.mu.Unlock()
}

// Remove unregisters s. It does not flush: the caller closes the shard (Close writes the
// final checkpoint) after removing it.
func (c *Committer) Remove(s *Shard) {
	c.mu.Lock()
	delete(c.shards, s)
	c.mu.Unlock()
}

// Run ticks until ctx is done, then returns nil. It does not flush on exit (Close each shard,
// or call FlushAll, for that).
func (c *Committer) Run(ctx context.Context) error {
	t := time.NewTicker(c.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.tick()
		}
	}
}

// tick is one committer pass: journal every moved frontier, fdatasync journals when the sync
// interval has passed, checkpoint shards that are due.
func (c *Committer) tick() {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	now := c.opts.Now()
	syncDue := now.Sub(c.lastSync) >= c.opts.SyncInterval
	if syncDue {
		c.lastSync = now
	}
	for _, s := range c.snapshot() {
		c.report(s, s.persistStep(now, syncDue, c.opts.CheckpointInterval, false))
	}
}

// FlushAll journals, syncs and checkpoints every registered shard that changed, now. Shards
// whose dir is gone are skipped; other failures are returned joined (and stay pending).
func (c *Committer) FlushAll() error {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	now := c.opts.Now()
	var errs []error
	for _, s := range c.snapshot() {
		err := s.persistStep(now, true, 0, true)
		c.report(s, err)
		if err != nil && !dirMissing(err) {
			errs = append(errs, fmt.Errorf("partition %d: %w", s.partition, err))
		}
	}
	return errors.Join(errs...)
}

// snapshot copies the registered shards. Caller holds runMu.
func (c *Committer) snapshot() []*Shard {
	c.mu.Lock()
	c.batch = c.batch[:0]
	for s := range c.shards {
		c.batch = append(c.batch, s)
	}
	for s := range c.failing {
		if _, ok := c.shards[s]; !ok {
			delete(c.failing, s)
		}
	}
	c.mu.Unlock()
	return c.batch
}

// report logs a shard's failure once when it starts and once when it clears. Caller holds runMu.
func (c *Committer) report(s *Shard, err error) {
	if err != nil && dirMissing(err) {
		return // topic deleted: skip silently, never recreate
	}
	was := c.failing[s]
	switch {
	case err != nil && !was:
		c.failing[s] = true
		c.logger.Warn("consumer offset write failed; retrying each tick",
			"topic", s.topic, "partition", s.partition, "err", err)
	case err == nil && was:
		delete(c.failing, s)
		c.logger.Info("consumer offset writes recovered", "topic", s.topic, "partition", s.partition)
	}
}
