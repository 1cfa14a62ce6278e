package fanoutlink

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/controller/clusterref"
)

// finalize detaches the link of a FanoutLink being deleted, showing state Detaching meanwhile,
// and then releases the object. Only the link the spec describes is detached: a child held by
// the parent with another delay is someone else's link and is left alone. A missing
// NaradCluster, or one being deleted with no broker left, releases the object with event
// ClusterGone.
func (r *Reconciler) finalize(ctx context.Context, fl *naradv1.FanoutLink) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fl, naradv1.FanoutLinkFinalizer) {
		return ctrl.Result{}, nil
	}
	if fl.Status.State != naradv1.FanoutLinkDetaching {
		fl.Status.State = naradv1.FanoutLinkDetaching
		if err := r.Client.Status().Update(ctx, fl); err != nil {
			return ctrl.Result{}, fmt.Errorf("write status: %w", err)
		}
	}
	cu, err := clusterref.ForCleanup(ctx, r.Client, r.Brokers, fl.Namespace, fl.Spec.ClusterRef.Name)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case cu.Gone:
		r.event(fl, "Warning", "ClusterGone", "Detach", "%s; releasing without detaching", cu.Why)
		return ctrl.Result{}, r.release(ctx, fl)
	case cu.Client == nil:
		r.event(fl, "Warning", "DetachFailed", "Detach", "cannot detach yet: %s", cu.Why)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(fl)}, nil
	}
	cl := cu.Client
	if fl.Spec.Remote != nil {
		return r.detachRemote(ctx, fl, cl)
	}
	child := fl.Spec.Child
	return r.detach(ctx, fl, cl, child, func(kids *client.ChildList) *client.ChildLink { return findChild(kids, child) },
		fmt.Sprintf("%q", child))
}

// detach removes the link called name (a child topic, or a remote link's id) from the parent
// when the brokers' listing still shows it with the spec's delay, and then releases fl. A link
// with another delay is someone else's and is left alone; a failure is retried with backoff.
func (r *Reconciler) detach(ctx context.Context, fl *naradv1.FanoutLink, cl *client.Client, name string,
	find func(*client.ChildList) *client.ChildLink, what string) (ctrl.Result, error) {
	parent := fl.Spec.Parent
	kids, err := cl.Children(ctx, parent)
	switch {
	case client.IsStatus(err, 404):
		return ctrl.Result{}, r.release(ctx, fl) // no parent, no link
	case err != nil:
		r.event(fl, "Warning", "DetachFailed", "Detach", "list children of %q: %v", parent, err)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(fl)}, nil
	}
	if l := find(kids); l == nil || l.DelayMs != fl.Spec.DelayMs {
		return ctrl.Result{}, r.release(ctx, fl)
	}
	if err := cl.Detach(ctx, parent, name); err != nil && !client.IsStatus(err, 404) {
		r.event(fl, "Warning", "DetachFailed", "Detach", "detach %s → %s: %v", parent, name, err)
		return ctrl.Result{RequeueAfter: clusterref.DeleteRetry(fl)}, nil
	}
	r.event(fl, "Normal", "Detached", "Detach", "detached %s from %q", what, parent)
	return ctrl.Result{}, r.release(ctx, fl)
}

// release removes the FanoutLink finalizer.
func (r *Reconciler) release(ctx context.Context, fl *naradv1.FanoutLink) error {
	return clusterref.Release(ctx, r.Client, fl, naradv1.FanoutLinkFinalizer)
}
