package controller

import (
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/placement"
)

// leavingOf is a leavingSet of the listed nodes.
func leavingOf(ids ...string) leavingSet {
	return func(id string) bool { return slices.Contains(ids, id) }
}

// nodesExcept is the placement nodes a … e without the listed ones, each its own rack.
func nodesExcept(ids ...string) []placement.Node {
	var out []placement.Node
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if !slices.Contains(ids, id) {
			out = append(out, placement.Node{ID: id})
		}
	}
	return out
}

// The desired set and the one step of C12 (docs/internals/replication.md §9), per case.
func TestPlanReassignSteps(t *testing.T) {
	abc := []string{"a", "b", "c"}
	cases := []struct {
		name    string
		topic   meta.Topic
		a       meta.Assignment
		leaving []string
		nodes   []placement.Node
		load    map[string]placement.Load
		want    *reassignStep // Kind, Replicas, ISR, To
	}{
		{name: "settled: nothing", topic: rtopic("t", 3, false), a: part("t", "a", abc, abc), nodes: nodesExcept()},
		{name: "R raised: the least loaded node joins out of sync", topic: rtopic("t", 4, false), a: part("t", "a", abc, abc),
			nodes: nodesExcept(), load: map[string]placement.Load{"d": {Replicas: 3}},
			want: &reassignStep{Kind: stepAdd, Replicas: []string{"a", "b", "c", "e"}, ISR: abc}},
		{name: "R raised: waits while the newcomer catches up", topic: rtopic("t", 4, false),
			a: part("t", "a", []string{"a", "b", "c", "e"}, abc), nodes: nodesExcept()},
		{name: "R lowered: an out-of-sync follower goes first", topic: rtopic("t", 2, false),
			a: part("t", "a", abc, []string{"a", "c"}), nodes: nodesExcept(),
			want: &reassignStep{Kind: stepDrop, Replicas: []string{"a", "c"}, ISR: []string{"a", "c"}}},
		{name: "R lowered: the last in-sync follower, never the leader", topic: rtopic("t", 2, false),
			a: part("t", "c", abc, abc), nodes: nodesExcept(),
			want: &reassignStep{Kind: stepDrop, Replicas: []string{"a", "c"}, ISR: []string{"a", "c"}}},
		{name: "R lowered to the leader's partner when all are out of sync: waits", topic: rtopic("t", 2, false),
			a: part("t", "a", abc, []string{"a"}), nodes: nodesExcept()},
		{name: "leaving follower: replaced first", topic: rtopic("t", 3, false), a: part("t", "a", abc, []string{"a", "c"}),
			leaving: []string{"b"}, nodes: nodesExcept("b"), load: map[string]placement.Load{"e": {Replicas: 1}},
			want: &reassignStep{Kind: stepAdd, Replicas: []string{"a", "b", "c", "d"}, ISR: []string{"a", "c"}}},
		{name: "leaving follower: dropped once the replacement is in sync", topic: rtopic("t", 3, false),
			a: part("t", "a", []string{"a", "b", "c", "d"}, []string{"a", "c", "d"}), leaving: []string{"b"}, nodes: nodesExcept("b"),
			want: &reassignStep{Kind: stepDrop, Replicas: []string{"a", "c", "d"}, ISR: []string{"a", "c", "d"}}},
		{name: "leaving leader: leadership moves first", topic: rtopic("t", 3, false),
			a: part("t", "a", []string{"a", "b", "c", "d"}, []string{"a", "b", "c", "d"}), leaving: []string{"a"}, nodes: nodesExcept("a"),
			want: &reassignStep{Kind: stepLead, To: "b"}},
		{name: "no node to place on: nothing", topic: rtopic("t", 3, false), a: part("t", "a", abc, abc),
			leaving: []string{"b"}, nodes: []placement.Node{{ID: "a"}, {ID: "c"}}},
		{name: "a move in flight: left alone", topic: rtopic("t", 4, false),
			a: meta.Assignment{Topic: "t", Owner: "a", Target: "d", Replicas: abc, ISR: abc}, nodes: nodesExcept()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := viewOf([]meta.Topic{c.topic}, []meta.Assignment{c.a}, nil, nil, nil)
			load := c.load
			if load == nil {
				load = map[string]placement.Load{}
			}
			got := v.planReassign(leavingOf(c.leaving...), c.nodes, load, MaxReassignSteps)
			if c.want == nil {
				if len(got) != 0 {
					t.Fatalf("steps %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("steps %+v, want one", got)
			}
			s := got[0]
			if s.Kind != c.want.Kind || !reflect.DeepEqual(s.Replicas, c.want.Replicas) || !reflect.DeepEqual(s.ISR, c.want.ISR) ||
				s.To != c.want.To || s.Epoch != c.a.LeaderEpoch {
				t.Fatalf("step %+v, want %+v", s, *c.want)
			}
		})
	}
}

// A failed leader is C10's: C12 plans nothing for it; and the steps of one pass are bounded.
func TestPlanReassignSkipsFailedLeadersAndIsBounded(t *testing.T) {
	topics := []meta.Topic{rtopic("t", 3, false)}
	var as []meta.Assignment
	for p := range 10 {
		as = append(as, meta.Assignment{Topic: "t", Partition: p, Owner: "b", Replicas: []string{"b", "c", "d"}, ISR: []string{"b", "c", "d"}})
	}
	v := viewOf(topics, as, []string{"b"}, nil, nil)
	if got := v.planReassign(leavingOf("c"), nodesExcept("c"), map[string]placement.Load{}, MaxReassignSteps); len(got) != 0 {
		t.Fatalf("steps for partitions whose leader failed: %+v", got)
	}
	v = viewOf(topics, as, nil, nil, nil)
	if got := v.planReassign(leavingOf("c"), nodesExcept("c"), map[string]placement.Load{}, 3); len(got) != 3 {
		t.Fatalf("%d steps, want the bound 3", len(got))
	}
}

// The leaving rule: gone or draining at once, dead only after ReReplicateAfter on this
// leader's clock, never with ReReplicateAfter 0.
func TestLeavingRule(t *testing.T) {
	ctl := &Controller{deadSince: map[string]time.Time{"c": planNow.Add(-10 * time.Minute), "d": planNow.Add(-9 * time.Minute)},
		cfg: Config{ReReplicateAfter: 10 * time.Minute}}
	v := viewOf(nil, nil, nil, []string{"c", "d", "e"}, []string{"b"})
	l := ctl.leaving(v)
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": false, "e": false, "gone": true} {
		if got := l(id); got != want {
			t.Errorf("leaving(%s) = %v, want %v", id, got, want)
		}
	}
	ctl.cfg.ReReplicateAfter = 0
	if ctl.leaving(v)("c") {
		t.Error("a dead member leaves with ReReplicateAfter 0")
	}
}

