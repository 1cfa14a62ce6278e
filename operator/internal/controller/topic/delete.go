package topic

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
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
	var nc naradv1.NaradCluster
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.ClusterRef.Name}, &nc)
	if apierrors.IsNotFound(err) {
		r.event(t, "Warning", "ClusterGone", "Delete", "NaradCluster %q is gone; nothing to delete", t.Spec.ClusterRef.Name)
		return ctrl.Result{}, r.release(ctx, t)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read NaradCluster: %w", err)
	}
	_, cl, _, msg := clusterref.Connect(ctx, r.Client, r.Brokers, t.Namespace, t.Spec.ClusterRef.Name)
	if cl == nil {
		if !nc.DeletionTimestamp.IsZero() {
			r.event(t, "Warning", "ClusterGone", "Delete", "NaradCluster %q is being deleted and no broker answers; releasing", nc.Name)
			return ctrl.Result{}, r.release(ctx, t)
		}
		r.event(t, "Warning", "DeleteFailed", "Delete", "cannot delete broker topic %q yet: %s", name, msg)
		return ctrl.Result{RequeueAfter: deleteRetry(t)}, nil
	}
	if err := cl.DeleteTopic(ctx, name); err != nil && !client.IsStatus(err, 404) {
		r.event(t, "Warning", "DeleteFailed", "Delete", "delete broker topic %q: %v", name, err)
		return ctrl.Result{RequeueAfter: deleteRetry(t)}, nil
	}
	r.event(t, "Normal", "Deleted", "Delete", "deleted broker topic %q", name)
	return ctrl.Result{}, r.release(ctx, t)
}

// release removes the Topic finalizer.
func (r *Reconciler) release(ctx context.Context, t *naradv1.Topic) error {
	patch := ctrlclient.MergeFrom(t.DeepCopy())
	controllerutil.RemoveFinalizer(t, naradv1.TopicFinalizer)
	if err := r.Client.Patch(ctx, t, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// deleteRetry backs off a failing deletion by the time it has been pending.
func deleteRetry(t *naradv1.Topic) time.Duration {
	return min(max(time.Since(t.DeletionTimestamp.Time), clusterref.MinRetry), clusterref.MaxRetry)
}
