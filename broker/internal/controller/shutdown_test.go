package controller

import (
	"log/slog"
	"reflect"
	"testing"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
)

// stoppingNode is a controller acting for node id (not the Raft leader) on the rig's store:
// what a follower's process runs on SIGTERM. Its elections share the rig's metrics and audit.
func (r *electionRig) stoppingNode(id string) *Controller {
	return New(Config{Store: r.st, NodeID: id, Now: r.c.clock.Now, Metrics: r.m,
		Audit: audit.New(slog.New(r.audit), id), Logger: slog.New(r.log)})
}

// Controlled shutdown (docs/internals/replication.md §9): b leads two replicated partitions
// and stops. The one with a live in-sync follower moves to it (reason shutdown, counted and
// audited); the one whose ISR is b alone stays and is reported left. b then leaves the ISRs it
// follows that keep M members without it. While b is stopping the controller's
// preferred-leader rebalance does not give it back; b's first plain heartbeat (a restart)
// clears the flag and, once back in sync, the preferred leader returns.
func TestHandOffLeadersMovesLeadershipOffAStoppingNode(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}, []string{"c", "b", "d"}))
		createReplicated(t, st, "solo", false, replicated("solo", nil, []string{"b", "c"}))
		setISR(t, st, "solo", 0, "b")
		createOwned(t, st, "plain", ownedBy("plain", "b", 0, 1))
	})
	t.Cleanup(func() {
		if t.Failed() {
			r.log.dump(t)
		}
	})
	left, err := r.stoppingNode("b").HandOffLeaders(ctxT(t))
	if err != nil || left != 1 {
		t.Fatalf("HandOffLeaders = %d, %v; want 1 left (solo/0 has no other in-sync replica), nil", left, err)
	}
	if a := assignment(t, r.st, "orders", 0); a.Owner != "c" || a.LeaderEpoch != 1 {
		t.Fatalf("orders/0 = %+v, want c (first live ISR member) at epoch 1", a)
	}
	if a := assignment(t, r.st, "orders", 1); a.Owner != "c" || a.LeaderEpoch != 0 {
		t.Fatalf("orders/1, led by c, changed: %+v", a)
	}
	if a := assignment(t, r.st, "solo", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("solo/0 = %+v, want b still (its ISR is b alone)", a)
	}
	if a := assignment(t, r.st, "plain", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("single-replica plain/0 changed: %+v", a)
	}
	if m, _ := r.st.Member("b"); !m.Stopping {
		t.Fatalf("member b = %+v, want stopping", m)
	}
	for p := range 2 {
		if a := assignment(t, r.st, "orders", p); !reflect.DeepEqual(a.InSync(), []string{"c", "d"}) {
			t.Fatalf("orders/%d isr = %v, want [c d]: b left it on its way out", p, a.InSync())
		}
	}
	if got := r.elections(meta.ElectShutdown); got != 1 {
		t.Fatalf("narad_leader_elections_total{reason=shutdown} = %v, want 1", got)
	}
	want := map[string]string{"event": "cluster.leader.elect", "actor": audit.ActorController, "target": "orders/0",
		"outcome": audit.OK, "leader": "c", "previous": "b", "reason": "shutdown", "epoch": "1"}
	if recs := r.audit.find(audit.Message); len(recs) != 1 || !hasAttrs(recs[0], want) {
		t.Fatalf("audit records %+v, want one with %v", recs, want)
	}

	// b is 100 % misled as preferred leader of orders/0, but stopping: no election back, and
	// the failover backstop has nothing to move (solo/0 has no candidate).
	pass(t, r.ctl, r.log)
	pass(t, r.ctl, r.log)
	if a := assignment(t, r.st, "orders", 0); a.Owner != "c" || a.LeaderEpoch != 1 {
		t.Fatalf("orders/0 = %+v while b stops, want c still at epoch 1", a)
	}
	if r.elections(meta.ElectPreferred) != 0 || r.elections(meta.ElectShutdown) != 1 {
		t.Fatalf("elections while b stops: preferred %v shutdown %v, want 0 and 1",
			r.elections(meta.ElectPreferred), r.elections(meta.ElectShutdown))
	}

	r.c.beat("b") // b restarted: a plain heartbeat
	if m, _ := r.st.Member("b"); m.Stopping {
		t.Fatal("a plain heartbeat left b stopping")
	}
	setISR(t, r.st, "orders", 0, "b", "c", "d") // c's expand once b caught up
	pass(t, r.ctl, r.log)
	if a := assignment(t, r.st, "orders", 0); a.Owner != "b" || a.LeaderEpoch != 2 {
		t.Fatalf("orders/0 = %+v after b returned, want b (preferred) at epoch 2", a)
	}
}

