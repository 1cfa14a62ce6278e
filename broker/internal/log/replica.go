package log

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// A replicated partition (docs/internals/replication.md §4–§7) splits Commit in two. The
// leader appends records to its hidden tail (Append) and makes them visible only once enough
// replicas hold them (AdvanceHWM). A follower appends the leader's frames byte for byte
// (AppendFrames), learns the HWM from the leader (AdvanceHWM), and cuts a suffix the new
// leader does not have (TruncateTail). ReadFrames serves the leader's side of the stream. The
// invariants of the package hold throughout: the HWM only moves forward, always falls on a
// frame boundary and is written to the hwm file before it moves (fsynced lazily, see
// AdvanceHWM); nothing below it is ever truncated.

// FaultTruncateTail fires in TruncateTail after the later segments are removed, before the
// segment holding the cut is truncated (crash tests arm it with NARAD_FAULTS).
const FaultTruncateTail = "log.truncate_tail"

// ErrNotFrameBoundary reports an offset that falls inside a frame, where no HWM or truncation
// point may be.
var ErrNotFrameBoundary = errors.New("log: offset is not at a frame boundary")

// ErrBeyondEnd reports an HWM past the log's end offset.
var ErrBeyondEnd = errors.New("log: offset beyond the log end")

// ErrBelowHWM reports a truncation below the high watermark: committed records are never cut.
var ErrBelowHWM = errors.New("log: truncation below the high watermark")

// ErrNotContiguous reports replicated frames that do not start at the log's end offset or do
// not follow each other.
var ErrNotContiguous = errors.New("log: frames do not continue the log")

// Append durably appends entries stamped committedAtMs after the last record, like Commit,
// but leaves them in the hidden tail: the HWM does not move. It returns the first assigned
// offset and the new end offset (LEO).
func (l *Log) Append(entries []Entry, committedAtMs int64) (first, leo int64, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	first, seg, end, err := l.appendLocked(entries, committedAtMs)
	if err != nil {
		return 0, 0, err
	}
	l.rollIfFull(seg, end)
	l.releaseScratch()
	l.Broadcast()
	return first, l.next, nil
}

// AppendFrames durably appends frames, a run of whole frames read from another replica's log
// (ReadFrames), byte for byte: every frame must pass its CRC check and the first must start at
// the end offset, each next where the previous ended. The HWM does not move. It returns the
// new end offset. frames is written from as it is and the verify re-reads the file into it
// (as a commit re-reads into its encode buffer): the caller must not use it concurrently, and
// after a failure its content is unspecified.
func (l *Log) AppendFrames(frames []byte) (leo int64, err error) {
	return l.appendFrames(frames, false)
}

// appendFrames is AppendFrames, with direct writes when direct is set (AppendFramesDirect).
func (l *Log) appendFrames(frames []byte, direct bool) (leo int64, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if len(frames) == 0 {
		return 0, ErrEmptyBatch
	}
	l.frames = l.frames[:0]
	next := l.next
	for rel := 0; rel < len(frames); {
		h, err := checkFrame(frames[rel:])
		if err != nil {
			return 0, fmt.Errorf("log: replicated frame at byte %d: %w: %w", rel, err, ErrCorruptRecord)
		}
		if h.base != next {
			return 0, fmt.Errorf("%w: frame at byte %d starts at offset %d, want %d", ErrNotContiguous, rel, h.base, next)
		}
		l.frames = append(l.frames, frameMeta{rel: rel, base: h.base, count: h.count, size: int(h.size())})
		rel += int(h.size())
		next = h.end()
	}
	seg, err := l.activeForWrite()
	if err != nil {
		return 0, err
	}
	var end int64
	if direct {
		end, err = l.writeFramesDirect(seg, frames)
	} else {
		end, err = l.writeFrames(seg, l.next, frames, nil) // no copy: frames is written as it is
	}
	if err != nil {
		return 0, err
	}
	l.next = next
	l.nextA.Store(next)
	l.ends.add(next, boundaryPos{segBase: seg.base, pos: end})
	l.rollIfFull(seg, end)
	l.releaseScratch()
	l.Broadcast()
	return next, nil
}

