package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// batch is one group commit: the frames staged between two syncs. Invariant: entries[i].Seq ==
// first+i and frame i of buf carries entries[i]; done is closed once err is final.
type batch struct {
	buf     []byte
	first   uint64
	entries []Entry
	callers int // Append calls staged in it
	done    chan struct{}
	err     error
}

// Append durably appends recs with consecutive seqs, in order, in one sync batch, and returns
// the first seq. It returns only after the batch's fdatasync (docs/internals/produce-path.md §3): the
// frames are copied into the shared staging buffer, the sync loop writes everything staged with
// one write and one fdatasync, and every caller of that batch returns together.
//
// ctx is honoured only until the records are staged; after that Append waits for the real
// outcome, because reporting failure for bytes that did become durable would make a retrying
// client duplicate for nothing. Errors: ErrRecordTooLarge / ErrNoRecords (nothing appended),
// ErrClosed, and ErrFailed (wrapping the cause) for a failed write or fsync — the WAL then
// refuses every later Append until it is reopened.
func (w *WAL) Append(ctx context.Context, recs ...Record) (firstSeq uint64, err error) {
	if len(recs) == 0 {
		return 0, ErrNoRecords
	}
	total := 0
	for i := range recs {
		n := EncodedLen(recs[i])
		if n > w.opts.MaxRecordBytes {
			return 0, fmt.Errorf("%w: %d bytes > %d", ErrRecordTooLarge, n, w.opts.MaxRecordBytes)
		}
		total += frameLen(n)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, ErrClosed
	}
	if w.failed != nil {
		err := fmt.Errorf("%w: %w", ErrFailed, w.failed)
		w.mu.Unlock()
		return 0, err
	}
	b := w.stage
	first := w.nextSeq
	if len(b.entries) == 0 {
		b.first = first
	}
	if cap(b.buf)-len(b.buf) < total {
		// Double at least: append's growth for large slices is about 1.25×, which re-copied a
		// staging buffer of concurrent batch produces several times over under mu.
		b.buf = slices.Grow(b.buf, max(total, cap(b.buf)))
	}
	for i := range recs {
		seq := first + uint64(i)
		off := len(b.buf)
		b.buf = appendFrameHeader(b.buf)
		b.buf = AppendRecord(b.buf, recs[i])
		sealFrame(b.buf[off:], seq)
		b.entries = append(b.entries, Entry{Seq: seq, Record: recs[i]})
	}
	b.callers++
	w.nextSeq += uint64(len(recs))
	w.mu.Unlock()

	select {
	case w.kick <- struct{}{}:
	default:
	}
	<-b.done // staged: the outcome is the batch's, whatever ctx says now
	if b.err != nil {
		return 0, b.err
	}
	return first, nil
}

// newStage returns an empty batch, reusing recycled buffers when there are some. Called with mu.
func (w *WAL) newStage() *batch {
	if s := w.spare; s != nil {
		w.spare = nil
		s.done = make(chan struct{})
		return s
	}
	size := max(w.lastBatch+w.lastBatch/4, minStageBytes) // headroom: batches vary in size
	return &batch{buf: make([]byte, 0, size), done: make(chan struct{})}
}

// syncLoop owns writing: it swaps out the staged batch, writes and fsyncs it, and releases its
// callers. It exits after Close, once everything staged before Close has its outcome.
func (w *WAL) syncLoop() {
	defer close(w.loopDone)
	backstop := time.NewTicker(w.opts.SyncInterval)
	defer backstop.Stop()
	for {
		quitting := false
		select {
		case <-w.kick:
		case <-backstop.C:
		case <-w.quit:
			quitting = true
		}
		for w.syncOnce() {
		}
		if quitting {
			return
		}
	}
}

// gatherFor bounds how long a sync waits for the callers of the next batch to gather
// (docs/internals/produce-path.md §3). Tests change it.
var gatherFor = 200 * time.Microsecond

// gather waits, up to gatherFor, while fewer callers are staged than the last batch had, when
// that batch had several: with many producers, the appends that arrive while a batch is on
// disk then share the next fsync instead of the first of them taking one alone. A lone
// producer's batches have one caller, so it never waits.
func (w *WAL) gather() {
	if w.lastCallers < 2 || gatherFor <= 0 {
		return
	}
	var t *time.Timer
	for {
		w.mu.Lock()
		n, closed := w.stage.callers, w.closed
		w.mu.Unlock()
		if n == 0 || n >= w.lastCallers || closed {
			return
		}
		if t == nil {
			t = time.NewTimer(gatherFor)
			defer t.Stop()
		}
		select {
		case <-w.kick:
		case <-t.C:
			return
		case <-w.quit:
			return
		}
	}
}

