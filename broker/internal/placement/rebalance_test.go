package placement

import (
	"fmt"
	"reflect"
	"testing"

	"narad.dev/broker/internal/meta"
)

func alive(ids ...string) []meta.Member {
	out := make([]meta.Member, 0, len(ids))
	for _, id := range ids {
		out = append(out, meta.Member{ID: id, Status: meta.MemberAlive})
	}
	return out
}

// owned returns n settled assignments of topic, starting at partition from, owned by owner.
func owned(topic, owner string, from, n int) []meta.Assignment {
	out := make([]meta.Assignment, 0, n)
	for p := from; p < from+n; p++ {
		out = append(out, meta.Assignment{Topic: topic, Partition: p, Owner: owner})
	}
	return out
}

func concat(as ...[]meta.Assignment) []meta.Assignment {
	var out []meta.Assignment
	for _, a := range as {
		out = append(out, a...)
	}
	return out
}

// after applies a plan's moves as if they had flipped and counts each node's partitions
// (in-flight moves count at their target).
func after(as []meta.Assignment, moves []Move) map[string]int {
	dest := map[string]string{}
	for _, m := range moves {
		dest[fmt.Sprintf("%s/%d", m.Topic, m.Partition)] = m.To
	}
	out := map[string]int{}
	for _, a := range as {
		o := a.Owner
		if a.Target != "" {
			o = a.Target
		}
		if to, ok := dest[fmt.Sprintf("%s/%d", a.Topic, a.Partition)]; ok {
			o = to
		}
		out[o]++
	}
	return out
}

// inFlight returns as with each planned move's target set.
func inFlight(as []meta.Assignment, moves []Move) []meta.Assignment {
	out := append([]meta.Assignment(nil), as...)
	for _, m := range moves {
		for i := range out {
			if out[i].Topic == m.Topic && out[i].Partition == m.Partition {
				out[i].Target = m.To
			}
		}
	}
	return out
}

func TestRebalanceMovesExactlyTheSurplusAndIsIdempotentWhileInFlight(t *testing.T) {
	members := alive("a", "b", "c", "d")
	as := concat(owned("t1", "a", 0, 6), owned("t2", "b", 0, 6), owned("t3", "c", 0, 6))
	plan := Rebalance(members, nil, as, 8)
	if len(plan.Moves) != 4 || plan.Wanted != 4 || plan.InFlight != 0 {
		t.Fatalf("plan = %+v, want exactly 4 moves (MV-39)", plan)
	}
	for _, m := range plan.Moves {
		if m.To != "d" {
			t.Fatalf("move %+v not aimed at the empty node", m)
		}
	}
	if got, want := after(as, plan.Moves), map[string]int{"a": 5, "b": 5, "c": 4, "d": 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("result = %v, want %v", got, want)
	}
	// The first partitions by (topic, partition) of each surplus node move.
	wantMoves := []Move{{"t1", 0, "a", "d"}, {"t2", 0, "b", "d"}, {"t3", 0, "c", "d"}, {"t3", 1, "c", "d"}}
	if !reflect.DeepEqual(plan.Moves, wantMoves) {
		t.Fatalf("moves = %+v, want %+v", plan.Moves, wantMoves)
	}
	again := Rebalance(members, nil, inFlight(as, plan.Moves), 8)
	if len(again.Moves) != 0 || again.Wanted != 0 || again.InFlight != 4 {
		t.Fatalf("recomputed while in flight: %+v, want no new moves", again)
	}
}

