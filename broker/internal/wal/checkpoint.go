package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
)

// checkpointSize is the size of the checkpoint file: one uint64 BE, the lowest unfinished seq.
const checkpointSize = 8

// ErrCorruptCheckpoint is returned for a checkpoint file that is not exactly 8 bytes.
var ErrCorruptCheckpoint = errors.New("wal: corrupt checkpoint")

func encodeCheckpoint(cp uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, checkpointSize), cp)
}

// decodeCheckpoint decodes the checkpoint file's bytes.
func decodeCheckpoint(b []byte) (uint64, error) {
	if len(b) != checkpointSize {
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrCorruptCheckpoint, len(b), checkpointSize)
	}
	return binary.BigEndian.Uint64(b), nil
}

// readCheckpoint returns the persisted checkpoint, 0 when the file does not exist (a new WAL).
func readCheckpoint(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wal: read checkpoint: %w", err)
	}
	cp, err := decodeCheckpoint(b)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrDamaged, checkpointName, err)
	}
	return cp, nil
}

// Advance records that every seq below cp is finished (committed at its owner or discarded):
// it persists cp with an atomic replace (temp + fsync + rename + dir fsync), then compacts.
// cp only moves forward and never past NextSeq (ErrCheckpoint otherwise); an equal cp only
// compacts. Seqs below the checkpoint are no longer readable.
func (w *WAL) Advance(cp uint64) error {
	w.advMu.Lock()
	defer w.advMu.Unlock()
	w.mu.Lock()
	cur, next, closed := w.checkpoint, w.durableNext, w.closed
	w.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case cp < cur:
		return fmt.Errorf("%w: %d is below the current checkpoint %d", ErrCheckpoint, cp, cur)
	case cp > next:
		return fmt.Errorf("%w: %d is past the next seq %d", ErrCheckpoint, cp, next)
	}
	if cp > cur {
		if err := durable.WriteFileAtomic(filepath.Join(w.dir, checkpointName), encodeCheckpoint(cp)); err != nil {
			return fmt.Errorf("wal: write checkpoint %d: %w", cp, err)
		}
		w.mu.Lock()
		w.checkpoint = cp
		w.tail.dropBelow(cp)
		w.mu.Unlock()
	}
	return w.compact()
}

// compact deletes segments whose every seq is below the checkpoint. A fully finished active
// segment of at least RollFinishedBytes is rolled first (the next batch opens a new segment),
// so an idle WAL stays under about 1 MiB (docs/internals/storage-format.md §12.3). Segments are deleted
// oldest first, so the survivors always start at or below the checkpoint.
func (w *WAL) compact() error {
	w.writeMu.Lock()
	w.mu.Lock()
	cp := w.checkpoint
	var victims []*segment
	var rolled *os.File
	keep := make([]*segment, 0, len(w.segs))
	for _, s := range w.segs {
		isActive := w.active != nil && s == w.activeSeg
		switch {
		case s.next > cp:
			keep = append(keep, s)
		case !isActive:
			victims = append(victims, s)
		case s.size >= RollFinishedBytes:
			rolled = w.active
			w.active, w.activeSeg = nil, nil
			victims = append(victims, s)
		default:
			keep = append(keep, s)
		}
	}
	w.segs = keep
	w.mu.Unlock()
	if rolled != nil {
		if err := rolled.Close(); err != nil {
			w.log.Warn("wal: closing rolled segment", "err", err)
		}
	}
	w.writeMu.Unlock()

	for _, s := range victims {
		// Stop at the first failure: deleting a later segment would leave a seq gap on disk.
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: delete %s: %w", filepath.Base(s.path), err)
		}
	}
	if len(victims) == 0 {
		return nil
	}
	return durable.SyncDir(w.dir)
}