// reassignRig is a manual controller on a cluster led by a, with b, c, d members, metrics,
// an audit trail and ReReplicateAfter 5 min.
func newReassignRig(t *testing.T, setup func(st *meta.Store)) *electionRig {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	r := &electionRig{c: c, st: c.leader(), log: &logRecorder{}, audit: &logRecorder{}, m: metrics.New()}
	setup(r.st)
	r.ctl = c.manual(newMembership([]string{"a"}, "b", "c", "d"), r.log, func(cfg *Config) {
		cfg.Metrics, cfg.Audit = r.m, audit.New(slog.New(r.audit), "a")
		cfg.ReReplicateAfter = 5 * time.Minute
	})
	pass(t, r.ctl, r.log)
	t.Cleanup(func() {
		if t.Failed() {
			r.log.dump(t)
		}
	})
	return r
}

// Re-replication end to end in the metastore: a follower dead for ReReplicateAfter is
// replaced by a node that joins out of sync; once the leader has added it to the ISR (op 23),
// the dead replica is dropped. Before ReReplicateAfter nothing changes.
func TestReReplicationReplacesADeadFollower(t *testing.T) {
	r := newReassignRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}))
	})
	r.c.expireSilent("a", "b", "c") // d is marked dead now
	pass(t, r.ctl, r.log)
	if s := status(t, r.st, "d"); s != meta.MemberDead {
		t.Fatalf("d is %s", s)
	}
	r.c.advance(5*time.Minute-time.Second, "a", "b", "c")
	pass(t, r.ctl, r.log)
	if a := assignment(t, r.st, "orders", 0); !reflect.DeepEqual(a.ReplicaSet(), []string{"b", "c", "d"}) {
		t.Fatalf("replicas changed before re-replicate-after: %+v", a)
	}
	r.c.advance(time.Second, "a", "b", "c")
	pass(t, r.ctl, r.log)
	a := assignment(t, r.st, "orders", 0)
	if !reflect.DeepEqual(a.ReplicaSet(), []string{"b", "c", "d", "a"}) || slices.Contains(a.InSync(), "a") {
		t.Fatalf("after re-replicate-after: %+v, want a added out of sync", a)
	}
	pass(t, r.ctl, r.log) // a has not caught up: nothing
	if got := assignment(t, r.st, "orders", 0); !reflect.DeepEqual(got.ReplicaSet(), a.ReplicaSet()) {
		t.Fatalf("changed while the newcomer catches up: %+v", got)
	}
	setISR(t, r.st, "orders", 0, "b", "c", "a") // the leader shrank d and expanded a
	pass(t, r.ctl, r.log)
	a = assignment(t, r.st, "orders", 0)
	if !reflect.DeepEqual(a.ReplicaSet(), []string{"b", "c", "a"}) || !reflect.DeepEqual(a.InSync(), []string{"b", "c", "a"}) ||
		a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("after the catch-up: %+v, want replicas and isr [b c a] under b at epoch 0", a)
	}
	if recs := r.audit.find(audit.Message); len(recs) != 2 {
		t.Fatalf("%d audit records, want 2 (add, drop)", len(recs))
	}
}

