package cursorfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// Fault points (faults.Check). Armed with an error, before_advance leaves the file untouched;
// after_advance fires once the new record is durable; after_migrate fires when a legacy-named
// file has been rewritten under its current name, before the legacy file is removed (a crash
// there leaves both, and the next Open uses the current one).
const (
	FaultBeforeAdvance = "fanout.cursor.before_advance"
	FaultAfterAdvance  = "fanout.cursor.after_advance"
	FaultAfterMigrate  = "fanout.cursor.after_migrate"
)

// Writer is the open cursor file of one running cursor. It is owned by that cursor's
// goroutine and is not safe for concurrent use; readers elsewhere use Read, which tolerates a
// concurrent Advance.
//
// Invariant: the durable next_offset a Writer records never decreases (ErrBackwards), and every
// write leaves a whole record — in place for a fixed-form version 2 file, by atomic replace
// otherwise.
type Writer struct {
	path  string
	child string
	f     *os.File // nil once closed
	st    State
	fixed bool  // the file on disk is a RecordSize version 2 record: Advance may write in place
	err   error // sticky: after a failed write or fsync the file's state is unknown
}

// Open opens the existing cursor file of child in partitionDir for a running cursor and
// returns its state. A file in the layout before version 2 (fanout-<child>.offset) is
// migrated first: read, written under Path durably (temp file, fsync, rename, directory
// fsync), then removed with a directory fsync; a crash at any step leaves a file that the
// next Open resumes from. A missing file is ErrNotExist and a corrupt one ErrCorrupt (after
// re-reads), as is a file that names another child; all mean the caller must anchor instead
// (after a leader-confirmed read, docs/fanout.md "Attach a child"). Whether State.Epoch is the running
// link's epoch is the caller's check: on a mismatch, Close the Writer and Anchor. A file of an
// older record version opens normally; the next Advance rewrites it as version 2.
func Open(ctx context.Context, partitionDir, child string) (*Writer, State, error) {
	path := Path(partitionDir, child)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err := migrate(ctx, partitionDir, child); err != nil {
			return nil, State{}, err
		}
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, State{}, fmt.Errorf("cursorfile: %s: %w", path, ErrNotExist)
		}
		return nil, State{}, fmt.Errorf("cursorfile: open %s: %w", path, err)
	}
	st, fixed, err := defaultReader.read(ctx, path, func() ([]byte, error) { return readFile(f) })
	if err == nil && st.Child != "" && st.Child != child {
		err = fmt.Errorf("cursorfile: %s names child %.40q: %w", path, st.Child, ErrCorrupt)
	}
	if err != nil {
		f.Close()
		return nil, State{}, err
	}
	// A legacy file still beside the current one is what an interrupted migration left:
	// the current file was written from it and may have advanced since.
	if err := removeLegacy(partitionDir, child); err != nil {
		f.Close()
		return nil, State{}, err
	}
	st.Child = child
	return &Writer{path: path, child: child, f: f, st: st, fixed: fixed && st.Version == 2}, st, nil
}

// migrate rewrites child's legacy-named file under Path and removes it. No legacy file is
// ErrNotExist; a legacy file that fails its check (or holds an epoch that cannot be recorded)
// is ErrCorrupt and stays until the caller's Anchor replaces it.
func migrate(ctx context.Context, partitionDir, child string) error {
	old, ok := legacyPath(partitionDir, child)
	if !ok {
		return fmt.Errorf("cursorfile: %s: %w", Path(partitionDir, child), ErrNotExist)
	}
	st, _, err := defaultReader.read(ctx, old, func() ([]byte, error) { return readPath(old) })
	if err != nil {
		return err
	}
	b, _, err := encode(child, st.Epoch, st.NextOffset)
	if err != nil {
		return fmt.Errorf("cursorfile: migrate %s: %w: %w", old, ErrCorrupt, err)
	}
	if err := durable.WriteFileAtomic(Path(partitionDir, child), b); err != nil {
		return fmt.Errorf("cursorfile: migrate %s: %w", old, err)
	}
	if err := faults.Check(FaultAfterMigrate); err != nil {
		return fmt.Errorf("cursorfile: migrate %s: %w", old, err)
	}
	return Remove(old)
}