// AdvanceHWM makes the records below h visible: h is written to the hwm file, then the HWM
// moves. It holds the HWM lock only, so it runs while an append writes and fsyncs (the end
// offset it checks h against moves only once an append is durable). The write is not fsynced: a replicated log's records are durable by their own fsync
// on every ISR member, and an HWM that a power loss sets back only hides records until the
// leader's HWM passes them again (docs/internals/storage-format.md §20); a process crash
// keeps the written value. An h at or below the current HWM is a no-op; h past the end offset
// is ErrBeyondEnd, h inside a frame ErrNotFrameBoundary.
func (l *Log) AdvanceHWM(h int64) error {
	l.hmu.Lock() // not wmu: an append on disk does not hold the HWM back
	defer l.hmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if h <= l.hwm.Load() {
		return nil
	}
	if next := l.nextA.Load(); h > next {
		return fmt.Errorf("%w: hwm %d, end offset %d", ErrBeyondEnd, h, next)
	}
	b, err := l.alignedBoundary(h)
	if err != nil {
		return err
	}
	if err := l.storeHWM(h, h, false); err != nil {
		return err
	}
	l.advance(h)
	l.bound.Store(&b)
	l.Broadcast()
	return nil
}

// alignedBoundary is computeBoundary(off) that also proves off is a frame boundary: the
// start of a frame, or the end of the log (off at most the end offset). Caller holds hmu,
// not mu; an append may be writing meanwhile, past the durable size it walks to.
func (l *Log) alignedBoundary(off int64) (boundaryPos, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	seg := l.segmentFor(off)
	if seg == nil {
		return boundaryPos{segBase: l.segs[0].base}, nil
	}
	if b, ok := l.ends.find(off); ok && b.segBase == seg.base {
		return b, nil // the end of a recent append: no walk
	}
	l.walks++
	size := seg.size.Load()
	b := boundaryPos{segBase: seg.base, pos: size}
	aligned := off == l.nextA.Load()
	start := l.anchorFor(seg, off)
	w := newWindowReader(seg.f, size)
	err := walkHeaders(w, seg, size, start, func(pos int64, h frameHeader) bool {
		if h.base >= off {
			b.pos, aligned = pos, h.base == off
			return true
		}
		if h.end() == off {
			aligned = true
		}
		return h.end() > off
	})
	if err != nil {
		return boundaryPos{}, fmt.Errorf("log: walk %s: %w", seg.path, err)
	}
	if !aligned {
		return boundaryPos{}, fmt.Errorf("%w: offset %d in %s", ErrNotFrameBoundary, off, seg.path)
	}
	return b, nil
}

