package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/transfer"
)

// Cursor sidecar reads (docs/internals/moves.md §4.1, docs/internals/storage-format.md §13): a file failing its CRC is read
// again up to cursorRereads more times, cursorRereadGap apart (a reader can catch the owner's
// in-place write half done), then left out of the listing: never shipped unverified.
const (
	cursorRereads   = 3
	cursorRereadGap = time.Millisecond
	cursorMaxBytes  = 64 << 10 // a larger cursor file is corrupt
)

// cursorReread, when set (tests), runs before each re-read of a cursor file that failed its
// check; attempt counts from 1.
var cursorReread func(path string, attempt int)

// TransferListing is the source's transfer listing of (topic, p) (node RPC op 22,
// docs/internals/moves.md §4.1), served only by the owner. Read order (§4.1 rule 1): consumer frontier
// and acked-ahead (the shard's in-memory state when a shard exists, else the consumer files),
// then the fan-out cursor files, then the HWM, then the segments, so no position in the
// listing is ahead of the bytes it lets the destination copy. Segments stop at the committed
// boundary (docs/internals/storage-format.md §8). A closed partition with a CLEAN hwm file is listed without being
// opened; any other closed partition is opened (recovered) first, so the HWM reported is the
// recovered boundary. Errors as PrepareHandoff's.
//
// HasCommitted reports whether the partition has consumer state to install: a consume shard
// is open or a consumer file (consumer.offset or consumer.journal) exists. Without it
// CommittedOffset is -1 and nothing was ever acked.
func (src *Source) TransferListing(ctx context.Context, topic string, p int) (transfer.Listing, error) {
	t, err := src.transferTopic(topic, p)
	if err != nil {
		return transfer.Listing{}, err
	}
	if err := ctx.Err(); err != nil {
		return transfer.Listing{}, unavailable(err)
	}
	if pt := src.parts.Peek(topic, p); pt != nil && pt.Incarnation() == t.Incarnation {
		return src.openListing(t, pt)
	}
	l, listed, err := src.closedListing(t, p)
	if err != nil || listed {
		return l, err
	}
	pt, err := src.parts.Get(t, p) // not exact: recovery decides the boundary
	if err != nil {
		return transfer.Listing{}, transferErr(err)
	}
	return src.openListing(t, pt)
}

// closedListing lists a closed partition from its files under the topic's open guard.
// listed=false: the partition is open now, or its HWM is not exact; the caller opens it.
func (src *Source) closedListing(t meta.Topic, p int) (transfer.Listing, bool, error) {
	g := src.parts.Guard(t.Name)
	g.RLock()
	defer g.RUnlock()
	if src.parts.Peek(t.Name, p) != nil {
		return transfer.Listing{}, false, nil
	}
	dir := src.parts.PartitionDir(t.Name, p)
	l, err := src.positions(dir, nil)
	if err != nil {
		return transfer.Listing{}, false, err
	}
	hwm, segs, exact, err := src.parts.ListClosed(dir)
	if err != nil {
		return transfer.Listing{}, false, unavailable(err)
	}
	if !exact {
		return transfer.Listing{}, false, nil
	}
	l.HighWatermark = hwm
	l.OldestOffset = hwm
	if len(segs) > 0 {
		l.OldestOffset = segs[0].Base
	}
	if err := src.finishListing(&l, t, dir, segs); err != nil {
		return transfer.Listing{}, false, err
	}
	return l, true, nil
}

// openListing lists an open partition (the body PrepareHandoff runs under the produce lock).
func (src *Source) openListing(t meta.Topic, pt *partition.Partition) (transfer.Listing, error) {
	s := pt.Shard()
	l, err := src.positions(pt.Dir(), s)
	if err != nil {
		return transfer.Listing{}, err
	}
	hwm, segs, err := pt.Log().CommittedListing()
	if err != nil {
		return transfer.Listing{}, unavailable(err)
	}
	l.HighWatermark = hwm
	l.OldestOffset = pt.Log().OldestOffset()
	if len(segs) > 0 {
		l.OldestOffset = segs[0].Base
	}
	if err := src.finishListing(&l, t, pt.Dir(), segs); err != nil {
		return transfer.Listing{}, err
	}
	// Read after the segments, which are below the HWM: entries only change at or above it
	// (a new epoch starts at the LEO, a truncation cuts the hidden tail), so every entry in
	// force over the listed bytes is already here.
	if e := pt.Epochs(); e != nil {
		for _, en := range e.Entries() {
			l.Epochs = append(l.Epochs, transfer.EpochEntry{Epoch: en.Epoch, Start: en.Start})
		}
	}
	return l, nil
}