// A node in no replicated partition's ISR stops as before: nothing is proposed, not even the
// stopping flag (a node without quorum must not wait for it).
func TestHandOffLeadersOutsideEveryISRProposesNothing(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"c", "b", "d"}))
		setISR(t, st, "orders", 0, "c", "d")
		createOwned(t, st, "plain", ownedBy("plain", "b", 0, 1))
	})
	left, err := r.stoppingNode("b").HandOffLeaders(ctxT(t))
	if err != nil || left != 0 {
		t.Fatalf("HandOffLeaders = %d, %v; want 0, nil", left, err)
	}
	if m, _ := r.st.Member("b"); m.Stopping {
		t.Fatal("b marked stopping although it leads no replicated partition")
	}
	if n := len(r.audit.find(audit.Message)); n != 0 {
		t.Fatalf("audit records = %d, want 0", n)
	}
}

// The controller's failover duty is the backstop: a leader marked stopping whose own
// proposals never came (a timeout, a crash right after the flag) loses its partitions to a
// live in-sync replica with reason shutdown on the next pass; a stopping replica is never a
// candidate, in failover either.
func TestFailoverMovesLeadershipOffAStoppingLeader(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}, []string{"c", "d", "b"}))
	})
	if err := r.st.MemberStopping(ctxT(t), "b", r.c.clock.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	if err := r.st.MemberStopping(ctxT(t), "d", r.c.clock.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	pass(t, r.ctl, r.log)
	if a := assignment(t, r.st, "orders", 0); a.Owner != "c" || a.LeaderEpoch != 1 {
		t.Fatalf("orders/0 = %+v, want c at epoch 1", a)
	}
	// c, now leading both, goes silent; b and d heartbeat but are stopping: no candidate.
	now := r.c.advance(DefaultReplicaFailoverAfter+DefaultReplicaFailoverAfter/2, "a")
	for _, id := range []string{"b", "d"} {
		if err := r.st.MemberStopping(ctxT(t), id, now.Unix()); err != nil {
			t.Fatal(err)
		}
	}
	plan := r.ctl.readLeaderView().planFailover()
	if len(plan.elections) != 0 || len(plan.waiting) != 2 {
		t.Fatalf("failover plan %+v, want both partitions waiting (the live replicas are stopping)", plan)
	}
	if got := r.elections(meta.ElectShutdown); got != 1 {
		t.Fatalf("shutdown elections = %v, want 1", got)
	}
}

// planShutdown's rule on a view: the first live in-sync replica that is not stopping.
func TestPlanShutdownRules(t *testing.T) {
	bcd := []string{"b", "c", "d"}
	as := []meta.Assignment{part("t", "b", bcd, bcd)}
	v := viewOf([]meta.Topic{rtopic("t", 3, false)}, as, nil, nil, nil)
	m := v.members["c"]
	m.Stopping = true
	v.members["c"] = m
	es, led, stuck := v.planShutdown(func(id string) bool { return id == "b" })
	if led != 1 || stuck != 0 || len(es) != 1 {
		t.Fatalf("plan = %+v led %d stuck %d, want one election", es, led, stuck)
	}
	if got := (election{To: es[0].To, Reason: es[0].Reason}); !reflect.DeepEqual(got, election{To: "d", Reason: meta.ElectShutdown}) {
		t.Fatalf("election %+v, want to d (c is stopping) with reason shutdown", es[0])
	}
	moving := as[0]
	moving.Target = "e"
	if es, led, stuck := viewOf([]meta.Topic{rtopic("t", 3, false)}, []meta.Assignment{moving}, nil, nil, nil).
		planShutdown(func(id string) bool { return id == "b" }); len(es) != 0 || led != 1 || stuck != 1 {
		t.Fatalf("a partition with a move in flight: %+v led %d stuck %d, want stuck", es, led, stuck)
	}
}

// A follower that stops leaves an ISR only when M members remain without it.
func TestPlanLeaveISRKeepsMinInsync(t *testing.T) {
	bcd := []string{"b", "c", "d"}
	m3 := rtopic("t3", 3, false)
	m3.MinInsyncReplicas = 3
	v := viewOf([]meta.Topic{rtopic("t", 3, false), m3, rtopic("u", 3, false)}, []meta.Assignment{
		part("t", "c", bcd, bcd),                // leaves: [c d] keeps M = 2
		part("t3", "c", bcd, bcd),               // stays: M = 3
		part("u", "c", bcd, []string{"c", "b"}), // stays: [c] < 2
	}, nil, nil, nil)
	got := v.planLeaveISR("b")
	if len(got) != 1 || got[0].Topic != "t" || !reflect.DeepEqual(got[0].To, []string{"c", "d"}) {
		t.Fatalf("planLeaveISR = %+v, want t/0 to [c d] only", got)
	}
	if v.planLeaveISR("c") != nil {
		t.Fatal("a leader leaves no ISR")
	}
}
