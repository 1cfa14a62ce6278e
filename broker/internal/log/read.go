package log

import (
	"errors"
	"fmt"
	"io"
)

// Read returns the record at offset. It serves only [OldestOffset, HighWatermark):
// below → ErrOffsetOutOfRange, at or above → ErrNotVisible; an offset in a damaged frame or a
// recovery gap → ErrCorruptRecord. The record's slices alias the decode cache (read-only).
func (l *Log) Read(offset int64) (Record, error) {
	if l.closed.Load() {
		return Record{}, ErrClosed
	}
	if offset >= l.hwm.Load() {
		return Record{}, ErrNotVisible
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return Record{}, ErrClosed
	}
	if offset < l.segs[0].base {
		return Record{}, ErrOffsetOutOfRange
	}
	df, err := l.frameFor(offset)
	if err != nil {
		return Record{}, err
	}
	return df.recs[offset-df.base], nil
}

// ReadRange returns consecutive records starting at from, stopping at the HWM, after
// maxRecords records, or before the record that would take the sum of key and payload sizes
// past maxBytes (the first record is always returned). A limit ≤ 0 is no limit. It stops
// before a corrupt record; if from itself is corrupt it returns ErrCorruptRecord, and the
// caller skips to from+1. Bounds errors are those of Read. Records alias the decode cache.
func (l *Log) ReadRange(from int64, maxRecords int, maxBytes int) ([]Record, error) {
	recs, _, err := l.readRange(from, maxRecords, maxBytes, NoDueLimit)
	return recs, err
}

// NoDueLimit is the maxCommittedAt of ReadDue that admits every record.
const NoDueLimit int64 = 1<<63 - 1

// ReadDue is ReadRange for a delay gate (the fan-out slab read of a delay child): it also stops
// at the first record committed after maxCommittedAt (unix ms) and returns that record's commit
// time as notDueAt (0 when it stopped for any other reason). Commit times never decrease along
// a partition, so nothing after that record is due either: a caller may sleep until notDueAt.
// The records point into decoded frames, like ReadRange's: do not modify them.
func (l *Log) ReadDue(from int64, maxRecords, maxBytes int, maxCommittedAt int64) (recs []Record, notDueAt int64, err error) {
	return l.readRange(from, maxRecords, maxBytes, maxCommittedAt)
}

func (l *Log) readRange(from int64, maxRecords, maxBytes int, maxCommittedAt int64) ([]Record, int64, error) {
	if l.closed.Load() {
		return nil, 0, ErrClosed
	}
	hwm := l.hwm.Load()
	if from >= hwm {
		return nil, 0, ErrNotVisible
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return nil, 0, ErrClosed
	}
	if from < l.segs[0].base {
		return nil, 0, ErrOffsetOutOfRange
	}
	want := hwm - from
	if maxRecords > 0 {
		want = min(want, int64(maxRecords))
	}
	var out []Record // allocated at the first record: an idle delay read returns none
	bytes := 0
	for off := from; off < hwm; {
		df, err := l.frameFor(off)
		if err != nil {
			if len(out) == 0 {
				return nil, 0, err
			}
			return out, 0, nil // the caller meets the error at the next call
		}
		for _, r := range df.recs[off-df.base:] {
			if off >= hwm || int64(len(out)) >= want {
				return out, 0, nil
			}
			if r.CommittedAt > maxCommittedAt {
				return out, r.CommittedAt, nil
			}
			sz := len(r.Key) + len(r.Payload)
			if maxBytes > 0 && len(out) > 0 && bytes+sz > maxBytes {
				return out, 0, nil
			}
			if out == nil {
				out = make([]Record, 0, min(want, 1024))
			}
			out = append(out, r)
			bytes += sz
			off++
		}
	}
	return out, 0, nil
}

