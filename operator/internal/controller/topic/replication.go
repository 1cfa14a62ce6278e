package topic

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// underReplicatedRequeue is how soon a Topic with under-replicated partitions is looked at
// again (instead of ResyncPeriod), so its status follows the brokers catching up.
const underReplicatedRequeue = 10 * time.Second

// Reasons of the UnderReplicated condition.
const (
	ReasonFullyReplicated           = "FullyReplicated"
	ReasonPartitionsUnderReplicated = "PartitionsUnderReplicated"
	ReasonReplicationUnknown        = "ReplicationUnknown"
)

// replication is the count of a topic's partitions the brokers report under-replicated
// (GET /v1/cluster/partitions?under_replicated=true, docs/replication.md).
type replication struct {
	under, underMin int32
}

// countUnderReplicated counts topic's partitions in the brokers' under-replicated list.
func countUnderReplicated(topic string, parts []client.PartitionReplicas) replication {
	var r replication
	for _, p := range parts {
		if p.Topic != topic {
			continue
		}
		if p.UnderReplicated {
			r.under++
		}
		if p.UnderMinISR {
			r.underMin++
		}
	}
	return r
}

// observeReplication asks the brokers which partitions are under-replicated and records the
// topic's count in st (or why it is unknown).
func observeReplication(ctx context.Context, cl *client.Client, topic string, st *status) {
	parts, err := cl.AllClusterPartitions(ctx, true)
	if err != nil {
		st.replErr = fmt.Sprintf("list under-replicated partitions: %v", err)
		return
	}
	r := countUnderReplicated(topic, parts)
	st.repl = &r
}

// settleReplication writes the observed replication settings, the counts and the
// UnderReplicated condition into ts. A pass that did not ask the brokers leaves them as they
// were.
func (s *status) settleReplication(ts *naradv1.TopicStatus, gen int64) {
	if d := s.seen; d != nil {
		ts.ReplicationFactor = int32(observedRF(d.Topic))
		ts.MinInSyncReplicas = int32(d.MinInsyncReplicas)
	}
	cond := metav1.Condition{Type: naradv1.ConditionUnderReplicated, ObservedGeneration: gen}
	switch {
	case s.repl != nil && s.repl.under > 0:
		ts.UnderReplicatedPartitions, ts.UnderMinInSyncPartitions = s.repl.under, s.repl.underMin
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonPartitionsUnderReplicated
		cond.Message = replicationMessage(s.repl.under, s.repl.underMin)
	case s.repl != nil:
		ts.UnderReplicatedPartitions, ts.UnderMinInSyncPartitions = 0, s.repl.underMin
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonFullyReplicated
		cond.Message = "every partition has its replication factor of in-sync replicas"
	case s.replErr != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, ReasonReplicationUnknown, s.replErr
	default:
		return
	}
	apimeta.SetStatusCondition(&ts.Conditions, cond)
}

// replicationMessage is the UnderReplicated message of the counts.
func replicationMessage(under, underMin int32) string {
	return fmt.Sprintf("%d partitions have fewer in-sync replicas than the replication factor; "+
		"%d of them are below min_insync_replicas and refuse produce", under, underMin)
}

// underReplicated reports whether the pass saw under-replicated partitions.
func (s *status) underReplicated() bool { return s.repl != nil && s.repl.under > 0 }
