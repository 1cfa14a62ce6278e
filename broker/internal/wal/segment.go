package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"narad.dev/broker/internal/durable"
)

const (
	segmentSuffix = ".wal"
	// indexEvery is the spacing of a segment's sparse seq→offset index (bytes): a disk read walks
	// at most this many bytes of headers before reaching its first seq.
	indexEvery = 1 << 20
)

// segment describes one segment file. Fields are guarded by WAL.mu once the WAL is open.
// Invariant: the segment holds exactly seqs [base, next) in bytes [0, size), every byte of
// which is durable.
type segment struct {
	base  uint64
	next  uint64
	size  int64
	index []indexPoint // ascending; index[0] = {base, 0} once the segment holds a frame
	path  string
}

// indexPoint says that the frame holding seq starts at byte off of its segment.
type indexPoint struct {
	seq uint64
	off int64
}

// noteFrame records, in the sparse index, a frame for seq starting at off.
func (s *segment) noteFrame(seq uint64, off int64) {
	if n := len(s.index); n == 0 || off-s.index[n-1].off >= indexEvery {
		s.index = append(s.index, indexPoint{seq: seq, off: off})
	}
}

// seek returns the last index point at or below seq ({base, 0} when the index is empty).
func (s *segment) seek(seq uint64) indexPoint {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].seq > seq })
	if i == 0 {
		return indexPoint{seq: s.base, off: 0}
	}
	return s.index[i-1]
}

func segmentName(base uint64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName returns the base seq of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return base, true
}

// listSegments returns the segment files of dir ordered by base.
func listSegments(dir string) ([]*segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for _, e := range entries {
		if e.IsDir() || durable.IsTemp(e.Name()) {
			continue
		}
		base, ok := parseSegmentName(e.Name())
		if !ok {
			continue
		}
		segs = append(segs, &segment{base: base, next: base, path: filepath.Join(dir, e.Name())})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	return segs, nil
}

// scanResult is what scanSegment learned about one segment's bytes.
type scanResult struct {
	next    uint64       // one past the last valid frame's seq
	validTo int64        // end of the last valid frame
	index   []indexPoint // sparse index of the valid frames
	// damage is nil when every byte is a valid frame. Otherwise it describes the first bad
	// position; laterValid says whether a structurally valid frame starts after it (so the
	// damage is not a torn tail).
	damage     error
	laterValid bool
}

// scanSegment walks data as a segment with the given base: frames must be valid (magic, length,
// CRC) and carry dense seqs starting at base. It stops at the first bad position and then looks
// for any later valid frame, which distinguishes a torn tail from mid-file damage.
func scanSegment(data []byte, base uint64, maxRecord int) scanResult {
	seg := segment{base: base, next: base}
	off := 0
	for off < len(data) {
		seq, _, n, err := decodeFrame(data[off:], maxRecord)
		complete := err == nil
		if complete && seq != seg.next {
			err = fmt.Errorf("%w: seq %d where %d expected", ErrCorruptFrame, seq, seg.next)
		}
		if err != nil {
			// A complete, CRC-valid frame with the wrong seq is never a torn write: damage.
			return scanResult{
				next: seg.next, validTo: int64(off), index: seg.index,
				damage:     fmt.Errorf("offset %d: %w", off, err),
				laterValid: complete || validFrameAfter(data, off+1, maxRecord),
			}
		}
		seg.noteFrame(seq, int64(off))
		seg.next++
		off += n
	}
	return scanResult{next: seg.next, validTo: int64(off), index: seg.index}
}

// validFrameAfter reports whether a CRC-valid frame starts anywhere in data at or after from.
func validFrameAfter(data []byte, from int, maxRecord int) bool {
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], frameMagic)
	for from < len(data) {
		i := bytes.Index(data[from:], magic[:])
		if i < 0 {
			return false
		}
		pos := from + i
		if _, _, _, err := decodeFrame(data[pos:], maxRecord); err == nil {
			return true
		}
		from = pos + 1
	}
	return false
}
