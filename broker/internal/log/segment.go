package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// SegmentFileName returns the file name of the segment whose first record may be base
// (`%020d.log`, docs/internals/storage-format.md §2).
func SegmentFileName(base int64) string { return fmt.Sprintf("%020d.log", base) }

// ParseSegmentFileName returns the base offset of a segment file name, or ok=false if name
// does not match `^\d{20}\.log$` exactly (every other name is skipped by scanners).
func ParseSegmentFileName(name string) (base int64, ok bool) {
	if len(name) != 24 || name[20:] != ".log" {
		return 0, false
	}
	for i := 0; i < 20; i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// segFileInfo is one segment file found by a directory listing.
type segFileInfo struct {
	base  int64
	path  string
	size  int64
	mtime time.Time
}

// listSegments lists dir's segment files sorted by base, with size and mtime. Names that do
// not match the exact pattern (temps, quarantine, side files) are skipped.
func listSegments(dir string) ([]segFileInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []segFileInfo
	for _, e := range ents {
		base, ok := ParseSegmentFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, segFileInfo{base: base, path: filepath.Join(dir, e.Name()), size: fi.Size(), mtime: fi.ModTime()})
	}
	slices.SortFunc(out, func(a, b segFileInfo) int { return cmpInt64(a.base, b.base) })
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// segment is one segment file of an open log. base, path, f and resyncs are immutable while
// the segment is in the log; size only grows, and only the write-lock holder changes it (the
// failed-commit truncate never lowers it below a published value). idx and idxUse are guarded
// by Log.cmu.
type segment struct {
	base int64
	path string
	f    *os.File
	size atomic.Int64
	// resyncs are the positions of the first valid frame after each damaged region found by
	// recovery; walks jump to them and never step over one.
	resyncs []anchor
	idx     *sparseIndex
	idxUse  uint64
}

// nextResync returns the first resync point strictly after pos.
func (s *segment) nextResync(pos int64) (anchor, bool) {
	i, _ := slices.BinarySearchFunc(s.resyncs, pos+1, func(a anchor, p int64) int { return cmpInt64(a.pos, p) })
	if i < len(s.resyncs) {
		return s.resyncs[i], true
	}
	return anchor{}, false
}
