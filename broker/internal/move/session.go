package move

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/durable"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

// session is one copy session: the staged copy in the staging directory and what the worker
// learned from the source while making it (docs/internals/moves.md §5.1).
//
// Invariant: the staged copy never holds more of a segment than some listing reported — a
// listing shorter than the staged file cuts it back, and a segment no longer listed is
// deleted — so every staged byte was committed on the source.
type session struct {
	dir string
	// last is the last full listing the source gave (nil: never reached); a force-promote
	// works from it (§8).
	last *transfer.Listing
	// synced: sealed segments whose fsync was started since their last chunk landed.
	synced map[int64]bool
	// bg tracks the background fsyncs of sealed segments; bgSem runs one at a time.
	bg    sync.WaitGroup
	bgSem chan struct{}
	// lost: sealed segments whose background fsync failed, guarded by lostMu. A failed
	// write-back may have dropped the dirty pages, and the kernel reports it to one fsync
	// only, so a later fsync that succeeds proves nothing: their staged files are deleted and
	// copied again (dropLost).
	lostMu sync.Mutex
	lost   []int64
	// noStream: the source answered the segment stream with Unimplemented (an older
	// release); chunks are fetched with op 23 instead.
	noStream bool
	// chunks are the receive buffers of the segment stream, made once.
	chunks [][]byte
}

func newSession(dir string) *session {
	return &session{dir: dir, synced: map[int64]bool{}, bgSem: make(chan struct{}, 1)}
}

// syncLater fsyncs a sealed segment whose last chunk landed (docs/internals/moves.md §5.7 rule 1) in the
// background, so the copy of the next segment does not wait for the write-back. A failure is
// remembered: the segment's staged file is deleted and copied again before the copy can
// converge or be sealed (dropLost).
func (s *session) syncLater(base int64) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.bgSem <- struct{}{}
		defer func() { <-s.bgSem }()
		err := syncStaged(s.segPath(base), true)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			s.lostMu.Lock()
			s.lost = append(s.lost, base)
			s.lostMu.Unlock()
		}
	}()
}

// dropLost deletes the staged files of the sealed segments whose background fsync failed so
// far (without waiting for the ones running), so that the next copy pass fetches them again,
// and reports how many it deleted.
func (s *session) dropLost(log *slog.Logger) (int, error) {
	s.lostMu.Lock()
	lost := s.lost
	s.lost = nil
	s.lostMu.Unlock()
	for _, base := range lost {
		log.Warn("move: the fsync of a staged segment failed; copying it again", "base", base)
		if err := removeIfExists(s.segPath(base)); err != nil {
			return 0, fmt.Errorf("discard a staged segment whose fsync failed: %w", err)
		}
		delete(s.synced, base)
	}
	return len(lost), nil
}

// errSyncLost: a staged segment's fsync failed, so its bytes cannot be trusted; the attempt
// ends and the next one copies the segment again.
var errSyncLost = errors.New("move: the fsync of a staged segment failed")

// settle waits for the background fsyncs and fails if one of them failed, having deleted the
// segments they were for.
func (s *session) settle(log *slog.Logger) error {
	s.waitSyncs()
	n, err := s.dropLost(log)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w (%d segments); copying them again", errSyncLost, n)
	}
	return nil
}

// syncStaged fsyncs the staged file at path (fdatasync when dataOnly); tests replace it to
// fail the way a disk does. A sealed segment's fdatasync (dataOnly) also drops its cached
// pages: write-behind dropped all but the last windows already, and the copy is not read
// again before it is installed.
var syncStaged = func(path string, dataOnly bool) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s for fsync: %w", path, err)
	}
	defer f.Close()
	if dataOnly {
		err = durable.Fdatasync(f)
	} else {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if dataOnly {
		durable.DropCached(f)
	}
	return nil
}

// waitSyncs waits for the background fsyncs (before seal, and before the staging dir goes).
func (s *session) waitSyncs() { s.bg.Wait() }

// ensureDir creates the staging directory (and .moves) durably.
func (s *session) ensureDir() error {
	if err := durable.MkdirAll(s.dir); err != nil {
		return fmt.Errorf("create staging %s: %w", s.dir, err)
	}
	return nil
}

