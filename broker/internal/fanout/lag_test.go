package fanout

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
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

			testwait.For(t, 10*time.Second, "lag 5 while the child is down", func() bool { return lag() == 5 })
			produce(t, h.logs[0], 5, 12, keyed, t0)
			testwait.For(t, 10*time.Second, "lag 12 after 7 more parent records, child still down", func() bool { return lag() == 12 })
			if delay > 0 {
				testwait.For(t, 10*time.Second, "due lag 5 s", func() bool { return dueLag() == 5 })
				now.Add(10_000)
				testwait.For(t, 10*time.Second, "due lag 15 s, child still down", func() bool { return dueLag() == 15 })
			}
			if got := len(h.all()); got != 0 {
				t.Fatalf("child received %d records while down", got)
			}
			down.Store(false)
			testwait.For(t, 10*time.Second, "delivery after recovery", fileAt(t, dir, 12))
			testwait.For(t, 10*time.Second, "lag 0 after recovery", func() bool { return lag() == 0 })
		})
	}
}

// fakeRemoteObserver records a remote cursor's lag series.
type fakeRemoteObserver struct {
	*fakeObserver
	remoteLag atomic.Int64
}

func (o *fakeRemoteObserver) RemoteLag(_, _ string, _ int, msgs int64)  { o.remoteLag.Store(msgs) }
func (o *fakeRemoteObserver) RemoteDueLag(string, string, int, float64) {}
func (o *fakeRemoteObserver) RemoteSent(string, string, int64)          {}
func (o *fakeRemoteObserver) RemoteSendError(string, string, string)    {}
func (o *fakeRemoteObserver) ForgetRemote(string, string, int)          {}

// TestRemoteLagGrowsDuringALongBackoff: after a failed send the cursor waits out a long
// backoff; its remote lag still follows the parent's HWM meanwhile.
func TestRemoteLagGrowsDuringALongBackoff(t *testing.T) {
	h := newFakeHost()
	dir := openParent(t, h, t.TempDir(), 0, plog.Options{})
	srv := httptest.NewServer(&fakeTarget{status: func(int, []plog.Entry) int { return http.StatusServiceUnavailable }})
	defer srv.Close()
	h.set(func(h *fakeHost) {
		h.links["orders/"+remoteID] = epoch
		h.leader["orders/"+remoteID] = epoch
	})
	obs := &fakeRemoteObserver{fakeObserver: newFakeObserver()}
	cfg := testConfig(h, obs)
	cfg.RetryBackoff, cfg.RemoteBackoffCap = time.Minute, time.Minute // ≥ 30 s after a failure
	cfg.LagReportEvery = 5 * time.Millisecond
	produce(t, h.logs[0], 0, 5, keyed, 1000)
	d := Desired{Parent: "orders", Partition: 0, Child: remoteID, Epoch: epoch, AttachOffsets: []int64{0}, Dir: dir,
		Remote: &RemoteTarget{URLs: []string{srv.URL}, Topic: "t", User: "u", Password: "pw"}}
	c := &cursor{cfg: cfg, host: h, obs: obs, log: cfg.Logger, d: d, rr: new(atomic.Uint32)}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() { _ = c.run(ctx); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	testwait.For(t, 10*time.Second, "the first send to fail", func() bool { s, _ := c.remote.get(); return s == RemoteUnreachable })
	testwait.For(t, 10*time.Second, "remote lag 5", func() bool { return obs.remoteLag.Load() == 5 })
	produce(t, h.logs[0], 5, 12, keyed, 1000)
	testwait.For(t, 10*time.Second, "remote lag 12 during the backoff", func() bool { return obs.remoteLag.Load() == 12 })
}
