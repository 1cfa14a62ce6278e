package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/transfer"
)

// moveAway flips (topic, p) to owner "n2" through the real CAS entries, then aims it at
// target when target is non-empty.
func (n *testNode) moveAway(topic string, p int, target string) {
	n.t.Helper()
	ctx := n.ctx()
	if _, _, err := n.store.SetAssignmentTarget(ctx, topic, p, "n2", "n1"); err != nil {
		n.t.Fatal(err)
	}
	if res, _, err := n.store.CompleteMove(ctx, topic, p, "n1", "n2"); err != nil || res != meta.CASDone {
		n.t.Fatalf("flip: %v %v", res, err)
	}
	if target != "" {
		if _, _, err := n.store.SetAssignmentTarget(ctx, topic, p, target, "n2"); err != nil {
			n.t.Fatal(err)
		}
	}
}

// TestReclaimRefusesACopyOwnedOrTargetedHere: the reclaim steps re-check ownership under the
// guard and never touch a partition this node owns or is the move target of.
func TestReclaimRefusesACopyOwnedOrTargetedHere(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(tp, 0, "owned")
	n.mustCommit(tp, 1, "targeted")
	n.moveAway("t", 1, "n1") // owner n2, target n1

	for p := 0; p < 2; p++ {
		if _, _, err := n.e.ReclaimCopy("t", p, tp.Incarnation, 0, 1<<40); !errors.Is(err, ErrCopyClaimed) {
			t.Fatalf("ReclaimCopy(p%d) = %v, want ErrCopyClaimed", p, err)
		}
		if _, err := n.e.SetAsideCopy("t", p, tp.Incarnation, 0); !errors.Is(err, ErrCopyClaimed) {
			t.Fatalf("SetAsideCopy(p%d) = %v, want ErrCopyClaimed", p, err)
		}
		if got := nextOffsetOf(t, n.partDir("t", p)); got != 1 {
			t.Fatalf("p%d copy ends at %d after refused reclaims, want 1", p, got)
		}
	}

	// Once the move aimed here is aborted, the copy is stale and the owner's vouching removes it.
	if _, _, err := n.store.AbortMove(n.ctx(), "t", 1, "n1"); err != nil {
		t.Fatal(err)
	}
	to, next, err := n.e.ReclaimCopy("t", 1, tp.Incarnation, 0, 1)
	if err != nil || to != "" || next != 1 {
		t.Fatalf("ReclaimCopy = (%q, %d, %v), want removed at next 1", to, next, err)
	}
	if fileExists(n.partDir("t", 1)) {
		t.Fatal("a vouched stale copy was not removed")
	}
}

// TestReclaimRefusesASuccessorIncarnationsDir (MV-33, engine side): a reclaim for the
// incarnation read before ownership never acts on a topic dir whose marker names another
// incarnation (a successor's), and a missing copy is reported as absent.
func TestReclaimRefusesASuccessorIncarnationsDir(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(tp, 0, "successor's record")
	n.moveAway("t", 0, "")
	n.e.DropConsumerState("t", 0)
	if err := os.WriteFile(filepath.Join(n.topicDir("t"), datadir.IncarnationFile), []byte("aaaaaaaaaaaaaaaa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.e.ReclaimCopy("t", 0, tp.Incarnation, 0, 1<<40); !errors.Is(err, transfer.ErrIncarnationChanged) {
		t.Fatalf("ReclaimCopy = %v, want ErrIncarnationChanged", err)
	}
	if _, err := n.e.SetAsideCopy("t", 0, tp.Incarnation, 0); !errors.Is(err, transfer.ErrIncarnationChanged) {
		t.Fatalf("SetAsideCopy = %v, want ErrIncarnationChanged", err)
	}
	if got := nextOffsetOf(t, n.partDir("t", 0)); got != 1 {
		t.Fatalf("the successor's copy ends at %d, want 1", got)
	}
	if to, _, err := n.e.ReclaimCopy("t", 0, "aaaaaaaaaaaaaaaa", 0, 1<<40); err != nil || to != "" {
		t.Fatalf("ReclaimCopy with the dir's own incarnation = (%q, %v), want removed", to, err)
	}
	if _, _, err := n.e.ReclaimCopy("t", 0, "aaaaaaaaaaaaaaaa", 0, 1<<40); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReclaimCopy of a missing copy = %v, want ErrNotExist", err)
	}
}

// TestRemoveUnderGuardKeepsWhatALiveRecordClaims: the orphan sweep's removal of a deleted
// incarnation's directory re-checks under the guard that the marker is unchanged and no local
// record names it.
func TestRemoveUnderGuardKeepsWhatALiveRecordClaims(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	live := n.createTopic(service.CreateTopicRequest{Name: "live"})
	n.mustCommit(live, 0, "keep")
	gone := n.topicDir("gone")
	writeDir(t, gone, "fedcba9876543210")

	cases := []struct {
		name, topic, incarnation string
		wantRemoved              bool
	}{
		{"a live incarnation is kept", "live", live.Incarnation, false},
		{"a changed marker is kept", "gone", "0123456789abcdef", false},
		{"a deleted incarnation is removed", "gone", "fedcba9876543210", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			removed, err := n.e.removeUnderGuard(tc.topic, n.topicDir(tc.topic), tc.incarnation, true)
			if err != nil || removed != tc.wantRemoved {
				t.Fatalf("removeUnderGuard = (%v, %v), want %v", removed, err, tc.wantRemoved)
			}
			if exists(n.topicDir(tc.topic)) == tc.wantRemoved {
				t.Fatalf("dir exists=%v after removed=%v", exists(n.topicDir(tc.topic)), removed)
			}
		})
	}
	if msgs := n.replay(live, 0); len(msgs) != 1 {
		t.Fatalf("live topic lost records: %v", msgs)
	}

	staleLive := filepath.Join(n.dir, ".stale", "live@"+live.Incarnation)
	staleGone := filepath.Join(n.dir, ".stale", "live@0123456789abcdef")
	writeDir(t, staleLive, "")
	writeDir(t, staleGone, "")
	if removed, err := n.e.RemoveStaleDir("live", live.Incarnation); err != nil || removed || !exists(staleLive) {
		t.Fatalf("RemoveStaleDir(live incarnation) = (%v, %v); dir exists %v", removed, err, exists(staleLive))
	}
	if removed, err := n.e.RemoveStaleDir("live", "0123456789abcdef"); err != nil || !removed || exists(staleGone) {
		t.Fatalf("RemoveStaleDir(gone incarnation) = (%v, %v); dir exists %v", removed, err, exists(staleGone))
	}
}
