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