// A draining leader hands its leadership to a desired in-sync replica (op 24, reason
// reassign, counted) before op 25 drops it; a lowered replication factor then drops an
// out-of-sync follower first.
func TestDrainingLeaderMovesLeadershipThenLeaves(t *testing.T) {
	r := newReassignRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c"}))
	})
	if err := r.st.SetMemberDraining(ctxT(t), "b", true); err != nil {
		t.Fatal(err)
	}
	pass(t, r.ctl, r.log)
	a := assignment(t, r.st, "orders", 0)
	if len(a.ReplicaSet()) != 3 || a.Owner != "b" {
		t.Fatalf("after the first pass: %+v, want a replacement added", a)
	}
	added := a.ReplicaSet()[2]
	setISR(t, r.st, "orders", 0, "b", "c", added)
	pass(t, r.ctl, r.log)
	a = assignment(t, r.st, "orders", 0)
	if a.Owner != "c" || a.LeaderEpoch != 1 || r.elections(meta.ElectReassign) != 1 {
		t.Fatalf("after the catch-up: %+v (reassign elections %v), want c leading at epoch 1", a, r.elections(meta.ElectReassign))
	}
	pass(t, r.ctl, r.log)
	a = assignment(t, r.st, "orders", 0)
	if !reflect.DeepEqual(a.ReplicaSet(), []string{"c", added}) || !reflect.DeepEqual(a.InSync(), []string{"c", added}) {
		t.Fatalf("after the leadership move: %+v, want [c %s]", a, added)
	}

	tp, _ := r.st.Topic("orders")
	tp.ReplicationFactor = 3
	if _, err := r.st.AlterTopic(ctxT(t), meta.TopicUpdate{Topic: tp, Replication: true}); err != nil {
		t.Fatal(err)
	}
	pass(t, r.ctl, r.log)
	if a = assignment(t, r.st, "orders", 0); len(a.ReplicaSet()) != 3 || slices.Contains(a.ReplicaSet(), "b") {
		t.Fatalf("after R 2 → 3: %+v, want a third replica, not the draining b", a)
	}
	tp.ReplicationFactor = 2
	if _, err := r.st.AlterTopic(ctxT(t), meta.TopicUpdate{Topic: tp, Replication: true}); err != nil {
		t.Fatal(err)
	}
	pass(t, r.ctl, r.log)
	if a = assignment(t, r.st, "orders", 0); !reflect.DeepEqual(a.ReplicaSet(), []string{"c", added}) {
		t.Fatalf("after R 3 → 2: %+v, want the out-of-sync newcomer dropped", a)
	}
}

