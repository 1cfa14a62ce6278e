package log

import (
	"errors"
	"fmt"
	"os"
	"time"

	"narad.dev/broker/internal/durable"
)

// RetentionResult counts what a retention pass deleted.
type RetentionResult struct {
	Segments int
	Bytes    int64
	Messages int64 // offsets covered by the deleted segments
}

// expired reports whether a segment with mtime is past retention at now (retentionMs > 0).
func expired(mtime time.Time, retentionMs int64, now time.Time) bool {
	return mtime.Before(now.Add(-time.Duration(retentionMs) * time.Millisecond))
}

// ApplyRetention deletes whole sealed segments of the open log, oldest first, while they are
// expired (mtime < now − retention, docs/internals/storage-format.md §10); it stops at the first sealed segment that
// is not, so retained offsets stay contiguous. The active segment is never deleted;
// retentionMs ≤ 0 keeps everything. It runs under the write lock, dropping their decode-cache, nav-cache and index entries so no reader dereferences a
// removed file.
func (l *Log) ApplyRetention(retentionMs int64, now time.Time) (RetentionResult, error) {
	var res RetentionResult
	if retentionMs <= 0 {
		return res, nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.closed.Load() {
		return res, ErrClosed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	n := 0
	for ; n < len(l.segs)-1; n++ {
		s := l.segs[n]
		fi, serr := s.f.Stat()
		if serr != nil {
			err = fmt.Errorf("log: stat %s: %w", s.path, serr)
			break
		}
		if !expired(fi.ModTime(), retentionMs, now) {
			break
		}
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = fmt.Errorf("log: retention: %w", rerr)
			break
		}
		s.f.Close()
		res.Segments++
		res.Bytes += s.size.Load()
		res.Messages += l.segs[n+1].base - s.base
	}
	if n == 0 {
		return res, err
	}
	dropped := l.segs[:n]
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.oldest.Store(l.segs[0].base)
	l.cmu.Lock()
	for _, s := range dropped {
		l.dcache.dropSegment(s.base)
		l.nav.dropSegment(s.base)
		s.idx = nil
		for i, h := range l.hot {
			if h == s {
				l.hot = append(l.hot[:i], l.hot[i+1:]...)
				break
			}
		}
	}
	l.cmu.Unlock()
	if serr := durable.SyncDir(l.dir); serr != nil && err == nil {
		err = serr
	}
	l.logger.Info("log retention deleted segments", "segments", res.Segments, "bytes", res.Bytes,
		"messages", res.Messages, "oldest_offset", l.segs[0].base)
	return res, err
}

// RetentionOwed reports whether ApplyRetention would delete something now (idle eviction
// waits until it is false).
func (l *Log) RetentionOwed(retentionMs int64, now time.Time) bool {
	if retentionMs <= 0 {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() || len(l.segs) < 2 {
		return false
	}
	fi, err := l.segs[0].f.Stat()
	return err == nil && expired(fi.ModTime(), retentionMs, now)
}

// ColdRetention applies retention to the CLOSED log in dir without opening it (the cold
// retention walk, docs/internals/storage-format.md §10): it stats segment files and deletes expired sealed ones by
// the same oldest-first rule as ApplyRetention;
// the hwm file and the active segment are never touched. The caller holds the topic's open
// guard exclusively so the log cannot be opened meanwhile.
func ColdRetention(dir string, retentionMs int64, now time.Time) (RetentionResult, error) {
	var res RetentionResult
	if retentionMs <= 0 {
		return res, nil
	}
	segs, err := listSegments(dir)
	if err != nil {
		return res, fmt.Errorf("log: cold retention %s: %w", dir, err)
	}
	for n := 0; n < len(segs)-1; n++ {
		s := segs[n]
		if !expired(s.mtime, retentionMs, now) {
			break
		}
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = fmt.Errorf("log: cold retention: %w", rerr)
			break
		}
		res.Segments++
		res.Bytes += s.size
		res.Messages += segs[n+1].base - s.base
	}
	if res.Segments > 0 {
		if serr := durable.SyncDir(dir); serr != nil && err == nil {
			err = serr
		}
	}
	return res, err
}
