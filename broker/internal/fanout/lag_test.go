package fanout

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestLagGaugesGrowWhileAChildRefusesCommits: the lag series exist from the cursor's start and
// keep following the parent's HWM (and, for a delay child, the clock) while every commit to
// the child fails, instead of freezing until a slab commits.
func TestLagGaugesGrowWhileAChildRefusesCommits(t *testing.T) {
	for _, delay := range []int64{0, 60_000} {
		t.Run("delay="+time.Duration(delay*int64(time.Millisecond)).String(), func(t *testing.T) {
			h, obs, cfg, dir := setup(t, 1)
			const t0 = int64(1_700_000_000_000)
			var now atomic.Int64
			now.Store(t0 + delay + 5_000)
			cfg.Now = func() time.Time { return time.UnixMilli(now.Load()) }
			cfg.LagReportEvery = 5 * time.Millisecond
			var down atomic.Bool
			down.Store(true)
			h.set(func(h *fakeHost) {
				h.fail = func(int, int) error {
					if down.Load() {
						return errDown
					}
					return nil
				}
			})
			produce(t, h.logs[0], 0, 5, keyed, t0)
			d := desired(dir, []int64{0})
			d.DelayMs = delay
			startCursor(t, cfg, d)
			key := series("orders", "an", 0)
			lag := func() int64 { return obs.get(func(o *fakeObserver) any { return o.lag[key] }).(int64) }
			dueLag := func() float64 { return obs.get(func(o *fakeObserver) any { return o.dueLag[key] }).(float64) }

			waitFor(t, "lag 5 while the child is down", func() bool { return lag() == 5 })
			produce(t, h.logs[0], 5, 12, keyed, t0)
			waitFor(t, "lag 12 after 7 more parent records, child still down", func() bool { return lag() == 12 })
			if delay > 0 {
				waitFor(t, "due lag 5 s", func() bool { return dueLag() == 5 })
				now.Add(10_000)
				waitFor(t, "due lag 15 s, child still down", func() bool { return dueLag() == 15 })
			}
			if got := len(h.all()); got != 0 {
				t.Fatalf("child received %d records while down", got)
			}
			down.Store(false)
			waitFor(t, "delivery after recovery", fileAt(t, dir, 12))
			waitFor(t, "lag 0 after recovery", func() bool { return lag() == 0 })
		})
	}
}
