package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
)

// dependentsRecheck is how often a deleted cluster looks again for Topics and FanoutLinks
// still referencing it (their deletion also triggers a reconcile through the watches).
const dependentsRecheck = 5 * time.Second

// ensureFinalizer puts naradv1.NaradClusterFinalizer on nc.
func (r *Reconciler) ensureFinalizer(ctx context.Context, nc *naradv1.NaradCluster) error {
	if controllerutil.ContainsFinalizer(nc, naradv1.NaradClusterFinalizer) {
		return nil
	}
	patch := ctrlclient.MergeFromWithOptions(nc.DeepCopy(), ctrlclient.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(nc, naradv1.NaradClusterFinalizer)
	if err := r.Client.Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// finalize holds a deleted cluster while Topics, FanoutLinks or NaradUsers of its namespace reference it
// (their finalizers reach the brokers through it), then lets it go.
func (r *Reconciler) finalize(ctx context.Context, nc *naradv1.NaradCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, naradv1.NaradClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	deps, err := r.dependents(ctx, nc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(deps) > 0 {
		msg := "Waiting for " + summarize(deps, 5) + " to be deleted"
		if c := findCondition(nc.Status.Conditions, naradv1.ConditionReady); c == nil || c.Reason != "Deleting" || c.Message != msg {
			r.event(nc, corev1.EventTypeNormal, "WaitingForDependents", "Delete", "%s", msg)
			st := nc.Status.DeepCopy()
			r.setCondition(nc, st, naradv1.ConditionReady, false, "Deleting", msg)
			if err := r.patchStatus(ctx, nc, st); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: dependentsRecheck}, nil
	}
	r.restarts.Delete(nc.UID)
	r.budgets.Delete(nc.UID)
	if err := r.deleteRackBinding(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	patch := ctrlclient.MergeFromWithOptions(nc.DeepCopy(), ctrlclient.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(nc, naradv1.NaradClusterFinalizer)
	if err := r.Client.Patch(ctx, nc, patch); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// dependents names the Topics, FanoutLinks and NaradUsers of nc's namespace whose clusterRef is nc.
func (r *Reconciler) dependents(ctx context.Context, nc *naradv1.NaradCluster) ([]string, error) {
	var out []string
	var topics naradv1.TopicList
	if err := r.Client.List(ctx, &topics, ctrlclient.InNamespace(nc.Namespace)); err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	for _, t := range topics.Items {
		if t.Spec.ClusterRef.Name == nc.Name {
			out = append(out, "Topic "+t.Name)
		}
	}
	var links naradv1.FanoutLinkList
	if err := r.Client.List(ctx, &links, ctrlclient.InNamespace(nc.Namespace)); err != nil {
		return nil, fmt.Errorf("list fanoutlinks: %w", err)
	}
	for _, l := range links.Items {
		if l.Spec.ClusterRef.Name == nc.Name {
			out = append(out, "FanoutLink "+l.Name)
		}
	}
	var users naradv1.NaradUserList
	if err := r.Client.List(ctx, &users, ctrlclient.InNamespace(nc.Namespace)); err != nil {
		return nil, fmt.Errorf("list naradusers: %w", err)
	}
	for _, u := range users.Items {
		if u.Spec.ClusterRef.Name == nc.Name {
			out = append(out, "NaradUser "+u.Name)
		}
	}
	return out, nil
}

// summarize joins at most n names, counting the rest.
func summarize(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
