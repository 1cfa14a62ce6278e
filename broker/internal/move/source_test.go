package move

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

// errFrozen / errGone: the fake source refuses a produce (frozen, or no longer the owner).
var (
	errFrozen = errors.New("frozen")
	errGone   = errors.New("not the owner any more")
)

// fakeSource is a move source backed by a real partition log in a temp dir. It implements
// the source's transfer semantics faithfully: committed bytes only (the committed boundary
// of the open log), a freeze with tokens, TTL, re-arm and fence, and produce refused while
// frozen. Its mutex is the partition's produce lock. Knobs simulate older releases, outages
// and races.
type fakeSource struct {
	t   *testing.T
	dir string

	mu        sync.Mutex // the produce lock; guards everything below
	log       *plog.Log
	token     string
	deadline  time.Time
	armedAt   time.Time     // when the current freeze was armed
	frozenFor time.Duration // arm to flip of the freeze the flip ended
	owner     bool          // false after the flip: produce and transfer calls refused
	committed int64
	hasCommit bool
	acked     []int64
	cursors   []transfer.Cursor
	mtimes    map[int64]int64 // listed mtime overrides (ms)
	produced  int             // records committed through Produce

	// Knobs (set before the runner starts, or atomically).
	noToken   bool         // an older release: no token, no fence
	fileSizes atomic.Bool  // an older release: lists whole files
	down      atomic.Bool  // every call fails as unreachable
	downArm   atomic.Bool  // arms (PrepareHandoff without a token) fail as unreachable
	downFetch atomic.Bool  // fetches fail as unreachable
	noStream  atomic.Bool  // an older release: no segment stream
	streams   atomic.Int64 // segment streams opened
	// segment streams the destination cancelled while they had more to send
	cancelledStreams atomic.Int64
	fetchDelay       atomic.Int64                        // ns slept per fetch
	fetching         atomic.Int64                        // fetches running now
	maxFetching      atomic.Int64                        // most fetches seen running at once
	frozenSlow       atomic.Int64                        // ns slept per fetch while frozen
	srcClock         func() time.Time                    // listed_at_ms
	recvClock        func() time.Time                    // the destination's clock for ReceivedAt
	onList           func(s *fakeSource, n int64)        // called under the lock before a listing is read (n = 1-based list call)
	onArm            func(s *fakeSource)                 // called under the lock before a freeze is armed
	onFence          func(s *fakeSource, n int64)        // called under the lock before a fence is judged
	racyList         func(s *fakeSource, n int64) bool   // list n reads its segments before an append it then reports in the HWM
	onFetch          func(s *fakeSource, base, at int64) // called outside the lock
	onPrepare        func(req transfer.PrepareRequest)   // called outside the lock, first
	rearmSeen        func(token string, lapsed bool)     // called for each re-arm outcome

	lists, fetches, arms, rearms, fences, fenceRefusals, lapsedRearms atomic.Int64
	fetchedBytes, frozenFetchedBytes                                  atomic.Int64
}

func newFakeSource(t *testing.T, segBytes int64) *fakeSource {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src", "p00000")
	l, err := plog.Open(dir, plog.Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeSource{t: t, dir: dir, log: l, owner: true, committed: -1, mtimes: map[int64]int64{},
		srcClock: time.Now, recvClock: time.Now}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.log != nil {
			s.log.Close()
		}
	})
	return s
}

// payload returns the deterministic payload of record i.
func payload(i, size int) []byte {
	p := []byte(fmt.Sprintf("rec-%06d-", i))
	for len(p) < size {
		p = append(p, byte('a'+i%26))
	}
	return p
}

// Produce commits n records of size bytes, refused while frozen or after the flip.
func (s *fakeSource) Produce(n, size int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owner {
		return errGone
	}
	if s.frozenLocked() {
		return errFrozen
	}
	return s.commitLocked(n, size)
}

// commitLocked commits without the freeze gate (a commit that passed it earlier).
func (s *fakeSource) commitLocked(n, size int) error {
	es := make([]plog.Entry, n)
	for i := range es {
		es[i] = plog.Entry{Payload: payload(s.produced+i, size)}
	}
	if _, err := s.log.Commit(es, time.Now().UnixMilli()); err != nil {
		return err
	}
	s.produced += n
	return nil
}

// MustProduce commits n records or fails the test.
func (s *fakeSource) MustProduce(n, size int) {
	s.t.Helper()
	if err := s.Produce(n, size); err != nil {
		s.t.Fatalf("produce: %v", err)
	}
}

func (s *fakeSource) frozenLocked() bool { return s.token != "" && time.Now().Before(s.deadline) }

// Frozen reports whether a freeze is active.
func (s *fakeSource) Frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozenLocked()
}

