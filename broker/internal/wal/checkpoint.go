package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
)

// checkpoint file layout (docs/internals/storage-format.md §12.3): the lowest unfinished seq,
// uint64 BE | reserved uint32 BE (0) | CRC-32C over [0,12). It is overwritten in place: 16
// bytes sit in one sector, so the pwrite is atomic on real devices, and the CRC catches the
// rest. A legacy file (written by atomic replace) is the bare 8-byte seq.
const (
	checkpointSize       = 16
	checkpointLegacySize = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptCheckpoint is returned for checkpoint bytes that are neither a record with a
// valid CRC nor a legacy 8-byte value.
var ErrCorruptCheckpoint = errors.New("wal: corrupt checkpoint")

func encodeCheckpoint(cp uint64) []byte {
	b := make([]byte, checkpointSize)
	binary.BigEndian.PutUint64(b, cp)
	binary.BigEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

// decodeCheckpoint decodes the checkpoint file's bytes: empty (a file created whose first
// write never happened) is no checkpoint, 0.
func decodeCheckpoint(b []byte) (uint64, error) {
	switch len(b) {
	case 0:
		return 0, nil
	case checkpointLegacySize:
		return binary.BigEndian.Uint64(b), nil
	case checkpointSize:
		if crc32.Checksum(b[:12], castagnoli) != binary.BigEndian.Uint32(b[12:]) {
			return 0, fmt.Errorf("%w: crc mismatch", ErrCorruptCheckpoint)
		}
		return binary.BigEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("%w: %d bytes, want %d", ErrCorruptCheckpoint, len(b), checkpointSize)
}

// checkpointFile is the WAL's open checkpoint file. Used only under advMu (or before the WAL
// is shared).
type checkpointFile struct {
	f   *os.File
	dir string
	// needDirSync: the file's creation is not yet durable; the first persist fsyncs the
	// directory.
	needDirSync bool
}

// openCheckpointFile opens (creating if needed) dir's checkpoint file and decodes it; a
// missing file reads as 0. err wraps ErrCorruptCheckpoint when the content does not decode
// (the file is still returned, open).
func openCheckpointFile(dir string) (*checkpointFile, uint64, error) {
	path := filepath.Join(dir, checkpointName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("wal: open checkpoint: %w", err)
	}
	c := &checkpointFile{f: f, dir: dir, needDirSync: errors.Is(statErr, os.ErrNotExist)}
	b := make([]byte, checkpointSize+1) // one more: an oversized file is corrupt, never read whole
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, 0, fmt.Errorf("wal: read checkpoint: %w", err)
	}
	cp, err := decodeCheckpoint(b[:n])
	return c, cp, err
}

// persist overwrites the file in place with cp and makes it durable: pwrite at 0, fdatasync,
// and after the file's creation an fsync of the directory. A legacy 8-byte file becomes a
// 16-byte one with the same write.
func (c *checkpointFile) persist(cp uint64) error {
	if _, err := c.f.WriteAt(encodeCheckpoint(cp), 0); err != nil {
		return err
	}
	if err := durable.Fdatasync(c.f); err != nil {
		return err
	}
	if c.needDirSync {
		if err := durable.SyncDir(c.dir); err != nil {
			return err
		}
		c.needDirSync = false
	}
	return nil
}

// Advance records that every seq below cp is finished (committed at its owner or discarded):
// it persists cp (the checkpoint file overwritten in place, then fdatasync), then compacts.
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
		if err := w.cpf.persist(cp); err != nil {
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
