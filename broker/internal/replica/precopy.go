package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

// Segment pre-copy (docs/internals/replication.md §5). A follower whose log holds nothing at
// its end offset (an empty one after its data directory was lost, or one whose last pre-copy
// install just ended) copies the leader's committed segments before it fetches: the move
// transfer plane's listing (op 22) names them, the segment stream (op 23 streamed) carries
// their bytes, and log.SegmentCopy checks every frame as it passes, writes them through the
// page cache with write-behind (the disk writes each window while the next arrives) and
// installs the segment with one fsync and two directory entries. That is one
// read and one write per segment and no per-answer round trip, where the frame fetch costs a
// round trip, an fsync and a verify re-read per 8 MiB.
//
// The listing names committed bytes only: all of a sealed segment, and of the segment the
// leader is writing the part below its HWM. Every listed byte is therefore on every ISR member
// and never truncated, and the leader-epoch entries that start in it (sent with the listing)
// are final. So the written part of the leader's active segment is copied too, when it holds at
// least activePreCopyMin bytes: it is installed as a segment of its own in the follower's log,
// whose segment boundaries need not match the leader's (each replica rolls its own), and the
// fetch goes on from its end. A smaller part, and anything the follower cannot pre-copy (a log
// with records of its own at the end, a leader of a release without the listing's epochs or the
// stream, a segment retention removed meanwhile), is left to the frame fetch, which is correct
// from any frame boundary.

// SegmentSource is a follower's way to its leader's segments (the move transfer plane
// over node RPC, bound to the leader's address and one partition).
type SegmentSource interface {
	// List returns the leader's transfer listing (op 22).
	List(ctx context.Context) (transfer.Listing, error)
	// Stream streams n bytes of segment base from position at, in chunks of at most chunk
	// bytes (op 23 streamed).
	Stream(ctx context.Context, base, at, n int64, chunk int) (transfer.SegmentStream, error)
}

// SegmentLog is what a pre-copy needs of the follower's log (log.Log has it).
type SegmentLog interface {
	BeginSegmentCopy() (*log.SegmentCopy, error)
	BeginSegmentCopyAfter(prev *log.SegmentCopy) (*log.SegmentCopy, error)
}

// PreCopyResult says what a pre-copy did.
type PreCopyResult struct {
	Segments int   // segments installed
	Bytes    int64 // their bytes
	From, To int64 // the offsets they cover: [From, To)
}

