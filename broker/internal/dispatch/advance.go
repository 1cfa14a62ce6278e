package dispatch

import (
	"log/slog"
	"sync"
	"time"

	"narad.dev/broker/internal/wal"
)

const (
	// advanceEvery is the least time between the starts of two checkpoint writes: under load
	// a pass ends every few milliseconds, and each write costs a pwrite and an fdatasync (and
	// the compaction it triggers). The durable checkpoint lags by at most this plus one write.
	advanceEvery = 20 * time.Millisecond
	// advanceRetry paces a checkpoint write that failed when no newer checkpoint asks for one.
	advanceRetry = 100 * time.Millisecond
)

// advancer makes the WAL checkpoint durable off the pass's path (docs/internals/produce-path.md §4,
// last step). A pass moves the in-memory checkpoint (committedAhead's base) at once and hands
// the new value here; the next pass scans from it while this goroutine writes it and compacts.
// Requests coalesce: a write in progress is followed by one write of the newest value, started
// no sooner than advanceEvery after the previous one.
//
// The durable checkpoint may lag the in-memory one, never lead it, and never passes a seq the
// pass did not finish: a crash in between replays records already committed (duplicates within
// at-least-once), exactly as it replays committedAhead. Compaction runs only behind a durable
// checkpoint (wal.Advance), so no record above the durable checkpoint leaves the disk.
type advancer struct {
	w   *wal.WAL
	log *slog.Logger

	mu      sync.Mutex
	want    uint64 // newest checkpoint asked for
	wake    chan struct{}
	done    chan struct{}
	stopC   chan struct{} // closed by stop: a paced wait ends at once
	errAt   time.Time     // last error log (rate limit)
	stopped bool
}

func newAdvancer(w *wal.WAL, log *slog.Logger) *advancer {
	return &advancer{w: w, log: log, want: w.Checkpoint(), wake: make(chan struct{}, 1), done: make(chan struct{}),
		stopC: make(chan struct{})}
}

// request asks for the durable checkpoint to reach cp.
func (a *advancer) request(cp uint64) {
	a.mu.Lock()
	if cp > a.want {
		a.want = cp
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run writes requested checkpoints until stop; it then writes the last one requested, so a
// clean shutdown leaves the durable checkpoint where the last pass put it.
func (a *advancer) run() {
	defer close(a.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var last time.Time // start of the previous write
	for {
		a.mu.Lock()
		want, stopped := a.want, a.stopped
		a.mu.Unlock()
		if want > a.w.Checkpoint() {
			if wait := advanceEvery - time.Since(last); wait > 0 && !stopped {
				retry.Reset(wait)
				select {
				case <-retry.C:
				case <-a.stopC:
				}
				continue // read the newest value (and whether to stop) again
			}
			last = time.Now()
			if err := a.w.Advance(want); err != nil {
				if stopped {
					a.log.Error("dispatch: advancing the WAL checkpoint failed at shutdown", "offset", want, "err", err)
					return
				}
				if now := time.Now(); now.Sub(a.errAt) >= errorLogInterval {
					a.errAt = now
					a.log.Error("dispatch: advancing the WAL checkpoint failed", "offset", want, "err", err)
				}
				retry.Reset(advanceRetry)
			}
		}
		if stopped {
			return
		}
		select {
		case <-a.wake:
		case <-retry.C:
		case <-a.stopC:
		}
	}
}

// stop ends run after a last write of the newest requested checkpoint and waits for it.
func (a *advancer) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	close(a.stopC)
	<-a.done
}
