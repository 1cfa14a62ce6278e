package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

// Reasons of the DisruptionsBlocked condition.
const (
	ReasonPartitionsAtMinISR = "PartitionsAtMinISR"
	ReasonReplicasToSpare    = "ReplicasToSpare"
	ReasonPartitionsUnknown  = "PartitionsUnknown"
)

// disruptionRequeue bounds the status period while disruptions are blocked, so that a node
// drain waiting on the budget goes on soon after the partitions are back in sync.
const disruptionRequeue = 10 * time.Second

// disruptionPlan is the PodDisruptionBudget decision of one reconcile.
type disruptionPlan struct {
	Blocked bool
	Reason  string
	Message string
}

// planDisruptions decides the budget (docs/kubernetes.md "Disruptions"): no voluntary
// disruption while a replicated partition has fewer than M + 1 in-sync replicas, else one broker
// at a time (the Raft majority rule, the only rule of a cluster without replicated topics).
// When the partitions cannot be read the decision of the previous reconcile (wasBlocked)
// stands.
func planDisruptions(h replicaHealth, wasBlocked bool) disruptionPlan {
	switch {
	case h.Err != nil:
		blocked := wasBlocked
		return disruptionPlan{Blocked: blocked, Reason: ReasonPartitionsUnknown, Message: fmt.Sprintf(
			"the partitions could not be read (%v); the budget keeps maxUnavailable %d", h.Err, maxUnavailable(blocked))}
	case len(h.AtMinISR) > 0:
		return disruptionPlan{Blocked: true, Reason: ReasonPartitionsAtMinISR, Message: fmt.Sprintf(
			"maxUnavailable 0: %d replicated partitions have no in-sync replica to spare: %s",
			len(h.AtMinISR), describePartitions(h.AtMinISR))}
	}
	return disruptionPlan{Reason: ReasonReplicasToSpare, Message: "maxUnavailable 1: every replicated partition has an in-sync replica to spare"}
}

func maxUnavailable(blocked bool) int {
	if blocked {
		return 0
	}
	return 1
}

// reconcileDisruptions applies the PodDisruptionBudget planDisruptions decides, sets the
// DisruptionsBlocked condition and records an event when the budget closes or opens. It
// returns the plan.
func (r *Reconciler) reconcileDisruptions(ctx context.Context, nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, h replicaHealth) (disruptionPlan, error) {
	wasBlocked := r.budgetWasClosed(nc)
	plan := planDisruptions(h, wasBlocked)
	if err := r.apply(ctx, nc, desiredPDB(nc, plan.Blocked)); err != nil {
		return plan, err
	}
	r.budgets.Store(nc.UID, plan.Blocked)
	r.setCondition(nc, st, naradv1.ConditionDisruptionsBlocked, plan.Blocked, plan.Reason, plan.Message)
	switch {
	case plan.Blocked && !wasBlocked:
		r.event(nc, corev1.EventTypeWarning, "DisruptionsBlocked", "PodDisruptionBudget", "%s", plan.Message)
	case !plan.Blocked && wasBlocked:
		r.event(nc, corev1.EventTypeNormal, "DisruptionsAllowed", "PodDisruptionBudget", "%s", plan.Message)
	}
	return plan, nil
}

// budgetWasClosed is the budget decision of the previous reconcile of nc: the one this process
// made, else (after an operator restart) the DisruptionsBlocked condition of its status. The
// process's own memory comes first because the cluster object a reconcile starts from may
// predate the status write of the reconcile before it (the informer cache lags the API
// server), and reading an old "not blocked" there would open the budget while the partitions
// cannot be read.
func (r *Reconciler) budgetWasClosed(nc *naradv1.NaradCluster) bool {
	if v, ok := r.budgets.Load(nc.UID); ok {
		return v.(bool)
	}
	prev := findCondition(nc.Status.Conditions, naradv1.ConditionDisruptionsBlocked)
	return prev != nil && prev.Status == metav1.ConditionTrue
}
