package dispatch

import (
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

// PC-11: a topic absent locally is discarded only after the leader confirms it; an unreachable
// leader or a lagging replica keeps the records.
func TestDiscardNeedsCaughtUpReplicaAndLeaderConfirmation(t *testing.T) {
	h := newHarness(t, Options{})
	ids := h.appendRecs(t, "gone", "A", 0, 3)
	h.topo.notCaught = true
	h.start(t)
	h.waitPasses(t, 3)
	if h.topo.asked != 0 || h.d.Undispatched() != 3 {
		t.Fatalf("replica not caught up: asked leader %d times, undispatched %d", h.topo.asked, h.d.Undispatched())
	}

	h.topo.mu.Lock()
	h.topo.notCaught = false // confirm stays nil: the leader is unreachable
	h.topo.mu.Unlock()
	testwait.For(t, 20*time.Second, "leader asked", func() bool {
		h.topo.mu.Lock()
		defer h.topo.mu.Unlock()
		return h.topo.asked > 0
	})
	h.waitPasses(t, 3)
	if h.d.Undispatched() != 3 || h.w.Checkpoint() != 0 || h.obs.discards("gone") != 0 {
		t.Fatalf("leader unreachable: undispatched %d, checkpoint %d", h.d.Undispatched(), h.w.Checkpoint())
	}
	h.topo.mu.Lock()
	asked := h.topo.asked
	h.topo.confirm = func(string, string) (bool, error) { return false, nil } // leader: it exists
	h.topo.mu.Unlock()
	if asked > 1 {
		t.Fatalf("leader asked %d times within one backoff", asked)
	}
	h.clock.Advance(time.Second)
	h.waitPasses(t, 3)
	if h.d.Undispatched() != 3 {
		t.Fatal("records discarded although the leader says the topic exists")
	}

	h.topo.mu.Lock()
	h.topo.confirm = func(topic, inc string) (bool, error) { return topic == "gone" && inc == "A", nil }
	h.topo.mu.Unlock()
	h.clock.Advance(time.Second)
	testwait.For(t, 20*time.Second, "discarded", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	if n := h.obs.discards("gone"); n != len(ids) {
		t.Fatalf("observer counted %d discards, want %d", n, len(ids))
	}
	if len(h.com.snapshot()) != 0 {
		t.Fatal("a record of the deleted topic was committed")
	}
}

// PC-12: after delete+recreate, records of the old incarnation are never committed into the new
// topic; they are discarded only with the leader's confirmation.
func TestOldIncarnationRecordsAreNeverCommittedToTheNewTopic(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "new", 2)
	old := h.appendRecs(t, "t", "old", 0, 3)
	fresh := h.appendRecs(t, "t", "new", 0, 2)
	h.start(t)
	testwait.For(t, 20*time.Second, "new incarnation committed", func() bool { return len(h.com.snapshot()) == 2 })
	h.waitPasses(t, 2)
	if h.d.Undispatched() != 3 || h.w.Checkpoint() != 0 {
		t.Fatalf("old records must wait for confirmation: undispatched %d", h.d.Undispatched())
	}
	h.topo.mu.Lock()
	h.topo.confirm = func(topic, inc string) (bool, error) {
		if inc == "new" {
			return false, errors.New("asked about the live incarnation")
		}
		return inc == "old", nil
	}
	h.topo.mu.Unlock()
	h.clock.Advance(time.Second)
	testwait.For(t, 20*time.Second, "old discarded", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	got := landedIDs(h.com.snapshot())
	for _, id := range old {
		if _, ok := got[id]; ok {
			t.Fatalf("old-incarnation record %d committed into the new topic", id)
		}
	}
	for _, id := range fresh {
		if _, ok := got[id]; !ok {
			t.Fatalf("new-incarnation record %d not committed", id)
		}
	}
	if h.obs.discards("t") != len(old) {
		t.Fatalf("discards %d, want %d", h.obs.discards("t"), len(old))
	}
}