func TestRebalanceRules(t *testing.T) {
	dead := meta.Member{ID: "x", Status: meta.MemberDead}
	draining := meta.Member{ID: "a", Status: meta.MemberAlive, Draining: true}
	cases := []struct {
		name    string
		members []meta.Member
		topics  []meta.Topic
		as      []meta.Assignment
		max     int
		moves   int            // len(plan.Moves)
		wanted  int            // plan.Wanted
		result  map[string]int // after the moves flip
		keep    string         // a node nothing may move off
	}{
		{name: "budget caps the moves started (MV-40)", members: alive("a", "b"),
			as: concat(owned("t1", "a", 0, 40), owned("t2", "a", 0, 40)), max: 8, moves: 8, wanted: 40},
		{name: "budget counts the moves in flight", members: alive("a", "b"),
			as:  concat(owned("t1", "a", 0, 35), []meta.Assignment{{Topic: "t2", Partition: 0, Owner: "a", Target: "b"}, {Topic: "t2", Partition: 1, Owner: "a", Target: "b"}}),
			max: 8, moves: 6, wanted: 16},
		{name: "no budget left: nothing", members: alive("a", "b"),
			as:  concat(owned("t1", "a", 0, 20), inFlight(owned("t2", "a", 0, 8), []Move{{"t2", 0, "a", "b"}, {"t2", 1, "a", "b"}, {"t2", 2, "a", "b"}, {"t2", 3, "a", "b"}, {"t2", 4, "a", "b"}, {"t2", 5, "a", "b"}, {"t2", 6, "a", "b"}, {"t2", 7, "a", "b"}})),
			max: 8, moves: 0, wanted: 6},
		{name: "dead owner's partitions neither counted nor moved (MV-42)", members: append(alive("a", "b"), dead),
			as: concat(owned("t1", "x", 0, 9), owned("t2", "a", 0, 2)), max: 8, moves: 1, wanted: 1,
			result: map[string]int{"a": 1, "b": 1, "x": 9}},
		{name: "in flight to a dead target counts nowhere", members: append(alive("a", "b"), dead),
			as:  concat(owned("t1", "a", 0, 4), []meta.Assignment{{Topic: "t2", Partition: 0, Owner: "a", Target: "x"}}),
			max: 8, moves: 2, wanted: 2, result: map[string]int{"a": 2, "b": 2, "x": 1}},
		{name: "draining node sheds everything", members: append(alive("b", "c"), draining),
			as: owned("t1", "a", 0, 5), max: 8, moves: 5, wanted: 5, result: map[string]int{"b": 3, "c": 2}},
		{name: "no receivers: no plan", members: []meta.Member{draining, dead},
			as: owned("t1", "a", 0, 5), max: 8},
		{name: "balanced: nothing moves", members: alive("a", "b", "c"),
			as: concat(owned("t1", "a", 0, 3), owned("t2", "b", 0, 3), owned("t3", "c", 0, 2)), max: 8},
		{name: "within share never touched", members: alive("a", "b", "c"),
			as: concat(owned("t1", "a", 0, 5), owned("t2", "b", 0, 3), owned("t3", "c", 0, 1)), max: 8, moves: 2, wanted: 2,
			result: map[string]int{"a": 3, "b": 3, "c": 3}, keep: "b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Rebalance(c.members, c.topics, c.as, c.max)
			if len(plan.Moves) != c.moves || plan.Wanted != c.wanted {
				t.Fatalf("plan = %+v: %d moves, %d wanted; want %d, %d", plan, len(plan.Moves), plan.Wanted, c.moves, c.wanted)
			}
			for _, m := range plan.Moves {
				if m.From == m.To || m.To == "x" || c.keep != "" && m.From == c.keep || m.To == "a" && c.members[len(c.members)-1].Draining {
					t.Fatalf("bad move %+v", m)
				}
			}
			if c.result != nil {
				if got := after(c.as, plan.Moves); !reflect.DeepEqual(got, c.result) {
					t.Fatalf("result = %v, want %v", got, c.result)
				}
			}
		})
	}
}

func TestRebalanceAntiAffinityIsAPreferenceBalanceWins(t *testing.T) {
	parent := meta.Topic{Name: "orders", Partitions: 2, Role: meta.RoleParent}
	child := meta.Topic{Name: "audit", Partitions: 2, Role: meta.RoleChild, Parent: "orders"}
	topics := []meta.Topic{parent, child}

	// b and c have equal room; audit/0's parent partition is on b, so it goes to c even though
	// b has the lower ID.
	as := concat(owned("orders", "b", 0, 1), owned("orders", "c", 1, 1), owned("audit", "a", 0, 2), owned("fill", "a", 0, 5))
	plan := Rebalance(alive("a", "b", "c"), topics, as, 8)
	dest := map[string]string{}
	for _, m := range plan.Moves {
		dest[fmt.Sprintf("%s/%d", m.Topic, m.Partition)] = m.To
	}
	if dest["audit/0"] != "c" || dest["audit/1"] != "b" {
		t.Fatalf("moves = %+v: want audit/0 → c and audit/1 → b (off their parents' nodes)", plan.Moves)
	}

	// Only b has room, and it owns audit/0's parent partition: balance wins.
	as = concat(owned("orders", "b", 0, 1), owned("audit", "a", 0, 1), owned("fill", "a", 0, 2), owned("more", "c", 0, 2))
	plan = Rebalance(alive("a", "b", "c"), topics, as, 8)
	if want := []Move{{"audit", 0, "a", "b"}}; !reflect.DeepEqual(plan.Moves, want) {
		t.Fatalf("moves = %+v, want %+v (balance over anti-affinity)", plan.Moves, want)
	}
}

func TestRebalanceCapsGoToTheNodesHoldingTheMost(t *testing.T) {
	// T = 7 over 3 receivers: caps 3, 2, 2, the 3 on the node that already holds the most (c),
	// so c keeps 3 and b (fewer) gets nothing moved off it.
	as := concat(owned("t1", "c", 0, 5), owned("t2", "b", 0, 2))
	plan := Rebalance(alive("a", "b", "c"), nil, as, 8)
	if got, want := after(as, plan.Moves), map[string]int{"a": 2, "b": 2, "c": 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("result = %v, want %v", got, want)
	}
	// Ties on load: the lower ID keeps the ceil slot.
	as = concat(owned("t1", "b", 0, 4), owned("t2", "c", 0, 4))
	plan = Rebalance(alive("a", "b", "c"), nil, as, 8)
	if got, want := after(as, plan.Moves), map[string]int{"a": 2, "b": 3, "c": 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tied result = %v, want %v", got, want)
	}
}
