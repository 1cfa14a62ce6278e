package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"narad.dev/broker/internal/durable"
)

// Entry is one record to commit.
type Entry struct {
	Key     []byte // empty = keyless
	Payload []byte
}

// Record is one committed record as read back. Key and Payload alias the log's decode cache:
// callers MUST NOT modify them.
type Record struct {
	Offset      int64
	Key         []byte // nil for a keyless record
	CommittedAt int64  // Unix milliseconds, stamped by the committing owner
	Payload     []byte
}

// Log is the open partition log of one directory.
//
// Invariants: next_offset ≥ hwm; the HWM only moves forward and is in the hwm file before it
// moves (commit persists, then advances; a replica's AdvanceHWM writes without a sync); the
// HWM falls on a frame boundary; only the holder of wmu writes segment bytes, rolls or deletes
// segments (single writer); the HWM, the committed boundary and the hwm file change only
// under hmu.
type Log struct {
	dir    string
	opts   Options
	logger *slog.Logger
	enc    *zstd.Encoder // nil for CodecNone

	// splitAt is the writer's frame split bound in inner-payload bytes (maxInnerBytes; tests
	// lower it).
	splitAt int

	// wmu is the write lock: Commit, roll, retention and Close hold it.
	wmu sync.Mutex
	// hmu is the HWM lock. AdvanceHWM holds it alone, so a replicated log's HWM moves while an
	// append is on disk; every other change of the HWM, the committed boundary or the hwm file,
	// and every change that moves the end offset back or removes or reopens segments, holds
	// it after wmu. Lock order: wmu → hmu → mu → cmu.
	hmu    sync.Mutex
	next   int64 // next offset to assign; guarded by wmu, mirrored in nextA
	hwmf   *hwmFile
	wbuf   []byte      // commit scratch: frames to write, then their re-read
	inner  []byte      // commit scratch: uncompressed payload before zstd
	frames []frameMeta // commit scratch: the frames of wbuf

	nextA  atomic.Int64
	hwm    atomic.Int64
	oldest atomic.Int64
	failed atomic.Bool
	closed atomic.Bool
	bound  atomic.Pointer[boundaryPos]
	// ends are the boundaries of recent appends, for AdvanceHWM (ends.go).
	ends appendEnds
	// walks counts AdvanceHWM's header walks (tests read it). Guarded by hmu.
	walks int

	// mu guards segs and the open files: readers hold it shared; segs is replaced only by a
	// holder of both wmu and mu (so a wmu holder may read segs without mu).
	mu   sync.RWMutex
	segs []*segment

	// cmu guards the read caches and segment indexes. Lock order: mu → cmu.
	cmu    sync.Mutex
	dcache decodeCache
	nav    navCache
	hot    []*segment // sealed segments whose index is built, ≤ hotSealedIndex
	clock  uint64

	notifyMu sync.Mutex
	notify   atomic.Pointer[chan struct{}]
}

// Open opens (creating if needed) the partition log in dir and runs crash recovery
// (docs/internals/storage-format.md §9): temp files removed, segments scanned, torn tail of the active segment
// truncated, HWM loaded and re-persisted with CLEAN=0, committed boundary computed.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	l := &Log{
		dir:     dir,
		opts:    opts,
		logger:  opts.Logger.With("dir", dir),
		splitAt: maxInnerBytes,
	}
	if opts.Codec == CodecZstd {
		if l.enc, err = zstdEncoder(opts.CompressionLevel); err != nil {
			return nil, err
		}
	}
	ch := make(chan struct{})
	l.notify.Store(&ch)
	if err := durable.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("log: create %s: %w", dir, err)
	}
	if err := durable.RemoveTemps(dir); err != nil {
		return nil, fmt.Errorf("log: remove temps in %s: %w", dir, err)
	}
	hwmf, st, err := openHWMFile(dir)
	if err != nil {
		return nil, err
	}
	l.hwmf = hwmf
	if err := l.recover(st); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

// closeFiles closes every open file; used by Close and failed opens.
func (l *Log) closeFiles() error {
	var errs []error
	for _, s := range l.segs {
		if s.f != nil {
			errs = append(errs, s.f.Close())
		}
	}
	if l.hwmf != nil {
		errs = append(errs, l.hwmf.close())
	}
	return errors.Join(errs...)
}

// Close makes the log durable and releases it: final segment fsync, then the HWM with
// CLEAN=1 (skipped in failed state, so the next open runs full recovery), then the files are
// closed and waiters woken. Later calls on the log return ErrClosed.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	var errs []error
	active := l.segs[len(l.segs)-1]
	if err := durable.Fdatasync(active.f); err != nil {
		errs = append(errs, fmt.Errorf("log: fsync %s: %w", active.path, err))
	}
	if !l.failed.Load() && len(errs) == 0 {
		if err := l.hwmf.persist(l.hwm.Load(), true); err != nil {
			errs = append(errs, fmt.Errorf("log: persist clean hwm: %w", err))
		}
	}
	l.mu.Lock()
	l.closed.Store(true)
	errs = append(errs, l.closeFiles())
	l.mu.Unlock()
	l.cmu.Lock()
	l.dcache.reset()
	l.nav.reset()
	l.hot = nil
	l.cmu.Unlock()
	l.Broadcast()
	return errors.Join(errs...)
}

// Dir returns the partition directory of the log.
func (l *Log) Dir() string { return l.dir }

// HighWatermark returns the exclusive upper bound of visible offsets.
func (l *Log) HighWatermark() int64 { return l.hwm.Load() }

// NextOffset returns the offset the next committed record will get (≥ HighWatermark).
func (l *Log) NextOffset() int64 { return l.nextA.Load() }

// OldestOffset returns the first retained offset (base of the oldest segment).
func (l *Log) OldestOffset() int64 { return l.oldest.Load() }

// Failed reports whether the log is in failed state (every Commit returns ErrFailed until it
// is closed and reopened).
func (l *Log) Failed() bool { return l.failed.Load() }

// NotifyC returns the current broadcast channel: it is closed at the next Broadcast (every
// HWM advance, Close). Waiters MUST take it before probing for data, then wait on it, so a
// wake-up racing the probe is never lost.
func (l *Log) NotifyC() <-chan struct{} { return *l.notify.Load() }

// Broadcast wakes every waiter of NotifyC by closing the current channel and installing a
// fresh one. Other components (lease expiry, nack, freeze end) call it too.
func (l *Log) Broadcast() {
	l.notifyMu.Lock()
	ch := make(chan struct{})
	old := l.notify.Swap(&ch)
	close(*old)
	l.notifyMu.Unlock()
}

// segmentFor returns the segment holding off (the last with base ≤ off). Caller holds mu.
func (l *Log) segmentFor(off int64) *segment {
	lo, hi := 0, len(l.segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.segs[m].base <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return nil
	}
	return l.segs[lo-1]
}

// openSegmentFile opens a segment for reading (sealed) or reading and writing (active).
func openSegmentFile(path string, active bool) (*os.File, error) {
	if active {
		return os.OpenFile(path, os.O_RDWR, 0)
	}
	return os.Open(path)
}
