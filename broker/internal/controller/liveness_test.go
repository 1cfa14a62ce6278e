package controller

import (
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
)

func status(t *testing.T, st *meta.Store, id string) string {
	t.Helper()
	m, ok := st.Member(id)
	if !ok {
		return "missing"
	}
	return m.Status
}

func TestSilentMemberMarkedDeadAndHeartbeatRevives(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c")
	log := &logRecorder{}
	ctl := c.start("a", log, nil)
	settle(t, ctl, 1)
	if s := status(t, c.leader(), "b"); s != meta.MemberAlive {
		t.Fatalf("b is %s right after joining", s)
	}

	c.advance(DefaultDeadAfter-time.Second, "c")
	settle(t, ctl, 1)
	if s := status(t, c.leader(), "b"); s != meta.MemberAlive {
		t.Fatalf("b is %s after %v of silence (< DeadAfter)", s, DefaultDeadAfter-time.Second)
	}

	observed := c.advance(2*time.Second, "c")
	testwait.For(t, 15*time.Second, "b marked dead", func() bool { return status(t, c.leader(), "b") == meta.MemberDead })
	// The pass records dead_since just after its proposal applies: wait for that too.
	testwait.For(t, 5*time.Second, "dead_since of b recorded", func() bool { _, ok := ctl.DeadSince("b"); return ok })
	if since, ok := ctl.DeadSince("b"); !ok || !since.Equal(observed) {
		t.Fatalf("DeadSince(b) = %v %v, want %v (the leader's clock when it marked b)", since, ok, observed)
	}
	settle(t, ctl, 1)
	if s := status(t, c.leader(), "c"); s != meta.MemberAlive {
		t.Fatalf("heartbeating c is %s", s)
	}
	if s := status(t, c.leader(), "a"); s != meta.MemberAlive {
		t.Fatalf("the leader marked itself %s (its own stamp is as old as b's)", s)
	}
	if recs := log.find("member marked dead"); len(recs) != 1 || recs[0].attrs["member"] != "b" {
		t.Fatalf("dead-marking logs = %+v, want one for b", recs)
	}

	c.clock.Advance(time.Second)
	c.beat("b")
	if s := status(t, c.leader(), "b"); s != meta.MemberAlive {
		t.Fatalf("b is %s after a heartbeat", s)
	}
	testwait.For(t, 15*time.Second, "dead_since of b cleared", func() bool { _, ok := ctl.DeadSince("b"); return !ok })
}

// A new leader measures silence from no earlier than its election: stamps it inherited do not
// mark a member dead on its first pass, but a silent member is dead DeadAfter later.
func TestNewLeaderMeasuresSilenceFromItsElection(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.clock.Advance(-time.Hour)
	c.join("old") // last heartbeat an hour before the leader's "now"
	c.clock.Advance(time.Hour)
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 2)
	if s := status(t, c.leader(), "old"); s != meta.MemberAlive {
		t.Fatalf("member with an inherited stale stamp is %s on the new leader's first passes", s)
	}
	c.clock.Advance(DefaultDeadAfter + time.Second)
	testwait.For(t, 15*time.Second, "the silent member marked dead", func() bool { return status(t, c.leader(), "old") == meta.MemberDead })
}

// CL-15 (the part this controller owns): a member that is already dead when this node gains
// leadership gets dead_since = the first observation on this leader's clock, not its stamp.
func TestDeadSinceStartsAtTheLeadersFirstObservation(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("gone")
	if err := c.leader().MemberDead(ctxT(t), "gone"); err != nil {
		t.Fatal(err)
	}
	c.clock.Advance(3 * time.Hour)
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 1)
	since, ok := ctl.DeadSince("gone")
	if !ok || !since.Equal(c.clock.Now()) {
		t.Fatalf("DeadSince = %v %v, want the first observation %v", since, ok, c.clock.Now())
	}
}
