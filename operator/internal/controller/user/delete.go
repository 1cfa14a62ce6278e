package user

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/controller/clusterref"
)

// finalize deletes the broker user of a NaradUser being deleted and then releases it. The
// generated Secret goes with the object (owner reference). It never hangs on what cannot
// come back (docs/kubernetes.md#users):
//   - a missing NaradCluster, or one being deleted with no broker left, releases it with event
//     ClusterGone: the user went with the brokers;
//   - a user already gone from the brokers (404) releases it;
//   - another NaradUser for the same broker user releases it without deleting the user;
//   - a delete the brokers refuse as it stands (another 4xx) releases it with event
//     DeleteRefused, since retrying cannot change the answer.
//
// Brokers that exist but do not answer hold it, retried with a backoff of up to 5 minutes.
func (r *Reconciler) finalize(ctx context.Context, u *naradv1.NaradUser) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(u, naradv1.NaradUserFinalizer) {
		return ctrl.Result{}, nil
	}
	name := u.BrokerUsername()
	others, err := r.sameUser(ctx, u)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(others) > 0 {
		r.event(u, "Normal", "UserKept", "Delete", "NaradUser %q also manages broker user %q; releasing without deleting it", others[0].Name, name)
		return ctrl.Result{}, r.release(ctx, u)
	}
	cu, err := clusterref.ForCleanup(ctx, r.Client, r.Brokers, u.Namespace, u.Spec.ClusterRef.Name)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case cu.Gone:
		r.event(u, "Warning", "ClusterGone", "Delete", "%s; releasing without deleting broker user %q", cu.Why, name)
		return ctrl.Result{}, r.release(ctx, u)
	case cu.Client == nil:
		r.event(u, "Warning", "DeleteFailed", "Delete", "cannot delete broker user %q yet: %s", name, cu.Why)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(u)}, nil
	}
	err = cu.Client.DeleteUser(ctx, name)
	switch {
	case err == nil:
		r.event(u, "Normal", "Deleted", "Delete", "deleted broker user %q", name)
	case client.IsStatus(err, 404):
		r.event(u, "Normal", "Deleted", "Delete", "broker user %q was already gone", name)
	case isRejection(err):
		r.event(u, "Warning", "DeleteRefused", "Delete", "the brokers refused to delete user %q (%v); releasing the object", name, err)
	default:
		r.event(u, "Warning", "DeleteFailed", "Delete", "delete broker user %q: %v", name, err)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(u)}, nil
	}
	return ctrl.Result{}, r.release(ctx, u)
}

// release removes the NaradUser finalizer.
func (r *Reconciler) release(ctx context.Context, u *naradv1.NaradUser) error {
	return clusterref.Release(ctx, r.Client, u, naradv1.NaradUserFinalizer)
}
