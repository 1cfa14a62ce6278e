package consume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// Fault points in the consumer-file write path.
const (
	FaultJournalAppend = "consume.before_journal_append"
	FaultJournalSync   = "consume.before_journal_sync"
	FaultCheckpoint    = "consume.before_checkpoint"
)

// fileState is a shard's side of the consumer files (docs/internals/storage-format.md §14). Guarded by mu,
// which serializes the committer and Close; the shard's own lock is only taken briefly to
// snapshot the frontier.
//
// Invariant: the journal only ever receives a frontier larger than the last one written
// (journaled), and it is truncated only after a checkpoint at least as far ahead succeeded.
// A missing partition dir is reported as durable.ErrDirMissing and never recreated.
type fileState struct {
	mu           sync.Mutex
	journal      *os.File // opened lazily, O_APPEND
	size         int64    // journal length; always a multiple of the record size
	opened       bool     // the journal was opened by this shard before
	recoveredEnd int64    // end of the journal prefix recovery used (first open cuts the rest)
	seq          uint32   // sequence of the last record written (or recovered)
	journaled    int64    // frontier of the last record written, or covered by a checkpoint
	unsynced     bool     // records written since the last fdatasync
	lastCkpt     time.Time
	closed       bool
	checkpointed atomic.Uint64 // shard change count at the last successful checkpoint
}

func (f *fileState) checkpointedChanges() uint64 { return f.checkpointed.Load() }

// dirMissing reports whether err means the partition directory is gone.
func dirMissing(err error) bool {
	return errors.Is(err, durable.ErrDirMissing) || errors.Is(err, fs.ErrNotExist)
}

// persistStep is one committer pass for the shard: append a journal record if the frontier
// moved, fdatasync the journal if sync is set, and checkpoint if the shard changed since
// the last checkpoint and ckptEvery has passed (or force is set). Errors leave the pending
// state in place so the next pass retries it.
func (s *Shard) persistStep(now time.Time, sync bool, ckptEvery time.Duration, force bool) error {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if f.lastCkpt.IsZero() {
		f.lastCkpt = now
	}
	return s.persistLocked(now, sync, ckptEvery, force)
}

