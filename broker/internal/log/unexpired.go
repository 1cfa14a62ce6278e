package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Unexpired describes the record bytes of a CLOSED partition directory that retention has
// not expired (docs/internals/storage-format.md §10: a segment is expired when retention_ms > 0 and its mtime is
// older than now − retention_ms; retention 0 keeps everything). It is read from the
// directory listing and frame headers only: nothing is opened as a log, recovered or
// written, so a copy judged by it can be set aside exactly as it was found
// (docs/internals/moves.md §9.3: quarantine without recovering).
type Unexpired struct {
	Segments int   // segments holding unexpired record bytes
	Bytes    int64 // their total size
	// FirstOffset and EndOffset bound the offsets those segments may hold: the base of the
	// oldest one, and the end of the newest one (its successor's base, or for the last
	// segment the end of the last frame header a walk reaches). Both 0 when Segments is 0.
	FirstOffset int64
	EndOffset   int64
}

// Any reports whether the directory holds any record bytes retention has not expired.
func (u Unexpired) Any() bool { return u.Segments > 0 }

// Records is EndOffset − FirstOffset: an upper bound on the unexpired records (gaps left by
// damaged frames and a hidden tail past the HWM count too). For log lines, not for
// positions.
func (u Unexpired) Records() int64 { return u.EndOffset - u.FirstOffset }

// UnexpiredRecords reports which record bytes of the closed partition directory dir are not
// yet expired at now under retentionMs. A segment of size 0 holds no records. The caller
// keeps the log closed (the topic's open guard) for the duration.
func UnexpiredRecords(dir string, retentionMs int64, now time.Time) (Unexpired, error) {
	var u Unexpired
	segs, err := listSegments(dir)
	if err != nil {
		return u, fmt.Errorf("log: unexpired records %s: %w", dir, err)
	}
	for i, s := range segs {
		if s.size == 0 || (retentionMs > 0 && expired(s.mtime, retentionMs, now)) {
			continue
		}
		if u.Segments == 0 {
			u.FirstOffset = s.base
		}
		u.Segments++
		u.Bytes += s.size
		if i+1 < len(segs) {
			u.EndOffset = segs[i+1].base
			continue
		}
		end, err := segmentEnd(s.path, s.size)
		if err != nil {
			return u, err
		}
		u.EndOffset = max(s.base, end)
	}
	return u, nil
}

// segmentEnd walks the frame headers of the segment file at path (no CRC, no decode) and
// returns the end offset of the last frame it reaches, stopping at the first header that
// does not parse or runs past size; -1 when there is none.
func segmentEnd(path string, size int64) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil // removed since the listing (retention)
	}
	if err != nil {
		return -1, fmt.Errorf("log: open %s: %w", path, err)
	}
	defer f.Close()
	end, err := walkEnd(f, size)
	if err != nil {
		return -1, fmt.Errorf("log: read %s: %w", path, err)
	}
	return end, nil
}

// walkEnd is segmentEnd over any reader of size bytes.
func walkEnd(r io.ReaderAt, size int64) (int64, error) {
	w := newWindowReader(r, size)
	end := int64(-1)
	for pos := int64(0); pos < size; {
		hb, err := w.at(pos, frameHeaderSize)
		var h frameHeader
		if err == nil {
			h, err = parseFrameHeader(hb)
		}
		if err == nil && pos+h.size() > size {
			err = errShort
		}
		if err != nil {
			if isFrameDamage(err) {
				return end, nil
			}
			return end, err
		}
		end = max(end, h.end())
		pos += h.size()
	}
	return end, nil
}
