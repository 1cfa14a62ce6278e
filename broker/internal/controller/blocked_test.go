package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/metrics"
)

// C7: narad_moves_blocked{source_dead,target_dead} count the blocked moves while leading and
// are zeroed when leadership is lost; each blocked move is logged at error once per term.
func TestMovesBlockedGaugesCountDeadSourcesAndTargetsAndZeroOnLeadershipLoss(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "x", "y")
	st := c.leader()
	// orders/0: source x (dies); orders/1, /2: target y (dies); orders/3: healthy move a → b.
	createOwned(t, st, "orders", ownedBy("orders", "x", 0, 1), ownedBy("orders", "a", 1, 3), ownedBy("orders", "b", 4, 3))
	aim(t, st, "orders", 0, "x", "b")
	aim(t, st, "orders", 1, "a", "y")
	aim(t, st, "orders", 2, "a", "y")
	aim(t, st, "orders", 3, "a", "b")
	dead(t, st, "x", "y")
	m := metrics.New()
	log := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a"}, "b", "x", "y"), log, func(cfg *Config) { cfg.Metrics = m })
	sourceDead := func() float64 { return testutil.ToFloat64(m.MovesBlocked.WithLabelValues(BlockedSourceDead)) }
	targetDead := func() float64 { return testutil.ToFloat64(m.MovesBlocked.WithLabelValues(BlockedTargetDead)) }

	pass(t, ctl, log)
	pass(t, ctl, log)
	if sourceDead() != 1 || targetDead() != 2 {
		t.Fatalf("moves_blocked source_dead=%v target_dead=%v, want 1 and 2", sourceDead(), targetDead())
	}
	if n, k := len(log.find("move blocked: its source is dead or not a member")), len(log.find("move blocked: its target is dead")); n != 1 || k != 2 {
		t.Fatalf("blocked-move logs over two passes: %d source, %d target; want 1 and 2 (once per move per term)", n, k)
	}

	ctl.setLeading(false)
	if sourceDead() != 0 || targetDead() != 0 {
		t.Fatalf("after losing leadership source_dead=%v target_dead=%v, want 0", sourceDead(), targetDead())
	}
	pass(t, ctl, log) // a new leadership logs again
	if n := len(log.find("move blocked: its source is dead or not a member")); n != 2 {
		t.Fatalf("source-dead logs after a new leadership = %d, want 2", n)
	}
}

// C7: narad_decommission_blocked{node,reason} is 1 while the reason holds and its series is
// deleted once it clears or leadership is lost.
func TestDecommissionBlockedSeriesSetWhileBlockedAndDeletedWhenCleared(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st := c.leader()
	draining(t, st, "d")
	ms := newMembership([]string{"a", "b", "c", "d"})
	prober := &statusProber{}
	prober.set("d", Status{DrainingSeen: true})
	m := metrics.New()
	log := &logRecorder{}
	ctl := c.manual(ms, log, func(cfg *Config) { cfg.Metrics, cfg.Prober = m, prober })

	pass(t, ctl, log)
	if got := testutil.ToFloat64(m.DecommissionBlocked.WithLabelValues("d", ReasonIngressBacklog)); got != 1 {
		t.Fatalf("decommission_blocked{d,ingress_backlog} = %v, want 1", got)
	}
	ctl.setLeading(false)
	if n := testutil.CollectAndCount(m.DecommissionBlocked); n != 0 {
		t.Fatalf("%d decommission_blocked series after losing leadership, want 0", n)
	}
	if got := ctl.DecommissionBlocked(); len(got) != 0 {
		t.Fatalf("DecommissionBlocked off the leader = %v, want empty", got)
	}

	pass(t, ctl, log)
	if n := testutil.CollectAndCount(m.DecommissionBlocked); n != 1 {
		t.Fatalf("%d series while blocked, want 1", n)
	}
	prober.set("d", Status{DrainingSeen: true, RefusingProduce: true})
	pass(t, ctl, log)
	if n := testutil.CollectAndCount(m.DecommissionBlocked); n != 0 {
		t.Fatalf("%d series after the reason cleared, want 0", n)
	}
	if removed, _ := ms.calls(); len(removed) != 1 || removed[0] != "d" {
		t.Fatalf("removed = %v, want [d]", removed)
	}
}
