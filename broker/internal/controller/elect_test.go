package controller

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
)

// replicated returns the assignments of a replicated topic: partition i has replicas reps[i],
// led by owners[i] ("" = the preferred leader), with every replica in sync.
func replicated(name string, owners []string, reps ...[]string) []meta.Assignment {
	out := make([]meta.Assignment, len(reps))
	for i, r := range reps {
		out[i] = meta.Assignment{Topic: name, Partition: i, Replicas: r}
		if i < len(owners) {
			out[i].Owner = owners[i]
		}
	}
	return out
}

// createReplicated creates topic name with replication factor len(as[0].Replicas).
func createReplicated(t *testing.T, st *meta.Store, name string, unclean bool, as []meta.Assignment) {
	t.Helper()
	tp := topic(name, len(as))
	tp.ReplicationFactor, tp.UncleanLeaderElection = len(as[0].Replicas), unclean
	if err := st.CreateTopic(ctxT(t), tp, as); err != nil {
		t.Fatal(err)
	}
}

// setISR shrinks or expands topic/p's ISR to isr under its current epoch.
func setISR(t *testing.T, st *meta.Store, name string, p int, isr ...string) {
	t.Helper()
	a := assignment(t, st, name, p)
	if _, _, err := st.SetISR(ctxT(t), name, p, a.LeaderEpoch, a.InSync(), isr); err != nil {
		t.Fatal(err)
	}
}

func assignment(t *testing.T, st *meta.Store, name string, p int) meta.Assignment {
	t.Helper()
	for _, a := range st.Assignments(name) {
		if a.Partition == p {
			return a
		}
	}
	t.Fatalf("no assignment %s/%d", name, p)
	return meta.Assignment{}
}

// electionRig is a manual controller on a cluster led by a, with b, c, d members, metrics and
// an audit trail.
type electionRig struct {
	c     *testCluster
	st    *meta.Store
	ctl   *Controller
	log   *logRecorder
	audit *logRecorder
	m     *metrics.Metrics
}

func newElectionRig(t *testing.T, setup func(st *meta.Store)) *electionRig {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	r := &electionRig{c: c, st: c.leader(), log: &logRecorder{}, audit: &logRecorder{}, m: metrics.New()}
	setup(r.st)
	r.ctl = c.manual(newMembership([]string{"a"}, "b", "c", "d"), r.log, func(cfg *Config) {
		cfg.Metrics, cfg.Audit = r.m, audit.New(slog.New(r.audit), "a")
	})
	pass(t, r.ctl, r.log) // leadership starts now: silence counts from here
	return r
}

func (r *electionRig) elections(reason string) float64 {
	return testutil.ToFloat64(r.m.LeaderElections.WithLabelValues(reason))
}

