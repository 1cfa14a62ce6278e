package controller

import (
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/placement"
)

// membersOf returns alive members with fresh heartbeats at planNow; racks[i], when given, is
// ids[i]'s rack.
func membersOf(ids []string, racks ...string) []meta.Member {
	out := make([]meta.Member, len(ids))
	for i, id := range ids {
		out[i] = meta.Member{ID: id, Status: meta.MemberAlive, LastHeartbeat: planNow.Unix()}
		if i < len(racks) {
			out[i].Rack = racks[i]
		}
	}
	return out
}

// placed returns n partitions of an R = r topic placed by placement.PlaceReplicas on nodes,
// every replica in sync and led by its preferred leader.
func placed(t *testing.T, name string, n, r int, nodes ...string) (meta.Topic, []meta.Assignment) {
	t.Helper()
	ns := make([]placement.Node, len(nodes))
	for i, id := range nodes {
		ns[i] = placement.Node{ID: id}
	}
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	sets, err := placement.PlaceReplicas(placement.ReplicaSpec{Nodes: ns, R: r, Parts: parts})
	if err != nil {
		t.Fatal(err)
	}
	as := make([]meta.Assignment, n)
	for p, reps := range sets {
		as[p] = meta.Assignment{Topic: name, Partition: p, Owner: reps[0], Replicas: reps, ISR: slices.Clone(reps)}
	}
	return meta.Topic{Name: name, Partitions: n, ReplicationFactor: r}, as
}

// sim is the metastore and the replica leaders as C12 and C13 see them, pass after pass: op 25
// and op 24 as the FSM applies them (the move target cleared once reached or voided), and each
// replica added in one pass caught up and in the ISR by the next.
type sim struct {
	t       *testing.T
	topics  []meta.Topic
	members []meta.Member
	parts   map[partitionRef]*meta.Assignment
	fresh   map[partitionRef][]string // replicas added in the last pass, not yet caught up
	moved   map[partitionRef]int      // replica moves planned per partition
	dropped map[string]bool           // "topic/p/node" of every replica dropped
	steps   int
}

func newSim(t *testing.T, topics []meta.Topic, members []meta.Member, as ...[]meta.Assignment) *sim {
	s := &sim{t: t, topics: topics, members: members, parts: map[partitionRef]*meta.Assignment{},
		fresh: map[partitionRef][]string{}, moved: map[partitionRef]int{}, dropped: map[string]bool{}}
	for _, list := range as {
		for _, a := range list {
			s.parts[partitionRef{a.Topic, a.Partition}] = &a
		}
	}
	return s
}

func (s *sim) view() *leaderView {
	var as []meta.Assignment
	for _, a := range s.parts {
		as = append(as, *a)
	}
	return newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, s.topics, s.members, as)
}

// setReplicas applies op 25 as the FSM does (the checks are meta's tests).
func (s *sim) setReplicas(topic string, p int, replicas, isr, target []string) {
	a := s.parts[partitionRef{topic, p}]
	for _, id := range a.ReplicaSet() {
		if !slices.Contains(replicas, id) {
			s.dropped[fmt.Sprintf("%s/%d/%s", topic, p, id)] = true
		}
	}
	for _, id := range replicas {
		if !slices.Contains(a.ReplicaSet(), id) {
			if s.dropped[fmt.Sprintf("%s/%d/%s", topic, p, id)] {
				s.t.Fatalf("%s/%d: %s gets back the replica it lost (oscillation)", topic, p, id)
			}
			s.fresh[partitionRef{topic, p}] = append(s.fresh[partitionRef{topic, p}], id)
		}
	}
	if target != nil {
		a.TargetReplicas = slices.Clone(target)
	}
	a.Replicas = slices.Clone(replicas)
	a.ISR = slices.DeleteFunc(slices.Clone(replicas), func(id string) bool { return !slices.Contains(isr, id) })
	if slices.Equal(a.TargetReplicas, a.Replicas) || !subsetOf(a.TargetReplicas, a.Replicas) {
		a.TargetReplicas = nil
	}
}

