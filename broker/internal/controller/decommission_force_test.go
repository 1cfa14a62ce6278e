package controller

import (
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
)

// forceRig: leader a, members b, c, d (d a non-voter, dead), topic orders with partitions
// 0, 1 and 4 owned by d (4 aimed at c by a move from the dead d), 2 by a, 3 by b, and a
// replicated topic rep whose ISR keeps alive members besides d.
func forceRig(t *testing.T) (*testCluster, *meta.Store, *Controller, *logRecorder) {
	t.Helper()
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st := c.leader()
	createOwned(t, st, "orders", []meta.Assignment{
		{Topic: "orders", Partition: 0, Owner: "d"}, {Topic: "orders", Partition: 1, Owner: "d"},
		{Topic: "orders", Partition: 2, Owner: "a"}, {Topic: "orders", Partition: 3, Owner: "b"},
		{Topic: "orders", Partition: 4, Owner: "d"},
	})
	aim(t, st, "orders", 4, "d", "c")
	rep := topic("replicated", 1)
	rep.ReplicationFactor = 3
	if err := st.CreateTopic(ctxT(t), rep, []meta.Assignment{{Topic: "replicated", Partition: 0, Owner: "a",
		Replicas: []string{"d", "a", "b"}, ISR: []string{"a", "b"}}}); err != nil {
		t.Fatal(err)
	}
	dead(t, st, "d")
	trail := &logRecorder{}
	ctl := c.manual(newMembership([]string{"a", "b", "c"}, "d"), &logRecorder{}, func(cfg *Config) {
		cfg.Audit = audit.New(slog.New(trail), "a")
	})
	return c, st, ctl, trail
}

func refs(topic string, ps ...int) []PartitionRef {
	out := make([]PartitionRef, 0, len(ps))
	for _, p := range ps {
		out = append(out, PartitionRef{Topic: topic, Partition: p})
	}
	return out
}

// Force is refused, changing nothing, unless the member is dead and the lose list names
// exactly its single-replica partitions: missing ones → ErrRefused (dead_owner) listing
// exactly them; a partition it does not solely own → ErrBadForce; a live member → ErrBadForce.
func TestForcedDecommissionMustNameEverySingleReplicaPartition(t *testing.T) {
	_, st, ctl, trail := forceRig(t)
	ctx := ctxT(t)
	before := st.AllAssignments()

	if _, err := ctl.DecommissionForce(ctx, "zz", nil); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("unknown member: %v, want ErrNotFound", err)
	}
	if _, err := ctl.DecommissionForce(ctx, "b", refs("orders", 3)); !errors.Is(err, ErrBadForce) {
		t.Fatalf("force on a live member: %v, want ErrBadForce", err)
	}
	v, err := ctl.DecommissionForce(ctx, "d", refs("orders", 1))
	if !errors.Is(err, ErrRefused) || !reflect.DeepEqual(v.Missing, refs("orders", 0, 4)) ||
		!slices.Contains(v.Reasons, ReasonDeadOwner) || v.Allowed || v.Lost != nil {
		t.Fatalf("force naming 1 of 3 = %+v, %v; want ErrRefused, dead_owner, missing orders/0 and orders/4", v, err)
	}
	for _, bad := range [][]PartitionRef{
		append(refs("orders", 0, 1, 4), refs("orders", 2)...), // owned by a
		append(refs("orders", 0, 1, 4), refs("replicated", 0)...),
		append(refs("orders", 0, 1, 4), refs("nosuch", 0)...),
	} {
		if _, err := ctl.DecommissionForce(ctx, "d", bad); !errors.Is(err, ErrBadForce) {
			t.Fatalf("force naming %v: %v, want ErrBadForce", bad, err)
		}
	}
	if !reflect.DeepEqual(st.AllAssignments(), before) || isDraining(t, st, "d") {
		t.Fatal("a refused forced decommission changed the assignments or the drain flag")
	}
	if n := len(trail.find(audit.Message)); n != 0 {
		t.Fatalf("%d audit records of refused forced decommissions, want 0", n)
	}
}

