package reconcile

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeWorker is a worker that runs until stopped or released.
type fakeWorker struct {
	param   string
	release chan struct{} // closed: the worker returns even when not cancelled
	stopped chan struct{} // closed when the body returned
	hold    chan struct{} // non-nil: the body ignores ctx until this is closed
}

type harness struct {
	t       *testing.T
	set     *Workers[string, *fakeWorker]
	mu      sync.Mutex
	started []string
	all     map[string][]*fakeWorker
	exits   chan struct{}
	hold    map[string]chan struct{}
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, all: map[string][]*fakeWorker{}, exits: make(chan struct{}, 100), hold: map[string]chan struct{}{}}
	h.set = NewWorkers[string, *fakeWorker](func() { h.exits <- struct{}{} })
	t.Cleanup(func() {
		for _, c := range h.hold {
			select {
			case <-c:
			default:
				close(c)
			}
		}
		h.set.StopAll()
	})
	return h
}

func (h *harness) pass(want map[string]string, complete, caughtUp bool) Result {
	return Reconcile(context.Background(), h.set, Pass[string, string, *fakeWorker]{
		Want: want, Complete: complete, CaughtUp: caughtUp,
		Same: func(w *fakeWorker, d string) bool { return w.param == d },
		Start: func(k, d string) (*fakeWorker, func(context.Context)) {
			w := &fakeWorker{param: d, release: make(chan struct{}), stopped: make(chan struct{}), hold: h.hold[k]}
			h.mu.Lock()
			h.started = append(h.started, k+"="+d)
			h.all[k] = append(h.all[k], w)
			h.mu.Unlock()
			return w, func(ctx context.Context) {
				defer close(w.stopped)
				if w.hold != nil {
					<-w.hold
				}
				select {
				case <-ctx.Done():
				case <-w.release:
				}
			}
		},
	})
}

func (h *harness) takeStarted() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.started
	h.started = nil
	slices.Sort(out)
	return out
}

// waitExit waits for the n-th worker of k to return.
func (h *harness) waitExit(k string, n int) {
	h.t.Helper()
	h.mu.Lock()
	w := h.all[k][n]
	h.mu.Unlock()
	select {
	case <-w.stopped:
	case <-time.After(5 * time.Second):
		h.t.Fatalf("worker %s#%d did not return", k, n)
	}
	select {
	case <-h.exits:
	case <-time.After(5 * time.Second):
		h.t.Fatal("onExit not called")
	}
}