// TruncateTail cuts the hidden tail back to end: the records in [end, LEO) are removed from
// disk (the segment holding end is truncated at the frame starting there and every later
// segment is deleted, each change fsynced) and end becomes the end offset. end at or past the
// end offset is a no-op; below the HWM it is ErrBelowHWM; inside a frame ErrNotFrameBoundary.
// Readers are held off while the files change.
func (l *Log) TruncateTail(end int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if end >= l.next {
		return nil
	}
	if end < l.hwm.Load() {
		return fmt.Errorf("%w: %d < hwm %d", ErrBelowHWM, end, l.hwm.Load())
	}
	b, err := l.alignedBoundary(end)
	l.ends.clear() // offsets past end will be other frames' (and TruncateTail is rare)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := 0
	for keep < len(l.segs) && l.segs[keep].base <= b.segBase {
		keep++
	}
	cut := l.segs[keep-1]
	// Later segments go first, newest first, each removal made durable before the next, and
	// the segment holding end is cut last: a crash at any point leaves a contiguous log that
	// still ends at or past end and above the HWM, which the replica truncates again.
	dropped := l.segs[keep:]
	for i := len(dropped) - 1; i >= 0; i-- {
		s := dropped[i]
		s.f.Close()
		l.segs = l.segs[: keep+i : keep+i]
		err := os.Remove(s.path)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err == nil {
			err = durable.SyncDir(l.dir)
		}
		if err != nil {
			l.failed.Store(true)
			return fmt.Errorf("%w: remove %s: %w", ErrFailed, s.path, err)
		}
	}
	if err := faults.Check(FaultTruncateTail); err != nil {
		l.failed.Store(true)
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	if len(dropped) > 0 {
		if err := l.reopenActive(cut); err != nil {
			l.failed.Store(true)
			return fmt.Errorf("%w: %w", ErrFailed, err)
		}
	}
	err = cut.f.Truncate(b.pos)
	if err == nil {
		err = durable.Fdatasync(cut.f)
	}
	if err != nil {
		l.failed.Store(true)
		return fmt.Errorf("%w: truncate %s at %d: %w", ErrFailed, cut.path, b.pos, err)
	}
	cut.size.Store(b.pos)
	l.cmu.Lock()
	l.dcache.reset()
	l.nav = navCache{}
	l.dropHot(dropped)
	idx, err := buildSealedIndex(cut)
	if err == nil {
		idx.stride = newSparseIndex(l.opts.SegmentBytes).stride // it grows again
		cut.idx = idx
		l.dropHot([]*segment{cut}) // the active segment's index is never evicted
	}
	l.cmu.Unlock()
	if err != nil {
		l.failed.Store(true)
		return fmt.Errorf("%w: index %s: %w", ErrFailed, cut.path, err)
	}
	l.next = end
	l.nextA.Store(end)
	l.logger.Warn("log tail truncated", "end_offset", end, "segments_removed", len(dropped))
	return nil
}

// reopenActive reopens a sealed segment for writing: a truncation makes it the active one.
// Caller holds wmu and mu.
func (l *Log) reopenActive(seg *segment) error {
	f, err := openSegmentFile(seg.path, true)
	if err != nil {
		return fmt.Errorf("log: reopen %s: %w", seg.path, err)
	}
	seg.f.Close()
	seg.f = f
	return nil
}

// dropHot forgets segs in the sealed-index LRU. Caller holds cmu.
func (l *Log) dropHot(segs []*segment) {
	for _, s := range segs {
		for i, h := range l.hot {
			if h == s {
				l.hot = append(l.hot[:i], l.hot[i+1:]...)
				break
			}
		}
	}
}

// ReadFrames returns whole frames, byte for byte, starting with the frame at offset from (a
// frame boundary) and ending at the log end offset (hidden tail included) or before maxBytes
// would be exceeded; at least one frame when one starts at from, whatever its size. next is
// the offset after the last frame returned; an empty result with next == from means there is
// nothing past from yet.
func (l *Log) ReadFrames(from int64, maxBytes int) (frames []byte, next int64, err error) {
	return l.ReadFramesAppend(nil, from, maxBytes)
}

// ReadFramesAppend is ReadFrames appending the frames to dst, whose capacity it reuses (the
// leader reads a catch-up answer into a pooled buffer: a new one of 8 MiB costs zeroing and
// page faults). maxBytes counts the appended bytes only.
func (l *Log) ReadFramesAppend(dst []byte, from int64, maxBytes int) (frames []byte, next int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return nil, 0, ErrClosed
	}
	if from < l.oldest.Load() {
		return nil, 0, fmt.Errorf("%w: %d < %d", ErrOffsetOutOfRange, from, l.oldest.Load())
	}
	leo := l.nextA.Load()
	if from >= leo {
		if from > leo {
			return nil, 0, fmt.Errorf("%w: %d > end offset %d", ErrBeyondEnd, from, leo)
		}
		return dst, from, nil
	}
	if frames, next, ok, err := l.readTail(dst, from, leo, maxBytes); ok || err != nil {
		return frames, next, err
	}
	return l.readWalk(dst, from, leo, maxBytes)
}