// syncOnce writes the staged batch, if any, and reports whether there was one.
func (w *WAL) syncOnce() bool {
	w.gather()
	w.mu.Lock()
	b := w.stage
	if len(b.entries) == 0 {
		w.mu.Unlock()
		return false
	}
	w.stage = w.newStage()
	failed := w.failed
	w.mu.Unlock()

	err := failed
	if err == nil {
		err = w.writeBatch(b)
	}
	w.lastCallers = b.callers
	w.finish(b, err)
	return true
}

// seal points every entry's Payload into the batch buffer, so the tail holds no caller memory,
// after shrinking a buffer that is mostly spare capacity.
func (w *WAL) seal(b *batch) {
	if w.opts.TailBytes >= 0 && cap(b.buf) > 2*len(b.buf) {
		b.buf = append(make([]byte, 0, len(b.buf)), b.buf...)
	}
	off := 0
	for i := range b.entries {
		end := off + frameHeaderSize + int(beUint32(b.buf[off+4:]))
		p := b.entries[i].Record.Payload
		b.entries[i].Record.Payload = b.buf[end-len(p) : end : end]
		off = end
	}
}

// writeBatch writes b with one write and one fdatasync into the active segment.
func (w *WAL) writeBatch(b *batch) error {
	w.seal(b)
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	if w.beforeWrite != nil {
		w.beforeWrite()
	}
	start := time.Now()
	if err := w.ensureSegment(b); err != nil {
		return err
	}
	path := w.activeSeg.path
	if err := faults.Check("wal.write"); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := w.active.Write(b.buf); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := faults.Check("wal.before_fsync"); err != nil {
		return fmt.Errorf("fdatasync %s: %w", path, err)
	}
	err := faults.Check("wal.fsync")
	if err == nil {
		err = durable.Fdatasync(w.active)
	}
	if err != nil {
		return fmt.Errorf("fdatasync %s: %w", path, err)
	}
	if err := faults.Check("wal.after_fsync"); err != nil {
		return fmt.Errorf("after fdatasync %s: %w", path, err)
	}
	if o := w.opts.Observer; o != nil {
		o.ObserveSync(time.Since(start), len(b.entries))
	}

	w.mu.Lock()
	seg := w.activeSeg
	off := 0
	for i := range b.entries {
		seg.noteFrame(b.first+uint64(i), seg.size+int64(off))
		off += frameHeaderSize + int(beUint32(b.buf[off+4:]))
	}
	seg.size += int64(len(b.buf))
	seg.next = b.first + uint64(len(b.entries))
	w.mu.Unlock()
	return nil
}

// ensureSegment rolls the active segment if b would take it past SegmentBytes and opens a new
// segment named by b's first seq when there is none. Called with writeMu.
func (w *WAL) ensureSegment(b *batch) error {
	if w.active != nil && w.activeSeg.size > 0 && w.activeSeg.size+int64(len(b.buf)) > w.opts.SegmentBytes {
		if err := w.active.Close(); err != nil {
			w.log.Warn("wal: closing rolled segment", "segment", w.activeSeg.path, "err", err)
		}
		w.active, w.activeSeg = nil, nil
	}
	if w.active != nil {
		return nil
	}
	path := filepath.Join(w.dir, segmentName(b.first))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	if err := durable.SyncDir(w.dir); err != nil { // the new name must survive a crash
		f.Close()
		return fmt.Errorf("create segment %s: %w", path, err)
	}
	seg := &segment{base: b.first, next: b.first, path: path}
	w.mu.Lock()
	w.segs = append(w.segs, seg)
	w.mu.Unlock()
	w.active, w.activeSeg = f, seg
	return nil
}

// finish publishes b's outcome: on success the records become readable (NextSeq, tail) and
// AppendC fires; on failure the WAL fails closed. Either way b's callers are released.
func (w *WAL) finish(b *batch, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Size the next staging buffer by a slowly decaying peak rather than an average: a buffer
	// that has to grow under mu costs a copy and a zeroed allocation while producers wait.
	w.lastBatch = max(len(b.buf), w.lastBatch-w.lastBatch/8)
	if err != nil {
		if w.failed == nil {
			w.failed = err
			w.log.Error("wal: write failed; refusing appends until reopen", "first_seq", b.first,
				"records", len(b.entries), "err", err)
		}
		b.err = fmt.Errorf("%w: %w", ErrFailed, err)
		close(b.done)
		return
	}
	w.durableNext = b.first + uint64(len(b.entries))
	c := &chunk{first: b.first, entries: b.entries, bytes: int64(cap(b.buf)) + entrySize*int64(cap(b.entries))}
	for i := range b.entries {
		r := &b.entries[i].Record
		c.bytes += int64(len(r.Topic) + len(r.Incarnation) + len(r.Key))
	}
	retained := w.tail.add(c)
	close(w.appendC)
	w.appendC = make(chan struct{})
	close(b.done)
	if !retained && w.spare == nil {
		clear(b.entries)
		w.spare = &batch{buf: b.buf[:0], entries: b.entries[:0]}
	}
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
