package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

const (
	// readChunk is how much of a segment one disk read fetches.
	readChunk = 1 << 20
	// tailReadStep bounds the entries copied from the tail per hold of WAL.mu, so a large read
	// never stalls Append for long.
	tailReadStep = 4096
)

// ReadFrom returns up to max entries starting at seq, in seq order and contiguous. It returns
// fewer only when it reaches NextSeq(). Entries come from the in-memory tail when it covers
// them and from the segments otherwise (after a restart, or beyond the tail's memory bound).
// Payloads may share memory with the WAL: treat them as read-only. seq below Checkpoint() is
// ErrBelowCheckpoint.
func (w *WAL) ReadFrom(seq uint64, max int) ([]Entry, error) {
	return w.ReadInto(nil, seq, max)
}

// ReadInto is ReadFrom appending to dst, so a caller can reuse one slice across reads.
func (w *WAL) ReadInto(dst []Entry, seq uint64, max int) ([]Entry, error) {
	for max > 0 {
		w.mu.Lock()
		if seq < w.checkpoint {
			cp := w.checkpoint
			w.mu.Unlock()
			return dst, fmt.Errorf("%w: %d < %d", ErrBelowCheckpoint, seq, cp)
		}
		next := w.durableNext
		if seq >= next {
			w.mu.Unlock()
			return dst, nil
		}
		lo, hi := w.tail.bounds()
		if seq >= lo && seq < hi {
			n := len(dst)
			dst = w.tail.read(dst, seq, min(max, tailReadStep))
			w.mu.Unlock()
			got := len(dst) - n
			seq += uint64(got)
			max -= got
			continue
		}
		limit := next
		if lo > seq && lo < limit {
			limit = lo // the tail takes over from lo
		}
		i := sort.Search(len(w.segs), func(i int) bool { return w.segs[i].base > seq }) - 1
		if i < 0 || seq >= w.segs[i].next {
			w.mu.Unlock()
			return dst, fmt.Errorf("%w: seq %d is in no segment", ErrDamaged, seq)
		}
		seg := w.segs[i]
		path, size, from := seg.path, seg.size, seg.seek(seq)
		limit = min(limit, seg.next)
		w.mu.Unlock()

		want := int(min(uint64(max), limit-seq))
		n := len(dst)
		var err error
		dst, err = readSegment(dst, path, size, from, seq, want, w.opts.MaxRecordBytes)
		if err != nil {
			return dst, err
		}
		got := len(dst) - n
		seq += uint64(got)
		max -= got
	}
	return dst, nil
}

// readSegment appends want entries starting at seq from the segment file at path, whose first
// size bytes are durable frames; from is an index point at or below seq. Payloads alias freshly
// allocated read buffers, never reused.
func readSegment(dst []Entry, path string, size int64, from indexPoint, seq uint64, want int, maxRecord int) ([]Entry, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return dst, fmt.Errorf("%w: segment %s compacted", ErrBelowCheckpoint, name)
	}
	if err != nil {
		return dst, fmt.Errorf("wal: read %s: %w", name, err)
	}
	defer f.Close()

	var (
		buf    []byte // bytes of the file starting at bufOff
		bufOff int64
		off    = from.off
		cur    = from.seq
		in     internStrings
	)
	for want > 0 {
		if off >= size {
			return dst, fmt.Errorf("%w: segment %s ends at seq %d, want %d", ErrDamaged, name, cur, seq)
		}
		// Make sure the whole frame at off is in buf; refill with a fresh buffer otherwise.
		rel := off - bufOff
		need := int64(frameHeaderSize)
		if rel >= 0 && rel+frameHeaderSize <= int64(len(buf)) {
			need = frameHeaderSize + int64(beUint32(buf[rel+4:]))
		}
		if rel < 0 || rel+need > int64(len(buf)) {
			if need > size-off {
				return dst, fmt.Errorf("%w: segment %s offset %d: frame runs past the durable end %d",
					ErrDamaged, name, off, size)
			}
			buf = make([]byte, min(max(readChunk, need), size-off))
			if _, err := f.ReadAt(buf, off); err != nil {
				return dst, fmt.Errorf("wal: read %s at %d: %w", name, off, err)
			}
			bufOff = off
			continue
		}
		fseq, payload, n, err := decodeFrame(buf[rel:], maxRecord)
		if err == nil && fseq != cur {
			err = fmt.Errorf("%w: seq %d where %d expected", ErrCorruptFrame, fseq, cur)
		}
		if err != nil {
			return dst, fmt.Errorf("%w: segment %s offset %d: %w", ErrDamaged, name, off, err)
		}
		if cur >= seq {
			rec, err := in.decode(payload)
			if err != nil {
				return dst, fmt.Errorf("%w: segment %s seq %d: %w", ErrDamaged, name, cur, err)
			}
			dst = append(dst, Entry{Seq: cur, Record: rec})
			want--
		}
		cur++
		off += int64(n)
	}
	return dst, nil
}

// internStrings decodes records, reusing the previous record's topic and incarnation strings
// when they repeat (they almost always do), so a disk read allocates little per record.
type internStrings struct {
	topic, incarnation string
}

func (in *internStrings) decode(payload []byte) (Record, error) {
	r, err := decodeRecordFields(payload)
	if err != nil {
		return Record{}, err
	}
	rec := Record{
		Key: string(r.key), Partition: r.partition, AcceptedAtMs: r.acceptedAtMs, Payload: r.payload,
	}
	if string(r.topic) != in.topic {
		in.topic = string(r.topic)
	}
	if string(r.incarnation) != in.incarnation {
		in.incarnation = string(r.incarnation)
	}
	rec.Topic, rec.Incarnation = in.topic, in.incarnation
	return rec, nil
}
