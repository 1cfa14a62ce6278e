package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// Segment installs (docs/internals/storage-format.md §20, docs/internals/replication.md §5): a
// follower that starts empty copies its leader's sealed segments whole, the way a move's
// pre-copy does, instead of fetching their frames answer by answer. A SegmentCopy receives one
// segment's bytes in chunks, checks every frame as the bytes pass (magic, header range, CRC,
// the first at the log's end offset and each next where the previous ended), writes them to a
// temp file beside the log through the page cache with write-behind (durable.WriteBehind: the
// disk writes each window while the next arrives, and the cache lets go of it once written),
// and Install makes it the log's next sealed segment: fsync, rename over the empty active
// segment of the same base, a new empty active segment at the copy's end offset, directory
// fsync. The HWM does not move; the caller advances it as after AppendFrames.

// FaultInstallSegment fires in Install after the copy is renamed into place, before the new
// active segment is created.
const FaultInstallSegment = "log.install_segment"

// ErrNotEmptyActive refuses a segment copy into a log whose active segment holds bytes or
// does not start at the end offset: an installed segment must begin exactly where the log ends,
// in a file of its own.
var ErrNotEmptyActive = errors.New("log: active segment is not empty at the end offset")

// ErrCopyIncomplete refuses to install a copy that ends inside a frame or holds no frame.
var ErrCopyIncomplete = errors.New("log: segment copy does not end on a frame")

// copyTempName is the temp name of the copy of the segment with base, removed by Open.
func copyTempName(base int64) string { return SegmentFileName(base) + durable.TempSuffix + "copy" }

// SegmentCopy is one segment being copied into the log (see BeginSegmentCopy). Its methods
// are for one goroutine; the log is not locked between them, and Install checks again that
// nothing was appended meanwhile.
type SegmentCopy struct {
	l     *Log
	base  int64
	path  string
	f     *os.File // writes, fsync
	wb    *durable.WriteBehind
	pos   int64 // bytes written
	check FrameStream
	done  bool
}

// BeginSegmentCopy starts the copy of a segment whose first frame starts at the log's end
// offset. The log must hold no byte at its end offset yet: its active segment is empty and
// starts there (a fresh or reset log, or one whose last install just ended), else
// ErrNotEmptyActive.
func (l *Log) BeginSegmentCopy() (*SegmentCopy, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	active := l.segs[len(l.segs)-1]
	if active.base != l.next || active.size.Load() != 0 {
		return nil, fmt.Errorf("%w: end offset %d, active segment %d of %d bytes", ErrNotEmptyActive,
			l.next, active.base, active.size.Load())
	}
	return l.beginCopy(l.next)
}

// BeginSegmentCopyAfter starts the copy of the segment that follows prev, while prev is still
// being installed: its first frame starts at prev's End, which must be whole. Its Install
// must come after prev's, and checks then that the log ends at its base. It lets the next
// segment's bytes stream while the previous one's fsync and renames run
// (docs/internals/replication.md §5).
func (l *Log) BeginSegmentCopyAfter(prev *SegmentCopy) (*SegmentCopy, error) {
	if prev.l != l || !prev.check.Whole() || prev.End() == prev.base {
		return nil, fmt.Errorf("%w: the previous copy does not end on a frame", ErrCopyIncomplete)
	}
	if err := l.writable(); err != nil {
		return nil, err
	}
	return l.beginCopy(prev.End())
}

// beginCopy creates the temp file of a copy starting at base.
func (l *Log) beginCopy(base int64) (*SegmentCopy, error) {
	path := filepath.Join(l.dir, copyTempName(base))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: segment copy: %w", err)
	}
	return &SegmentCopy{l: l, base: base, path: path, f: f, wb: durable.NewWriteBehind(f, 0),
		check: FrameStream{Next: base}}, nil
}

// Base is the offset the copy starts at.
func (c *SegmentCopy) Base() int64 { return c.base }

// Write checks b's frames and appends b to the copy. A check failure wraps ErrCorruptRecord
// or ErrNotContiguous, a write or write-back failure is an error of its own; either way the
// copy is then unusable (Abort it).
func (c *SegmentCopy) Write(b []byte) error {
	if err := c.check.Write(b); err != nil {
		return err
	}
	if _, err := c.f.WriteAt(b, c.pos); err != nil {
		return fmt.Errorf("log: segment copy: write %s: %w", c.path, err)
	}
	c.pos += int64(len(b))
	if err := c.wb.Wrote(c.pos); err != nil {
		return fmt.Errorf("log: segment copy: %w", err)
	}
	return nil
}

// End is the offset after the last whole frame written so far.
func (c *SegmentCopy) End() int64 { return c.check.Next }

