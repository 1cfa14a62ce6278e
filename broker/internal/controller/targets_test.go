package controller

import (
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
)

// targetsOf returns topic name's partition → target.
func targetsOf(st *meta.Store, name string) map[int]string {
	out := map[int]string{}
	for _, a := range st.Assignments(name) {
		out[a.Partition] = a.Target
	}
	return out
}

// MV-36: a dead target is cleared only after DeadTargetAbortAfter of this leader's own
// observation (a leader change restarts the clock), and the freed budget is used in the same
// pass.
func TestDeadTargetClearedAfterTwoMinutesOnTheLeadersOwnClockAndBudgetReusedSamePass(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "x")
	st := c.leader()
	createOwned(t, st, "orders", ownedBy("orders", "a", 0, 16))
	for p := range 8 {
		aim(t, st, "orders", p, "a", "x")
	}
	ms := newMembership([]string{"a"}, "b", "x")
	log := &logRecorder{}
	first := c.manual(ms, log, nil)
	pass(t, first, log)
	if _, targeted := loads(st); targeted["x"] != 8 || targeted["b"] != 0 {
		t.Fatalf("targets with x alive and the budget full = %v, want x's 8 only", targeted)
	}

	c.expireSilent("a", "b") // x falls silent
	pass(t, first, log)
	if status(t, st, "x") != meta.MemberDead {
		t.Fatal("x not marked dead")
	}
	c.advance(time.Minute, "a", "b")
	pass(t, first, log)

	// Leadership changes hands: the new leader's clock for x starts at its first pass.
	first.setLeading(false)
	second := c.manual(ms, log, nil)
	pass(t, second, log)
	c.advance(DeadTargetAbortAfter-time.Second, "a", "b") // 3 min after x died, 2 min − 1 s on this leader
	pass(t, second, log)
	if _, targeted := loads(st); targeted["x"] != 8 {
		t.Fatalf("targets = %v before 2 min of this leader's observation, want x's 8 kept", targeted)
	}

	c.advance(time.Second, "a", "b")
	pass(t, second, log)
	if _, targeted := loads(st); targeted["x"] != 0 || targeted["b"] != MaxInFlightMoves {
		t.Fatalf("targets after 2 min = %v, want x's cleared and %d new ones to b in the same pass", targeted, MaxInFlightMoves)
	}
	if n := len(log.find("move target cleared")); n != 8 {
		t.Fatalf("%d targets logged as cleared, want 8", n)
	}
}

// C4's three rules: no member record, dead past the limit, out of the Raft configuration
// while dead or draining; anything else is left alone.
func TestDeadTargetRules(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "late", "removed", "outalive", "slow")
	st, ctx := c.leader(), ctxT(t)
	// Balanced for the planner: a and b own 4 each; the moves in flight point elsewhere.
	createOwned(t, st, "orders", ownedBy("orders", "a", 0, 4), ownedBy("orders", "b", 4, 4))
	want := map[int]string{}
	for p, target := range map[int]string{0: "gone", 1: "removed", 2: "outalive", 3: "slow", 4: "late"} {
		owner := "a"
		if p >= 4 {
			owner = "b"
		}
		aim(t, st, "orders", p, owner, target)
	}
	if err := st.MemberDead(ctx, "removed"); err != nil { // dead (just now) and out of Raft → cleared
		t.Fatal(err)
	}
	if err := st.MemberDead(ctx, "slow"); err != nil { // dead only briefly, still in Raft → kept
		t.Fatal(err)
	}
	// "gone" has no record → cleared; "outalive" is alive and not draining outside Raft → kept;
	// "late" is alive in Raft → kept.
	want[0], want[1], want[2], want[3], want[4] = "", "", "outalive", "slow", "late"
	ms := newMembership([]string{"a", "b"}, "late", "slow")
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	pass(t, ctl, log)
	got := targetsOf(st, "orders")
	for p, w := range want {
		if w == "" && (got[p] == "gone" || got[p] == "removed") || w != "" && got[p] != w {
			t.Fatalf("orders/%d target = %q, want %q (all: %v)", p, got[p], w, got)
		}
	}
	reasons := map[string]string{}
	for _, r := range log.find("move target cleared") {
		reasons[r.attrs["target"]] = r.attrs["reason"]
	}
	if reasons["gone"] != clearTargetNotMember || reasons["removed"] != clearTargetRemoved || len(reasons) != 2 {
		t.Fatalf("cleared = %v, want gone (%s) and removed (%s) only", reasons, clearTargetNotMember, clearTargetRemoved)
	}
}