// A replicated partition whose leader has been silent for ReplicaFailoverAfter gets the first
// live ISR member in replica order as leader, with the epoch bumped, counted and audited; the
// silent node is not yet dead as a member, and partitions with a live leader and single-replica
// partitions are left alone.
func TestFailoverElectsTheFirstLiveInSyncReplica(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}, []string{"c", "b", "d"}))
		createOwned(t, st, "plain", ownedBy("plain", "b", 0, 1))
		setISR(t, st, "orders", 0, "b", "d") // c is live but out of sync
	})
	t.Cleanup(func() {
		if t.Failed() {
			r.log.dump(t)
		}
	})
	r.c.advance(DefaultReplicaFailoverAfter, "a", "c", "d") // b silent exactly the limit: not yet
	pass(t, r.ctl, r.log)
	if a := assignment(t, r.st, "orders", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("orders/0 after %v of leader silence: %+v, want b still leading at epoch 0", DefaultReplicaFailoverAfter, a)
	}

	r.c.advance(time.Second, "a", "c", "d")
	pass(t, r.ctl, r.log)
	a := assignment(t, r.st, "orders", 0)
	if a.Owner != "d" || a.LeaderEpoch != 1 || !reflect.DeepEqual(a.InSync(), []string{"d"}) {
		t.Fatalf("orders/0 = %+v, want d (first live ISR member) leading at epoch 1, b out of the isr", a)
	}
	if a := assignment(t, r.st, "orders", 1); a.Owner != "c" || a.LeaderEpoch != 0 {
		t.Fatalf("orders/1, led by live c, changed: %+v", a)
	}
	if a := assignment(t, r.st, "plain", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("single-replica plain/0 changed: %+v", a)
	}
	if s := status(t, r.st, "b"); s != meta.MemberAlive {
		t.Fatalf("b is %s after %v: the member verdict keeps its own %v", s, DefaultReplicaFailoverAfter+time.Second, DefaultDeadAfter)
	}
	for reason, want := range map[string]float64{meta.ElectDead: 1, meta.ElectShutdown: 0, meta.ElectPreferred: 0, meta.ElectUnclean: 0} {
		if got := r.elections(reason); got != want {
			t.Errorf("narad_leader_elections_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	recs := r.audit.find(audit.Message)
	want := map[string]string{"event": "cluster.leader.elect", "actor": audit.ActorController, "target": "orders/0",
		"outcome": audit.OK, "leader": "d", "previous": "b", "reason": "dead", "epoch": "1"}
	if len(recs) != 1 || !hasAttrs(recs[0], want) {
		t.Fatalf("audit records %+v, want one with %v", recs, want)
	}

	// Nothing more to do: the next passes elect nothing, and b's partitions of R = 1 stay
	// with b even once it is dead.
	r.c.advance(DefaultDeadAfter, "a", "c", "d")
	pass(t, r.ctl, r.log)
	pass(t, r.ctl, r.log)
	if got := r.elections(meta.ElectDead); got != 1 {
		t.Fatalf("elections after the failover settled = %v, want still 1", got)
	}
	if a := assignment(t, r.st, "plain", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("single-replica plain/0 of dead b changed: %+v", a)
	}
}

func hasAttrs(rec record, want map[string]string) bool {
	for k, v := range want {
		if rec.attrs[k] != v {
			return false
		}
	}
	return true
}

// With no live ISR member and unclean election off, the partition keeps its failed leader and
// waits: logged once while it waits, and again if it recovers and fails again.
func TestFailoverWithoutALiveInSyncReplicaWaits(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}))
		setISR(t, st, "orders", 0, "b")
	})
	const msg = "partition has no leader: no live in-sync replica to elect"
	r.c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "c", "d")
	pass(t, r.ctl, r.log)
	pass(t, r.ctl, r.log)
	if a := assignment(t, r.st, "orders", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("orders/0 = %+v, want b still leading (no live ISR member, unclean off)", a)
	}
	if recs := r.log.find(msg); len(recs) != 1 || recs[0].attrs["topic"] != "orders" || recs[0].attrs["partition"] != "0" {
		t.Fatalf("waiting logs over two passes = %+v, want one for orders/0", recs)
	}
	if n := len(r.audit.find(audit.Message)); n != 0 || r.elections(meta.ElectUnclean) != 0 || r.elections(meta.ElectDead) != 0 {
		t.Fatalf("a waiting partition was audited (%d) or counted", n)
	}

	r.c.beat("b") // b is back: the note clears
	pass(t, r.ctl, r.log)
	r.c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "c", "d")
	pass(t, r.ctl, r.log)
	if n := len(r.log.find(msg)); n != 2 {
		t.Fatalf("waiting logs after recovery and a second failure = %d, want 2", n)
	}
}

// With no live ISR member on a topic that allows unclean election, the first live replica in
// replica order other than the failed leader is elected with reason unclean and becomes the
// whole ISR.
func TestFailoverUncleanElectsTheFirstLiveReplica(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", true, replicated("orders", nil, []string{"b", "c", "d"}))
		setISR(t, st, "orders", 0, "b")
	})
	r.c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "d") // b and c silent
	pass(t, r.ctl, r.log)
	a := assignment(t, r.st, "orders", 0)
	if a.Owner != "d" || a.LeaderEpoch != 1 || !reflect.DeepEqual(a.InSync(), []string{"d"}) {
		t.Fatalf("orders/0 = %+v, want d elected unclean at epoch 1 with isr [d]", a)
	}
	if r.elections(meta.ElectUnclean) != 1 || r.elections(meta.ElectDead) != 0 {
		t.Fatalf("elections unclean=%v dead=%v, want 1 and 0", r.elections(meta.ElectUnclean), r.elections(meta.ElectDead))
	}
	if recs := r.audit.find(audit.Message); len(recs) != 1 || recs[0].attrs["reason"] != "unclean" {
		t.Fatalf("audit records %+v, want one with reason unclean", recs)
	}
}