func subsetOf(sub, set []string) bool {
	return !slices.ContainsFunc(sub, func(id string) bool { return !slices.Contains(set, id) })
}

// pass runs one controller pass over the simulated metastore: the catch-up of last pass's
// newcomers, then C11, C12 and C13 as the duty list orders them. It returns the proposals.
func (s *sim) pass() int {
	for ref, ids := range s.fresh {
		a := s.parts[ref]
		for _, id := range ids {
			if slices.Contains(a.ReplicaSet(), id) && !slices.Contains(a.ISR, id) {
				a.ISR = slices.DeleteFunc(slices.Clone(a.Replicas), func(r string) bool { return !slices.Contains(a.ISR, r) && r != id })
			}
		}
	}
	s.fresh = map[partitionRef][]string{}
	n := 0
	elect := func(es []election) {
		for _, e := range es {
			a := s.parts[partitionRef{e.Topic, e.Partition}]
			if a.LeaderEpoch == e.Epoch {
				a.Owner, a.LeaderEpoch = e.To, a.LeaderEpoch+1
				n++
			}
		}
	}
	elect(s.view().planPreferred(MaxPreferredElections))
	v := s.view()
	ms := s.members
	for _, st := range v.planReassign(func(string) bool { return false }, placement.Nodes(ms), map[string]placement.Load{}, MaxReassignSteps) {
		if st.Kind == stepLead {
			elect([]election{{Topic: st.Topic, Partition: st.Partition, Epoch: st.Epoch, From: st.From, To: st.To}})
			continue
		}
		s.setReplicas(st.Topic, st.Partition, st.Replicas, st.ISR, st.Target)
		n++
	}
	v = s.view()
	if v.steady() {
		for _, mv := range v.planBalance(placement.Nodes(ms), MaxInFlightMoves, MaxPreferredRotations) {
			if mv.Target != nil {
				s.moved[partitionRef{mv.Topic, mv.Partition}]++
			}
			s.setReplicas(mv.Topic, mv.Partition, mv.Replicas, mv.ISR, mv.Target)
			n++
		}
	}
	s.steps += n
	s.check()
	return n
}

// check holds the replica-set invariants and the safety of a move: never fewer in-sync
// replicas than R while balancing (the add-then-drop order).
func (s *sim) check() {
	s.t.Helper()
	rf := map[string]int{}
	for _, tp := range s.topics {
		rf[tp.Name] = tp.RF()
	}
	for ref, a := range s.parts {
		if !slices.Contains(a.ISR, a.Owner) || !subsetOf(a.ISR, a.Replicas) || len(a.ISR) < rf[ref.topic] {
			s.t.Fatalf("%v: %+v breaks the invariants or has fewer than R in sync", ref, *a)
		}
	}
}

// settle runs passes until one proposes nothing (at most max), then checks that the next 20
// passes propose nothing either.
func (s *sim) settle(max int) int {
	s.t.Helper()
	passes := 0
	for ; s.pass() > 0; passes++ {
		if passes > max {
			r, pr := s.counts()
			for ref, a := range s.parts {
				s.t.Logf("%v: %+v", ref, *a)
			}
			s.t.Fatalf("no fixed point after %d passes: replicas %v preferred %v", max, r, pr)
		}
	}
	for range 20 {
		if n := s.pass(); n != 0 {
			r, pr := s.counts()
			s.t.Fatalf("a settled cluster proposed %d steps: replicas %v preferred %v", n, r, pr)
		}
	}
	return passes
}

// counts returns per node the replicas and the preferred leaderships (replicas[0]).
func (s *sim) counts() (replicas, preferred map[string]int) {
	replicas, preferred = map[string]int{}, map[string]int{}
	for _, m := range s.members {
		replicas[m.ID], preferred[m.ID] = 0, 0
	}
	for _, a := range s.parts {
		for _, id := range a.ReplicaSet() {
			replicas[id]++
		}
		preferred[a.ReplicaSet()[0]]++
	}
	return replicas, preferred
}

func spread(m map[string]int) int {
	vs := slices.Collect(maps.Values(m))
	return slices.Max(vs) - slices.Min(vs)
}

