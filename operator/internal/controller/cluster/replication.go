package cluster

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// Replication defaults (docs/kubernetes.md, "Replication"): a cluster of at least
// replicatedDefaultFrom brokers replicates new topics replicatedDefaultR times unless
// spec.topicDefaults says otherwise; a smaller one does not replicate them.
const (
	replicatedDefaultFrom = 3
	replicatedDefaultR    = 3

	// underReplicatedRequeue: while partitions are under-replicated the status follows the
	// brokers catching up this closely.
	underReplicatedRequeue = 10 * time.Second
)

// Reasons of the UnderReplicated condition.
const (
	ReasonFullyReplicated           = "FullyReplicated"
	ReasonPartitionsUnderReplicated = "PartitionsUnderReplicated"
)

// defaultReplicationFactor is the --default-replication-factor nc's brokers get.
func defaultReplicationFactor(nc *naradv1.NaradCluster) int32 {
	if r := nc.Spec.TopicDefaults.ReplicationFactor; r != nil {
		return *r
	}
	if nc.Spec.Replicas >= replicatedDefaultFrom {
		return replicatedDefaultR
	}
	return 1
}

// defaultMinInSync is the --default-min-insync-replicas nc's brokers get (0: min(2, R)).
func defaultMinInSync(nc *naradv1.NaradCluster) int32 {
	if m := nc.Spec.TopicDefaults.MinInSyncReplicas; m != nil {
		return *m
	}
	return 0
}

// replicationConfig adds the replication defaults to the brokers' config keys; a value equal
// to the broker's own default is left out, so clusters that do not replicate keep their file.
func replicationConfig(nc *naradv1.NaradCluster, kv map[string]string) {
	if r := defaultReplicationFactor(nc); r != 1 {
		kv["default-replication-factor"] = strconv.Itoa(int(r))
	}
	if m := defaultMinInSync(nc); m != 0 {
		kv["default-min-insync-replicas"] = strconv.Itoa(int(m))
	}
}

// fillReplication writes status.replication and the UnderReplicated condition from the
// brokers' list of under-replicated partitions. When the list could not be read the counts
// stay as last seen and the condition is Unknown.
func (r *Reconciler) fillReplication(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, obs *observation) {
	rs := naradv1.ReplicationStatus{}
	if st.Replication != nil {
		rs = *st.Replication
	}
	rs.DefaultReplicationFactor, rs.DefaultMinInSyncReplicas = defaultReplicationFactor(nc), defaultMinInSync(nc)
	switch {
	case obs.Err != nil || obs.PartitionsErr != nil:
		why := "the brokers could not be asked for under-replicated partitions"
		if obs.PartitionsErr != nil {
			why += ": " + obs.PartitionsErr.Error()
		}
		r.setConditionStatus(nc, st, naradv1.ConditionUnderReplicated, metav1.ConditionUnknown, ReasonBrokersUnreachable, why)
	default:
		rs.UnderReplicatedPartitions, rs.UnderMinInSyncPartitions = countUnderReplicated(obs.UnderReplicated)
		if rs.UnderReplicatedPartitions > 0 {
			r.setCondition(nc, st, naradv1.ConditionUnderReplicated, true, ReasonPartitionsUnderReplicated,
				fmt.Sprintf("%d partitions have fewer in-sync replicas than their replication factor; %d of them are "+
					"below min_insync_replicas and refuse produce (kubectl narad status lists them)",
					rs.UnderReplicatedPartitions, rs.UnderMinInSyncPartitions))
		} else {
			r.setCondition(nc, st, naradv1.ConditionUnderReplicated, false, ReasonFullyReplicated,
				"every partition has its replication factor of in-sync replicas")
		}
	}
	st.Replication = &rs
}

// countUnderReplicated counts the under-replicated partitions of a list, and those below
// min_insync_replicas.
func countUnderReplicated(parts []client.PartitionReplicas) (under, underMin int32) {
	for _, p := range parts {
		if p.UnderReplicated {
			under++
		}
		if p.UnderMinISR {
			underMin++
		}
	}
	return under, underMin
}