// frameFor returns the decoded frame containing off (oldest ≤ off < hwm). Lookup order
// (docs/internals/storage-format.md §11): decode cache, nav cache, sparse index + header walk, then read, CRC
// check, decode and cache. Caller holds mu shared.
func (l *Log) frameFor(off int64) (*decodedFrame, error) {
	seg := l.segmentFor(off)
	if seg == nil {
		return nil, ErrOffsetOutOfRange
	}
	l.cmu.Lock()
	if df := l.dcache.get(off); df != nil {
		l.cmu.Unlock()
		return df, nil
	}
	start := int64(0)
	var known *navEntry
	if e, ok := l.nav.floor(off); ok && e.seg == seg.base {
		if off < e.base+int64(e.count) {
			known = &e
		} else {
			start = e.pos + e.size
		}
	}
	idx := l.indexOf(seg)
	if idx != nil && known == nil {
		if a := idx.floor(off); a.base >= 0 && a.pos > start {
			start = a.pos
		}
	}
	l.cmu.Unlock()

	if known == nil && idx == nil {
		built, err := buildSealedIndex(seg)
		if err != nil {
			return nil, fmt.Errorf("log: index %s: %w", seg.path, err)
		}
		l.cmu.Lock()
		if seg.idx == nil {
			seg.idx = built
			l.markHot(seg)
		}
		if a := seg.idx.floor(off); a.base >= 0 && a.pos > start {
			start = a.pos
		}
		l.cmu.Unlock()
	}

	var pos, size int64
	if known != nil {
		pos, size = known.pos, known.size
	} else {
		var err error
		pos, size, err = l.locate(seg, start, off)
		if err != nil {
			return nil, err
		}
	}
	df, err := l.loadFrame(seg, pos, size, off)
	if err != nil {
		return nil, err
	}
	l.cmu.Lock()
	l.nav.put(navEntry{base: df.base, count: int32(len(df.recs)), size: size, seg: seg.base, pos: pos})
	df = l.dcache.put(df)
	l.cmu.Unlock()
	return df, nil
}

// locate walks frame headers of seg from start to the frame containing off and returns its
// position and size. Meeting a frame past off, damage, or the end of the segment means off
// lies in a gap: ErrCorruptRecord.
func (l *Log) locate(seg *segment, start, off int64) (pos, size int64, err error) {
	segSize := seg.size.Load()
	w := newWindowReader(seg.f, segSize).pooled()
	defer w.release()
	found := false
	werr := walkHeaders(w, seg, segSize, start, func(p int64, h frameHeader) bool {
		if h.base > off {
			return true
		}
		if off < h.end() {
			pos, size, found = p, h.size(), true
			return true
		}
		return false
	})
	if werr != nil {
		return 0, 0, fmt.Errorf("log: read %s: %w", seg.path, werr)
	}
	if !found {
		return 0, 0, fmt.Errorf("offset %d: in a damaged region of %s: %w", off, seg.path, ErrCorruptRecord)
	}
	return pos, size, nil
}

// loadFrame reads the frame at pos (size bytes), checks its CRC and decodes it.
func (l *Log) loadFrame(seg *segment, pos, size, off int64) (*decodedFrame, error) {
	buf := make([]byte, size)
	if _, err := seg.f.ReadAt(buf, pos); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("offset %d: frame at %s:%d truncated: %w", off, seg.path, pos, ErrCorruptRecord)
		}
		return nil, fmt.Errorf("log: read %s at %d: %w", seg.path, pos, err)
	}
	recs, n, err := decodeFrame(buf)
	if err != nil {
		return nil, fmt.Errorf("offset %d: %w", off, err)
	}
	base := recs[0].Offset
	if off < base || off >= base+int64(len(recs)) {
		return nil, fmt.Errorf("offset %d: frame at %s:%d holds %d+%d: %w", off, seg.path, pos, base, len(recs), ErrCorruptRecord)
	}
	return &decodedFrame{base: base, recs: recs, bytes: n, seg: seg.base}, nil
}

// indexOf returns seg's sparse index, or nil if a sealed segment's index is not built. The
// active segment always has one. Caller holds cmu.
func (l *Log) indexOf(seg *segment) *sparseIndex {
	if seg.idx != nil && seg != l.segs[len(l.segs)-1] {
		l.markHot(seg)
	}
	return seg.idx
}

// markHot records a use of a sealed segment's index and drops the least recently used one
// beyond hotSealedIndex. Caller holds cmu.
func (l *Log) markHot(seg *segment) {
	l.clock++
	seg.idxUse = l.clock
	for _, s := range l.hot {
		if s == seg {
			return
		}
	}
	l.hot = append(l.hot, seg)
	if len(l.hot) > hotSealedIndex {
		v := 0
		for i, s := range l.hot {
			if s.idxUse < l.hot[v].idxUse {
				v = i
			}
		}
		l.hot[v].idx = nil
		l.hot = append(l.hot[:v], l.hot[v+1:]...)
	}
}
