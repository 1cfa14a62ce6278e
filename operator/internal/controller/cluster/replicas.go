package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// maxNamedPartitions bounds how many partitions a condition message or event names.
const maxNamedPartitions = 3

// replicaHealth is one read of the brokers' partitions (GET /v1/cluster/partitions,
// docs/internals/http-api.md §2.21) reduced to what disruptions and the rolling restart need.
// Only replicated partitions (R ≥ 2) count: single-replica topics keep their old rules.
type replicaHealth struct {
	// Err is set when the partitions could not be read; the other fields are then empty.
	Err error
	// AtMinISR are the replicated partitions with fewer than M + 1 in-sync replicas: taking
	// one more of their replicas down would stop their produce (or they have already stopped).
	AtMinISR []client.PartitionReplicas
	// Under are the replicated partitions short of R in-sync replicas or without a leader.
	Under []client.PartitionReplicas
	// Misled counts the replicated partitions led by another replica than their preferred
	// leader (replicas[0]).
	Misled int
	// Via is the ordinal of the broker that answered.
	Via int32
}

// readReplicaHealth reads the partitions through the broker that answered obs. Brokers of a
// release without replication answer 404: they have no replicated partition.
func (r *Reconciler) readReplicaHealth(ctx context.Context, nc *naradv1.NaradCluster, obs *observation) replicaHealth {
	if obs.Err != nil {
		return replicaHealth{Err: obs.Err}
	}
	cl, err := r.Brokers.Pod(ctx, nc, obs.Via)
	if err != nil {
		return replicaHealth{Err: err}
	}
	ps, err := cl.AllClusterPartitions(ctx, false)
	switch {
	case client.IsStatus(err, http.StatusNotFound):
		return replicaHealth{}
	case err != nil:
		return replicaHealth{Err: fmt.Errorf("list partitions through %s: %w", naming.PodName(nc, obs.Via), err)}
	}
	h := assessReplicas(ps)
	h.Via = obs.Via
	return h
}

// assessReplicas classifies the replicated partitions of ps.
func assessReplicas(ps []client.PartitionReplicas) replicaHealth {
	var h replicaHealth
	for _, p := range ps {
		if p.ReplicationFactor < 2 {
			continue
		}
		if len(p.ISR) < p.MinInsyncReplicas+1 {
			h.AtMinISR = append(h.AtMinISR, p)
		}
		if p.UnderReplicated || p.Leader == "" || len(p.ISR) < p.ReplicationFactor {
			h.Under = append(h.Under, p)
		}
		if p.Leader != "" && len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
			h.Misled++
		}
	}
	return h
}

// describePartitions names up to maxNamedPartitions of ps as "topic/partition (isr a,b; M m)".
func describePartitions(ps []client.PartitionReplicas) string {
	var b strings.Builder
	for i, p := range ps {
		if i == maxNamedPartitions {
			fmt.Fprintf(&b, " and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s/%d (%d of %d in sync, min %d)", p.Topic, p.Partition, len(p.ISR), p.ReplicationFactor, p.MinInsyncReplicas)
	}
	return b.String()
}