// positions reads the consumer frontier (from s when set, else from the files in dir) and
// then the verified cursor files: the first two steps of the read order.
func (src *Source) positions(dir string, s *consume.Shard) (transfer.Listing, error) {
	var l transfer.Listing
	if s != nil {
		c := s.Frontier()
		l.CommittedOffset, l.AckedAhead, l.HasCommitted = c.Frontier, c.AckedAhead, true
	} else {
		c, has, err := ReadConsumerFiles(dir)
		if err != nil {
			return l, unavailable(err)
		}
		l.CommittedOffset, l.AckedAhead, l.HasCommitted = c.Frontier, c.AckedAhead, has
	}
	cursors, err := src.readCursors(dir)
	if err != nil {
		return l, unavailable(err)
	}
	l.Cursors = cursors
	return l, nil
}

// finishListing adds the segments (read after the HWM), the marker, the incarnation and the
// listing clock.
func (src *Source) finishListing(l *transfer.Listing, t meta.Topic, dir string, segs []plog.SegmentInfo) error {
	l.Segments = make([]transfer.Segment, len(segs))
	for i, s := range segs {
		l.Segments[i] = transfer.Segment{Base: s.Base, Size: s.Size, Sealed: s.Sealed}
		if !s.Mtime.IsZero() {
			l.Segments[i].MtimeMs = s.Mtime.UnixMilli()
		}
	}
	// The file clock, not the engine's (tests step that one): the destination subtracts the
	// two to carry segment ages across (docs/internals/moves.md §6).
	l.ListedAtMs = time.Now().UnixMilli()
	marker, err := transfer.ReadMarkerRaw(dir)
	switch {
	case errors.Is(err, transfer.ErrBadMarker):
		src.log.Error("move marker unreadable; not listed", "topic", t.Name, "dir", dir, "err", err)
	case err != nil:
		return unavailable(err)
	default:
		l.Marker = marker
	}
	l.Incarnation = t.Incarnation
	return nil
}

// ReadConsumerFiles recovers the committed position from dir's consumer files the way a
// shard would at first touch (docs/internals/storage-format.md §14.3): max(checkpoint, journal), acked-ahead
// above it. has reports whether either file exists. An undecodable checkpoint counts as
// absent (the journal still counts), as in recovery: a lower frontier costs redeliveries only.
func ReadConsumerFiles(dir string) (c consume.Checkpoint, has bool, err error) {
	c.Frontier = -1
	var ahead []int64
	b, err := os.ReadFile(filepath.Join(dir, consume.CheckpointFile))
	switch {
	case err == nil:
		has = true
		if ck, derr := consume.DecodeCheckpoint(b); derr == nil {
			c.Frontier, ahead = ck.Frontier, ck.AckedAhead
		}
	case !errors.Is(err, os.ErrNotExist):
		return c, false, fmt.Errorf("read consumer checkpoint: %w", err)
	}
	jb, err := os.ReadFile(filepath.Join(dir, consume.JournalFile))
	switch {
	case err == nil:
		has = true
		if r, ok := consume.DecodeJournal(jb); ok {
			c.Frontier = max(c.Frontier, r.Frontier)
		}
	case !errors.Is(err, os.ErrNotExist):
		return c, false, fmt.Errorf("read consumer journal: %w", err)
	}
	for _, o := range ahead {
		if o > c.Frontier {
			c.AckedAhead = append(c.AckedAhead, o)
		}
	}
	return c, has, nil
}