// A balanced cluster gets no proposal: R = 3 on three nodes (no move possible), and the
// placement of R = 3 and R = 2 topics on four and five nodes.
func TestBalancePlansNothingForABalancedCluster(t *testing.T) {
	for _, c := range []struct {
		nodes      []string
		partitions int
		r          int
	}{{[]string{"a", "b", "c"}, 6, 3}, {[]string{"a", "b", "c", "d"}, 8, 3}, {[]string{"a", "b", "c", "d", "e"}, 10, 2},
		{[]string{"a", "b", "c", "d", "e"}, 12, 3}} {
		t.Run(fmt.Sprintf("%d nodes R=%d", len(c.nodes), c.r), func(t *testing.T) {
			tp, as := placed(t, "t", c.partitions, c.r, c.nodes...)
			v := newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter,
				[]meta.Topic{tp}, membersOf(c.nodes), as)
			if got := v.planBalance(placement.Nodes(membersOf(c.nodes)), MaxInFlightMoves, MaxPreferredRotations); len(got) != 0 {
				t.Fatalf("proposals %+v for a balanced cluster", got)
			}
		})
	}
}

// Scale-up (docs/internals/replication.md §9): a fourth, empty node receives replicas until
// every node holds 4 or 5 of the 18 and 1 or 2 preferred leaderships, by the fewest moves
// (4), each partition moved at most once, no destination ever dropped again, and the cluster
// then stays put.
func TestBalanceFillsANewNodeWithoutOscillating(t *testing.T) {
	tp, as := placed(t, "orders", 6, 3, "a", "b", "c")
	s := newSim(t, []meta.Topic{tp}, membersOf([]string{"a", "b", "c", "d"}), as)
	passes := s.settle(30)
	replicas, preferred := s.counts()
	for id, n := range replicas {
		if n < 4 || n > 5 {
			t.Fatalf("replicas per node %v, want 4 or 5 each", replicas)
		}
		if preferred[id] < 1 || preferred[id] > 2 {
			t.Fatalf("preferred leaders per node %v, want 1 or 2 each", preferred)
		}
	}
	total := 0
	for ref, n := range s.moved {
		if n > 1 {
			t.Fatalf("%v moved %d times", ref, n)
		}
		total += n
	}
	if total != 4 {
		t.Fatalf("%d replica moves, want 4", total)
	}
	for k := range s.dropped {
		if k[len(k)-1] == 'd' {
			t.Fatalf("the new node's replica %s was dropped again", k)
		}
	}
	for ref, a := range s.parts {
		if a.TargetReplicas != nil || a.Owner != a.ReplicaSet()[0] {
			t.Fatalf("%v not settled: %+v", ref, *a)
		}
	}
	t.Logf("settled after %d passes, %d steps: replicas %v preferred %v", passes, s.steps, replicas, preferred)
}

// A larger scale-up with mixed replication factors: 3 → 5 nodes, R = 3 and R = 2 topics;
// the replica and preferred-leader counts end within one of each other, by the fewest moves
// (54 replicas: a, b and c give up 7 each), and no node ever gets back a replica it gave up.
func TestBalanceScaleUpToFiveNodes(t *testing.T) {
	t3, a3 := placed(t, "r3", 12, 3, "a", "b", "c")
	t2, a2 := placed(t, "r2", 9, 2, "a", "b", "c")
	s := newSim(t, []meta.Topic{t2, t3}, membersOf([]string{"a", "b", "c", "d", "e"}), a3, a2)
	s.settle(60)
	replicas, preferred := s.counts()
	if spread(replicas) > 1 || spread(preferred) > 1 {
		t.Fatalf("replicas %v preferred %v: want each within one", replicas, preferred)
	}
	total := 0
	for _, n := range s.moved {
		total += n
	}
	if total != 21 {
		t.Fatalf("%d replica moves, want 21", total)
	}
}