// readWalk is ReadFramesAppend from the nearest index anchor at or before from, walking the
// frame headers segment by segment. Caller holds mu shared; from < leo.
func (l *Log) readWalk(dst []byte, from, leo int64, maxBytes int) (frames []byte, next int64, err error) {
	frames, base := dst, len(dst)
	next = from
	for next < leo {
		seg := l.segmentFor(next)
		if seg == nil {
			break
		}
		size := seg.size.Load()
		w := newWindowReader(seg.f, size).pooled()
		start, stop := int64(-1), int64(-1)
		var misaligned error
		err := walkHeaders(w, seg, size, l.anchorFor(seg, next), func(pos int64, h frameHeader) bool {
			if h.end() <= next {
				return false
			}
			if start < 0 {
				if h.base != next {
					misaligned = fmt.Errorf("%w: offset %d in %s", ErrNotFrameBoundary, next, seg.path)
					return true
				}
				start = pos
			} else if len(frames)-base+int(pos-start+h.size()) > maxBytes {
				return true
			}
			stop, next = pos+h.size(), h.end()
			return next >= leo
		})
		w.release()
		if err == nil {
			err = misaligned
		}
		if err != nil {
			return nil, 0, err
		}
		if start < 0 {
			break
		}
		at := len(frames)
		frames = slices.Grow(frames, int(stop-start))[:at+int(stop-start)] // no zeroing: read over
		if _, err := seg.f.ReadAt(frames[at:], start); err != nil {
			return nil, 0, fmt.Errorf("log: read %s at %d: %w", seg.path, start, err)
		}
		if len(frames)-base >= maxBytes || stop < size {
			break
		}
	}
	return frames, next, nil
}

// readTail is ReadFramesAppend for a follower tailing the log, which fetches from where an
// append ended: the position of from in the active segment is then known (ends), so the frames
// are read in one ReadAt of at most maxBytes and their headers checked in memory. The walk from
// an index anchor it spares read up to 64 KiB of the segment, into a buffer of its own, to find
// a few hundred bytes (a fetch's most expensive part in profiles of three nodes on two cores).
// ok is false, with nothing read into dst's spare capacity that matters, when from is not such
// an end, the first frame does not fit in maxBytes, or the bytes are not frames continuing from
// from: the walk then answers. Caller holds mu shared; from < leo.
func (l *Log) readTail(dst []byte, from, leo int64, maxBytes int) (frames []byte, next int64, ok bool, err error) {
	seg := l.segs[len(l.segs)-1]
	b, found := l.ends.find(from)
	if !found || b.segBase != seg.base || from < seg.base {
		return nil, 0, false, nil
	}
	size := seg.size.Load()
	n := min(size-b.pos, int64(maxBytes))
	if n < frameHeaderSize {
		return nil, 0, false, nil
	}
	at := len(dst)
	frames = slices.Grow(dst, int(n))[:at+int(n)] // no zeroing: read over
	if _, err := seg.f.ReadAt(frames[at:], b.pos); err != nil {
		return nil, 0, false, fmt.Errorf("log: read %s at %d: %w", seg.path, b.pos, err)
	}
	buf, pos := frames[at:], int64(0)
	next = from
	for pos+frameHeaderSize <= int64(len(buf)) {
		h, err := parseFrameHeader(buf[pos:])
		if err != nil || h.base != next {
			return nil, 0, false, nil
		}
		if pos+h.size() > int64(len(buf)) || h.end() > leo {
			break
		}
		pos, next = pos+h.size(), h.end()
		if next >= leo {
			break
		}
	}
	if pos == 0 {
		return nil, 0, false, nil
	}
	return frames[:at+int(pos)], next, true, nil
}

// anchorFor returns a frame position of seg at or before offset off. Caller holds mu shared.
func (l *Log) anchorFor(seg *segment, off int64) int64 {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if seg.idx != nil {
		if a := seg.idx.floor(off); a.base >= 0 {
			return a.pos
		}
	}
	return 0
}
