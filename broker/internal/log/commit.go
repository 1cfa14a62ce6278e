package log

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// Fault points of the commit path (faults.Check; tests arm them, crash tests via NARAD_FAULTS).
const (
	FaultBeforeFsync      = "log.before_fsync"       // fails the segment fsync step
	FaultAfterFsync       = "log.after_fsync"        // between segment fsync and verify
	FaultVerify           = "log.verify"             // makes VerifyDurable fail
	FaultBeforeHWMPersist = "log.before_hwm_persist" // after verify, before the hwm write: a crash here leaves a hidden tail
	FaultHWMPersist       = "log.hwm_persist"        // makes the hwm write fail (failed state)
	FaultTruncate         = "log.truncate"           // makes the failed-commit truncate fail (failed state)
)

// scratchKeep is the largest commit scratch buffer kept between commits; bigger ones are
// released so an idle partition does not pin a huge batch's memory.
const scratchKeep = 4 << 20

// frameMeta locates one frame inside a commit's write buffer.
type frameMeta struct {
	rel   int // byte position in wbuf
	base  int64
	count int32
	size  int
}

// Commit durably appends entries as consecutive offsets stamped committedAtMs and makes them
// visible (docs/internals/produce-path.md §8 steps 8–11): encode envelopes, write frame(s) to the active
// segment, fsync it, VerifyDurable, persist the new HWM, advance the HWM, update the
// committed boundary, broadcast. It returns the first assigned offset.
//
// If the fsync or the verify fails, the active segment is truncated back to its pre-commit
// size (the offsets will be reused) and the error is returned. If that truncate fails or the
// HWM persist fails, the log enters failed state and the error wraps ErrFailed. Concurrent
// callers are serialized; exactly one segment fsync and one hwm fdatasync per call.
func (l *Log) Commit(entries []Entry, committedAtMs int64) (first int64, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	first, seg, end, err := l.appendLocked(entries, committedAtMs)
	if err != nil {
		return 0, err
	}
	l.hmu.Lock()
	if err := l.persistHWM(l.next, first); err != nil {
		l.hmu.Unlock()
		return 0, err
	}
	l.advance(l.next)
	l.bound.Store(&boundaryPos{segBase: seg.base, pos: end})
	l.hmu.Unlock()
	l.rollIfFull(seg, end)
	l.releaseScratch()
	l.Broadcast()
	return first, nil
}

// writable reports why the log cannot be written now. Caller holds wmu.
func (l *Log) writable() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.failed.Load() {
		return ErrFailed
	}
	return nil
}

