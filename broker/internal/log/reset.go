package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// FaultResetTo fires in ResetTo after every old segment is removed, before the HWM is
// persisted and the new segment created.
const FaultResetTo = "log.reset_to"

// ErrResetNotAhead refuses a ResetTo at or below the end offset: only a log that lies wholly
// below the new start may be emptied.
var ErrResetNotAhead = errors.New("log: reset start not past the end offset")

// ResetTo empties the log and makes it start, empty, at start: next offset, HWM and oldest
// offset all become start (a follower whose whole log lies below its leader's log start,
// docs/internals/replication.md §5). start must be past the end offset (ErrResetNotAhead), so
// no record at or above start is lost, and the HWM only moves forward.
//
// Crash safety: the segments are removed oldest first, each removal made durable before the
// next; then the HWM is persisted as start, then the empty segment with base start is created
// and the directory fsynced. A crash at any step leaves a contiguous log that ends below start
// (a suffix of the old one, or an empty directory, which recovery opens as an empty log at 0
// with its hwm file clamped), which the caller resets again; after the last step the log
// recovers as the reset one. Readers are held off while the files change. A failure puts the
// log in failed state (reopen).
func (l *Log) ResetTo(start int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if start <= l.next {
		return fmt.Errorf("%w: %d ≤ end offset %d", ErrResetNotAhead, start, l.next)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.segs
	l.cmu.Lock()
	l.dcache.reset()
	l.nav = navCache{}
	l.dropHot(old)
	l.cmu.Unlock()
	if err := l.resetFiles(start); err != nil {
		l.failed.Store(true)
		return fmt.Errorf("%w: reset to %d: %w", ErrFailed, start, err)
	}
	l.next = start
	l.nextA.Store(start)
	l.ends.clear()
	l.advance(start)
	l.oldest.Store(start)
	l.bound.Store(&boundaryPos{segBase: start})
	l.logger.Warn("log reset to start at a later offset", "start", start, "segments_removed", len(old))
	l.Broadcast()
	return nil
}

// resetFiles does ResetTo's file steps and installs the new segment in segs. Caller holds
// wmu and mu. On failure segs holds what is left (at least one segment, possibly closed).
func (l *Log) resetFiles(start int64) error {
	for len(l.segs) > 0 {
		s := l.segs[0]
		s.f.Close()
		err := os.Remove(s.path)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err == nil {
			err = durable.SyncDir(l.dir)
		}
		if err != nil {
			return fmt.Errorf("remove %s: %w", s.path, err)
		}
		if len(l.segs) > 1 {
			l.segs = l.segs[1:]
		} else {
			break // the last stays listed (closed) until its successor exists
		}
	}
	if err := faults.Check(FaultResetTo); err != nil {
		return err
	}
	if err := l.persistHWM(start, start); err != nil {
		return err
	}
	path := filepath.Join(l.dir, SegmentFileName(start))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := durable.SyncDir(l.dir); err != nil {
		f.Close()
		return err
	}
	seg := &segment{base: start, path: path, f: f, idx: newSparseIndex(l.opts.SegmentBytes)}
	l.segs = []*segment{seg}
	return nil
}
