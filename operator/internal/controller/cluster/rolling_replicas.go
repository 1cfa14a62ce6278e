package cluster

import (
	"context"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/log"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// waitForReplicas holds back the victim planRoll chose while a replicated partition is short
// of a full ISR (or its leader) or the partitions cannot be read: the previous pod's replicas
// are still catching up, and restarting another broker now could take a partition below its
// min_insync_replicas (docs/kubernetes.md "Rolling restarts with replicated topics"). A cluster
// without replicated partitions rolls exactly as before.
func waitForReplicas(plan rollPlan, h replicaHealth) rollPlan {
	if plan.Victim == nil {
		return plan
	}
	switch {
	case h.Err != nil:
		plan.Wait = fmt.Sprintf("the partitions could not be read: %v", h.Err)
	case len(h.Under) > 0:
		plan.Wait = fmt.Sprintf("%d replicated partitions are not back to a full ISR: %s", len(h.Under), describePartitions(h.Under))
	default:
		return plan
	}
	plan.Victim = nil
	return plan
}

// restorePreferredLeaders, between two restarts, gives the partitions whose leadership moved
// during the previous one (its controlled shutdown hands leaderships to other in-sync replicas)
// back to their preferred leaders (POST /v1/cluster/elect-leaders, preferred), so leadership
// does not pile up on the brokers that have not restarted yet and each broker's controlled
// shutdown hands off only its own share. A failure only costs balance: it is logged.
func (r *Reconciler) restorePreferredLeaders(ctx context.Context, nc *naradv1.NaradCluster, h replicaHealth) {
	if h.Misled == 0 {
		return
	}
	logger := log.FromContext(ctx)
	cl, err := r.Brokers.Pod(ctx, nc, h.Via)
	if err == nil {
		var els []client.Election
		els, err = cl.ElectLeaders(ctx, client.ElectLeadersRequest{Preferred: true})
		if err == nil {
			logger.Info("preferred leaders restored before the next restart", "elections", len(els))
			return
		}
	}
	if !client.IsStatus(err, http.StatusNotFound) {
		logger.Error(err, "preferred leader election before the next restart")
	}
}
