package controller

import (
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

// A replicated partition's failed leader is replaced between passes: with the next pass an
// hour away, C10 runs on its own within FailoverCheck of the leader's silence passing
// ReplicaFailoverAfter, and no pass is run for it.
func TestFailoverRunsBetweenPasses(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	createReplicated(t, c.leader(), "orders", false, replicated("orders", nil, []string{"b", "c", "d"}))
	createOwned(t, c.leader(), "plain", ownedBy("plain", "b", 0, 1))
	ctl := c.start("a", nil, func(cfg *Config) {
		cfg.Tick, cfg.FailoverCheck = time.Hour, 10*time.Millisecond
	})
	testwait.For(t, 15*time.Second, "the first pass", func() bool { return ctl.passes.Load() == 1 })
	if a := assignment(t, c.leader(), "orders", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("orders/0 = %+v before any silence, want b leading at epoch 0", a)
	}

	c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "c", "d")
	testwait.For(t, 15*time.Second, "orders/0 failed over to c", func() bool {
		a := assignment(t, c.leader(), "orders", 0)
		return a.Owner == "c" && a.LeaderEpoch == 1
	})
	if n := ctl.passes.Load(); n != 1 {
		t.Fatalf("%d passes ran, want the first only: the election came from the check", n)
	}
	if a := assignment(t, c.leader(), "plain", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("single-replica plain/0 changed: %+v", a)
	}
}

// The check leaves a partition alone while it cannot elect anyone (no live in-sync replica),
// and elects as soon as one is live again.
func TestFailoverCheckWaitsForALiveInSyncReplica(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	createReplicated(t, c.leader(), "orders", false, replicated("orders", nil, []string{"b", "c", "d"}))
	setISR(t, c.leader(), "orders", 0, "b", "c")
	ctl := c.start("a", nil, func(cfg *Config) {
		cfg.Tick, cfg.FailoverCheck = time.Hour, 10*time.Millisecond
	})
	testwait.For(t, 15*time.Second, "the first pass", func() bool { return ctl.passes.Load() == 1 })

	// b and c silent: d is live but out of sync, so there is no one to elect.
	c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "d")
	checked := ctl.checks.Load()
	testwait.For(t, 15*time.Second, "failover checks", func() bool { return ctl.checks.Load() >= checked+5 })
	if a := assignment(t, c.leader(), "orders", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("orders/0 = %+v with no live in-sync replica, want it left to b at epoch 0", a)
	}
	c.beat("c")
	testwait.For(t, 15*time.Second, "orders/0 failed over to c", func() bool {
		a := assignment(t, c.leader(), "orders", 0)
		return a.Owner == "c" && a.LeaderEpoch == 1
	})
}
