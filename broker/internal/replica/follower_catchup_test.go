package replica

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/log"
)

// sizeSource records the max_bytes of every fetch on its way to the leader, and hands each
// fetch's offset to sent when it is set.
type sizeSource struct {
	hostSource
	sent chan int64

	mu    sync.Mutex
	sizes []int
}

func (s *sizeSource) Fetch(ctx context.Context, req FetchRequest) (FetchReply, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, req.MaxBytes)
	s.mu.Unlock()
	if s.sent != nil {
		s.sent <- req.Offset
	}
	return s.hostSource.Fetch(ctx, req)
}

func (s *sizeSource) taken() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

func (s *sizeSource) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes = nil
}

// A follower behind the leader's HWM fetches CatchUpMaxBytes per call, and MaxBytes again once
// it has reached the HWM (docs/internals/replication.md §5).
func TestAFollowerBehindTheHWMFetchesCatchUpSizes(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, nil)
	h := NewHost()
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	src := &sizeSource{hostSource: hostSource{h: h}}
	fw := &Follower{Self: "b", Epoch: 1, Log: b.log, Epochs: b.epochs, Source: src, MaxBytes: 700, CatchUpMaxBytes: 5000}
	for range 30 {
		produce(t, a, ld, "x", 20) // one frame of about 1.3 KB each
	}
	catchUp(t, fw, a)
	sizes := src.taken()
	n := len(sizes)
	if n < 4 || sizes[0] != 700 || sizes[n-1] != 700 {
		t.Fatalf("fetch sizes %v: want 700 first (nothing known yet) and last (at the HWM)", sizes)
	}
	for i, s := range sizes[1 : n-1] {
		if s != 5000 {
			t.Fatalf("fetch %d asked for %d bytes while behind the HWM: sizes %v", i+1, s, sizes)
		}
	}
	if n > 30/3+4 {
		t.Fatalf("%d fetches for 30 frames: catch-up fetches should carry about three frames each", n)
	}
	if b.log.NextOffset() != a.log.NextOffset() {
		t.Fatalf("follower ends at %d, leader at %d", b.log.NextOffset(), a.log.NextOffset())
	}

	// Caught up, it fetches MaxBytes; behind again, catch-up sizes again.
	src.reset()
	produce(t, a, ld, "y", 20)
	produce(t, a, ld, "y", 20)
	catchUp(t, fw, a)
	if sizes := src.taken(); len(sizes) < 2 || sizes[0] != 700 || sizes[1] != 5000 {
		t.Fatalf("fetch sizes %v after two more frames: want 700 (one frame, still behind), then 5000", sizes)
	}
}

// A follower in the ISR is never behind the HWM (the HWM waits for it) and keeps MaxBytes.
func TestAnInSyncFollowerKeepsMaxBytes(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 2, nil)
	h := NewHost()
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	src := &sizeSource{hostSource: hostSource{h: h}}
	fw := &Follower{Self: "b", Epoch: 1, Log: b.log, Epochs: b.epochs, Source: src, MaxBytes: 700, CatchUpMaxBytes: 5000}
	for range 10 {
		produce(t, a, ld, "x", 20)
	}
	catchUp(t, fw, a)
	for i, s := range src.taken() {
		if s != 700 {
			t.Fatalf("fetch %d of an in-sync follower asked for %d bytes: sizes %v", i, s, src.taken())
		}
	}
	if a.log.HighWatermark() != a.log.NextOffset() {
		t.Fatalf("leader's HWM %d, LEO %d: the follower's last fetch should have committed everything", a.log.HighWatermark(), a.log.NextOffset())
	}
}

// aheadLog checks, after each append that leaves the follower below the leader's HWM, that the
// fetch from the new end was sent before the append returned.
type aheadLog struct {
	FollowerLog
	leaderHWM func() int64
	sent      chan int64
	appends   int // appends that left the follower behind
}

func (l *aheadLog) AppendFrames(frames []byte) (int64, error) {
	end, err := l.FollowerLog.AppendFrames(frames)
	if err != nil || end >= l.leaderHWM() {
		return end, err
	}
	l.appends++
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case off := <-l.sent:
			if off == end {
				return end, nil
			}
		case <-timeout.C:
			return end, fmt.Errorf("no fetch from %d sent while the frames before it were appended", end)
		}
	}
}

// A follower behind the leader's HWM sends its next fetch while it appends the last answer,
// and the copy ends equal to the leader's log.
func TestAFollowerBehindFetchesWhileItAppends(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, nil)
	h := NewHost()
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	sent := make(chan int64, 1000)
	src := &sizeSource{hostSource: hostSource{h: h}, sent: sent}
	lg := &aheadLog{FollowerLog: b.log, leaderHWM: a.log.HighWatermark, sent: sent}
	fw := &Follower{Self: "b", Epoch: 1, Log: lg, Epochs: b.epochs, Source: src, MaxBytes: 700, CatchUpMaxBytes: 3000}
	for range 30 {
		produce(t, a, ld, "x", 20)
	}
	catchUp(t, fw, a)
	if lg.appends < 5 {
		t.Fatalf("%d appends behind the HWM: the test needs several", lg.appends)
	}
	for off := int64(0); off < a.log.NextOffset(); off += 5 {
		ra, err := a.log.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.log.Read(off)
		if err != nil || string(ra.Key) != string(rb.Key) {
			t.Fatalf("offset %d: %q on the leader, %q on the follower (%v)", off, ra.Key, rb.Key, err)
		}
	}
}

// directLog records which append a follower used for each answer.
type directLog struct {
	*log.Log
	calls []string
}

func (l *directLog) AppendFrames(frames []byte) (int64, error) {
	l.calls = append(l.calls, "plain")
	return l.Log.AppendFrames(frames)
}

func (l *directLog) AppendFramesDirect(frames []byte) (int64, error) {
	l.calls = append(l.calls, "direct")
	return l.Log.AppendFramesDirect(frames)
}

// A follower appends with direct I/O only the answers after which it is still behind the
// leader's HWM; the answer that brings it to the HWM, and every append of an in-sync follower,
// goes through AppendFrames.
func TestOnlyAFollowerBehindAppendsDirectly(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, nil)
	h := NewHost()
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	lg := &directLog{Log: b.log}
	fw := &Follower{Self: "b", Epoch: 1, Log: lg, Epochs: b.epochs, Source: hostSource{h: h}, MaxBytes: 700, CatchUpMaxBytes: 3000}
	for range 30 {
		produce(t, a, ld, "x", 20)
	}
	catchUp(t, fw, a)
	n := len(lg.calls)
	if n < 4 || lg.calls[n-1] != "plain" || slices.Index(lg.calls, "plain") < n-1 {
		t.Fatalf("appends %v: want direct ones while behind, then one plain append reaching the HWM", lg.calls)
	}
	lg.calls = nil
	produce(t, a, ld, "y", 20)
	catchUp(t, fw, a)
	if !slices.Equal(lg.calls, []string{"plain"}) {
		t.Fatalf("appends %v for one frame at the HWM: want one plain append", lg.calls)
	}
	for off := int64(0); off < a.log.NextOffset(); off += 7 {
		ra, err := a.log.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.log.Read(off)
		if err != nil || string(ra.Key) != string(rb.Key) {
			t.Fatalf("offset %d: %q on the leader, %q on the follower (%v)", off, ra.Key, rb.Key, err)
		}
	}
}
