package consume

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is an injectable clock that only moves when told to.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var errTransient = errors.New("transient read failure")

// fakeSource is an in-memory partition log.
type fakeSource struct {
	mu         sync.Mutex
	hwm        int64
	oldest     int64
	corrupt    map[int64]bool
	transient  map[int64]bool
	onRead     func(offset int64)     // called before each read, without locks
	size       func(offset int64) int // payload bytes of a record; nil: none
	broadcasts atomic.Int64
	reads      atomic.Int64
}

func newSource(hwm int64) *fakeSource {
	return &fakeSource{hwm: hwm, corrupt: map[int64]bool{}, transient: map[int64]bool{}}
}

func (f *fakeSource) HighWatermark() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hwm
}

func (f *fakeSource) OldestOffset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.oldest
}

func (f *fakeSource) Read(offset int64) (Message, error) {
	f.reads.Add(1)
	if f.onRead != nil {
		f.onRead(offset)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case offset < f.oldest:
		return Message{}, ErrAgedOut
	case offset >= f.hwm:
		return Message{}, errTransient
	case f.corrupt[offset]:
		return Message{}, ErrCorrupt
	case f.transient[offset]:
		return Message{}, errTransient
	}
	m := Message{Offset: offset, CommittedAt: 1000 + offset}
	if f.size != nil {
		m.Payload = make([]byte, f.size(offset))
	}
	return m, nil
}

func (f *fakeSource) Broadcast() { f.broadcasts.Add(1) }

func (f *fakeSource) set(fn func(f *fakeSource)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// countingObserver counts metric events.
type countingObserver struct {
	corrupt, stale, capped, extended, nacked, agedOut atomic.Int64
}

func (o *countingObserver) CorruptSkipped() { o.corrupt.Add(1) }
func (o *countingObserver) AckRejected(reason string) {
	switch reason {
	case RejectStale:
		o.stale.Add(1)
	case RejectCap:
		o.capped.Add(1)
	}
}
func (o *countingObserver) Extended()       { o.extended.Add(1) }
func (o *countingObserver) Nacked()         { o.nacked.Add(1) }
func (o *countingObserver) AgedOut(n int64) { o.agedOut.Add(n) }

type fixture struct {
	t     *testing.T
	dir   string
	src   *fakeSource
	clock *fakeClock
	obs   *countingObserver
	s     *Shard
}

func newFixture(t *testing.T, hwm int64) *fixture {
	t.Helper()
	fx := &fixture{t: t, dir: t.TempDir(), src: newSource(hwm), clock: newClock(), obs: &countingObserver{}}
	fx.s = fx.open()
	return fx
}

func (fx *fixture) open() *Shard {
	fx.t.Helper()
	s, err := OpenShard(3, fx.dir, fx.src, ShardOptions{Now: fx.clock.Now, Observer: fx.obs, Topic: "orders"})
	if err != nil {
		fx.t.Fatalf("OpenShard: %v", err)
	}
	fx.t.Cleanup(func() { s.Close() })
	return s
}

// reserve reserves up to n and returns the offsets and handles.
func (fx *fixture) reserve(lim Limits, n int) ([]Delivery, Outcome) {
	fx.t.Helper()
	return fx.s.Reserve(lim, n, 0)
}

func (fx *fixture) mustReserve(lim Limits, n int, want ...int64) []Delivery {
	fx.t.Helper()
	ds, out := fx.s.Reserve(lim, n, 0)
	if out != Reserved {
		fx.t.Fatalf("Reserve outcome = %v, want reserved (state %+v)", out, fx.s.State())
	}
	if got := offsetsOf(ds); !equalOffsets(got, want) {
		fx.t.Fatalf("reserved %v, want %v", got, want)
	}
	return ds
}

func (fx *fixture) ack(d Delivery, lim Limits) error {
	return fx.s.Ack(d.Handle.Offset, d.Handle.Nonce, lim)
}

func offsetsOf(ds []Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Message.Offset
	}
	return out
}

func equalOffsets(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
