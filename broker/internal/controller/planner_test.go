package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"narad.dev/broker/internal/meta"
)

// Fixtures for the move duties (C4–C7): passes driven one at a time on a single real store,
// with the Raft configuration and the node reports faked so multi-node shapes (voters,
// removals, leader transfer) need no real cluster.

// fakeMembership is a Raft configuration the test controls; it records every change.
type fakeMembership struct {
	mu        sync.Mutex
	servers   []meta.RaftServer
	removed   []string // RemoveServer calls, in order
	transfers []string // TransferLeadership targets, in order
}

func newMembership(voters []string, nonvoters ...string) *fakeMembership {
	f := &fakeMembership{}
	for _, id := range voters {
		f.servers = append(f.servers, meta.RaftServer{ID: id, Address: id, Voter: true})
	}
	for _, id := range nonvoters {
		f.servers = append(f.servers, meta.RaftServer{ID: id, Address: id})
	}
	return f
}

func (f *fakeMembership) Configuration() ([]meta.RaftServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]meta.RaftServer(nil), f.servers...), nil
}

func (f *fakeMembership) RemoveServer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	f.servers = slices.DeleteFunc(f.servers, func(s meta.RaftServer) bool { return s.ID == id })
	return nil
}

func (f *fakeMembership) TransferLeadership(_ context.Context, id, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfers = append(f.transfers, id+"@"+addr)
	return nil
}

func (f *fakeMembership) calls() (removed, transfers []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.removed...), append([]string(nil), f.transfers...)
}

// statusProber answers NodeStatus from a per-member table; a member without an entry
// reports a drained node (zero backlog).
type statusProber struct {
	mu     sync.Mutex
	status map[string]Status
	asked  []string
}

func (p *statusProber) NodeStatus(_ context.Context, m meta.Member) (Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, m.ID)
	if st, ok := p.status[m.ID]; ok {
		return st, nil
	}
	return Status{DrainingSeen: true, RefusingProduce: true}, nil
}

func (p *statusProber) set(id string, st Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == nil {
		p.status = map[string]Status{}
	}
	p.status[id] = st
}

// manual returns a controller on the leader store that never runs its loop: the test calls
// pass. Its logs go to log and the cluster's recorder.
func (c *testCluster) manual(ms Membership, log *logRecorder, tweak func(*Config)) *Controller {
	c.t.Helper()
	cfg := Config{Store: c.leader(), Membership: ms, Prober: &statusProber{}, Now: c.clock.Now,
		Logger: slog.New(teeHandler{log, c.log}).With("node", c.ids[0])}
	if tweak != nil {
		tweak(&cfg)
	}
	return New(cfg)
}

// pass runs one whole controller pass and fails the test if a duty failed.
func pass(t *testing.T, ctl *Controller, log *logRecorder) {
	t.Helper()
	failed := len(log.find("controller duty failed")) + len(log.find("controller pass stopped"))
	before := ctl.passes.Load()
	ctl.setLeading(ctl.store.IsLeader())
	ctl.runPass(ctxT(t))
	if ctl.passes.Load() != before+1 || len(log.find("controller duty failed"))+len(log.find("controller pass stopped")) != failed {
		t.Fatalf("controller pass did not complete cleanly")
	}
}

// ownedBy returns the partitions of topic name from, from+1, … owned by owner.
func ownedBy(name, owner string, from, n int) []meta.Assignment {
	out := make([]meta.Assignment, 0, n)
	for p := from; p < from+n; p++ {
		out = append(out, meta.Assignment{Topic: name, Partition: p, Owner: owner})
	}
	return out
}

// createOwned creates topic name with the given assignments (its partition count is theirs).
func createOwned(t *testing.T, st *meta.Store, name string, as ...[]meta.Assignment) {
	t.Helper()
	var all []meta.Assignment
	for _, a := range as {
		all = append(all, a...)
	}
	if err := st.CreateTopic(ctxT(t), topic(name, len(all)), all); err != nil {
		t.Fatal(err)
	}
}

// aim sets the target of name/p (owned by owner) to target.
func aim(t *testing.T, st *meta.Store, name string, p int, owner, target string) {
	t.Helper()
	if _, _, err := st.SetAssignmentTarget(ctxT(t), name, p, target, owner); err != nil {
		t.Fatal(err)
	}
}

// loads counts, per node, the partitions it owns or is the target of.
func loads(st *meta.Store) (owned, targeted map[string]int) {
	owned, targeted = map[string]int{}, map[string]int{}
	for _, a := range st.AllAssignments() {
		owned[a.Owner]++
		if a.Target != "" {
			targeted[a.Target]++
		}
	}
	return owned, targeted
}