// appendLocked is the first half of a commit (docs/internals/produce-path.md §8 steps 8–10):
// encode, write, fsync and verify entries at the end of the log, and move next_offset past
// them, without touching the HWM: the records join the hidden tail. It returns the first
// offset, the segment written and the position where the write ended. On a failed fsync or
// verify the write is truncated away (rollback). Caller holds wmu.
func (l *Log) appendLocked(entries []Entry, committedAtMs int64) (first int64, seg *segment, end int64, err error) {
	if len(entries) == 0 {
		return 0, nil, 0, ErrEmptyBatch
	}
	if err := l.writable(); err != nil {
		return 0, nil, 0, err
	}
	for i := range entries {
		if n := recordPrefix + EnvelopeLen(entries[i].Key, entries[i].Payload); n > l.splitAt {
			return 0, nil, 0, fmt.Errorf("log: entry %d is %d framed bytes (max %d): %w", i, n, l.splitAt, ErrRecordTooLarge)
		}
	}
	if l.next > math.MaxInt64-int64(len(entries)) {
		return 0, nil, 0, fmt.Errorf("log: offset space exhausted at %d", l.next)
	}
	if seg, err = l.activeForWrite(); err != nil {
		return 0, nil, 0, err // nothing appended
	}
	first = l.next
	if err := l.encodeFrames(entries, first, committedAtMs); err != nil {
		return 0, nil, 0, err
	}
	end, err = l.writeFrames(seg, first, l.wbuf, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	l.next = first + int64(len(entries))
	l.nextA.Store(l.next)
	l.ends.add(l.next, boundaryPos{segBase: seg.base, pos: end})
	return first, seg, end, nil
}

// activeForWrite returns the segment the next write goes to, rolling first when the active
// one is full. Caller holds wmu.
func (l *Log) activeForWrite() (*segment, error) {
	seg := l.segs[len(l.segs)-1]
	if seg.size.Load() >= l.opts.SegmentBytes && l.next > seg.base {
		if err := l.roll(); err != nil {
			return nil, err
		}
		seg = l.segs[len(l.segs)-1]
	}
	return seg, nil
}

// writeFrames writes buf (the frames described by l.frames) at the end of seg, fsyncs and
// verifies it (re-reading into buf), and indexes the frames. With direct set (an O_DIRECT
// descriptor of seg, direct.go) the whole blocks of buf are written and re-read through it. It
// returns the position where the write ended; on failure the segment is truncated back
// (rollback). Caller holds wmu.
func (l *Log) writeFrames(seg *segment, first int64, buf []byte, direct *os.File) (end int64, err error) {
	start := seg.size.Load()
	n := len(buf)
	t0 := l.opts.Now()
	err = eachSpan(seg, direct, buf, start, writeSpan)
	l.opts.Observer.ObserveFlush(l.opts.Now().Sub(t0), n)
	if err != nil {
		return 0, l.rollback(seg, start, first, fmt.Errorf("write %s: %w", seg.path, err))
	}
	if err = faults.Check(FaultBeforeFsync); err == nil {
		t0 = l.opts.Now()
		err = durable.Fdatasync(seg.f)
		l.opts.Observer.ObserveFsync(l.opts.Now().Sub(t0))
	}
	if err != nil {
		return 0, l.rollback(seg, start, first, fmt.Errorf("fsync %s: %w", seg.path, err))
	}
	if err = faults.Check(FaultAfterFsync); err != nil {
		return 0, l.rollback(seg, start, first, err)
	}
	if err = l.verifyDurable(seg, start, buf, direct); err != nil {
		return 0, l.rollback(seg, start, first, err)
	}
	end = start + int64(n)
	seg.size.Store(end)
	l.cmu.Lock()
	for _, fm := range l.frames {
		seg.idx.observe(start+int64(fm.rel), fm.base, false)
	}
	l.cmu.Unlock()
	return end, nil
}

// persistHWM writes h to the hwm file and makes it durable (seed: persist before advance). A
// failure puts the log in failed state. first is the first offset of the write being
// published (for the log line). Caller holds hmu.
func (l *Log) persistHWM(h, first int64) error { return l.storeHWM(h, first, true) }

// storeHWM is persistHWM, or with sync false the hwm file's write without its fdatasync
// (hwmFile.write). Caller holds hmu.
func (l *Log) storeHWM(h, first int64, sync bool) error {
	t0 := l.opts.Now()
	err := faults.Check(FaultBeforeHWMPersist)
	if err == nil {
		err = faults.Check(FaultHWMPersist)
	}
	if err == nil && sync {
		err = l.hwmf.persist(h, false)
	} else if err == nil {
		err = l.hwmf.write(h)
	}
	l.opts.Observer.ObserveHWMPersist(l.opts.Now().Sub(t0), err)
	if err != nil {
		l.failed.Store(true)
		l.logger.Error("log hwm persist failed; log is in failed state until reopened",
			"offset", first, "hwm", h, "err", err)
		return fmt.Errorf("%w: persist hwm %d: %w", ErrFailed, h, err)
	}
	return nil
}

// rollIfFull seals seg when a write ended at or past the segment size. A failed roll is
// retried by the next write.
func (l *Log) rollIfFull(seg *segment, end int64) {
	if end < l.opts.SegmentBytes {
		return
	}
	if err := l.roll(); err != nil {
		// The write is durable; the next write retries the roll before writing.
		l.logger.Warn("log segment roll failed", "segment", seg.path, "err", err)
	}
}

// advance moves the in-memory HWM forward. Caller holds hmu and has persisted h.
func (l *Log) advance(h int64) {
	if old := l.hwm.Load(); h < old {
		panic(fmt.Sprintf("log %s: hwm would move back from %d to %d", l.dir, old, h))
	}
	if next := l.nextA.Load(); h > next {
		panic(fmt.Sprintf("log %s: hwm %d would pass next offset %d", l.dir, h, next))
	}
	l.hwm.Store(h)
}

// encodeFrames builds the commit's frames into l.wbuf (and their positions into l.frames),
// splitting so no frame's inner payload exceeds l.splitAt.
func (l *Log) encodeFrames(entries []Entry, first, ts int64) error {
	l.wbuf = l.wbuf[:0]
	l.frames = l.frames[:0]
	off := first
	for i := 0; i < len(entries); {
		j, innerLen := i, 0
		for j < len(entries) {
			s := recordPrefix + EnvelopeLen(entries[j].Key, entries[j].Payload)
			if j > i && innerLen+s > l.splitAt {
				break
			}
			innerLen += s
			j++
		}
		if err := l.appendFrame(entries[i:j], off, ts, innerLen); err != nil {
			return err
		}
		off += int64(j - i)
		i = j
	}
	return nil
}

// appendFrame appends one frame holding batch to l.wbuf.
func (l *Log) appendFrame(batch []Entry, base, ts int64, innerLen int) error {
	start := len(l.wbuf)
	l.wbuf = append(l.wbuf, make([]byte, frameHeaderSize)...)
	codec := l.opts.Codec
	if codec == CodecNone {
		l.wbuf = appendRecords(l.wbuf, batch, ts)
	} else {
		l.inner = appendRecords(l.inner[:0], batch, ts)
		l.wbuf = l.enc.EncodeAll(l.inner, l.wbuf)
	}
	slen := len(l.wbuf) - start - frameHeaderSize
	if slen > maxFrameBytes {
		return fmt.Errorf("log: frame of %d stored bytes: %w", slen, ErrRecordTooLarge)
	}
	putFrameHeader(l.wbuf[start:], frameHeader{
		codec: codec, count: int32(len(batch)), base: base, ulen: int32(innerLen), slen: int32(slen),
	})
	sealFrame(l.wbuf[start:])
	l.frames = append(l.frames, frameMeta{rel: start, base: base, count: int32(len(batch)), size: len(l.wbuf) - start})
	return nil
}

// appendRecords appends `[len uint32][envelope]` per entry.
func appendRecords(dst []byte, batch []Entry, ts int64) []byte {
	for i := range batch {
		p := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = EncodeEnvelope(dst, batch[i].Key, ts, batch[i].Payload)
		binary.BigEndian.PutUint32(dst[p:], uint32(len(dst)-p-recordPrefix))
	}
	return dst
}

// verifyDurable re-reads the len(buf) bytes just written at start into buf (the buffer they
// were written from) and checks every frame's header against what was written and its CRC
// over the raw bytes (no decode); l.frames keeps the expectations. direct as in writeFrames.
func (l *Log) verifyDurable(seg *segment, start int64, buf []byte, direct *os.File) error {
	if err := faults.Check(FaultVerify); err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	if err := eachSpan(seg, direct, buf, start, readSpan); err != nil {
		return fmt.Errorf("%w: re-read %s at %d: %w", ErrVerify, seg.path, start, err)
	}
	for _, fm := range l.frames {
		h, err := checkFrame(buf[fm.rel : fm.rel+fm.size])
		if err != nil {
			return fmt.Errorf("%w: frame at offset %d: %w", ErrVerify, fm.base, err)
		}
		if h.base != fm.base || h.count != fm.count || h.size() != int64(fm.size) {
			return fmt.Errorf("%w: frame at offset %d reads back as %d+%d", ErrVerify, fm.base, h.base, h.count)
		}
	}
	return nil
}

// rollback undoes a commit whose frames are not durable: truncate the active segment back to
// start and fsync. next_offset was not advanced, so the offsets from first are reused. A
// failing truncate puts the log in failed state.
func (l *Log) rollback(seg *segment, start, first int64, cause error) error {
	terr := faults.Check(FaultTruncate)
	if terr == nil {
		terr = seg.f.Truncate(start)
	}
	if terr == nil {
		terr = durable.Fdatasync(seg.f)
	}
	l.releaseScratch()
	if terr != nil {
		l.failed.Store(true)
		l.logger.Error("log failed commit could not be truncated; log is in failed state until reopened",
			"segment", seg.path, "offset", first, "pos", start, "err", cause, "truncate_err", terr)
		return fmt.Errorf("%w: commit at offset %d: %w (truncate: %v)", ErrFailed, first, cause, terr)
	}
	l.logger.Warn("log commit failed and was truncated", "segment", seg.path, "offset", first, "err", cause)
	return fmt.Errorf("log: commit at offset %d: %w", first, cause)
}

func (l *Log) releaseScratch() {
	if cap(l.wbuf) > scratchKeep {
		l.wbuf = nil
	}
	if cap(l.inner) > scratchKeep {
		l.inner = nil
	}
}

// roll seals the active segment and creates a new one named by the next offset. Caller holds
// wmu; the active segment is already fsynced (every commit syncs).
func (l *Log) roll() error {
	old := l.segs[len(l.segs)-1]
	if l.next <= old.base {
		return nil
	}
	path := filepath.Join(l.dir, SegmentFileName(l.next))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("log: roll: create %s: %w", path, err)
	}
	if err := durable.SyncDir(l.dir); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("log: roll: %w", err)
	}
	seg := &segment{base: l.next, path: path, f: f, idx: newSparseIndex(l.opts.SegmentBytes)}
	segs := append(l.segs[:len(l.segs):len(l.segs)], seg)
	l.mu.Lock()
	l.segs = segs
	l.mu.Unlock()
	l.cmu.Lock()
	l.markHot(old)
	l.cmu.Unlock()
	l.hmu.Lock()
	if hwm := l.hwm.Load(); seg.base <= hwm {
		l.bound.Store(&boundaryPos{segBase: seg.base, pos: 0})
	}
	l.hmu.Unlock()
	return nil
}
