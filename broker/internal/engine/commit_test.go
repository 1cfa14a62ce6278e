package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

func TestCommitTimeNeverDecreasesWhenTheClockStepsBack(t *testing.T) {
	for _, tc := range []struct {
		name         string
		closeBetween bool // the floor lives in the engine and survives a log close/reopen
	}{
		{"same open log", false},
		{"log closed and reopened between commits", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, t.TempDir(), nil)
			top := n.createTopic(service.CreateTopicRequest{Name: "clock", Partitions: 3})
			n.mustCommit(top, 1, "first")
			if tc.closeBetween {
				n.e.parts.ClosePartition(n.e.parts.Peek(top.Name, 1))
			}
			n.clock.Step(-5 * time.Second)
			n.mustCommit(top, 1, "second")

			msgs := n.replay(top, 1)
			if len(msgs) != 2 {
				t.Fatalf("replayed %d records, want 2", len(msgs))
			}
			if a, b := msgs[0].CommittedAtMs, msgs[1].CommittedAtMs; b < a {
				t.Fatalf("committed_at went backwards along the partition: %d then %d", a, b)
			}
			// Another partition has its own floor: it stamps the stepped-back clock.
			n.mustCommit(top, 2, "other")
			other := n.replay(top, 2)[0].CommittedAtMs
			if now := n.clock.Now().UnixMilli(); other > now {
				t.Fatalf("partition 2 stamped %d, ahead of its clock %d: floors leak across partitions", other, now)
			}
		})
	}
}

func TestCommitRefusedWhenAnotherNodeOwnsThePartition(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	// A second live member: placement puts partition 1 on it (candidates sorted n1, n2).
	if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "127.0.0.1:4",
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "split", Partitions: 3})
	if a, _ := n.store.Assignment(top.Name, 1); a.Owner != "n2" {
		t.Fatalf("partition 1 placed on %q, want n2", a.Owner)
	}
	_, err := n.commit(top, 1, "x")
	if !errors.Is(err, errcode.ErrNotOwner) {
		t.Fatalf("commit on n2's partition: %v, want errcode.ErrNotOwner", err)
	}
	if n.e.parts.Peek(top.Name, 1) != nil || !isGone(n.partDir(top.Name, 1)) {
		t.Fatal("a refused commit opened or created the partition log of another node's partition")
	}
	st := n.e.PartitionStats(n.ctx(), top, 1)
	if len(st) != 1 || st[0].OwnerNode != "n2" || st[0].Available {
		t.Fatalf("stats of the remote partition: %+v", st)
	}
	// Its own partitions still commit.
	if _, err := n.commit(top, 0, "y"); err != nil {
		t.Fatal(err)
	}
}

func TestCommitRechecksOwnershipUnderTheProduceLock(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "127.0.0.1:4",
		Status: meta.MemberAlive}); err != nil {
		t.Fatal(err)
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "flip", Partitions: 3})
	n.mustCommit(top, 0, "before")
	pt := n.e.parts.Peek(top.Name, 0)
	next := pt.Log().NextOffset()

	// Hold the produce lock: the commit passes its fast ownership gate and parks on the lock.
	pt.LockCommits()
	done := make(chan error, 1)
	go func() {
		_, err := n.commit(top, 0, "after-flip")
		done <- err
	}()
	waitGoroutine(t, "sync.Mutex.Lock", "narad.dev/broker/internal/partition.(*Registry).appendGrouped")

	// Ownership flips away while it waits.
	ctx := n.ctx()
	if _, _, err := n.store.SetAssignmentTarget(ctx, top.Name, 0, "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.store.CompleteMove(ctx, top.Name, 0, "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	pt.UnlockCommits()

	if err := <-done; !errors.Is(err, errcode.ErrNotOwner) {
		t.Fatalf("commit after the flip: %v, want errcode.ErrNotOwner", err)
	}
	if got := pt.Log().NextOffset(); got != next {
		t.Fatalf("next_offset %d → %d: the refused commit appended", next, got)
	}
}

func TestCommitRejectsAnotherIncarnation(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "inc", Partitions: 3})
	stale := top
	stale.Incarnation = "ffffffffffffffff"
	_, err := n.e.CommitLocal(context.Background(), top.Name, stale.Incarnation, 0, nil)
	if !errors.Is(err, errcode.ErrInvalid) {
		t.Fatalf("empty batch: %v, want ErrInvalid", err)
	}
	if _, err := n.commit(stale, 0, "x"); !errors.Is(err, errcode.ErrTopicGone) {
		t.Fatalf("commit for another incarnation: %v, want errcode.ErrTopicGone", err)
	}
	if _, err := n.commit(top, 3, "x"); !errors.Is(err, errcode.ErrInvalid) {
		t.Fatalf("commit past the partition count: %v, want ErrInvalid", err)
	}
	if !isGone(n.topicDir(top.Name)) {
		t.Fatal("refused commits created the topic directory")
	}
}
