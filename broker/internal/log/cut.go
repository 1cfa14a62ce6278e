package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
)

// This file holds the two helpers a move destination needs to finish a staged copy of a
// CLOSED log directory (docs/internals/moves.md §5.4): writing the exact high watermark the copy must
// reproduce, and cutting a copy that recovers past it back to it. Neither may run while the
// directory is open as a Log.

// WriteHWMFile replaces dir's hwm file with (hwm, clean) in the format of docs/internals/storage-format.md §7.2,
// atomically and durably (temp, fsync, rename, directory fsync). It returns
// durable.ErrDirMissing, creating nothing, when dir does not exist.
func WriteHWMFile(dir string, hwm int64, clean bool) error {
	if hwm < 0 {
		return fmt.Errorf("log: write hwm file: negative hwm %d", hwm)
	}
	b := encodeHWM(hwm, clean)
	if err := durable.WriteFileAtomic(filepath.Join(dir, HWMFileName), b[:]); err != nil {
		return fmt.Errorf("log: write hwm file: %w", err)
	}
	return nil
}

// CutTail cuts the closed log in dir back to hwm (docs/internals/storage-format.md §8): the boundary segment (the
// last whose base ≤ hwm) is truncated at its first valid frame whose base ≥ hwm, and every
// later segment is removed, so the directory recovers to next_offset ≤ hwm. Frames below hwm
// are never touched, and a damaged region is never stepped over without a CRC-valid frame
// after it. cut reports whether anything changed; changes are fsynced (file, then directory).
//
// Only a copy staged from a source that lists whole file sizes (an older release) can need
// it: a current source never lists bytes at or past its committed boundary.
func CutTail(dir string, hwm int64) (cut bool, err error) {
	if hwm < 0 {
		return false, fmt.Errorf("log: cut tail: negative hwm %d", hwm)
	}
	segs, err := listSegments(dir)
	if err != nil {
		return false, fmt.Errorf("log: cut tail %s: %w", dir, err)
	}
	b := -1 // index of the boundary segment
	for i, s := range segs {
		if s.base <= hwm {
			b = i
		}
	}
	if b < 0 {
		if len(segs) == 0 {
			return false, nil
		}
		return false, fmt.Errorf("log: cut tail %s: no segment at or below offset %d", dir, hwm)
	}
	pos, found, err := firstFrameAtOrAbove(segs[b], hwm)
	if err != nil {
		return false, err
	}
	if found {
		if err := truncateSynced(segs[b].path, pos); err != nil {
			return false, err
		}
		cut = true
	}
	removed := false
	for _, s := range segs[b+1:] {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return cut, fmt.Errorf("log: cut tail: %w", err)
		}
		removed = true
	}
	if removed {
		cut = true
		if err := durable.SyncDir(dir); err != nil {
			return cut, err
		}
	}
	return cut, nil
}

// firstFrameAtOrAbove returns the position of the first CRC-valid frame of the segment file
// whose base offset is ≥ hwm, resyncing past damage like recovery does (docs/internals/storage-format.md §9).
func firstFrameAtOrAbove(in segFileInfo, hwm int64) (pos int64, found bool, err error) {
	f, err := os.Open(in.path)
	if err != nil {
		return 0, false, fmt.Errorf("log: cut tail: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("log: cut tail: %w", err)
	}
	size := fi.Size()
	w := newWindowReader(f, size)
	for p := int64(0); p < size; {
		h, err := verifyFrameAt(w, p)
		if err == nil {
			if h.base >= hwm {
				return p, true, nil
			}
			p += h.size()
			continue
		}
		if !isFrameDamage(err) {
			return 0, false, fmt.Errorf("log: cut tail: read %s at %d: %w", in.path, p, err)
		}
		next, _, ok, rerr := resync(f, w, size, p+1)
		if rerr != nil {
			return 0, false, fmt.Errorf("log: cut tail: resync %s at %d: %w", in.path, p, rerr)
		}
		if !ok {
			return 0, false, nil // a torn tail: recovery of the active segment truncates it
		}
		p = next
	}
	return 0, false, nil
}

// truncateSynced truncates path to size and fsyncs it.
func truncateSynced(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("log: cut tail: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("log: cut tail: truncate %s: %w", path, err)
	}
	if err := durable.Fdatasync(f); err != nil {
		return fmt.Errorf("log: cut tail: fsync %s: %w", path, err)
	}
	return nil
}

// ErrTornCopy reports a closed directory whose active segment ends in bytes that are not a
// whole frame: a copy staged from a current source never does.
var ErrTornCopy = errors.New("log: active segment ends in a partial frame")

// VerifyTail is the move verify's read of a closed log directory (docs/internals/moves.md §5.4): the
// offset the directory would recover to (next) and the high watermark its hwm file holds,
// clamped to next as Open clamps it. Unlike Open it reads only the active (last) segment —
// the verify proves the tail the final drain wrote, not the sealed segments, which the new
// owner recovers the way the source does — and it changes nothing in dir. Without an hwm file
// the HWM is next, as Open has it. A partial frame at the end of the active segment is an
// error.
func VerifyTail(dir string) (next, hwm int64, err error) {
	infos, err := listSegments(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("log: list %s: %w", dir, err)
	}
	st, err := readHWMFile(dir)
	if err != nil {
		return 0, 0, err
	}
	if len(infos) > 0 {
		last := infos[len(infos)-1]
		f, err := os.Open(last.path)
		if err != nil {
			return 0, 0, fmt.Errorf("log: open %s: %w", last.path, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return 0, 0, fmt.Errorf("log: stat %s: %w", last.path, err)
		}
		sc, err := scanSegment(&segment{base: last.base, path: last.path, f: f}, fi.Size(), nil)
		if err != nil {
			return 0, 0, err
		}
		if sc.tailAt >= 0 {
			return 0, 0, fmt.Errorf("%w: %s at %d of %d bytes", ErrTornCopy, last.path, sc.tailAt, fi.Size())
		}
		next = max(sc.end, last.base)
	}
	if !st.present {
		return next, next, nil // as Open: without an hwm file everything recovered is visible
	}
	return next, min(max(st.hwm, 0), next), nil
}
