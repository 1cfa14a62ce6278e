package engine

import (
	"fmt"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// The racks of the member records (--rack) drive placement: on three racks of two nodes
// each, every partition of an R = 3 topic has one replica per rack (docs/replication.md, Racks).
func TestReplicasOfAPartitionGoToDistinctRacks(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	racks := map[string]string{"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2", "n5": "r3", "n6": "r3"}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("n%d", i)
		if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 10+i),
			ClusterAddr: fmt.Sprintf("127.0.0.1:%d", 20+i), Status: meta.MemberAlive,
			LastHeartbeat: time.Now().Unix(), Rack: racks[id]}); err != nil {
			t.Fatal(err)
		}
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "racked", Partitions: 6, ReplicationFactor: 3})
	for p := range top.Partitions {
		a, ok := n.store.Assignment(top.Name, p)
		if !ok || len(a.ReplicaSet()) != 3 {
			t.Fatalf("partition %d: assignment %+v", p, a)
		}
		seen := map[string]bool{}
		for _, id := range a.ReplicaSet() {
			if seen[racks[id]] {
				t.Fatalf("partition %d: replicas %v share rack %s", p, a.ReplicaSet(), racks[id])
			}
			seen[racks[id]] = true
		}
	}
}

// --default-min-insync-replicas fills the M of a replicated topic created without one, capped
// at its replication factor; an explicit M and an unreplicated topic keep theirs.
func TestCreateWithoutMTakesTheClusterDefaultCappedAtR(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.DefaultMinInsyncReplicas = 3 })
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 30+i),
			ClusterAddr: fmt.Sprintf("127.0.0.1:%d", 40+i), Status: meta.MemberAlive,
			LastHeartbeat: time.Now().Unix()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		req   service.CreateTopicRequest
		wantM int // stored
	}{
		{service.CreateTopicRequest{Name: "r3", Partitions: 3, ReplicationFactor: 3}, 3},
		{service.CreateTopicRequest{Name: "r2", Partitions: 3, ReplicationFactor: 2}, 2},
		{service.CreateTopicRequest{Name: "r3m1", Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 1}, 1},
		{service.CreateTopicRequest{Name: "r1", Partitions: 3, ReplicationFactor: 1}, 0},
	} {
		if got := n.createTopic(c.req); got.MinInsyncReplicas != c.wantM {
			t.Fatalf("%s: stored min_insync_replicas %d, want %d", c.req.Name, got.MinInsyncReplicas, c.wantM)
		}
	}
}
