package dispatch

import (
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

// refuseUntil makes partition p of topic refuse commits until the fake clock reaches d.
func refuseUntil(h *harness, topic string, p int, d time.Duration) {
	h.com.setFail(func(t string, q int) error {
		if t == topic && q == p && h.clock.Elapsed() < d {
			return errRefused
		}
		return nil
	})
}

// stepClock advances the fake clock in 100 ms steps up to total, letting passes run after each
// step; at each step, onStep (if set) runs first.
func stepClock(t *testing.T, h *harness, total time.Duration, onStep func(now time.Duration)) {
	t.Helper()
	for h.clock.Elapsed() < total {
		h.clock.Advance(100 * time.Millisecond)
		if onStep != nil {
			onStep(h.clock.Elapsed())
		}
		h.waitPasses(t, 2)
	}
}

// PC-9: an owner refusing for 2 s (less than the grace) gets all its records, on its partition.
func TestOwnerRecoveringWithinGraceKeepsRecordsOnTheirPartition(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 4)
	refuseUntil(h, "t", 0, 2*time.Second)
	ids := h.appendRecs(t, "t", "A", 0, 10)
	h.start(t)
	testwait.For(t, 20*time.Second, "first refusal", func() bool { return h.com.attemptsFor("t", 0) >= 1 })
	stepClock(t, h, 2500*time.Millisecond, nil)
	testwait.For(t, 20*time.Second, "checkpoint at next seq", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	got := landedIDs(h.com.snapshot())
	for _, id := range ids {
		if l := got[id]; l.partition != 0 || l.at < 2*time.Second {
			t.Fatalf("record %d landed on partition %d at %v, want partition 0 after the refusal", id, l.partition, l.at)
		}
	}
	if n := h.com.attemptsFor("t", 0); n > 4 {
		t.Fatalf("%d attempts in ~2 s, want about one per second", n)
	}
}

// PC-9: an owner refusing for 5 s: after ~3 s its records, and later ones bound for it, land on
// a sibling; once it recovers, new records go back to their own partition.
func TestOwnerFailingPastGraceIsReroutedToASibling(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 4)
	refuseUntil(h, "t", 0, 5*time.Second)
	early := h.appendRecs(t, "t", "A", 0, 10)
	h.start(t)
	testwait.For(t, 20*time.Second, "first refusal", func() bool { return h.com.attemptsFor("t", 0) >= 1 })
	var later []int
	stepClock(t, h, 6*time.Second, func(now time.Duration) {
		if now == 3500*time.Millisecond {
			later = h.appendRecs(t, "t", "A", 0, 5)
		}
	})
	got := landedIDs(h.com.snapshot())
	for _, id := range early {
		l := got[id]
		if l.partition != 1 || l.at < 3*time.Second || l.at >= 4*time.Second {
			t.Fatalf("early record %d landed on %d at %v, want sibling 1 within [3s, 4s)", id, l.partition, l.at)
		}
	}
	for _, id := range later {
		if l := got[id]; l.partition != 1 || l.at >= 4*time.Second {
			t.Fatalf("later record %d landed on %d at %v, want sibling 1 at once", id, l.partition, l.at)
		}
	}
	back := h.appendRecs(t, "t", "A", 0, 3)
	stepClock(t, h, 10*time.Second, nil)
	got = landedIDs(h.com.snapshot())
	for _, id := range back {
		if l, ok := got[id]; !ok || l.partition != 0 {
			t.Fatalf("record %d after recovery landed %+v (ok=%v), want partition 0", id, l, ok)
		}
	}
}

// PC-10: a dead owner is skipped on the first pass, without waiting for any grace; the sibling
// walk skips dead and stuck partitions.
func TestDeadOwnerIsReroutedOnTheFirstPass(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 4)
	h.topo.setDead("t", 0, true)
	h.topo.setDead("t", 1, true)
	ids := h.appendRecs(t, "t", "A", 0, 5)
	h.start(t)
	testwait.For(t, 20*time.Second, "checkpoint at next seq", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	if h.clock.Elapsed() != 0 {
		t.Fatal("the fake clock moved")
	}
	got := landedIDs(h.com.snapshot())
	for _, id := range ids {
		if got[id].partition != 2 {
			t.Fatalf("record %d landed on %d, want 2 (first live sibling after dead 0 and 1)", id, got[id].partition)
		}
	}
	if n := h.com.attemptsFor("t", 0) + h.com.attemptsFor("t", 1); n != 0 {
		t.Fatalf("%d commits sent to dead owners", n)
	}
}

func TestRerouteSkipsStuckSiblingsAndWaitsWithoutAny(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 3)
	h.topo.setDead("t", 0, true)
	h.com.setFail(func(_ string, p int) error {
		if p == 1 && h.clock.Elapsed() < time.Hour {
			return errRefused
		}
		return nil
	})
	own1 := h.appendRecs(t, "t", "A", 1, 1)
	h.start(t)
	testwait.For(t, 20*time.Second, "partition 1 stuck", func() bool { return h.com.attemptsFor("t", 1) >= 1 })
	ids := h.appendRecs(t, "t", "A", 0, 4)
	testwait.For(t, 20*time.Second, "dead-owner records landed", func() bool { return len(h.com.snapshot()) == 4 })
	for _, id := range ids {
		if l := landedIDs(h.com.snapshot())[id]; l.partition != 2 {
			t.Fatalf("record %d landed on %d, want 2 (1 is stuck)", id, l.partition)
		}
	}
	// Now partition 2's owner dies too: no sibling left for 0, so its records wait.
	h.topo.setDead("t", 2, true)
	waiting := h.appendRecs(t, "t", "A", 0, 2)
	h.waitPasses(t, 3)
	if _, ok := landedIDs(h.com.snapshot())[waiting[0]]; ok || h.d.Undispatched() != 3 {
		t.Fatalf("records without a live sibling must wait: undispatched %d", h.d.Undispatched())
	}
	if cp := h.w.Checkpoint(); cp != 0 {
		t.Fatalf("checkpoint %d passed record %d stuck on partition 1", cp, own1[0])
	}
}