// Racks: a move never lowers the number of racks a partition spans, even when that leaves
// the counts uneven.
func TestBalanceKeepsTheRackSpread(t *testing.T) {
	tp := rtopic("t", 2, false)
	tp.Partitions = 2
	as := []meta.Assignment{
		{Topic: "t", Partition: 0, Owner: "a", Replicas: []string{"a", "b"}, ISR: []string{"a", "b"}},
		{Topic: "t", Partition: 1, Owner: "b", Replicas: []string{"b", "a"}, ISR: []string{"b", "a"}},
	}
	// a and c share rack x, b is alone on y: moving a's copy to c keeps two racks, moving b's
	// copy to c (both then on x) would not.
	ms := membersOf([]string{"a", "b", "c"}, "x", "y", "x")
	v := newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, []meta.Topic{tp}, ms, as)
	got := v.planBalance(placement.Nodes(ms), MaxInFlightMoves, 0)
	if len(got) != 0 {
		// counts a2 b2 c0: a move from a or b to c is wanted; only a → c keeps the racks.
		for _, mv := range got {
			if mv.From != "a" || mv.To != "c" {
				t.Fatalf("move %+v lowers the rack spread", mv)
			}
		}
	}
	if len(got) != 1 {
		t.Fatalf("proposals %+v, want one move a → c", got)
	}
}

// A move in flight is counted as done and never re-planned; the in-flight budget is
// respected; an unhealthy partition (a replica out of sync) or a failed leader is left alone;
// and nothing is planned while a member is dead, draining or stopping.
func TestBalanceRespectsMovesInFlightAndUnsteadyState(t *testing.T) {
	tp, as := placed(t, "orders", 6, 3, "a", "b", "c")
	ms := membersOf([]string{"a", "b", "c", "d"})
	plan := func(as []meta.Assignment, ms []meta.Member, max int) []replicaMove {
		return newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, []meta.Topic{tp}, ms, as).
			planBalance(placement.Nodes(ms), max, MaxPreferredRotations)
	}
	first := plan(as, ms, MaxInFlightMoves)
	moves := 0
	for _, mv := range first {
		if mv.Target != nil {
			moves++
		}
	}
	if moves != 4 {
		t.Fatalf("first plan %+v, want 4 moves", first)
	}
	if got := plan(as, ms, 2); len(got) != 2 || got[0].Target == nil || got[1].Target == nil {
		t.Fatalf("with 2 in flight allowed: %+v", got)
	}
	// Record the first move as in flight: the next plan counts it and plans 3 others.
	inFlight := slices.Clone(as)
	mv := first[0]
	for i := range inFlight {
		if inFlight[i].Partition == mv.Partition {
			inFlight[i].Replicas, inFlight[i].TargetReplicas = mv.Replicas, mv.Target
		}
	}
	again := plan(inFlight, ms, MaxInFlightMoves)
	n := 0
	for _, g := range again {
		if g.Partition == mv.Partition {
			t.Fatalf("the partition with a move in flight is planned again: %+v", g)
		}
		if g.Target != nil {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("with one in flight: %+v, want 3 more moves", again)
	}
	if got := plan(inFlight, ms, 1); len(got) != 0 {
		t.Fatalf("budget 1 with one in flight: %+v", got)
	}
	// Out-of-sync replicas and failed leaders: those partitions are skipped.
	unhealthy := slices.Clone(as)
	for i := range unhealthy {
		unhealthy[i].ISR = []string{unhealthy[i].Owner}
	}
	if got := plan(unhealthy, ms, MaxInFlightMoves); len(got) != 0 {
		t.Fatalf("moves of under-replicated partitions: %+v", got)
	}
	silent := slices.Clone(ms)
	for i := range silent {
		if silent[i].ID != "a" && silent[i].ID != "d" {
			silent[i].LastHeartbeat = planNow.Add(-time.Minute).Unix()
		}
	}
	if got := plan(as, silent, MaxInFlightMoves); len(got) != 0 {
		t.Fatalf("moves off silent nodes: %+v", got)
	}
	for _, unsteady := range []func(m *meta.Member){
		func(m *meta.Member) { m.Status = meta.MemberDead },
		func(m *meta.Member) { m.Draining = true },
		func(m *meta.Member) { m.Stopping = true },
	} {
		ms2 := slices.Clone(ms)
		unsteady(&ms2[1])
		v := newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, []meta.Topic{tp}, ms2, as)
		if v.steady() {
			t.Fatalf("steady with %+v", ms2[1])
		}
	}
}