// removeLegacy removes child's legacy-named file, if any, and fsyncs the directory.
func removeLegacy(partitionDir, child string) error {
	if old, ok := legacyPath(partitionDir, child); ok {
		return Remove(old)
	}
	return nil
}

// Anchor writes a new cursor file for child in partitionDir holding (epoch, next), replacing
// whatever is there (no file, another epoch's file, a corrupt or older-version file, a
// legacy-named file), and returns its Writer. It is the destructive move of the fan-out
// engine: the caller anchors only after the leader confirmed the epoch. The write is a temp
// file + fsync + rename + directory fsync, so a crash leaves the old file or the new one
// whole. A missing partition directory is ErrDirMissing and is not created.
func Anchor(partitionDir, child, epoch string, next int64) (*Writer, error) {
	path := Path(partitionDir, child)
	b, fixed, err := encode(child, epoch, next)
	if err != nil {
		return nil, fmt.Errorf("cursorfile: anchor %s: %w", path, err)
	}
	if err := durable.WriteFileAtomic(path, b); err != nil {
		return nil, fmt.Errorf("cursorfile: anchor %s: %w", path, err)
	}
	if err := removeLegacy(partitionDir, child); err != nil {
		return nil, fmt.Errorf("cursorfile: anchor %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cursorfile: reopen %s: %w", path, err)
	}
	return &Writer{path: path, child: child, f: f, st: State{Child: child, Epoch: epoch, NextOffset: next, Version: 2}, fixed: fixed}, nil
}

// Path returns the file the Writer writes.
func (w *Writer) Path() string { return w.path }

// State returns the last state the Writer made durable (or read at Open).
func (w *Writer) State() State { return w.st }

// Advance durably records next as the position to resume from. The caller calls it only after
// every child commit below next was acknowledged (seed: commit before advance). For a
// fixed-form version 2 file that is one RecordSize pwrite at offset 0 and one fdatasync; an
// older-version or long-form file, or a record that does not fit in RecordSize, is replaced
// atomically instead.
// next below the current position is ErrBackwards; next equal to it rewrites the same value.
// A failed write or fsync is sticky: every later Advance returns it, and the caller reopens.
func (w *Writer) Advance(next int64) error {
	if w.f == nil {
		return fmt.Errorf("cursorfile: advance %s: %w", w.path, ErrClosed)
	}
	if w.err != nil {
		return w.err
	}
	if next < w.st.NextOffset {
		return fmt.Errorf("cursorfile: advance %s from %d to %d: %w", w.path, w.st.NextOffset, next, ErrBackwards)
	}
	b, fixed, err := encode(w.child, w.st.Epoch, next)
	if err != nil {
		return fmt.Errorf("cursorfile: advance %s: %w", w.path, err)
	}
	if err := faults.Check(FaultBeforeAdvance); err != nil {
		return fmt.Errorf("cursorfile: advance %s: %w", w.path, err)
	}
	if fixed && w.fixed {
		err = w.writeInPlace(b)
	} else {
		err = w.replace(b)
	}
	if err != nil {
		w.err = fmt.Errorf("cursorfile: advance %s to %d: %w", w.path, next, err)
		return w.err
	}
	w.st = State{Child: w.child, Epoch: w.st.Epoch, NextOffset: next, Version: 2}
	w.fixed = fixed
	if err := faults.Check(FaultAfterAdvance); err != nil {
		return fmt.Errorf("cursorfile: after advance %s: %w", w.path, err)
	}
	return nil
}

func (w *Writer) writeInPlace(b []byte) error {
	if _, err := w.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("pwrite: %w", err)
	}
	if err := durable.Fdatasync(w.f); err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	return nil
}

// replace writes b by atomic rename and reopens the new file, since the open descriptor still
// points at the replaced inode.
func (w *Writer) replace(b []byte) error {
	if err := durable.WriteFileAtomic(w.path, b); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	old := w.f
	w.f = f
	_ = old.Close() // read-only use of a replaced inode; nothing to flush
	return nil
}

// Close releases the file. It does not write: the durable position is the last Advance (or
// Anchor). Closing twice is a no-op.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Remove deletes the cursor file at path and fsyncs its directory. The caller removes a file
// only after the leader confirmed that its link is dissolved (docs/internals/storage-format.md §13). A file or
// directory that is already gone is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cursorfile: remove %s: %w", path, err)
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cursorfile: remove %s: %w", path, err)
	}
	return nil
}