// lostOwnership is the source applying the flip: the freeze ends, produce is refused.
func (s *fakeSource) lostOwnership() {
	s.mu.Lock()
	if s.frozenLocked() {
		s.frozenFor = time.Since(s.armedAt)
	}
	s.owner, s.token = false, ""
	s.mu.Unlock()
}

func (s *fakeSource) HWM() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.HighWatermark()
}

func (s *fakeSource) setPositions(committed int64, acked []int64, cursors []transfer.Cursor) {
	s.mu.Lock()
	s.committed, s.hasCommit, s.acked, s.cursors = committed, true, acked, cursors
	s.mu.Unlock()
}

// segmentFiles lists the log's segment files (base, path, size, mtime).
func (s *fakeSource) segmentFiles() ([]transfer.Segment, []string) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		s.t.Errorf("read source dir: %v", err)
		return nil, nil
	}
	var segs []transfer.Segment
	var paths []string
	for _, e := range ents {
		base, ok := plog.ParseSegmentFileName(e.Name())
		if !ok {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		segs = append(segs, transfer.Segment{Base: base, Size: fi.Size(), MtimeMs: fi.ModTime().UnixMilli()})
		paths = append(paths, filepath.Join(s.dir, e.Name()))
	}
	return segs, paths
}

// listLocked reads the transfer info: positions, then the HWM, then the segments up to the
// committed boundary (or whole files for an older release).
func (s *fakeSource) listLocked(racy bool) transfer.Listing {
	l := transfer.Listing{
		CommittedOffset: s.committed, HasCommitted: s.hasCommit, AckedAhead: slices.Clone(s.acked),
		Cursors: slices.Clone(s.cursors), Incarnation: "inc-1", OldestOffset: s.log.OldestOffset(),
		ListedAtMs: s.srcClock().UnixMilli(),
	}
	var bBase, bPos int64
	if !racy {
		l.HighWatermark = s.log.HighWatermark()
		bBase, bPos = s.log.CommittedBoundary()
	} else {
		bBase, bPos = s.log.CommittedBoundary() // segments first ...
	}
	segs, _ := s.segmentFiles()
	if racy { // ... then an append that passed the gate, then the HWM
		if err := s.commitLocked(1, 64); err != nil {
			s.t.Errorf("racy commit: %v", err)
		}
		l.HighWatermark = s.log.HighWatermark()
	}
	whole := s.fileSizes.Load()
	for i, sg := range segs {
		sg.Sealed = i < len(segs)-1
		if !whole {
			if sg.Base > bBase {
				continue
			}
			sg.Sealed = sg.Base < bBase
			if sg.Base == bBase {
				sg.Size = bPos
			}
		}
		if mt, ok := s.mtimes[sg.Base]; ok {
			sg.MtimeMs = mt
		}
		l.Segments = append(l.Segments, sg)
	}
	return l
}

func (s *fakeSource) check() error {
	if s.down.Load() {
		return fmt.Errorf("%w: source down", transfer.ErrUnavailable)
	}
	return nil
}

func (s *fakeSource) List(ctx context.Context, addr, topic string, partition int) (transfer.Listing, error) {
	n := s.lists.Add(1)
	if err := s.check(); err != nil {
		return transfer.Listing{}, err
	}
	s.mu.Lock()
	if !s.owner {
		s.mu.Unlock()
		return transfer.Listing{}, transfer.ErrNotOwner
	}
	if s.onList != nil {
		s.onList(s, n)
	}
	racy := s.racyList != nil && s.racyList(s, n)
	l := s.listLocked(racy)
	s.mu.Unlock()
	l.ReceivedAt = s.recvClock()
	return l, nil
}

// Stream serves the segment stream as a sequence of Fetch calls, so every fetch knob applies
// to it, and ends it at the first short chunk, as the engine's stream ends at the boundary.
func (s *fakeSource) Stream(ctx context.Context, addr, topic string, partition int, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.streams.Add(1)
	return &fetchStream{ctx: ctx, unsupported: s.noStream.Load(), at: at, left: n, chunk: chunk, cancelled: &s.cancelledStreams,
		fetch: func(ctx context.Context, at int64, n int) ([]byte, error) {
			return s.Fetch(ctx, addr, topic, partition, base, at, n)
		}}, nil
}

// fetchStream is a transfer.SegmentStream over a fetch function.
type fetchStream struct {
	ctx         context.Context
	unsupported bool
	at, left    int64
	chunk       int
	cancelled   *atomic.Int64 // counts a Recv that finds the stream cancelled; nil: not counted
	ended       bool
	fetch       func(ctx context.Context, at int64, n int) ([]byte, error)
}

