package controller

import (
	"reflect"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

// A configured MinVoters is C3's voter target: with five servers and MinVoters 5, all five
// become voters (with the default of 3, the last two stay non-voters).
func TestVotersReconcileKeepsTheConfiguredMinimum(t *testing.T) {
	c := openCluster(t, []string{"a"}, "b", "c", "d", "e")
	ctl := c.start("a", nil, func(cfg *Config) { cfg.MinVoters = 5 })
	testwait.For(t, 15*time.Second, "five voters", func() bool { return len(c.voters()) == 5 })
	settle(t, ctl, 2)
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("voters = %v, want all five with MinVoters 5", got)
	}
}

// A configured MinVoters is also the decommission floor (min_voters): with 5, removing a
// voter of five is refused; with the default, it is allowed.
func TestDecommissionHonoursTheConfiguredMinVoters(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d", "e")
	five := []string{"a", "b", "c", "d", "e"}
	strict := c.manual(newMembership(five), &logRecorder{}, func(cfg *Config) { cfg.MinVoters = 5 })
	if got := strict.EvaluateDecommission("e"); got.Allowed || !reflect.DeepEqual(got.Reasons, []string{ReasonMinVoters}) {
		t.Fatalf("MinVoters 5, removing a voter of five: %+v, want refused with min_voters", got)
	}
	if got := c.manual(newMembership(five), &logRecorder{}, nil).EvaluateDecommission("e"); !got.Allowed {
		t.Fatalf("default MinVoters, removing a voter of five: %+v, want allowed", got)
	}
}

// The planner never has more moves in flight than the configured MaxInFlightMoves, and fills
// that budget while there is work.
func TestPlannerHonoursTheConfiguredMovesInFlight(t *testing.T) {
	const budget = 3
	c := openCluster(t, []string{"a"})
	c.join("b")
	st := c.leader()
	createOwned(t, st, "orders", ownedBy("orders", "a", 0, 20))
	log := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a"}, "b"), log, func(cfg *Config) { cfg.MaxInFlightMoves = budget })
	moved := 0
	for round := 0; round < 40; round++ {
		pass(t, ctl, log)
		pass(t, ctl, log)
		_, targeted := loads(st)
		n := sum(targeted)
		if n > budget {
			t.Fatalf("round %d: %d moves in flight, more than the configured %d", round, n, budget)
		}
		if n == 0 {
			break
		}
		if n != budget && moved+n != 10 {
			t.Fatalf("round %d: %d moves in flight with %d still to move; want the budget filled", round, n, 10-moved)
		}
		moved += flipAll(t, st)
	}
	if moved != 10 {
		t.Fatalf("moved %d, want 10 (half of 20 to the new node)", moved)
	}
}
