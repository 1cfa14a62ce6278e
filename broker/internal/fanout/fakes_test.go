package fanout

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
)

var errDown = errors.New("child owner down")

// fakeHost implements Host over real parent logs in a temp dir and an in-memory child.
type fakeHost struct {
	mu          sync.Mutex
	desired     []Desired
	complete    bool
	version     uint64
	caughtUp    bool
	logs        map[int]*plog.Log // parent partition → log (parent topic "orders")
	parentParts int
	childParts  map[string]int
	links       map[string]string // "parent/child" → epoch, the local replica
	leader      map[string]string // "parent/child" → epoch, the leader's view
	leaderErr   error
	owned       []PartitionDir
	override    ParentLog // when set, ParentLog returns it

	// fail decides a commit attempt's outcome (nil → success); attempt counts per partition.
	fail     func(p int, attempt int) error
	attempts map[int]int
	received map[int][]plog.Entry // child partition → copies of committed entries
	onCommit func(p int, es []plog.Entry)

	desiredCalls atomic.Int64
	leaderCalls  atomic.Int64
}

func newFakeHost() *fakeHost {
	return &fakeHost{
		complete: true, caughtUp: true, logs: map[int]*plog.Log{}, parentParts: 1,
		childParts: map[string]int{}, links: map[string]string{}, leader: map[string]string{},
		attempts: map[int]int{}, received: map[int][]plog.Entry{},
	}
}

func (h *fakeHost) DesiredCursors() ([]Desired, bool) {
	h.desiredCalls.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Desired(nil), h.desired...), h.complete
}

func (h *fakeHost) LatestDomainVersion() uint64 { h.mu.Lock(); defer h.mu.Unlock(); return h.version }
func (h *fakeHost) CaughtUp() bool              { h.mu.Lock(); defer h.mu.Unlock(); return h.caughtUp }

func (h *fakeHost) ParentLog(parent string, p int) (ParentLog, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.override != nil {
		return h.override, nil
	}
	lg, ok := h.logs[p]
	if !ok {
		return nil, fmt.Errorf("%s/%d: not owner", parent, p)
	}
	return lg, nil
}

func (h *fakeHost) ChildPartitions(child string) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.childParts[child]
	return n, ok
}

func (h *fakeHost) ParentPartitions(string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.parentParts
}

func (h *fakeHost) LinkCurrent(parent, child, epoch string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.links[parent+"/"+child]
	return ok && e == epoch
}

func (h *fakeHost) LeaderLink(_ context.Context, parent, child string) (string, bool, error) {
	h.leaderCalls.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leaderErr != nil {
		return "", false, h.leaderErr
	}
	e, ok := h.leader[parent+"/"+child]
	return e, ok, nil
}

func (h *fakeHost) CommitChild(ctx context.Context, child string, p int, es []plog.Entry) error {
	h.mu.Lock()
	h.attempts[p]++
	n, fail, hook := h.attempts[p], h.fail, h.onCommit
	h.mu.Unlock()
	if hook != nil {
		hook(p, es)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if fail != nil {
		if err := fail(p, n); err != nil {
			return err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range es {
		h.received[p] = append(h.received[p], cloneEntry(e))
	}
	return nil
}

func (h *fakeHost) OwnedPartitionDirs() []PartitionDir {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]PartitionDir(nil), h.owned...)
}

func (h *fakeHost) set(f func(h *fakeHost)) { h.mu.Lock(); f(h); h.mu.Unlock() }

// payloads returns the payloads child partition p received, in order.
func (h *fakeHost) payloads(p int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.received[p] {
		out = append(out, string(e.Payload))
	}
	return out
}

// all returns every payload the child received, any partition.
func (h *fakeHost) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, es := range h.received {
		for _, e := range es {
			out = append(out, string(e.Payload))
		}
	}
	return out
}

