// Package fanoutlink reconciles FanoutLink objects with fan-out links through the admin API.
//
// The brokers' children listing of the parent (docs/internals/http-api.md §2.13) is the truth every pass
// starts from: a listed child with the spec's delay is the link (adopted if the operator did
// not make it), a missing one is attached (again), and a child held some other way is a
// refusal shown as state Failed with Degraded True. The parent and child Topic objects need
// not exist: applications may create the topics themselves. A remote link (spec.remote) is
// found in the same listing by its id; see remote.go.
package fanoutlink

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/controller/clusterref"
	"narad.dev/operator/internal/controller/pause"
)

// Reconciler reconciles one FanoutLink at a time.
type Reconciler struct {
	Client   ctrlclient.Client
	Scheme   *runtime.Scheme
	Brokers  *brokers.Connector
	Recorder events.EventRecorder
	// ResyncPeriod is how often an attached link's status is refreshed and the link re-checked.
	ResyncPeriod time.Duration
}

// Field indexes of FanoutLinks (see SetupWithManager): by spec.clusterRef.name, by the
// namespace/name of spec.remote.clusterRef, and by the namespace/name of the credentials
// Secret spec.remote.credentialsSecretRef names.
const (
	clusterRefIndex  = "fanoutlink-controller:spec.clusterRef.name"
	targetRefIndex   = "fanoutlink-controller:spec.remote.clusterRef"
	credentialsIndex = "fanoutlink-controller:spec.remote.credentialsSecretRef"
)

// indexes are the field indexes the controller lists FanoutLinks by, with their functions.
var indexes = []struct {
	field string
	fn    ctrlclient.IndexerFunc
}{
	{clusterRefIndex, func(o ctrlclient.Object) []string { return []string{o.(*naradv1.FanoutLink).Spec.ClusterRef.Name} }},
	{targetRefIndex, func(o ctrlclient.Object) []string {
		fl := o.(*naradv1.FanoutLink)
		if fl.Spec.Remote == nil || fl.Spec.Remote.ClusterRef == nil {
			return nil
		}
		return []string{targetKey(fl).String()}
	}},
	{credentialsIndex, func(o ctrlclient.Object) []string {
		fl := o.(*naradv1.FanoutLink)
		if fl.Spec.Remote == nil || fl.Spec.Remote.CredentialsSecretRef == nil {
			return nil
		}
		return []string{types.NamespacedName{Namespace: fl.Namespace, Name: fl.Spec.Remote.CredentialsSecretRef.Name}.String()}
	}},
}

// SetupWithManager registers the controller: FanoutLinks (creation, spec changes, deletion),
// the NaradClusters they reference (created, deleted, Ready flipped), so a link waiting on
// its cluster is retried as soon as the cluster comes, and the Secrets remote links take
// their credentials from, so a link waiting on a missing or wrong Secret is retried as soon
// as the Secret is fixed rather than at its next backoff retry.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	for _, ix := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &naradv1.FanoutLink{}, ix.field, ix.fn); err != nil {
			return fmt.Errorf("index fanoutlinks by %s: %w", ix.field, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fanoutlink").
		For(&naradv1.FanoutLink{}, builder.WithPredicates(predicate.Or[ctrlclient.Object](predicate.GenerationChangedPredicate{}, pause.Changed()))).
		Watches(&naradv1.NaradCluster{}, handler.EnqueueRequestsFromMapFunc(r.linksOfCluster),
			builder.WithPredicates(clusterref.AvailabilityChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.linksOfSecret),
			builder.WithPredicates(secretDataChanged())).
		Complete(r)
}

// linksOfCluster maps a NaradCluster to the FanoutLinks that reference it: as the cluster of
// their parent (same namespace) or as their remote target (any namespace).
func (r *Reconciler) linksOfCluster(ctx context.Context, o ctrlclient.Object) []ctrl.Request {
	var parents, targets naradv1.FanoutLinkList
	if err := r.Client.List(ctx, &parents, ctrlclient.InNamespace(o.GetNamespace()),
		ctrlclient.MatchingFields{clusterRefIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list fanoutlinks of cluster", "cluster", o.GetName())
		return nil
	}
	if err := r.Client.List(ctx, &targets,
		ctrlclient.MatchingFields{targetRefIndex: ctrlclient.ObjectKeyFromObject(o).String()}); err != nil {
		log.FromContext(ctx).Error(err, "list fanoutlinks targeting cluster", "cluster", o.GetName())
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(parents.Items)+len(targets.Items))
	for _, l := range append(parents.Items, targets.Items...) {
		reqs = append(reqs, ctrl.Request{NamespacedName: ctrlclient.ObjectKeyFromObject(&l)})
	}
	return reqs
}

// Reconcile attaches one FanoutLink's child to its parent on the brokers (or detaches it when
// the object is being deleted) and reports the link's state and lag.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fl naradv1.FanoutLink
	if err := r.Client.Get(ctx, req.NamespacedName, &fl); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if pause.Requested(&fl) {
		return r.paused(ctx, &fl)
	}
	if !fl.DeletionTimestamp.IsZero() {
		return clusterref.RequeueOnConflict(r.finalize(ctx, &fl))
	}
	before := fl.Status.DeepCopy()
	if _, flipped, _ := pause.Mark(&fl.Status.Conditions, &fl); flipped {
		r.event(&fl, "Normal", "ReconcileResumed", "Reconcile", "the %s annotation is gone: reconciling again", naradv1.PauseReconcileAnnotation)
	}
	st := newStatus(&fl)
	if err := r.sync(ctx, &fl, st); err != nil {
		return clusterref.RequeueOnConflict(ctrl.Result{}, err)
	}
	st.settle()
	// Attached: refresh the lag; Failed: the brokers refused, so retry slowly.
	return clusterref.Finish(ctx, r.Client, &fl, !equality.Semantic.DeepEqual(before, &fl.Status), st.waiting(),
		fl.Status.Conditions, r.ResyncPeriod)
}

// paused only records that fl is paused (docs/kubernetes.md "Pausing reconciliation"): no
// broker call, no finalizer work, no requeue; removing the annotation wakes the controller.
func (r *Reconciler) paused(ctx context.Context, fl *naradv1.FanoutLink) (ctrl.Result, error) {
	_, flipped, changed := pause.Mark(&fl.Status.Conditions, fl)
	if flipped {
		r.event(fl, "Normal", "ReconcilePaused", "Reconcile", "the %s annotation is \"true\": changing nothing until it is removed", naradv1.PauseReconcileAnnotation)
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	return clusterref.RequeueOnConflict(ctrl.Result{}, r.Client.Status().Update(ctx, fl))
}

// sync does one pass against the brokers and records the outcome in st. Only Kubernetes API
// failures are returned as errors.
func (r *Reconciler) sync(ctx context.Context, fl *naradv1.FanoutLink, st *status) error {
	_, cl, reason, msg := clusterref.Connect(ctx, r.Client, r.Brokers, fl.Namespace, fl.Spec.ClusterRef.Name)
	if cl == nil {
		st.unknown(reason, msg)
		return nil
	}
	// seed: finalizer before the first attach, so no link outlives its object
	if err := clusterref.AddFinalizer(ctx, r.Client, fl, naradv1.FanoutLinkFinalizer); err != nil {
		return err
	}
	if fl.Spec.Remote != nil {
		return r.linkRemote(ctx, fl, cl, st)
	}
	r.link(ctx, fl, cl, st)
	return nil
}

// event records an event on fl.
func (r *Reconciler) event(fl *naradv1.FanoutLink, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(fl, nil, typ, reason, action, note, args...)
	}
}
