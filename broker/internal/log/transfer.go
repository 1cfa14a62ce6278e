package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// ErrNoSegment reports a transfer read of a segment the log does not hold (never existed, or
// retention deleted it since the listing).
var ErrNoSegment = errors.New("log: no such segment")

// SegmentInfo is one segment of a committed listing (docs/internals/storage-format.md §8, docs/internals/moves.md §4.1).
type SegmentInfo struct {
	Base int64 // base offset (the file name)
	// Size is the committed byte length: the file size for a segment below the boundary
	// segment, the committed boundary position for the boundary segment.
	Size int64
	// Sealed is true for every segment below the boundary segment: its Size is final. The
	// boundary segment (always the last one listed) is not sealed: it may still grow.
	Sealed bool
	Mtime  time.Time // the file's modification time (the retention clock)
}

// CommittedListing returns the HWM and the segments that hold committed bytes
// (docs/internals/storage-format.md §8): every segment below the boundary segment at its file size, the
// boundary segment at the committed boundary position, and nothing after it (those segments
// hold only hidden-tail records). The HWM and the boundary are read together under the write
// lock, so the listed bytes end exactly at the HWM's frame boundary: no listed position is
// ahead of the listed bytes, and no listed byte is at or past the HWM. It waits for a commit
// in progress to finish.
func (l *Log) CommittedListing() (hwm int64, segs []SegmentInfo, err error) {
	type entry struct {
		s      *segment
		size   int64
		sealed bool
	}
	l.wmu.Lock()
	l.hmu.Lock()
	if l.closed.Load() {
		l.hmu.Unlock()
		l.wmu.Unlock()
		return 0, nil, ErrClosed
	}
	hwm = l.hwm.Load()
	b := *l.bound.Load()
	var picked []entry
	for _, s := range l.segs { // the write-lock holder may read segs without mu
		if s.base > b.segBase {
			break
		}
		if s.base == b.segBase {
			picked = append(picked, entry{s: s, size: b.pos})
			break
		}
		picked = append(picked, entry{s: s, size: s.size.Load(), sealed: true})
	}
	l.hmu.Unlock()
	l.wmu.Unlock()

	// Modification times outside the write lock: the files stay open until retention or Close
	// take mu exclusively; a segment retention deleted meanwhile (always a prefix) is dropped.
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return 0, nil, ErrClosed
	}
	segs = make([]SegmentInfo, 0, len(picked))
	for _, p := range picked {
		fi, err := p.s.f.Stat()
		if errors.Is(err, os.ErrClosed) {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("log: stat %s: %w", p.s.path, err)
		}
		segs = append(segs, SegmentInfo{Base: p.s.base, Size: p.size, Sealed: p.sealed, Mtime: fi.ModTime()})
	}
	return hwm, segs, nil
}

// ReadCommitted reads committed bytes of segment base from byte position at into buf and
// returns how many it read. It never returns bytes at or past the committed boundary: a
// segment below the boundary segment is readable to its size, the boundary segment to the
// boundary position, a later segment not at all. A read at or past that limit returns 0 and
// no error; a read that reaches it is short. An unknown base is ErrNoSegment.
func (l *Log) ReadCommitted(base, at int64, buf []byte) (int, error) {
	if at < 0 {
		return 0, fmt.Errorf("log: read segment %d at negative position %d", base, at)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	seg := l.segmentFor(base)
	if seg == nil || seg.base != base {
		return 0, fmt.Errorf("segment %d of %s: %w", base, l.dir, ErrNoSegment)
	}
	// The boundary only moves forward; a segment below it is sealed and its size final.
	b := l.bound.Load()
	var limit int64
	switch {
	case seg.base < b.segBase:
		limit = seg.size.Load()
	case seg.base == b.segBase:
		limit = b.pos
	}
	if at >= limit || len(buf) == 0 {
		return 0, nil
	}
	n := min(int64(len(buf)), limit-at)
	got, err := seg.f.ReadAt(buf[:n], at)
	if int64(got) < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return got, fmt.Errorf("log: read %s at %d: %w", seg.path, at, err)
	}
	return got, nil
}

// ListClosed lists the committed bytes of the CLOSED log in dir without opening it
// (docs/internals/storage-format.md §8, "Closed, HWM exact"). exact is true only when the hwm file is 16 bytes,
// CRC-valid and CLEAN (docs/internals/storage-format.md §7.5) and the boundary segment's frame headers walk (no
// CRC, no decode) cleanly up to the HWM; then hwm and segs are as CommittedListing would
// report them after an open. With exact false the caller must open the log (recovery decides
// the boundary) and use CommittedListing; hwm and segs are then meaningless. The caller keeps
// the log closed meanwhile (the topic's open guard).
func ListClosed(dir string) (hwm int64, segs []SegmentInfo, exact bool, err error) {
	return listClosed(dir, nil)
}

// ClosedLister is ListClosed with a memo of the boundary walk, for callers that list the same
// closed directories repeatedly (a move's source answering chunk reads). A memo is used only
// while the hwm value and the boundary segment's identity, size and modification time are the
// ones it was computed from; a closed log changes none of them without being reopened.
// The zero value is ready to use and safe for concurrent use.
type ClosedLister struct {
	mu   sync.Mutex
	memo map[string]boundaryMemo
}

