package log

import (
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
)

// segScan is what recovery learned about one segment.
type segScan struct {
	frames  int
	end     int64 // offset after the highest-ending valid frame; -1 when none
	resyncs []anchor
	// tailAt is the byte position where damage with no valid frame after it begins (the end
	// of the last valid frame); -1 when the segment ends cleanly.
	tailAt int64
}

// scanSegment walks seg's frames with a header + CRC check over raw bytes (no decode),
// resyncing past mid-file damage. idx, if non-nil, receives an anchor per stride.
func scanSegment(seg *segment, size int64, idx *sparseIndex) (segScan, error) {
	sc := segScan{end: -1, tailAt: -1}
	w := newWindowReader(seg.f, size)
	for pos := int64(0); pos < size; {
		h, err := verifyFrameAt(w, pos)
		if err == nil {
			sc.frames++
			sc.end = max(sc.end, h.end())
			if idx != nil {
				idx.observe(pos, h.base, len(sc.resyncs) > 0 && sc.resyncs[len(sc.resyncs)-1].pos == pos)
			}
			pos += h.size()
			continue
		}
		if !isFrameDamage(err) {
			return sc, fmt.Errorf("log: read %s at %d: %w", seg.path, pos, err)
		}
		next, nh, ok, rerr := resync(seg.f, w, size, pos+1)
		if rerr != nil {
			return sc, fmt.Errorf("log: resync %s at %d: %w", seg.path, pos, rerr)
		}
		if !ok {
			sc.tailAt = pos
			break
		}
		sc.resyncs = append(sc.resyncs, anchor{base: nh.base, pos: next})
		pos = next
	}
	return sc, nil
}

// recover rebuilds the in-memory state from the directory (docs/internals/storage-format.md §9 steps 2–5).
// persisted is the content of the hwm file.
func (l *Log) recover(persisted hwmState) error {
	infos, err := listSegments(l.dir)
	if err != nil {
		return fmt.Errorf("log: list %s: %w", l.dir, err)
	}
	if len(infos) == 0 {
		path := filepath.Join(l.dir, SegmentFileName(0))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("log: create %s: %w", path, err)
		}
		f.Close()
		if err := durable.SyncDir(l.dir); err != nil {
			return err
		}
		infos = []segFileInfo{{base: 0, path: path}}
	}
	next := int64(0)
	for i, in := range infos {
		active := i == len(infos)-1
		f, err := openSegmentFile(in.path, active)
		if err != nil {
			return fmt.Errorf("log: open %s: %w", in.path, err)
		}
		seg := &segment{base: in.base, path: in.path, f: f}
		l.segs = append(l.segs, seg)
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("log: stat %s: %w", in.path, err)
		}
		size := fi.Size()
		var idx *sparseIndex
		if active {
			idx = newSparseIndex(l.opts.SegmentBytes)
		}
		sc, err := scanSegment(seg, size, idx)
		if err != nil {
			return err
		}
		seg.resyncs = sc.resyncs
		for _, r := range sc.resyncs {
			l.logger.Error("log segment damaged: frames skipped, their offsets read as corrupt",
				"segment", seg.path, "resync_pos", r.pos, "resync_offset", r.base)
		}
		if sc.tailAt >= 0 {
			if active {
				l.logger.Warn("log torn tail truncated", "segment", seg.path, "pos", sc.tailAt, "size", size)
				if err := f.Truncate(sc.tailAt); err != nil {
					return fmt.Errorf("log: truncate torn tail of %s: %w", seg.path, err)
				}
				if err := durable.Fdatasync(f); err != nil {
					return fmt.Errorf("log: fsync %s: %w", seg.path, err)
				}
				size = sc.tailAt
			} else {
				l.logger.Error("log sealed segment has a damaged tail; left untouched",
					"segment", seg.path, "pos", sc.tailAt, "size", size)
			}
		}
		seg.size.Store(size)
		seg.idx = idx
		next = max(next, sc.end)
		if active {
			next = max(next, seg.base)
		}
	}
	hwm := next
	if persisted.present {
		hwm = min(max(persisted.hwm, 0), next)
		if persisted.hwm > next {
			l.logger.Error("log hwm file is past the recovered tail; clamped",
				"hwm_file", persisted.hwm, "next_offset", next)
		}
	}
	// seed: persist before the first commit, so a later crash never leaves a stale CLEAN=1.
	if err := l.hwmf.persist(hwm, false); err != nil {
		return fmt.Errorf("log: persist recovered hwm: %w", err)
	}
	l.next = next
	l.nextA.Store(next)
	l.hwm.Store(hwm)
	l.oldest.Store(l.segs[0].base)
	b, err := l.computeBoundary(hwm)
	if err != nil {
		return err
	}
	l.bound.Store(&b)
	if hwm < next {
		l.logger.Info("log hidden tail kept hidden", "hwm", hwm, "next_offset", next)
	}
	l.logger.Debug("log opened", "segments", len(l.segs), "hwm", hwm, "next_offset", next)
	return nil
}
