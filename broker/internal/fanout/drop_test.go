package fanout

import (
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

func TestDropBehindCountedOnceAfterTheDurableAdvance(t *testing.T) {
	h, obs, cfg, _ := setup(t, 1)
	dir := openParent(t, h, t.TempDir(), 0, plog.Options{SegmentBytes: 64})
	lg := h.logs[0]
	for i := 0; i < 5; i++ {
		produce(t, lg, i, i+1, keyed, 1000) // one segment each
	}
	if _, err := lg.ApplyRetention(1, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	oldest := lg.OldestOffset()
	if oldest < 3 {
		t.Fatalf("oldest = %d after retention, want ≥ 3", oldest)
	}
	produce(t, lg, 5, 8, keyed, 1000)
	h.set(func(h *fakeHost) {
		h.fail = func(_ int, n int) error { // the first round fails: the loss must not be counted twice
			if n <= 3 {
				return errDown
			}
			return nil
		}
	})
	startCursor(t, cfg, desired(dir, []int64{0}))
	testwait.For(t, 10*time.Second, "advance", fileAt(t, dir, 8))
	// The loss is reported just after the durable advance the test waits for above.
	testwait.For(t, 10*time.Second, "drop reported", func() bool { return obs.get(func(o *fakeObserver) any { return o.dropped }).(int64) != 0 })
	if got := obs.get(func(o *fakeObserver) any { return o.dropped }).(int64); got != oldest {
		t.Fatalf("dropped = %d, want %d (counted once)", got, oldest)
	}
	if got := h.payloads(0); int64(len(got)) != 8-oldest || got[0] != "m"+string(rune('0'+oldest)) {
		t.Fatalf("child received %v, want m%d..m7", got, oldest)
	}
}
