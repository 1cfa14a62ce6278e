package move

import (
	"fmt"
	"os"
	"unsafe"
)

// directAlign is the alignment of a direct write's memory, file position and length: the
// largest logical block size of the disks Narad runs on (512 B or 4 KiB).
const directAlign = 4096

// directWrites turns direct chunk writes on; the benchmarks turn it off to compare.
var directWrites = true

// stagedFile is a staged segment being copied (docs/internals/moves.md §5.3). Chunks of a sealed
// segment go to the disk with direct I/O when the platform and the filesystem allow it and
// the chunk is aligned (whole 1 MiB chunks from an aligned position: all of a bulk copy but
// the active segment). The copy then never dirties the page cache, so it neither pays the
// kernel's per-page copy and dirty accounting nor waits behind write-back throttling, which
// made the buffered copy cost several times the CPU of the disk write itself. Any other
// chunk (the short tail of a segment, a resume from an unaligned staged size, the active
// segment) is written through the buffered file; the kernel keeps the two views of the file
// coherent. Durability is unchanged: the segment is still fdatasynced before anything relies
// on it (§5.7), since a direct write may sit in the disk's volatile cache and its extent in
// the journal.
//
// Chunks are written in order by one goroutine, so the file never holds a gap: a crash
// leaves it holding a prefix of the source's bytes.
type stagedFile struct {
	f      *os.File // O_RDWR: buffered writes, truncation, fsync
	direct *os.File // O_WRONLY|O_DIRECT on the same inode; nil → every write is buffered
	bounce []byte   // directAlign-aligned copy of a chunk whose memory is not aligned
}

// openStaged opens (creating) the staged segment at path; direct asks for direct writes. The
// worker asks for them for sealed segments only: the active segment is read back under the
// freeze (the verify recovers it), and from the page cache that read costs no disk time.
func openStaged(path string, direct bool) (*stagedFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	s := &stagedFile{f: f}
	if direct && directWrites {
		s.direct = openDirect(path)
	}
	return s, nil
}

// WriteAt writes b at off, directly when both are aligned.
func (s *stagedFile) WriteAt(b []byte, off int64) (int, error) {
	if s.direct == nil || off%directAlign != 0 || len(b)%directAlign != 0 || len(b) == 0 {
		return s.f.WriteAt(b, off)
	}
	src := b
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%directAlign != 0 {
		if cap(s.bounce) < len(b) {
			s.bounce = alignedBuffer(len(b))
		}
		src = s.bounce[:len(b)]
		copy(src, b)
	}
	n, err := s.direct.WriteAt(src, off)
	if err != nil {
		// A filesystem can refuse a direct write it accepted at open; the rest of this
		// file goes through the page cache (n bytes are on the file either way).
		s.direct.Close()
		s.direct = nil
		if n < len(b) {
			k, err := s.f.WriteAt(b[n:], off+int64(n))
			return n + k, err
		}
	}
	return n, nil
}

// Truncate cuts the file to size.
func (s *stagedFile) Truncate(size int64) error { return s.f.Truncate(size) }

// Close closes both descriptors.
func (s *stagedFile) Close() error {
	if s.direct != nil {
		s.direct.Close()
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close staged segment: %w", err)
	}
	return nil
}

// alignedBuffer returns n bytes starting at a directAlign boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%directAlign)) % directAlign
	return b[skip : skip+n : skip+n]
}
