package move

import (
	"errors"
	"fmt"
	"os"

	"narad.dev/broker/internal/durable"
)

// behindWrites turns write-behind on for sealed segments; the benchmarks turn it off to
// compare with plain buffered writes.
var behindWrites = true

// errWriteBack: the write-back of staged bytes already written failed. The kernel reports such
// a failure once, so no later fsync can prove those bytes: the worker deletes the staged file
// and copies the segment again (docs/internals/moves.md §5.7 rule 5).
var errWriteBack = errors.New("move: the write-back of a staged segment failed")

// stagedFile is a staged segment being copied (docs/internals/moves.md §5.3). Chunks are
// written through the page cache, in order, by one goroutine, so the file never holds a gap:
// a crash leaves it holding a prefix of the source's bytes.
//
// A sealed segment's chunks go with write-behind (durable.WriteBehind,
// docs/internals/storage-format.md §21): every 8 MiB the write-back of the window just written
// starts, and the window before it is waited for and dropped from the cache. The disk then
// gets deep queues of large merged writes while the next chunks arrive, the copy never waits
// behind the kernel's dirty-page throttling (which made a plain buffered copy cost several
// times the CPU of the disk write), and the segment's fdatasync (§5.7) finds it mostly
// written. The active segment is written plainly: it is read back under the freeze, and from
// the page cache that read costs no disk time. Nothing here makes anything durable; the
// fsyncs of §5.7 do.
type stagedFile struct {
	f *os.File
	// behind is the file's write-behind from offset 0 (sealed segments; nil otherwise). A
	// resumed copy starts past 0: its first window also covers the bytes staged before, which
	// write-back passes over when they are clean.
	behind behindWriter
}

// behindWriter is the part of durable.WriteBehind the staged file uses.
type behindWriter interface{ Wrote(end int64) error }

// newBehind returns a sealed segment's write-behind; tests replace it to fail the way a disk
// does.
var newBehind = func(f *os.File) behindWriter { return durable.NewWriteBehind(f, 0) }

// openStaged opens (creating) the staged segment at path, with write-behind when sealed.
func openStaged(path string, sealed bool) (*stagedFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	s := &stagedFile{f: f}
	if sealed && behindWrites {
		s.behind = newBehind(f)
	}
	return s, nil
}

// WriteAt writes b at off, which must be where the previous write ended (or the staged size,
// for the first). A write-back failure wraps errWriteBack: bytes written before b may be lost.
func (s *stagedFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := s.f.WriteAt(b, off)
	if err != nil || s.behind == nil {
		return n, err
	}
	if err := s.behind.Wrote(off + int64(n)); err != nil {
		return n, fmt.Errorf("%w: %w", errWriteBack, err)
	}
	return n, nil
}

// Truncate cuts the file to size.
func (s *stagedFile) Truncate(size int64) error { return s.f.Truncate(size) }

// Close closes the file.
func (s *stagedFile) Close() error {
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close staged segment: %w", err)
	}
	return nil
}