// A dead node whose partitions are all replicated with another alive ISR member may be
// decommissioned: C12 replaces its replicas at once (no ReReplicateAfter wait), and C6 removes
// it once it holds none. While it holds a replicated partition's only in-sync copy it is
// refused with dead_owner, as for a single-replica partition.
func TestDecommissionOfADeadNodeWithReplicatedPartitions(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st, ctx := c.leader(), ctxT(t)
	createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"d", "b"}, []string{"b", "d"}))
	setISR(t, st, "orders", 1, "b") // orders/1: b alone in sync
	ms := newMembership([]string{"a", "b", "c"}, "d")
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil) // ReReplicateAfter 0: never, except by decommission
	pass(t, ctl, log)
	c.expireSilent("a", "b", "c")
	pass(t, ctl, log) // d dead; C10 makes b lead orders/0 (d leaves its ISR)
	if a := assignment(t, st, "orders", 0); a.Owner != "b" || !reflect.DeepEqual(a.InSync(), []string{"b"}) {
		t.Fatalf("orders/0 after d died: %+v", a)
	}
	if v := ctl.EvaluateDecommission("d"); !v.Allowed {
		t.Fatalf("verdict %+v, want allowed: b is an alive in-sync replica of both", v)
	}
	dry, err := ctl.Decommission(ctx, "d", true)
	if err != nil || len(dry.Moves) != 2 {
		t.Fatalf("dry run %+v, %v: want one reassignment per partition", dry, err)
	}
	for _, mv := range dry.Moves {
		if mv.Topic != "orders" || mv.From != "d" || mv.To == "d" || mv.To == "b" {
			t.Fatalf("dry-run move %+v", mv)
		}
	}
	if _, err := ctl.Decommission(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	pass(t, ctl, log)
	for p := range 2 {
		a := assignment(t, st, "orders", p)
		if len(a.ReplicaSet()) != 3 || !slices.Contains(a.ReplicaSet(), "d") {
			t.Fatalf("orders/%d after the decommission started: %+v, want a replacement beside d", p, a)
		}
	}
	if removed, _ := ms.calls(); len(removed) != 0 {
		t.Fatalf("removed %v while d holds replicas", removed)
	}
	for p := range 2 {
		a := assignment(t, st, "orders", p)
		setISR(t, st, "orders", p, slices.DeleteFunc(a.ReplicaSet(), func(id string) bool { return id == "d" })...)
	}
	pass(t, ctl, log)
	for p := range 2 {
		if a := assignment(t, st, "orders", p); len(a.ReplicaSet()) != 2 || slices.Contains(a.ReplicaSet(), "d") {
			t.Fatalf("orders/%d: %+v, want d dropped", p, a)
		}
	}
	if removed, _ := ms.calls(); !reflect.DeepEqual(removed, []string{"d"}) {
		t.Fatalf("removed = %v, want [d]", removed)
	}
}

// A dead replica that is a replicated partition's only in-sync copy keeps the dead_owner
// refusal.
func TestDeadNodeWithTheOnlyInSyncCopyIsRefused(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st := c.leader()
	createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"d", "b"}))
	setISR(t, st, "orders", 0, "d")
	ms := newMembership([]string{"a", "b", "c"}, "d")
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	pass(t, ctl, log)
	c.expireSilent("a", "b", "c")
	pass(t, ctl, log)
	if v := ctl.EvaluateDecommission("d"); v.Allowed || !reflect.DeepEqual(v.Reasons, []string{ReasonDeadOwner}) {
		t.Fatalf("verdict %+v, want dead_owner", v)
	}
}

// A draining node's replicated partitions never move by ops 15–17 and never take the move
// planner's budget: with one move allowed in flight, its single-replica partition gets the
// move although a replicated partition it leads sorts first.
func TestMovePlannerSkipsReplicatedPartitions(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st, ctx := c.leader(), ctxT(t)
	createReplicated(t, st, "aa-replicated", false, replicated("aa-replicated", nil, []string{"d", "b"}))
	createOwned(t, st, "zz-plain", ownedBy("zz-plain", "d", 0, 1))
	ms := newMembership([]string{"a", "b", "c"}, "d")
	log := &logRecorder{}
	ctl := c.manual(ms, log, func(cfg *Config) { cfg.MaxInFlightMoves = 1 })
	if _, err := ctl.Decommission(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	pass(t, ctl, log)
	if a := assignment(t, st, "zz-plain", 0); a.Target == "" {
		t.Fatalf("zz-plain/0 = %+v, want a move target off the draining d", a)
	}
	if a := assignment(t, st, "aa-replicated", 0); a.Target != "" || len(a.ReplicaSet()) != 3 {
		t.Fatalf("aa-replicated/0 = %+v, want no target and a replacement replica added", a)
	}
	for _, mv := range ctl.drainPlan("d") {
		if mv.Topic != "zz-plain" {
			t.Fatalf("the drain plan moves replicated %s/%d", mv.Topic, mv.Partition)
		}
	}
}
