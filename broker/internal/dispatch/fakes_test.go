package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

var errRefused = errors.New("owner refused the commit")

// fakeClock is a manually advanced clock for Options.Now.
type fakeClock struct{ ns atomic.Int64 }

var clockBase = time.Unix(1_700_000_000, 0)

func (c *fakeClock) Now() time.Time          { return clockBase.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Elapsed() time.Duration  { return time.Duration(c.ns.Load()) }

// fakeTopo is an in-memory Topology.
type fakeTopo struct {
	mu        sync.Mutex
	topics    map[string]fakeTopic
	dead      map[partKey]bool
	notCaught bool
	confirm   func(topic, incarnation string) (bool, error)
	asked     int
}

type fakeTopic struct {
	incarnation string
	partitions  int
}

func newFakeTopo() *fakeTopo {
	return &fakeTopo{topics: map[string]fakeTopic{}, dead: map[partKey]bool{}}
}

func (f *fakeTopo) set(topic, inc string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 {
		delete(f.topics, topic)
		return
	}
	f.topics[topic] = fakeTopic{inc, n}
}

func (f *fakeTopo) setDead(topic string, p int, dead bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[partKey{topic, p}] = dead
}

func (f *fakeTopo) Partitions(topic, inc string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[topic]
	if !ok || (inc != "" && inc != t.incarnation) {
		return 0, false
	}
	return t.partitions, true
}

func (f *fakeTopo) Destination(topic string, p int) Destination {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead[partKey{topic, p}] {
		return Destination{Kind: DestDeadOwner, Node: "n" + strconv.Itoa(p)}
	}
	return Destination{Kind: DestLocal, Node: "n" + strconv.Itoa(p)}
}

func (f *fakeTopo) CaughtUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.notCaught
}

func (f *fakeTopo) ConfirmAbsent(_ context.Context, topic, inc string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.confirm == nil {
		return false, errors.New("leader unreachable")
	}
	return f.confirm(topic, inc)
}

// landing is one record committed by the fake committer.
type landing struct {
	id        int // testRec id, carried in the payload
	topic     string
	partition int
	at        time.Duration // fake clock at commit
	call      int
}

// fakeCommitter records what lands where; fail decides per call whether the owner refuses.
type fakeCommitter struct {
	clock    *fakeClock
	mu       sync.Mutex
	fail     func(topic string, partition int) error
	landed   []landing
	attempts map[partKey]int
	inflight map[partKey]bool
	calls    int
	t        testing.TB
}

func newFakeCommitter(t testing.TB, clock *fakeClock) *fakeCommitter {
	return &fakeCommitter{clock: clock, attempts: map[partKey]int{}, inflight: map[partKey]bool{}, t: t}
}

func (c *fakeCommitter) Commit(_ context.Context, _ Destination, topic string, p int, recs []wal.Record) error {
	k := partKey{topic, p}
	c.mu.Lock()
	if c.inflight[k] {
		c.t.Errorf("concurrent commits for %v", k)
	}
	c.inflight[k] = true
	c.attempts[k]++
	c.calls++
	call := c.calls
	fail := c.fail
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight[k] = false
		c.mu.Unlock()
	}()
	if fail != nil {
		if err := fail(topic, p); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		id, err := strconv.Atoi(string(r.Payload))
		if err != nil {
			c.t.Errorf("payload %q", r.Payload)
		}
		c.landed = append(c.landed, landing{id: id, topic: topic, partition: p, at: c.clock.Elapsed(), call: call})
	}
	return nil
}

func (c *fakeCommitter) setFail(f func(topic string, partition int) error) {
	c.mu.Lock()
	c.fail = f
	c.mu.Unlock()
}

func (c *fakeCommitter) snapshot() []landing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]landing(nil), c.landed...)
}

func (c *fakeCommitter) attemptsFor(topic string, p int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts[partKey{topic, p}]
}

// recObserver counts passes and discards; check, if set, runs on every pass.
type recObserver struct {
	mu        sync.Mutex
	passes    int
	discarded map[string]int
	last      PassStats
	check     func(PassStats)
}

func (o *recObserver) ObserveDiscard(topic string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.discarded[topic]++
}

func (o *recObserver) ObservePass(p PassStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.passes++
	o.last = p
	if o.check != nil {
		o.check(p)
	}
}

func (o *recObserver) passCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.passes
}

func (o *recObserver) discards(topic string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.discarded[topic]
}

// harness wires a real WAL, the fakes and a running Dispatcher.
type harness struct {
	w     *wal.WAL
	topo  *fakeTopo
	com   *fakeCommitter
	clock *fakeClock
	obs   *recObserver
	d     *Dispatcher
	stop  func()
	next  int // next record id
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	w, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{w: w, topo: newFakeTopo(), clock: &fakeClock{}, obs: &recObserver{discarded: map[string]int{}}}
	h.com = newFakeCommitter(t, h.clock)
	if opts.Now == nil {
		opts.Now = h.clock.Now
	}
	if opts.IdlePoll == 0 {
		opts.IdlePoll = 2 * time.Millisecond
	}
	opts.Observer = h.obs
	h.d = New(w, h.topo, h.com, opts)
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
		w.Close()
	})
	return h
}

func (h *harness) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.d.Run(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		h.stop = nil
	}
}

// appendRecs appends count records for topic/incarnation/partition in one batch; their ids are
// returned.
func (h *harness) appendRecs(t testing.TB, topic, inc string, partition, count int) []int {
	t.Helper()
	recs := make([]wal.Record, count)
	ids := make([]int, count)
	for i := range recs {
		ids[i] = h.next
		recs[i] = wal.Record{Topic: topic, Incarnation: inc, Partition: uint32(partition), Payload: []byte(strconv.Itoa(h.next))}
		h.next++
	}
	if _, err := h.w.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitPasses waits until n more passes have finished.
func (h *harness) waitPasses(t testing.TB, n int) {
	t.Helper()
	target := h.obs.passCount() + n
	testwait.For(t, 20*time.Second, fmt.Sprintf("%d passes", n), func() bool { return h.obs.passCount() >= target })
}

// landedIDs maps record id → where it landed (first landing).
func landedIDs(ls []landing) map[int]landing {
	m := map[int]landing{}
	for _, l := range ls {
		if _, ok := m[l.id]; !ok {
			m[l.id] = l
		}
	}
	return m
}
