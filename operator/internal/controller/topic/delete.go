package topic

import (
	"context"
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/controller/clusterref"
)

// finalize runs the deletion policy of a Topic being deleted and then releases it. It never
// hangs on a cluster that is gone: a missing NaradCluster, or one being deleted with no broker
// left, releases the Topic with event ClusterGone (the broker topic went with the brokers).
func (r *Reconciler) finalize(ctx context.Context, t *naradv1.Topic) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(t, naradv1.TopicFinalizer) {
		return ctrl.Result{}, nil
	}
	name := t.Spec.Name
	if name == "" {
		name = t.Name
	}
	if t.Spec.DeletionPolicy == naradv1.DeletionPolicyRetain {
		r.event(t, "Normal", "Retained", "Delete", "deletionPolicy Retain: broker topic %q left in place", name)
		return ctrl.Result{}, r.release(ctx, t)
	}
	cu, err := clusterref.ForCleanup(ctx, r.Client, r.Brokers, t.Namespace, t.Spec.ClusterRef.Name)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case cu.Gone:
		r.event(t, "Warning", "ClusterGone", "Delete", "%s; releasing without deleting broker topic %q", cu.Why, name)
		return ctrl.Result{}, r.release(ctx, t)
	case cu.Client == nil:
		r.event(t, "Warning", "DeleteFailed", "Delete", "cannot delete broker topic %q yet: %s", name, cu.Why)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(t)}, nil
	}
	cl := cu.Client
	// Deleting the Topic object deletes the broker topic even when it is a parent: its
	// children become standalone and what they had not yet received is lost, which the
	// event says. The brokers refuse a parent's delete without this flag.
	d, err := cl.DeleteTopicWith(ctx, name, client.DeleteTopicOptions{DetachChildren: true})
	if err != nil && !client.IsStatus(err, 404) {
		r.event(t, "Warning", "DeleteFailed", "Delete", "delete broker topic %q: %v", name, err)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(t)}, nil
	}
	if d != nil && len(d.DetachedChildren) > 0 {
		r.event(t, "Warning", "ChildrenDetached", "Delete", "deleting broker topic %q detached %s", name, detachedSummary(d.DetachedChildren))
	}
	r.event(t, "Normal", "Deleted", "Delete", "deleted broker topic %q", name)
	return ctrl.Result{}, r.release(ctx, t)
}

// release removes the Topic finalizer.
func (r *Reconciler) release(ctx context.Context, t *naradv1.Topic) error {
	return clusterref.Release(ctx, r.Client, t, naradv1.TopicFinalizer)
}

// detachedSummary names each detached child with the messages it lost, bounded in length.
func detachedSummary(children []client.DetachedChild) string {
	parts := make([]string, 0, len(children))
	for i, c := range children {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(children)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d undelivered messages dropped)", c.Name, c.UndeliveredMessages))
	}
	return strings.Join(parts, ", ")
}
