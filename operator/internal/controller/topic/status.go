package topic

import (
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// status gathers what one reconcile pass learned and writes it into the Topic's status in
// settle. It is filled after every Kubernetes write of the pass, because a write refreshes the
// object from the API server and would drop anything written into it earlier.
type status struct {
	t *naradv1.Topic

	waitReason, waitMessage string   // Ready False, retried with backoff (cluster, brokers)
	degReason               string   // first Degraded reason of the pass
	degMessages             []string // every Degraded message of the pass

	seen    *client.TopicDetail // the broker topic, when described
	backlog int64

	repl    *replication // the brokers' under-replicated count, when asked
	replErr string       // why the count is unknown
}

func newStatus(t *naradv1.Topic) *status { return &status{t: t} }

// notReady records a condition the reconciler waits out with backoff.
func (s *status) notReady(reason, msg string) {
	if s.waitReason == "" {
		s.waitReason, s.waitMessage = reason, msg
	}
}

// degraded records a refusal: the spec cannot be reached as things stand.
func (s *status) degraded(reason, msg string) {
	if s.degReason == "" {
		s.degReason = reason
	}
	s.degMessages = append(s.degMessages, msg)
}

// observe records the broker topic as last described and its backlog.
func (s *status) observe(d *client.TopicDetail, backlog int64) { s.seen, s.backlog = d, backlog }

// waiting reports whether the pass ended waiting on the cluster or brokers.
func (s *status) waiting() bool { return s.waitReason != "" }

// settle writes the pass's findings into the Topic's status: a wait for the cluster leaves
// Degraded as it was (unknown); a refusal makes Ready False with the same reason.
func (s *status) settle() {
	ts := &s.t.Status
	gen := s.t.Generation
	ts.ObservedGeneration = gen
	if d := s.seen; d != nil {
		ts.Partitions = int32(d.Partitions)
		ts.Owners = owners(d.PartitionStats)
		ts.Incarnation = d.Incarnation
		ts.Backlog = s.backlog
	}
	s.settleReplication(ts, gen)
	set := func(typ string, st metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&ts.Conditions, metav1.Condition{Type: typ, Status: st,
			ObservedGeneration: gen, Reason: reason, Message: msg})
	}
	switch {
	case s.degReason != "":
		msg := strings.Join(s.degMessages, "; ")
		set(naradv1.ConditionDegraded, metav1.ConditionTrue, s.degReason, msg)
		set(naradv1.ConditionReady, metav1.ConditionFalse, s.degReason, msg)
		set(naradv1.ConditionProgressing, metav1.ConditionFalse, s.degReason, "waiting for a spec change")
	case s.waitReason != "":
		set(naradv1.ConditionReady, metav1.ConditionFalse, s.waitReason, s.waitMessage)
		set(naradv1.ConditionProgressing, metav1.ConditionTrue, s.waitReason, "retrying with backoff")
	default:
		set(naradv1.ConditionDegraded, metav1.ConditionFalse, "Reconciled", "the broker topic matches the spec")
		set(naradv1.ConditionReady, metav1.ConditionTrue, "Reconciled", "the broker topic matches the spec")
		set(naradv1.ConditionProgressing, metav1.ConditionFalse, "Reconciled", "nothing to change")
	}
}

// owners counts the partitions each node owns.
func owners(stats []client.PartitionStat) map[string]int32 {
	if len(stats) == 0 {
		return nil
	}
	out := map[string]int32{}
	for _, p := range stats {
		out[p.OwnerNode]++
	}
	return out
}
