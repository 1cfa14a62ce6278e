package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"narad.dev/broker/internal/clock"
	plog "narad.dev/broker/internal/log"
)

// errLinkGone: the link was detached, re-attached under another epoch, or its child deleted
// while the cursor was retrying; the held records are dropped and the cursor exits.
var errLinkGone = errors.New("fanout: link gone")

// commitAll commits entries (in slab order) to the child and returns nil once every record is
// acknowledged by its child partition (docs/internals/fanout.md §6, docs/internals/fanout.md §6.2). Each round buckets the records under
// the child's current partition count and commits the buckets, ≤ MaxInFlight at once, each with
// its quick tries. Buckets that committed are never sent again: only the failed buckets'
// records are kept (copied off the parent log), and after RetryBackoff the link is checked in
// the local replica and those records are re-bucketed and retried. Fan-out never reroutes a
// key to a sibling partition; it waits (docs/internals/fanout.md §6.3). Returns errLinkGone or ctx's error otherwise;
// the caller must then not advance.
func (c *cursor) commitAll(ctx context.Context, entries []plog.Entry) error {
	held, copied := entries, false
	var parentParts int // looked up at most once per slab, only for a keyless record
	for round := 0; ; round++ {
		n, ok := c.host.ChildPartitions(c.d.Child)
		if !ok || n <= 0 {
			return errLinkGone
		}
		pl := placement{partitions: n, parentIdx: c.d.Partition, rr: c.rr}
		if hasKeyless(held) {
			if parentParts == 0 {
				parentParts = c.host.ParentPartitions(c.d.Parent)
			}
			pl.keepIndex = parentParts == n && c.d.Partition < n
		}
		buckets, targets := bucketize(held, pl)
		failed, lastErr := c.commitBuckets(ctx, buckets)
		c.stalled.Store(len(failed) > 0)
		if len(failed) == 0 {
			if round > 0 {
				c.log.Info("fanout child commits recovered", "rounds", round+1)
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var next []plog.Entry
		for i, e := range held {
			if failed[targets[i]] {
				if !copied {
					e = cloneEntry(e)
				}
				next = append(next, e)
			}
		}
		held, copied = next, true
		if round == 0 || round%30 == 0 {
			c.log.Warn("fanout child commit failing; retrying the failed partitions",
				"failed_partitions", len(failed), "records", len(held), "round", round+1, "err", lastErr)
		}
		if err := clock.Sleep(ctx, c.cfg.RetryBackoff); err != nil {
			return err
		}
		if !c.host.LinkCurrent(c.d.Parent, c.d.Child, c.d.Epoch) {
			return errLinkGone
		}
	}
}

// commitBuckets commits every non-empty bucket, at most MaxInFlight at once, and returns the
// partitions that still failed after their quick tries (with one of their errors). It returns
// only after every attempt it started has returned (docs/internals/fanout.md §6).
func (c *cursor) commitBuckets(ctx context.Context, buckets [][]plog.Entry) (map[int]bool, error) {
	var (
		mu      sync.Mutex
		failed  map[int]bool
		lastErr error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, c.cfg.MaxInFlight)
	for p, b := range buckets {
		if len(b) == 0 {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.commitBucket(ctx, p, b); err != nil {
				mu.Lock()
				if failed == nil {
					failed = map[int]bool{}
				}
				failed[p], lastErr = true, err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, lastErr
}

// commitBucket is one bucket's quick tries: try, wait QuickBackoffs[0], try, … (docs/internals/fanout.md §6.2).
func (c *cursor) commitBucket(ctx context.Context, p int, entries []plog.Entry) error {
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
		err := c.host.CommitChild(cctx, c.d.Child, p, entries)
		cancel()
		if err == nil {
			return nil
		}
		err = fmt.Errorf("commit to %s/%d: %w", c.d.Child, p, err)
		if i >= len(c.cfg.QuickBackoffs) || ctx.Err() != nil {
			return err
		}
		if clock.Sleep(ctx, c.cfg.QuickBackoffs[i]) != nil {
			return err
		}
	}
}