func (f *fetchStream) Recv(buf []byte) (int, error) {
	if f.unsupported {
		return 0, fmt.Errorf("%w: fake", transfer.ErrStreamUnsupported)
	}
	if f.ended || f.left <= 0 {
		return 0, io.EOF
	}
	if err := f.ctx.Err(); err != nil {
		if f.cancelled != nil {
			f.cancelled.Add(1)
		}
		return 0, fmt.Errorf("%w: %w", transfer.ErrUnavailable, err)
	}
	n := int(min(f.left, int64(f.chunk)))
	b, err := f.fetch(f.ctx, f.at, n)
	if err != nil {
		return 0, err
	}
	k := copy(buf, b)
	f.at, f.left = f.at+int64(k), f.left-int64(k)
	f.ended = k < n
	return k, nil
}

func (f *fetchStream) Close() {}

func (s *fakeSource) Fetch(ctx context.Context, addr, topic string, partition int, base, at int64, n int) ([]byte, error) {
	s.fetches.Add(1)
	now := s.fetching.Add(1)
	defer s.fetching.Add(-1)
	for m := s.maxFetching.Load(); now > m && !s.maxFetching.CompareAndSwap(m, now); m = s.maxFetching.Load() {
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.downFetch.Load() {
		return nil, fmt.Errorf("%w: fetch down", transfer.ErrUnavailable)
	}
	if s.onFetch != nil {
		s.onFetch(s, base, at)
	}
	if d := s.fetchDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if d := s.frozenSlow.Load(); d > 0 && s.Frozen() {
		time.Sleep(time.Duration(d))
	}
	if n > transfer.ChunkBytes {
		return nil, fmt.Errorf("fetch of %d bytes exceeds a chunk", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owner {
		return nil, transfer.ErrNotOwner
	}
	path := filepath.Join(s.dir, plog.SegmentFileName(base))
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil // aged out: an empty read
	}
	limit := fi.Size()
	if !s.fileSizes.Load() {
		bBase, bPos := s.log.CommittedBoundary()
		switch {
		case base == bBase:
			limit = bPos
		case base > bBase:
			limit = 0
		}
	}
	if at >= limit {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, min(int64(n), limit-at))
	got, err := f.ReadAt(b, at)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	s.fetchedBytes.Add(int64(got))
	if s.frozenLocked() {
		s.frozenFetchedBytes.Add(int64(got))
	}
	return b[:got], nil
}

func (s *fakeSource) Prepare(ctx context.Context, addr, topic string, partition int, req transfer.PrepareRequest) (transfer.Listing, error) {
	if s.onPrepare != nil {
		s.onPrepare(req)
	}
	if err := s.check(); err != nil {
		return transfer.Listing{}, err
	}
	if req.Token == "" && s.downArm.Load() {
		return transfer.Listing{}, fmt.Errorf("%w: arm down", transfer.ErrUnavailable)
	}
	ttl := req.TTL
	if ttl <= 0 {
		ttl = transfer.FreezeTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owner {
		return transfer.Listing{}, transfer.ErrNotOwner
	}
	now := time.Now()
	if req.Token == "" { // arm: a new freeze invalidates any earlier one
		s.arms.Add(1)
		if s.onArm != nil {
			s.onArm(s)
		}
		var rnd [16]byte
		_, _ = rand.Read(rnd[:])
		s.token, s.deadline, s.armedAt = hex.EncodeToString(rnd[:]), now.Add(ttl), now
		l := s.listLocked(false)
		if !s.noToken {
			l.Token = s.token
		}
		l.ReceivedAt = s.recvClock()
		return l, nil
	}
	if req.Fence {
		n := s.fences.Add(1)
		if s.onFence != nil {
			s.onFence(s, n)
		}
	} else {
		s.rearms.Add(1)
	}
	var err error
	switch {
	case req.Token != s.token:
		err = transfer.ErrUnknownToken
	case !now.Before(s.deadline):
		err = transfer.ErrFreezeLapsed
	case req.Fence && s.log.HighWatermark() != req.ExpectHWM:
		err = transfer.ErrHWMMismatch
	}
	if !req.Fence && s.rearmSeen != nil {
		s.rearmSeen(req.Token, err != nil)
	}
	if err != nil {
		if req.Fence {
			s.fenceRefusals.Add(1)
		} else {
			s.lapsedRearms.Add(1)
		}
		return transfer.Listing{}, err
	}
	s.deadline = now.Add(ttl)
	return transfer.Listing{Token: s.token, HighWatermark: s.log.HighWatermark(), ExpiresInMs: ttl.Milliseconds()}, nil
}

var _ transfer.Source = (*fakeSource)(nil)
