package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/internal/controller/pause"
)

// paused records that nc is paused (docs/kubernetes.md "Pausing reconciliation") and does
// nothing else: no owned object is written, no pod deleted, no broker called, the finalizer
// kept. Removing the annotation is an update the controller's predicate passes.
func (r *Reconciler) paused(ctx context.Context, nc *naradv1.NaradCluster) error {
	st := nc.Status.DeepCopy()
	if _, flipped, _ := pause.Mark(&st.Conditions, nc); flipped {
		r.event(nc, corev1.EventTypeNormal, "ReconcilePaused", "Reconcile",
			"the %s annotation is \"true\": changing nothing until it is removed", naradv1.PauseReconcileAnnotation)
	}
	return r.patchStatus(ctx, nc, st)
}

// markResumed turns ReconcilePaused False once the annotation is gone.
func (r *Reconciler) markResumed(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus) {
	if _, flipped, _ := pause.Mark(&st.Conditions, nc); flipped {
		r.event(nc, corev1.EventTypeNormal, "ReconcileResumed", "Reconcile",
			"the %s annotation is gone: reconciling again", naradv1.PauseReconcileAnnotation)
	}
}
