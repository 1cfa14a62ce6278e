package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/faults"
)

// cursor tails one parent partition for one child (one goroutine, owned by the Runner).
//
// Invariant: the durable next_offset in the cursor file never passes a record the child has not
// committed (seed: commit before advance). The file advances only after every bucket of the
// slab below the new position was acknowledged, and drop-behind is counted only after that
// advance, so a retry never counts it twice.
type cursor struct {
	cfg  Config
	host Host
	obs  Observer
	log  *slog.Logger
	d    Desired
	rr   *atomic.Uint32 // the child topic's keyless round-robin counter (shared per child)

	w      *cursorfile.Writer // set by start
	plog   ParentLog          // nil until opened, and again after the log was closed
	hadLog bool               // plog was opened once: a closed directory may be peeked

	sender *Sender     // remote links only, made on the first slab
	remote remoteState // remote links only: state and last error for the listing

	stalled atomic.Bool   // retrying buckets past their quick tries (listing state "stalled")
	dueLag  atomic.Uint64 // float64 bits of the last due lag (delay children)
}

// run is the cursor loop (docs/internals/fanout.md §6). It returns nil when ctx ends, and an error when the
// cursor must stop: anchor unconfirmed (ErrUnconfirmed), link gone, parent log unavailable,
// cursor file unwritable, or an injected fault. Either way the cursor's series are forgotten.
func (c *cursor) run(ctx context.Context) error {
	defer c.forget()
	defer func() {
		if c.w != nil {
			c.w.Close()
		}
	}()
	pos, err := c.start(ctx)
	if err != nil {
		return quiet(ctx, err)
	}
	if so, ok := c.obs.(StartObserver); ok {
		so.CursorStarted(c.d.Parent, c.d.Child, c.d.Partition, c.d.Remote != nil)
	}
	// The lag series exist from the attach on, before the first slab: the parent log is opened
	// here only when it holds records past pos (as the first read would).
	if _, err := c.acquire(pos); err == nil {
		c.report(slab{}, pos)
	}
	for ctx.Err() == nil {
		s, err := c.readSlab(ctx, pos)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errParentLog) {
				return quiet(ctx, err)
			}
			c.log.Warn("fanout slab read failed; backing off", "offset", pos, "err", err)
			if clock.Sleep(ctx, c.cfg.RetryBackoff) != nil {
				return nil
			}
			continue
		}
		if len(s.recs) > 0 {
			stopReports := c.reportWhileDelivering(s, pos)
			retry, err := c.deliver(ctx, s, pos)
			stopReports()
			if err != nil {
				return quiet(ctx, err) // never advance past a partially committed slab
			}
			if retry {
				continue
			}
		}
		if len(s.recs) > 0 {
			if err := faults.Check(FaultAfterChildCommit); err != nil {
				return err
			}
		}
		if s.progressed(pos) {
			if err := c.w.Advance(s.next); err != nil {
				c.log.Error("fanout cursor advance failed; stopping the cursor", "offset", s.next, "err", err)
				return err
			}
			pos = s.next
			if lost := s.dropped + s.corrupt; lost > 0 {
				c.log.Warn("fanout child lost parent records", "dropped_behind", s.dropped,
					"skipped_corrupt", s.corrupt, "next_offset", pos)
				c.obs.Dropped(c.d.Parent, c.d.Child, lost)
			}
			if c.d.Remote != nil {
				switch {
				case s.dropped > 0:
					c.remote.set(RemoteBehindRetention, fmt.Sprintf("%d parent records aged out before they were sent", s.dropped))
				case len(s.recs) > 0:
					c.remote.set(RemoteActive, "")
				}
			}
		}
		c.report(s, pos)
		if c.d.DelayMs > 0 && len(s.recs) == 0 && s.notDueAt != 0 {
			if clock.Sleep(ctx, dueSleep(c.cfg.Now(), s.notDueAt, c.d.DelayMs, c.cfg.DueWakeCap)) != nil {
				return nil
			}
		}
	}
	return nil
}

// deliver hands the slab's records to the child: every bucket committed (local child), or one
// remote send. retry means the remote target did not accept the whole slab: after the backoff
// the caller reads the slab again from the unadvanced position. An error stops the cursor
// (nil-equivalent when ctx ended).
func (c *cursor) deliver(ctx context.Context, s slab, pos int64) (retry bool, err error) {
	if c.d.Remote == nil {
		return false, c.commitAll(ctx, entriesOf(s.recs))
	}
	if err := c.sendRemote(ctx, s); err == nil {
		return false, nil
	}
	// seed: a slab not fully accepted is read again from the unadvanced position
	// (duplicates on the target, never a gap).
	c.report(s, pos)
	wait := remoteBackoff(c.cfg.RetryBackoff, c.cfg.RemoteBackoffCap, c.remote.failures)
	if err := clock.Sleep(ctx, wait); err != nil {
		return false, err
	}
	if !c.host.LinkCurrent(c.d.Parent, c.d.Child, c.d.Epoch) {
		return false, errLinkGone
	}
	return true, nil
}

// reportWhileDelivering re-reports the lag series every LagReportEvery while the slab at pos is
// being delivered (quick tries, held-bucket retries, remote backoff), so a stalled child shows
// a growing lag (parent HWM − pos) and due lag during the outage. The returned stop must be
// called before the cursor touches its fields again: after it returns no report runs.
func (c *cursor) reportWhileDelivering(s slab, pos int64) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	tick := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		c.report(s, pos)
		t.Reset(c.cfg.LagReportEvery)
	}
	mu.Lock()
	t = time.AfterFunc(c.cfg.LagReportEvery, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// report sets the cursor's lag series (docs/internals/fanout.md §9): offset lag always, due lag for a delay child.
func (c *cursor) report(s slab, pos int64) {
	if c.d.Remote != nil {
		c.reportRemote(s, pos)
		return
	}
	if c.plog != nil {
		c.obs.Lag(c.d.Parent, c.d.Child, c.d.Partition, max(0, c.plog.HighWatermark()-pos))
	} else {
		c.obs.Lag(c.d.Parent, c.d.Child, c.d.Partition, 0) // closed log, caught up (acquire peeked)
	}
	if c.d.DelayMs > 0 {
		lag := 0.0
		if len(s.recs) > 0 {
			lag = dueLag(c.cfg.Now(), s.recs[0].CommittedAt, c.d.DelayMs)
		}
		c.obs.DueLag(c.d.Parent, c.d.Child, c.d.Partition, lag)
		c.dueLag.Store(math.Float64bits(lag))
	}
}

// quiet turns an error caused by ctx ending into a clean stop.
func quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	return err
}