func TestReconcile(t *testing.T) {
	type step struct {
		want     map[string]string
		complete bool
		caughtUp bool
		exit     []string // keys whose first worker must have returned after the pass
		started  []string
		res      Result
		live     int
	}
	for _, tc := range []struct {
		name  string
		hold  []string // keys whose workers ignore cancellation until the test ends
		steps []step
	}{
		{name: "starts the wanted workers", steps: []step{
			{want: map[string]string{"a": "1", "b": "1"}, complete: true, caughtUp: true, started: []string{"a=1", "b=1"}, live: 2},
			{want: map[string]string{"a": "1", "b": "1"}, complete: true, caughtUp: true, live: 2},
		}},
		{name: "starts nothing while not caught up", steps: []step{
			{want: map[string]string{"a": "1"}, complete: true, caughtUp: false, res: Result{Deferred: true}},
			{want: map[string]string{"a": "1"}, complete: true, caughtUp: true, started: []string{"a=1"}, live: 1},
		}},
		{name: "stops a worker no longer wanted", steps: []step{
			{want: map[string]string{"a": "1", "b": "1"}, complete: true, caughtUp: true, started: []string{"a=1", "b=1"}, live: 2},
			{want: map[string]string{"a": "1"}, complete: true, caughtUp: true, exit: []string{"b"}, res: Result{Draining: true}, live: 1},
			{want: map[string]string{"a": "1"}, complete: true, caughtUp: true, live: 1},
		}},
		{name: "an incomplete want stops nothing", steps: []step{
			{want: map[string]string{"a": "1", "b": "1"}, complete: true, caughtUp: true, started: []string{"a=1", "b=1"}, live: 2},
			{want: map[string]string{"a": "2"}, complete: false, caughtUp: true, live: 2},
		}},
		{name: "a changed worker is replaced after it exited", steps: []step{
			{want: map[string]string{"a": "1"}, complete: true, caughtUp: true, started: []string{"a=1"}, live: 1},
			{want: map[string]string{"a": "2"}, complete: true, caughtUp: true, exit: []string{"a"}, res: Result{Draining: true}},
			{want: map[string]string{"a": "2"}, complete: true, caughtUp: true, started: []string{"a=2"}, live: 1},
		}},
		{name: "a replacement waits for a draining worker", hold: []string{"a"}, steps: []step{
			{want: map[string]string{"a": "1"}, complete: true, caughtUp: true, started: []string{"a=1"}, live: 1},
			{want: map[string]string{"a": "2"}, complete: true, caughtUp: true, res: Result{Draining: true}, live: 1},
			{want: map[string]string{"a": "2"}, complete: true, caughtUp: true, res: Result{Draining: true}, live: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, k := range tc.hold {
				h.hold[k] = make(chan struct{})
			}
			for i, s := range tc.steps {
				res := h.pass(s.want, s.complete, s.caughtUp)
				for _, k := range s.exit {
					h.waitExit(k, 0)
				}
				if got := h.takeStarted(); !slices.Equal(got, s.started) {
					t.Fatalf("step %d: started %v, want %v", i, got, s.started)
				}
				if res != s.res {
					t.Fatalf("step %d: result %+v, want %+v", i, res, s.res)
				}
				if n := h.set.Live(); n != s.live {
					t.Fatalf("step %d: %d live workers, want %d", i, n, s.live)
				}
			}
		})
	}
}

func TestWorkersGetReportsAnExitedWorkerUntilTheNextPass(t *testing.T) {
	h := newHarness(t)
	h.pass(map[string]string{"a": "1"}, true, true)
	if w, ok, live := h.set.Get("a"); !ok || !live || w.param != "1" {
		t.Fatalf("Get(a) = %v %v %v, want the running worker", w, ok, live)
	}
	close(h.all["a"][0].release) // the worker returns on its own
	h.waitExit("a", 0)
	if _, ok, live := h.set.Get("a"); !ok || live {
		t.Fatalf("Get(a) after its exit = ok %v live %v, want present and not live", ok, live)
	}
	// The next pass drops the exited entry and, a still wanted key, starts it again.
	h.pass(map[string]string{"a": "1"}, true, true)
	if got := h.takeStarted(); !slices.Equal(got, []string{"a=1", "a=1"}) {
		t.Fatalf("started %v, want a twice", got)
	}
	if _, ok, _ := h.set.Get("b"); ok {
		t.Fatal("Get of a key never started reports a worker")
	}
}

func TestStopAllWaitsForEveryWorker(t *testing.T) {
	h := newHarness(t)
	h.pass(map[string]string{"a": "1", "b": "1", "c": "1"}, true, true)
	h.set.StopAll()
	for k, ws := range maps.All(h.all) {
		select {
		case <-ws[0].stopped:
		default:
			t.Fatalf("StopAll returned before worker %s did", k)
		}
	}
	if _, ok, _ := h.set.Get("a"); ok || h.set.Live() != 0 {
		t.Fatal("StopAll left entries behind")
	}
}

func TestPacerStep(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &Pacer{FullPassEvery: 30 * time.Second, Now: func() time.Time { return now }}
	for i, s := range []struct {
		advance time.Duration
		version uint64
		force   bool
		ok      bool // what the pass reports
		ran     bool
	}{
		{version: 1, ok: true, ran: true},                        // the first step always runs
		{version: 1, ok: true, ran: false},                       // nothing changed
		{version: 2, ok: false, ran: true},                       // the version moved; the pass is unfinished
		{version: 2, ok: true, ran: true},                        // an unfinished pass forces the next
		{version: 2, ok: true, ran: false},                       // and only the next
		{version: 2, force: true, ok: true, ran: true},           // the caller forces one
		{advance: 29 * time.Second, version: 2, ok: true},        // not yet due
		{advance: time.Second, version: 2, ok: true, ran: true},  // FullPassEvery since the last pass
		{advance: time.Second, version: 2, ok: true, ran: false}, // measured from that pass
	} {
		now = now.Add(s.advance)
		called := false
		ran := p.Step(s.version, s.force, func() bool { called = true; return s.ok })
		if ran != s.ran || called != s.ran {
			t.Fatalf("step %d: ran %v (pass called %v), want %v", i, ran, called, s.ran)
		}
	}
	if p.Passes() != 5 || p.Skips() != 4 {
		t.Fatalf("passes %d skips %d, want 5 and 4", p.Passes(), p.Skips())
	}
}

func TestPacerRunTicksUntilCtxEnds(t *testing.T) {
	p := &Pacer{Tick: time.Millisecond, FullPassEvery: time.Hour, Now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx, func(context.Context) {
			if n++; n == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if n != 3 {
		t.Fatalf("%d ticks, want 3 (the first at once, then one per Tick until ctx ended)", n)
	}
}