// An election planned on an epoch the partition has left is refused by the CAS and skipped
// without failing the duty or counting; the next pass plans on the new record.
func TestFailoverSkipsAStaleEpoch(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}))
	})
	r.c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "c", "d")
	plan := r.ctl.readLeaderView().planFailover()
	if len(plan.elections) != 1 || plan.elections[0].To != "c" {
		t.Fatalf("plan = %+v, want orders/0 to c", plan)
	}
	// Another election gets there first (d at epoch 1).
	if _, _, err := r.st.ElectLeader(ctxT(t), "orders", 0, 0, "d", meta.ElectDead); err != nil {
		t.Fatal(err)
	}
	if err := r.ctl.elect(ctxT(t), plan.elections); err != nil {
		t.Fatalf("elect on a stale epoch = %v, want the refusal skipped", err)
	}
	if a := assignment(t, r.st, "orders", 0); a.Owner != "d" || a.LeaderEpoch != 1 {
		t.Fatalf("orders/0 = %+v, want d at epoch 1 (the stale election refused)", a)
	}
	if r.elections(meta.ElectDead) != 0 || len(r.audit.find(audit.Message)) != 0 {
		t.Fatal("a refused election was counted or audited")
	}
	if n := len(r.log.find("leader election skipped")); n != 1 {
		t.Fatalf("skip logs = %d, want 1", n)
	}
	pass(t, r.ctl, r.log) // d is live: nothing to do
	if a := assignment(t, r.st, "orders", 0); a.LeaderEpoch != 1 {
		t.Fatalf("orders/0 = %+v after the next pass, want epoch 1", a)
	}
}

// Preferred leaders come back only on nodes whose imbalance exceeds 10 %, at most eight
// elections per pass, and never to a preferred leader out of the ISR.
func TestPreferredLeadersMoveBackAtMostEightPerPassAboveTenPercent(t *testing.T) {
	cs := func(n int, reps ...string) [][]string {
		out := make([][]string, n)
		for i := range out {
			out[i] = reps
		}
		return out
	}
	r := newElectionRig(t, func(st *meta.Store) {
		// b prefers 10 partitions of "orders" and leads none: 100 %.
		createReplicated(t, st, "orders", false, replicated("orders",
			[]string{"c", "c", "c", "c", "c", "c", "c", "c", "c", "c"}, cs(10, "b", "c")...))
		// d prefers 10 of "quiet" and c leads one: exactly 10 %, left alone.
		createReplicated(t, st, "quiet", false, replicated("quiet", []string{"c"}, cs(10, "d", "c")...))
		// c prefers 8 of "zeta", d leads one (12.5 %), and one more led by d whose c is out of sync.
		createReplicated(t, st, "zeta", false, replicated("zeta", []string{"d", "d"}, cs(8, "c", "d")...))
		setISR(t, st, "zeta", 1, "d")
	})
	misled := func(name string) (n int) {
		for _, a := range r.st.Assignments(name) {
			if a.Owner != a.ReplicaSet()[0] {
				n++
			}
		}
		return n
	}
	// The rig's first pass already ran: eight of orders are back.
	if got := misled("orders"); got != 2 {
		t.Fatalf("orders misled after one pass: %d, want 2 (8 moved back)", got)
	}
	if got := r.elections(meta.ElectPreferred); got != 8 {
		t.Fatalf("preferred elections after one pass = %v, want 8", got)
	}
	pass(t, r.ctl, r.log)
	pass(t, r.ctl, r.log)
	if got := []int{misled("orders"), misled("quiet"), misled("zeta")}; !reflect.DeepEqual(got, []int{0, 1, 1}) {
		t.Fatalf("misled orders/quiet/zeta = %v, want [0 1 1]", got)
	}
	if a := assignment(t, r.st, "zeta", 0); a.Owner != "c" || a.LeaderEpoch != 1 {
		t.Fatalf("zeta/0 = %+v, want c back at epoch 1", a)
	}
	if a := assignment(t, r.st, "zeta", 1); a.Owner != "d" || a.LeaderEpoch != 0 {
		t.Fatalf("zeta/1 = %+v, want d still (c is out of sync)", a)
	}
	if got := r.elections(meta.ElectPreferred); got != 11 {
		t.Fatalf("preferred elections = %v, want 11", got)
	}
	if n := len(r.audit.find(audit.Message)); n != 11 {
		t.Fatalf("audit records = %d, want 11", n)
	}
}
