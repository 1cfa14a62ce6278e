package cluster

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/naming"
)

// observation is one read of the brokers, made once per reconcile (the status author may add
// fields; the scale-down code reads these).
type observation struct {
	// Members is nil when no broker answered (Err says why).
	Members         []client.Member
	Leader          string
	LeaderReachable bool
	Moves           []client.Move
	Err             error
	// MovesErr is set when the members answered but the moves list did not; Moves is then nil
	// and the status keeps the moves it showed last.
	MovesErr error
	// Via is the ordinal of the broker that answered.
	Via int32
	// UnderReplicated are the partitions the brokers report under-replicated (GET
	// /v1/cluster/partitions?under_replicated=true); PartitionsErr says why they are unknown.
	UnderReplicated []client.PartitionReplicas
	PartitionsErr   error
}

// leader is the Raft leader the brokers agree on, or "" when none is known for sure.
func (o *observation) leader() string {
	if o.Err != nil || !o.LeaderReachable {
		return ""
	}
	return o.Leader
}

// observe reads the members and the moves from the first broker of the existing pods that
// answers /readyz (ready pods first, lowest ordinal first). It never fails: what went wrong
// is in the observation.
func (r *Reconciler) observe(ctx context.Context, nc *naradv1.NaradCluster, pods []corev1.Pod) *observation {
	obs := &observation{}
	ordinals := probeOrder(nc, pods)
	if len(ordinals) == 0 {
		obs.Err = fmt.Errorf("%w: no broker pod exists yet", brokers.ErrNoBroker)
		return obs
	}
	cl, via, err := r.Brokers.Any(ctx, nc, ordinals)
	if err != nil {
		obs.Err = err
		return obs
	}
	obs.Via = via
	ml, err := cl.ClusterMembers(ctx)
	if err != nil {
		obs.Err = fmt.Errorf("list members through %s: %w", naming.PodName(nc, via), err)
		return obs
	}
	obs.Members, obs.Leader, obs.LeaderReachable = ml.Members, ml.Leader, ml.LeaderReachable
	if obs.UnderReplicated, err = cl.AllClusterPartitions(ctx, true); err != nil {
		obs.PartitionsErr = fmt.Errorf("list under-replicated partitions through %s: %w", naming.PodName(nc, via), err)
	}
	moves, err := cl.Moves(ctx, false)
	if err != nil {
		obs.MovesErr = fmt.Errorf("list moves through %s: %w", naming.PodName(nc, via), err)
		return obs
	}
	obs.Moves = moves
	return obs
}

// probeOrder lists the ordinals of the existing broker pods, ready ones first, each group by
// ascending ordinal. Pods being deleted come last: they are about to stop answering.
func probeOrder(nc *naradv1.NaradCluster, pods []corev1.Pod) []int32 {
	type cand struct {
		ordinal int32
		rank    int
	}
	var cs []cand
	for i := range pods {
		o, ok := naming.Ordinal(nc, pods[i].Name)
		if !ok {
			continue
		}
		rank := 1
		switch {
		case pods[i].DeletionTimestamp != nil:
			rank = 2
		case podReady(&pods[i]):
			rank = 0
		}
		cs = append(cs, cand{o, rank})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].rank != cs[j].rank {
			return cs[i].rank < cs[j].rank
		}
		return cs[i].ordinal < cs[j].ordinal
	})
	out := make([]int32, len(cs))
	for i, c := range cs {
		out[i] = c.ordinal
	}
	return out
}

// podReady reports whether the pod's Ready condition is True and it is not being deleted.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
