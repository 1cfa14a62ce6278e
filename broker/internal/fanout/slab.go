package fanout

import (
	"context"
	"errors"
	"fmt"
	"time"

	plog "narad.dev/broker/internal/log"
)

// slab is one batch read by a cursor (docs/internals/fanout.md §7). The records are contiguous parent offsets
// interleaved with skipped ranges; next is the position after everything the slab covers.
type slab struct {
	recs     []plog.Record // alias the parent log's decoded frames: read-only
	bytes    int           // key + payload bytes of recs
	next     int64         // position after the records, dropped and skipped offsets
	dropped  int64         // offsets below the parent's oldest retained offset (drop-behind)
	corrupt  int64         // unreadable parent records skipped
	notDueAt int64         // delay child: commit time of the first record not yet due; else 0
}

// progressed reports whether the slab moves the position (records or skips).
func (s *slab) progressed(from int64) bool { return s.next > from }

// maxClosedRetries bounds back-to-back ErrClosed answers before a read reports an error (a
// host handing out a closed log must not make a cursor spin).
const maxClosedRetries = 3

// readSlab reads the next slab from from (docs/internals/fanout.md §7, docs/internals/fanout.md §8). The first read long-polls up to
// LongPoll on NotifyC; after the first records it tops up until MaxBatchRecords or
// MaxBatchBytes, or until Linger expires. Only a slab's first record may exceed MaxBatchBytes
// by itself. A delay child reads with MaxCommittedAt = now − delay
// and returns as soon as it meets a record that is not due (no long-poll). Offsets aged out of
// the parent are counted as dropped and corrupt records as skipped; both advance next. A slab
// that returns an error holds nothing.
func (c *cursor) readSlab(ctx context.Context, from int64) (slab, error) {
	s := slab{next: from}
	maxAt := gateAt(c.cfg.Now(), c.d.DelayMs)
	pollEnd := time.Now().Add(c.cfg.LongPoll)
	var lingerEnd time.Time
	closed := 0
	for {
		if err := ctx.Err(); err != nil {
			return slab{}, err
		}
		lg, err := c.acquire(s.next)
		if err != nil {
			if len(s.recs) > 0 {
				return s, nil // deliver what was read; the error recurs on the next read
			}
			return slab{}, err
		}
		var (
			notify   <-chan struct{}
			recs     []plog.Record
			notDueAt int64
			rerr     = plog.ErrNotVisible // closed log with nothing past from
		)
		room, roomBytes := c.cfg.MaxBatchRecords-len(s.recs), c.cfg.MaxBatchBytes-s.bytes
		if lg != nil {
			if room <= 0 || roomBytes <= 0 {
				return s, nil
			}
			notify = lg.NotifyC() // before the read: a commit racing it still wakes us
			recs, notDueAt, rerr = lg.ReadDue(s.next, room, roomBytes, maxAt)
		}
		if rerr == nil && len(s.recs) > 0 && len(recs) > 0 && len(recs[0].Key)+len(recs[0].Payload) > roomBytes {
			// A read always returns its first record; a top-up must not take the slab past
			// MaxBatchBytes with it. The record starts the next slab.
			return s, nil
		}
		switch {
		case rerr == nil:
			s.recs = append(s.recs, recs...)
			s.next += int64(len(recs))
			for _, r := range recs {
				s.bytes += len(r.Key) + len(r.Payload)
			}
			if notDueAt != 0 {
				s.notDueAt = notDueAt
				return s, nil
			}
			if lingerEnd.IsZero() && len(s.recs) > 0 {
				lingerEnd = time.Now().Add(c.cfg.Linger)
			}
			if len(s.recs) >= c.cfg.MaxBatchRecords || s.bytes >= c.cfg.MaxBatchBytes {
				return s, nil
			}
		case errors.Is(rerr, plog.ErrOffsetOutOfRange):
			oldest := lg.OldestOffset()
			if oldest <= s.next {
				return c.partial(s, fmt.Errorf("read %d below oldest %d: %w", s.next, oldest, rerr))
			}
			s.dropped += oldest - s.next // docs/internals/fanout.md §9: counted after the durable advance
			s.next = oldest
		case errors.Is(rerr, plog.ErrCorruptRecord):
			c.log.Warn("fanout skipping unreadable parent record", "offset", s.next, "err", rerr)
			s.corrupt++
			s.next++
		case errors.Is(rerr, plog.ErrClosed):
			c.plog = nil // evicted: re-acquire (or peek the closed directory)
			if closed++; closed > maxClosedRetries {
				return c.partial(s, rerr)
			}
		case errors.Is(rerr, plog.ErrNotVisible):
			deadline := pollEnd
			switch {
			case len(s.recs) > 0:
				deadline = lingerEnd
			case s.progressed(from):
				return s, nil // skips only: persist them now
			}
			if !time.Now().Before(deadline) {
				return s, nil
			}
			if err := waitNotify(ctx, notify, time.Until(deadline)); err != nil {
				return slab{}, err
			}
		default:
			return c.partial(s, rerr)
		}
	}
}

// partial returns s if it holds records (the error recurs on the next read) and err otherwise.
func (c *cursor) partial(s slab, err error) (slab, error) {
	if len(s.recs) > 0 {
		return s, nil
	}
	return slab{}, err
}

// waitNotify waits for notify (nil: never fires), d, or ctx.
func waitNotify(ctx context.Context, notify <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-notify:
	case <-t.C:
	}
	return nil
}

// acquire returns the parent log to read at from. When the cursor's log was closed (idle
// eviction) and the closed directory's exact HWM shows nothing at or past from, it returns nil
// without opening the log or stamping its access (docs/internals/fanout.md §7); only backlog reopens it.
func (c *cursor) acquire(from int64) (ParentLog, error) {
	if c.plog != nil {
		return c.plog, nil
	}
	if c.hadLog && c.d.Dir != "" {
		if st, err := plog.PeekDir(c.d.Dir); err == nil && st.Exact && st.HighWatermark <= from {
			return nil, nil
		}
	}
	return c.openLog()
}

// openLog gets the parent log from the host (opening it if needed).
func (c *cursor) openLog() (ParentLog, error) {
	if c.plog != nil {
		return c.plog, nil
	}
	lg, err := c.host.ParentLog(c.d.Parent, c.d.Partition)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errParentLog, err)
	}
	c.plog, c.hadLog = lg, true
	return lg, nil
}
