// Package wal is the node's ingress write-ahead log (docs/internals/storage-format.md §12): every accepted
// produce is framed, group-committed (one write + one fdatasync shared by all concurrent
// callers) and only then acknowledged. The dispatcher reads records back in seq order and
// advances the checkpoint once their owners have durably committed them; compaction then
// deletes the segments below it.
//
// Failure policy: the WAL fails closed. After any write or fsync error, every caller of the
// failed batch (and of any batch staged behind it) gets the error, and every later Append returns
// ErrFailed until the WAL is reopened; recovery at reopen decides from the bytes on disk. No
// later batch can therefore claim that bytes of a failed batch are durable (after a failed
// fsync the page cache may no longer reflect the disk, so "truncate and continue" is not safe).
package wal

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Defaults (docs/internals/produce-path.md §11).
const (
	DefaultSegmentBytes = 64 << 20              // segment roll size
	DefaultSyncInterval = 10 * time.Millisecond // backstop for a missed sync-loop wake-up
	DefaultTailBytes    = 256 << 20             // in-memory read tail bound
	RollFinishedBytes   = 1 << 20               // a fully finished active segment this big is rolled and deleted
	checkpointName      = "checkpoint"          // lowest unfinished seq, overwritten in place (checkpoint.go)
	lockName            = "LOCK"                // flock'd while open: one process per WAL directory
	minStageBytes       = 4 << 10               // smallest staging buffer capacity
)

// Sentinel errors. Callers branch on these with errors.Is.
var (
	// ErrFailed: a write or fsync failed earlier; the WAL refuses appends until reopened.
	ErrFailed = errors.New("wal: failed closed after a write/fsync error; reopen required")
	// ErrClosed: the WAL was closed.
	ErrClosed = errors.New("wal: closed")
	// ErrRecordTooLarge: an encoded record exceeds MaxRecordBytes; nothing was appended.
	ErrRecordTooLarge = errors.New("wal: record too large")
	// ErrNoRecords: Append was called without records.
	ErrNoRecords = errors.New("wal: no records")
	// ErrDamaged: recovery found damage to acknowledged data (or missing segments); the WAL
	// does not open. The message names the segment.
	ErrDamaged = errors.New("wal: damaged")
	// ErrCheckpoint: Advance was asked to move the checkpoint backwards or past NextSeq.
	ErrCheckpoint = errors.New("wal: invalid checkpoint")
	// ErrBelowCheckpoint: ReadFrom was asked for a seq below the checkpoint (may be compacted).
	ErrBelowCheckpoint = errors.New("wal: seq below checkpoint")
	// ErrLocked: another WAL instance holds the directory.
	ErrLocked = errors.New("wal: directory locked by another instance")
)

// Observer receives WAL measurements. It may be nil. Calls come from the sync loop goroutine.
type Observer interface {
	// ObserveSync reports one batch: write + fdatasync duration and the records it carried.
	ObserveSync(d time.Duration, records int)
}

// Options configure a WAL. Zero values select the defaults.
type Options struct {
	// SegmentBytes: a segment is closed when the next batch would take it past this size
	// (0 → 64 MiB). One batch never spans segments, so a segment may exceed it by one batch.
	SegmentBytes int64
	// SyncInterval is the sync loop's backstop timer (0 → 10 ms); wake-ups normally come from
	// Append itself.
	SyncInterval time.Duration
	// MaxRecordBytes bounds one encoded record (0 → 16 MiB); frames above it are corrupt.
	MaxRecordBytes int
	// TailBytes bounds the in-memory read tail (0 → 256 MiB; < 0 disables it, every read goes
	// to disk). Beyond the bound ReadFrom reads segments.
	TailBytes int64
	// Logger receives operator-facing events (nil → discard).
	Logger *slog.Logger
	// Observer receives sync measurements (nil → none).
	Observer Observer
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.TailBytes == 0 {
		o.TailBytes = DefaultTailBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Entry is one record with its WAL sequence number.
type Entry struct {
	Seq    uint64
	Record Record
}

// WAL is one node's ingress write-ahead log. All methods are safe for concurrent use.
//
// Invariants: seqs are dense and strictly increasing across segments; NextSeq() only counts
// records whose bytes were fsynced; Checkpoint() ≤ NextSeq() and only moves forward; every seq in
// [Checkpoint(), NextSeq()) is readable. Lock order: writeMu before mu.
type WAL struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File // flock'd LOCK file

	// writeMu is held by the sync loop across a batch's segment choice, write and fsync, and by
	// compaction while it rolls the active segment.
	writeMu   sync.Mutex
	active    *os.File // guarded by writeMu; nil → the next batch opens a new segment
	activeSeg *segment // guarded by writeMu

	// advMu serializes Advance (checkpoint file writes and compaction).
	advMu sync.Mutex
	cpf   *checkpointFile // the open checkpoint file; written under advMu

	mu          sync.Mutex
	stage       *batch     // records staged for the next sync; guarded by mu
	spare       *batch     // recycled buffers for the next stage; guarded by mu
	nextSeq     uint64     // next seq to assign (includes staged records); guarded by mu
	durableNext uint64     // one past the last fsynced seq; guarded by mu
	checkpoint  uint64     // guarded by mu
	segs        []*segment // ascending base; guarded by mu
	tail        tail       // guarded by mu
	failed      error      // non-nil once failed closed; guarded by mu
	closed      bool       // guarded by mu
	appendC     chan struct{}
	lastBatch   int // size of the last sealed batch, sizes the next staging buffer; guarded by mu
	lastCallers int // Append calls of the last batch written; the sync loop's own

	kick     chan struct{} // wakes the sync loop; capacity 1
	quit     chan struct{} // closed by Close
	loopDone chan struct{} // closed when the sync loop exits

	// beforeWrite, if set (tests only), runs in the sync loop before each batch is written.
	beforeWrite func()
}

// NextSeq returns one past the highest durable seq: the seq the next durable record will get.
func (w *WAL) NextSeq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durableNext
}

// Checkpoint returns the lowest unfinished seq (persisted by Advance).
func (w *WAL) Checkpoint() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checkpoint
}

// AppendC returns a channel that is closed after the next durable batch (then replaced). Grab
// it before reading NextSeq to never miss a wake-up.
func (w *WAL) AppendC() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appendC
}

// Stats is a point-in-time view of the WAL.
type Stats struct {
	NextSeq, Checkpoint uint64
	Segments            int
	SizeBytes           int64 // durable bytes in all segments
	TailBytes           int64 // memory held by the read tail
	Failed              bool  // failed closed (appends refused until reopen)
}

// Stats returns counters for metrics and status pages.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{
		NextSeq: w.durableNext, Checkpoint: w.checkpoint, Segments: len(w.segs),
		TailBytes: w.tail.bytes, Failed: w.failed != nil,
	}
	for _, seg := range w.segs {
		s.SizeBytes += seg.size
	}
	return s
}

// Close flushes staged records (their callers get the real outcome), stops the sync loop and
// closes the files. Appends after Close return ErrClosed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	close(w.quit)
	<-w.loopDone

	// An Advance under way finishes first (it holds advMu, and then writeMu to compact: the
	// same order as here); later ones find the WAL closed.
	w.advMu.Lock()
	err := w.cpf.f.Close()
	w.advMu.Unlock()

	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	if w.active != nil {
		if cerr := w.active.Close(); err == nil {
			err = cerr
		}
		w.active = nil
	}
	if w.lock != nil {
		if cerr := w.lock.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
