package log

import (
	"fmt"
	"time"
)

// Stats describes a partition log. For an open log every number is exact; for a closed
// directory (PeekDir) the HWM is a number only when Exact is true.
type Stats struct {
	Segments        int
	SizeBytes       int64     // sum of segment file sizes
	OldestOffset    int64     // base of the oldest segment
	NextOffset      int64     // open log: next offset to assign; closed: equals HighWatermark
	HighWatermark   int64     // exclusive upper bound of visible offsets
	OldestSegmentAt time.Time // mtime of the oldest segment (the retention clock)
	// Exact reports whether HighWatermark is a real boundary: always for an open log; for a
	// closed directory only if its hwm file is 16 bytes, CRC-valid and CLEAN=1 (docs/internals/storage-format.md §7.5), or there is no hwm file and no record bytes.
	Exact bool
}

// Stats returns the open log's sizes and offsets. After Close, Exact is false.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	st := Stats{
		Segments:      len(l.segs),
		OldestOffset:  l.oldest.Load(),
		NextOffset:    l.nextA.Load(),
		HighWatermark: l.hwm.Load(),
		Exact:         !l.closed.Load(),
	}
	for _, s := range l.segs {
		st.SizeBytes += s.size.Load()
	}
	if st.Exact {
		if fi, err := l.segs[0].f.Stat(); err == nil {
			st.OldestSegmentAt = fi.ModTime()
		}
	}
	return st
}

// PeekDir describes the CLOSED log in dir from the directory listing and the hwm file only:
// it never opens the log, never recovers and never writes. Callers must not report the HWM
// (or lag derived from it) when Exact is false.
func PeekDir(dir string) (Stats, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return Stats{}, fmt.Errorf("log: peek %s: %w", dir, err)
	}
	var st Stats
	st.Segments = len(segs)
	for _, s := range segs {
		st.SizeBytes += s.size
	}
	if len(segs) > 0 {
		st.OldestOffset = segs[0].base
		st.OldestSegmentAt = segs[0].mtime
	}
	hs, err := readHWMFile(dir)
	switch {
	case err != nil:
		// corrupt or unreadable: not exact
	case hs.present:
		st.HighWatermark = hs.hwm
		st.Exact = hs.clean && !hs.legacy
	case st.SizeBytes == 0:
		// no hwm file and no record bytes: nothing to hide, the boundary is the tail
		if len(segs) > 0 {
			st.HighWatermark = segs[len(segs)-1].base
		}
		st.Exact = true
	}
	st.NextOffset = st.HighWatermark
	return st, nil
}