// A forced decommission naming every single-replica partition of the dead node hands each to
// a live node (fewest leaderships first) with the epoch bumped and any move target cleared,
// answers exactly those partitions as lost, audits each, and sets the drain flag; the
// replicated partition it was a replica of is left to C12.
func TestForcedDecommissionGivesUpExactlyTheNamedPartitions(t *testing.T) {
	_, st, ctl, trail := forceRig(t)
	ctx := ctxT(t)
	v, err := ctl.DecommissionForce(ctx, "d", append(refs("orders", 4, 0, 1), refs("orders", 0)...))
	if err != nil || !v.Allowed {
		t.Fatalf("forced decommission = %+v, %v; want allowed", v, err)
	}
	// Loads before (leaderships, replicas): a (2, 2), b (1, 2), c (0, 0). orders/4's move
	// target c is cleared for b.
	want := []LostPartition{
		{Topic: "orders", Partition: 0, Owner: "d", NewOwner: "c", LeaderEpoch: 1},
		{Topic: "orders", Partition: 1, Owner: "d", NewOwner: "c", LeaderEpoch: 1},
		{Topic: "orders", Partition: 4, Owner: "d", NewOwner: "b", LeaderEpoch: 1},
	}
	if !reflect.DeepEqual(v.Lost, want) {
		t.Fatalf("lost = %+v, want %+v", v.Lost, want)
	}
	for _, l := range want {
		a, ok := st.Assignment(l.Topic, l.Partition)
		if !ok || a.Owner != l.NewOwner || a.Target != "" || a.LeaderEpoch != l.LeaderEpoch || len(a.ReplicaSet()) != 1 {
			t.Fatalf("%s/%d after the force: %+v, want owner %s, no target, epoch %d", l.Topic, l.Partition, a, l.NewOwner, l.LeaderEpoch)
		}
	}
	if a, _ := st.Assignment("replicated", 0); a.Owner != "a" || !slices.Contains(a.ReplicaSet(), "d") {
		t.Fatalf("the replicated partition changed: %+v", a)
	}
	if !isDraining(t, st, "d") {
		t.Fatal("the dead node is not draining after the forced decommission")
	}
	recs := trail.find(audit.Message)
	if len(recs) != len(want) {
		t.Fatalf("%d audit records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, l := range want {
		w := map[string]string{"event": EventDecommissionForce, "actor": audit.ActorController,
			"target": PartitionRef{l.Topic, l.Partition}.String(), "outcome": audit.OK, "owner": "d", "new_owner": l.NewOwner}
		if !hasAttrs(recs[i], w) {
			t.Fatalf("audit record %d = %+v, want %v", i, recs[i], w)
		}
	}
	// Nothing of d's is single-replica any more: the plain verdict is allowed, and a second
	// force with an empty list succeeds and loses nothing.
	if got := ctl.EvaluateDecommission("d"); !got.Allowed {
		t.Fatalf("verdict after the force = %+v, want allowed", got)
	}
	if v, err := ctl.DecommissionForce(ctx, "d", nil); err != nil || len(v.Lost) != 0 {
		t.Fatalf("repeated force = %+v, %v; want nothing lost", v, err)
	}
}

// Force covers single-replica partitions only: a replicated partition whose only in-sync
// replica is the dead node keeps the decommission refused (dead_owner), and nothing changes.
func TestForcedDecommissionKeepsRefusingAStrandedReplicatedPartition(t *testing.T) {
	_, st, ctl, _ := forceRig(t)
	ctx := ctxT(t)
	rep := topic("solo", 1)
	rep.ReplicationFactor = 2
	if err := st.CreateTopic(ctx, rep, []meta.Assignment{{Topic: "solo", Partition: 0, Owner: "d",
		Replicas: []string{"d", "a"}, ISR: []string{"d"}}}); err != nil {
		t.Fatal(err)
	}
	before := st.AllAssignments()
	v, err := ctl.DecommissionForce(ctx, "d", refs("orders", 0, 1, 4))
	if !errors.Is(err, ErrRefused) || !reflect.DeepEqual(v.Reasons, []string{ReasonDeadOwner}) || v.Missing != nil {
		t.Fatalf("force with a stranded replicated partition = %+v, %v; want ErrRefused, dead_owner", v, err)
	}
	if !reflect.DeepEqual(st.AllAssignments(), before) || isDraining(t, st, "d") {
		t.Fatal("the refused force changed something")
	}
}

func TestListRefsIsBounded(t *testing.T) {
	var rs []PartitionRef
	for p := range 25 {
		rs = append(rs, PartitionRef{Topic: "t", Partition: p})
	}
	if got, want := listRefs(rs), "t/0, t/1, t/2, t/3, t/4, t/5, t/6, t/7, t/8, t/9 and 15 more"; got != want {
		t.Fatalf("listRefs = %q, want %q", got, want)
	}
}