// readCursors returns every fan-out cursor file of dir that passes its check, sorted by child,
// each as a version 1 record (the listing names the child beside it; every release reads that
// form). A legacy-named file whose child also has a current file (an interrupted migration)
// is not shipped: the current file is the position.
func (src *Source) readCursors(dir string) ([]transfer.Cursor, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out, legacy []transfer.Cursor
	for _, ent := range ents {
		fromName, current, ok := cursorfile.ParseName(ent.Name())
		if !ok || !ent.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, ent.Name())
		rec, ok, err := readVerifiedCursor(path)
		if err != nil {
			return nil, err
		}
		var st cursorfile.State
		if ok {
			st, _ = cursorfile.Parse(rec)
			if current && (st.Child == "" || cursorfile.FileName(st.Child) != ent.Name()) {
				ok = false
			}
		}
		if ok {
			rec, err = cursorfile.EncodeV1(st.Epoch, st.NextOffset)
			ok = err == nil
		}
		if !ok {
			src.log.Warn("fan-out cursor file failed its check on every read; not shipped with the move", "path", path)
			continue
		}
		if current {
			out = append(out, transfer.Cursor{Child: st.Child, Record: rec})
		} else {
			legacy = append(legacy, transfer.Cursor{Child: fromName, Record: rec})
		}
	}
	for _, c := range legacy {
		if !slices.ContainsFunc(out, func(o transfer.Cursor) bool { return o.Child == c.Child }) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b transfer.Cursor) int {
		switch {
		case a.Child < b.Child:
			return -1
		case a.Child > b.Child:
			return 1
		}
		return 0
	})
	return out, nil
}

// readVerifiedCursor reads a cursor file until its bytes parse (CRC included), at most
// 1 + cursorRereads times. ok=false: it never verified, or it vanished (a detach removed it).
func readVerifiedCursor(path string) (rec []byte, ok bool, err error) {
	for attempt := 0; ; attempt++ {
		b, err := readCapped(path, cursorMaxBytes)
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read cursor file: %w", err)
		}
		if b != nil {
			if _, perr := cursorfile.Parse(b); perr == nil {
				return b, true, nil
			}
		}
		if attempt >= cursorRereads {
			return nil, false, nil
		}
		if cursorReread != nil {
			cursorReread(path, attempt+1)
		}
		time.Sleep(cursorRereadGap)
	}
}

// readCapped reads the whole file at path, or returns nil bytes (no error) when it is larger
// than limit.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, nil
	}
	return b, nil
}

// FetchSegmentChunk reads up to n (capped at transfer.ChunkBytes) committed bytes of segment
// base of (topic, p) from byte position at (node RPC op 23, docs/internals/moves.md §4.2), on the owner
// only, into a new slice; nil when there is nothing to read. See ReadSegmentChunk.
func (src *Source) FetchSegmentChunk(ctx context.Context, topic string, p int, base, at int64, n int) ([]byte, error) {
	buf := make([]byte, max(0, min(n, transfer.ChunkBytes)))
	k, err := src.ReadSegmentChunk(ctx, topic, p, base, at, buf)
	if err != nil || k == 0 {
		return nil, err
	}
	return buf[:k], nil
}

// ReadSegmentChunk reads up to len(buf) (capped at transfer.ChunkBytes) committed bytes of
// segment base of (topic, p) from byte position at into buf and returns how many it read (op 23
// and its stream, docs/internals/moves.md §4.2), on the owner only. It never reads bytes at or past the
// committed boundary; a short or empty read is normal at the end. An open log is read through
// plog.Log.ReadCommitted; a closed one from its file, clamped to the boundary plog.ListClosed
// computes (a closed log whose HWM is not exact is opened first). A segment the partition does
// not hold (retention deleted it since the listing) wraps plog.ErrNoSegment and
// errcode.ErrUnavailable: the destination re-lists. Other errors as PrepareHandoff's.
func (src *Source) ReadSegmentChunk(ctx context.Context, topic string, p int, base, at int64, buf []byte) (int, error) {
	t, err := src.transferTopic(topic, p)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, unavailable(err)
	}
	if at < 0 {
		return 0, fmt.Errorf("position %d: %w", at, errcode.ErrInvalid)
	}
	buf = buf[:min(len(buf), transfer.ChunkBytes)]
	if len(buf) == 0 {
		return 0, nil
	}
	for range 2 { // a log closed under the read is read again, from its file or reopened
		if pt := src.parts.Peek(topic, p); pt != nil && pt.Incarnation() == t.Incarnation {
			k, err := readOpen(pt, base, at, buf)
			if errors.Is(err, plog.ErrClosed) {
				continue
			}
			return k, err
		}
		k, read, err := src.readClosed(t, p, base, at, buf)
		if err != nil || read {
			return k, err
		}
		pt, err := src.parts.Get(t, p)
		if err != nil {
			return 0, transferErr(err)
		}
		k, err = readOpen(pt, base, at, buf)
		if !errors.Is(err, plog.ErrClosed) {
			return k, err
		}
	}
	return 0, unavailable(fmt.Errorf("%s/%d closed during the read", topic, p))
}

