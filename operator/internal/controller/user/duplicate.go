package user

import (
	"context"
	"fmt"

	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
)

// sameUser lists the other NaradUsers of u's namespace and cluster that name the same broker
// user and are not being deleted. Two objects for one broker user would take turns setting
// its password and grants; the oldest one keeps it (see first).
func (r *Reconciler) sameUser(ctx context.Context, u *naradv1.NaradUser) ([]naradv1.NaradUser, error) {
	var list naradv1.NaradUserList
	if err := r.Client.List(ctx, &list, ctrlclient.InNamespace(u.Namespace),
		ctrlclient.MatchingFields{clusterRefIndex: u.Spec.ClusterRef.Name}); err != nil {
		return nil, fmt.Errorf("list naradusers: %w", err)
	}
	var out []naradv1.NaradUser
	for _, o := range list.Items {
		if o.UID != u.UID && o.DeletionTimestamp.IsZero() && o.BrokerUsername() == u.BrokerUsername() {
			out = append(out, o)
		}
	}
	return out, nil
}

// first returns the NaradUser among others that is older than u (created earlier, or at the
// same second with a smaller name), nil when u is the oldest.
func first(u *naradv1.NaradUser, others []naradv1.NaradUser) *naradv1.NaradUser {
	var best *naradv1.NaradUser
	for i := range others {
		o := &others[i]
		if older(o, u) && (best == nil || older(o, best)) {
			best = o
		}
	}
	return best
}

func older(a, b *naradv1.NaradUser) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}
