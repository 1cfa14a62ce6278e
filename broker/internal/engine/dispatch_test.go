package engine

import (
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

func TestTopologyResolvesLocalRemoteAndDeadOwnersFromTheCurrentReplica(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := n.ctx()
	if err := n.store.MemberJoin(ctx, meta.Member{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "10.0.0.2:7943",
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "routes", Partitions: 3})
	topo := n.e.Topology()

	if got, ok := topo.Partitions(top.Name, ""); !ok || got != 3 {
		t.Fatalf("Partitions(any incarnation) = %d, %v", got, ok)
	}
	if _, ok := topo.Partitions(top.Name, "ffffffffffffffff"); ok {
		t.Fatal("Partitions matched another incarnation")
	}
	if d := topo.Destination(top.Name, 0); d.Kind != dispatch.DestLocal || d.Node != "n1" {
		t.Fatalf("partition 0: %+v, want local", d)
	}
	if d := topo.Destination(top.Name, 1); d.Kind != dispatch.DestRemote || d.Node != "n2" || d.Addr != "10.0.0.2:7943" {
		t.Fatalf("partition 1: %+v, want remote n2 at its cluster address", d)
	}
	if d := topo.Destination("nope", 0); d.Kind != dispatch.DestDeadOwner {
		t.Fatalf("unassigned partition: %+v, want dead owner", d)
	}
	// The owner dies: the very next resolution sees it (no stale cached member).
	if err := n.store.MemberDead(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if d := topo.Destination(top.Name, 1); d.Kind != dispatch.DestDeadOwner || d.Node != "n2" {
		t.Fatalf("partition 1 after n2 died: %+v, want dead owner", d)
	}
	// Raft records the applied index just after the FSM answers the proposal: caught up within
	// moments, not necessarily at the instant MemberDead returns.
	testwait.For(t, 5*time.Second, "a single-node leader to be caught up", topo.CaughtUp)

	// Draining as seen by the replica is visible at once too.
	if n.e.DrainingSeen() {
		t.Fatal("DrainingSeen before any drain")
	}
	if err := n.store.SetMemberDraining(ctx, "n1", true); err != nil {
		t.Fatal(err)
	}
	if !n.e.DrainingSeen() {
		t.Fatal("DrainingSeen stale right after the drain flag applied")
	}
}

func TestConfirmAbsentOnlyForGoneTopicsOrIncarnations(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "present", Partitions: 3})
	topo := n.e.Topology()
	for _, tc := range []struct {
		topic, inc string
		want       bool
	}{
		{top.Name, top.Incarnation, false},
		{top.Name, "", false},
		{top.Name, "ffffffffffffffff", true},
		{"never-created", "", true},
	} {
		got, err := topo.ConfirmAbsent(n.ctx(), tc.topic, tc.inc)
		if err != nil || got != tc.want {
			t.Errorf("ConfirmAbsent(%s, %q) = %v, %v; want %v", tc.topic, tc.inc, got, err, tc.want)
		}
	}
}

func TestCommitterRoutesByDestinationKind(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "route", Partitions: 3})
	recs := []wal.Record{{Topic: top.Name, Incarnation: top.Incarnation, Partition: 0, Payload: []byte("x")}}
	c := n.e.Committer(nil)
	if err := c.Commit(n.ctx(), dispatch.Destination{Kind: dispatch.DestLocal, Node: "n1"}, top.Name, 0, recs); err != nil {
		t.Fatalf("local commit: %v", err)
	}
	if err := c.Commit(n.ctx(), dispatch.Destination{Kind: dispatch.DestRemote, Node: "n2", Addr: "x:1"}, top.Name, 0, recs); !errors.Is(err, errNoRemote) {
		t.Fatalf("remote commit without a remote committer: %v, want errNoRemote", err)
	}
	if err := c.Commit(n.ctx(), dispatch.Destination{Kind: dispatch.DestDeadOwner, Node: "n2"}, top.Name, 0, recs); err == nil {
		t.Fatal("commit to a dead owner succeeded")
	}
	if msgs := n.replay(top, 0); len(msgs) != 1 {
		t.Fatalf("partition 0 holds %d records, want only the local commit", len(msgs))
	}
}
