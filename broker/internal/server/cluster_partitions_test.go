package server

import (
	"fmt"
	"reflect"
	"testing"

	"narad.dev/broker/internal/meta"
)

// GET /v1/cluster/partitions reads the replica sets from the metastore replica: an R = 1
// partition as [owner] and never under-replicated, a replicated one under-replicated when its
// ISR is short of R or it has no leader, under min ISR when short of M; ?under_replicated=true
// keeps only those.
func TestClusterPartitionsReadTheReplicaSetsOfTheMetastore(t *testing.T) {
	f := newClusterFixture(t)
	f.store.topics["r"] = meta.Topic{Name: "r", Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 2}
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n1"})
	f.store.assign(meta.Assignment{Topic: "r", Partition: 0, Owner: "n1", Replicas: []string{"n1", "n2", "n4"},
		ISR: []string{"n1", "n2", "n4"}, LeaderEpoch: 2})
	f.store.assign(meta.Assignment{Topic: "r", Partition: 1, Owner: "n2", Replicas: []string{"n2", "n4", "n1"},
		ISR: []string{"n2", "n4"}, LeaderEpoch: 5})
	f.store.assign(meta.Assignment{Topic: "r", Partition: 2, Owner: "n4", Replicas: []string{"n4", "n1", "n2"},
		ISR: []string{"n4"}, LeaderEpoch: 1})
	f.store.assign(meta.Assignment{Topic: "gone", Partition: 0, Owner: "n1"}) // no topic record

	status, body := f.do(t, "GET", "/v1/cluster/partitions")
	if status != 200 || body["next_page_token"] != "" {
		t.Fatalf("list: %d %v", status, body)
	}
	type row struct {
		name, leader    string
		replicas, isr   string
		epoch, rf, m    float64
		under, underMin bool
	}
	var got []row
	for _, e := range body["partitions"].([]any) {
		p := e.(map[string]any)
		got = append(got, row{fmt.Sprintf("%s/%v", p["topic"], p["partition"]), p["leader"].(string),
			fmt.Sprint(p["replicas"]), fmt.Sprint(p["isr"]), p["leader_epoch"].(float64),
			p["replication_factor"].(float64), p["min_insync_replicas"].(float64),
			p["under_replicated"].(bool), p["under_min_isr"].(bool)})
	}
	want := []row{
		{"orders/0", "n1", "[n1]", "[n1]", 0, 1, 1, false, false},
		{"r/0", "n1", "[n1 n2 n4]", "[n1 n2 n4]", 2, 3, 2, false, false},
		{"r/1", "n2", "[n2 n4 n1]", "[n2 n4]", 5, 3, 2, true, false},
		{"r/2", "n4", "[n4 n1 n2]", "[n4]", 1, 3, 2, true, true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("partitions\n got %v\nwant %v", got, want)
	}
	_, body = f.do(t, "GET", "/v1/cluster/partitions?under_replicated=true")
	if ps := body["partitions"].([]any); len(ps) != 2 || ps[0].(map[string]any)["partition"] != 1.0 || ps[1].(map[string]any)["partition"] != 2.0 {
		t.Fatalf("under-replicated: %v", body)
	}
	if status, body := f.do(t, "GET", "/v1/cluster/partitions?under_replicated=maybe"); status != 400 || body["error"] == nil {
		t.Fatalf("bad flag: %d %v", status, body)
	}
}

// A partition without a leader is under-replicated whatever its ISR says.
func TestALeaderlessPartitionIsUnderReplicated(t *testing.T) {
	p := partitionReplicas(meta.Topic{Name: "r", ReplicationFactor: 2},
		meta.Assignment{Topic: "r", Replicas: []string{"n1", "n2"}, ISR: []string{"n1", "n2"}})
	if !p.UnderReplicated || p.Leader != "" || p.UnderMinISR {
		t.Fatalf("leaderless: %+v", p)
	}
}
