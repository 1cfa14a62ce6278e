package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
)

// seedCounter is a C8 callback that seeds the root user through the store it is given.
type seedCounter struct {
	mu    sync.Mutex
	calls int
	st    *meta.Store
}

func (s *seedCounter) seed(ctx context.Context) error {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	_, err := s.st.SeedRootUser(ctx, meta.User{Username: "admin", PasswordHash: "h", Root: true})
	return err
}

func (s *seedCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func TestOnlyTheLeaderActs(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"})
	probers := map[string]*fakeProber{}
	seeds := map[string]*seedCounter{}
	ctls := map[string]*Controller{}
	for _, id := range c.ids {
		probers[id] = &fakeProber{stores: c.stores, lag: map[string]bool{}}
		seeds[id] = &seedCounter{st: c.stores[id]}
		ctls[id] = c.start(id, nil, func(cfg *Config) {
			cfg.Prober, cfg.SeedRoot = probers[id], seeds[id].seed
		})
	}
	// Work for the duties: a silent member, an unassigned topic, a root to seed.
	if err := c.leader().CreateTopic(ctxT(t), topic("orders", 3), nil); err != nil {
		t.Fatal(err)
	}
	settle(t, ctls["a"], 1)
	c.expireSilent("a")
	testwait.For(t, 15*time.Second, "the leader's pass to act", func() bool {
		return c.leader().RootSeeded() && len(c.leader().Assignments("orders")) == 3 &&
			status(t, c.leader(), "b") == meta.MemberDead
	})
	settle(t, ctls["a"], 2)
	if seeds["a"].count() != 1 {
		t.Fatalf("leader seeded the root %d times, want once", seeds["a"].count())
	}
	for _, id := range []string{"b", "c"} {
		if n := ctls[id].passes.Load(); n != 0 {
			t.Fatalf("follower %s ran %d passes", id, n)
		}
		if seeds[id].count() != 0 || probers[id].callCount() != 0 {
			t.Fatalf("follower %s acted: %d seeds, %d probes", id, seeds[id].count(), probers[id].callCount())
		}
	}
	for _, id := range []string{"b", "c"} {
		if _, ok := ctls[id].DeadSince("b"); ok {
			t.Fatalf("follower %s keeps dead_since", id)
		}
	}
}

// The placement lock is the one the leader's topic create takes: while it is held, no
// placement duty runs.
func TestPlacementLockBlocksAssignment(t *testing.T) {
	c := openCluster(t, []string{"a"})
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 1)
	ctl.PlacementLock().Lock()
	if err := c.leader().CreateTopic(ctxT(t), topic("orders", 3), nil); err != nil {
		ctl.PlacementLock().Unlock()
		t.Fatal(err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := len(c.leader().Assignments("orders")); n != 0 {
			ctl.PlacementLock().Unlock()
			t.Fatalf("%d partitions assigned while the placement lock was held", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctl.PlacementLock().Unlock()
	testwait.For(t, 15*time.Second, "assignment after the lock is released", func() bool { return len(c.leader().Assignments("orders")) == 3 })
}

func TestLosingLeadershipForgetsDeadSince(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b")
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 1)
	c.expireSilent("a")
	testwait.For(t, 15*time.Second, "b dead", func() bool { _, ok := ctl.DeadSince("b"); return ok })
	ctl.setLeading(false)
	if _, ok := ctl.DeadSince("b"); ok {
		t.Fatal("dead_since survived the loss of leadership")
	}
}

func TestMemberGCRemovesOnlyRecordsMeetingEveryCondition(t *testing.T) {
	c := openCluster(t, []string{"a"})
	st, ctx := c.leader(), ctxT(t)
	c.join("gone", "owner", "target", "inraft", "recent", "alive")
	if err := st.CreateTopic(ctx, topic("orders", 3), []meta.Assignment{
		{Topic: "orders", Partition: 0, Owner: "owner"}, {Topic: "orders", Partition: 1, Owner: "a"}, {Topic: "orders", Partition: 2, Owner: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SetAssignmentTarget(ctx, "orders", 1, "target", "a"); err != nil {
		t.Fatal(err)
	}
	if err := st.AddNonvoter(ctx, "inraft", "inraft"); err != nil {
		t.Fatal(err)
	}
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 1)

	c.expireSilent("a", "recent", "alive") // four die now
	testwait.For(t, 15*time.Second, "four members dead", func() bool {
		return status(t, st, "inraft") == meta.MemberDead && status(t, st, "gone") == meta.MemberDead
	})
	c.advance(30*time.Minute, "a", "alive") // "recent" falls silent
	testwait.For(t, 15*time.Second, "recent dead", func() bool { return status(t, st, "recent") == meta.MemberDead })

	c.advance(DefaultRemoveDeadAfter-30*time.Minute, "a", "alive") // the four: dead ≥ 1 h; recent: ~30 min
	testwait.For(t, 15*time.Second, "gone collected", func() bool { return status(t, st, "gone") == "missing" })
	settle(t, ctl, 2)
	// "target" is collected too: C4 clears a move aimed at a dead member outside the Raft
	// configuration at once, after which nothing keeps its record.
	for id, want := range map[string]string{"owner": meta.MemberDead, "target": "missing",
		"inraft": meta.MemberDead, "recent": meta.MemberDead, "alive": meta.MemberAlive, "a": meta.MemberAlive} {
		if got := status(t, st, id); got != want {
			t.Errorf("%s is %s, want %s", id, got, want)
		}
	}
	if _, ok := ctl.DeadSince("gone"); ok {
		t.Fatal("dead_since kept for a collected member")
	}
}