// PreCopy copies the leader's sealed segments that start at the follower's end offset, and
// the committed part of its active segment (see above), in order, each installed once it is whole and durable, and moves the follower's HWM over them.
// It does nothing (a zero result, no error) when the follower cannot pre-copy: see the
// package comment above. An error leaves the log as it was after the last installed segment;
// the caller retries, and the next attempt continues from there.
func (f *Follower) PreCopy(ctx context.Context, src SegmentSource) (PreCopyResult, error) {
	sl, ok := f.Log.(SegmentLog)
	if !ok || src == nil {
		return PreCopyResult{}, nil
	}
	from := f.Log.NextOffset()
	res := PreCopyResult{From: from, To: from}
	if f.Log.HighWatermark() != from {
		return res, nil // records above the HWM: the fetch reconciles them first
	}
	l, err := src.List(ctx)
	if err != nil {
		return res, err
	}
	if len(l.Epochs) == 0 {
		return res, nil
	}
	segs := copyableSegments(l.Segments)
	if len(segs) > 0 && from < segs[0].Base && from == f.oldestOffset() {
		// The leader's log starts past this empty one: begin where it does (as a refused
		// fetch would, below its log start).
		if err := f.startAt(from, segs[0].Base); err != nil {
			return res, err
		}
		from = segs[0].Base
		res.From, res.To = from, from
	}
	if !startsAt(segs, res.To) {
		return res, nil
	}
	if f.PreCopySlots != nil {
		// An empty log waits for a slot: it is out of the ISR (leaveISRIfEmpty, and a leader
		// drops a follower that fetches below its HWM), so nothing waits on it. A log with
		// records may be in the ISR, where a wait would hold the HWM back: without a free slot
		// it leaves the segments to the fetch.
		var wait <-chan struct{} // nil: never ready, so the select below waits
		if from != f.oldestOffset() {
			closed := make(chan struct{})
			close(closed)
			wait = closed
		}
		select {
		case f.PreCopySlots <- struct{}{}:
			defer func() { <-f.PreCopySlots }()
		case <-wait:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	return f.copySegments(ctx, sl, src, l, segs, res)
}

// copySegments streams and installs the segments of segs from res.To on, in order, each
// segment's bytes streaming while the previous one is installed (its fsync and renames cost
// about as much as streaming half a segment).
func (f *Follower) copySegments(ctx context.Context, sl SegmentLog, src SegmentSource, l transfer.Listing,
	segs []transfer.Segment, res PreCopyResult) (PreCopyResult, error) {
	var bufs [][]byte
	var prev *log.SegmentCopy // streamed, being installed by inst
	var inst chan installed
	// settle waits for the running install and counts it; false: stop here.
	settle := func() (bool, error) {
		if inst == nil {
			return true, nil
		}
		r := <-inst
		inst = nil
		if r.err != nil || !r.done {
			return false, r.err
		}
		res.Segments++
		res.Bytes += r.size
		res.To = r.end
		return true, nil
	}
	next := res.To
	for _, s := range segs {
		if s.Base < next {
			continue
		}
		if s.Base > next || ctx.Err() != nil {
			break
		}
		if bufs == nil {
			for range preCopyChunks {
				bufs = append(bufs, durable.AlignedBuffer(transfer.ChunkBytes))
			}
		}
		c, err := f.beginCopy(sl, prev)
		if err != nil || c == nil {
			_, serr := settle()
			return res, errors.Join(err, serr)
		}
		whole, err := streamSegment(ctx, src, s, c, bufs)
		ok, serr := settle()
		if err != nil || serr != nil || !whole || !ok {
			c.Abort()
			return res, errors.Join(err, serr)
		}
		prev, next = c, c.End()
		inst = make(chan installed, 1)
		go func(c *log.SegmentCopy, size int64) {
			end, done, err := f.installCopy(c, l)
			inst <- installed{end: end, done: done, err: err, size: size}
		}(c, s.Size)
	}
	_, err := settle()
	return res, err
}

// installed is the outcome of one segment's install.
type installed struct {
	end  int64
	done bool
	err  error
	size int64
}

// beginCopy starts the copy of the segment at the log's end offset, or after prev when prev
// is being installed. nil (no error): the log cannot take a copy (it holds records at its end).
func (f *Follower) beginCopy(sl SegmentLog, prev *log.SegmentCopy) (*log.SegmentCopy, error) {
	var c *log.SegmentCopy
	var err error
	if prev == nil {
		c, err = sl.BeginSegmentCopy()
	} else {
		c, err = sl.BeginSegmentCopyAfter(prev)
	}
	if errors.Is(err, log.ErrNotEmptyActive) {
		return nil, nil
	}
	return c, err
}

// oldestOffset is the log's first retained offset when it tells it, else -1 (a log that does
// not say is never taken for an empty one).
func (f *Follower) oldestOffset() int64 {
	if o, ok := f.Log.(interface{ OldestOffset() int64 }); ok {
		return o.OldestOffset()
	}
	return -1
}

// startsAt reports whether one of segs starts at off.
func startsAt(segs []transfer.Segment, off int64) bool {
	for _, s := range segs {
		if s.Base == off {
			return true
		}
	}
	return false
}

// activePreCopyMin is the least of the leader's active segment a pre-copy takes: below it the
// frame fetch copies it in one or two answers, and the follower's log keeps no small segment.
// Tests lower it.
var activePreCopyMin int64 = 4 << 20

// copyableSegments returns the listing's sealed segments (a prefix of it), followed by the
// committed part of the active segment when that holds at least activePreCopyMin bytes.
func copyableSegments(segs []transfer.Segment) []transfer.Segment {
	for i, s := range segs {
		if !s.Sealed {
			if s.Size >= activePreCopyMin {
				return segs[:i+1]
			}
			return segs[:i]
		}
	}
	return segs
}

// installCopy installs a streamed copy: epochs first (as a fetch records them before its
// frames), then the segment, then the HWM. done=false (no error): the log took records
// meanwhile and the fetch goes on from them. The copy is aborted unless installed.
func (f *Follower) installCopy(c *log.SegmentCopy, l transfer.Listing) (end int64, done bool, err error) {
	defer c.Abort() // a no-op once installed
	for _, e := range epochsCovering(listedEpochs(l.Epochs), c.Base(), c.End()) {
		if err := f.Epochs.Assign(e.Epoch, max(e.Start, c.Base())); err != nil {
			return 0, false, err
		}
	}
	end, err = c.Install()
	if err != nil {
		// Entries past the log's end cover no record: drop them, so the fetch that goes on
		// from the end assigns its own in order.
		if terr := f.Epochs.TruncateFrom(f.Log.NextOffset()); terr != nil {
			return 0, false, errors.Join(err, terr)
		}
		if errors.Is(err, log.ErrNotEmptyActive) {
			return 0, false, nil
		}
		return 0, false, err
	}
	if h := min(l.HighWatermark, end); h > f.Log.HighWatermark() {
		if err := f.Log.AdvanceHWM(h); err != nil {
			return 0, false, err
		}
	}
	return end, true, nil
}

// preCopyIdle is how long a pre-copy waits for the leader's next chunk before it gives the
// stream up (and the follower loop retries); tests shorten it.
var preCopyIdle = 10 * time.Second

// preCopyChunks is how many chunks may be received ahead of the writes: while one is checked
// and written, the stream fills the others.
const preCopyChunks = 4

// chunk is one received piece of a segment stream, or the error that ended it.
type chunk struct {
	b   []byte
	err error
}

// streamSegment streams all of segment s into c, receiving into bufs ahead of the writes.
// whole=false (no error): the stream ended short (retention removed the segment) or the
// leader does not serve it.
func streamSegment(ctx context.Context, src SegmentSource, s transfer.Segment, c *log.SegmentCopy,
	bufs [][]byte) (whole bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	st, err := src.Stream(sctx, s.Base, 0, s.Size, len(bufs[0]))
	if err != nil {
		cancel()
		return false, err
	}
	free := make(chan []byte, len(bufs))
	for _, b := range bufs {
		free <- b
	}
	full := make(chan chunk, len(bufs)+1) // every buffer plus the final error: the receiver never blocks
	var silent atomic.Bool
	go receive(sctx, st, free, full, func() { silent.Store(true); cancel() })
	defer func() {
		cancel()
		st.Close()
		for range full { // the receiver ends once its Recv sees the cancel
		}
	}()
	for got := int64(0); got < s.Size; {
		ch := <-full
		switch {
		case errors.Is(ch.err, io.EOF), errors.Is(ch.err, transfer.ErrStreamUnsupported):
			return false, nil
		case ch.err != nil && silent.Load():
			return false, fmt.Errorf("replica: pre-copy of segment %d: no chunk for %v", s.Base, preCopyIdle)
		case ch.err != nil:
			return false, ch.err
		}
		if got += int64(len(ch.b)); got > s.Size {
			return false, fmt.Errorf("replica: pre-copy: leader sent %d bytes of a %d-byte segment", got, s.Size)
		}
		if err := c.Write(ch.b); err != nil {
			return false, fmt.Errorf("replica: pre-copy of segment %d: %w", s.Base, err)
		}
		free <- ch.b[:cap(ch.b)]
	}
	return true, nil
}

// receive reads st into free buffers and hands them on through full, until an error (sent on
// full too) or ctx ends; it closes full when it returns. idle is called when no chunk came for
// preCopyIdle.
func receive(ctx context.Context, st transfer.SegmentStream, free <-chan []byte, full chan<- chunk, idle func()) {
	defer close(full)
	timer := time.AfterFunc(preCopyIdle, idle)
	defer timer.Stop()
	for {
		var b []byte
		select {
		case b = <-free:
		case <-ctx.Done():
			full <- chunk{err: ctx.Err()}
			return
		}
		timer.Reset(preCopyIdle)
		n, err := st.Recv(b)
		if err != nil {
			full <- chunk{err: err}
			return
		}
		full <- chunk{b: b[:n]}
	}
}

// listedEpochs converts a listing's epoch entries.
func listedEpochs(in []transfer.EpochEntry) []log.EpochEntry {
	out := make([]log.EpochEntry, len(in))
	for i, e := range in {
		out[i] = log.EpochEntry{Epoch: e.Epoch, Start: e.Start}
	}
	return out
}