// A decommissioned member (draining, dead once out of Raft, a replica of nothing) keeps its
// record until C9 collects it an hour later; it must not stop the balance meanwhile: a node
// that joins after a decommission still gets its share (the black-box (r16) found it). A
// draining member that still holds a replica keeps C13 waiting, as before.
func TestBalanceIgnoresADecommissionedMember(t *testing.T) {
	tp, as := placed(t, "orders", 6, 3, "a", "b", "c")
	ms := membersOf([]string{"a", "b", "c", "d", "e"})
	ms[3].Status, ms[3].Draining = meta.MemberDead, true
	s := newSim(t, []meta.Topic{tp}, ms, as)
	s.settle(30)
	replicas, _ := s.counts()
	if replicas["d"] != 0 || replicas["e"] < 4 || replicas["e"] > 5 {
		t.Fatalf("replicas per node %v: want e to receive 4 or 5, d none", replicas)
	}
	held := slices.Clone(as)
	held[0].Replicas = append(slices.Clone(held[0].Replicas), "d")
	v := newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, []meta.Topic{tp}, ms, held)
	if v.steady() {
		t.Fatal("steady while a draining member still holds a replica")
	}
}

// The move's last steps are C12's and follow the recorded target, not a recomputation: the
// surplus replica dropped is the source, never the catching-up destination; a preferred
// source hands both the preference and the leadership to the destination; a destination
// that dies abandons the move (it is dropped, the source stays).
func TestReassignFollowsTheMoveTarget(t *testing.T) {
	tp := rtopic("t", 3, false)
	a := meta.Assignment{Topic: "t", Owner: "a", Replicas: []string{"a", "b", "c", "d"}, ISR: []string{"a", "b", "c"},
		TargetReplicas: []string{"d", "b", "c"}}
	ms := membersOf([]string{"a", "b", "c", "d"})
	step := func(a meta.Assignment, ms []meta.Member) []reassignStep {
		v := newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, []meta.Topic{tp}, ms, []meta.Assignment{a})
		return v.planReassign(leavingOf(), placement.Nodes(ms), map[string]placement.Load{}, MaxReassignSteps)
	}
	if got := step(a, ms); len(got) != 0 {
		t.Fatalf("steps %+v while the destination catches up, want none (the recorded move waits)", got)
	}
	a.ISR = []string{"a", "b", "c", "d"}
	if got := step(a, ms); len(got) != 1 || got[0].Kind != stepLead || got[0].To != "d" {
		t.Fatalf("steps %+v, want leadership to the destination d", got)
	}
	a.Owner, a.LeaderEpoch = "d", 1
	got := step(a, ms)
	if len(got) != 1 || got[0].Kind != stepDrop || !reflect.DeepEqual(got[0].Replicas, []string{"d", "b", "c"}) {
		t.Fatalf("steps %+v, want the source a dropped and d first", got)
	}
	// Abandoned: the destination is dead while still out of sync.
	a = meta.Assignment{Topic: "t", Owner: "a", Replicas: []string{"a", "b", "c", "d"}, ISR: []string{"a", "b", "c"},
		TargetReplicas: []string{"d", "b", "c"}}
	dead := slices.Clone(ms)
	dead[3].Status = meta.MemberDead
	got = step(a, dead)
	if len(got) != 1 || got[0].Kind != stepDrop || !reflect.DeepEqual(got[0].Replicas, []string{"a", "b", "c"}) {
		t.Fatalf("steps %+v, want the dead destination dropped", got)
	}
}