// staged returns the staged segment files by base offset with their sizes.
func (s *session) staged() (map[int64]int64, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[int64]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for _, e := range ents {
		base, ok := plog.ParseSegmentFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out[base] = fi.Size()
	}
	return out, nil
}

// stagedBytes returns the staged segment bytes (0 when the directory is gone).
func (s *session) stagedBytes() int64 {
	st, err := s.staged()
	if err != nil {
		return 0
	}
	var n int64
	for _, v := range st {
		n += v
	}
	return n
}

// holdsAll reports whether every segment l lists is staged at least at its listed size.
func (s *session) holdsAll(l transfer.Listing) bool {
	st, err := s.staged()
	if err != nil {
		return false
	}
	for _, seg := range l.Segments {
		if have, ok := st[seg.Base]; !ok || have < seg.Size {
			return false
		}
	}
	return true
}

func (s *session) segPath(base int64) string {
	return filepath.Join(s.dir, plog.SegmentFileName(base))
}

// list asks the source for its transfer listing and remembers it.
func (w *worker) list(ctx context.Context) (transfer.Listing, error) {
	addr, err := w.sourceAddr()
	if err != nil {
		return transfer.Listing{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	l, err := w.cfg.Source.List(cctx, addr, w.topic, w.p)
	if err != nil {
		return transfer.Listing{}, fmt.Errorf("%w: list: %w", errSourceCall, err)
	}
	return w.noteListing(l), nil
}

// noteListing records a full listing in the session and the report and returns it with its
// segments in base order (the order every pass copies them in).
func (w *worker) noteListing(l transfer.Listing) transfer.Listing {
	if l.ReceivedAt.IsZero() {
		l.ReceivedAt = w.cfg.Now()
	}
	l.Segments = slices.Clone(l.Segments)
	slices.SortFunc(l.Segments, func(a, b transfer.Segment) int { return cmp.Compare(a.Base, b.Base) })
	w.sess.last = &l
	w.setSourceHWM(l.HighWatermark)
	return l
}

// copyPass brings the staged copy to listing l: staged segments no longer listed are
// deleted, a staged segment longer than listed is cut back, and the missing bytes of each
// listed segment are fetched in chunks. complete reports whether every listed byte is staged
// (a short fetch is normal at the end of the source's committed bytes).
func (w *worker) copyPass(ctx context.Context, l transfer.Listing) (copied int64, complete bool, err error) {
	s := w.sess
	listed := make(map[int64]bool, len(l.Segments))
	for _, seg := range l.Segments {
		listed[seg.Base] = true
	}
	if _, err := s.dropLost(w.log); err != nil {
		return 0, false, err
	}
	staged, err := s.staged()
	if err != nil {
		return 0, false, fmt.Errorf("list staging: %w", err)
	}
	for base := range staged {
		if !listed[base] { // aged out on the source, or past its committed boundary
			if err := os.Remove(s.segPath(base)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, false, fmt.Errorf("remove unlisted staged segment: %w", err)
			}
			delete(s.synced, base)
		}
	}
	addr, err := w.sourceAddr()
	if err != nil {
		return 0, false, err
	}
	for _, seg := range l.Segments {
		n, full, err := w.copySegment(ctx, addr, seg, staged[seg.Base])
		copied += n
		if err != nil {
			return copied, false, err
		}
		if !full {
			// Segments are staged in order, so a later one never holds bytes while an
			// earlier one has a gap; the next pass goes on from here.
			return copied, false, nil
		}
	}
	w.setCopyNext(l.HighWatermark)
	return copied, true, nil
}

// copySegment brings one staged segment from have bytes to seg.Size.
func (w *worker) copySegment(ctx context.Context, addr string, seg transfer.Segment, have int64) (copied int64, full bool, err error) {
	s := w.sess
	path := s.segPath(seg.Base)
	f, err := openStaged(path, seg.Sealed)
	if err != nil {
		return 0, false, fmt.Errorf("open staged segment: %w", err)
	}
	defer f.Close()
	if have > seg.Size { // never stage more than a listing reported
		if err := f.Truncate(seg.Size); err != nil {
			return 0, false, fmt.Errorf("cut back staged segment: %w", err)
		}
		have = seg.Size
		s.synced[seg.Base] = false
	}
	var n int64
	if s.noStream {
		n, err = w.fetchInto(ctx, f, addr, seg, have)
	} else {
		n, err = w.streamInto(ctx, f, addr, seg, have)
		if errors.Is(err, transfer.ErrStreamUnsupported) && n == 0 {
			w.log.Info("move: the source does not serve the segment stream; fetching chunks one by one", "source", addr)
			s.noStream = true
			n, err = w.fetchInto(ctx, f, addr, seg, have)
		}
	}
	have += n
	copied += n
	if n > 0 {
		s.synced[seg.Base] = false
	}
	if errors.Is(err, errWriteBack) { // docs/internals/moves.md §5.7 rule 5
		w.log.Warn("move: the write-back of a staged segment failed; copying it again", "base", seg.Base, "err", err)
		delete(s.synced, seg.Base)
		if rerr := removeIfExists(path); rerr != nil {
			return copied, false, fmt.Errorf("discard a staged segment whose write-back failed: %w (after %w)", rerr, err)
		}
	}
	if err != nil {
		return copied, false, err
	}
	full = have == seg.Size
	if seg.Sealed && full && !s.synced[seg.Base] { // docs/internals/moves.md §5.7 rule 1
		s.syncLater(seg.Base)
		s.synced[seg.Base] = true
	}
	return copied, full, nil
}

// fetchInto copies seg's bytes from position have up to seg.Size into f, with up to
// FetchesInFlight chunk fetches outstanding, and returns how many contiguous bytes it wrote
// from have on. It stops at the first error or short chunk (the end of what the source can
// serve now); bytes of later chunks already fetched are not written, so the staged file never
// holds a gap.
func (w *worker) fetchInto(ctx context.Context, f io.WriterAt, addr string, seg transfer.Segment, have int64) (int64, error) {
	type chunk struct {
		b   []byte
		err error
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pending []chan chunk
	next := have // the next position to ask for
	launch := func() {
		n := int(min(int64(w.cfg.ChunkBytes), seg.Size-next))
		ch := make(chan chunk, 1)
		at := next
		go func() {
			b, err := w.fetch(cctx, addr, seg.Base, at, n)
			if len(b) > n {
				b = b[:n]
			}
			ch <- chunk{b, err}
		}()
		pending = append(pending, ch)
		next += int64(n)
	}
	var wrote int64
	for {
		for len(pending) < w.cfg.FetchesInFlight && next < seg.Size {
			launch()
		}
		if len(pending) == 0 {
			return wrote, nil
		}
		c := <-pending[0]
		pending = pending[1:]
		if c.err != nil {
			return wrote, c.err
		}
		if len(c.b) > 0 {
			if _, err := f.WriteAt(c.b, have+wrote); err != nil {
				return wrote, fmt.Errorf("write staged segment: %w", err)
			}
			wrote += int64(len(c.b))
		}
		want := min(int64(w.cfg.ChunkBytes), seg.Size-(have+wrote-int64(len(c.b))))
		if int64(len(c.b)) < want {
			return wrote, nil // a short chunk: the source has no more for now
		}
	}
}

// streamChunks is how many chunks of the segment stream may be received ahead of the writes:
// while one is written, the stream fills the others.
const streamChunks = 4

// streamInto copies seg's bytes from position have up to seg.Size into f over one segment
// stream (op 23 streamed), writing each chunk while the next ones arrive, and returns how many
// contiguous bytes it wrote from have on. A stream the source ends early (its committed
// boundary) is normal. A source that sends nothing for CallTimeout is given up on.
func (w *worker) streamInto(ctx context.Context, f io.WriterAt, addr string, seg transfer.Segment, have int64) (int64, error) {
	if have >= seg.Size {
		return 0, nil
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := w.cfg.Source.Stream(sctx, addr, w.topic, w.p, seg.Base, have, seg.Size-have, w.cfg.ChunkBytes)
	if err != nil {
		return 0, fmt.Errorf("%w: stream %d@%d: %w", errSourceCall, seg.Base, have, err)
	}
	defer st.Close()

	s := w.sess
	if len(s.chunks) == 0 || len(s.chunks[0]) != w.cfg.ChunkBytes {
		s.chunks = s.chunks[:0]
		for range streamChunks {
			s.chunks = append(s.chunks, make([]byte, w.cfg.ChunkBytes))
		}
	}
	free := make(chan []byte, len(s.chunks))
	for _, b := range s.chunks {
		free <- b
	}
	full := make(chan []byte, len(s.chunks))
	var (
		wrote int64
		werr  error
		done  = make(chan struct{})
	)
	go func() { // the writer: chunks in order, so the staged file never holds a gap
		defer close(done)
		for b := range full {
			if werr == nil {
				if _, err := f.WriteAt(b, have+wrote); err != nil {
					werr = fmt.Errorf("write staged segment: %w", err)
					cancel()
				} else {
					wrote += int64(len(b))
				}
			}
			free <- b[:cap(b)]
		}
	}()

	var silent atomic.Bool
	idle := time.AfterFunc(w.cfg.CallTimeout, func() { silent.Store(true); cancel() })
	defer idle.Stop()
	var rerr error
	for received, want := int64(0), seg.Size-have; ; {
		b := <-free
		idle.Reset(w.cfg.CallTimeout)
		n, err := st.Recv(b)
		idle.Stop()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				rerr = err
			}
			break
		}
		if received += int64(n); received > want { // never stage more than the listing reported
			rerr = fmt.Errorf("%w: the source sent %d bytes for %d asked", transfer.ErrUnavailable, received, want)
			break
		}
		if n == 0 {
			free <- b
			continue
		}
		full <- b[:n]
	}
	close(full)
	<-done
	switch {
	case werr != nil:
		return wrote, werr
	case rerr != nil && silent.Load():
		return wrote, fmt.Errorf("%w: stream %d@%d: no chunk for %v", errSourceCall, seg.Base, have+wrote, w.cfg.CallTimeout)
	case rerr != nil:
		return wrote, fmt.Errorf("%w: stream %d@%d: %w", errSourceCall, seg.Base, have+wrote, rerr)
	}
	return wrote, nil
}

func (w *worker) fetch(ctx context.Context, addr string, base, at int64, n int) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	b, err := w.cfg.Source.Fetch(cctx, addr, w.topic, w.p, base, at, n)
	if err != nil {
		return nil, fmt.Errorf("%w: fetch %d@%d: %w", errSourceCall, base, at, err)
	}
	return b, nil
}

// catchUp is the pre-copy (docs/internals/moves.md §5.3): passes 50 ms apart until a pass from pass 1
// on copies ≤ LagBytes (converged), or MaxPasses passes, or NoProgressPasses passes in a row
// without a new minimum (freeze anyway: a non-converged cutover).
func (w *worker) catchUp(ctx context.Context) error {
	minBytes := int64(-1)
	noProgress := 0
	began, total := time.Now(), int64(0)
	for pass := 0; ; pass++ {
		l, err := w.list(ctx)
		if err != nil {
			return err
		}
		w.setPhase(transfer.PhaseCopying)
		copied, _, err := w.copyPass(ctx, l)
		w.addPass(copied)
		total += copied
		if err != nil {
			return err
		}
		if pass >= 1 {
			if copied <= w.cfg.LagBytes {
				if err := w.sess.settle(w.log); err != nil { // as below
					return err
				}
				w.log.Info("move: catch-up converged", "passes", pass+1, "last_pass_bytes", copied,
					"copied_bytes", total, "copy_duration", time.Since(began))
				return nil
			}
			if minBytes < 0 || copied < minBytes {
				minBytes, noProgress = copied, 0
			} else {
				noProgress++
			}
			if noProgress >= w.cfg.NoProgressPasses || pass+1 >= w.cfg.MaxPasses {
				// The pre-copy ends: the freeze must not wait on a sealed segment's fsync
				// still running, and copy_duration includes the copy's durability (§5.7).
				if err := w.sess.settle(w.log); err != nil {
					return err
				}
				w.log.Warn("move: non-converged cutover", "passes", pass+1, "last_pass_bytes", copied,
					"min_pass_bytes", minBytes, "lag_bytes", w.cfg.LagBytes, "copied_bytes", total,
					"copy_duration", time.Since(began))
				return nil
			}
		}
		if err := clock.Sleep(ctx, w.cfg.PassPacing); err != nil {
			return err
		}
	}
}