// boundaryMemo is a walked boundary and what it was computed from.
type boundaryMemo struct {
	hwm   int64
	seg   segFileInfo
	ino   uint64
	pos   int64
	exact bool
}

// closedListerCap bounds the memo; past it the memo is reset.
const closedListerCap = 1024

// List is ListClosed(dir), reusing a memoized boundary walk when still valid.
func (c *ClosedLister) List(dir string) (hwm int64, segs []SegmentInfo, exact bool, err error) {
	return listClosed(dir, c)
}

// Forget drops dir's memo (the directory was replaced or removed).
func (c *ClosedLister) Forget(dir string) {
	c.mu.Lock()
	delete(c.memo, dir)
	c.mu.Unlock()
}

func (c *ClosedLister) get(dir string) (boundaryMemo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.memo[dir]
	return m, ok
}

func (c *ClosedLister) put(dir string, m boundaryMemo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memo == nil || len(c.memo) >= closedListerCap {
		c.memo = map[string]boundaryMemo{}
	}
	c.memo[dir] = m
}

func listClosed(dir string, memo *ClosedLister) (hwm int64, segs []SegmentInfo, exact bool, err error) {
	hs, err := readHWMFile(dir)
	if errors.Is(err, ErrCorruptHWM) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("log: list closed %s: %w", dir, err)
	}
	if !hs.present || !hs.clean || hs.legacy {
		return hs.hwm, nil, false, nil
	}
	hwm = hs.hwm
	files, err := listSegments(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(files) == 0) {
		return hwm, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("log: list closed %s: %w", dir, err)
	}
	bi := -1
	for i, f := range files {
		if f.base <= hwm {
			bi = i
		}
	}
	if bi < 0 {
		// Every segment starts past the HWM: nothing committed is retained (as computeBoundary).
		f := files[0]
		return hwm, []SegmentInfo{{Base: f.base, Mtime: f.mtime}}, true, nil
	}
	bf := files[bi]
	pos, ok, err := closedBoundary(bf, hwm, memo)
	if err != nil || !ok {
		return hwm, nil, false, err
	}
	segs = make([]SegmentInfo, 0, bi+1)
	for _, f := range files[:bi] {
		segs = append(segs, SegmentInfo{Base: f.base, Size: f.size, Sealed: true, Mtime: f.mtime})
	}
	segs = append(segs, SegmentInfo{Base: bf.base, Size: pos, Mtime: bf.mtime})
	return hwm, segs, true, nil
}

// closedBoundary returns the committed boundary position in the boundary segment f of a
// closed log whose HWM is hwm, from memo when it is still valid.
func closedBoundary(f segFileInfo, hwm int64, memo *ClosedLister) (int64, bool, error) {
	file, err := os.Open(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil // removed since the listing: let the caller open the log
	}
	if err != nil {
		return 0, false, fmt.Errorf("log: open %s: %w", f.path, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("log: stat %s: %w", f.path, err)
	}
	cur := segFileInfo{base: f.base, path: f.path, size: fi.Size(), mtime: fi.ModTime()}
	ino := inode(fi)
	if memo != nil {
		if m, ok := memo.get(filepath.Dir(f.path)); ok && m.hwm == hwm && m.ino == ino &&
			m.seg.base == cur.base && m.seg.size == cur.size && m.seg.mtime.Equal(cur.mtime) {
			return m.pos, m.exact, nil
		}
	}
	pos, exact, err := walkClosedBoundary(file, cur, hwm)
	if err != nil {
		return 0, false, err
	}
	if memo != nil {
		memo.put(filepath.Dir(f.path), boundaryMemo{hwm: hwm, seg: cur, ino: ino, pos: pos, exact: exact})
	}
	return pos, exact, nil
}

// walkClosedBoundary walks the frame headers of the boundary segment (docs/internals/storage-format.md §11: no
// CRC, no decode) to the first frame whose base is ≥ hwm. The walk is exact only if every
// header parses and lies within the file, no frame straddles hwm, and a walk that reaches the
// end of the file ends exactly at hwm (records below hwm must all be there); anything else
// needs recovery.
func walkClosedBoundary(f *os.File, seg segFileInfo, hwm int64) (int64, bool, error) {
	w := newWindowReader(f, seg.size)
	pos, lastEnd := int64(0), seg.base
	for pos < seg.size {
		hb, err := w.at(pos, frameHeaderSize)
		var h frameHeader
		if err == nil {
			h, err = parseFrameHeader(hb)
		}
		if err != nil {
			if isFrameDamage(err) {
				return 0, false, nil
			}
			return 0, false, fmt.Errorf("log: walk %s: %w", seg.path, err)
		}
		if h.base >= hwm {
			return pos, true, nil
		}
		if h.end() > hwm || pos+h.size() > seg.size || h.base < lastEnd {
			return 0, false, nil
		}
		lastEnd = h.end()
		pos += h.size()
	}
	return pos, lastEnd == hwm, nil
}

// inode returns the file's inode number, or 0 where the platform does not expose one.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// FindSegment returns the listed segment whose base is base.
func FindSegment(segs []SegmentInfo, base int64) (SegmentInfo, bool) {
	i, ok := slices.BinarySearchFunc(segs, base, func(s SegmentInfo, b int64) int { return cmpInt64(s.Base, b) })
	if !ok {
		return SegmentInfo{}, false
	}
	return segs[i], true
}