// fakeObserver records metrics calls.
type fakeObserver struct {
	mu      sync.Mutex
	lag     map[string]int64
	dueLag  map[string]float64
	dropped int64
	corrupt int
	forgot  int
}

func newFakeObserver() *fakeObserver {
	return &fakeObserver{lag: map[string]int64{}, dueLag: map[string]float64{}}
}

func series(parent, child string, p int) string { return fmt.Sprintf("%s/%s/%d", parent, child, p) }

func (o *fakeObserver) Lag(parent, child string, p int, n int64) {
	o.mu.Lock()
	o.lag[series(parent, child, p)] = n
	o.mu.Unlock()
}

func (o *fakeObserver) DueLag(parent, child string, p int, s float64) {
	o.mu.Lock()
	o.dueLag[series(parent, child, p)] = s
	o.mu.Unlock()
}

func (o *fakeObserver) Dropped(_, _ string, n int64) { o.mu.Lock(); o.dropped += n; o.mu.Unlock() }
func (o *fakeObserver) CursorCorrupt(string, string, int) {
	o.mu.Lock()
	o.corrupt++
	o.mu.Unlock()
}

func (o *fakeObserver) Forget(parent, child string, p int) {
	o.mu.Lock()
	delete(o.lag, series(parent, child, p))
	delete(o.dueLag, series(parent, child, p))
	o.forgot++
	o.mu.Unlock()
}

func (o *fakeObserver) get(f func(o *fakeObserver) any) any {
	o.mu.Lock()
	defer o.mu.Unlock()
	return f(o)
}

// openParent opens parent partition p's real log under dir and registers it with h.
func openParent(t *testing.T, h *fakeHost, dir string, p int, opts plog.Options) string {
	t.Helper()
	pdir := filepath.Join(dir, "orders", fmt.Sprintf("p%05d", p))
	lg, err := plog.Open(pdir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	h.set(func(h *fakeHost) { h.logs[p] = lg })
	return pdir
}

// produce commits records with payloads "<prefix><i>" for i in [from, to), keyed by keyOf.
func produce(t *testing.T, lg *plog.Log, from, to int, keyOf func(i int) []byte, at int64) {
	t.Helper()
	var es []plog.Entry
	for i := from; i < to; i++ {
		es = append(es, plog.Entry{Key: keyOf(i), Payload: fmt.Appendf(nil, "m%d", i)})
	}
	if _, err := lg.Commit(es, at); err != nil {
		t.Fatal(err)
	}
}

func keyed(i int) []byte { return fmt.Appendf(nil, "k%d", i) }
func keyless(int) []byte { return nil }

// testConfig is a Config with short waits for tests.
func testConfig(h Host, obs Observer) Config {
	return Config{
		Host: h, Observer: obs, Tick: 10 * time.Millisecond, LongPoll: 50 * time.Millisecond,
		Linger: 2 * time.Millisecond, RetryBackoff: 20 * time.Millisecond,
		QuickBackoffs: []time.Duration{time.Millisecond, 2 * time.Millisecond},
		DueWakeCap:    100 * time.Millisecond,
	}.withDefaults()
}

// startCursor runs one cursor for d until the test ends; the returned channel yields its error.
func startCursor(t *testing.T, cfg Config, d Desired) (stop func(), done <-chan error) {
	t.Helper()
	c := &cursor{cfg: cfg, host: cfg.Host, obs: cfg.Observer, log: cfg.Logger, d: d, rr: new(atomic.Uint32)}
	ctx, cancel := context.WithCancel(context.Background())
	ch, exited := make(chan error, 1), make(chan struct{})
	go func() { ch <- c.run(ctx); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				t.Error("cursor did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop, ch
}

// countingLog counts ReadDue calls.
type countingLog struct {
	ParentLog
	reads atomic.Int64
}

func (c *countingLog) ReadDue(from int64, n, b int, at int64) ([]plog.Record, int64, error) {
	c.reads.Add(1)
	return c.ParentLog.ReadDue(from, n, b, at)
}
