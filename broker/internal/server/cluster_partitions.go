package server

import (
	"context"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/meta"
)

// Partitions lists every partition's replica set from this node's replica
// (docs/internals/http-api.md §2.21). An assignment whose topic record is gone (a delete being
// applied) is left out.
func (c *clusterService) Partitions(context.Context) []api.PartitionReplicas {
	topics := map[string]meta.Topic{}
	out := []api.PartitionReplicas{}
	for _, a := range c.store.AllAssignments() {
		t, ok := topics[a.Topic]
		if !ok {
			if t, ok = c.store.Topic(a.Topic); !ok {
				continue
			}
			topics[a.Topic] = t
		}
		out = append(out, partitionReplicas(t, a))
	}
	return out
}

// partitionReplicas is one listing entry: under-replicated when the ISR is smaller than the
// replication factor or there is no leader, under min ISR when it is smaller than M.
func partitionReplicas(t meta.Topic, a meta.Assignment) api.PartitionReplicas {
	isr := len(a.InSync())
	return api.PartitionReplicas{
		Topic: a.Topic, Partition: a.Partition, Leader: a.Leader(), LeaderEpoch: a.LeaderEpoch,
		Replicas: append([]string{}, a.ReplicaSet()...), ISR: append([]string{}, a.InSync()...),
		ReplicationFactor: t.RF(), MinInsyncReplicas: t.MinISR(),
		UnderReplicated: isr < t.RF() || a.Leader() == "",
		UnderMinISR:     isr < t.MinISR(),
	}
}
