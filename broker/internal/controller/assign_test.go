package controller

import (
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
)

func topic(name string, partitions int) meta.Topic {
	return meta.Topic{Name: name, Partitions: partitions, RetentionMs: meta.DefaultRetentionMs,
		VisibilityTimeoutMs: meta.DefaultVisibilityTimeoutMs, MaxInFlightPerPartition: meta.DefaultMaxInFlight,
		MaxAckedAheadPerPartition: meta.DefaultMaxAckedAhead, CreatedAt: 1_700_000_000,
		Incarnation: "00000000000000" + name[:2], Role: meta.RoleStandalone}
}

func owners(st *meta.Store, name string) map[int]string {
	out := map[int]string{}
	for _, a := range st.Assignments(name) {
		out[a.Partition] = a.Owner
	}
	return out
}

func TestUnassignedPartitionsGetAssigned(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st, ctx := c.leader(), ctxT(t)
	if err := st.SetMemberDraining(ctx, "d", true); err != nil {
		t.Fatal(err)
	}
	// A parent created while no node could take partitions 1 and 2, then grown to 5; a child
	// created with no placement at all (its partitions were deferred behind the parent's).
	if err := st.CreateTopic(ctx, topic("orders", 3), []meta.Assignment{{Topic: "orders", Partition: 0, Owner: "a"}}); err != nil {
		t.Fatal(err)
	}
	grown := topic("orders", 5)
	if err := st.UpdateTopic(ctx, grown); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTopicWith(ctx, meta.TopicCreate{Topic: topic("audit", 4),
		Attach: &meta.AttachSpec{Parent: "orders", Epoch: "67953471cc57a32a"}}); err != nil {
		t.Fatal(err)
	}
	if kid, _ := st.Topic("audit"); kid.Role != meta.RoleChild {
		t.Fatalf("audit is %q, want a child", kid.Role)
	}

	ctl := c.start("a", nil, nil)
	testwait.For(t, 15*time.Second, "every partition assigned", func() bool {
		return len(st.Assignments("orders")) == 5 && len(st.Assignments("audit")) == 4
	})
	settle(t, ctl, 1)
	parent, child := owners(st, "orders"), owners(st, "audit")
	want := map[int]string{0: "a", 1: "b", 2: "c", 3: "a", 4: "b"} // candidates a, b, c: p mod 3
	for p, o := range want {
		if parent[p] != o {
			t.Fatalf("orders owners = %v, want %v", parent, want)
		}
	}
	for p, o := range child {
		if o == "d" {
			t.Fatalf("draining d received audit/%d", p)
		}
		if p < 5 && o == parent[p] {
			t.Fatalf("audit/%d shares owner %s with orders/%d (CL-13)", p, o, p)
		}
	}
}

func TestNoCandidatesLeavesPartitionsUnassigned(t *testing.T) {
	c := openCluster(t, []string{"a"})
	st, ctx := c.leader(), ctxT(t)
	if err := st.SetMemberDraining(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTopic(ctx, topic("orders", 3), nil); err != nil {
		t.Fatal(err)
	}
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 2)
	if as := st.Assignments("orders"); len(as) != 0 {
		t.Fatalf("assigned %+v with no candidate", as)
	}
	if err := st.SetMemberDraining(ctx, "a", false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "assignment once a candidate exists", func() bool { return len(st.Assignments("orders")) == 3 })
}