// Install makes the copy durable and the log's next segment; it returns the log's new end
// offset. The copy must end on a frame and hold at least one (ErrCopyIncomplete), and the log
// must not have changed since BeginSegmentCopy (ErrNotEmptyActive). Crash safety: the copy
// is fsynced under its temp name (removed by Open); the rename over the empty active segment
// of the same base leaves either that empty file or the whole copy; the new active segment is
// created and the directory fsynced after it; a log without it recovers with the copy as its
// active segment, which holds whole, fsynced frames. A failure after the rename puts the log
// in failed state (reopen).
func (c *SegmentCopy) Install() (int64, error) {
	if c.done {
		return 0, fmt.Errorf("log: segment copy already ended")
	}
	if !c.check.Whole() || c.check.Next == c.base {
		return 0, fmt.Errorf("%w: %d bytes, %d pending", ErrCopyIncomplete, c.pos, c.check.Pending())
	}
	if err := durable.Fdatasync(c.f); err != nil {
		return 0, fmt.Errorf("log: segment copy: fsync %s: %w", c.path, err)
	}
	c.wb.Drop() // on disk now: a copied segment is old data, the cache has better uses
	l := c.l
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	active := l.segs[len(l.segs)-1]
	if active.base != c.base || l.next != c.base || active.size.Load() != 0 {
		return 0, fmt.Errorf("%w: the log changed during the copy", ErrNotEmptyActive)
	}
	c.done = true
	c.closeFiles()
	end := c.check.Next
	l.mu.Lock()
	defer l.mu.Unlock()
	sealed, next, err := l.installFiles(c.path, active, end)
	if err != nil {
		l.failed.Store(true)
		return 0, fmt.Errorf("%w: install segment %d: %w", ErrFailed, c.base, err)
	}
	l.segs = append(l.segs[:len(l.segs)-1:len(l.segs)-1], sealed, next)
	l.cmu.Lock()
	l.nav.reset() // it may point at the replaced active segment
	l.cmu.Unlock()
	l.next = end
	l.nextA.Store(end)
	l.Broadcast()
	return end, nil
}

// installFiles renames the copy at path over active's file, reopens it as a sealed segment and
// creates the new active segment at end. Caller holds wmu, hmu and mu.
func (l *Log) installFiles(path string, active *segment, end int64) (sealed, next *segment, err error) {
	if err := os.Rename(path, active.path); err != nil {
		return nil, nil, err
	}
	active.f.Close()
	f, err := openSegmentFile(active.path, false)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	sealed = &segment{base: active.base, path: active.path, f: f}
	sealed.size.Store(fi.Size())
	if err := faults.Check(FaultInstallSegment); err != nil {
		f.Close()
		return nil, nil, err
	}
	npath := filepath.Join(l.dir, SegmentFileName(end))
	nf, err := os.OpenFile(npath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := durable.SyncDir(l.dir); err != nil {
		f.Close()
		nf.Close()
		return nil, nil, err
	}
	next = &segment{base: end, path: npath, f: nf, idx: newSparseIndex(l.opts.SegmentBytes)}
	return sealed, next, nil
}

// Abort drops an uninstalled copy and its temp file.
func (c *SegmentCopy) Abort() {
	if c.done {
		return
	}
	c.done = true
	c.closeFiles()
	os.Remove(c.path)
}

func (c *SegmentCopy) closeFiles() { c.f.Close() }

// FrameStream checks a run of frames that arrives in pieces of any size, without holding
// more than one frame header: each frame must parse, pass its CRC, and start at Next, which
// then moves to its end. The zero value with Next set is ready.
type FrameStream struct {
	Next int64 // the offset the next frame must start at

	hdr  [frameHeaderSize]byte
	hn   int         // header bytes held
	h    frameHeader // the current frame's header, once hn == frameHeaderSize
	left int64       // payload bytes of the current frame still to come
	crc  uint32
}

// Write checks the next piece. An error wraps ErrCorruptRecord (a damaged frame) or
// ErrNotContiguous (a frame that does not continue the run); the stream is then unusable.
func (s *FrameStream) Write(b []byte) error {
	for len(b) > 0 {
		if s.hn < frameHeaderSize {
			k := copy(s.hdr[s.hn:], b)
			s.hn += k
			b = b[k:]
			if s.hn < frameHeaderSize {
				return nil
			}
			h, err := parseFrameHeader(s.hdr[:])
			if err != nil {
				return fmt.Errorf("frame at offset %d: %w: %w", s.Next, err, ErrCorruptRecord)
			}
			if h.base != s.Next {
				return fmt.Errorf("%w: frame at %d, want %d", ErrNotContiguous, h.base, s.Next)
			}
			s.h, s.left = h, int64(h.slen)
			s.crc = crc32.Update(0, castagnoli, s.hdr[2:23])
		}
		k := int(min(s.left, int64(len(b))))
		s.crc = crc32.Update(s.crc, castagnoli, b[:k])
		s.left -= int64(k)
		b = b[k:]
		if s.left == 0 {
			if s.crc != binary.BigEndian.Uint32(s.hdr[23:]) {
				return fmt.Errorf("frame at offset %d: %w: %w", s.h.base, errBadCRC, ErrCorruptRecord)
			}
			s.Next = s.h.end()
			s.hn = 0
		}
	}
	return nil
}

// Whole reports whether the bytes so far end exactly at the end of a frame (or are none).
func (s *FrameStream) Whole() bool { return s.hn == 0 }

// Pending is the number of bytes of an unfinished frame held or still expected.
func (s *FrameStream) Pending() int64 {
	if s.hn == 0 {
		return 0
	}
	if s.hn < frameHeaderSize {
		return int64(s.hn)
	}
	return s.left
}
