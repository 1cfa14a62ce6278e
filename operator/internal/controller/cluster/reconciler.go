// Package cluster reconciles NaradCluster objects: the StatefulSet of brokers and everything it
// needs (Services, config, secrets, PDB, monitoring, TLS), rolling updates, scale-up and the
// operator-driven scale-down through the brokers' decommission API, and the cluster's status.
package cluster

import (
	"context"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/naming"
)

// Reconciler reconciles one NaradCluster at a time.
type Reconciler struct {
	Client   ctrlclient.Client
	Scheme   *runtime.Scheme
	Brokers  *brokers.Connector
	Recorder events.EventRecorder
	// Image is the broker image of clusters whose spec.image is empty.
	Image string
	// RackImage is the image of the rack init container (the operator's own, whose manager
	// binary has the `rack` subcommand); empty: the broker pods get no rack.
	RackImage string
	// OperatorVersion is the release the broker version-skew policy is judged against
	// (release.Version when empty).
	OperatorVersion string
	// RackClusterRole is the ClusterRole (get nodes) the rack init container's ServiceAccount
	// is bound to, installed with the operator; empty means DefaultRackClusterRole.
	RackClusterRole string
	// StatusInterval is how often a settled cluster's status is refreshed from the brokers;
	// while something is in progress the reconciler requeues sooner.
	StatusInterval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// restarts maps a cluster's UID to the UID of the pod the rolling restart deleted last,
	// until the informer cache shows that pod going (see inflightRestart).
	restarts sync.Map
	// budgets maps a cluster's UID to whether its PodDisruptionBudget was last closed
	// (maxUnavailable 0). It outlives a stale informer cache, which the DisruptionsBlocked
	// condition read back from the cluster's status does not (see reconcileDisruptions).
	budgets sync.Map
}

// SetupWithManager registers the controller: NaradClusters, the objects they own, their
// pods (Ready flips drive rolling restarts and status), the Secrets they reference, and the
// Topics, FanoutLinks and NaradUsers that hold a deleted cluster's finalizer.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("naradcluster").
		For(&naradv1.NaradCluster{}, builder.WithPredicates(clusterChanged())).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&corev1.ServiceAccount{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podCluster)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretClusters)).
		Watches(&naradv1.Topic{}, handler.EnqueueRequestsFromMapFunc(r.deletingCluster(func(o ctrlclient.Object) string {
			return o.(*naradv1.Topic).Spec.ClusterRef.Name
		}))).
		Watches(&naradv1.FanoutLink{}, handler.EnqueueRequestsFromMapFunc(r.deletingCluster(func(o ctrlclient.Object) string {
			return o.(*naradv1.FanoutLink).Spec.ClusterRef.Name
		}))).
		Watches(&naradv1.NaradUser{}, handler.EnqueueRequestsFromMapFunc(r.deletingCluster(func(o ctrlclient.Object) string {
			return o.(*naradv1.NaradUser).Spec.ClusterRef.Name
		}))).
		Complete(r)
}

// clusterChanged passes NaradCluster events that can change what the operator does: spec
// (generation), annotations (restart and scale-preview requests), labels, deletion and
// finalizers. Status-only updates, which the controller writes itself, are ignored; the
// periodic requeue refreshes the status.
func clusterChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
			len(o.GetFinalizers()) != len(n.GetFinalizers())
	}}
}

// podCluster maps a broker pod to its NaradCluster by the instance label.
func podCluster(_ context.Context, o ctrlclient.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[naming.LabelName] != naming.AppName || l[naming.LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[naming.LabelInstance]}}}
}

// secretClusters maps a Secret to the NaradClusters of its namespace whose pods mount it.
func (r *Reconciler) secretClusters(ctx context.Context, o ctrlclient.Object) []reconcile.Request {
	var list naradv1.NaradClusterList
	if err := r.Client.List(ctx, &list, ctrlclient.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		nc := &list.Items[i]
		for _, need := range secretNeeds(nc) {
			if need.name == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: nc.Namespace, Name: nc.Name}})
				break
			}
		}
	}
	return out
}

// deletingCluster maps a Topic or FanoutLink to the cluster it references, only while that
// cluster is being deleted (its finalizer waits for them).
func (r *Reconciler) deletingCluster(clusterOf func(ctrlclient.Object) string) handler.MapFunc {
	return func(ctx context.Context, o ctrlclient.Object) []reconcile.Request {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: clusterOf(o)}
		var nc naradv1.NaradCluster
		if key.Name == "" || r.Client.Get(ctx, key, &nc) != nil || nc.DeletionTimestamp == nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
}
