package fanout

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

func newTestRunner(t *testing.T, h Host, obs *fakeObserver) *Runner {
	t.Helper()
	cfg := testConfig(h, obs)
	cfg.SweepEveryTicks = 3
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stopAll)
	return r
}

func TestReconcilerStartsAndStopsCursorsOnDesiredChange(t *testing.T) {
	h, obs, _, dir := setup(t, 1)
	r := newTestRunner(t, h, obs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	h.set(func(h *fakeHost) { h.desired = []Desired{desired(dir, []int64{0})}; h.version++ })
	testwait.For(t, 10*time.Second, "cursor started", func() bool { return r.cursorCount() == 1 })
	produce(t, h.logs[0], 0, 3, keyed, 1000)
	testwait.For(t, 10*time.Second, "delivery", fileAt(t, dir, 3))
	h.set(func(h *fakeHost) { h.desired = nil; h.version++ })
	testwait.For(t, 10*time.Second, "cursor stopped", func() bool { return r.cursorCount() == 0 })
	if obs.get(func(o *fakeObserver) any { return o.forgot }).(int) != 1 {
		t.Fatal("stopped cursor's series not forgotten")
	}
	h.set(func(h *fakeHost) { h.desired = []Desired{desired(dir, []int64{0})}; h.version++ })
	testwait.For(t, 10*time.Second, "cursor restarted", func() bool { return r.cursorCount() == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if r.cursorCount() != 0 {
		t.Fatal("Run returned with cursors still running")
	}
}

func TestReconcilerSkipsPassesWhileVersionUnchangedButRunsForcedPasses(t *testing.T) {
	h, obs, _, dir := setup(t, 1)
	r := newTestRunner(t, h, obs)
	r.cfg.SweepEveryTicks = 1000
	ctx := context.Background()
	calls := func() int64 { return h.desiredCalls.Load() }

	r.tick(ctx) // first tick: full pass
	if calls() != 1 {
		t.Fatalf("first tick ran %d passes", calls())
	}
	for i := 0; i < 5; i++ {
		r.tick(ctx)
	}
	if calls() != 1 || r.pace.Skips() != 5 {
		t.Fatalf("unchanged version: %d passes, %d skips; want 1 pass, 5 skips", calls(), r.pace.Skips())
	}
	h.set(func(h *fakeHost) { h.version++ })
	r.tick(ctx)
	if calls() != 2 {
		t.Fatal("a version change did not run a pass")
	}
	r.pace.Now = func() time.Time { return time.Now().Add(r.cfg.ForcedPassEvery) } // ForcedPassEvery later
	r.tick(ctx)
	if calls() != 3 {
		t.Fatal("no forced pass after ForcedPassEvery")
	}
	h.set(func(h *fakeHost) { h.caughtUp = false })
	r.tick(ctx)
	h.set(func(h *fakeHost) { h.caughtUp = true })
	before := calls()
	r.tick(ctx)
	if calls() != before+1 {
		t.Fatal("no forced pass on the caught-up edge")
	}
	// A cursor exit forces the next pass: the leader cannot confirm, so the cursor exits.
	h.set(func(h *fakeHost) {
		h.leaderErr = errors.New("no leader")
		h.desired = []Desired{desired(dir, []int64{0})}
		h.version++
	})
	r.tick(ctx)
	testwait.For(t, 10*time.Second, "cursor exit", func() bool { return r.cursorCount() == 0 && r.exited.Load() })
	before = calls()
	r.tick(ctx)
	if calls() != before+1 {
		t.Fatal("no forced pass after a cursor exit")
	}
	// An incomplete desired set forces the next pass.
	h.set(func(h *fakeHost) { h.complete = false; h.version++; h.leaderErr = nil })
	r.tick(ctx)
	h.set(func(h *fakeHost) { h.complete = true })
	before = calls()
	r.tick(ctx)
	if calls() != before+1 {
		t.Fatal("no forced pass after an incomplete pass")
	}
}

func TestReconcilerStartsNothingWhileNotCaughtUp(t *testing.T) {
	h, obs, _, dir := setup(t, 1)
	r := newTestRunner(t, h, obs)
	h.set(func(h *fakeHost) { h.caughtUp = false; h.desired = []Desired{desired(dir, []int64{0})} })
	r.tick(context.Background())
	if r.cursorCount() != 0 {
		t.Fatal("started a cursor while the replica is not caught up")
	}
	h.set(func(h *fakeHost) { h.caughtUp = true })
	r.tick(context.Background())
	if r.cursorCount() != 1 {
		t.Fatal("caught-up edge did not start the cursor")
	}
}

func TestReconcilerStartsReattachOnlyAfterOldEpochCursorExited(t *testing.T) {
	h, obs, _, dir := setup(t, 1)
	produce(t, h.logs[0], 0, 1, keyed, 1000)
	release := make(chan struct{})
	h.set(func(h *fakeHost) {
		h.onCommit = func(int, []plog.Entry) { <-release } // the old cursor drains slowly
		h.desired = []Desired{desired(dir, []int64{0})}
	})
	r := newTestRunner(t, h, obs)
	ctx := context.Background()
	r.tick(ctx)
	testwait.For(t, 10*time.Second, "old cursor committing", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.attempts[0] == 1 })
	const newEpoch = "1111111111111111"
	h.set(func(h *fakeHost) {
		d := desired(dir, []int64{1})
		d.Epoch = newEpoch
		h.desired = []Desired{d}
		h.leader["orders/an"] = newEpoch
		h.links["orders/an"] = newEpoch
		h.version++
	})
	r.tick(ctx)
	c, _, _ := r.cursors.Get(slot{"orders", 0, "an"})
	if c.d.Epoch != epoch {
		t.Fatal("a new-epoch cursor started while the old one was still draining")
	}
	close(release)
	testwait.For(t, 10*time.Second, "new epoch cursor", func() bool {
		r.tick(ctx)
		c, ok, _ := r.cursors.Get(slot{"orders", 0, "an"})
		return ok && c.d.Epoch == newEpoch
	})
	testwait.For(t, 10*time.Second, "new anchor", func() bool {
		st, err := fileState(t, dir)
		return err == nil && st.Epoch == newEpoch
	})
}

func TestOrphanSweepDeletesOnlyConfirmedDissolvedFiles(t *testing.T) {
	h, obs, _, dir := setup(t, 1)
	for _, c := range []string{"gone", "stale", "unsure"} {
		w, err := cursorfile.Anchor(dir, c, epoch, 1)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	h.set(func(h *fakeHost) {
		h.owned = []PartitionDir{{Topic: "orders", Partition: 0, Dir: dir}}
		h.desired = []Desired{desired(dir, []int64{0})} // "an" is linked locally
		h.leader["orders/stale"] = epoch                // the local replica lags: still attached
		delete(h.leader, "orders/gone")
	})
	// "unsure": the leader cannot answer for it.
	r := newTestRunner(t, &unsureHost{fakeHost: h, unsure: "unsure"}, obs) // sweep every 3rd caught-up tick
	ctx := context.Background()
	exists := func(c string) bool { _, err := os.Stat(cursorfile.Path(dir, c)); return err == nil }
	r.tick(ctx)
	testwait.For(t, 10*time.Second, "an anchored", func() bool { return exists("an") })
	for r.sweeps.Load() == 0 {
		r.tick(ctx)
	}
	if exists("gone") {
		t.Fatal("the leader-confirmed dissolved link's file was kept")
	}
	for _, c := range []string{"an", "stale", "unsure"} {
		if !exists(c) {
			t.Fatalf("cursor file of %q deleted without a confirmed dissolve", c)
		}
	}
	// Skipped ticks count towards the cadence; ticks while not caught up do not.
	h.set(func(h *fakeHost) { h.caughtUp = false })
	s0 := r.sweeps.Load()
	for i := 0; i < 6; i++ {
		r.tick(ctx)
	}
	if r.sweeps.Load() != s0 {
		t.Fatal("swept while not caught up")
	}
	h.set(func(h *fakeHost) { h.caughtUp = true })
	for i := 0; i < 3; i++ {
		r.tick(ctx)
	}
	if r.sweeps.Load() != s0+1 {
		t.Fatalf("sweeps = %d, want one more after 3 caught-up ticks", r.sweeps.Load()-s0)
	}
}

// unsureHost fails the leader read for one child.
type unsureHost struct {
	*fakeHost
	unsure string
}

func (u *unsureHost) LeaderLink(ctx context.Context, parent, child string) (string, bool, error) {
	if child == u.unsure {
		return "", false, errors.New("leader unreachable")
	}
	return u.fakeHost.LeaderLink(ctx, parent, child)
}

func TestCursorStatusReportsStalledWhileAChildPartitionKeepsFailing(t *testing.T) {
	h, obs, _, dir := setup(t, 1)
	var down atomic.Bool
	down.Store(true)
	h.set(func(h *fakeHost) {
		h.fail = func(p, n int) error {
			if down.Load() {
				return errDown
			}
			return nil
		}
	})
	r := newTestRunner(t, h, obs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	h.set(func(h *fakeHost) { h.desired = []Desired{desired(dir, []int64{0})}; h.version++ })
	produce(t, h.logs[0], 0, 3, keyed, 1000)
	testwait.For(t, 10*time.Second, "the cursor to report stalled", func() bool { s, _ := r.CursorStatus("orders", 0, "an"); return s })
	down.Store(false)
	testwait.For(t, 10*time.Second, "delivery after recovery", fileAt(t, dir, 3))
	if s, _ := r.CursorStatus("orders", 0, "an"); s {
		t.Fatal("a cursor that committed everything still reports stalled")
	}
	if s, lag := r.CursorStatus("orders", 1, "an"); s || lag != 0 {
		t.Fatal("a cursor that does not run reported a status")
	}
}
