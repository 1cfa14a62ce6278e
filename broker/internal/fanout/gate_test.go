package fanout

import (
	"sync/atomic"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

func TestGateClampsAndSleepUntilDueCapped(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	if g := gateAt(now, 0); g != plog.NoDueLimit {
		t.Fatalf("normal child gate = %d", g)
	}
	if g := gateAt(now, 3_600_000); g != 10_000_000-3_600_000 {
		t.Fatalf("gate = %d, want now - delay", g)
	}
	if g := gateAt(now, 365*24*3_600_000); g != 1 {
		t.Fatalf("extreme delay gate = %d, want clamped to 1", g)
	}
	cases := []struct {
		notDueAt, delay int64
		want            time.Duration
	}{
		{notDueAt: 9_999_000, delay: 2_000, want: time.Second},           // due at now + 1 s
		{notDueAt: 10_000_000, delay: 3_600_000, want: 30 * time.Second}, // capped
		{notDueAt: 9_000_000, delay: 1_000, want: time.Millisecond},      // already due: one more read
	}
	for _, tc := range cases {
		if got := dueSleep(now, tc.notDueAt, tc.delay, 30*time.Second); got != tc.want {
			t.Fatalf("dueSleep(%d, %d) = %v, want %v", tc.notDueAt, tc.delay, got, tc.want)
		}
	}
}

func TestDelayChildNeverDeliversEarlyOnTheOwnersClock(t *testing.T) {
	h, obs, cfg, dir := setup(t, 1)
	const t0, delay = int64(1_700_000_000_000), int64(3_600_000)
	var now atomic.Int64
	now.Store(t0 + delay/2)
	cfg.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	produce(t, h.logs[0], 0, 3, keyed, t0)
	produce(t, h.logs[0], 3, 6, keyed, t0+10_000)
	var early atomic.Int64
	h.set(func(h *fakeHost) {
		h.onCommit = func(_ int, es []plog.Entry) {
			for _, e := range es {
				at := t0
				if atoiM(string(e.Payload)) >= 3 {
					at = t0 + 10_000
				}
				if now.Load() < at+delay {
					early.Add(1)
				}
			}
		}
	})
	cl := &countingLog{ParentLog: h.logs[0]}
	h.set(func(h *fakeHost) { h.override = cl })
	d := desired(dir, []int64{0})
	d.DelayMs = delay
	startCursor(t, cfg, d)
	testwait.For(t, 10*time.Second, "reads at the gate", func() bool { return cl.reads.Load() >= 3 })
	if n := len(h.all()); n != 0 {
		t.Fatalf("delivered %d records half way through the delay", n)
	}
	now.Store(t0 + delay) // first three due exactly now
	testwait.For(t, 10*time.Second, "first batch", fileAt(t, dir, 3))
	if n := len(h.all()); n != 3 {
		t.Fatalf("delivered %d, want the 3 due records only", n)
	}
	now.Store(t0 + delay + 10_000)
	testwait.For(t, 10*time.Second, "second batch", fileAt(t, dir, 6))
	if early.Load() != 0 {
		t.Fatalf("%d records delivered before committed_at + delay", early.Load())
	}
	if v := obs.get(func(o *fakeObserver) any { return o.dueLag[series("orders", "an", 0)] }); v == nil {
		t.Fatal("due lag series not set")
	}
}

func TestIdleDelayCursorSleepsInsteadOfPolling(t *testing.T) {
	h, _, cfg, dir := setup(t, 1)
	cfg.DueWakeCap = 200 * time.Millisecond
	produce(t, h.logs[0], 0, 1, keyed, time.Now().UnixMilli())
	cl := &countingLog{ParentLog: h.logs[0]}
	h.set(func(h *fakeHost) { h.override = cl })
	d := desired(dir, []int64{0})
	d.DelayMs = 3_600_000
	startCursor(t, cfg, d)
	testwait.For(t, 10*time.Second, "first read", func() bool { return cl.reads.Load() >= 1 })
	start, r0 := time.Now(), cl.reads.Load()
	testwait.For(t, 10*time.Second, "a second", func() bool { return time.Since(start) >= time.Second })
	reads := cl.reads.Load() - r0
	// 1 s / 200 ms cap ≈ 5 wake-ups; a polling loop would read thousands of times.
	if reads > 8 {
		t.Fatalf("idle delay cursor read %d times in 1 s, want ≤ 8 (sleep until due, capped)", reads)
	}
	if len(h.all()) != 0 {
		t.Fatal("delivered a record an hour early")
	}
}
