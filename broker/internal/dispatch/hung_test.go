package dispatch

import (
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

// A frozen owner (its commit neither answers nor fails) must not stall delivery to the other
// partitions; records queued behind it go to a sibling after the grace; its late success is
// accounted for without a second concurrent commit to it.
func TestHungOwnerDoesNotStallOtherPartitions(t *testing.T) {
	h := newHarness(t, Options{PassWait: 50 * time.Millisecond})
	h.topo.set("t", "A", 3)
	release := make(chan struct{})
	h.com.setFail(func(topic string, p int) error {
		if p == 0 {
			<-release // frozen until released
		}
		return nil
	})
	hungIDs := h.appendRecs(t, "t", "A", 0, 5)
	h.start(t)
	testwait.For(t, 20*time.Second, "the commit to partition 0 to hang", func() bool { return h.com.attemptsFor("t", 0) == 1 })

	healthy := h.appendRecs(t, "t", "A", 1, 5)
	testwait.For(t, 20*time.Second, "partition 1's records to land while partition 0 hangs", func() bool {
		got := landedIDs(h.com.snapshot())
		for _, id := range healthy {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})

	// Within the grace, later records for partition 0 wait; past it they go to a sibling.
	behind := h.appendRecs(t, "t", "A", 0, 3)
	h.waitPasses(t, 3)
	if got := landedIDs(h.com.snapshot()); len(got) != len(healthy) {
		t.Fatalf("records landed within the grace while their owner hangs: %v", got)
	}
	h.clock.Advance(3500 * time.Millisecond)
	testwait.For(t, 20*time.Second, "records queued behind the hung owner to land on a sibling", func() bool {
		got := landedIDs(h.com.snapshot())
		for _, id := range behind {
			if l, ok := got[id]; !ok || l.partition == 0 {
				return false
			}
		}
		return true
	})
	if n := h.com.attemptsFor("t", 0); n != 1 {
		t.Fatalf("%d commits to the hung destination, want exactly the one in flight", n)
	}

	close(release) // the owner thaws: its commit lands late and finishes its records
	testwait.For(t, 20*time.Second, "the checkpoint to reach the end of the WAL", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	// The hung records were rerouted after the grace too (they queue for partition 0 like the
	// later ones) and then also landed on partition 0 when it thawed: duplicates, within
	// at-least-once, never a loss.
	testwait.For(t, 20*time.Second, "the late commit to land on partition 0", func() bool {
		onZero := map[int]bool{}
		for _, l := range h.com.snapshot() {
			if l.partition == 0 {
				onZero[l.id] = true
			}
		}
		for _, id := range hungIDs {
			if !onZero[id] {
				return false
			}
		}
		return true
	})
	// The thawed destination is healthy again: new records go to their own partition.
	fresh := h.appendRecs(t, "t", "A", 0, 2)
	testwait.For(t, 20*time.Second, "new records for the thawed partition to land on it", func() bool {
		got := landedIDs(h.com.snapshot())
		for _, id := range fresh {
			if l, ok := got[id]; !ok || l.partition != 0 {
				return false
			}
		}
		return true
	})
}