// flipAll completes every move in flight, as the destinations would.
func flipAll(t *testing.T, st *meta.Store) int {
	t.Helper()
	n := 0
	for _, a := range st.AllAssignments() {
		if a.Target == "" {
			continue
		}
		if _, _, err := st.CompleteMove(ctxT(t), a.Topic, a.Partition, a.Owner, a.Target); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// MV-39: 6/6/6/0 → exactly 4 moves to the new node, 5/5/4/4 after; passes while they run
// add none.
func TestPlannerMovesOnlyTheSurplusToTheNewNodeAndAddsNoneWhileInFlight(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st := c.leader()
	createOwned(t, st, "orders", ownedBy("orders", "a", 0, 6), ownedBy("orders", "b", 6, 6), ownedBy("orders", "c", 12, 6))
	log := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a", "b", "c"}, "d"), log, nil)

	pass(t, ctl, log)
	_, targeted := loads(st)
	if targeted["d"] != 4 || sum(targeted) != 4 {
		t.Fatalf("targets after the first pass = %v, want exactly 4, all to d", targeted)
	}
	for range 3 {
		pass(t, ctl, log)
	}
	if _, again := loads(st); sum(again) != 4 {
		t.Fatalf("targets after more passes while in flight = %v, want the same 4", again)
	}
	if n := len(log.find("move planned")); n != 4 {
		t.Fatalf("%d moves planned in all, want 4", n)
	}
	flipAll(t, st)
	pass(t, ctl, log)
	owned, targeted := loads(st)
	if want := map[string]int{"a": 5, "b": 5, "c": 4, "d": 4}; fmt.Sprint(owned) != fmt.Sprint(want) || sum(targeted) != 0 {
		t.Fatalf("owners after the flips = %v (targets %v), want %v and nothing more planned", owned, targeted, want)
	}
}

// MV-40: with 40 partitions to move, never more than MaxInFlightMoves targets at once, and
// the budget is topped up as moves complete.
func TestPlannerNeverHasMoreThanEightMovesInFlight(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b")
	st := c.leader()
	createOwned(t, st, "orders", ownedBy("orders", "a", 0, 40))
	createOwned(t, st, "events", ownedBy("events", "a", 0, 40))
	log := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a"}, "b"), log, nil)

	moved := 0
	for round := 0; ; round++ {
		pass(t, ctl, log)
		pass(t, ctl, log)
		_, targeted := loads(st)
		n := sum(targeted)
		if n > MaxInFlightMoves {
			t.Fatalf("round %d: %d moves in flight, more than %d", round, n, MaxInFlightMoves)
		}
		if n == 0 {
			break
		}
		if n != MaxInFlightMoves && moved+n != 40 {
			t.Fatalf("round %d: %d moves in flight with %d still to move; want the budget filled", round, n, 40-moved)
		}
		moved += flipAll(t, st)
	}
	if owned, _ := loads(st); moved != 40 || owned["a"] != 40 || owned["b"] != 40 {
		t.Fatalf("moved %d, owners %v; want 40 moved and 40/40", moved, owned)
	}
}

// MV-42: a dead owner's partitions are neither counted nor planned.
func TestPlannerLeavesADeadOwnersPartitionsAlone(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "x")
	st := c.leader()
	createOwned(t, st, "orders", ownedBy("orders", "x", 0, 6), ownedBy("orders", "a", 6, 2))
	if err := st.MemberDead(ctxT(t), "x"); err != nil {
		t.Fatal(err)
	}
	log := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a"}, "b", "x"), log, nil)
	pass(t, ctl, log)
	var moves []meta.Assignment
	for _, a := range st.AllAssignments() {
		if a.Target != "" {
			moves = append(moves, a)
		}
	}
	if len(moves) != 1 || moves[0].Owner != "a" || moves[0].Target != "b" {
		t.Fatalf("moves = %+v, want one a → b (x's six partitions neither counted nor moved)", moves)
	}
}

// MV-41 at the controller: a child partition is aimed off its parent partition's node when
// an equally balanced destination exists.
func TestPlannerSteersAChildOffItsParentsNode(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c")
	st, ctx := c.leader(), ctxT(t)
	createOwned(t, st, "orders", ownedBy("orders", "b", 0, 1), ownedBy("orders", "c", 1, 1), ownedBy("orders", "a", 2, 1))
	if _, err := st.CreateTopicWith(ctx, meta.TopicCreate{Topic: topic("audit", 3),
		Assignments: ownedBy("audit", "a", 0, 3), Attach: &meta.AttachSpec{Parent: "orders", Epoch: "67953471cc57a32a"}}); err != nil {
		t.Fatal(err)
	}
	createOwned(t, st, "filler", ownedBy("filler", "a", 0, 4))
	log := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a"}, "b", "c"), log, nil)
	pass(t, ctl, log)
	got := map[int]string{}
	for _, a := range st.Assignments("audit") {
		got[a.Partition] = a.Target
	}
	if got[0] != "c" || got[1] != "b" {
		t.Fatalf("audit targets = %v: want audit/0 → c and audit/1 → b, off their parents' nodes", got)
	}
}