// C13 with C12 end to end on an in-memory Raft cluster (a leads; a, b, c hold an R = 3 topic
// of 6 partitions; d joined empty): the first pass records 4 moves to d (op 25: d added out of
// sync, target_replicas set, audited); while d catches up every later pass leaves them alone;
// once the leaders have added d to the ISRs (op 23), C12 moves leadership off a leaving leader
// (reason reassign) and drops the sources, and the cluster settles with 4 or 5 replicas per
// node and no target left. Without BalanceReplicas nothing moves.
func TestBalanceMovesReplicasToANewNodeThroughTheMetastore(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("balance=%v", on), func(t *testing.T) {
			c := openCluster(t, []string{"a"})
			c.join("b", "c", "d")
			st := c.leader()
			tp, as := placed(t, "orders", 6, 3, "a", "b", "c")
			for i := range as {
				as[i].Owner, as[i].ISR = "", nil
			}
			createReplicated(t, st, tp.Name, false, as)
			r := &electionRig{c: c, st: st, log: &logRecorder{}, audit: &logRecorder{}, m: metrics.New()}
			r.ctl = c.manual(newMembership([]string{"a"}, "b", "c", "d"), r.log, func(cfg *Config) {
				cfg.Metrics, cfg.Audit = r.m, audit.New(slog.New(r.audit), "a")
				cfg.BalanceReplicas = on
			})
			pass(t, r.ctl, r.log)
			moving := func() (n int) {
				for _, a := range st.Assignments("orders") {
					if len(a.MoveTarget()) > 0 {
						n++
						if len(a.ReplicaSet()) != 4 || !slices.Contains(a.ReplicaSet(), "d") || !slices.Contains(a.MoveTarget(), "d") {
							t.Fatalf("move in flight %+v", a)
						}
					}
				}
				return n
			}
			if !on {
				if n := moving(); n != 0 || len(r.audit.find(audit.Message)) != 0 {
					t.Fatalf("%d moves with BalanceReplicas off", n)
				}
				return
			}
			if n := moving(); n != 4 || len(r.audit.find(audit.Message)) != 4 {
				t.Fatalf("%d moves in flight, %d audit records after the first pass, want 4", n, len(r.audit.find(audit.Message)))
			}
			pass(t, r.ctl, r.log)
			if n := moving(); n != 4 {
				t.Fatalf("%d moves in flight while d catches up, want the 4 recorded", n)
			}
			for _, a := range st.Assignments("orders") {
				if len(a.MoveTarget()) > 0 {
					setISR(t, st, "orders", a.Partition, a.ReplicaSet()...) // the leader's expand
				}
			}
			for range 4 {
				pass(t, r.ctl, r.log)
			}
			counts := map[string]int{}
			for _, a := range st.Assignments("orders") {
				if len(a.MoveTarget()) > 0 || len(a.ReplicaSet()) != 3 || len(a.InSync()) != 3 {
					t.Fatalf("not settled: %+v", a)
				}
				for _, id := range a.ReplicaSet() {
					counts[id]++
				}
			}
			for id, n := range counts {
				if n < 4 || n > 5 || len(counts) != 4 {
					t.Fatalf("replicas per node %v (%s), want 4 or 5 on each of a … d", counts, id)
				}
			}
			if len(r.log.find("replica balance step")) < 4 || len(r.log.find("partition replicas reassigned")) < 4 {
				t.Fatalf("logs: %d balance steps, %d drops", len(r.log.find("replica balance step")),
					len(r.log.find("partition replicas reassigned")))
			}
		})
	}
}

// An abandoned move target that no step voids (R raised to 4 during the move: the four
// replicas are the desired set) is cleared by C12, so C11 and C13 may act on the partition
// again.
func TestReassignClearsAnAbandonedMoveTarget(t *testing.T) {
	tp := rtopic("t", 4, false)
	abcd := []string{"a", "b", "c", "d"}
	a := meta.Assignment{Topic: "t", Owner: "a", Replicas: abcd, ISR: abcd, TargetReplicas: []string{"d", "b", "c"}}
	ms := membersOf(abcd)
	v := newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, []meta.Topic{tp}, ms, []meta.Assignment{a})
	got := v.planReassign(leavingOf(), placement.Nodes(ms), map[string]placement.Load{}, MaxReassignSteps)
	if len(got) != 1 || got[0].Kind != stepClear || !reflect.DeepEqual(got[0].Replicas, abcd) ||
		!reflect.DeepEqual(got[0].Target, abcd) || !reflect.DeepEqual(got[0].ISR, abcd) {
		t.Fatalf("steps %+v, want the target cleared", got)
	}
}