func (s *Shard) persistLocked(now time.Time, sync bool, ckptEvery time.Duration, force bool) error {
	f := &s.files
	s.mu.Lock()
	committed, changes := s.committed, s.changes
	s.mu.Unlock()
	var errs []error
	if committed > f.journaled {
		if err := s.appendJournalLocked(committed); err != nil {
			if dirMissing(err) {
				return err
			}
			errs = append(errs, err)
		}
	}
	if sync && f.unsynced {
		if err := s.syncJournalLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	if changes != f.checkpointed.Load() && (force || now.Sub(f.lastCkpt) >= ckptEvery) {
		if err := s.checkpointLocked(now); err != nil {
			if dirMissing(err) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// openJournalLocked opens consumer.journal for appending, creating the file (and fsyncing
// the dir) if needed but never the directory. Caller holds files.mu.
func (s *Shard) openJournalLocked() error {
	f := &s.files
	if f.journal != nil {
		return nil
	}
	path := filepath.Join(s.dir, JournalFile)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		fh, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", s.dir, durable.ErrDirMissing)
		}
		if err == nil {
			if err = durable.SyncDir(s.dir); err != nil {
				fh.Close()
				return err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return fmt.Errorf("stat %s: %w", path, err)
	}
	// Realign: a torn record left by a crash or a failed write would shift every later record.
	// On the first open also cut whatever recovery did not use (a stale tail would hide
	// every record appended after it).
	size := fi.Size() - fi.Size()%journalRecordSize
	if !f.opened {
		size = min(size, f.recoveredEnd)
	}
	if size != fi.Size() {
		if err := fh.Truncate(size); err != nil {
			fh.Close()
			return fmt.Errorf("realign %s: %w", path, err)
		}
	}
	f.journal, f.size, f.opened = fh, size, true
	return nil
}

// appendJournalLocked writes one record carrying frontier to the page cache.
// Caller holds files.mu.
func (s *Shard) appendJournalLocked(frontier int64) error {
	f := &s.files
	if err := faults.Check(FaultJournalAppend); err != nil {
		return err
	}
	if err := s.openJournalLocked(); err != nil {
		return err
	}
	var buf [journalRecordSize]byte
	rec := AppendJournalRecord(buf[:0], JournalRecord{Frontier: frontier, Seq: f.seq + 1})
	if _, err := f.journal.Write(rec); err != nil {
		// Cut a torn record off so the next one stays aligned; failing that, reopen (which
		// realigns) on the next append.
		if terr := f.journal.Truncate(f.size); terr != nil {
			f.journal.Close()
			f.journal = nil
		}
		return fmt.Errorf("append %s: %w", JournalFile, err)
	}
	f.size += journalRecordSize
	f.seq++
	f.journaled = frontier
	f.unsynced = true
	return nil
}

// syncJournalLocked fdatasyncs the journal; on success the last written frontier is durable.
// Caller holds files.mu.
func (s *Shard) syncJournalLocked() error {
	f := &s.files
	if err := faults.Check(FaultJournalSync); err != nil {
		return err
	}
	if err := s.openJournalLocked(); err != nil { // closed after a failed append
		return err
	}
	if err := durable.Fdatasync(f.journal); err != nil {
		return fmt.Errorf("fdatasync %s: %w", JournalFile, err)
	}
	f.unsynced = false
	s.raiseDurable(f.journaled)
	return nil
}

// checkpointLocked writes consumer.offset atomically, then truncates the journal it
// supersedes. Caller holds files.mu.
func (s *Shard) checkpointLocked(now time.Time) error {
	f := &s.files
	if err := faults.Check(FaultCheckpoint); err != nil {
		return err
	}
	c, changes := s.frontierSnapshot()
	if err := durable.WriteFileAtomic(filepath.Join(s.dir, CheckpointFile), EncodeCheckpoint(c)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", CheckpointFile, err)
	}
	f.checkpointed.Store(changes)
	f.lastCkpt = now
	f.journaled = max(f.journaled, c.Frontier)
	s.raiseDurable(c.Frontier)
	// seed: truncate the journal only after a successful checkpoint.
	if err := s.openJournalLocked(); err != nil {
		if !dirMissing(err) {
			s.logger.Warn("consumer journal not truncated after checkpoint", "err", err)
		}
		return nil
	}
	if err := f.journal.Truncate(0); err != nil {
		s.logger.Warn("consumer journal not truncated after checkpoint", "err", err)
		return nil
	}
	f.size = 0
	f.unsynced = false
	return nil
}

func (s *Shard) raiseDurable(frontier int64) {
	for {
		d := s.durableFrontier.Load()
		if frontier <= d || s.durableFrontier.CompareAndSwap(d, frontier) {
			return
		}
	}
}

// Checkpoint journals and syncs the current frontier and, if the shard changed since the last
// checkpoint, writes consumer.offset now (log close, reclaim, ownership loss). A missing partition dir yields an error wrapping
// durable.ErrDirMissing; the dir is not recreated.
func (s *Shard) Checkpoint() error {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	return s.checkpointNowLocked(s.now())
}

func (s *Shard) checkpointNowLocked(now time.Time) error {
	return s.persistLocked(now, true, 0, true)
}

// closeFiles is Close's final flush: journal, sync, checkpoint, close the journal.
func (s *Shard) closeFiles(now time.Time) error {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	err := s.checkpointNowLocked(now)
	if f.journal != nil {
		if cerr := f.journal.Close(); cerr != nil && err == nil {
			err = cerr
		}
		f.journal = nil
	}
	if err != nil && dirMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consume: close shard %s/%d: %w", s.topic, s.partition, err)
	}
	return nil
}
