package log

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"narad.dev/broker/internal/durable"
)

// Direct appends (docs/internals/storage-format.md §20). A follower catching up appends
// megabytes of frames per call. Through the page cache each byte costs the kernel a copy into
// a newly allocated page, dirty accounting and write-back, several times the CPU of the disk
// write itself; AppendFramesDirect instead writes the blocks of the run that cover whole
// DirectAlign blocks of the segment file with direct I/O, from an aligned copy, and only the
// unaligned head and tail through the page cache. The file, the fsync and the verify are those
// of AppendFrames; the verify re-reads the direct part from the disk.

// directMin is the fewest whole-block bytes for which a run is written directly; a shorter
// run goes through the page cache whole.
const directMin = 1 << 20

// directScratch recycles the aligned copies of direct appends (*[]byte, each starting at a
// durable.DirectAlign boundary).
var directScratch sync.Pool

// AppendFramesDirect is AppendFrames for a bulk copy (a follower far behind its leader): the
// same checks, the same bytes in the file, the same fsync and verify, but the part of frames
// that covers whole 4 KiB blocks of the segment file is written and re-read with direct I/O,
// bypassing the page cache, when the filesystem allows it. frames is not written to.
func (l *Log) AppendFramesDirect(frames []byte) (leo int64, err error) {
	return l.appendFrames(frames, true)
}

// writeFramesDirect is writeFrames(seg, l.next, frames, …) through an O_DIRECT descriptor of
// seg and an aligned copy of frames laid out as the file is (&copy[0] ≡ the write position
// modulo DirectAlign). A run with fewer than directMin whole-block bytes, or a filesystem that
// refuses O_DIRECT, is written through the page cache. Caller holds wmu.
func (l *Log) writeFramesDirect(seg *segment, frames []byte) (int64, error) {
	start := seg.size.Load()
	lo, hi := alignUp(start), alignDown(start+int64(len(frames)))
	if hi-lo < directMin {
		return l.writeFrames(seg, l.next, frames, nil)
	}
	direct := durable.OpenDirect(seg.path)
	if direct == nil {
		return l.writeFrames(seg, l.next, frames, nil)
	}
	defer direct.Close()
	skew := int(start % durable.DirectAlign)
	scratch := directBuffer(skew + len(frames))
	defer directScratch.Put(scratch)
	view := (*scratch)[skew : skew+len(frames)]
	copy(view, frames)
	return l.writeFrames(seg, l.next, view, direct)
}

// directBuffer returns an aligned scratch of n bytes, from directScratch when one there is
// large enough; a new one is made in whole MiB, so answers of about the same size share it.
func directBuffer(n int) *[]byte {
	if p, ok := directScratch.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := durable.AlignedBuffer((n + 1<<20 - 1) &^ (1<<20 - 1))[:n]
	return &b
}

func alignUp(off int64) int64   { return (off + durable.DirectAlign - 1) &^ (durable.DirectAlign - 1) }
func alignDown(off int64) int64 { return off &^ (durable.DirectAlign - 1) }

// spanIO writes or reads b at off of f.
type spanIO func(f *os.File, b []byte, off int64) error

func writeSpan(f *os.File, b []byte, off int64) error { _, err := f.WriteAt(b, off); return err }
func readSpan(f *os.File, b []byte, off int64) error  { _, err := f.ReadAt(b, off); return err }

// eachSpan applies do to buf at position off of seg. Without direct it is one call on seg's
// file. With direct, buf's memory is laid out as the file (&buf[0] ≡ off modulo DirectAlign):
// the head up to the first block boundary and the tail after the last go through seg's file,
// the whole blocks between them through direct, in file order (a write never leaves a hole).
// A direct call the filesystem refuses (EINVAL) is made through seg's file instead.
func eachSpan(seg *segment, direct *os.File, buf []byte, off int64, do spanIO) error {
	end := off + int64(len(buf))
	lo, hi := alignUp(off), alignDown(end)
	if direct == nil || hi <= lo || !durable.Aligned(buf[lo-off:]) {
		return do(seg.f, buf, off)
	}
	if lo > off {
		if err := do(seg.f, buf[:lo-off], off); err != nil {
			return err
		}
	}
	err := do(direct, buf[lo-off:hi-off], lo)
	if errors.Is(err, syscall.EINVAL) {
		err = do(seg.f, buf[lo-off:hi-off], lo)
	}
	if err != nil || hi == end {
		return err
	}
	return do(seg.f, buf[hi-off:], hi)
}
