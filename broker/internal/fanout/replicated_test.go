package fanout

import (
	"context"
	"slices"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorsync"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

// docs/internals/replication.md §8: a node that becomes the parent partition's leader resumes
// each link from the cursor position it copied from the old leader (cursorsync), not from the
// attach point: the child gets no record the old leader had already committed to it.
func TestANewLeaderResumesFromTheReplicatedCursor(t *testing.T) {
	oldLeader, _, cfg, oldDir := setup(t, 1)
	produce(t, oldLeader.logs[0], 0, 6, keyed, 1000)
	stop, _ := startCursor(t, cfg, desired(oldDir, []int64{0}))
	testwait.For(t, 10*time.Second, "the old leader fans out 0–5", fileAt(t, oldDir, 6))
	stop()

	// The follower holds the same parent records (replicated) and the leader's cursors.
	newLeader, obs := newFakeHost(), newFakeObserver()
	newDir := openParent(t, newLeader, t.TempDir(), 0, plog.Options{})
	newLeader.set(func(h *fakeHost) {
		h.childParts["an"] = 1
		h.links["orders/an"] = epoch
		h.leader["orders/an"] = epoch
	})
	produce(t, newLeader.logs[0], 0, 9, keyed, 1000)
	snap, err := cursorsync.Snapshot(context.Background(), oldDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cursorsync.Apply(context.Background(), newDir, snap); err != nil {
		t.Fatal(err)
	}

	startCursor(t, testConfig(newLeader, obs), desired(newDir, []int64{0}))
	testwait.For(t, 10*time.Second, "the new leader fans out 6–8", fileAt(t, newDir, 9))
	if got := newLeader.all(); !slices.Equal(got, []string{"m6", "m7", "m8"}) {
		t.Fatalf("the child got %v from the new leader, want [m6 m7 m8]", got)
	}
	if newLeader.leaderCalls.Load() != 0 {
		t.Fatal("resuming the replicated cursor anchored (asked the leader)")
	}
}