// readOpen reads through the open log.
func readOpen(pt *partition.Partition, base, at int64, buf []byte) (int, error) {
	k, err := pt.Log().ReadCommitted(base, at, buf)
	if errors.Is(err, plog.ErrClosed) {
		return 0, err
	}
	if err != nil {
		return 0, unavailable(err)
	}
	return k, nil
}

// readClosed reads a closed partition's segment file under the topic's open guard, clamped to
// the committed boundary. read=false: the log is open now or its HWM is not exact.
func (src *Source) readClosed(t meta.Topic, p int, base, at int64, buf []byte) (int, bool, error) {
	g := src.parts.Guard(t.Name)
	g.RLock()
	defer g.RUnlock()
	if src.parts.Peek(t.Name, p) != nil {
		return 0, false, nil
	}
	dir := src.parts.PartitionDir(t.Name, p)
	_, segs, exact, err := src.parts.ListClosed(dir)
	if err != nil {
		return 0, false, unavailable(err)
	}
	if !exact {
		return 0, false, nil
	}
	seg, ok := plog.FindSegment(segs, base)
	if !ok {
		path := filepath.Join(dir, plog.SegmentFileName(base))
		if _, err := os.Stat(path); err == nil && len(segs) > 0 && base > segs[len(segs)-1].Base {
			return 0, true, nil // past the boundary segment: only hidden-tail records
		}
		return 0, false, unavailable(fmt.Errorf("segment %d of %s/%d: %w", base, t.Name, p, plog.ErrNoSegment))
	}
	if at >= seg.Size {
		return 0, true, nil
	}
	f, err := os.Open(filepath.Join(dir, plog.SegmentFileName(base)))
	if err != nil {
		return 0, false, unavailable(err)
	}
	defer f.Close()
	buf = buf[:min(int64(len(buf)), seg.Size-at)]
	k, err := f.ReadAt(buf, at)
	if k < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, false, unavailable(fmt.Errorf("read segment %d of %s/%d at %d: %w", base, t.Name, p, at, err))
	}
	return k, true, nil
}

// transferTopic checks that the topic and partition exist in the local replica and that this
// node owns the partition.
func (src *Source) transferTopic(topic string, p int) (meta.Topic, error) {
	t, ok := src.topic(topic)
	if !ok || p < 0 || p >= t.Partitions {
		return meta.Topic{}, fmt.Errorf("%s/%d: %w: %w", topic, p, errcode.ErrTopicGone, errcode.ErrNotFound)
	}
	if !src.owns(topic, p) {
		return meta.Topic{}, notOwner(topic, p)
	}
	return t, nil
}

func notOwner(topic string, p int) error {
	return fmt.Errorf("%s/%d: %w", topic, p, errcode.ErrNotOwner)
}

// unavailable wraps err as a 503 (ErrUnavailable, which transfer.ErrUnavailable aliases).
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", errcode.ErrUnavailable, err)
}

// transferErr maps an error of opening a partition to the sentinels the transfer plane reads.
func transferErr(err error) error {
	switch {
	case errors.Is(err, errcode.ErrNotOwner):
		return err
	case errors.Is(err, errcode.ErrTopicGone):
		return fmt.Errorf("%w: %w", err, errcode.ErrNotFound)
	}
	return unavailable(err)
}
