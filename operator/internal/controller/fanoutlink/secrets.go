package fanoutlink

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// linksOfSecret maps a Secret to the remote FanoutLinks that read their credentials from it:
// those whose credentialsSecretRef names it, and those without one whose target NaradCluster
// (same namespace) keeps its admin password in it. A listing failure is logged and maps to
// nothing; the links' own retries still run.
func (r *Reconciler) linksOfSecret(ctx context.Context, o ctrlclient.Object) []ctrl.Request {
	key := ctrlclient.ObjectKeyFromObject(o)
	seen := map[types.NamespacedName]bool{}
	var byRef naradv1.FanoutLinkList
	if err := r.Client.List(ctx, &byRef, ctrlclient.MatchingFields{credentialsIndex: key.String()}); err != nil {
		log.FromContext(ctx).Error(err, "list fanoutlinks by credentials Secret", "secret", key)
		return nil
	}
	for i := range byRef.Items {
		seen[ctrlclient.ObjectKeyFromObject(&byRef.Items[i])] = true
	}
	var clusters naradv1.NaradClusterList
	if err := r.Client.List(ctx, &clusters, ctrlclient.InNamespace(key.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "list NaradClusters of a Secret's namespace", "secret", key)
		return nil
	}
	for i := range clusters.Items {
		nc := &clusters.Items[i]
		if naming.AdminSecret(nc) != key.Name {
			continue
		}
		var targeting naradv1.FanoutLinkList
		if err := r.Client.List(ctx, &targeting,
			ctrlclient.MatchingFields{targetRefIndex: ctrlclient.ObjectKeyFromObject(nc).String()}); err != nil {
			log.FromContext(ctx).Error(err, "list fanoutlinks targeting cluster", "cluster", nc.Name)
			return nil
		}
		for j := range targeting.Items {
			if fl := &targeting.Items[j]; fl.Spec.Remote.CredentialsSecretRef == nil && fl.Namespace == nc.Namespace {
				seen[ctrlclient.ObjectKeyFromObject(fl)] = true
			}
		}
	}
	reqs := make([]ctrl.Request, 0, len(seen))
	for _, k := range slices.SortedFunc(maps.Keys(seen), func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	}) {
		reqs = append(reqs, ctrl.Request{NamespacedName: k})
	}
	return reqs
}

// secretDataChanged passes Secret creations and deletions, and updates that change the data:
// a label or annotation change cannot change a link's credentials.
func secretDataChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Secret)
			n, ok2 := e.ObjectNew.(*corev1.Secret)
			if !ok1 || !ok2 {
				return false
			}
			return !maps.EqualFunc(o.Data, n.Data, func(a, b []byte) bool { return string(a) == string(b) })
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
